//! `spec.policy` of cluster.yaml: how slurmops applies changes (recreate, suspend, conflicts,
//! drift, prune bounds, ignored fields), when disruptive steps may run (maintenance windows) and
//! which Kubernetes node problems drain workers. `types` re-exports everything here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::accounts::AccountingPolicy;
use super::serde_defaults::is_default;
use super::values::IntOrPercent;

/// How slurmops applies changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    /// Allow apply to recreate a StatefulSet (orphaning its pods) when an immutable field changes.
    #[serde(default)]
    pub allow_recreate: bool,
    /// Stop applying changes (status keeps being reported).
    #[serde(default)]
    pub suspend: bool,
    /// Take over fields another field manager owns instead of reporting the conflict.
    #[serde(default)]
    pub force_conflicts: bool,
    /// Report hand edits of managed objects (drift) without correcting them; changes that come
    /// from cluster.yaml are still applied.
    #[serde(default)]
    pub detect_drift_only: bool,
    /// Largest share of the objects slurmops manages that one apply may prune (default 50%);
    /// pruning more, or everything, needs `slurmops apply --allow-mass-prune`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_prune: Option<IntOrPercent>,
    /// Differences slurmops neither corrects nor reports (e.g. a field another controller owns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_differences: Vec<IgnoreDifference>,
    /// When disruptive rollout steps may run, for NodeSets whose `update.window` asks for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintenance_windows: Vec<super::window::MaintenanceWindow>,
    /// Whether restarting slurmctld (a setting a reconfigure cannot change, a new image) and
    /// starting a Slurm upgrade wait for a maintenance window: `none` (default) or `required`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub control_plane_window: super::window::ControlPlaneWindow,
    /// Kubernetes node problems that drain the workers on the node in Slurm, besides a cordon
    /// (e.g. a condition Node Problem Detector or the GPU operator sets). A drained worker is
    /// resumed when the problem clears, if the drain is still slurmops' own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_health: Option<NodeHealth>,
    /// Health checks that run as Slurm jobs: on new workers before they take users' jobs, and
    /// on a schedule (see `slurmops explain policy.activeChecks`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_checks: Vec<super::active_checks::ActiveCheck>,
    /// Accounting objects (QOS, accounts, users) slurmops did not create.
    #[serde(default, skip_serializing_if = "is_default")]
    pub accounting: AccountingPolicy,
}

/// Node conditions and taints that mean "do not run jobs here".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeHealth {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<NodeConditionRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<TaintRule>,
}

/// A node condition: TYPE with STATUS (e.g. `GpuUnhealthy` `"True"`, or `Ready` `"False"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeConditionRule {
    #[serde(rename = "type")]
    pub type_: String,
    /// `"True"`, `"False"` or `"Unknown"`.
    #[serde(default = "default_condition_status")]
    pub status: String,
    /// Requeue at once the jobs of the workers it drains (a preemption warning: the node goes
    /// soon): see `TaintRule::requeue`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub requeue: bool,
}

fn default_condition_status() -> String {
    "True".into()
}

/// A node taint by KEY, of any effect unless EFFECT is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaintRule {
    pub key: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    /// Requeue at once the jobs of the workers it drains (a Spot preemption warning, e.g.
    /// `cloud.google.com/impending-node-termination`): once drained, a worker whose every job is
    /// a batch job Slurm may requeue is set DOWN (Slurm requeues them); one running any other job
    /// is only drained, and that job is never killed by slurmops.
    #[serde(default, skip_serializing_if = "is_default")]
    pub requeue: bool,
}

/// A field slurmops leaves alone on some objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IgnoreDifference {
    /// Kind of the objects, e.g. `StatefulSet`.
    pub kind: String,
    /// Only the object of this name (default: every object of the kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// JSON pointers of the ignored fields, e.g. `/spec/replicas`.
    pub json_pointers: Vec<String>,
}
