use super::*;
use crate::slurm::{Job, NodeState};

pub(crate) const NOW: i64 = 1_000_000;

/// A Slurm node with state FLAGS and drain REASON (set 100 s before NOW).
pub(crate) fn node(name: &str, flags: &[&str], reason: &str) -> Node {
    Node {
        name: name.into(),
        state: NodeState(flags.iter().map(|f| f.to_string()).collect()),
        reason: reason.into(),
        reason_changed_at: (!reason.is_empty()).then_some(NOW - 100),
        ..Node::default()
    }
}

pub(crate) fn job(id: u64, on: &str, end: i64) -> Job {
    Job {
        id,
        name: "train".into(),
        user: "alice".into(),
        account: "research".into(),
        state: "RUNNING".into(),
        partition: "all".into(),
        nodes: vec![on.into()],
        end_time: Some(end),
        start_time: None,
        state_reason: Default::default(),
        node_count: 1,
        exclusive: false,
        ..Job::default()
    }
}

fn worker(set: &str, i: u32, rev: &str) -> Worker {
    Worker {
        name: format!("{set}-{i}"),
        uid: format!("uid-{set}-{i}"),
        ordinal: Some(i),
        revision: rev.into(),
        ready: true,
        deleting: false,
        created: Some(NOW - 3600),
        host: None,
        checks: Default::default(),
    }
}

pub(crate) fn set(name: &str, replicas: u32, revs: &[&str]) -> SetView {
    SetView {
        name: name.into(),
        replicas,
        update_revision: Some("new".into()),
        managed: false,
        canary: None,
        current_revision: None,
        workers: revs
            .iter()
            .enumerate()
            .map(|(i, r)| worker(name, i as u32, r))
            .collect(),
    }
}

fn idle(names: &[&str]) -> Vec<Node> {
    names.iter().map(|n| node(n, &["IDLE"], "")).collect()
}

const OURS: &str = "slurmops: rollout";

fn drain(n: &str, reason: DrainReason) -> Action {
    Action::Drain {
        node: n.into(),
        reason,
    }
}

fn delete(n: &str, forced: bool) -> Action {
    Action::Delete {
        pod: n.into(),
        uid: format!("uid-{n}"),
        forced,
    }
}

#[test]
fn an_idle_worker_drains_first_within_max_unavailable_and_a_busy_one_waits() {
    let s = set("a", 3, &["old", "old", "old"]);
    let slurm = SlurmView::new(
        idle(&["a-1", "a-2"])
            .into_iter()
            .chain([node("a-0", &["ALLOCATED"], "")])
            .collect(),
        vec![job(7, "a-0", NOW + 600)],
    );
    let d = decide(&s, &Want::Replicas(3), &Policy::default(), &slurm, NOW);
    assert_eq!(d.actions, vec![drain("a-1", DrainReason::Rollout)]);
    assert_eq!(d.progress.in_flight, vec!["a-1"]);
    assert!(!d.progress.done);
    assert_eq!(d.hold_replicas, None);
}

#[test]
fn a_draining_worker_with_a_job_waits_names_the_job_and_holds_the_budget() {
    let s = set("a", 2, &["old", "old"]);
    let slurm = SlurmView::new(
        vec![
            node("a-0", &["MIXED", "DRAIN"], OURS),
            node("a-1", &["IDLE"], ""),
        ],
        vec![job(42, "a-0", NOW + 3600)],
    );
    let d = decide(&s, &Want::Replicas(2), &Policy::default(), &slurm, NOW);
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert_eq!(
        d.progress.waiting,
        vec![Waiting {
            node: "a-0".into(),
            why: "rollout".into(),
            jobs: vec![Holder {
                id: 42,
                user: "alice".into(),
                start: None,
                end: Some(NOW + 3600)
            }],
            since: Some(NOW - 100),
        }]
    );
    // With room for two, the idle one drains meanwhile: a busy worker never holds the others.
    let two = Policy {
        max_unavailable: 2,
        ..Policy::default()
    };
    let d = decide(&s, &Want::Replicas(2), &two, &slurm, NOW);
    assert_eq!(d.actions, vec![drain("a-1", DrainReason::Rollout)]);
}

#[test]
fn drained_outdated_workers_are_deleted_whoever_drained_them() {
    let s = set("a", 2, &["old", "old"]);
    let slurm = SlurmView::new(
        vec![
            node("a-0", &["IDLE", "DRAIN"], OURS),
            node("a-1", &["IDLE", "DRAIN"], "disk check by admin"),
        ],
        vec![],
    );
    let d = decide(&s, &Want::Replicas(2), &Policy::default(), &slurm, NOW);
    // The administrator's drain is left as it is (drain says so without touching it).
    assert_eq!(
        d.actions,
        vec![
            delete("a-0", false),
            drain("a-1", DrainReason::Rollout),
            delete("a-1", false)
        ]
    );
}

#[test]
fn a_reverted_change_resumes_our_drain_but_never_an_admins() {
    // The pods run the update revision again (the change was reverted before they went).
    let s = set("a", 3, &["new", "new", "new"]);
    let slurm = SlurmView::new(
        vec![
            node("a-0", &["IDLE"], ""),
            node("a-1", &["MIXED", "DRAIN"], OURS),
            node("a-2", &["IDLE", "DRAIN"], "slurmops: node n1 cordoned"),
        ],
        vec![job(5, "a-1", NOW + 60)],
    );
    let d = decide(&s, &Want::Replicas(3), &Policy::default(), &slurm, NOW);
    assert_eq!(d.actions, vec![Action::Resume { node: "a-1".into() }]);
    assert!(!d.progress.done);
    // Once resumed, the NodeSet is done (the cordon's drain is sync's business).
    let slurm = SlurmView::new(
        vec![
            node("a-0", &["IDLE"], ""),
            node("a-1", &["MIXED"], ""),
            node("a-2", &["IDLE", "DRAIN"], "slurmops: node n1 cordoned"),
        ],
        vec![],
    );
    let d = decide(&s, &Want::Replicas(3), &Policy::default(), &slurm, NOW);
    assert!(d.actions.is_empty());
    assert!(d.progress.done, "{:?}", d.progress);
    assert_eq!(d.progress.updated, 3);
}

#[test]
fn a_replaced_worker_is_resumed_only_once_its_slurmd_answers() {
    let s = set("a", 1, &["new"]);
    let drained = |extra: &[&str]| {
        let mut f = vec!["IDLE", "DRAIN"];
        f.extend(extra);
        SlurmView::new(vec![node("a-0", &f, OURS)], vec![])
    };
    let d = decide(
        &s,
        &Want::Replicas(1),
        &Policy::default(),
        &drained(&["NOT_RESPONDING"]),
        NOW,
    );
    assert!(d.actions.is_empty());
    assert!(!d.progress.done);
    let d = decide(
        &s,
        &Want::Replicas(1),
        &Policy::default(),
        &drained(&[]),
        NOW,
    );
    assert_eq!(d.actions, vec![Action::Resume { node: "a-0".into() }]);
}

#[test]
fn scale_in_drains_the_highest_ordinals_and_holds_replicas_until_they_are_drained() {
    let s = set("a", 4, &["new", "new", "new", "new"]);
    let busy = SlurmView::new(
        idle(&["a-0", "a-1", "a-2"])
            .into_iter()
            .chain([node("a-3", &["ALLOCATED"], "")])
            .collect(),
        vec![job(9, "a-3", NOW + 10)],
    );
    let d = decide(&s, &Want::Replicas(2), &Policy::default(), &busy, NOW);
    assert_eq!(
        d.actions,
        vec![
            drain("a-3", DrainReason::ScaleIn),
            drain("a-2", DrainReason::ScaleIn)
        ]
    );
    assert_eq!(d.hold_replicas, Some(4));
    assert_eq!(d.progress.leaving, vec!["a-3", "a-2"]);
    // a-2 drained, a-3 still runs its job: still held, nothing drained twice.
    let half = SlurmView::new(
        vec![
            node("a-0", &["IDLE"], ""),
            node("a-1", &["IDLE"], ""),
            node("a-2", &["IDLE", "DRAIN"], "slurmops: scale-in"),
            node("a-3", &["ALLOCATED", "DRAIN"], "slurmops: scale-in"),
        ],
        vec![job(9, "a-3", NOW + 10)],
    );
    let d = decide(&s, &Want::Replicas(2), &Policy::default(), &half, NOW);
    assert!(d.actions.is_empty());
    assert_eq!(d.hold_replicas, Some(4));
    assert_eq!(d.progress.waiting[0].jobs[0].id, 9);
    // Both drained: the StatefulSet may go down.
    let done = SlurmView::new(
        vec![
            node("a-0", &["IDLE"], ""),
            node("a-1", &["IDLE"], ""),
            node("a-2", &["IDLE", "DRAIN"], "slurmops: scale-in"),
            node("a-3", &["IDLE", "DRAIN"], "slurmops: scale-in"),
        ],
        vec![],
    );
    let d = decide(&s, &Want::Replicas(2), &Policy::default(), &done, NOW);
    assert_eq!(d.hold_replicas, None);
    assert!(!d.progress.done, "workers still to remove");
}

#[test]
fn a_removed_node_set_is_kept_until_every_worker_is_drained() {
    let s = set("gone", 2, &["new", "new"]);
    let slurm = SlurmView::new(
        vec![
            node("gone-0", &["IDLE", "DRAIN"], "slurmops: NodeSet removed"),
            node("gone-1", &["ALLOCATED"], ""),
        ],
        vec![job(3, "gone-1", NOW + 5)],
    );
    let d = decide(&s, &Want::Removed, &Policy::default(), &slurm, NOW);
    assert!(d.keep);
    assert_eq!(d.actions, vec![drain("gone-1", DrainReason::Removed)]);
    let slurm = SlurmView::new(
        vec![node(
            "gone-0",
            &["IDLE", "DRAIN"],
            "slurmops: NodeSet removed",
        )],
        vec![],
    );
    let d = decide(&s, &Want::Removed, &Policy::default(), &slurm, NOW);
    assert!(!d.keep, "gone-1 is unknown to Slurm: nothing runs there");
}

#[test]
fn a_drain_past_its_timeout_is_forced_only_with_the_force_policy() {
    let s = set("a", 1, &["old"]);
    let slurm = SlurmView::new(
        vec![node("a-0", &["ALLOCATED", "DRAIN"], OURS)],
        vec![job(1, "a-0", NOW + 99)],
    );
    let wait = Policy {
        drain_timeout: Some(50),
        ..Policy::default()
    };
    let d = decide(&s, &Want::Replicas(1), &wait, &slurm, NOW);
    assert!(d.actions.is_empty());
    let force = Policy {
        force: true,
        ..wait
    };
    let d = decide(&s, &Want::Replicas(1), &force, &slurm, NOW);
    assert_eq!(d.actions, vec![delete("a-0", true)]);
}

#[test]
fn workers_unknown_to_slurm_go_when_not_ready_or_past_the_grace() {
    let mut s = set("a", 3, &["old", "old", "old"]);
    s.workers[0].ready = false;
    s.workers[1].created = Some(NOW - 10);
    let d = decide(
        &s,
        &Want::Replicas(3),
        &Policy::default(),
        &SlurmView::default(),
        NOW,
    );
    assert_eq!(d.actions, vec![delete("a-0", false), delete("a-2", false)]);
}

#[test]
fn nothing_moves_before_the_statefulset_controller_saw_the_change() {
    let mut s = set("a", 2, &["old", "old"]);
    s.update_revision = None;
    let d = decide(
        &s,
        &Want::Replicas(2),
        &Policy::default(),
        &SlurmView::new(idle(&["a-0", "a-1"]), vec![]),
        NOW,
    );
    assert!(d.actions.is_empty());
    assert!(!d.progress.done);
}

#[test]
fn a_missing_or_starting_worker_uses_the_budget() {
    // Three replicas, one pod missing: no room for a drain with maxUnavailable 1.
    let s = set("a", 3, &["old", "old"]);
    let slurm = SlurmView::new(idle(&["a-0", "a-1"]), vec![]);
    let d = decide(&s, &Want::Replicas(3), &Policy::default(), &slurm, NOW);
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert!(!d.progress.done);
    let all = set("a", 2, &["new", "new"]);
    let d = decide(&all, &Want::Replicas(2), &Policy::default(), &slurm, NOW);
    assert!(d.progress.done);
}

#[test]
fn a_worker_unknown_as_a_node_but_held_by_a_job_is_not_replaced() {
    let mut s = set("a", 1, &["old"]);
    s.workers[0].ready = false;
    let slurm = SlurmView::new(vec![], vec![job(8, "a-0", NOW + 60)]);
    let d = decide(&s, &Want::Replicas(1), &Policy::default(), &slurm, NOW);
    assert!(d.actions.is_empty(), "{:?}", d.actions);
}

#[test]
fn outside_a_required_window_nothing_drains_and_outside_a_preferred_one_only_idle_workers_do() {
    let s = set("a", 3, &["old", "old", "old"]);
    let slurm = SlurmView::new(
        idle(&["a-1", "a-2"])
            .into_iter()
            .chain([node("a-0", &["ALLOCATED"], "")])
            .collect(),
        vec![job(7, "a-0", NOW + 600)],
    );
    let p = |window| Policy {
        max_unavailable: 3,
        window,
        ..Policy::default()
    };
    let d = decide(
        &s,
        &Want::Replicas(3),
        &p(WindowGate::Closed {
            idle_may_roll: false,
        }),
        &slurm,
        NOW,
    );
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    let held = d.progress.window.expect("held for a window").workers;
    assert_eq!(held, ["a-1", "a-2", "a-0"]);
    assert!(!d.progress.done);

    let d = decide(
        &s,
        &Want::Replicas(3),
        &p(WindowGate::Closed {
            idle_may_roll: true,
        }),
        &slurm,
        NOW,
    );
    assert_eq!(
        d.actions,
        vec![
            drain("a-1", DrainReason::Rollout),
            drain("a-2", DrainReason::Rollout)
        ]
    );
    assert_eq!(d.progress.window.expect("a-0 held").workers, ["a-0"]);

    // Inside the window: all three, within maxUnavailable.
    let d = decide(&s, &Want::Replicas(3), &p(WindowGate::Open), &slurm, NOW);
    assert_eq!(d.actions.len(), 3, "{:?}", d.actions);
    assert_eq!(d.progress.window, None);
}

#[test]
fn the_jobs_holding_a_node_are_indexed_once_and_match_a_scan() {
    let two = Job {
        nodes: vec!["w-0".into(), "w-1".into(), "w-1".into()],
        ..job(1, "w-0", NOW + 60)
    };
    let pending = Job {
        state: "PENDING".into(),
        ..job(2, "w-0", NOW + 60)
    };
    let view = SlurmView::new(
        vec![
            node("w-0", &["ALLOCATED"], ""),
            node("w-1", &["ALLOCATED"], ""),
        ],
        vec![two, pending, job(3, "w-1", NOW + 30)],
    );
    let ids = |n: &str| view.jobs_on(n).iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(ids("w-0"), [1], "a pending job holds no node");
    assert_eq!(
        ids("w-1"),
        [1, 3],
        "a node listed twice in a job is held once"
    );
    assert!(ids("w-2").is_empty());
    assert!(view.busy("w-1") && !view.busy("w-2"));
    // The index answers as a scan of every job would.
    for n in ["w-0", "w-1", "w-2"] {
        let scan: Vec<u64> = view
            .jobs()
            .iter()
            .filter(|j| j.holds_nodes() && j.nodes.iter().any(|x| x == n))
            .map(|j| j.id)
            .collect();
        assert_eq!(ids(n), scan, "{n}");
    }
}
