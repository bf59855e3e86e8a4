//! What a pass decides on and what it decides, for one NodeSet: the workers and StatefulSet as
//! observed, what git wants of them, the rollout policy; the steps that are safe now, and where the
//! NodeSet stands (what `slurmops status` shows).

use std::collections::{BTreeMap, BTreeSet};

use crate::controller::gate::Gate;
use crate::vocab::DrainReason;

/// One worker pod as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    pub name: String,
    pub uid: String,
    pub ordinal: Option<u32>,
    /// `controller-revision-hash` of the pod.
    pub revision: String,
    pub ready: bool,
    pub deleting: bool,
    /// Pod creation (UNIX seconds).
    pub created: Option<i64>,
    /// The Kubernetes node the pod runs on, once scheduled.
    pub host: Option<String>,
    /// Each active check's last result on this pod (its `checks.slurmops.dev/` conditions).
    pub checks: BTreeMap<String, crate::controller::mark::Mark>,
}

/// A NodeSet's StatefulSet as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetView {
    pub name: String,
    /// `spec.replicas` of the live StatefulSet.
    pub replicas: u32,
    /// The update revision, once the StatefulSet controller saw the current generation.
    pub update_revision: Option<String>,
    pub workers: Vec<Worker>,
    /// Pods slurmops makes and deletes itself (a perNode NodeSet's), not a StatefulSet's.
    pub managed: bool,
    /// The canary record of the workload (`slurmops.dev/canary`): the last verdict, raw.
    pub canary: Option<String>,
    /// The revision every worker ran before the update began (a StatefulSet's
    /// `currentRevision`): rolling back to it needs no canary.
    pub current_revision: Option<String>,
}

/// What git wants of the NodeSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// In cluster.yaml with this many replicas (workers at or above it leave).
    Replicas(u32),
    /// The live replicas stay: an autoscaled NodeSet (autoscale drains its own scale-ins), or a
    /// rollout-only pass.
    Current,
    /// Gone from cluster.yaml: every worker leaves, then the StatefulSet is pruned.
    Removed,
    /// A NodeSet whose pods slurmops makes: exactly these workers (made or to be made); every
    /// other one leaves, drained with WHY (node left, scale-in).
    Only {
        keep: BTreeSet<String>,
        why: DrainReason,
    },
}

impl Want {
    /// Whether worker W leaves.
    pub fn leaves(&self, w: &Worker) -> bool {
        match self {
            Want::Replicas(t) => w.ordinal.is_none_or(|i| i >= *t),
            Want::Removed => true,
            Want::Current => false,
            Want::Only { keep, .. } => !keep.contains(&w.name),
        }
    }
}

/// The NodeSet's `update` policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub max_unavailable: u32,
    /// Seconds a drain may wait for jobs before `force` deletes the pod anyway.
    pub drain_timeout: Option<i64>,
    pub force: bool,
    /// Seconds a Ready worker may stay unknown to Slurm before it is replaced.
    pub registration_grace: i64,
    /// What the rollout's canary lets it do.
    pub gate: Gate,
    /// What the maintenance windows let it do.
    pub window: WindowGate,
    /// `update.runningJobs: requeue`: which running jobs a worker drained for the rollout
    /// requeues, and after how long (None: it waits for them).
    pub requeue: Option<RequeueRule>,
}

/// `update.requeue` of a NodeSet whose `runningJobs` is `requeue`, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequeueRule {
    /// Seconds a drained worker waits for its jobs first.
    pub after: i64,
    pub partitions: Vec<String>,
    pub qos: Vec<String>,
    pub max_nodes: Option<u32>,
}

/// Whether a maintenance window lets the rollout drain workers now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WindowGate {
    /// No window asked for, or one is open.
    #[default]
    Open,
    /// Outside a window: no worker is drained for the rollout, but idle ones when IDLE_MAY_ROLL
    /// (`window: preferred`). Workers already draining go on; drained ones are replaced.
    Closed { idle_may_roll: bool },
}

/// Seconds a Ready worker may stay unknown to Slurm before a pass replaces it.
pub const REGISTRATION_GRACE: i64 = 300;

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            max_unavailable: 1,
            drain_timeout: None,
            force: false,
            registration_grace: REGISTRATION_GRACE,
            gate: Gate::Open,
            window: WindowGate::Open,
            requeue: None,
        }
    }
}

/// A step that is safe now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// DRAIN with `slurmops: REASON`.
    Drain { node: String, reason: DrainReason },
    /// Delete the pod (uid precondition): its node is drained, unknown to Slurm, or forced.
    Delete {
        pod: String,
        uid: String,
        forced: bool,
    },
    /// RESUME a drain the controller set, for a worker that is wanted as it is.
    Resume { node: String },
    /// Put the worker's Slurm node in the block of its Kubernetes node (`TOPOLOGY:BLOCK`).
    SetTopology { node: String, topology: String },
    /// Submit a canary's validation job (its script read from the ConfigMap FROM, when set).
    Submit {
        job: crate::slurm::JobRequest,
        from: Option<crate::cluster::canary::ScriptRef>,
    },
    /// Submit an active check's job.
    CheckSubmit { job: crate::slurm::JobRequest },
    /// Cancel an active check's job (past its timeout, or waiting on a worker that failed).
    CheckCancel { job: u64 },
    /// Keep an active check's result on the worker's pod (its condition).
    Mark {
        pod: String,
        check: String,
        mark: crate::controller::mark::Mark,
    },
    /// Cancel a validation job that no longer decides anything.
    Cancel { job: u64 },
    /// DRAIN with `slurmops: REASON`, replacing a reason of ours (a failed canary).
    Hold { node: String, reason: DrainReason },
    /// Reserve the workers that wait for a maintenance window, for the window.
    Reserve {
        request: crate::slurm::ReservationRequest,
        /// The ConfigMap slurmctld's sidecar makes it from (slurmrestd cannot); None: slurmrestd.
        sidecar: Option<String>,
    },
    /// Requeue the jobs on NODE, a worker drained for the rollout, by setting it DOWN (Slurm
    /// requeues the batch jobs of a node that fails when they may be requeued): every job on it
    /// is one (`decide::requeue_now`).
    Requeue { node: String, jobs: Vec<Holder> },
    /// Give a maintenance reservation back (SIDECAR: as `Reserve`).
    Unreserve {
        name: String,
        sidecar: Option<String>,
    },
}

/// A job that holds a worker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    pub id: u64,
    pub user: String,
    /// When it started (UNIX seconds), when Slurm says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<i64>,
    /// Expected end (UNIX seconds), when Slurm knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<i64>,
}

/// A worker that waits for jobs to end before it can go.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Waiting {
    pub node: String,
    /// Why it goes: rollout, scale-in, NodeSet removed.
    pub why: String,
    pub jobs: Vec<Holder>,
    /// Draining since (UNIX seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
}

/// Where a NodeSet stands: what `slurmops status` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    pub node_set: String,
    /// The StatefulSet's update revision (empty until its controller saw the change).
    pub revision: String,
    pub replicas: u32,
    /// Workers on the update revision and Ready.
    pub updated: u32,
    /// Workers out of service for this NodeSet's work: draining, deleted, starting.
    pub in_flight: Vec<String>,
    /// Workers that wait for jobs (the jobs, their users and expected ends).
    pub waiting: Vec<Waiting>,
    /// Workers leaving for a scale-in or removal.
    pub leaving: Vec<String>,
    /// Workers in no block or switch although their NodeSet is in a topology, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unplaced: Vec<String>,
    /// The rollout's canary, when the NodeSet has one and a rollout needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<crate::controller::gate::CanaryProgress>,
    /// Workers whose rollout waits for a maintenance window, and when the next one opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowWait>,
    /// Active checks on its workers (`policy.activeChecks`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::controller::mark::Summary>,
    pub done: bool,
    /// Entries left out of the lists above to keep the status ConfigMap small (see
    /// `status::bound`): the counts stay exact.
    #[serde(default, skip_serializing_if = "Omitted::is_empty")]
    pub omitted: Omitted,
}

/// How many entries of each list of a `Progress` the status left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Omitted {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waiting: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub leaving: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unplaced: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub window: usize,
    /// Jobs left out of the waiting workers' lists, all together.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub jobs: usize,
}

impl Omitted {
    pub fn is_empty(&self) -> bool {
        *self == Omitted::default()
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Workers held back until a maintenance window opens.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowWait {
    pub workers: Vec<String>,
    /// The next window (UNIX seconds), when the schedule names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closes: Option<i64>,
    /// The time zone of the schedule that names that window (status tells the window in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The Slurm reservation that holds jobs back ahead of the window, or why there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

/// The outcome for one NodeSet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub actions: Vec<Action>,
    pub progress: Progress,
    /// Scale-in not yet safe: the StatefulSet keeps this many replicas for now.
    pub hold_replicas: Option<u32>,
    /// Removed NodeSet whose workers are not all drained: its StatefulSet is not pruned yet.
    pub keep: bool,
    /// Pods to make now (slurmops-made NodeSets): (pod, the Kubernetes node it is bound to).
    pub create: Vec<(String, Option<String>)>,
    /// A canary verdict to keep on the workload once the actions are done.
    pub record: Option<crate::controller::gate::Record>,
}
