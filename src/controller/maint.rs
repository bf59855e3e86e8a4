//! The Slurm reservation of a maintenance window, pure: a NodeSet whose rollout waits for a
//! window gets `slurmops-maint-<NodeSet>` on the workers that wait, from the window's start to its
//! end (`MAINT,IGNORE_JOBS`), so that Slurm starts no job there that would still run when the
//! window opens; it is deleted once the rollout is done (Slurm drops it itself at its end).

use super::decide::{Action, Progress};
use crate::slurm::{Reservation, ReservationRequest};
use crate::spec::window::Timing;

pub const PREFIX: &str = "slurmops-maint-";

pub fn name(node_set: &str) -> String {
    format!("{PREFIX}{node_set}")
}

/// The reservation steps for a NodeSet that stands at P, at timing T, given the reservations.
pub fn steps(p: &Progress, t: &Timing, existing: &[Reservation]) -> Vec<Action> {
    let name = name(&p.node_set);
    let have = existing.iter().any(|r| r.name == name);
    match (&p.window, t.next) {
        (Some(w), Some((start, end))) if !have && !w.workers.is_empty() => {
            let mut nodes = w.workers.clone();
            nodes.sort();
            vec![Action::Reserve {
                request: ReservationRequest {
                    name,
                    nodes,
                    start,
                    end,
                },
            }]
        }
        (None, _) if have && p.done => vec![Action::Unreserve { name }],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::decide::WindowWait;

    fn progress(held: &[&str], done: bool) -> Progress {
        Progress {
            node_set: "a".into(),
            done,
            window: (!held.is_empty()).then(|| WindowWait {
                workers: held.iter().map(|s| s.to_string()).collect(),
                opens: Some(100),
                closes: Some(160),
                reservation: None,
            }),
            ..Progress::default()
        }
    }

    fn reservation() -> Reservation {
        Reservation {
            name: "slurmops-maint-a".into(),
            nodes: vec!["a-0".into()],
            start_time: Some(100),
            end_time: Some(160),
            flags: vec![],
        }
    }

    #[test]
    fn a_waiting_rollout_reserves_its_workers_for_the_next_window_and_a_done_one_gives_it_back() {
        let t = Timing {
            open: None,
            next: Some((100, 160)),
        };
        let s = steps(&progress(&["a-1", "a-0"], false), &t, &[]);
        assert_eq!(
            s,
            vec![Action::Reserve {
                request: ReservationRequest {
                    name: "slurmops-maint-a".into(),
                    nodes: vec!["a-0".into(), "a-1".into()],
                    start: 100,
                    end: 160
                }
            }]
        );
        // Made already: nothing more; in the window, still rolling: kept.
        assert!(steps(&progress(&["a-0"], false), &t, &[reservation()]).is_empty());
        assert!(steps(&progress(&[], false), &t, &[reservation()]).is_empty());
        // Done: deleted.
        assert_eq!(
            steps(&progress(&[], true), &t, &[reservation()]),
            vec![Action::Unreserve {
                name: "slurmops-maint-a".into()
            }]
        );
    }
}
