//! The install's guardrails as flags and a policy file, one set for the daemon (always on: its
//! safe defaults, widened by `--allow-*` and `--policy`) and for `validate --guardrails` (the
//! same check in a pull request's CI, so it refuses what the daemon will refuse).

use crate::cluster::Guardrails;
use crate::cluster::guard_file::GuardFile;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct GuardArgs {
    /// A policy file (YAML: trust, clusterNamespaces, allowHostPaths, allowPrivileged,
    /// allowServiceAccounts, allowControlPlane, allowSecrets, allowDatabaseHosts, allowImages,
    /// requireDigests, allowPrograms, allowSlurmKeys, allowVolumeClaims, allowConfigMaps,
    /// allowEnv, allowVolumeTypes, allowSlurmAdmins, allowAnnotations, allowRuntimeClasses,
    /// clusterSecrets)
    /// widening the safe defaults as the flags do; the two add up.
    #[arg(long, env = "SLURMOPS_POLICY", value_name = "FILE")]
    pub policy: Option<std::path::PathBuf>,
    /// A namespace cluster.yaml may name (repeat, or comma-separated in the environment); a
    /// commit naming another is refused. Default for the daemon: --namespace only.
    #[arg(
        long = "cluster-namespace",
        env = "SLURMOPS_CLUSTER_NAMESPACES",
        value_delimiter = ','
    )]
    pub cluster_namespaces: Vec<String>,
    /// Allow hostPath volumes under PREFIX in what cluster.yaml adds to pods (repeat); by
    /// default none is allowed.
    #[arg(
        long = "allow-host-path",
        env = "SLURMOPS_ALLOW_HOST_PATHS",
        value_delimiter = ','
    )]
    pub allow_host_paths: Vec<String>,
    /// Allow what cluster.yaml adds to pods to run privileged, add capabilities beyond Pod
    /// Security baseline, or share the node's network, PID or IPC namespace.
    #[arg(long, env = "SLURMOPS_ALLOW_PRIVILEGED")]
    pub allow_privileged: bool,
    /// Allow pods to run as this ServiceAccount (repeat); by default none is allowed.
    #[arg(
        long = "allow-service-account",
        env = "SLURMOPS_ALLOW_SERVICE_ACCOUNTS",
        value_delimiter = ','
    )]
    pub allow_service_accounts: Vec<String>,
    /// Allow tolerations of the control plane's taints (or of every taint).
    #[arg(long, env = "SLURMOPS_ALLOW_CONTROL_PLANE")]
    pub allow_control_plane: bool,
    /// Allow cluster.yaml to name this Secret (repeat) in pods and config files; by default only
    /// the cluster's own (spec.auth's keys, the database password) where slurmops mounts them.
    #[arg(
        long = "allow-secret",
        env = "SLURMOPS_ALLOW_SECRETS",
        value_delimiter = ','
    )]
    pub allow_secrets: Vec<String>,
    /// Allow accounting.database.host to name HOST (repeat): slurmdbd sends it the database
    /// password. By default only the in-cluster database.
    #[arg(
        long = "allow-database-host",
        env = "SLURMOPS_ALLOW_DATABASE_HOSTS",
        value_delimiter = ','
    )]
    pub allow_database_hosts: Vec<String>,
    /// `guarded` (default): every guardrail holds. `trusted`: the repository is the Slurm and
    /// node administrator — a push is node root; only the namespaces are checked.
    #[arg(long, env = "SLURMOPS_TRUST", value_parser = ["guarded", "trusted"])]
    pub trust: Option<String>,
    /// Allow images from REPOSITORY and below it (repeat), e.g. registry.example.com/hpc; by
    /// default only the images slurmops renders (ghcr.io/slinkyproject, docker.io/library/mariadb).
    #[arg(
        long = "allow-image",
        env = "SLURMOPS_ALLOW_IMAGES",
        value_delimiter = ','
    )]
    pub allow_images: Vec<String>,
    /// Refuse any image not pinned by a sha256 digest.
    #[arg(long, env = "SLURMOPS_REQUIRE_DIGESTS")]
    pub require_digests: bool,
    /// Allow the inline code (script, health check, code-bearing config file) of this digest,
    /// `sha256:HEX` (repeat); a refusal prints the digest of what it refused.
    #[arg(
        long = "allow-program",
        env = "SLURMOPS_ALLOW_PROGRAMS",
        value_delimiter = ','
    )]
    pub allow_programs: Vec<String>,
    /// Allow cluster.yaml to set this slurm.conf or slurmdbd.conf key that names a program or
    /// where credentials go (repeat), e.g. MailProg.
    #[arg(
        long = "allow-slurm-key",
        env = "SLURMOPS_ALLOW_SLURM_KEYS",
        value_delimiter = ','
    )]
    pub allow_slurm_keys: Vec<String>,
    /// Allow pods to mount this PersistentVolumeClaim (repeat); by default none of cluster.yaml's.
    #[arg(
        long = "allow-volume-claim",
        env = "SLURMOPS_ALLOW_VOLUME_CLAIMS",
        value_delimiter = ','
    )]
    pub allow_volume_claims: Vec<String>,
    /// Allow pods to mount, and Slurm to run scripts from, this ConfigMap (repeat).
    #[arg(
        long = "allow-config-map",
        env = "SLURMOPS_ALLOW_CONFIG_MAPS",
        value_delimiter = ','
    )]
    pub allow_config_maps: Vec<String>,
    /// A Secret cluster.yaml may name as the cluster's own (auth.slurmKey, auth.jwtKey, the
    /// database password; repeat); by default slurm-auth, slurm-jwt and slurm-db.
    #[arg(
        long = "cluster-secret",
        env = "SLURMOPS_CLUSTER_SECRETS",
        value_delimiter = ','
    )]
    pub cluster_secrets: Vec<String>,
    /// Allow cluster.yaml to add this environment variable to pods (`NAME`, or `PREFIX*`;
    /// repeat); by default none. Search paths, loader, shell, Slurm, MPI and runtime variables
    /// are never allowed.
    #[arg(long = "allow-env", env = "SLURMOPS_ALLOW_ENV", value_delimiter = ',')]
    pub allow_env: Vec<String>,
    /// Allow cluster.yaml to add volumes of this type (e.g. nfs, csi; repeat), beyond emptyDir,
    /// configMap, secret, persistentVolumeClaim and projected.
    #[arg(
        long = "allow-volume-type",
        env = "SLURMOPS_ALLOW_VOLUME_TYPES",
        value_delimiter = ','
    )]
    pub allow_volume_types: Vec<String>,
    /// Allow accounts-as-code to make this Slurm user an administrator or operator
    /// (`adminLevel`; repeat); by default nobody.
    #[arg(
        long = "allow-slurm-admin",
        env = "SLURMOPS_ALLOW_SLURM_ADMINS",
        value_delimiter = ','
    )]
    pub allow_slurm_admins: Vec<String>,
    /// Allow cluster.yaml to put annotations under this prefix on what slurmops renders
    /// (repeat; e.g. service.beta.kubernetes.io/); by default none.
    #[arg(
        long = "allow-annotation",
        env = "SLURMOPS_ALLOW_ANNOTATIONS",
        value_delimiter = ','
    )]
    pub allow_annotations: Vec<String>,
    /// Allow pods to run with this RuntimeClass (repeat); by default none.
    #[arg(
        long = "allow-runtime-class",
        env = "SLURMOPS_ALLOW_RUNTIME_CLASSES",
        value_delimiter = ','
    )]
    pub allow_runtime_classes: Vec<String>,
}

impl GuardArgs {
    /// The guardrails of a command's flags and policy file (no home namespace); the policy
    /// file's problems, each at its position.
    pub fn checked(&self) -> Result<Guardrails, crate::ops::Error> {
        self.guardrails(None)
            .map_err(|e| crate::ops::Error::Problems { lines: vec![e] })
    }

    /// The daemon's safe defaults widened by these flags and the policy file; the namespaces
    /// given, else HOME (None: any namespace). Err: the policy file's problems, one per line.
    pub fn guardrails(&self, home: Option<&str>) -> Result<Guardrails, String> {
        let file = match &self.policy {
            Some(p) => crate::cluster::guard_file::read(p).map_err(|ds| {
                let lines: Vec<String> = ds.iter().map(ToString::to_string).collect();
                format!(
                    "{}\n{}: {} problems in the policy file; nothing was checked",
                    lines.join("\n"),
                    p.display(),
                    ds.len()
                )
            })?,
            None => GuardFile::default(),
        };
        let both = |flags: &[String], file: &[String]| {
            let mut all = flags.to_vec();
            all.extend(file.iter().filter(|f| !flags.contains(f)).cloned());
            all
        };
        let named = both(&self.cluster_namespaces, &file.cluster_namespaces);
        let namespaces = match (named.is_empty(), home) {
            (false, _) => Some(named),
            (true, Some(h)) => Some(vec![h.to_string()]),
            (true, None) => None,
        };
        if let Some(d) = self
            .allow_programs
            .iter()
            .find(|d| !crate::cluster::guard_file::is_digest(d))
        {
            return Err(format!(
                "--allow-program {d}: a program is allowed by its digest, sha256: and 64 lowercase hex digits (validate --guardrails prints the digest of what it refuses)"
            ));
        }
        let trusted = match self.trust.as_deref() {
            Some(t) => t == "trusted",
            None => file.trusted == Some(true),
        };
        Ok(Guardrails {
            // Trusted: the repository is node root; only the namespaces hold.
            pods: !trusted,
            namespaces,
            host_paths: both(&self.allow_host_paths, &file.allow_host_paths),
            privileged: self.allow_privileged || file.allow_privileged,
            service_accounts: both(&self.allow_service_accounts, &file.allow_service_accounts),
            control_plane: self.allow_control_plane || file.allow_control_plane,
            secrets: both(&self.allow_secrets, &file.allow_secrets),
            database_hosts: both(&self.allow_database_hosts, &file.allow_database_hosts),
            images: both(&self.allow_images, &file.allow_images),
            require_digests: self.require_digests || file.require_digests,
            programs: both(&self.allow_programs, &file.allow_programs),
            slurm_keys: both(&self.allow_slurm_keys, &file.allow_slurm_keys),
            volume_claims: both(&self.allow_volume_claims, &file.allow_volume_claims),
            config_maps: both(&self.allow_config_maps, &file.allow_config_maps),
            cluster_secrets: both(&self.cluster_secrets, &file.cluster_secrets),
            env: both(&self.allow_env, &file.allow_env),
            volume_types: both(&self.allow_volume_types, &file.allow_volume_types),
            slurm_admins: both(&self.allow_slurm_admins, &file.allow_slurm_admins),
            annotations: both(&self.allow_annotations, &file.allow_annotations),
            runtime_classes: both(&self.allow_runtime_classes, &file.allow_runtime_classes),
        })
    }
}
