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
}

impl Case {
    fn new(pods: Vec<Pod>, nodes: Vec<Node>) -> Case {
        Case {
            pods,
            nodes,
            problems: Some(BTreeMap::new()),
            checked: false,
            overdue: vec![],
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
        decide(&Input {
            sets: &sets,
            nodes: &nodes,
            problems: self.problems.as_ref(),
            checked: &checked,
            overdue: &overdue,
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
