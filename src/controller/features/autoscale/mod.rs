//! `autoscale`: a NodeSet's replicas from Slurm's own queue, with no KEDA or Prometheus. Jobs
//! pending in the NodeSet's partitions add the workers they ask for (a job's node count; one-node
//! jobs that share nodes `pendingJobsPerReplica` to a worker), each job counted once across the
//! autoscaled NodeSets of its partitions (lower Slurm weight first, then the most headroom), up
//! to `max`; workers idle for `scaleDownDelay`
//! go away (down to `min`), highest ordinals first because StatefulSets remove those, and only
//! after Slurm drained them. The replicas field belongs to its own field manager
//! (`slurmops-autoscale`), so apply never fights it.
//!
//! `decide` is pure (an observation in, a decision out); `run` observes and acts.

pub mod act;
pub mod run;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cluster::types::{Autoscale, ClusterFile};
use crate::slurm::Job;

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
    /// Workers the pending jobs ask of this NodeSet (their share of `demand`).
    pub pending: u32,
    /// Workers by ordinal (index = ordinal), `replicas` long; for a NodeSet whose pods slurmops
    /// makes, its pods by ordinal.
    pub workers: Vec<(String, WorkerState)>,
    /// Pods slurmops makes (`podManagement: slurmops`): a scale-in may take any idle worker.
    pub any_order: bool,
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
        let need = busy + o.pending;
        let to = need.clamp(rule.min, rule.max);
        if to > o.replicas {
            return Decision::ScaleOut {
                to,
                why: format!(
                    "pending jobs ask for {} worker(s), {busy} worker(s) busy",
                    o.pending
                ),
            };
        }
        if o.replicas <= rule.max {
            return Decision::Hold {
                why: format!(
                    "pending jobs ask for {} worker(s); {} worker(s) cover them or max {} reached",
                    o.pending, o.replicas, rule.max
                ),
            };
        }
    }
    scale_in(rule, o)
}

/// Remove the highest ordinals that are idle past the delay (or any above max, once drained); when
/// slurmops makes the pods, any worker idle past the delay, whatever its ordinal.
fn scale_in(rule: &Autoscale, o: &Observation) -> Decision {
    if o.any_order {
        return scale_in_any(rule, o);
    }
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

/// Scale-in over workers slurmops makes: every worker idle past the delay (or drained by an
/// earlier scale-in) leaves, highest ordinals first, down to `min`; busy ones stay.
fn scale_in_any(rule: &Autoscale, o: &Observation) -> Decision {
    let delay = Duration::from_secs(rule.scale_down_delay.as_secs());
    let mut to = o.replicas;
    let mut leaving = Vec::new();
    // Workers given back already (drained by us, the replicas lowered, the pod not deleted yet):
    // they leave whatever happens, and lowering the replicas for them again would keep an idle
    // worker in their place (seen in CI: 3 -> 2 for one, then 2 -> 1 for the same one).
    let mut gone = o.workers.len().saturating_sub(o.replicas as usize);
    for (name, state) in o.workers.iter().rev() {
        if gone > 0 && *state == WorkerState::DrainedByUs {
            gone -= 1;
            leaving.push(name.clone());
            continue;
        }
        if to <= rule.min {
            continue;
        }
        let removable = match state {
            WorkerState::Idle { for_ } => to > rule.max || *for_ >= delay,
            WorkerState::DrainedByUs => true,
            WorkerState::Busy | WorkerState::HeldByOther { .. } | WorkerState::Starting => false,
        };
        if removable {
            leaving.push(name.clone());
            to -= 1;
        }
    }
    if to == o.replicas {
        return Decision::Hold {
            why: format!(
                "no worker idle for {}s to give back (min {})",
                delay.as_secs(),
                rule.min
            ),
        };
    }
    leaving.reverse();
    Decision::ScaleIn {
        to,
        leaving,
        why: format!(
            "idle for {}s, no pending jobs (busy workers stay)",
            delay.as_secs()
        ),
    }
}

/// Why a pending job waits when more workers would not start it.
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

/// An autoscaled NodeSet as the split sees it.
#[derive(Debug, Clone)]
pub struct Capacity {
    /// Workers now (`spec.replicas`).
    pub replicas: u32,
    /// Workers running jobs now.
    pub busy: u32,
    pub max: u32,
    /// Slurm's scheduling weight (lower is used first).
    pub weight: u32,
    pub per_replica: u32,
}

/// The workers pending jobs ask of each autoscaled NodeSet in SETS. Each job counts once: its
/// nodes go first to NodeSets of its partitions with workers not yet spoken for (no scale-out
/// needed there), then to the lowest weight, then the most headroom left, never past `max`; one-node jobs that share nodes are packed
/// `pendingJobsPerReplica` to a worker. Jobs waiting on something workers cannot give (a hold,
/// a dependency, a begin time, a reservation) ask for nothing.
pub fn demand(
    c: &ClusterFile,
    jobs: &[std::sync::Arc<Job>],
    sets: &BTreeMap<String, Capacity>,
) -> BTreeMap<String, u32> {
    let mut whole: BTreeMap<String, u32> = BTreeMap::new();
    let mut shared: BTreeMap<String, u32> = BTreeMap::new();
    let mut pending: Vec<&Job> = jobs
        .iter()
        .map(|j| &**j)
        .filter(|j| j.has_state("PENDING"))
        .filter(|j| !NOT_FOR_NODES.contains(&j.state_reason.as_str()))
        .collect();
    pending.sort_by_key(|j| j.id);
    // The autoscaled NodeSets of each partition list, worked out once per distinct list (a queue
    // of 50,000 jobs names a handful), so that demand costs O(jobs), not jobs × NodeSets ×
    // partitions.
    let mut of_partitions: std::collections::HashMap<&str, Vec<&String>> = Default::default();
    for j in pending {
        let candidates = of_partitions
            .entry(j.partition.as_str())
            .or_insert_with(|| {
                let mut v: Vec<&String> = sets
                    .keys()
                    .filter(|ns| j.partition.split(',').any(|p| in_partition(c, p, ns)))
                    .collect();
                v.sort_by_key(|ns| (sets[*ns].weight, (*ns).clone()));
                v
            });
        if candidates.is_empty() {
            continue;
        }
        let one_shared = j.node_count <= 1 && !j.exclusive;
        for _ in 0..j.node_count.max(1) {
            let used = |ns: &String| {
                let cap = &sets[ns];
                let packed = shared
                    .get(ns)
                    .copied()
                    .unwrap_or(0)
                    .div_ceil(cap.per_replica.max(1));
                cap.busy + whole.get(ns).copied().unwrap_or(0) + packed
            };
            let pick = candidates
                .iter()
                .filter(|ns| used(ns) < sets[**ns].max.max(sets[**ns].replicas))
                .min_by_key(|ns| {
                    let cap = &sets[**ns];
                    let spare = used(ns) < cap.replicas;
                    (
                        !spare,
                        cap.weight,
                        std::cmp::Reverse(cap.max.saturating_sub(used(ns))),
                    )
                });
            let Some(ns) = pick else { break };
            let into = if one_shared { &mut shared } else { &mut whole };
            *into.entry((*ns).clone()).or_default() += 1;
        }
    }
    sets.iter()
        .map(|(ns, cap)| {
            let packed = shared
                .get(ns)
                .copied()
                .unwrap_or(0)
                .div_ceil(cap.per_replica.max(1));
            (ns.clone(), whole.get(ns).copied().unwrap_or(0) + packed)
        })
        .collect()
}

fn in_partition(c: &ClusterFile, partition: &str, node_set: &str) -> bool {
    c.spec
        .partitions
        .iter()
        .any(|p| p.name == partition && p.node_sets.iter().any(|n| n == node_set || n == "ALL"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::values::Duration as Dur;

    fn rule(min: u32, max: u32) -> Autoscale {
        Autoscale {
            min,
            max,
            pending_jobs_per_replica: 1,
            scale_down_delay: Dur::from_secs(60),
        }
    }

    fn obs(pending: u32, states: Vec<WorkerState>) -> Observation {
        Observation {
            any_order: false,
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

    #[test]
    fn a_worker_given_back_already_is_not_counted_again_and_the_idle_one_below_leaves_too() {
        // Pods slurmops makes: 3 workers, the middle one drained by autoscale and its replicas
        // lowered to 2 (its pod not deleted yet), the highest busy, the lowest idle long enough.
        let mut o = obs(
            0,
            vec![idle(60), WorkerState::DrainedByUs, WorkerState::Busy],
        );
        o.any_order = true;
        o.replicas = 2;
        assert_eq!(
            decide(&rule(1, 3), &o),
            Decision::ScaleIn {
                to: 1,
                leaving: vec!["w-0".into(), "w-1".into()],
                why: "idle for 60s, no pending jobs (busy workers stay)".into(),
            }
        );
        // The lowest not idle long enough yet: nothing to change, the given-back one is gone
        // already (no second lowering for it).
        o.workers[0].1 = idle(1);
        assert!(matches!(decide(&rule(1, 3), &o), Decision::Hold { .. }));
        // At min, the idle one stays.
        o.workers[0].1 = idle(60);
        assert!(matches!(decide(&rule(2, 3), &o), Decision::Hold { .. }));
    }

    fn two_sets() -> ClusterFile {
        crate::cluster::load(
            "c.yaml",
            r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {name: c, namespace: n}
spec:
  slurmVersion: "24.11"
  auth:
    slurmKey: {name: k, key: slurm.key}
    jwtKey: {name: j, key: jwt_hs256.key}
  nodeSets:
    - {name: a, replicas: 1, cpu: "1", memory: 1Gi, weight: 1, autoscale: {min: 0, max: 4}}
    - {name: b, replicas: 1, cpu: "1", memory: 1Gi, weight: 5, autoscale: {min: 0, max: 4}}
  partitions:
    - {name: p, nodeSets: [a, b], default: true}
"#,
        )
        .unwrap()
    }

    fn pending(id: u64, nodes: u32, exclusive: bool, reason: &str) -> std::sync::Arc<Job> {
        std::sync::Arc::new(Job {
            id,
            name: "j".into(),
            user: "u".into(),
            account: "acc".into(),
            state: "PENDING".into(),
            partition: "p".into(),
            nodes: vec![],
            end_time: None,
            start_time: None,
            state_reason: reason.into(),
            node_count: nodes,
            exclusive,
            ..Job::default()
        })
    }

    fn caps(busy_a: u32, per: u32) -> BTreeMap<String, Capacity> {
        let cap = |busy, weight| Capacity {
            replicas: busy,
            busy,
            max: 4,
            weight,
            per_replica: per,
        };
        BTreeMap::from([
            ("a".to_string(), cap(busy_a, 1)),
            ("b".to_string(), cap(0, 5)),
        ])
    }

    #[test]
    fn a_multi_node_job_is_counted_once_across_the_node_sets_of_its_partition() {
        let c = two_sets();
        // A 3-node job: the NodeSets' sum grows by 3, not 3 each; lower weight fills first.
        let d = demand(&c, &[pending(1, 3, false, "Resources")], &caps(0, 1));
        assert_eq!(d.values().sum::<u32>(), 3, "{d:?}");
        assert_eq!((d["a"], d["b"]), (3, 0));
        // a has room for one more: the rest goes to b, and max holds.
        let d = demand(&c, &[pending(1, 3, false, "Resources")], &caps(3, 1));
        assert_eq!((d["a"], d["b"]), (1, 2));
        let d = demand(&c, &[pending(1, 20, false, "Resources")], &caps(0, 1));
        assert_eq!((d["a"], d["b"]), (4, 4), "never past max");
    }

    #[test]
    fn one_node_jobs_are_packed_and_exclusive_ones_and_held_ones_are_not() {
        let c = two_sets();
        let jobs = [
            pending(1, 1, false, "Resources"),
            pending(2, 1, false, "Priority"),
            pending(3, 1, false, "Resources"),
            pending(4, 1, true, "Resources"),
            pending(5, 2, false, "JobHeldUser"),
        ];
        let d = demand(&c, &jobs, &caps(0, 2));
        // Three shared one-node jobs two to a worker (2), the exclusive one alone (1).
        assert_eq!(d.values().sum::<u32>(), 3, "{d:?}");
    }

    #[test]
    fn idle_workers_take_a_job_before_any_node_set_grows() {
        let c = two_sets();
        let mut sets = caps(1, 1);
        // b has two idle workers: a 3-node job takes them, and one more from a (lower weight).
        sets.get_mut("b").unwrap().replicas = 2;
        let d = demand(&c, &[pending(1, 3, false, "Resources")], &sets);
        assert_eq!((d["a"], d["b"]), (1, 2), "{d:?}");
    }
}
