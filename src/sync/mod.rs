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

pub mod decide;
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
        let mut report = Report::default();
        let (problems, all) = look(cluster, c, seen, &mut report).await?;
        let pods_api: Api<Pod> = Api::namespaced(cluster.client.clone(), &c.metadata.namespace);
        let sets = sets_of(c, &all);
        let checked = checked_sets(c);
        // Who is past the registration grace: this syncer's memory, kept before deciding.
        let overdue = sets
            .iter()
            .flat_map(|(_, pods)| pods)
            .filter(|p| {
                let known = p
                    .metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| nodes.contains_key(n));
                self.unregistered(p, known)
            })
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let steps = decide::decide(&decide::Input {
            sets: &sets,
            nodes,
            problems: problems.as_ref(),
            checked: &checked,
            overdue: &overdue,
            now: k8s_openapi::jiff::Timestamp::now(),
        });
        write(&pods_api, slurm, steps, fence, &mut report).await?;
        for n in &report.replaced_unregistered {
            self.unknown_since.remove(n);
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

/// The Kubernetes nodes' problems (None when they cannot be read, REPORT says why) and the
/// cluster's worker pods: from SEEN (the daemon's watch caches), or one LIST each.
async fn look(
    cluster: &Connection,
    c: &ClusterFile,
    seen: Seen,
    report: &mut Report,
) -> Result<(Option<BTreeMap<String, String>>, Vec<std::sync::Arc<Pod>>), SyncError> {
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
        Held::NotWatched => node_problems(cluster, c, report).await,
    };
    let pods = match seen.pods {
        Some(pods) => pods,
        // This cluster's workers only: another cluster in the namespace may have NodeSets of
        // the same names, and its Ready workers are unknown to this Slurm.
        None => Api::<Pod>::namespaced(cluster.client.clone(), &c.metadata.namespace)
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
    Ok((problems, pods))
}

/// Each NodeSet of C, in its order, with its live pods among ALL.
fn sets_of<'a>(c: &'a ClusterFile, all: &'a [std::sync::Arc<Pod>]) -> Vec<(&'a str, Vec<&'a Pod>)> {
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
fn checked_sets(c: &ClusterFile) -> std::collections::BTreeSet<String> {
    c.spec
        .node_sets
        .iter()
        .filter(|ns| {
            crate::spec::active_checks::holds_new_workers(&c.spec.policy.active_checks, ns)
        })
        .map(|ns| ns.name.clone())
        .collect()
}

/// What sync would do now on Slurm's NODES, for `plan --cluster` (the same decisions as a pass;
/// replacements of unregistered workers are left out: they need the daemon's memory of how long
/// each has been unknown). The pod condition writes are left out too (they change no behaviour).
pub async fn planned(
    cluster: &Connection,
    c: &ClusterFile,
    nodes: &BTreeMap<String, Node>,
) -> Result<Vec<crate::plan::Step>, SyncError> {
    let mut report = Report::default();
    let (problems, all) = look(cluster, c, Seen::default(), &mut report).await?;
    let sets = sets_of(c, &all);
    let steps = decide::decide(&decide::Input {
        sets: &sets,
        nodes,
        problems: problems.as_ref(),
        checked: &checked_sets(c),
        overdue: &Default::default(),
        now: k8s_openapi::jiff::Timestamp::now(),
    });
    Ok(steps
        .iter()
        .filter(|(_, s)| !matches!(s, decide::Step::Condition { .. }))
        .map(|(set, s)| {
            let (action, target, detail) = s.shown();
            crate::plan::Step {
                node_set: set.clone(),
                by: crate::plan::StepBy::Sync,
                action,
                target: target.to_string(),
                detail: format!("sync: {detail}"),
            }
        })
        .collect())
}

/// Carries STEPS out behind FENCE (checked before each write) into REPORT: the condition and
/// label writes WRITES at a time (on a first pass over thousands of workers each needs one, and
/// one after the other they would hold the pass for minutes; the first error is returned once
/// all were tried), then the drains, resumes and replacements in order.
async fn write(
    pods: &Api<Pod>,
    slurm: &Client,
    steps: Vec<(String, decide::Step)>,
    fence: &Fence<'_>,
    report: &mut Report,
) -> Result<(), SyncError> {
    use decide::Step;
    let fenced = || match fence() {
        true => Ok(()),
        false => Err(SyncError::Fenced),
    };
    let (pod_writes, rest): (Vec<_>, Vec<_>) = steps
        .into_iter()
        .map(|(_, s)| s)
        .partition(|s| matches!(s, Step::Condition { .. } | Step::Busy { .. }));
    let written: Vec<Result<Step, SyncError>> = futures::stream::iter(pod_writes)
        .map(|s| async move {
            fenced()?;
            match &s {
                Step::Condition { pod, patch } => write_condition(pods, pod, patch.clone()).await?,
                Step::Busy { pod, busy } => write_busy(pods, pod, *busy).await?,
                _ => {}
            }
            Ok(s)
        })
        .buffered(WRITES)
        .collect()
        .await;
    for w in written {
        match w? {
            Step::Condition { pod, .. } => report.conditions.push(pod),
            Step::Busy { pod, busy: true } => report.marked_busy.push(pod),
            Step::Busy { pod, busy: false } => report.marked_idle.push(pod),
            _ => {}
        }
    }
    for s in rest {
        fenced()?;
        match s {
            Step::Drain { node, reason } => {
                if slurm.drain(&node, &reason).await? == Drain::Requested {
                    report.drained_for_node.push((node, reason));
                }
            }
            Step::Recheck { node } => {
                slurm
                    .drain(&node, crate::vocab::REASON_CHECKS_PENDING)
                    .await?;
                report.rechecked_for_node.push(node);
            }
            Step::Resume { node } => {
                slurm.resume(&node).await?;
                report.resumed_for_node.push(node);
            }
            Step::Replace { pod, uid } => {
                replace(pods, &pod, &uid).await?;
                report.replaced_unregistered.push(pod);
            }
            Step::Condition { .. } | Step::Busy { .. } => {}
        }
    }
    Ok(())
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
fn condition_patch(
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

async fn replace(api: &Api<Pod>, name: &str, uid: &str) -> Result<(), SyncError> {
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
