//! Which Kubernetes nodes must not run Slurm jobs, and why: a cordon, a drain request (the
//! annotation `slurmops.dev/drain`, its value the reason, set by a health tool or an operator;
//! or Slinky's `nodeset.slinky.slurm.net/node-cordon-reason`, which NVIDIA's NVSentinel sets, and
//! Slinky 1.3's `nodeset.slinky.slurm.net/pod-cordon-requested` on a worker pod),
//! or a condition or taint the cluster's `policy.nodeHealth` lists (set by Node Problem Detector,
//! the GPU operator, ...). A worker pod may carry the drain request too (`requested`).
//! Pure: the caller lists the Nodes once per pass. A reason names its Kubernetes node, so a drain
//! slurmops set for one node is told apart from every other drain (an administrator's, a
//! rollout's) and only that one is resumed when the problem clears.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use crate::cluster::types::NodeHealth;
use crate::vocab::{
    ANNOTATION_DRAIN, ANNOTATION_SLINKY_CORDON_REASON, ANNOTATION_SLINKY_POD_CORDON, DrainReason,
};

/// The annotations that ask for a drain, in the order they are read (slurmops' own first).
pub const REQUEST_ANNOTATIONS: [&str; 3] = [
    ANNOTATION_DRAIN,
    ANNOTATION_SLINKY_CORDON_REASON,
    ANNOTATION_SLINKY_POD_CORDON,
];

/// Longest condition message carried into a Slurm reason (untrusted text from the Node).
const MAX_MESSAGE: usize = 160;

/// Whether REASON (as Slurm reports it) is a drain slurmops set for Kubernetes node ON.
pub fn drained_for(reason: &str, on: &str) -> bool {
    DrainReason::parse(reason).is_some_and(|r| r.is_for_node(on))
}

/// Each listed node with a problem, and the drain reason for it.
pub fn problems<N: std::borrow::Borrow<Node>>(
    nodes: &[N],
    rules: Option<&NodeHealth>,
) -> BTreeMap<String, DrainReason> {
    nodes
        .iter()
        .map(|n| n.borrow())
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            let reason = problem(n, &name, rules)?;
            Some((name, reason))
        })
        .collect()
}

fn problem(n: &Node, name: &str, rules: Option<&NodeHealth>) -> Option<DrainReason> {
    let node = name.to_string();
    if n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some(DrainReason::Cordoned { node });
    }
    if let Some(why) = request_of(n.metadata.annotations.as_ref()) {
        return Some(DrainReason::node_request(node, &why));
    }
    let problem = |problem| Some(DrainReason::NodeProblem { node, problem });
    let rules = rules?;
    let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
    for c in conditions.into_iter().flatten() {
        if rules
            .conditions
            .iter()
            .any(|r| r.type_ == c.type_ && r.status == c.status)
        {
            let message = c
                .message
                .as_deref()
                .or(c.reason.as_deref())
                .unwrap_or(&c.status);
            return problem(format!("{}: {}", c.type_, one_line(message)));
        }
    }
    let taints = n.spec.as_ref().and_then(|s| s.taints.as_ref());
    for t in taints.into_iter().flatten() {
        if rules
            .taints
            .iter()
            .any(|r| r.key == t.key && r.effect.as_ref().is_none_or(|e| *e == t.effect))
        {
            return problem(format!("taint {}:{}", t.key, t.effect));
        }
    }
    None
}

/// The listed nodes whose condition or taint asks for requeue (`requeue: true` in its rule of
/// `policy.nodeHealth`).
pub fn requeue_hosts<N: std::borrow::Borrow<Node>>(
    nodes: &[N],
    rules: Option<&NodeHealth>,
) -> std::collections::BTreeSet<String> {
    let Some(rules) = rules else {
        return Default::default();
    };
    nodes
        .iter()
        .map(|n| n.borrow())
        .filter(|n| {
            let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
            let taints = n.spec.as_ref().and_then(|s| s.taints.as_ref());
            let by_condition = conditions.into_iter().flatten().any(|c| {
                rules
                    .conditions
                    .iter()
                    .any(|r| r.requeue && r.type_ == c.type_ && r.status == c.status)
            });
            let by_taint = taints.into_iter().flatten().any(|t| {
                rules.taints.iter().any(|r| {
                    r.requeue && r.key == t.key && r.effect.as_ref().is_none_or(|e| *e == t.effect)
                })
            });
            by_condition || by_taint
        })
        .filter_map(|n| n.metadata.name.clone())
        .collect()
}

/// The drain a worker pod's own request asks for (`drain requested: REASON`), if any.
pub fn requested(pod: &k8s_openapi::api::core::v1::Pod) -> Option<DrainReason> {
    request_of(pod.metadata.annotations.as_ref()).map(DrainReason::Requested)
}

/// Whether REASON (as Slurm reports it) is a drain slurmops set for a worker pod's request.
pub fn drained_on_request(reason: &str) -> bool {
    matches!(DrainReason::parse(reason), Some(DrainReason::Requested(_)))
}

/// The requester's words of a drain request among ANNOTATIONS (an empty value, or `true` as
/// Slinky's pod request may be: `by annotation`). The value is whoever set it's text: one line,
/// no control characters, cut.
fn request_of(annotations: Option<&BTreeMap<String, String>>) -> Option<String> {
    let annotations = annotations?;
    let why = REQUEST_ANNOTATIONS
        .iter()
        .find_map(|k| annotations.get(*k))?;
    let clean: String = why
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = one_line(&clean);
    let clean = if clean.is_empty() || clean.eq_ignore_ascii_case("true") {
        "by annotation".to_string()
    } else {
        clean
    };
    Some(clean)
}

/// MESSAGE on one line, at most MAX_MESSAGE bytes (cut at a character boundary).
fn one_line(message: &str) -> String {
    let flat: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.len() <= MAX_MESSAGE {
        return flat;
    }
    let mut end = MAX_MESSAGE;
    while !flat.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &flat[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::types::{NodeConditionRule, TaintRule};
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn listed_conditions_and_taints_and_cordons_are_problems_with_reasons() {
        let rules = NodeHealth {
            conditions: vec![NodeConditionRule {
                type_: "GpuUnhealthy".into(),
                status: "True".into(),
                requeue: false,
            }],
            taints: vec![TaintRule {
                key: "nvidia.com/gpu-xid".into(),
                effect: Some("NoSchedule".into()),
                requeue: true,
            }],
        };
        let nodes = vec![
            node(json!({"metadata": {"name": "a"}, "status": {"conditions": [
                {"type": "GpuUnhealthy", "status": "True", "message": "XID 79:\n GPU fell off the bus"}]}})),
            node(json!({"metadata": {"name": "b"}, "status": {"conditions": [
                {"type": "GpuUnhealthy", "status": "False"}]}})),
            node(json!({"metadata": {"name": "c"}, "spec": {"taints": [
                {"key": "nvidia.com/gpu-xid", "effect": "NoSchedule"}]}})),
            node(json!({"metadata": {"name": "d"}, "spec": {"taints": [
                {"key": "nvidia.com/gpu-xid", "effect": "NoExecute"}]}})),
            node(json!({"metadata": {"name": "e"}, "spec": {"unschedulable": true}})),
        ];
        let p = problems(&nodes, Some(&rules));
        assert_eq!(
            p["a"].words(),
            "node a: GpuUnhealthy: XID 79: GPU fell off the bus"
        );
        assert_eq!(
            p["c"].words(),
            "node c: taint nvidia.com/gpu-xid:NoSchedule"
        );
        assert_eq!(p["e"].words(), "node e cordoned");
        assert_eq!(p.len(), 3, "{p:?}");
        // Without rules, cordons still count.
        assert_eq!(problems(&nodes, None).keys().collect::<Vec<_>>(), ["e"]);
        // Only the rule with requeue asks for it (its taint's effect as listed).
        assert_eq!(
            requeue_hosts(&nodes, Some(&rules))
                .into_iter()
                .collect::<Vec<_>>(),
            ["c"]
        );
        assert!(requeue_hosts(&nodes, None).is_empty());
    }

    #[test]
    fn a_drain_request_on_a_node_or_a_pod_carries_its_requester_s_reason_on_one_line() {
        let nodes = vec![
            node(
                json!({"metadata": {"name": "a", "annotations": {ANNOTATION_DRAIN: "gpu-health:\n XID 79\u{1b}[31m"}}}),
            ),
            node(json!({"metadata": {"name": "b", "annotations": {ANNOTATION_DRAIN: ""}}})),
            node(json!({"metadata": {"name": "c", "annotations": {"other": "x"}}})),
            // As NVIDIA's NVSentinel asks Slinky for a drain.
            node(
                json!({"metadata": {"name": "d", "annotations": {ANNOTATION_SLINKY_CORDON_REASON: "[T] [NVSentinel] 79 GPU:3 - XID 79"}}}),
            ),
        ];
        let p = problems(&nodes, None);
        assert_eq!(
            p["a"].words(),
            "node a: drain requested: gpu-health: XID 79 [31m"
        );
        assert_eq!(p["b"].words(), "node b: drain requested: by annotation");
        assert_eq!(
            p["d"].words(),
            "node d: drain requested: [T] [NVSentinel] 79 GPU:3 - XID 79"
        );
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(drained_for("slurmops: node a: drain requested: x", "a"));
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(
            json!({"metadata": {"name": "w-0", "annotations": {ANNOTATION_DRAIN: "ticket 4711"}}}),
        )
        .unwrap();
        assert_eq!(
            requested(&pod).map(|r| r.words()).as_deref(),
            Some("drain requested: ticket 4711")
        );
        // Slinky 1.3's request on a pod, as health checks and automation set it: `true`, or
        // their reason.
        let slinky = |value: &str| {
            let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(
                json!({"metadata": {"name": "w-1", "annotations": {ANNOTATION_SLINKY_POD_CORDON: value}}}),
            )
            .unwrap();
            requested(&pod).map(|r| r.words())
        };
        assert_eq!(
            slinky("true").as_deref(),
            Some("drain requested: by annotation")
        );
        assert_eq!(
            slinky("dcgm diag failed").as_deref(),
            Some("drain requested: dcgm diag failed")
        );
        assert!(drained_on_request("slurmops: drain requested: ticket 4711"));
        assert!(!drained_on_request("drain requested: ticket 4711"));
        assert!(!drained_on_request("slurmops: node a: drain requested: x"));
    }

    #[test]
    fn a_drain_is_ours_for_exactly_its_node_and_long_messages_are_cut() {
        assert!(drained_for(
            "slurmops: node gpu-1: GpuUnhealthy: x",
            "gpu-1"
        ));
        assert!(drained_for("slurmops: node gpu-1 cordoned", "gpu-1"));
        assert!(!drained_for(
            "slurmops: node gpu-10: GpuUnhealthy: x",
            "gpu-1"
        ));
        assert!(!drained_for("node gpu-1: GpuUnhealthy: x", "gpu-1"));
        assert!(!drained_for("slurmops: rollout", "gpu-1"));
        let long = "é".repeat(200);
        let cut = one_line(&long);
        assert!(
            cut.len() <= MAX_MESSAGE + 3 && cut.ends_with("..."),
            "{cut}"
        );
    }
}
