//! What a plan holds: the object changes, the plan in Slurm's terms (config diffs, scaling,
//! rolls and their windows, checks, upgrade, steps of the next pass) and its warnings.

use serde::Serialize;

use crate::cluster::types::ClusterFile;
use crate::cluster::values::{IntOrPercent, Replicas};
use crate::render::Rendered;

/// One side of a plan: a cluster.yaml and what it renders to.
pub struct Side<'a> {
    pub cluster: &'a ClusterFile,
    pub rendered: &'a Rendered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Replace,
    Delete,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Replace => "replace",
            Action::Delete => "delete",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub action: Action,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Unified diff of the object's YAML (secret values masked).
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileDiff {
    pub file: String,
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scale {
    pub node_set: String,
    pub from: Replicas,
    pub to: Replicas,
    /// slurmops makes the pods: a scale-in takes idle workers, whatever their ordinals.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub any_idle: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Roll {
    pub node_set: String,
    /// None for a perNode NodeSet: one per matching Kubernetes node, known in the cluster only.
    pub workers: Option<u32>,
    /// Resolved for a fixed count; a perNode NodeSet's as written (`25%` of its live workers).
    pub max_unavailable: IntOrPercent,
    /// Which parts of the pod template changed (e.g. `image`, `args`).
    pub because: Vec<String>,
    /// The workers replaced and validated first, when the NodeSet has a canary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryStep>,
    /// The maintenance windows the rollout waits for, when the NodeSet asks for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowStep>,
}

/// A rollout that waits for a maintenance window, in the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowStep {
    /// `required` or `preferred`.
    pub mode: String,
    /// Each window as written: `0 2 * * Sat for 4h (UTC)`.
    pub windows: Vec<String>,
    /// The next window [start, end) as UNIX seconds, once a time is given (`at`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<(i64, i64)>,
    /// The time zone of the schedule that names `next` (the text tells the window in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// The plan's time, when it is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<i64>,
    /// The live queue's pending jobs that may run on the NodeSet's workers (`plan --cluster`):
    /// the reservation holds back those that would still run when the window opens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingJobs>,
}

/// Pending jobs of the partitions holding a NodeSet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingJobs {
    /// Those whose time limit (or none) would still run when the window opens, were they to
    /// start at the plan's time: the reservation keeps them off the NodeSet's workers.
    pub held_back: usize,
    pub pending: usize,
    pub partitions: Vec<String>,
}

/// A rollout's canary in the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CanaryStep {
    pub replicas: u32,
    /// The canaries by name, once the live cluster is known (`plan --cluster`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// How the validation is named: "the built-in gpu check", "its inline script", ...
    pub check: String,
    /// One job on each canary, or one on all of them.
    pub per_node: bool,
    pub timeout: String,
    /// How long a replaced canary may take to be Ready and registered before it fails.
    pub ready_timeout: String,
}

/// The plan in Slurm's terms.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SlurmSummary {
    pub config_diffs: Vec<FileDiff>,
    pub partitions_added: Vec<String>,
    pub partitions_removed: Vec<String>,
    pub node_sets_added: Vec<String>,
    /// Removed NodeSets: all their workers are drained, then their objects pruned.
    pub node_sets_removed: Vec<String>,
    /// NodeSets whose pods change: each worker is drained, then replaced.
    pub node_sets_rolled: Vec<Roll>,
    pub scaled: Vec<Scale>,
    pub autoscale_changes: Vec<String>,
    /// Active checks added, changed or removed, in words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// slurmctld's pod template changes: the controller restarts.
    pub controller_restarts: bool,
    /// The slurm.conf settings that restart it (a reconfigure cannot change them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restart_because: Vec<String>,
    /// Backup controllers running before and after the restart (`controller.ha.backups` of both
    /// revisions, the smaller): 0 means the scheduler is down while slurmctld restarts.
    pub backups_through_restart: u32,
    /// The new revision's controllers are behind one address (`controller.ha.serviceAddress`):
    /// slurmops replaces them, not their StatefulSet.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub one_address: bool,
    /// Config files change and slurmctld does not restart: its pod's `reconfigure` sidecar
    /// applies them in place (`scontrol reconfigure`) once the kubelet has updated them.
    pub controller_reconfigures: bool,
    /// NodeSets kept whose workers this change does not touch (with a controller restart, they
    /// pick the new configuration up from slurmctld without restarting).
    pub node_sets_untouched: Vec<String>,
    /// With a live cluster and Slurm: each node the change drains and the jobs running there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drains: Vec<NodeDrain>,
    /// With a live cluster and Slurm: the worker steps the controller's next pass takes (its
    /// own decisions, not a guess), after the object changes above.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub next_pass: Vec<Step>,
    /// `slurmVersion` changes: the in-place upgrade, in the order it is applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<Upgrade>,
    /// The slurmctld restart or the upgrade waits for a maintenance window
    /// (`policy.controlPlaneWindow: required`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_window: Option<WindowStep>,
    /// QOS, accounts and users: between two revisions, or against slurmdbd with a live Slurm.
    #[serde(skip_serializing_if = "crate::accounting::Diff::is_quiet")]
    pub accounting: crate::accounting::Diff,
}

/// A Slurm release change, as apply carries it out (or why it cannot).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Upgrade {
    pub from: String,
    pub to: String,
    /// The steps, each after the one before is healthy.
    pub steps: Vec<String>,
    /// Why apply refuses it (a downgrade, or further than Slurm upgrades in place), with the
    /// path that is allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Which part of the daemon's pass takes a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepBy {
    /// The controller: what `apply` and `rollout` do too.
    #[default]
    Controller,
    /// Worker sync (the daemon's pass, `slurmops sync`): labels, node health, drain requests.
    Sync,
    /// Autoscale (the daemon's pass, `slurmops autoscale`).
    Autoscale,
}

/// One step of the daemon's next pass on a NodeSet's workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub node_set: String,
    /// Who takes it. Only the controller's steps make a plan's exit code 2: sync and autoscale
    /// follow the cluster's state, not the change.
    pub by: StepBy,
    /// drain, delete, resume, create, topology, submit, cancel, hold, reserve, unreserve, label
    /// (worker sync's busy label), scale (autoscale); sync's and autoscale's steps say `sync:` or
    /// `autoscale:` in their detail.
    pub action: &'static str,
    /// The worker (node or pod), job or reservation it acts on.
    pub target: String,
    /// Why, in the controller's words (a drain reason, a bound node, the canary's nodes).
    pub detail: String,
}

/// A Slurm node a change drains, and what runs on it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeDrain {
    pub node: String,
    pub node_set: String,
    pub jobs: Vec<JobOnNode>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobOnNode {
    pub id: u64,
    pub user: String,
    /// Expected end, UNIX seconds (None: no time limit).
    pub end_time: Option<i64>,
}

impl SlurmSummary {
    /// Nothing happens on the Slurm side (untouched NodeSets are context, not a change).
    pub fn is_empty(&self) -> bool {
        let mut s = SlurmSummary {
            node_sets_untouched: Vec::new(),
            ..self.clone()
        };
        // Objects made by hand are context too: nothing happens to them.
        s.accounting.unmanaged.clear();
        // So is what sync and autoscale would do on their own.
        s.next_pass.retain(|st| st.by == StepBy::Controller);
        s == SlurmSummary::default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub changes: Vec<Change>,
    pub slurm: SlurmSummary,
    pub warnings: Vec<String>,
}

impl Plan {
    pub fn has_changes(&self) -> bool {
        !self.changes.is_empty() || !self.slurm.is_empty()
    }
    pub fn count(&self, a: Action) -> usize {
        self.changes.iter().filter(|c| c.action == a).count()
    }
}
