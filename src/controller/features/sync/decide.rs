//! What sync does this pass, decided without a request: from the workers' pods, Slurm's nodes
//! and the Kubernetes nodes' problems to the steps (`Step`), which the controller's pass carries
//! out behind the leader's fence (`controller::upkeep::act`) and `plan --cluster` shows. Pure:
//! the caller gives the time and which workers are past the registration grace (Ready that long
//! and unknown to Slurm).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::health;
use super::{busy_change, condition_patch};
use crate::slurm::Node;
use crate::vocab::DrainReason;

/// One thing sync writes, for a worker of a NodeSet.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The pod's `slurmops.dev/slurm-node` condition, changed (a status patch).
    Condition {
        pod: String,
        patch: serde_json::Value,
    },
    /// The pod's busy label set (jobs run there) or removed.
    Busy { pod: String, busy: bool },
    /// Drain the worker in Slurm: its Kubernetes node's problem, or a drain request.
    Drain { node: String, reason: DrainReason },
    /// The problem cleared on a NodeSet whose new workers wait for active checks: held
    /// (`checks pending`) until they pass, which resumes it.
    Recheck { node: String },
    /// The problem cleared: resume the drain slurmops set for it.
    Resume { node: String },
    /// Ready but unknown to Slurm past the registration grace: delete the pod (uid precondition).
    Replace { pod: String, uid: String },
    /// Drained for its Kubernetes node's problem whose rule asks for requeue (a preemption
    /// warning): set DOWN with its reason (REASON, as Slurm shows it), so that Slurm requeues
    /// JOBS, every one a batch job it may requeue.
    Requeue {
        node: String,
        jobs: Vec<crate::controller::decide::Holder>,
        reason: String,
    },
    /// Drained for its node's problem or a drain request (REASON, its words), no job left, on a
    /// NodeSet with `remediation: replace`: delete the pod (uid precondition), once per drain.
    Remediate {
        pod: String,
        uid: String,
        reason: String,
    },
}

/// What `decide` reads.
pub struct Input<'a> {
    /// Each NodeSet of cluster.yaml, in its order, with its live worker pods.
    pub sets: &'a [(&'a str, Vec<&'a Pod>)],
    /// Slurm's nodes.
    pub nodes: &'a BTreeMap<String, Node>,
    /// Kubernetes nodes with a problem and the reason; None when the Nodes could not be read.
    pub problems: Option<&'a BTreeMap<String, DrainReason>>,
    /// NodeSets whose new workers wait for active checks.
    pub checked: &'a BTreeSet<String>,
    /// Workers Ready and unknown to Slurm for longer than the registration grace.
    pub overdue: &'a BTreeSet<String>,
    /// Kubernetes nodes whose listed condition or taint asks for requeue.
    pub requeue: &'a BTreeSet<String>,
    /// Slurm's jobs, for requeue (None: not read, nothing is requeued).
    pub slurm: Option<&'a crate::controller::decide::SlurmView>,
    /// NodeSets with `remediation: replace`, and whether their pods may land on another
    /// Kubernetes node (false: perNode, each pod bound to its node).
    pub remediate: &'a BTreeMap<String, bool>,
    pub now: Timestamp,
}

/// The steps of this pass, by NodeSet: every condition and label change first (they are written
/// many at once), then each worker's drain, resume or replacement, at most one replacement per
/// NodeSet.
pub fn decide(i: &Input) -> Vec<(String, Step)> {
    let mut out = Vec::new();
    for (set, pods) in i.sets {
        for p in pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            let node = i.nodes.get(&name);
            if let Some(patch) = condition_patch(p, node, i.now) {
                let pod = name.clone();
                out.push((set.to_string(), Step::Condition { pod, patch }));
            }
            if let Some(busy) = busy_change(p, node.is_some_and(|n| n.state.is_busy())) {
                out.push((set.to_string(), Step::Busy { pod: name, busy }));
            }
        }
    }
    for (set, pods) in i.sets {
        let checked = i.checked.contains(*set);
        let mut replaced = false;
        for p in pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            if let Some(n) = i.nodes.get(&name) {
                let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
                let problem = i.problems.and_then(|ps| ps.get(on?));
                let want = problem.cloned().or_else(|| health::requested(p));
                if let Some(step) = follow(n, on, want, i.problems.is_some(), checked) {
                    out.push((set.to_string(), step));
                } else if let Some(on) = on.filter(|on| i.requeue.contains(*on))
                    && let Some(step) = requeue(n, on, i.slurm)
                {
                    out.push((set.to_string(), step));
                } else if let Some(movable) = i.remediate.get(*set)
                    && let Some(step) = remediate(p, n, *movable && cordoned(problem))
                {
                    out.push((set.to_string(), step));
                }
            }
            if !replaced && i.overdue.contains(&name) {
                let uid = p.metadata.uid.clone().unwrap_or_default();
                out.push((set.to_string(), Step::Replace { pod: name, uid }));
                replaced = true;
            }
        }
    }
    out
}

/// The step for worker N on Kubernetes node ON: drained when something asks it out (WANT), and
/// when nothing does any more, resumed (or held for its checks, CHECKED) if the drain is still
/// one slurmops set for that — for its node (known only when NODES_KNOWN), or for a request on
/// its pod.
fn follow(
    n: &Node,
    on: Option<&str>,
    want: Option<DrainReason>,
    nodes_known: bool,
    checked: bool,
) -> Option<Step> {
    let drained = n.state.has("DRAIN");
    match want {
        Some(reason) if !drained => Some(Step::Drain {
            node: n.name.clone(),
            reason,
        }),
        Some(_) => None,
        None if drained => {
            let for_node = nodes_known && on.is_some_and(|on| health::drained_for(&n.reason, on));
            if !(for_node || health::drained_on_request(&n.reason)) {
                return None;
            }
            let node = n.name.clone();
            Some(match checked {
                true => Step::Recheck { node },
                false => Step::Resume { node },
            })
        }
        None => None,
    }
}

/// Worker N on Kubernetes node ON, whose problem asks for requeue: once N is drained for it, set
/// DOWN when the whole queue is known and every job on N is a batch job Slurm may requeue
/// (slurmctld requeues those of a node that goes DOWN and kills the others: a worker with any
/// other job only stays drained).
fn requeue(
    n: &Node,
    on: &str,
    slurm: Option<&crate::controller::decide::SlurmView>,
) -> Option<Step> {
    let slurm = slurm?;
    if !n.state.has("DRAIN") || n.state.has("DOWN") || !health::drained_for(&n.reason, on) {
        return None;
    }
    if slurm.jobs_error.is_some() || slurm.pending_unread.is_some() {
        return None;
    }
    let jobs = slurm.jobs_on(&n.name);
    let all = !jobs.is_empty() && jobs.iter().all(|j| j.batch && j.requeue);
    all.then(|| Step::Requeue {
        node: n.name.clone(),
        jobs: jobs.iter().map(crate::controller::decide::holder).collect(),
        reason: n.reason.clone(),
    })
}

/// Whether PROBLEM, a worker's Kubernetes node's, is a cordon (the scheduler places no new pod
/// there).
fn cordoned(problem: Option<&DrainReason>) -> bool {
    matches!(problem, Some(DrainReason::Cordoned { .. }))
}

/// Worker pod P replaced when its node N is drained (no job left) by sync since before P was
/// made, for what the replacement leaves behind: its own drain request (which goes with the
/// pod), or its Kubernetes node's problem when the new pod lands elsewhere (AWAY: the node is
/// cordoned and the pod not bound to it). A worker's Slurm node is made anew when it
/// registers, undrained: a replacement on the node with the problem would be drained and
/// replaced again, pass after pass. A pod made after the drain began is never replaced for it.
/// Slurm's state is this pass's read.
fn remediate(p: &Pod, n: &Node, away: bool) -> Option<Step> {
    if !n.state.is_drained() {
        return None;
    }
    let reason = DrainReason::parse(&n.reason)?;
    let leaves = match reason {
        DrainReason::Requested(_) => true,
        DrainReason::Cordoned { .. } | DrainReason::NodeProblem { .. } => away,
        _ => false,
    };
    if !leaves {
        return None;
    }
    let made = p.metadata.creation_timestamp.as_ref()?.0.as_second();
    if made >= n.reason_changed_at? {
        return None;
    }
    Some(Step::Remediate {
        pod: p.metadata.name.clone()?,
        uid: p.metadata.uid.clone()?,
        reason: reason.words(),
    })
}

impl Step {
    /// For `plan --cluster`: (action, target, detail) in its words.
    pub fn shown(&self) -> (&'static str, &str, String) {
        match self {
            Step::Condition { pod, patch } => {
                // Its own condition when it changed, else Slinky's that did.
                let cs = patch["status"]["conditions"].as_array();
                let cs = cs.map(Vec::as_slice).unwrap_or_default();
                let told = match cs.first() {
                    Some(c) if c["type"] == super::CONDITION => {
                        c["reason"].as_str().unwrap_or_default().to_string()
                    }
                    _ => cs
                        .iter()
                        .map(|c| {
                            format!(
                                "{}={}",
                                c["type"].as_str().unwrap_or_default(),
                                c["status"].as_str().unwrap_or_default()
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                };
                ("condition", pod, format!("Slurm: {told}"))
            }
            Step::Busy { pod, busy: true } => ("label", pod, "busy: jobs run there".into()),
            Step::Busy { pod, busy: false } => ("label", pod, "not busy any more".into()),
            Step::Drain { node, reason } => ("drain", node, reason.words()),
            Step::Recheck { node } => (
                "hold",
                node,
                "its node's problem cleared: held until its active checks pass".into(),
            ),
            Step::Resume { node } => (
                "resume",
                node,
                "its node's problem or its drain request cleared".into(),
            ),
            Step::Replace { pod, .. } => (
                "delete",
                pod,
                "Ready but never registered in Slurm: replaced".into(),
            ),
            Step::Requeue { node, jobs, .. } => {
                let each: Vec<String> = jobs
                    .iter()
                    .map(|j| format!("job {} ({})", j.id, j.user))
                    .collect();
                (
                    "requeue",
                    node,
                    format!(
                        "set DOWN: Slurm requeues {} (its node's rule asks for requeue)",
                        each.join(", ")
                    ),
                )
            }
            Step::Remediate { pod, reason, .. } => (
                "delete",
                pod,
                format!("drained ({reason}), no job left: replaced (remediation: replace)"),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
