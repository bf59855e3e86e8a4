//! `sync`: keeps Kubernetes and Slurm telling the same story about each worker.
//!
//! - Slurm's view of a worker becomes a pod condition (`slurmops.dev/slurm-node`), so `kubectl`
//!   shows which pods are idle, busy, draining, drained or not registered; a worker running jobs
//!   carries the label `slurmops.dev/busy=true`, which the NodeSet's busy PodDisruptionBudget
//!   selects, so `kubectl drain` and cluster autoscalers cannot evict it.
//! - A cordoned Kubernetes node, or one with a condition or taint `policy.nodeHealth` lists,
//!   drains the workers on it in Slurm (running jobs finish, no new ones start); when the problem
//!   clears they are resumed, but only drains slurmops set for that node (`health`).
//! - A Ready worker whose Slurm node stays unknown for the registration grace is replaced: Slurm
//!   cannot run anything there, so deleting it kills nothing. At most one per NodeSet per pass.
//!
//! Writes happen only on change; a pass over a steady cluster writes nothing.

pub mod health;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;

use k8s_openapi::api::core::v1::{Node as KubeNode, Pod, PodCondition};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use serde_json::json;

use crate::controller::Fence;
use crate::controller::watch::{Held, Scope};
use crate::k8s::Connection;
use crate::render::names::{LABEL_BUSY, LABEL_NODESET};
use crate::rollout::pod_ready;
use crate::slurm::{Client, Drain, Node, SlurmError, SlurmNodes};
use crate::spec::ClusterFile;

/// The pod condition type carrying Slurm's view of the worker.
pub use crate::vocab::CONDITION_SLURM_NODE as CONDITION;

/// Pod writes (condition, busy label) in flight at once.
const WRITES: usize = 16;

/// A worker's writes: its name, whether its condition changed, and its busy label's change.
type Written = (String, bool, Option<bool>);

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("sync: Slurm state unknown, nothing changed: {0}")]
    Slurm(#[from] SlurmError),
    /// The leader's lease moved during the pass: stopped before its next write.
    #[error("sync: the lease moved, stopped before the next write (the new leader goes on)")]
    Fenced,
    #[error("sync: {what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
}

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> SyncError {
    let what = what.into();
    move |source| SyncError::Kube { what, source }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Pods whose Slurm condition changed.
    pub conditions: Vec<String>,
    /// Pods labelled busy (jobs run there) / no longer busy.
    pub marked_busy: Vec<String>,
    pub marked_idle: Vec<String>,
    /// Workers drained for a problem of their Kubernetes node: (pod, reason).
    pub drained_for_node: Vec<(String, String)>,
    /// Workers resumed: the problem of their Kubernetes node cleared.
    pub resumed_for_node: Vec<String>,
    /// Workers whose node's problem cleared, held (`slurmops: checks pending`) until their
    /// NodeSet's active checks pass again, which resumes them.
    pub rechecked_for_node: Vec<String>,
    pub replaced_unregistered: Vec<String>,
    /// Things sync could not look at (e.g. no permission to read Nodes).
    pub warnings: Vec<String>,
}

/// Sync state kept between passes: since when each worker is Ready but unknown to Slurm.
pub struct Syncer {
    pub registration_grace: Duration,
    unknown_since: BTreeMap<String, Instant>,
}

impl Syncer {
    pub fn new(registration_grace: Duration) -> Syncer {
        Syncer {
            registration_grace,
            unknown_since: BTreeMap::new(),
        }
    }

    /// One pass over every NodeSet of C, reading Slurm's nodes.
    pub async fn tick(
        &mut self,
        cluster: &Connection,
        slurm: &Client,
        c: &ClusterFile,
        fence: &Fence<'_>,
    ) -> Result<Report, SyncError> {
        let nodes = slurm.nodes().await?;
        self.tick_with(cluster, slurm, c, &nodes, Seen::default(), fence)
            .await
    }

    /// One pass over every NodeSet of C with Slurm's NODES as read by the caller (the daemon
    /// reads Slurm once per pass), and the worker pods and Kubernetes nodes from SEEN (the
    /// daemon's watch caches) or else one LIST each, whatever the number of NodeSets.
    pub async fn tick_with(
        &mut self,
        cluster: &Connection,
        slurm: &Client,
        c: &ClusterFile,
        nodes: &BTreeMap<String, Node>,
        seen: Seen,
        fence: &Fence<'_>,
    ) -> Result<Report, SyncError> {
        let fenced = || match fence() {
            true => Ok(()),
            false => Err(SyncError::Fenced),
        };
        let mut report = Report::default();
        let problems = match seen.nodes {
            Held::Ready(kube_nodes) => Some(health::problems(
                &kube_nodes,
                c.spec.policy.node_health.as_ref(),
            )),
            Held::Listing => {
                report.warnings.push(
                    "Kubernetes Nodes not read yet (their watch is making its first listing): cordons and node health are followed once it is done".into(),
                );
                None
            }
            Held::NotWatched => node_problems(cluster, c, &mut report).await,
        };
        let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), &c.metadata.namespace);
        let all = match seen.pods {
            Some(pods) => pods,
            // This cluster's workers only: another cluster in the namespace may have NodeSets of
            // the same names, and its Ready workers are unknown to this Slurm.
            None => pods_api
                .list(
                    &ListParams::default()
                        .labels(&Scope::cluster(&c.metadata.namespace, &c.metadata.name).selector),
                )
                .await
                .map_err(kube_err("list worker pods"))?
                .items
                .into_iter()
                .map(std::sync::Arc::new)
                .collect(),
        };
        let mut by_set: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
        for p in &all {
            let set = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODESET));
            if let Some(set) = set {
                by_set.entry(set).or_default().push(p);
            }
        }
        let sets: Vec<(&str, Vec<&Pod>)> = c
            .spec
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
            .collect();
        // What each pod needs written, decided first without a request: on most passes nothing,
        // and thousands of workers are not each made a future to find that out.
        let todo: Vec<(&Pod, Option<serde_json::Value>, Option<bool>)> = sets
            .iter()
            .flat_map(|(_, pods)| pods)
            .filter_map(|p| {
                let node = p.metadata.name.as_ref().and_then(|n| nodes.get(n));
                let condition = condition_patch(p, node);
                let busy = busy_change(p, node.is_some_and(|n| n.state.is_busy()));
                (condition.is_some() || busy.is_some()).then_some((*p, condition, busy))
            })
            .collect();
        // The writes, WRITES at a time: on a first pass over thousands of workers each needs
        // one, and one after the other they would hold the pass for minutes. In the workers'
        // order; the first error is returned once all were tried.
        let written: Vec<Result<Written, SyncError>> = futures::stream::iter(todo)
            .map(|(p, condition, busy)| {
                let api = &pods_api;
                async move {
                    fenced()?;
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let wrote = condition.is_some();
                    if let Some(patch) = condition {
                        write_condition(api, &name, patch).await?;
                    }
                    if let Some(b) = busy {
                        write_busy(api, &name, b).await?;
                    }
                    Ok((name, wrote, busy))
                }
            })
            .buffered(WRITES)
            .collect()
            .await;
        for w in written {
            let (name, condition, busy) = w?;
            if condition {
                report.conditions.push(name.clone());
            }
            match busy {
                Some(true) => report.marked_busy.push(name),
                Some(false) => report.marked_idle.push(name),
                None => {}
            }
        }
        for (set, pods) in &sets {
            let mut replaced_here = false;
            let checked = c
                .spec
                .node_sets
                .iter()
                .find(|n| n.name == *set)
                .is_some_and(|ns| {
                    crate::spec::active_checks::holds_new_workers(&c.spec.policy.active_checks, ns)
                });
            for p in pods {
                let name = p.metadata.name.clone().unwrap_or_default();
                let node = nodes.get(&name);
                if let Some(n) = node {
                    let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
                    let ask = Asked {
                        problem: problems.as_ref().and_then(|ps| ps.get(on?)),
                        request: health::requested(p),
                        nodes_known: problems.is_some(),
                    };
                    fenced()?;
                    follow_node(slurm, n, on, ask, checked, &mut report).await?;
                }
                if !replaced_here && self.unregistered(p, node.is_some()) {
                    fenced()?;
                    replace(&pods_api, p).await?;
                    self.unknown_since.remove(&name);
                    report.replaced_unregistered.push(name);
                    replaced_here = true;
                }
            }
        }
        Ok(report)
    }

    /// Ready, unknown to Slurm, for longer than the grace (as seen by this syncer).
    fn unregistered(&mut self, p: &Pod, known: bool) -> bool {
        let name = p.metadata.name.clone().unwrap_or_default();
        if known || !pod_ready(p) {
            self.unknown_since.remove(&name);
            return false;
        }
        let since = *self.unknown_since.entry(name).or_insert_with(Instant::now);
        since.elapsed() >= self.registration_grace
    }
}

/// What the caller already holds (the daemon's watch caches); None or `NotWatched`: sync reads
/// it itself. Node health waits for a node watch still making its first listing.
#[derive(Debug, Default)]
pub struct Seen {
    /// The cluster's worker pods.
    pub pods: Option<Vec<std::sync::Arc<Pod>>>,
    /// The Kubernetes nodes (labels, taints, cordon and conditions are enough).
    pub nodes: Held<Vec<std::sync::Arc<KubeNode>>>,
}

/// Kubernetes nodes with a problem and the drain reason for each; None when Nodes cannot be read
/// (then neither drains nor resumes happen, and the report says why).
async fn node_problems(
    cluster: &Connection,
    c: &ClusterFile,
    report: &mut Report,
) -> Option<BTreeMap<String, String>> {
    match Api::<KubeNode>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => Some(health::problems(
            &l.items,
            c.spec.policy.node_health.as_ref(),
        )),
        Err(e) => {
            report.warnings.push(format!(
                "cannot read Kubernetes Nodes, cordons and node health are not followed (grant the ClusterRole from slurmops::apply::rbac::node_reader): {e}"
            ));
            None
        }
    }
}

/// What asks a worker out of service: its Kubernetes node's problem (a cordon, a drain request
/// on the Node, a listed condition or taint), else a drain request on its own pod.
struct Asked<'a> {
    problem: Option<&'a String>,
    request: Option<String>,
    /// The Kubernetes nodes were read: a node's problem known gone resumes its drain.
    nodes_known: bool,
}

/// Drains worker N when something asks it out (ASK); resumes it when nothing does any more and
/// the drain is still one slurmops set for that: for its Kubernetes node ON, or for a request on
/// its pod. CHECKED: its NodeSet's new workers wait for active checks; so does it then
/// (`slurmops: checks pending`: the controller runs them and resumes it once they pass).
async fn follow_node(
    slurm: &Client,
    n: &Node,
    on: Option<&str>,
    ask: Asked<'_>,
    checked: bool,
    report: &mut Report,
) -> Result<(), SyncError> {
    let drained = n.state.has("DRAIN");
    match ask.problem.cloned().or(ask.request) {
        Some(reason) if !drained && slurm.drain(&n.name, &reason).await? == Drain::Requested => {
            report.drained_for_node.push((n.name.clone(), reason));
        }
        Some(_) => {}
        None if drained => {
            let for_node =
                ask.nodes_known && on.is_some_and(|on| health::drained_for(&n.reason, on));
            if !(for_node || health::drained_on_request(&n.reason)) {
                return Ok(());
            }
            if checked {
                slurm
                    .drain(&n.name, crate::vocab::REASON_CHECKS_PENDING)
                    .await?;
                report.rechecked_for_node.push(n.name.clone());
            } else {
                slurm.resume(&n.name).await?;
                report.resumed_for_node.push(n.name.clone());
            }
        }
        None => {}
    }
    Ok(())
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

/// The patch of P's Slurm condition for NODE, when it changed.
fn condition_patch(p: &Pod, node: Option<&Node>) -> Option<serde_json::Value> {
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
    .unwrap_or_else(|| {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
    });
    Some(
        json!({"status": {"conditions": [{"type": CONDITION, "status": status,
        "reason": reason, "message": message, "lastTransitionTime": transition}]}}),
    )
}

async fn write_condition(
    api: &Api<Pod>,
    name: &str,
    patch: serde_json::Value,
) -> Result<(), SyncError> {
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map_err(kube_err(format!("set the Slurm condition of pod {name}")))?;
    Ok(())
}

/// Whether P's busy label is to be set (Some(true)) or cleared (Some(false)) for BUSY.
fn busy_change(p: &Pod, busy: bool) -> Option<bool> {
    let labelled = p
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_BUSY))
        .is_some_and(|v| v == "true");
    (labelled != busy).then_some(busy)
}

async fn write_busy(api: &Api<Pod>, name: &str, busy: bool) -> Result<(), SyncError> {
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

async fn replace(api: &Api<Pod>, p: &Pod) -> Result<(), SyncError> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: p.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    api.delete(&name, &dp)
        .await
        .map_err(kube_err(format!("replace unregistered worker {name}")))?;
    Ok(())
}
