//! Requeue decisions as the rollout makes them (`decide`), table-tested.

use crate::controller::decide::tests::{NOW, job, node, set};
use crate::controller::decide::*;
use crate::slurm::Job;

const OURS: &str = "slurmops: rollout";

/// `runningJobs: requeue`: a worker drained for the rollout requeues its jobs once it waited
/// `after`, only when every job on it is a batch job Slurm may requeue that the rule selects, and
/// only with the whole queue known; otherwise it waits (a job that may not be requeued is never
/// killed).
#[test]
fn a_rollout_requeues_a_drained_workers_jobs_only_when_every_one_may_be_requeued() {
    let s = set("a", 1, &["old"]);
    let may = |id: u64| Job {
        batch: true,
        requeue: true,
        qos: "normal".into(),
        start_time: Some(NOW - 7200),
        ..job(id, "a-0", NOW + 99)
    };
    let draining = || vec![node("a-0", &["ALLOCATED", "DRAIN"], OURS)];
    let rule = RequeueRule {
        after: 60,
        ..RequeueRule::default()
    };
    let requeue = Policy {
        requeue: Some(rule.clone()),
        ..Policy::default()
    };
    let requeued = |ids: &[u64]| Action::Requeue {
        node: "a-0".into(),
        jobs: ids
            .iter()
            .map(|id| Holder {
                id: *id,
                user: "alice".into(),
                start: Some(NOW - 7200),
                end: Some(NOW + 99),
            })
            .collect(),
    };
    // Drained 100 s ago, after 60 s: both jobs may be requeued.
    let slurm = SlurmView::new(draining(), vec![may(1), may(2)]);
    let d = decide(&s, &Want::Replicas(1), &requeue, &slurm, NOW);
    assert_eq!(d.actions, vec![requeued(&[1, 2])]);
    assert_eq!(
        d.progress.waiting.len(),
        1,
        "still waiting until Slurm requeued them"
    );
    assert_eq!(
        requeued_words(
            &[Holder {
                id: 1,
                user: "alice".into(),
                start: Some(NOW - 7200),
                end: None
            }],
            NOW
        ),
        "set DOWN: Slurm requeues job 1 (alice, ran 2h) (runningJobs: requeue)"
    );
    // Set DOWN already (Slurm requeued them; they may still name the node while they
    // complete): not asked again.
    let down = SlurmView::new(
        vec![node("a-0", &["DOWN", "DRAIN"], OURS)],
        vec![may(1), may(2)],
    );
    assert!(
        decide(&s, &Want::Replicas(1), &requeue, &down, NOW)
            .actions
            .iter()
            .all(|a| !matches!(a, Action::Requeue { .. }))
    );
    // The default policy waits.
    let d = decide(&s, &Want::Replicas(1), &Policy::default(), &slurm, NOW);
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    // Not drained for `after` yet.
    let later = Policy {
        requeue: Some(RequeueRule {
            after: 3600,
            ..rule.clone()
        }),
        ..Policy::default()
    };
    assert!(
        decide(&s, &Want::Replicas(1), &later, &slurm, NOW)
            .actions
            .is_empty()
    );
    // One job that may not be requeued (--no-requeue), not a batch job (salloc), or naming its
    // node (--nodelist: requeued, it may never start on the new worker of the same name): all
    // wait.
    for other in [
        Job {
            requeue: false,
            ..may(2)
        },
        Job {
            batch: false,
            ..may(2)
        },
        Job {
            pinned: true,
            ..may(2)
        },
    ] {
        let slurm = SlurmView::new(draining(), vec![may(1), other]);
        let d = decide(&s, &Want::Replicas(1), &requeue, &slurm, NOW);
        assert!(d.actions.is_empty(), "{:?}", d.actions);
    }
    // Selectors: partition, QOS, size.
    for (rule, selected) in [
        (
            RequeueRule {
                partitions: vec!["all".into()],
                ..rule.clone()
            },
            true,
        ),
        (
            RequeueRule {
                partitions: vec!["debug".into()],
                ..rule.clone()
            },
            false,
        ),
        (
            RequeueRule {
                qos: vec!["normal".into()],
                ..rule.clone()
            },
            true,
        ),
        (
            RequeueRule {
                qos: vec!["high".into()],
                ..rule.clone()
            },
            false,
        ),
        (
            RequeueRule {
                max_nodes: Some(1),
                ..rule.clone()
            },
            true,
        ),
        (
            RequeueRule {
                max_nodes: Some(0),
                ..rule.clone()
            },
            false,
        ),
    ] {
        let p = Policy {
            requeue: Some(rule.clone()),
            ..Policy::default()
        };
        let slurm = SlurmView::new(draining(), vec![may(1)]);
        let d = decide(&s, &Want::Replicas(1), &p, &slurm, NOW);
        assert_eq!(!d.actions.is_empty(), selected, "{rule:?}");
    }
    // The queue known only in part (a restart reading it job by job): a job not read yet may
    // not be requeued, so nothing.
    let mut partial = SlurmView::new(draining(), vec![may(1)]);
    partial.jobs_error = Some("read job by job".into());
    partial.pending_unread = Some(3);
    assert!(
        decide(&s, &Want::Replicas(1), &requeue, &partial, NOW)
            .actions
            .is_empty()
    );
    // An administrator's drain is never turned into a requeue.
    let theirs = SlurmView::new(
        vec![node("a-0", &["ALLOCATED", "DRAIN"], "disk replaced")],
        vec![may(1)],
    );
    assert!(
        decide(&s, &Want::Replicas(1), &requeue, &theirs, NOW)
            .actions
            .is_empty()
    );
}
