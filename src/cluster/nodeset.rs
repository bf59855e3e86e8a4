//! A NodeSet of cluster.yaml: a group of identical slurmd workers, their GPUs, how they roll
//! (`update`) and how they scale (`autoscale`). Split from `types` so that the cluster's format
//! reads one part at a time; `types` re-exports everything here.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, SecurityContext, Volume, VolumeMount};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::pod_settings::PodSettings;
use super::serde_defaults::{is_default, one, yes};
use super::values::{Duration, IntOrPercent, PER_NODE_LIMIT, Replicas};

/// A group of identical slurmd workers: one StatefulSet (or, `replicas: perNode`, one PodTemplate
/// whose pods slurmops places one per matching Kubernetes node), one Slurm NodeSet. Pod names are
/// the Slurm node names (`NAME-0`, `NAME-1`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSet {
    /// NodeSet name, also the StatefulSet name and the prefix of the Slurm node names.
    pub name: String,
    pub replicas: Replicas,
    /// Full image reference of slurmd; defaults to `images.slurmd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// CPU of each worker (Kubernetes quantity, e.g. `"96"`); also Slurm's `CPUs` when whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Memory of each worker (e.g. `1800Gi`); Slurm's `RealMemory` is derived from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<Gpus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imex: Option<Imex>,
    /// Slurm node features besides the NodeSet's own name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// Slurm scheduling weight (lower is used first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Run slurmd privileged (needed for cgroup job containment). Default true.
    #[serde(default = "yes")]
    pub privileged: bool,
    /// securityContext of the slurmd container, e.g. capabilities for enroot when not
    /// privileged. `privileged` above fills its `privileged` when it leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<SecurityContext>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Mounts into slurmd, e.g. shared filesystems declared in `volumes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// Per-worker volumes (immutable once applied: a change recreates the StatefulSet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    #[serde(default, flatten)]
    pub pod: PodSettings,
    #[serde(default)]
    pub update: UpdatePolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<Autoscale>,
    /// Who makes the workers' pods: `statefulSet` (the default), or `slurmops`, which lets a
    /// scale-in (git or autoscale) take any idle worker back while a higher ordinal runs jobs (a
    /// StatefulSet can only remove its highest ordinals). perNode NodeSets are always made by
    /// slurmops.
    #[serde(default, skip_serializing_if = "is_default")]
    pub pod_management: PodManagement,
    /// What becomes of a worker drained for a drain request on its pod (`slurmops.dev/drain`)
    /// or for its Kubernetes node's problem while that node is cordoned, once no job runs there:
    /// `none` (the default) keeps it drained until the request or the problem clears; `replace`
    /// deletes its pod, once per drain (the new pod is placed elsewhere, or carries no request).
    #[serde(default, skip_serializing_if = "is_default")]
    pub remediation: Remediation,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PodManagement {
    #[default]
    StatefulSet,
    Slurmops,
}

/// `nodeSets[].remediation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Remediation {
    #[default]
    None,
    Replace,
}

impl NodeSet {
    /// Its pods are made and deleted by slurmops from a PodTemplate, not by a StatefulSet.
    pub fn managed(&self) -> bool {
        self.replicas.per_node() || self.pod_management == PodManagement::Slurmops
    }

    /// The most workers the NodeSet may ever have: its Slurm node range and its share of
    /// `MaxNodeCount`.
    pub fn max_workers(&self) -> u32 {
        match self.replicas {
            Replicas::PerNode => PER_NODE_LIMIT,
            Replicas::Count(n) => self.autoscale.as_ref().map_or(n, |a| a.max.max(n)),
        }
    }

    /// Workers a rollout may take out at once; a perNode NodeSet's percentage is of its LIVE
    /// workers.
    pub fn max_unavailable(&self, live: u32) -> u32 {
        let of = match self.replicas {
            Replicas::Count(n) => n,
            Replicas::PerNode => live,
        };
        self.update.max_unavailable.resolve(of).max(1)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gpus {
    /// GPUs per worker.
    pub count: u32,
    /// GPU type as Slurm GRES type, e.g. `h100`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Kubernetes extended resource requested per worker.
    #[serde(default = "default_gpu_resource")]
    pub resource_name: String,
    /// How slurmd finds the devices: `nvml` (NVIDIA's library in the image) or `files`
    /// (`/dev/nvidia0..N-1`).
    #[serde(default = "default_autodetect")]
    pub autodetect: GpuDetect,
}

fn default_gpu_resource() -> String {
    "nvidia.com/gpu".into()
}
fn default_autodetect() -> GpuDetect {
    GpuDetect::Nvml
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GpuDetect {
    Nvml,
    Files,
}

/// NVIDIA IMEX channels for multi-node NVLink (GB200 and later), through a DRA ComputeDomain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Imex {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Name of the ComputeDomain whose channel the workers claim.
    pub compute_domain: String,
    /// ResourceClaimTemplate created for the ComputeDomain; defaults to `COMPUTEDOMAIN-channel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_template: Option<String>,
}

/// How slurmops replaces the workers of this NodeSet: drain in Slurm first, then replace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdatePolicy {
    /// Workers out of service at once during a rollout (count or percentage, more than 0).
    #[serde(default = "default_max_unavailable")]
    pub max_unavailable: IntOrPercent,
    /// How long to wait for running jobs on a draining node.
    #[serde(default = "default_drain_timeout")]
    pub drain_timeout: Duration,
    /// What to do when the drain timeout passes: keep waiting, or replace the pod anyway
    /// (killing the jobs still running on it).
    #[serde(default = "default_on_timeout")]
    pub on_timeout: OnTimeout,
    /// Replace a few workers first and validate them with a Slurm job before the rest roll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<super::canary::Canary>,
    /// Wait for a maintenance window (`policy.maintenanceWindows`) before draining workers:
    /// `required` (every worker), `preferred` (busy ones; idle ones roll any time), `none`.
    #[serde(default, skip_serializing_if = "is_no_window")]
    pub window: super::window::WindowMode,
    /// What a worker drained for the rollout does with the jobs still running on it: `wait` for
    /// them to end (the default), or `requeue` them (see `requeue`): only batch jobs Slurm may
    /// requeue, and only when every job on the worker may be; otherwise it waits.
    #[serde(default, skip_serializing_if = "is_default")]
    pub running_jobs: RunningJobs,
    /// When and which jobs `runningJobs: requeue` requeues.
    #[serde(default, skip_serializing_if = "is_default")]
    pub requeue: Requeue,
}

/// What a worker drained for the rollout does with its running jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunningJobs {
    #[default]
    Wait,
    Requeue,
}

/// Which running jobs a rollout requeues, and after how long: a worker drained for the rollout
/// waits `after` for its jobs to end by themselves; then, when every job still on it is a batch
/// job Slurm may requeue (`--requeue`, or `JobRequeue=1`) that names no nodes (`--nodelist`)
/// and matches the selectors, they are requeued (the node is set DOWN, on which Slurm requeues
/// them and starts them again from their beginning elsewhere) and the worker is replaced. A job
/// that may not be requeued is waited for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Requeue {
    /// How long a drained worker waits for its jobs before they are requeued (default 0s).
    #[serde(default, skip_serializing_if = "is_default")]
    pub after: Duration,
    /// Only jobs of these partitions (default: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<String>,
    /// Only jobs of these QOS (default: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qos: Vec<String>,
    /// Only jobs on at most this many nodes (default: any size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<u32>,
}

fn is_no_window(m: &super::window::WindowMode) -> bool {
    *m == super::window::WindowMode::None
}

impl Default for UpdatePolicy {
    fn default() -> Self {
        UpdatePolicy {
            max_unavailable: default_max_unavailable(),
            drain_timeout: default_drain_timeout(),
            on_timeout: default_on_timeout(),
            canary: None,
            window: super::window::WindowMode::None,
            running_jobs: RunningJobs::Wait,
            requeue: Requeue::default(),
        }
    }
}

fn default_max_unavailable() -> IntOrPercent {
    IntOrPercent::Int(1)
}
fn default_drain_timeout() -> Duration {
    Duration::from_secs(24 * 3600)
}
fn default_on_timeout() -> OnTimeout {
    OnTimeout::Wait
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnTimeout {
    Wait,
    Force,
}

/// Autoscale from Slurm's own queue: pending jobs in the partitions of this NodeSet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Autoscale {
    pub min: u32,
    pub max: u32,
    /// Pending jobs that justify one more worker.
    #[serde(default = "one")]
    pub pending_jobs_per_replica: u32,
    /// How long a worker must stay idle before it is drained and removed.
    #[serde(default = "default_idle_delay")]
    pub scale_down_delay: Duration,
}

fn default_idle_delay() -> Duration {
    Duration::from_secs(600)
}
