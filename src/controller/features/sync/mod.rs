//! `sync`: keeps Kubernetes and Slurm telling the same story about each worker.
//!
//! - Slurm's view of a worker becomes a pod condition (`slurmops.dev/slurm-node`), so `kubectl`
//!   shows which pods are idle, busy, draining, drained or not registered; a worker running jobs
//!   carries the label `slurmops.dev/busy=true`, which the NodeSet's busy PodDisruptionBudget
//!   selects, so `kubectl drain` and cluster autoscalers cannot evict it.
//! - A cordoned Kubernetes node, or one with a condition or taint `policy.nodeHealth` lists,
//!   drains the workers on it in Slurm (running jobs finish, no new ones start); when the problem
//!   clears they are resumed, but only drains slurmops set for that node (`health`).
//! - A worker Ready for longer than the registration grace (since its Ready condition's
//!   transition) whose Slurm node is unknown is replaced: Slurm cannot run anything there, so
//!   deleting it kills nothing. At most one per NodeSet per pass.
//!
//! Writes happen only on change; a pass over a steady cluster writes nothing. What sync does is
//! decided by `decide` (pure) on the controller pass's observation and written by the pass
//! (`controller::upkeep`), behind its fence, like every other write.

pub mod act;
pub mod decide;
pub mod health;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;

use crate::cluster::ClusterFile;
use crate::controller::PassError;
use crate::render::names::{LABEL_BUSY, LABEL_NODESET};
use crate::slurm::Node;

/// The pod condition type carrying Slurm's view of the worker.
pub use crate::vocab::CONDITION_SLURM_NODE as CONDITION;

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> PassError {
    let what = what.into();
    move |source| PassError::Kube { what, source }
}

/// Each NodeSet of C, in its order, with its live pods among ALL.
pub(crate) fn sets_of<'a>(
    c: &'a ClusterFile,
    all: &'a [std::sync::Arc<Pod>],
) -> Vec<(&'a str, Vec<&'a Pod>)> {
    let mut by_set: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for p in all {
        let set = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_NODESET));
        if let Some(set) = set {
            by_set.entry(set).or_default().push(p);
        }
    }
    c.spec
        .node_sets
        .iter()
        .map(|set| {
            let pods = by_set.remove(set.name.as_str()).unwrap_or_default();
            let live = pods
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            (set.name.as_str(), live)
        })
        .collect()
}

/// The NodeSets of C whose new workers wait for active checks.
pub(crate) fn checked_sets(c: &ClusterFile) -> std::collections::BTreeSet<String> {
    c.spec
        .node_sets
        .iter()
        .filter(|ns| {
            crate::cluster::active_checks::holds_new_workers(&c.spec.policy.active_checks, ns)
        })
        .map(|ns| ns.name.clone())
        .collect()
}

/// The NodeSets of C with `remediation: replace`, and whether their pods may land on another
/// Kubernetes node (not perNode).
pub(crate) fn remediated_sets(c: &ClusterFile) -> BTreeMap<String, bool> {
    c.spec
        .node_sets
        .iter()
        .filter(|ns| ns.remediation == crate::cluster::nodeset::Remediation::Replace)
        .map(|ns| (ns.name.clone(), !ns.replicas.per_node()))
        .collect()
}

/// (status, reason, message) of the Slurm condition for a worker whose node is NODE and whose
/// pod has the address POD_IP.
pub fn condition_of(
    node: Option<&Node>,
    pod_ip: Option<&str>,
) -> (&'static str, &'static str, String) {
    let Some(n) = node else {
        return (
            "False",
            "NotRegistered",
            "the Slurm node is not registered".into(),
        );
    };
    let s = &n.state;
    let mut detail = if n.reason.is_empty() {
        s.to_string()
    } else {
        format!("{s}: {}", n.reason)
    };
    if s.has("NOT_RESPONDING") {
        detail += &elsewhere(n, pod_ip);
    }
    let (status, reason) = if s.has("NOT_RESPONDING") {
        ("False", "NotResponding")
    } else if s.has("DOWN") {
        ("False", "Down")
    } else if s.is_drained() {
        ("False", "Drained")
    } else if s.has("DRAIN") {
        ("False", "Draining")
    } else if s.is_busy() {
        ("True", "Allocated")
    } else {
        ("True", "Idle")
    };
    (status, reason, detail)
}

/// Why slurmctld may not reach node N: it pings the address the node's registration came from
/// (a dynamic node's `NodeAddr`), and that is not its pod's POD_IP, as where the path from a pod
/// to the controllers' Service is NATed. Empty when the addresses agree or either is unknown.
fn elsewhere(n: &Node, pod_ip: Option<&str>) -> String {
    let (Some(pod), Ok(addr)) = (pod_ip, n.address.parse::<std::net::IpAddr>()) else {
        return String::new();
    };
    match pod.parse::<std::net::IpAddr>() {
        Ok(pod) if pod != addr => format!(
            " (slurmctld reaches this node at {addr}, not its pod's address {pod}: its registration came through a NAT; pods must reach the controllers with their own address, see controller.ha.serviceAddress)"
        ),
        _ => String::new(),
    }
}

/// Slinky's state conditions of a worker whose node is NODE, as health tools written for Slinky
/// read them (NVIDIA's NVSentinel deletes a pod once `SlurmNodeStateDrain` is True and none of
/// the busy ones is): each True while Slurm shows that state.
pub fn slinky_conditions(node: Option<&Node>) -> [(&'static str, bool); 4] {
    use crate::vocab::{
        CONDITION_SLINKY_ALLOCATED, CONDITION_SLINKY_COMPLETING, CONDITION_SLINKY_DRAIN,
        CONDITION_SLINKY_MIXED,
    };
    let has = |f: &str| node.is_some_and(|n| n.state.has(f));
    [
        (CONDITION_SLINKY_DRAIN, has("DRAIN") && !has("UNDRAIN")),
        (CONDITION_SLINKY_ALLOCATED, has("ALLOCATED")),
        (CONDITION_SLINKY_MIXED, has("MIXED")),
        (CONDITION_SLINKY_COMPLETING, has("COMPLETING")),
    ]
}

/// The patch of P's Slurm conditions for NODE, those that changed (NOW: their transition
/// time): `slurmops.dev/slurm-node` first, then Slinky's (`slinky_conditions`; one never set
/// is written only once it is True).
pub(crate) fn condition_patch(
    p: &Pod,
    node: Option<&Node>,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<serde_json::Value> {
    let pod_ip = p.status.as_ref().and_then(|s| s.pod_ip.as_deref());
    let (status, reason, message) = condition_of(node, pod_ip);
    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_deref());
    let current = |t: &str| -> Option<&PodCondition> {
        conditions.and_then(|c| c.iter().find(|c| c.type_ == t))
    };
    let since = |c: Option<&PodCondition>, status: &str| {
        match c {
            Some(c) if c.status == status => c.last_transition_time.clone(),
            _ => None,
        }
        .unwrap_or(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now))
    };
    let mut changed = Vec::new();
    let ours = current(CONDITION);
    if !ours.is_some_and(|c| {
        c.status == status
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message.as_str())
    }) {
        changed.push(
            json!({"type": CONDITION, "status": status, "reason": reason,
            "message": message, "lastTransitionTime": since(ours, status)}),
        );
    }
    for (t, on) in slinky_conditions(node) {
        let c = current(t);
        let status = if on { "True" } else { "False" };
        if c.map_or(on, |c| c.status != status) {
            changed.push(json!({"type": t, "status": status,
                "lastTransitionTime": since(c, status)}));
        }
    }
    (!changed.is_empty()).then(|| json!({"status": {"conditions": changed}}))
}

pub(crate) async fn write_condition(
    api: &Api<Pod>,
    name: &str,
    patch: serde_json::Value,
) -> Result<(), PassError> {
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map_err(kube_err(format!("set the Slurm condition of pod {name}")))?;
    Ok(())
}

/// Whether P's busy label is to be set (Some(true)) or cleared (Some(false)) for BUSY.
pub(crate) fn busy_change(p: &Pod, busy: bool) -> Option<bool> {
    let labelled = p
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_BUSY))
        .is_some_and(|v| v == "true");
    (labelled != busy).then_some(busy)
}

pub(crate) async fn write_busy(api: &Api<Pod>, name: &str, busy: bool) -> Result<(), PassError> {
    let value = if busy { json!("true") } else { json!(null) };
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {LABEL_BUSY: value}}})),
    )
    .await
    .map_err(kube_err(format!("label pod {name} busy={busy}")))?;
    Ok(())
}

pub(crate) async fn replace(api: &Api<Pod>, name: &str, uid: &str) -> Result<(), PassError> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    api.delete(name, &dp)
        .await
        .map_err(kube_err(format!("replace unregistered worker {name}")))?;
    Ok(())
}

/// Deletes worker NAME (uid UID) drained for `remediation: replace`; false when it is gone or
/// was replaced already (another uid).
pub(crate) async fn remediate(api: &Api<Pod>, name: &str, uid: &str) -> Result<bool, PassError> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
        Err(e) => Err(kube_err(format!("replace drained worker {name}"))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::NodeState;

    fn node(states: &[&str]) -> Node {
        Node {
            name: "w-0".into(),
            state: NodeState(states.iter().map(|s| s.to_string()).collect()),
            ..Node::default()
        }
    }

    /// P with the conditions of PATCH applied (as the API server merges them by type).
    fn applied(mut p: Pod, patch: &serde_json::Value) -> Pod {
        let status = p.status.get_or_insert_with(Default::default);
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        for c in patch["status"]["conditions"].as_array().unwrap() {
            let c: PodCondition = serde_json::from_value(c.clone()).unwrap();
            conditions.retain(|o| o.type_ != c.type_);
            conditions.push(c);
        }
        p
    }

    fn written(patch: &Option<serde_json::Value>) -> Vec<String> {
        let Some(patch) = patch else { return vec![] };
        patch["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{}={}",
                    c["type"].as_str().unwrap(),
                    c["status"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn a_worker_slurmctld_reaches_at_another_address_than_its_pod_s_says_why() {
        let at = |addr: &str| Node {
            address: addr.into(),
            ..node(&["IDLE", "NOT_RESPONDING"])
        };
        let (status, reason, message) = condition_of(Some(&at("10.231.0.1")), Some("10.231.0.7"));
        assert_eq!((status, reason), ("False", "NotResponding"));
        assert!(
            message.contains("slurmctld reaches this node at 10.231.0.1, not its pod's address 10.231.0.7: its registration came through a NAT"),
            "{message}"
        );
        // The same address, a host name, no pod address, or a node that answers: nothing more.
        for (node, pod) in [
            (at("10.231.0.7"), Some("10.231.0.7")),
            (at("cpu-0"), Some("10.231.0.7")),
            (at("10.231.0.1"), None),
            (
                Node {
                    address: "10.231.0.1".into(),
                    ..node(&["IDLE"])
                },
                Some("10.231.0.7"),
            ),
        ] {
            let (_, _, message) = condition_of(Some(&node), pod);
            assert!(!message.contains("NAT"), "{message}");
        }
    }

    #[test]
    fn slinky_s_state_conditions_follow_slurm_for_the_health_tools_that_read_them() {
        let now = k8s_openapi::jiff::Timestamp::UNIX_EPOCH;
        let p = Pod::default();
        // Idle: only slurmops' own condition (Slinky's are written once they are True).
        let patch = condition_patch(&p, Some(&node(&["IDLE"])), now);
        assert_eq!(written(&patch), [format!("{CONDITION}=True")]);
        let p = applied(p, patch.as_ref().unwrap());
        // Drained while a job runs: Drain and Allocated, as Slinky writes them.
        let draining = node(&["ALLOCATED", "DRAIN"]);
        let patch = condition_patch(&p, Some(&draining), now);
        assert_eq!(
            written(&patch),
            [
                format!("{CONDITION}=False"),
                "SlurmNodeStateDrain=True".into(),
                "SlurmNodeStateAllocated=True".into()
            ]
        );
        let p = applied(p, patch.as_ref().unwrap());
        assert_eq!(
            condition_patch(&p, Some(&draining), now),
            None,
            "written again"
        );
        // The job ended: Allocated False, Drain stays (what NVSentinel waits for to delete).
        let patch = condition_patch(&p, Some(&node(&["IDLE", "DRAIN"])), now);
        assert_eq!(
            written(&patch),
            [
                format!("{CONDITION}=False"),
                "SlurmNodeStateAllocated=False".into()
            ]
        );
        let p = applied(p, patch.as_ref().unwrap());
        // Resumed: Drain False.
        let patch = condition_patch(&p, Some(&node(&["IDLE"])), now);
        assert_eq!(
            written(&patch),
            [
                format!("{CONDITION}=True"),
                "SlurmNodeStateDrain=False".into()
            ]
        );
    }
}
