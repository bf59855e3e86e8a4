//! The cluster.yaml format: one `SlurmCluster` document describes a whole Slurm cluster.
//!
//! These types are the single source of truth: the JSON Schema (`schema/cluster.schema.json`),
//! the structural checks with positions and the renderer are all derived from them. Field docs
//! become schema descriptions, so an editor with yaml-language-server shows them as hover help.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvVar, PodSecurityContext, ResourceRequirements, SecurityContext,
    Toleration, TopologySpreadConstraint, Volume, VolumeMount,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::accounts::*;
pub use super::nodeset::*;
pub use super::policy::*;
use super::values::{Duration, SlurmValue};

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
    /// NetworkPolicies limiting who reaches slurmctld, slurmdbd and slurmrestd (off by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicy>,
    /// Copies taken before a Slurm upgrade converts the accounting database and slurmctld's
    /// state in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<super::backup::Backup>,
    /// How changes are applied.
    #[serde(default)]
    pub policy: Policy,
}

/// Who may reach the control plane. With it, slurmctld takes connections only from the cluster's
/// own pods, slurmdbd only from slurmctld and slurmrestd, and slurmrestd from the cluster's pods
/// and the namespaces listed (where slurmops runs, a monitoring namespace). Workers and login
/// pods are not limited (jobs talk between workers; users reach login pods).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicy {
    #[serde(default = "yes_network")]
    pub enabled: bool,
    /// Namespaces (by name) whose pods may reach slurmrestd, e.g. `[slurmops]`.
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

/// A reference to one key of a Kubernetes Secret in the cluster's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-slurmops-secret-ref" = true))]
pub struct SecretRef {
    /// Name of the Secret.
    pub name: String,
    /// Key inside the Secret.
    pub key: String,
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

/// Container images. A component's image defaults to
/// `REGISTRY/COMPONENT:SLURMVERSION-FLAVOR` (the layout of the Slinky images).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Images {
    #[serde(default = "default_registry")]
    pub registry: String,
    #[serde(default = "default_flavor")]
    pub flavor: String,
    #[serde(default = "default_pull_policy")]
    pub pull_policy: PullPolicy,
    /// Where the images keep Slurm's daemons (slurmctld, slurmd, slurmdbd, slurmrestd): each runs
    /// by this absolute path, never found through a search path. `/usr/sbin` in Slinky's images
    /// and Debian's packages; e.g. `/usr/local/sbin` for a plain `./configure` build.
    #[serde(default = "default_sbin")]
    pub sbin: String,
    /// Full image reference overriding the default for one component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmctld: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmrestd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmdbd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<String>,
}

impl Default for Images {
    fn default() -> Self {
        Images {
            registry: default_registry(),
            flavor: default_flavor(),
            pull_policy: default_pull_policy(),
            sbin: default_sbin(),
            slurmctld: None,
            slurmd: None,
            slurmrestd: None,
            slurmdbd: None,
            login: None,
        }
    }
}

fn default_registry() -> String {
    "ghcr.io/slinkyproject".into()
}
fn default_flavor() -> String {
    "ubuntu24.04".into()
}
fn default_sbin() -> String {
    "/usr/sbin".into()
}
fn default_pull_policy() -> PullPolicy {
    PullPolicy::IfNotPresent
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// Settings every pod-bearing component shares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSettings {
    /// ServiceAccount of the component's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// CPU and memory of the main container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Added to the affinity slurmops renders (workers: one per Kubernetes node; control plane:
    /// spread over nodes): anti-affinity terms are appended, node and pod affinity are yours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Extra fields merged into the pod template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodOverrides>,
}

/// Typed additions to a rendered pod template. Lists are appended, maps merged, scalars replaced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodOverrides {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Environment variables added to the main container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Sidecar containers added next to the main container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
}

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

pub(super) fn yes() -> bool {
    true
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

/// slurmdbd with an external MySQL/MariaDB.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accounting {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, flatten)]
    pub pod: PodSettings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<Database>,
    /// Extra slurmdbd.conf settings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slurmdbd_conf: BTreeMap<String, SlurmValue>,
    /// QOS slurmops creates and keeps as written here (through slurmrestd's slurmdb endpoints).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qos: Vec<Qos>,
    /// Accounts of this cluster, a tree under Slurm's `root` account.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<Account>,
    /// Users and the accounts each may charge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<User>,
}

impl Accounting {
    /// Declares accounting objects for slurmops to manage.
    pub fn manages_objects(&self) -> bool {
        self.enabled && !(self.qos.is_empty() && self.accounts.is_empty() && self.users.is_empty())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Database {
    /// The MySQL/MariaDB host (an external or operator-managed database, the production path);
    /// leave it out with `inCluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default = "default_db_port")]
    pub port: u16,
    /// Database name (StorageLoc).
    #[serde(default = "default_db_name")]
    pub name: String,
    pub user: String,
    /// The database password, by reference; it never appears in rendered objects.
    pub password: SecretRef,
    /// A MariaDB slurmops renders in the cluster (StatefulSet on a PVC, Service, PDB), with
    /// this database and user made at its first start: the quickstart path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_cluster: Option<InClusterDatabase>,
}

/// The in-cluster MariaDB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InClusterDatabase {
    /// Size of its volume, e.g. `20Gi`.
    pub storage: String,
    /// StorageClass of the volume (default: the cluster's default class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// Container image (default `docker.io/library/mariadb:11.8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// CPU and memory; half the memory limit (or request) becomes InnoDB's buffer pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

fn default_db_port() -> u16 {
    3306
}
fn default_db_name() -> String {
    "slurm_acct_db".into()
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

pub(super) fn one() -> u32 {
    1
}

/// Login pods (sackd + sshd) users reach over SSH.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoginSet {
    pub name: String,
    #[serde(default = "one")]
    pub replicas: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default)]
    pub service: LoginService,
    /// authorized_keys for root, by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorized_keys: Option<SecretRef>,
    /// sssd.conf (user directory), by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sssd_conf: Option<SecretRef>,
    /// Volumes of the login pods, e.g. the shared filesystem users stage data on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Mounts into the login container of volumes declared in `volumes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// securityContext of the login container (e.g. `privileged: true` where enroot must run,
    /// if the cluster allows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<SecurityContext>,
    #[serde(default, flatten)]
    pub pod: PodSettings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoginService {
    #[serde(rename = "type", default = "default_service_type")]
    pub type_: ServiceType,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default = "default_ssh_port")]
    pub port: u16,
}

impl Default for LoginService {
    fn default() -> Self {
        LoginService {
            type_: default_service_type(),
            annotations: BTreeMap::new(),
            port: 22,
        }
    }
}

fn default_service_type() -> ServiceType {
    ServiceType::ClusterIP
}
fn default_ssh_port() -> u16 {
    22
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ServiceType {
    ClusterIP,
    NodePort,
    LoadBalancer,
}

impl ServiceType {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

impl ClusterSpec {
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

/// Network topologies for topology-aware scheduling, in Slurm's topology.yaml: NVLink blocks
/// (`block`, Slurm's topology `nvlink`), a tree of switches (`tree`, topology `fabric`), or both,
/// each NodeSet in at most one. The block one is the cluster's default when both are set; a
/// partition names another with `topology`. Slurm 25.11 and later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Topology {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockTopology>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeTopology>,
}

/// A partition's topology (`partitions[].topology`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TopologyKind {
    Block,
    Tree,
}

/// Tree topology (a fabric of switches): Slurm places a job under as few switches as it can, under
/// one leaf switch when it fits there. Each leaf switch is declared in Slurm's topology.yaml under
/// one root switch; a worker joins the leaf switch its Kubernetes node's label names once its
/// slurmd has registered (slurmops sets the node's topology through slurmrestd).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TreeTopology {
    /// Kubernetes node label naming the leaf switch of the node a worker runs on (a rack's, or an
    /// InfiniBand leaf switch's, as the fabric's discovery labels it).
    pub node_label: String,
    /// The leaf switches: values of `nodeLabel`, each a Slurm switch of the same name.
    pub switches: Vec<String>,
    /// NodeSets placed in the tree.
    pub node_sets: Vec<String>,
}

/// Block topology (NVLink domains): nodes of one block share a fast interconnect. Slurm 25.11 and
/// later. Each block is declared in Slurm's topology.yaml; a worker joins the block its Kubernetes
/// node's label names once its slurmd has registered (slurmops sets the node's topology through
/// slurmrestd). Until then, and on a node whose label names no listed block, the worker takes
/// single-node jobs only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockTopology {
    /// Kubernetes node label naming the block of the node a worker runs on,
    /// e.g. `nvidia.com/gpu.clique`.
    pub node_label: String,
    /// The blocks: values of `nodeLabel`, one per NVLink domain. Each is a Slurm block of the
    /// same name.
    pub blocks: Vec<String>,
    /// NodeSets placed in blocks.
    pub node_sets: Vec<String>,
    /// Nodes per block (e.g. 18 trays of a GB200 NVL72 rack).
    pub block_size: u32,
    /// TopologyParam=BlockAsNodeRank: order node ranks by block.
    #[serde(default = "yes")]
    pub block_as_node_rank: bool,
}

pub(super) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// One topology whose workers slurmops places in Slurm: its name there, what its units are, the
/// Kubernetes node label naming a node's unit, the units declared, and its NodeSets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placing<'a> {
    pub kind: TopologyKind,
    /// Slurm's name of the topology (a worker's topology is `NAME:UNIT`).
    pub name: &'static str,
    /// What a unit is: `block` or `switch`.
    pub unit: &'static str,
    /// The key listing the units: `blocks` or `switches`.
    pub units_key: &'static str,
    pub node_label: &'a str,
    pub units: &'a [String],
    pub node_sets: &'a [String],
}

/// Slurm's names of the topologies slurmops renders.
pub const TOPOLOGY_BLOCK: &str = "nvlink";
pub const TOPOLOGY_TREE: &str = "fabric";

impl TopologyKind {
    /// Slurm's name of it.
    pub fn slurm_name(self) -> &'static str {
        match self {
            TopologyKind::Block => TOPOLOGY_BLOCK,
            TopologyKind::Tree => TOPOLOGY_TREE,
        }
    }

    /// Its key in `spec.topology`.
    pub fn key(self) -> &'static str {
        match self {
            TopologyKind::Block => "block",
            TopologyKind::Tree => "tree",
        }
    }
}

impl Topology {
    /// Each topology set, the block one first.
    pub fn placings(&self) -> Vec<Placing<'_>> {
        let block = self.block.iter().map(|b| Placing {
            kind: TopologyKind::Block,
            name: TOPOLOGY_BLOCK,
            unit: "block",
            units_key: "blocks",
            node_label: &b.node_label,
            units: &b.blocks,
            node_sets: &b.node_sets,
        });
        let tree = self.tree.iter().map(|t| Placing {
            kind: TopologyKind::Tree,
            name: TOPOLOGY_TREE,
            unit: "switch",
            units_key: "switches",
            node_label: &t.node_label,
            units: &t.switches,
            node_sets: &t.node_sets,
        });
        block.chain(tree).collect()
    }

    /// The cluster's default topology: the block one when set, else the tree.
    pub fn default_kind(&self) -> TopologyKind {
        match self.block {
            Some(_) => TopologyKind::Block,
            None => TopologyKind::Tree,
        }
    }

    /// Whether KIND is set.
    pub fn has(&self, kind: TopologyKind) -> bool {
        match kind {
            TopologyKind::Block => self.block.is_some(),
            TopologyKind::Tree => self.tree.is_some(),
        }
    }
}
