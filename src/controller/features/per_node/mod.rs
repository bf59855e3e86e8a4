//! NodeSets whose pods slurmops makes: which workers stay, which pods to make. perNode: a worker
//! runs on each node its pod template's nodeSelector, required node affinity and tolerations
//! accept; slurmops places the pods itself (`spec.nodeName`), so it also decides when one goes: a
//! worker whose node left or stopped matching is drained like a scale-in and only then deleted.
//! A count (`podManagement: slurmops`): the workers that stay are chosen, busy ones first, so a
//! scale-in takes idle workers whatever their ordinal.
//! Pure: nodes, pods and Slurm's view in, a plan out.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

use crate::cluster::values::PER_NODE_LIMIT;
use crate::controller::decide::{SetView, SlurmView};
use crate::vocab::DrainReason;

/// The workers autoscale set for a NodeSet whose pods slurmops makes (its PodTemplate's
/// annotation), if it set any.
pub fn managed_replicas(t: &k8s_openapi::api::core::v1::PodTemplate) -> Option<u32> {
    t.metadata
        .annotations
        .as_ref()?
        .get(crate::render::names::ANNOTATION_REPLICAS)?
        .parse()
        .ok()
}

/// How a Kubernetes node stands for a NodeSet's pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// A worker belongs there.
    Yes,
    /// Cordoned: a worker there stays (and drains as any cordoned worker does), none is added.
    Cordoned,
    No,
}

/// Taints the node lifecycle controller sets on an unhealthy node: its worker stays (Slurm sees
/// slurmd stop answering); they are not a reason to remove it.
const HEALTH_TAINTS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/unschedulable",
];

/// POD's required node affinity terms (none: any node).
fn required_terms(pod: &PodSpec) -> &[NodeSelectorTerm] {
    pod.affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default()
}

/// The node label keys `fit` reads for POD: its nodeSelector's and its required node affinity's
/// (what the node watch keeps of each node's labels).
pub fn label_keys(pod: &PodSpec) -> impl Iterator<Item = &str> {
    let selector = pod.node_selector.iter().flatten().map(|(k, _)| k.as_str());
    let terms = required_terms(pod);
    let exprs = terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .map(|r| r.key.as_str());
    selector.chain(exprs)
}

pub fn fit(node: &Node, pod: &PodSpec) -> Fit {
    let none = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&none);
    let selected = pod
        .node_selector
        .as_ref()
        .is_none_or(|s| s.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let terms = required_terms(pod);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let affine = terms.is_empty() || terms.iter().any(|t| term_matches(t, labels, name));
    let spec = node.spec.as_ref();
    let tolerated = spec
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect != "PreferNoSchedule" && !HEALTH_TAINTS.contains(&t.key.as_str()))
        .all(|t| pod.tolerations.iter().flatten().any(|x| tolerates(x, t)));
    match (
        selected && affine && tolerated,
        spec.and_then(|s| s.unschedulable) == Some(true),
    ) {
        (false, _) => Fit::No,
        (true, true) => Fit::Cordoned,
        (true, false) => Fit::Yes,
    }
}

fn term_matches(t: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let exprs = t.match_expressions.iter().flatten();
    let fields = t.match_fields.iter().flatten();
    // An empty term matches no node (as the scheduler reads it).
    let any = t.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
        || t.match_fields.as_ref().is_some_and(|e| !e.is_empty());
    any && exprs
        .clone()
        .all(|r| requirement(r, labels.get(&r.key).map(String::as_str)))
        && fields
            .clone()
            .all(|r| r.key == "metadata.name" && requirement(r, Some(name)))
}

fn requirement(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(number),
                values.first().and_then(|s| number(s)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

fn tolerates(x: &Toleration, t: &Taint) -> bool {
    let effect = x
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == t.effect);
    let key = x.key.as_deref().is_none_or(|k| k.is_empty()) || x.key.as_deref() == Some(&t.key);
    let value = match x.operator.as_deref() {
        Some("Exists") => true,
        _ => x.value.as_deref().unwrap_or_default() == t.value.as_deref().unwrap_or_default(),
    };
    // An empty key with Exists tolerates everything.
    effect && key && value
}

/// What a perNode NodeSet needs now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Workers that stay (their node still wants one), and those about to be made.
    pub keep: BTreeSet<String>,
    /// Pods to create: (pod name, the Kubernetes node it is bound to; None: the scheduler's).
    pub create: Vec<(String, Option<String>)>,
    /// Nodes that want a worker and cannot have one, and why.
    pub unplaced: Vec<String>,
}

/// The plan for SET over NODES. SLURM_NAMES: the node names Slurm knows, so that a new worker
/// never takes the name (and a drain) of a node Slurm still holds.
pub fn place(
    set: &SetView,
    pod: &PodSpec,
    nodes: &[std::sync::Arc<Node>],
    slurm_names: &BTreeSet<String>,
) -> Placement {
    let mut out = Placement::default();
    let fits: BTreeMap<&str, Fit> = nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, fit(n, pod))))
        .collect();
    let mut hosted = BTreeSet::new();
    for w in &set.workers {
        let Some(host) = w.host.as_deref() else {
            continue;
        };
        // A node whose worker is terminating gets its replacement once the old pod is gone (the
        // replacement takes its name, as a StatefulSet's does).
        if w.deleting {
            hosted.insert(host);
            continue;
        }
        // Two pods on one node (a crash between create and observe): the older one stays.
        if !hosted.insert(host) {
            continue;
        }
        if matches!(fits.get(host), Some(Fit::Yes | Fit::Cordoned)) {
            out.keep.insert(w.name.clone());
        }
    }
    let mut free = free_names(set, slurm_names);
    for (host, f) in &fits {
        if *f != Fit::Yes || hosted.contains(host) {
            continue;
        }
        match free.next() {
            Some(name) => {
                out.keep.insert(name.clone());
                out.create.push((name, Some(host.to_string())));
            }
            None => out.unplaced.push(format!(
                "node {host}: NodeSet {} has {PER_NODE_LIMIT} workers already, its most",
                set.name
            )),
        }
    }
    out
}

/// Worker names no pod and no Slurm node of SET holds, lowest ordinal first.
fn free_names<'a>(
    set: &'a SetView,
    slurm_names: &BTreeSet<String>,
) -> impl Iterator<Item = String> + 'a {
    let taken: BTreeSet<u32> = set
        .workers
        .iter()
        .map(|w| w.name.as_str())
        .chain(slurm_names.iter().map(String::as_str))
        .filter_map(|n| ordinal_of(&set.name, n))
        .collect();
    (0..PER_NODE_LIMIT)
        .filter(move |i| !taken.contains(i))
        .map(|i| format!("{}-{i}", set.name))
}

/// A NodeSet of COUNT workers whose pods slurmops makes: the workers that stay, busy ones first,
/// then those in service, then those starting, and last those slurmops drained (a scale-in, a
/// cordon); lower ordinals first within each. Missing workers are made with the lowest free names.
pub fn keep_count(set: &SetView, count: u32, slurm: &SlurmView) -> Placement {
    let rank = |name: &str, ready: bool| match slurm.nodes.get(name) {
        _ if slurm.busy(name) => 0,
        Some(n) if n.state.has("DRAIN") && DrainReason::parse(&n.reason).is_some() => 3,
        Some(n) if ready && !n.state.has("NOT_RESPONDING") => 1,
        _ => 2,
    };
    let mut live: Vec<_> = set.workers.iter().filter(|w| !w.deleting).collect();
    live.sort_by_key(|w| (rank(&w.name, w.ready), w.ordinal, w.name.clone()));
    let mut out = Placement::default();
    out.keep
        .extend(live.iter().take(count as usize).map(|w| w.name.clone()));
    let missing = (count as usize).saturating_sub(out.keep.len());
    for name in free_names(set, &taken_names(slurm)).take(missing) {
        out.keep.insert(name.clone());
        out.create.push((name, None));
    }
    out
}

/// The Slurm node names a new worker must not take: every node Slurm holds, but those slurmops
/// drained to replace them in a rollout. The replacement takes its predecessor's name once the
/// old pod is gone (as a StatefulSet's does), so Slurm sees the same node come back on the new
/// revision and the controller resumes its drain, instead of a node left drained for ever.
pub fn taken_names(slurm: &SlurmView) -> BTreeSet<String> {
    slurm
        .nodes
        .iter()
        .filter(|(_, n)| {
            !(n.state.has("DRAIN") && DrainReason::parse(&n.reason) == Some(DrainReason::Rollout))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// I of `SET-I`.
fn ordinal_of(set: &str, name: &str) -> Option<u32> {
    name.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::decide::Worker;
    use serde_json::json;

    fn node(
        name: &str,
        labels: serde_json::Value,
        spec: serde_json::Value,
    ) -> std::sync::Arc<Node> {
        let n = json!({"metadata": {"name": name, "labels": labels}, "spec": spec});
        std::sync::Arc::new(serde_json::from_value(n).unwrap())
    }

    fn pod(spec: serde_json::Value) -> PodSpec {
        let mut s = spec;
        s["containers"] = json!([]);
        serde_json::from_value(s).unwrap()
    }

    #[test]
    fn a_node_fits_by_selector_affinity_and_tolerations_and_cordons_keep_but_do_not_add() {
        let p = pod(json!({
            "nodeSelector": {"pool": "gpu"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "NotIn", "values": ["b"]},
                    {"key": "gpus", "operator": "Gt", "values": ["3"]}]}]}}},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        }));
        let gpu = json!({"pool": "gpu", "zone": "a", "gpus": "8"});
        let taint = json!({"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]});
        assert_eq!(fit(&node("a", gpu.clone(), taint.clone()), &p), Fit::Yes);
        assert_eq!(
            fit(&node("b", json!({"pool": "cpu"}), json!({})), &p),
            Fit::No
        );
        let zone_b = json!({"pool": "gpu", "zone": "b", "gpus": "8"});
        assert_eq!(fit(&node("c", zone_b, json!({})), &p), Fit::No);
        let few = json!({"pool": "gpu", "gpus": "2"});
        assert_eq!(fit(&node("d", few, json!({})), &p), Fit::No);
        let other = json!({"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]});
        assert_eq!(fit(&node("e", gpu.clone(), other), &p), Fit::No);
        let soft = json!({"taints": [{"key": "dedicated", "effect": "PreferNoSchedule"}]});
        assert_eq!(fit(&node("f", gpu.clone(), soft), &p), Fit::Yes);
        let cordoned = json!({"unschedulable": true, "taints": [
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]});
        assert_eq!(fit(&node("g", gpu.clone(), cordoned), &p), Fit::Cordoned);
        let sick =
            json!({"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]});
        assert_eq!(fit(&node("h", gpu, sick), &p), Fit::Yes);
        let by_name = pod(json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]}]}}}}));
        assert_eq!(fit(&node("x", json!({}), json!({})), &by_name), Fit::Yes);
        assert_eq!(fit(&node("y", json!({}), json!({})), &by_name), Fit::No);
    }

    fn worker(name: &str, host: &str) -> Worker {
        Worker {
            name: name.into(),
            uid: format!("uid-{name}"),
            ordinal: ordinal_of("gpu", name),
            revision: "r1".into(),
            ready: true,
            deleting: false,
            created: Some(0),
            host: Some(host.into()),
            checks: Default::default(),
        }
    }

    #[test]
    fn a_lower_count_keeps_busy_workers_and_gives_back_idle_ones_whatever_their_ordinals() {
        use crate::slurm::{Job, Node, NodeState};
        let set = SetView {
            name: "gpu".into(),
            replicas: 4,
            update_revision: Some("r1".into()),
            managed: true,
            canary: None,
            current_revision: None,
            workers: (0..4).map(|i| worker(&format!("gpu-{i}"), "n")).collect(),
        };
        let node = |name: &str, flags: &[&str], reason: &str| Node {
            name: name.into(),
            state: NodeState(flags.iter().map(|f| f.to_string()).collect()),
            reason: reason.into(),
            ..Node::default()
        };
        let job = Job {
            id: 7,
            name: "train".into(),
            user: "alice".into(),
            account: "research".into(),
            state: "RUNNING".into(),
            partition: "all".into(),
            nodes: vec!["gpu-3".into()],
            end_time: None,
            start_time: None,
            state_reason: Default::default(),
            node_count: 1,
            exclusive: false,
            ..Job::default()
        };
        let slurm = SlurmView::new(
            vec![
                node("gpu-0", &["IDLE", "DRAIN"], "slurmops: autoscale"),
                node("gpu-1", &["IDLE"], ""),
                node("gpu-2", &["IDLE"], ""),
                node("gpu-3", &["ALLOCATED"], ""),
            ],
            vec![job],
        );
        let two = keep_count(&set, 2, &slurm);
        let keep: Vec<&str> = two.keep.iter().map(String::as_str).collect();
        assert_eq!(keep, ["gpu-1", "gpu-3"], "the busy highest ordinal stays");
        assert!(two.create.is_empty());
        // Growing again: new workers take the lowest names no pod or Slurm node holds.
        let mut fewer = set.clone();
        fewer.workers.retain(|w| w.name == "gpu-3");
        let three = keep_count(&fewer, 3, &slurm);
        assert_eq!(
            three.create,
            vec![("gpu-4".to_string(), None), ("gpu-5".to_string(), None)]
        );
    }

    #[test]
    fn new_nodes_get_the_lowest_free_names_and_workers_of_leaving_nodes_are_not_kept() {
        let set = SetView {
            name: "gpu".into(),
            replicas: 2,
            update_revision: Some("r1".into()),
            managed: false,
            canary: None,
            current_revision: None,
            workers: vec![worker("gpu-0", "n0"), worker("gpu-2", "n2")],
        };
        let p = pod(json!({"nodeSelector": {"pool": "gpu"}}));
        let gpu = json!({"pool": "gpu"});
        let nodes = vec![
            node("n0", gpu.clone(), json!({})),
            node("n1", gpu.clone(), json!({})),
            node("n2", json!({"pool": "cpu"}), json!({})),
            node("n3", gpu, json!({})),
        ];
        // gpu-1 is still a Slurm node (a worker that left without its preStop): not reused.
        let slurm = BTreeSet::from(["gpu-1".to_string()]);
        let plan = place(&set, &p, &nodes, &slurm);
        assert_eq!(
            plan.create,
            vec![
                ("gpu-3".to_string(), Some("n1".to_string())),
                ("gpu-4".to_string(), Some("n3".to_string()))
            ]
        );
        let keep: Vec<&str> = plan.keep.iter().map(String::as_str).collect();
        assert_eq!(
            keep,
            ["gpu-0", "gpu-3", "gpu-4"],
            "gpu-2's node left the pool"
        );
    }

    #[test]
    fn a_worker_replaced_by_a_rollout_comes_back_under_its_name_and_no_other_drained_name_is_taken()
    {
        use crate::slurm::{Node, NodeState};
        let node = |name: &str, reason: &str| Node {
            name: name.into(),
            state: NodeState(["IDLE".to_string(), "DRAIN".to_string()].into()),
            reason: reason.into(),
            ..Node::default()
        };
        // gpu-0's pod was deleted by a rollout; gpu-1 was drained by an administrator; gpu-2 by
        // slurmops for a scale-in.
        let slurm = SlurmView::new(
            vec![
                node("gpu-0", "slurmops: rollout"),
                node("gpu-1", "disk check"),
                node("gpu-2", "slurmops: scale-in"),
            ],
            Vec::new(),
        );
        let taken = taken_names(&slurm);
        let taken: Vec<&str> = taken.iter().map(String::as_str).collect();
        assert_eq!(taken, ["gpu-1", "gpu-2"]);
        let set = SetView {
            name: "gpu".into(),
            replicas: 1,
            update_revision: Some("r2".into()),
            managed: true,
            canary: None,
            current_revision: None,
            workers: Vec::new(),
        };
        let p = pod(json!({}));
        let nodes = vec![super::tests::node("n0", json!({}), json!({}))];
        let plan = place(&set, &p, &nodes, &taken_names(&slurm));
        assert_eq!(
            plan.create,
            vec![("gpu-0".to_string(), Some("n0".to_string()))]
        );
        // While the old pod is still terminating, its node waits for it to be gone.
        let mut terminating = set.clone();
        terminating.workers = vec![Worker {
            deleting: true,
            ..worker("gpu-0", "n0")
        }];
        let plan = place(&terminating, &p, &nodes, &taken_names(&slurm));
        assert!(plan.create.is_empty(), "{:?}", plan.create);
    }
}
