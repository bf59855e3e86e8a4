//! `spec.controller`: slurmctld's pod, persistence, high availability, slurm.conf settings,
//! scripts, metrics, extra config files and node health check.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::pod_settings::PodSettings;
use super::secret_ref::SecretRef;
use super::serde_defaults::yes;
use super::values::{Duration, SlurmValue};

/// slurmctld.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Controller {
    #[serde(default, flatten)]
    pub pod: PodSettings,
    #[serde(default)]
    pub persistence: Persistence,
    /// High availability: backup controllers besides the primary. Needs `persistence.existingClaim`
    /// on a ReadWriteMany volume, shared by all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<HighAvailability>,
    /// Extra slurm.conf settings. List-valued parameters (SlurmctldParameters, AuthInfo,
    /// AuthAltParameters, ...) are merged with the generated values; others replace them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slurm_conf: BTreeMap<String, SlurmValue>,
    /// Prolog/Epilog scripts, distributed to every node by configless Slurm.
    #[serde(default)]
    pub scripts: Scripts,
    /// Slurm's OpenMetrics endpoints on slurmctld (Slurm 25.11 and later).
    #[serde(default)]
    pub metrics: Metrics,
    /// Further Slurm config files, by file name (e.g. `plugstack.conf`, `oci.conf`): slurmctld
    /// serves them configless to every slurmd, login pod and client, next to slurm.conf. Only
    /// the files Slurm serves configless are accepted (and the files `plugstack.conf` includes
    /// by name from /etc/slurm).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config_files: BTreeMap<String, ConfigFile>,
    /// A node health check every worker's slurmd runs (`HealthCheckProgram`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

impl Controller {
    /// Whether a script of any kind is called NAME.
    pub fn scripts_named(&self, name: &str) -> bool {
        self.scripts.all().any(|sc| sc.name == name)
    }
}

impl Scripts {
    /// Every script, of every kind.
    pub fn all(&self) -> impl Iterator<Item = &Script> {
        [
            &self.prolog,
            &self.epilog,
            &self.prolog_slurmctld,
            &self.epilog_slurmctld,
        ]
        .into_iter()
        .flatten()
    }
}

/// One config file: its content in cluster.yaml, or a key of a Secret or ConfigMap in the
/// cluster's namespace (exactly one of the three). A referenced file is identified by its
/// reference: to roll out new content, point at a new Secret or ConfigMap (or key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ConfigMapKeyRef>,
}

/// A key of a ConfigMap in the cluster's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMapKeyRef {
    pub name: String,
    pub key: String,
}

/// Slurm's node health check: slurmd runs PROGRAM every INTERVAL on nodes in the listed states.
/// The program decides what a failure does (a health check usually drains its node with
/// `scontrol update nodename=$(hostname) state=drain reason=...`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheck {
    /// The script, starting with `#!`. It reaches the workers as a mounted ConfigMap key, so
    /// a new version is picked up by the running workers without replacing them.
    pub program: String,
    /// How often it runs (`HealthCheckInterval`).
    #[serde(default = "default_health_interval")]
    pub interval: Duration,
    /// Node states it runs on (`HealthCheckNodeState`).
    #[serde(
        default = "default_health_states",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub node_state: Vec<HealthNodeState>,
}

fn default_health_interval() -> Duration {
    Duration::from_secs(300)
}
fn default_health_states() -> Vec<HealthNodeState> {
    vec![HealthNodeState::Any]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HealthNodeState {
    Alloc,
    Any,
    Cycle,
    Idle,
    Mixed,
    NondrainedIdle,
}

impl HealthNodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthNodeState::Alloc => "ALLOC",
            HealthNodeState::Any => "ANY",
            HealthNodeState::Cycle => "CYCLE",
            HealthNodeState::Idle => "IDLE",
            HealthNodeState::Mixed => "MIXED",
            HealthNodeState::NondrainedIdle => "NONDRAINED_IDLE",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Persistence {
    /// Keep slurmctld's StateSaveLocation on a PersistentVolume. Without it, all jobs are lost when
    /// the controller pod restarts.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Size of the volume claimed per controller.
    #[serde(default = "default_state_size")]
    pub size: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// Use this existing PersistentVolumeClaim instead of claiming one per controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing_claim: Option<String>,
}

impl Default for Persistence {
    fn default() -> Self {
        Persistence {
            enabled: true,
            size: default_state_size(),
            storage_class: None,
            existing_claim: None,
        }
    }
}

fn default_state_size() -> String {
    "4Gi".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HighAvailability {
    /// Number of backup slurmctld (1 or more).
    pub backups: u32,
    /// Clients reach whichever controller has control at one address: slurm.conf's
    /// `SlurmctldAddr` names the `CLUSTER-controller` Service, whose only endpoint is the
    /// controller in control (its readiness: the heartbeat in the shared state directory names
    /// it). After a failover, clients (sbatch, srun, slurmd, slurmrestd) go to the new one at
    /// once instead of first waiting out a primary that does not answer. Standby controllers
    /// show as not Ready, and slurmops replaces the controllers itself (standbys first).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub service_address: bool,
}

/// Slurm's own metrics (`metrics/openmetrics`): slurmctld serves `/metrics/jobs`,
/// `/metrics/nodes`, `/metrics/partitions` and `/metrics/scheduler` on its own port. slurmops
/// renders a `CLUSTER-metrics` Service with Prometheus scrape annotations (for `/metrics/nodes`)
/// and, when asked, a Prometheus Operator ServiceMonitor scraping all four.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metrics {
    #[serde(default)]
    pub enabled: bool,
    /// A `monitoring.coreos.com/v1` ServiceMonitor (needs the Prometheus Operator's CRDs:
    /// apply refuses where they are not installed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_monitor: Option<ServiceMonitorSettings>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceMonitorSettings {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Scrape interval.
    #[serde(default = "default_scrape_interval")]
    pub interval: Duration,
    /// Labels the Prometheus instance selects ServiceMonitors by (e.g. `release: prometheus`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

fn default_scrape_interval() -> Duration {
    Duration::from_secs(30)
}

/// Scripts by kind. Each runs where Slurm runs that kind of script.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scripts {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prolog: Vec<Script>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epilog: Vec<Script>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prolog_slurmctld: Vec<Script>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epilog_slurmctld: Vec<Script>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Script {
    /// File name under /etc/slurm, e.g. `prolog-gpu-check.sh`.
    pub name: String,
    /// The script, starting with `#!`.
    pub content: String,
}
