//! `autoscale`: a NodeSet's replicas from Slurm's own queue, with no KEDA or Prometheus. Jobs
//! pending in the NodeSet's partitions add workers (up to `max`); workers idle for `scaleDownDelay`
//! go away (down to `min`), highest ordinals first because StatefulSets remove those, and only
//! after Slurm drained them. The replicas field belongs to its own field manager
//! (`slurmops-autoscale`), so apply never fights it.
//!
//! `decide` is pure (an observation in, a decision out); `run` observes and acts.

pub mod run;

use std::time::Duration;

use crate::slurm::Job;
use crate::spec::types::{Autoscale, ClusterFile};

/// A worker as the autoscaler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerState {
    /// Running or completing jobs.
    Busy,
    /// Registered, nothing running, no job since this long.
    Idle { for_: Duration },
    /// Drained by slurmops for a scale-in that did not finish: safe to remove.
    DrainedByUs,
    /// Drained for another reason (an administrator, a rollout): left alone, so scale-in stops
    /// there.
    HeldByOther { reason: String },
    /// Pod missing or not Ready, or its node not registered yet.
    Starting,
}

#[derive(Debug, Clone)]
pub struct Observation {
    /// `spec.replicas` of the StatefulSet.
    pub replicas: u32,
    /// Pending jobs more workers could start (not held, not waiting on a dependency or time).
    pub pending: usize,
    /// Workers by ordinal (index = ordinal), `replicas` long.
    pub workers: Vec<(String, WorkerState)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Hold {
        why: String,
    },
    ScaleOut {
        to: u32,
        why: String,
    },
    /// Drain LEAVING (the highest ordinals), then lower replicas to TO.
    ScaleIn {
        to: u32,
        leaving: Vec<String>,
        why: String,
    },
}

/// What to do now.
pub fn decide(rule: &Autoscale, o: &Observation) -> Decision {
    let busy = o
        .workers
        .iter()
        .filter(|(_, s)| *s == WorkerState::Busy)
        .count() as u32;
    if o.replicas < rule.min {
        return Decision::ScaleOut {
            to: rule.min,
            why: format!("below min {}", rule.min),
        };
    }
    if o.pending > 0 {
        let per = rule.pending_jobs_per_replica.max(1) as usize;
        let need = busy + o.pending.div_ceil(per) as u32;
        let to = need.clamp(rule.min, rule.max);
        if to > o.replicas {
            return Decision::ScaleOut {
                to,
                why: format!("{} pending job(s), {busy} worker(s) busy", o.pending),
            };
        }
        if o.replicas <= rule.max {
            return Decision::Hold {
                why: format!(
                    "{} pending job(s); {} worker(s) cover them or max {} reached",
                    o.pending, o.replicas, rule.max
                ),
            };
        }
    }
    scale_in(rule, o)
}

/// Remove the highest ordinals that are idle past the delay (or any above max, once drained).
fn scale_in(rule: &Autoscale, o: &Observation) -> Decision {
    let delay = Duration::from_secs(rule.scale_down_delay.as_secs());
    let mut to = o.replicas;
    let mut stop = String::new();
    for (name, state) in o.workers.iter().rev() {
        if to <= rule.min {
            break;
        }
        let above_max = to > rule.max;
        let removable = match state {
            WorkerState::Idle { for_ } => above_max || *for_ >= delay,
            WorkerState::DrainedByUs => true,
            WorkerState::Busy => above_max,
            WorkerState::HeldByOther { .. } | WorkerState::Starting => false,
        };
        if !removable {
            stop = match state {
                WorkerState::Busy => format!("{name} busy"),
                WorkerState::Idle { .. } => {
                    format!("{name}, idle for less than {}s", delay.as_secs())
                }
                WorkerState::HeldByOther { reason } => {
                    format!("{name} drained ({reason})")
                }
                _ => format!("{name} starting"),
            };
            break;
        }
        to -= 1;
    }
    if to == o.replicas {
        return Decision::Hold {
            why: if stop.is_empty() {
                format!("{} worker(s), at min {}", o.replicas, rule.min)
            } else {
                format!("no pending jobs; scale-in stops at {stop}")
            },
        };
    }
    let leaving = o.workers[to as usize..]
        .iter()
        .map(|(n, _)| n.clone())
        .collect();
    Decision::ScaleIn {
        to,
        leaving,
        why: if o.replicas > rule.max {
            format!("above max {}", rule.max)
        } else {
            format!("idle for {}s, no pending jobs", delay.as_secs())
        },
    }
}

/// Pending jobs that more workers of NODE_SET could start: pending in one of its partitions, and
/// not waiting on something else (a hold, a dependency, a begin time, a reservation).
pub fn pending_for(c: &ClusterFile, node_set: &str, jobs: &[Job]) -> usize {
    let parts: Vec<&str> = c
        .spec
        .partitions
        .iter()
        .filter(|p| p.node_sets.iter().any(|n| n == node_set || n == "ALL"))
        .map(|p| p.name.as_str())
        .collect();
    const NOT_FOR_NODES: &[&str] = &[
        "Dependency",
        "DependencyNeverSatisfied",
        "BeginTime",
        "JobHeldUser",
        "JobHeldAdmin",
        "Reservation",
        "PartitionDown",
        "PartitionInactive",
    ];
    jobs.iter()
        .filter(|j| j.has_state("PENDING"))
        .filter(|j| !NOT_FOR_NODES.contains(&j.state_reason.as_str()))
        .filter(|j| j.partition.split(',').any(|p| parts.contains(&p)))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::values::Duration as Dur;

    fn rule(min: u32, max: u32) -> Autoscale {
        Autoscale {
            min,
            max,
            pending_jobs_per_replica: 1,
            scale_down_delay: Dur::from_secs(60),
        }
    }

    fn obs(pending: usize, states: Vec<WorkerState>) -> Observation {
        Observation {
            replicas: states.len() as u32,
            pending,
            workers: states
                .into_iter()
                .enumerate()
                .map(|(i, s)| (format!("w-{i}"), s))
                .collect(),
        }
    }

    fn idle(s: u64) -> WorkerState {
        WorkerState::Idle {
            for_: Duration::from_secs(s),
        }
    }

    #[test]
    fn pending_jobs_add_workers_up_to_max_without_counting_twice() {
        use WorkerState::*;
        let d = decide(&rule(1, 3), &obs(2, vec![Busy]));
        assert!(matches!(d, Decision::ScaleOut { to: 3, .. }), "{d:?}");
        let d = decide(&rule(1, 3), &obs(5, vec![Busy]));
        assert!(matches!(d, Decision::ScaleOut { to: 3, .. }), "{d:?}");
        // Workers already coming up cover the pending jobs: no further scale-out.
        let d = decide(&rule(1, 3), &obs(2, vec![Busy, Starting, Starting]));
        assert!(matches!(d, Decision::Hold { .. }), "{d:?}");
    }

    #[test]
    fn idle_workers_leave_from_the_top_after_the_delay_and_never_below_min() {
        use WorkerState::*;
        let d = decide(
            &rule(1, 4),
            &obs(0, vec![Busy, idle(90), idle(30), idle(90)]),
        );
        assert_eq!(
            d,
            Decision::ScaleIn {
                to: 3,
                leaving: vec!["w-3".into()],
                why: "idle for 60s, no pending jobs".into()
            }
        );
        let d = decide(&rule(1, 4), &obs(0, vec![idle(90), idle(90), idle(90)]));
        assert!(matches!(d, Decision::ScaleIn { to: 1, .. }), "{d:?}");
        // A busy top ordinal blocks scale-in: StatefulSets only remove the highest.
        let d = decide(&rule(1, 4), &obs(0, vec![idle(90), idle(90), Busy]));
        assert!(
            matches!(&d, Decision::Hold { why } if why.contains("w-2 busy")),
            "{d:?}"
        );
    }

    #[test]
    fn someone_elses_drain_stops_scale_in_and_above_max_waits_for_drain() {
        use WorkerState::*;
        let held = HeldByOther {
            reason: "disk".into(),
        };
        let d = decide(&rule(0, 4), &obs(0, vec![idle(90), held, idle(90)]));
        assert!(matches!(d, Decision::ScaleIn { to: 2, .. }), "{d:?}");
        let d = decide(&rule(0, 1), &obs(0, vec![Busy, Busy]));
        assert!(matches!(d, Decision::ScaleIn { to: 1, .. }), "{d:?}");
        let d = decide(&rule(2, 4), &obs(0, vec![Busy]));
        assert!(matches!(d, Decision::ScaleOut { to: 2, .. }), "{d:?}");
    }
}
