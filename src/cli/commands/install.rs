//! `slurmops install --print`: the daemon's own objects (Deployment, ServiceAccount, Role(s),
//! RoleBinding(s), Service, NetworkPolicy) from its flags; `crate::daemon::install` makes them,
//! and `crate::daemon::monitoring` the PrometheusRule and the dashboard's ConfigMap.

use crate::cli::prelude::*;

#[derive(clap::Args)]
pub struct InstallArgs {
    /// Print the objects as YAML (pipe into `kubectl apply -f -`).
    #[arg(long, required = true)]
    print: bool,
    /// Repository the daemon follows.
    #[arg(long)]
    repo: String,
    #[arg(long, default_value = "main")]
    branch: String,
    #[arg(long, default_value = "")]
    path: String,
    /// Namespace the daemon runs in.
    #[arg(long, default_value = "slurmops")]
    namespace: String,
    /// Namespace of a cluster it manages (repeat for several; default: its own namespace).
    #[arg(long = "cluster-namespace")]
    cluster_namespaces: Vec<String>,
    /// The cluster (cluster.yaml's metadata.name) this daemon manages: its objects are named
    /// `slurmops-NAME`, so that each cluster of a namespace gets its own daemon.
    #[arg(long)]
    cluster: Option<String>,
    /// The daemon's image [default: this release's, by digest where the build knows it].
    #[arg(long)]
    image: Option<String>,
    #[arg(long, default_value_t = 2)]
    replicas: i32,
    /// Secret with the git credentials: `token` (HTTPS), or `ssh-privatekey` and `known_hosts`.
    #[arg(long)]
    git_secret: Option<String>,
    /// Secret with the webhook HMAC key under `secret`.
    #[arg(long)]
    webhook_secret: Option<String>,
    /// Secret with the live view's bearer token under `token` (the daemon's --ui-token-file):
    /// for a port that faces more than its operators.
    #[arg(long)]
    ui_token_secret: Option<String>,
    /// Leave out the ClusterRole that lets the daemon read Nodes (cordoned Kubernetes nodes then
    /// do not drain their workers; the daemon says so).
    #[arg(long)]
    no_node_reader: bool,
    /// Name of each cluster's JWT key Secret (`spec.auth.jwtKey.name`): the only Secret the daemon
    /// may read, to mint Slurm tokens (repeat for several).
    #[arg(long = "jwt-secret", default_value = "slurm-jwt")]
    jwt_secrets: Vec<String>,
    /// The Slurm user the daemon's jobs (active checks, canaries' validations) run as: an
    /// unprivileged user slurmctld and every worker know (default `daemon`, in every image;
    /// never `nobody`, whose jobs Slurm refuses);
    /// where associations are enforced, give it one in cluster.yaml's accounting.users.
    #[arg(long)]
    job_user: Option<String>,
    /// The daemon runs without Slurm (and may read no Secret at all).
    #[arg(long)]
    no_slurm: bool,
    /// ConfigMap holding `allowed_signers` (ssh-keygen format): only commits signed by those SSH
    /// keys are applied.
    #[arg(long)]
    allowed_signers: Option<String>,
    /// ConfigMap holding `allowed_gpg_keys` (armored OpenPGP public keys): commits signed by them
    /// are applied too.
    #[arg(long)]
    allowed_gpg_keys: Option<String>,
    /// ConfigMap holding `policy.yaml`, the guardrails as a file (the daemon's --policy; give
    /// the same file to `validate --guardrails --policy` in the repository's CI).
    #[arg(long)]
    policy: Option<String>,
    /// hostPath prefix cluster.yaml may mount in pods (repeat; the daemon's --allow-host-path).
    #[arg(long = "allow-host-path")]
    allow_host_paths: Vec<String>,
    /// Let cluster.yaml add privileged containers, capabilities beyond baseline and host
    /// namespaces to pods (the daemon's --allow-privileged).
    #[arg(long)]
    allow_privileged: bool,
    /// ServiceAccount cluster.yaml may run pods as (repeat; the daemon's --allow-service-account).
    #[arg(long = "allow-service-account")]
    allow_service_accounts: Vec<String>,
    /// Let cluster.yaml tolerate the control plane's taints (the daemon's --allow-control-plane).
    #[arg(long)]
    allow_control_plane: bool,
    /// Secret cluster.yaml may name in pods and config files (repeat; the daemon's
    /// --allow-secret).
    #[arg(long = "allow-secret")]
    allow_secrets: Vec<String>,
    /// Database host accounting.database.host may name (repeat; the daemon's
    /// --allow-database-host).
    #[arg(long = "allow-database-host")]
    allow_database_hosts: Vec<String>,
    /// `trusted`: the repository is the node administrator (the daemon's --trust; default
    /// guarded).
    #[arg(long, value_parser = ["guarded", "trusted"])]
    trust: Option<String>,
    /// Image repository cluster.yaml may take images from (repeat; the daemon's --allow-image).
    #[arg(long = "allow-image")]
    allow_images: Vec<String>,
    /// Every image pinned by digest (the daemon's --require-digests).
    #[arg(long)]
    require_digests: bool,
    /// Digest of inline code cluster.yaml may run (repeat; the daemon's --allow-program).
    #[arg(long = "allow-program")]
    allow_programs: Vec<String>,
    /// slurm.conf or slurmdbd.conf key naming a program or where credentials go that
    /// cluster.yaml may set (repeat; the daemon's --allow-slurm-key).
    #[arg(long = "allow-slurm-key")]
    allow_slurm_keys: Vec<String>,
    /// PersistentVolumeClaim pods may mount (repeat; the daemon's --allow-volume-claim).
    #[arg(long = "allow-volume-claim")]
    allow_volume_claims: Vec<String>,
    /// ConfigMap pods may mount and Slurm may run scripts from (repeat; the daemon's
    /// --allow-config-map).
    #[arg(long = "allow-config-map")]
    allow_config_maps: Vec<String>,
    /// Secret cluster.yaml may name as the cluster's own (repeat; the daemon's
    /// --cluster-secret; by default slurm-auth, slurm-jwt and slurm-db).
    #[arg(long = "cluster-secret")]
    cluster_secrets: Vec<String>,
    /// Environment variable cluster.yaml may add to pods, `NAME` or `PREFIX*` (repeat; the
    /// daemon's --allow-env).
    #[arg(long = "allow-env")]
    allow_env: Vec<String>,
    /// Volume type cluster.yaml may add beyond the default ones (repeat; the daemon's
    /// --allow-volume-type).
    #[arg(long = "allow-volume-type")]
    allow_volume_types: Vec<String>,
    /// Slurm user accounts-as-code may make an administrator or operator (repeat; the
    /// daemon's --allow-slurm-admin).
    #[arg(long = "allow-slurm-admin")]
    allow_slurm_admins: Vec<String>,
    /// Annotation prefix cluster.yaml may put on what slurmops renders (repeat; the daemon's
    /// --allow-annotation).
    #[arg(long = "allow-annotation")]
    allow_annotations: Vec<String>,
    /// RuntimeClass pods may run with (repeat; the daemon's --allow-runtime-class).
    #[arg(long = "allow-runtime-class")]
    allow_runtime_classes: Vec<String>,
    /// Namespace whose pods may reach the daemon's port (metrics, webhook, live view; repeat
    /// for several). By default every pod of the Kubernetes cluster may, and nothing outside it
    /// but through an in-cluster ingress controller or proxy (a webhook from the git host comes
    /// that way).
    #[arg(long = "reachable-from", value_name = "NAMESPACE")]
    reachable_from: Vec<String>,
    /// Leave out the daemon's NetworkPolicy (its port then takes connections from wherever the
    /// network lets them).
    #[arg(long, conflicts_with = "reachable_from")]
    no_network_policy: bool,
    /// The most workers its clusters will have: the daemon's memory limit is sized for them from
    /// the scale bench's measured formula (see docs/benchmarks.md).
    #[arg(long, default_value_t = 1000)]
    workers: u32,
    /// The most jobs their queues will hold: sizes the memory limit too (the daemon keeps the
    /// queue when autoscale or canaries need it).
    #[arg(long, default_value_t = 50_000)]
    jobs: u32,
    /// Add a PrometheusRule (monitoring.coreos.com/v1, for the Prometheus Operator) holding the
    /// alert rules of alerts/slurmops.rules.yaml.
    #[arg(long)]
    prometheus_rule: bool,
    /// Add a ConfigMap holding the Grafana dashboard (dashboards/slurmops.json), labelled
    /// `grafana_dashboard: "1"` for the Grafana Helm chart's dashboard sidecar.
    #[arg(long)]
    grafana_dashboard: bool,
}

/// `slurmops install --print`: the daemon's Deployment, ServiceAccount, Role(s), RoleBinding(s),
/// Service and NetworkPolicy.
pub fn exec(a: InstallArgs) -> Outcome {
    let _ = a.print;
    let i = crate::daemon::install::Install {
        namespace: a.namespace,
        cluster_namespaces: a.cluster_namespaces,
        cluster: a.cluster,
        image: match a.image {
            Some(i) => i,
            None => crate::daemon::install::default_image().map_err(CliError::Other)?,
        },
        repo: a.repo,
        branch: a.branch,
        path: a.path,
        replicas: a.replicas,
        git_secret: a.git_secret,
        webhook_secret: a.webhook_secret,
        ui_token_secret: a.ui_token_secret,
        node_reader: !a.no_node_reader,
        jwt_secrets: if a.no_slurm {
            Vec::new()
        } else {
            a.jwt_secrets
        },
        job_user: a.job_user,
        allowed_signers: a.allowed_signers,
        allowed_gpg_keys: a.allowed_gpg_keys,
        network_policy: !a.no_network_policy,
        reachable_from: a.reachable_from,
        guard: crate::daemon::install::Widened {
            policy: a.policy,
            host_paths: a.allow_host_paths,
            privileged: a.allow_privileged,
            service_accounts: a.allow_service_accounts,
            control_plane: a.allow_control_plane,
            secrets: a.allow_secrets,
            database_hosts: a.allow_database_hosts,
            trust: a.trust,
            images: a.allow_images,
            require_digests: a.require_digests,
            programs: a.allow_programs,
            slurm_keys: a.allow_slurm_keys,
            volume_claims: a.allow_volume_claims,
            config_maps: a.allow_config_maps,
            cluster_secrets: a.cluster_secrets,
            env: a.allow_env,
            volume_types: a.allow_volume_types,
            slurm_admins: a.allow_slurm_admins,
            annotations: a.allow_annotations,
            runtime_classes: a.allow_runtime_classes,
        },
        workers: a.workers,
        jobs: a.jobs,
    };
    if !i.verifies_signatures() {
        eprintln!("{}", crate::daemon::install::UNSIGNED_WARNING);
        println!("# {}", crate::daemon::install::UNSIGNED_WARNING);
    }
    let mut objects = crate::daemon::install::objects(&i);
    if a.prometheus_rule {
        objects.push(crate::daemon::monitoring::prometheus_rule(&i));
    }
    if a.grafana_dashboard {
        objects.push(crate::daemon::monitoring::dashboard_config_map(&i));
    }
    let docs: Vec<String> = objects
        .iter()
        .map(|o| serde_saphyr::to_string(o).expect("objects serialize"))
        .collect();
    print!("---\n{}", docs.join("---\n"));
    Ok(Success::Done)
}
