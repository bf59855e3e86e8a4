use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::{Input, decide};
use crate::slurm::{Node, NodeState};
use crate::vocab::{ANNOTATION_DRAIN, DrainReason, LABEL_BUSY};

const HOST: &str = "kube-1";

/// Worker pod NAME on HOST, Ready, its Slurm condition already saying `Idle` for an IDLE node
/// (so that only what a test changes makes a step).
fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"nodeName": HOST, "containers": []},
        "status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": super::super::CONDITION, "status": "True", "reason": "Idle", "message": "IDLE"},
        ]},
    }))
    .unwrap()
}

fn node(name: &str, states: &[&str], reason: &str) -> Node {
    Node {
        name: name.into(),
        state: NodeState(states.iter().map(|s| s.to_string()).collect()),
        reason: reason.into(),
        ..Node::default()
    }
}

struct Case {
    pods: Vec<Pod>,
    nodes: Vec<Node>,
    problems: Option<BTreeMap<String, DrainReason>>,
    checked: bool,
    overdue: Vec<&'static str>,
    remediate: bool,
    /// HOST's problem asks for requeue.
    requeue: bool,
    /// Slurm's jobs (None: not read).
    jobs: Option<Vec<crate::slurm::Job>>,
}

impl Case {
    fn new(pods: Vec<Pod>, nodes: Vec<Node>) -> Case {
        Case {
            pods,
            nodes,
            problems: Some(BTreeMap::new()),
            checked: false,
            overdue: vec![],
            remediate: false,
            requeue: false,
            jobs: None,
        }
    }

    /// The steps, as `plan --cluster` words them: `action target: detail`.
    fn steps(&self) -> Vec<String> {
        let sets = [("w", self.pods.iter().collect::<Vec<_>>())];
        let nodes: BTreeMap<String, Node> = self
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.clone()))
            .collect();
        let checked: BTreeSet<String> = self.checked.then(|| "w".to_string()).into_iter().collect();
        let overdue: BTreeSet<String> = self.overdue.iter().map(|s| s.to_string()).collect();
        let requeue: BTreeSet<String> =
            self.requeue.then(|| HOST.to_string()).into_iter().collect();
        let view = self
            .jobs
            .clone()
            .map(|jobs| crate::controller::decide::SlurmView::new(self.nodes.clone(), jobs));
        let remediate: BTreeMap<String, bool> = self
            .remediate
            .then(|| ("w".to_string(), true))
            .into_iter()
            .collect();
        decide(&Input {
            sets: &sets,
            nodes: &nodes,
            problems: self.problems.as_ref(),
            checked: &checked,
            overdue: &overdue,
            remediate: &remediate,
            requeue: &requeue,
            slurm: view.as_ref(),
            now: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        })
        .iter()
        .map(|(set, s)| {
            assert_eq!(set, "w");
            let (action, target, detail) = s.shown();
            format!("{action} {target}: {detail}")
        })
        .collect()
    }
}

fn cordoned() -> Option<BTreeMap<String, DrainReason>> {
    let node = HOST.to_string();
    Some([(HOST.to_string(), DrainReason::Cordoned { node })].into())
}

#[test]
fn a_steady_worker_needs_nothing_and_a_busy_one_is_labelled_with_its_condition() {
    assert!(
        Case::new(vec![pod("w-0")], vec![node("w-0", &["IDLE"], "")])
            .steps()
            .is_empty()
    );
    let busy = Case::new(vec![pod("w-0")], vec![node("w-0", &["ALLOCATED"], "")]);
    assert_eq!(
        busy.steps(),
        [
            "condition w-0: Slurm: Allocated",
            "label w-0: busy: jobs run there"
        ]
    );
    let mut labelled = pod("w-0");
    labelled.metadata.labels = Some([(LABEL_BUSY.to_string(), "true".to_string())].into());
    let idle = Case::new(vec![labelled], vec![node("w-0", &["IDLE"], "")]);
    assert_eq!(idle.steps(), ["label w-0: not busy any more"]);
}

#[test]
fn a_problem_of_the_kubernetes_node_drains_and_its_end_resumes_only_slurmops_drain() {
    let mut c = Case::new(vec![pod("w-0")], vec![node("w-0", &["IDLE"], "")]);
    c.problems = cordoned();
    assert_eq!(c.steps(), [format!("drain w-0: node {HOST} cordoned")]);
    // Drained already (by us or anyone): nothing more.
    c.nodes = vec![node("w-0", &["IDLE", "DRAIN"], "disk check by admin")];
    assert_eq!(c.steps(), ["condition w-0: Slurm: Drained"]);
    // The cordon lifted: slurmops' drain is resumed, the administrator's stays.
    c.problems = Some(BTreeMap::new());
    let ours = format!("slurmops: node {HOST} cordoned");
    c.nodes = vec![node("w-0", &["IDLE", "DRAIN"], &ours)];
    assert_eq!(
        c.steps(),
        [
            "condition w-0: Slurm: Drained",
            "resume w-0: its node's problem or its drain request cleared"
        ]
    );
    c.checked = true;
    assert_eq!(
        c.steps()[1],
        "hold w-0: its node's problem cleared: held until its active checks pass"
    );
    c.checked = false;
    c.nodes = vec![node("w-0", &["IDLE", "DRAIN"], "disk check by admin")];
    assert_eq!(c.steps(), ["condition w-0: Slurm: Drained"]);
    // The Nodes could not be read: a drain for a node problem is not resumed on a guess.
    c.problems = None;
    c.nodes = vec![node("w-0", &["IDLE", "DRAIN"], &ours)];
    assert_eq!(c.steps(), ["condition w-0: Slurm: Drained"]);
}

#[test]
fn a_drain_request_on_the_pod_drains_it_and_its_removal_resumes_it_even_with_nodes_unknown() {
    let mut asked = pod("w-0");
    asked.metadata.annotations =
        Some([(ANNOTATION_DRAIN.to_string(), "ticket 4711".into())].into());
    let mut c = Case::new(vec![asked], vec![node("w-0", &["IDLE"], "")]);
    c.problems = None;
    assert_eq!(c.steps(), ["drain w-0: drain requested: ticket 4711"]);
    c.pods = vec![pod("w-0")];
    c.nodes = vec![node(
        "w-0",
        &["IDLE", "DRAIN"],
        "slurmops: drain requested: ticket 4711",
    )];
    assert_eq!(
        c.steps(),
        [
            "condition w-0: Slurm: Drained",
            "resume w-0: its node's problem or its drain request cleared"
        ]
    );
    // The node's problem wins over the pod's request.
    let mut asked = pod("w-0");
    asked.metadata.annotations = Some([(ANNOTATION_DRAIN.to_string(), "x".into())].into());
    let mut c = Case::new(vec![asked], vec![node("w-0", &["IDLE"], "")]);
    c.problems = cordoned();
    assert_eq!(c.steps(), [format!("drain w-0: node {HOST} cordoned")]);
}

#[test]
fn one_worker_unknown_to_slurm_past_the_grace_is_replaced_per_node_set_and_pass() {
    let mut c = Case::new(vec![pod("w-0"), pod("w-1"), pod("w-2")], vec![]);
    c.overdue = vec!["w-0", "w-1"];
    let steps = c.steps();
    let replaced: Vec<&String> = steps.iter().filter(|s| s.starts_with("delete")).collect();
    assert_eq!(
        replaced,
        ["delete w-0: Ready but never registered in Slurm: replaced"]
    );
    // Unknown to Slurm, each says so on its pod.
    assert_eq!(
        steps
            .iter()
            .filter(|s| *s == "condition w-0: Slurm: NotRegistered")
            .count(),
        1
    );
}

/// Worker pod NAME made at second MADE.
fn made_at(name: &str, made: i64) -> Pod {
    let mut p = pod(name);
    p.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(made).unwrap(),
    ));
    p
}

/// Node NAME in STATES, drained with REASON at second AT.
fn drained_at(name: &str, states: &[&str], reason: &str, at: i64) -> Node {
    Node {
        reason_changed_at: Some(at),
        ..node(name, states, reason)
    }
}

#[test]
fn remediation_replaces_a_worker_once_no_job_runs_once_per_drain_and_only_where_its_cause_stays_behind()
 {
    let deletes = |c: &Case| -> Vec<String> {
        c.steps()
            .into_iter()
            .filter(|s| s.starts_with("delete"))
            .collect()
    };
    // A drain request on the worker's pod.
    let asked = || {
        let mut p = made_at("w-0", 1_000);
        p.metadata.annotations =
            Some([(ANNOTATION_DRAIN.to_string(), "ticket 4711".into())].into());
        p
    };
    let request = "slurmops: drain requested: ticket 4711";
    let mut c = Case::new(
        vec![asked()],
        vec![drained_at("w-0", &["IDLE", "DRAIN"], request, 2_000)],
    );
    // Without `remediation: replace`, a drained worker stays as it is.
    assert_eq!(deletes(&c), Vec::<String>::new());
    c.remediate = true;
    assert_eq!(
        deletes(&c),
        [
            "delete w-0: drained (drain requested: ticket 4711), no job left: replaced (remediation: replace)"
        ]
    );
    // The request gone with the pod it was on: the replacement is resumed, not replaced.
    c.pods = vec![made_at("w-0", 2_001)];
    assert_eq!(
        c.steps()[1..],
        ["resume w-0: its node's problem or its drain request cleared"]
    );
    // A request on its Kubernetes node (as NVSentinel sets Slinky's annotation): the new pod
    // could land there again, registered undrained, and be drained and replaced again, pass
    // after pass: replaced only once the node is cordoned too (the new pod lands elsewhere).
    let request = format!("slurmops: node {HOST}: drain requested: XID 79");
    let why = DrainReason::node_request(HOST.into(), "XID 79");
    c.problems = Some([(HOST.to_string(), why)].into());
    c.pods = vec![made_at("w-0", 1_000)];
    c.nodes = vec![drained_at("w-0", &["IDLE", "DRAIN"], &request, 2_000)];
    assert_eq!(deletes(&c), Vec::<String>::new());
    c.problems = cordoned();
    assert_eq!(
        deletes(&c),
        [format!(
            "delete w-0: drained (node {HOST}: drain requested: XID 79), no job left: replaced (remediation: replace)"
        )]
    );
    c.problems = Some(BTreeMap::new());
    c.pods = vec![asked()];
    let request = "slurmops: drain requested: ticket 4711";
    // A job still runs there (draining): never deleted.
    c.nodes = vec![drained_at("w-0", &["ALLOCATED", "DRAIN"], request, 2_000)];
    assert_eq!(deletes(&c), Vec::<String>::new());
    c.nodes = vec![drained_at(
        "w-0",
        &["IDLE", "DRAIN", "COMPLETING"],
        request,
        2_000,
    )];
    assert_eq!(deletes(&c), Vec::<String>::new());
    // A replacement made after the drain began (a Slurm node that kept its drain) is not
    // replaced again.
    let mut again = asked();
    again.metadata.creation_timestamp = made_at("w-0", 2_000).metadata.creation_timestamp;
    c.pods = vec![again];
    c.nodes = vec![drained_at("w-0", &["IDLE", "DRAIN"], request, 2_000)];
    assert_eq!(deletes(&c), Vec::<String>::new());
    // A cordon's drain counts; someone else's, a rollout's or a failed check's never, nor one
    // whose time Slurm does not give.
    c.pods = vec![made_at("w-0", 1_000)];
    let cordon = format!("slurmops: node {HOST} cordoned");
    c.problems = cordoned();
    c.nodes = vec![drained_at("w-0", &["IDLE", "DRAIN"], &cordon, 2_000)];
    assert_eq!(
        deletes(&c),
        [format!(
            "delete w-0: drained (node {HOST} cordoned), no job left: replaced (remediation: replace)"
        )]
    );
    c.pods = vec![asked()];
    for other in [
        "disk check by admin",
        "slurmops: rollout",
        "slurmops: check gpu failed: job 7: exit 1",
    ] {
        c.nodes = vec![drained_at("w-0", &["IDLE", "DRAIN"], other, 2_000)];
        assert_eq!(deletes(&c), Vec::<String>::new(), "{other}");
    }
    c.nodes = vec![node("w-0", &["IDLE", "DRAIN"], request)];
    assert_eq!(deletes(&c), Vec::<String>::new());
}

fn job(id: u64, node: &str, batch: bool, requeue: bool) -> crate::slurm::Job {
    crate::slurm::Job {
        id,
        user: "alice".into(),
        state: "RUNNING".into(),
        nodes: vec![node.into()],
        batch,
        requeue,
        ..crate::slurm::Job::default()
    }
}

#[test]
fn a_preemption_warning_requeues_a_drained_worker_s_jobs_only_when_every_one_may_be_requeued() {
    let spot = format!(
        "slurmops: node {HOST}: taint cloud.google.com/impending-node-termination:NoSchedule"
    );
    let problem = DrainReason::parse(&spot).unwrap();
    let mut c = Case::new(vec![pod("w-0")], vec![node("w-0", &["ALLOCATED"], "")]);
    c.problems = Some([(HOST.to_string(), problem)].into());
    c.requeue = true;
    c.jobs = Some(vec![job(7, "w-0", true, true)]);
    // Drained first (the warning is a node problem)...
    assert!(
        c.steps().contains(&format!(
            "drain w-0: node {HOST}: taint cloud.google.com/impending-node-termination:NoSchedule"
        )),
        "{:?}",
        c.steps()
    );
    // ...then, drained, set DOWN: Slurm requeues its job.
    c.nodes = vec![node("w-0", &["ALLOCATED", "DRAIN"], &spot)];
    let requeues = |c: &Case| -> Vec<String> {
        c.steps()
            .into_iter()
            .filter(|s| s.starts_with("requeue"))
            .collect()
    };
    assert_eq!(
        requeues(&c),
        ["requeue w-0: set DOWN: Slurm requeues job 7 (alice) (its node's rule asks for requeue)"]
    );
    // A job that may not be requeued (or an interactive one) is never killed: drained only.
    c.jobs = Some(vec![job(7, "w-0", true, true), job(8, "w-0", true, false)]);
    assert_eq!(requeues(&c), Vec::<String>::new());
    c.jobs = Some(vec![job(9, "w-0", false, true)]);
    assert_eq!(requeues(&c), Vec::<String>::new());
    // A rule without requeue, the queue unread, or DOWN already: nothing.
    c.jobs = Some(vec![job(7, "w-0", true, true)]);
    c.requeue = false;
    assert_eq!(requeues(&c), Vec::<String>::new());
    c.requeue = true;
    c.jobs = None;
    assert_eq!(requeues(&c), Vec::<String>::new());
    c.jobs = Some(vec![job(7, "w-0", true, true)]);
    c.nodes = vec![node("w-0", &["DOWN", "DRAIN"], &spot)];
    assert_eq!(requeues(&c), Vec::<String>::new());
    // Someone else's drain on the node: theirs.
    c.nodes = vec![node("w-0", &["ALLOCATED", "DRAIN"], "disk check by admin")];
    assert_eq!(requeues(&c), Vec::<String>::new());
}
