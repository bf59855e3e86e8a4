//! The install's guardrails as flags, one set for the daemon (always on: its safe defaults,
//! widened by `--allow-*`) and for `validate --guardrails` (the same check in a pull request's
//! CI, so it refuses what the daemon will refuse).

use crate::spec::Guardrails;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct GuardArgs {
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
}

impl GuardArgs {
    /// The daemon's safe defaults widened by these flags; the namespaces given, else HOME
    /// (None: any namespace).
    pub fn guardrails(&self, home: Option<&str>) -> Guardrails {
        let namespaces = match (self.cluster_namespaces.is_empty(), home) {
            (false, _) => Some(self.cluster_namespaces.clone()),
            (true, Some(h)) => Some(vec![h.to_string()]),
            (true, None) => None,
        };
        Guardrails {
            namespaces,
            host_paths: self.allow_host_paths.clone(),
            privileged: self.allow_privileged,
            service_accounts: self.allow_service_accounts.clone(),
            control_plane: self.allow_control_plane,
            secrets: self.allow_secrets.clone(),
            database_hosts: self.allow_database_hosts.clone(),
            ..Guardrails::safe(Vec::new())
        }
    }
}
