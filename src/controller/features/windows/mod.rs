//! The Slurm reservation of a maintenance window, pure: a NodeSet whose rollout waits for a
//! window gets `slurmops-maint-<NodeSet>` on the workers that wait, from the window's start to its
//! end (`MAINT,IGNORE_JOBS`), so that Slurm starts no job there that would still run when the
//! window opens; it is deleted once the rollout is done (Slurm drops it itself at its end).
//! Where slurmrestd cannot make reservations (Slurm 24.11), the steps name the ConfigMap that
//! slurmctld's sidecar reads instead: one key per reservation, `START END NODES`.

use crate::cluster::window::Timing;
use crate::controller::decide::{Action, Progress};
use crate::slurm::{Reservation, ReservationRequest};

pub use crate::vocab::RESERVATION_PREFIX as PREFIX;

pub mod act;

pub fn name(node_set: &str) -> String {
    format!("{PREFIX}{node_set}")
}

/// The reservation steps for a NodeSet that stands at P, at timing T, given the reservations
/// (those in Slurm and those asked of the sidecar); SIDECAR: the ConfigMap to ask it through.
pub fn steps(
    p: &Progress,
    t: &Timing,
    existing: &[Reservation],
    sidecar: Option<&str>,
) -> Vec<Action> {
    let name = name(&p.node_set);
    let have = existing.iter().any(|r| r.name == name);
    let sidecar = sidecar.map(str::to_string);
    match (&p.window, t.next) {
        (Some(w), Some((start, end))) if !have && !w.workers.is_empty() => {
            let mut nodes = w.workers.clone();
            nodes.sort();
            let request = ReservationRequest {
                name,
                nodes,
                start,
                end,
            };
            vec![Action::Reserve { request, sidecar }]
        }
        (None, _) if have && p.done => vec![Action::Unreserve { name, sidecar }],
        _ => Vec::new(),
    }
}

/// A reservation as the sidecar's ConfigMap holds it: `START END NODES` (UNIX seconds, a comma
/// list).
pub fn entry(r: &ReservationRequest) -> String {
    format!("{} {} {}\n", r.start, r.end, r.nodes.join(","))
}

/// The reservations asked of the sidecar (the ConfigMap's DATA) that are not over at NOW; keys
/// and values that are not ours are skipped (the ConfigMap is read from the cluster).
pub fn asked(data: &std::collections::BTreeMap<String, String>, now: i64) -> Vec<Reservation> {
    data.iter()
        .filter(|(k, v)| k.starts_with(PREFIX) && v.len() <= 64 * 1024)
        .filter_map(|(k, v)| {
            let mut parts = v.split_whitespace();
            let start = parts.next()?.parse().ok()?;
            let end: i64 = parts.next()?.parse().ok()?;
            let nodes = parts.next()?.split(',').map(str::to_string).collect();
            (end > now).then(|| Reservation {
                name: k.clone(),
                nodes,
                start_time: Some(start),
                end_time: Some(end),
                flags: vec!["MAINT".into(), "IGNORE_JOBS".into()],
            })
        })
        .collect()
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
                zone: None,
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
        let s = steps(&progress(&["a-1", "a-0"], false), &t, &[], None);
        assert_eq!(
            s,
            vec![Action::Reserve {
                request: ReservationRequest {
                    name: "slurmops-maint-a".into(),
                    nodes: vec!["a-0".into(), "a-1".into()],
                    start: 100,
                    end: 160
                },
                sidecar: None,
            }]
        );
        // Made already: nothing more; in the window, still rolling: kept.
        assert!(steps(&progress(&["a-0"], false), &t, &[reservation()], None).is_empty());
        assert!(steps(&progress(&[], false), &t, &[reservation()], None).is_empty());
        // Done: deleted.
        assert_eq!(
            steps(&progress(&[], true), &t, &[reservation()], None),
            vec![Action::Unreserve {
                name: "slurmops-maint-a".into(),
                sidecar: None,
            }]
        );
    }

    #[test]
    fn the_sidecar_reads_back_what_it_was_asked_and_an_ended_or_foreign_entry_is_not_a_reservation()
    {
        let t = Timing {
            open: None,
            next: Some((100, 160)),
        };
        let s = steps(
            &progress(&["a-1", "a-0"], false),
            &t,
            &[],
            Some("c-maintenance"),
        );
        let [Action::Reserve { request, sidecar }] = s.as_slice() else {
            panic!("{s:?}")
        };
        assert_eq!(sidecar.as_deref(), Some("c-maintenance"));
        assert_eq!(entry(request), "100 160 a-0,a-1\n");
        let data = std::collections::BTreeMap::from([
            ("slurmops-maint-a".to_string(), entry(request)),
            ("slurmops-maint-old".to_string(), "10 50 o-0\n".to_string()),
            (
                "slurmops-maint-bad".to_string(),
                "soon later x\n".to_string(),
            ),
            ("other".to_string(), "100 160 x-0\n".to_string()),
        ]);
        let asked = asked(&data, 60);
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert_eq!(asked[0].name, "slurmops-maint-a");
        assert_eq!(asked[0].nodes, ["a-0", "a-1"]);
        assert_eq!(
            (asked[0].start_time, asked[0].end_time),
            (Some(100), Some(160))
        );
        // Asked already: not asked again; done: taken back through the ConfigMap.
        let again = steps(
            &progress(&["a-0"], false),
            &t,
            &asked,
            Some("c-maintenance"),
        );
        assert!(again.is_empty(), "{again:?}");
        assert_eq!(
            steps(&progress(&[], true), &t, &asked, Some("c-maintenance")),
            vec![Action::Unreserve {
                name: "slurmops-maint-a".into(),
                sidecar: Some("c-maintenance".into()),
            }]
        );
    }
}
