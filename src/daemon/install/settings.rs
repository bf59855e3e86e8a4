//! What to install (`Install`, `Widened`), the daemon's memory limit as measured, and the
//! names and labels its objects carry.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub const NAME: &str = crate::vocab::DAEMON_NAME;
pub(super) const PORT: i32 = 8080;

/// What to install.
#[derive(Debug, Clone)]
pub struct Install {
    /// Where the daemon runs (its status ConfigMap and Lease live here).
    pub namespace: String,
    /// Namespaces of the clusters it manages (cluster.yaml's metadata.namespace).
    pub cluster_namespaces: Vec<String>,
    /// The one cluster (metadata.name) this daemon manages, when several share a namespace.
    pub cluster: Option<String>,
    pub image: String,
    pub repo: String,
    pub branch: String,
    pub path: String,
    pub replicas: i32,
    /// Secret with `token`, or `ssh-privatekey` and `known_hosts`.
    pub git_secret: Option<String>,
    /// Secret with the webhook HMAC key under `secret`.
    pub webhook_secret: Option<String>,
    /// Secret with the live view's bearer token under `token`.
    pub ui_token_secret: Option<String>,
    /// The ClusterRole (and binding) to read Nodes, so that cordons drain workers.
    pub node_reader: bool,
    /// The JWT key Secrets (`spec.auth.jwtKey.name`) the daemon may read; empty: no Slurm.
    pub jwt_secrets: Vec<String>,
    /// The Slurm user its jobs run as, when not the default (`daemon`).
    pub job_user: Option<String>,
    /// ConfigMap with `allowed_signers` (SSH keys allowed to sign commits).
    pub allowed_signers: Option<String>,
    /// ConfigMap with `allowed_gpg_keys` (armored OpenPGP keys allowed to sign commits).
    pub allowed_gpg_keys: Option<String>,
    /// Render the daemon's NetworkPolicy (ingress to its port only, from `reachable_from`).
    pub network_policy: bool,
    /// Namespaces whose pods may reach the daemon's port (metrics, webhook, live view); empty:
    /// every pod of the Kubernetes cluster.
    pub reachable_from: Vec<String>,
    /// Guardrails widened at install (the daemon's `--allow-*` flags).
    pub guard: Widened,
    /// Workers the daemon's clusters have at most: its memory limit follows (`memory_limit_mib`).
    pub workers: u32,
    /// Jobs their queues hold at most: the daemon keeps them when a decision needs the queue.
    pub jobs: u32,
}

/// The daemon's peak memory measured by the scale bench (`tests/bench.sh scale`, release build,
/// 50,000 jobs in the queue, a rollout's first wave included): MiB at no workers, and per 1,000
/// workers (each with its GPU-sized Kubernetes node watched).
pub const PEAK_BASE_MIB: u32 = 56;
pub const PEAK_PER_THOUSAND_MIB: u32 = 43;
/// MiB per 10,000 jobs kept, when every pass needs the queue (autoscale, canaries; the jobs
/// bench, `tests/bench.sh jobs`: 1,000 to 100,000 held jobs).
pub const PEAK_PER_TEN_THOUSAND_JOBS_MIB: u32 = 11;

/// The memory limit for WORKERS and JOBS: the measured peak and half again, in steps of 64 MiB,
/// at least 256 MiB.
pub fn memory_limit_mib(workers: u32, jobs: u32) -> u32 {
    let peak = PEAK_BASE_MIB
        + PEAK_PER_THOUSAND_MIB * workers.div_ceil(1000)
        + PEAK_PER_TEN_THOUSAND_JOBS_MIB * jobs.div_ceil(10_000);
    (peak * 3 / 2).div_ceil(64).max(4) * 64
}

impl Install {
    /// The daemon's objects' name: `slurmops`, or `slurmops-CLUSTER` for a daemon per cluster.
    pub fn name(&self) -> String {
        match &self.cluster {
            Some(c) => format!("{NAME}-{c}"),
            None => NAME.to_string(),
        }
    }

    /// Whether the daemon verifies commit signatures.
    pub fn verifies_signatures(&self) -> bool {
        self.allowed_signers.is_some() || self.allowed_gpg_keys.is_some()
    }
}

/// What `install --print` says first when signatures are not verified.
pub const UNSIGNED_WARNING: &str = "WARNING: commit signature verification is OFF: every commit pushed to the branch is applied to the cluster. Turn it on with --allowed-signers CONFIGMAP and/or --allowed-gpg-keys CONFIGMAP.";

/// Name of the cluster-scoped node reader of daemon NAME installed in NAMESPACE (one per
/// install, so several installs do not share a binding).
pub fn node_reader_name(name: &str, namespace: &str) -> String {
    format!("{name}-{namespace}-node-reader")
}

/// What the install lets a commit ask for beyond the daemon's safe defaults.
#[derive(Debug, Clone, Default)]
pub struct Widened {
    /// ConfigMap with `policy.yaml` (the daemon's `--policy`), read-only to the daemon.
    pub policy: Option<String>,
    pub host_paths: Vec<String>,
    pub privileged: bool,
    pub service_accounts: Vec<String>,
    pub control_plane: bool,
    pub secrets: Vec<String>,
    pub database_hosts: Vec<String>,
    /// `guarded` or `trusted` (None: the daemon's default, guarded).
    pub trust: Option<String>,
    pub images: Vec<String>,
    pub require_digests: bool,
    pub programs: Vec<String>,
    pub slurm_keys: Vec<String>,
    pub volume_claims: Vec<String>,
    pub config_maps: Vec<String>,
    pub cluster_secrets: Vec<String>,
    pub env: Vec<String>,
    pub volume_types: Vec<String>,
    pub slurm_admins: Vec<String>,
    pub annotations: Vec<String>,
    pub runtime_classes: Vec<String>,
}

impl Install {
    /// The namespaces its clusters live in: those given, else its own.
    pub fn cluster_namespaces(&self) -> Vec<String> {
        match self.cluster_namespaces.is_empty() {
            true => vec![self.namespace.clone()],
            false => self.cluster_namespaces.clone(),
        }
    }
}

pub(in crate::daemon) fn meta(i: &Install, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(i.name()),
        namespace: Some(namespace.into()),
        labels: Some(labels(i)),
        ..ObjectMeta::default()
    }
}

/// The labels of the daemon's objects, also its pods' selector: a daemon per cluster adds the
/// cluster, so that two in one namespace select only their own pods.
pub(in crate::daemon) fn labels(i: &Install) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([
        (crate::vocab::LABEL_NAME.to_string(), NAME.to_string()),
        (crate::vocab::LABEL_MANAGED_BY.to_string(), NAME.to_string()),
    ]);
    if let Some(c) = &i.cluster {
        l.insert(
            crate::status::configmap::LABEL_CLUSTER.to_string(),
            c.clone(),
        );
    }
    l
}
