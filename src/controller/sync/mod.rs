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

/// (status, reason, message) of the Slurm condition for a worker whose node is NODE.
pub fn condition_of(node: Option<&Node>) -> (&'static str, &'static str, String) {
    let Some(n) = node else {
        return (
            "False",
            "NotRegistered",
            "the Slurm node is not registered".into(),
        );
    };
    let s = &n.state;
    let detail = if n.reason.is_empty() {
        s.to_string()
    } else {
        format!("{s}: {}", n.reason)
    };
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

/// The patch of P's Slurm condition for NODE, when it changed (NOW: its transition time).
pub(crate) fn condition_patch(
    p: &Pod,
    node: Option<&Node>,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<serde_json::Value> {
    let (status, reason, message) = condition_of(node);
    let current: Option<&PodCondition> = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION));
    if current.is_some_and(|c| {
        c.status == status
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message.as_str())
    }) {
        return None;
    }
    let transition = match current {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => None,
    }
    .unwrap_or(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
    Some(
        json!({"status": {"conditions": [{"type": CONDITION, "status": status,
        "reason": reason, "message": message, "lastTransitionTime": transition}]}}),
    )
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
