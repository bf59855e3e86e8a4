//! What the install allows a commit (`Guardrails`): the daemon's flags and policy file, never
//! git's. The checks on cluster.yaml are `guard`, `guard_code` and `guard_images`'s; the closed
//! policy on what it renders is the `guarded` stage's.

/// What the install allows a commit.
#[derive(Debug, Clone, Default)]
pub struct Guardrails {
    /// The namespaces cluster.yaml's `metadata.namespace` may name (None: any).
    pub namespaces: Option<Vec<String>>,
    /// Node root checked (the daemon); false: not checked (`validate`, `plan` without a policy).
    pub pods: bool,
    /// hostPath volumes allowed under these prefixes.
    pub host_paths: Vec<String>,
    /// Privileged containers, added capabilities beyond baseline, host namespaces.
    pub privileged: bool,
    /// ServiceAccounts pods may run as.
    pub service_accounts: Vec<String>,
    /// Tolerations of the control plane's taints.
    pub control_plane: bool,
    /// Secrets cluster.yaml may name besides the cluster's own (spec.auth's keys, the database
    /// password) where slurmops mounts them.
    pub secrets: Vec<String>,
    /// Hosts `accounting.database.host` may name: slurmdbd sends them the database password.
    pub database_hosts: Vec<String>,
    /// Image repositories (and those below them) images may come from; empty: the images
    /// slurmops renders by default (`guard_images::DEFAULT_IMAGES`).
    pub images: Vec<String>,
    /// Every image pinned by a sha256 digest.
    pub require_digests: bool,
    /// Digests (`sha256:HEX`) of the inline code the install reviewed: scripts, health check,
    /// code-bearing config files.
    pub programs: Vec<String>,
    /// slurm.conf and slurmdbd.conf keys that name programs or where credentials go, allowed.
    pub slurm_keys: Vec<String>,
    /// PersistentVolumeClaims pods may mount.
    pub volume_claims: Vec<String>,
    /// ConfigMaps pods may mount and Slurm may run scripts from.
    pub config_maps: Vec<String>,
    /// Secrets cluster.yaml may name as the cluster's own (`auth.slurmKey`, `auth.jwtKey`, the
    /// database password): slurmops mounts them into Slurm's pods. Empty: the names the README
    /// creates (`DEFAULT_CLUSTER_SECRETS`).
    pub cluster_secrets: Vec<String>,
    /// Environment variables a push may add: `NAME` or `PREFIX*` (never a search path, loader,
    /// shell, Slurm, MPI or runtime variable, whatever the rule: `guarded::env`).
    pub env: Vec<String>,
    /// Volume types a push may add beyond emptyDir, configMap, secret, persistentVolumeClaim and
    /// projected (e.g. `nfs`, `csi`).
    pub volume_types: Vec<String>,
    /// Slurm users accounts-as-code may make Slurm administrators or operators (`adminLevel`).
    pub slurm_admins: Vec<String>,
    /// Annotation prefixes a push may put on what slurmops renders (besides slurmops's own).
    pub annotations: Vec<String>,
    /// RuntimeClasses pods may name.
    pub runtime_classes: Vec<String>,
}

/// The cluster's own Secrets an install assigns when it names none: those the README creates.
pub const DEFAULT_CLUSTER_SECRETS: &[&str] = &["slurm-auth", "slurm-jwt", "slurm-db"];

impl Guardrails {
    /// The daemon's defaults: no node root, the namespace given.
    pub fn safe(namespaces: Vec<String>) -> Guardrails {
        Guardrails {
            namespaces: Some(namespaces),
            pods: true,
            ..Guardrails::default()
        }
    }
}
