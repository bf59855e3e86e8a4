//! The cluster.yaml format: one `SlurmCluster` document describes a whole Slurm cluster.
//!
//! These types are the single source of truth: the JSON Schema (`schema/cluster.schema.json`),
//! the structural checks with positions and the renderer are all derived from them. Field docs
//! become schema descriptions, so an editor with yaml-language-server shows them as hover help.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::accounting_settings::*;
pub use super::accounts::*;
use super::backup_settings::Backup;
pub use super::controller_settings::*;
pub use super::images::*;
pub use super::login_sets::*;
pub use super::nodeset::*;
pub use super::pod_settings::*;
pub use super::policy::*;
pub use super::secret_ref::*;
use super::serde_defaults::{one, yes};
pub use super::topology::*;
use super::values::SlurmValue;

pub const API_VERSION: &str = "slurmops.dev/v1alpha1";
pub const KIND: &str = "SlurmCluster";

/// A Slurm cluster on Kubernetes, managed by slurmops from git.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "SlurmCluster")]
pub struct ClusterFile {
    /// Always `slurmops.dev/v1alpha1`.
    pub api_version: String,
    /// Always `SlurmCluster`.
    pub kind: String,
    pub metadata: Metadata,
    pub spec: ClusterSpec,
}

/// Where the cluster lives in Kubernetes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// Name of the cluster; every object slurmops creates is named after it (DNS-1123 label).
    pub name: String,
    /// Namespace holding all objects of this cluster.
    pub namespace: String,
    /// Labels added to every rendered object (at most 256).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to every rendered object (at most 256).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The desired Slurm cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpec {
    /// Slurm `ClusterName` (at most 40 characters). Defaults to `metadata.name`. Changing it
    /// after the first deployment makes slurmctld refuse its saved state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// The Slurm release every component runs unless its image is overridden, e.g. `"24.11"`.
    pub slurm_version: String,
    /// Container images.
    #[serde(default)]
    pub images: Images,
    /// Secrets in the namespace used to pull images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<String>,
    /// PriorityClass of every pod of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Keys, by reference to Kubernetes Secrets. Secret material is never written in cluster.yaml.
    pub auth: Auth,
    #[serde(default)]
    pub controller: Controller,
    #[serde(default)]
    pub accounting: Accounting,
    #[serde(default)]
    pub restapi: RestApi,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub login_sets: Vec<LoginSet>,
    /// Groups of identical slurmd workers; each becomes one StatefulSet and one Slurm NodeSet.
    pub node_sets: Vec<NodeSet>,
    pub partitions: Vec<Partition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    /// NetworkPolicies limiting who reaches each component's pods (on unless `enabled: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicy>,
    /// Copies taken before a Slurm upgrade converts the accounting database and slurmctld's
    /// state in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<Backup>,
    /// How changes are applied.
    #[serde(default)]
    pub policy: Policy,
}

/// Who may reach the cluster's pods: a NetworkPolicy per component, rendered unless `enabled` is
/// false. slurmctld takes connections only from the cluster's own pods (and the monitoring
/// namespaces listed); slurmdbd only from the cluster's own pods; the in-cluster MariaDB only
/// from slurmdbd (and the scheduled copies); slurmrestd from the cluster's own pods, the slurmops
/// daemon's pods (labelled `app.kubernetes.io/name: slurmops`, in any namespace) and the
/// namespaces listed; workers from the cluster's own pods, on every port; login pods from anyone
/// on ssh and from the cluster's own pods on every port. They take effect where the cluster's
/// network plugin enforces NetworkPolicies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Render the policies (default true); false renders none, and leaves every pod open.
    #[serde(default = "yes_network")]
    pub enabled: bool,
    /// Namespaces (by name) whose pods may reach slurmrestd besides the daemon's, e.g. a
    /// dashboard's `[monitoring]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restapi_from_namespaces: Vec<String>,
    /// Namespaces (by name) whose pods may scrape slurmctld's metrics (its port), e.g.
    /// `[monitoring]`; with `controller.metrics` on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics_from_namespaces: Vec<String>,
}

fn yes_network() -> bool {
    true
}

/// Absent: the policies are rendered.
impl Default for NetworkPolicy {
    fn default() -> Self {
        NetworkPolicy {
            enabled: true,
            restapi_from_namespaces: Vec::new(),
            metrics_from_namespaces: Vec::new(),
        }
    }
}

/// Authentication keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Auth {
    /// The shared `slurm.key` of auth/slurm (at least 1 KiB of random bytes).
    pub slurm_key: SecretRef,
    /// The HS256 key of auth/jwt, used by slurmrestd and by slurmops itself.
    pub jwt_key: SecretRef,
}

/// slurmrestd.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestApi {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "one")]
    pub replicas: u32,
    #[serde(default, flatten)]
    pub pod: PodSettings,
}

impl Default for RestApi {
    fn default() -> Self {
        RestApi {
            enabled: true,
            replicas: 1,
            pod: PodSettings::default(),
        }
    }
}

impl ClusterSpec {
    /// A NodeSet waits for windows, and the Slurm release cannot make their reservations
    /// through slurmrestd: slurmctld's `reconfigure` sidecar makes them with `scontrol` from the
    /// ConfigMap `<cluster>-maintenance`, which the controller writes.
    pub fn reserves_through_sidecar(&self) -> bool {
        self.node_sets
            .iter()
            .any(|n| n.update.window != super::window::WindowMode::None)
            && super::release::find(&self.slurm_version).is_some_and(|r| !r.rest_reservations)
    }

    /// Whether clients reach the controller in control at one address
    /// (`controller.ha.serviceAddress`).
    pub fn behind_one_address(&self) -> bool {
        self.controller
            .ha
            .as_ref()
            .is_some_and(|h| h.service_address)
    }

    /// The partition a job on NODE_SET's workers runs in: the first that lists the NodeSet,
    /// else the first of `ALL` (canary validations and active checks).
    pub fn partition_of(&self, node_set: &str) -> Option<&Partition> {
        let holds = |p: &&Partition, n: &str| p.node_sets.iter().any(|x| x == n);
        let mut ps = self.partitions.iter();
        ps.clone()
            .find(|p| holds(p, node_set))
            .or_else(|| ps.find(|p| holds(p, "ALL")))
    }
}

/// A Slurm partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Partition {
    pub name: String,
    /// NodeSets in the partition, or `[ALL]`.
    pub node_sets: Vec<String>,
    #[serde(default)]
    pub default: bool,
    /// Slurm time (`UNLIMITED`, `MINUTES`, `D-HH:MM:SS`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time: Option<String>,
    /// The topology its jobs are placed by (`block` or `tree`, of `spec.topology`); by default
    /// the cluster's (the block one when both are set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyKind>,
    /// Further PartitionName options, e.g. `OverSubscribe: EXCLUSIVE`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, SlurmValue>,
}
