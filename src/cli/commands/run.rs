//! `slurmops run`: the daemon — follow a git repository and keep the cluster at its cluster.yaml.
//! The flags become the daemon's `Config` in `run/settings.rs`; `crate::daemon` does the work.

mod settings;

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::cli::prelude::*;
use crate::cluster::values::Duration;
use crate::daemon;
use crate::k8s::Connection;
pub use settings::expand_config;
use settings::interval;

#[derive(clap::Args)]
pub struct RunArgs {
    /// Repository to follow (https://, http://, ssh://, git://).
    #[arg(long, env = "SLURMOPS_REPO")]
    repo: String,
    #[arg(long, env = "SLURMOPS_BRANCH", default_value = "main")]
    branch: String,
    /// Directory in the repository holding cluster.yaml.
    #[arg(long, env = "SLURMOPS_PATH", default_value = "")]
    path: String,
    /// Poll interval (also `250ms`: the soak benchmark runs thousands of passes).
    #[arg(long, env = "SLURMOPS_INTERVAL", default_value = "1m", value_parser = interval)]
    interval: std::time::Duration,
    /// Re-apply the current commit this often to correct drift.
    #[arg(long, env = "SLURMOPS_DRIFT_INTERVAL", default_value = "10m", value_parser = Duration::parse)]
    drift_interval: Duration,
    /// How long the git server may stay silent (connect and every read); a fetch gives up after
    /// six times this. Fetches run beside the passes: a silent server never holds them up.
    #[arg(long, env = "SLURMOPS_GIT_TIMEOUT", default_value = "30s", value_parser = Duration::parse)]
    git_timeout: Duration,
    /// Local bare mirror of the repository.
    #[arg(
        long,
        env = "SLURMOPS_MIRROR",
        default_value = "/var/lib/slurmops/mirror"
    )]
    mirror: PathBuf,
    /// HTTPS token file (sent as the password).
    #[arg(long, env = "SLURMOPS_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// SSH private key file (with --known-hosts).
    #[arg(long, env = "SLURMOPS_SSH_KEY", requires = "known_hosts")]
    ssh_key: Option<PathBuf>,
    /// known_hosts file pinning the SSH server's host keys; other keys are refused.
    #[arg(long, env = "SLURMOPS_KNOWN_HOSTS")]
    known_hosts: Option<PathBuf>,
    /// Webhook HMAC secret file: POST /webhook with X-Hub-Signature-256 triggers a sync.
    #[arg(long, env = "SLURMOPS_WEBHOOK_SECRET_FILE")]
    webhook_secret_file: Option<PathBuf>,
    /// Address of /webhook, /healthz, /readyz, /metrics.
    #[arg(long, env = "SLURMOPS_LISTEN", default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// Namespace of the status ConfigMap and the leader Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    /// What cluster.yaml may ask for (the install's guardrails).
    #[command(flatten)]
    guard: GuardArgs,
    /// The cluster (cluster.yaml's metadata.name) this daemon manages, so that several daemons
    /// share a namespace: its Lease is `slurmops-leader-NAME`, its status `slurmops-status-NAME`,
    /// its metrics carry `cluster="NAME"`, and a cluster.yaml naming another cluster is refused.
    #[arg(long, env = "SLURMOPS_CLUSTER")]
    cluster: Option<String>,
    /// This replica's name in the leader Lease.
    #[arg(long, env = "HOSTNAME", default_value = "slurmops")]
    identity: String,
    /// This replica's own pod, labelled `slurmops.dev/leader=true` while it leads (the installed
    /// Deployment sets it from the downward API).
    #[arg(long, env = "POD_NAME")]
    pod_name: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
    /// slurmrestd URL (default: the slurmrestd Service cluster.yaml renders, with tokens minted
    /// from its spec.auth.jwtKey Secret).
    #[arg(long, env = "SLURMRESTD_URL")]
    slurmrestd_url: Option<String>,
    /// A fixed JWT instead of minting tokens from the JWT key Secret (needs --slurmrestd-url).
    /// Prefer --slurm-jwt-file or --slurm-jwt-key-file: nothing secret on the command line.
    #[arg(
        long,
        env = "SLURM_JWT",
        hide_env_values = true,
        requires = "slurmrestd_url"
    )]
    slurm_jwt: Option<String>,
    /// A file holding a fixed JWT (re-read never: restart to rotate; needs --slurmrestd-url).
    #[arg(
        long,
        env = "SLURMOPS_SLURM_JWT_FILE",
        requires = "slurmrestd_url",
        conflicts_with = "slurm_jwt"
    )]
    slurm_jwt_file: Option<PathBuf>,
    /// The cluster's HS256 JWT key file: short-lived tokens are minted from it (as
    /// --slurm-user), no Secret is read (needs --slurmrestd-url).
    #[arg(long, env = "SLURMOPS_SLURM_JWT_KEY_FILE", requires = "slurmrestd_url", conflicts_with_all = ["slurm_jwt", "slurm_jwt_file"])]
    slurm_jwt_key_file: Option<PathBuf>,
    /// Let credentials go over plain http:// (and git://) to any host. Without it, a git token
    /// or credentials in the repository URL need https:// or ssh://, and Slurm tokens go over
    /// http:// only to loopback or in-cluster Services (`*.svc`).
    #[arg(long, env = "SLURMOPS_ALLOW_HTTP")]
    allow_http: bool,
    /// Slurm user of minted tokens: a Slurm admin (the SlurmUser or root).
    #[arg(long, env = "SLURMOPS_SLURM_USER", default_value = "slurm")]
    slurm_user: String,
    /// The Slurm user the jobs slurmops submits run as (active checks, canaries' validations):
    /// unprivileged, known to slurmctld and every worker (LDAP, sssd or the images), never the
    /// administrator of --slurm-user nor root. Where associations are enforced it needs one.
    #[arg(long, env = "SLURMOPS_JOB_USER", default_value = crate::slurm::client::DEFAULT_JOB_USER)]
    job_user: String,
    /// Run without Slurm: nothing rolls, and scale-ins or prunes over workers are refused.
    #[arg(long, env = "SLURMOPS_NO_SLURM", conflicts_with_all = ["slurmrestd_url", "slurm_jwt", "slurm_jwt_file", "slurm_jwt_key_file"])]
    no_slurm: bool,
    /// Report drift without correcting it.
    #[arg(long)]
    detect_only: bool,
    /// Apply only commits with an SSH signature by a key in this file (git's allowed-signers
    /// format); unsigned and other commits are refused and reported.
    #[arg(long, env = "SLURMOPS_ALLOWED_SIGNERS")]
    allowed_signers: Option<PathBuf>,
    /// Apply only commits with an OpenPGP signature by one of these armored public keys
    /// (`gpg --armor --export`); with --allowed-signers too, either kind of signature is accepted.
    #[arg(long, env = "SLURMOPS_ALLOWED_GPG_KEYS")]
    allowed_gpg_keys: Option<PathBuf>,
    /// Take a tip that does not descend from the last applied commit (the branch moved back or
    /// its history rewritten): logged, and a ForcePushFollowed Event. Without it such a tip is
    /// refused and the cluster stays where it is (anyone able to push could otherwise roll it back
    /// to any older, even signed, commit).
    #[arg(long, env = "SLURMOPS_ALLOW_FORCE_PUSH")]
    allow_force_push: bool,
    /// One pass, then exit.
    #[arg(long)]
    once: bool,
    /// Fetch and report, but apply nothing (as spec.policy.suspend).
    #[arg(long, env = "SLURMOPS_SUSPEND")]
    suspend: bool,
    /// Serve no live view (`/` and `/api/v1/cluster` are then 404).
    #[arg(long, env = "SLURMOPS_NO_UI")]
    no_ui: bool,
    /// File holding the bearer token the live view's data asks for
    /// (`Authorization: Bearer TOKEN`); without it anyone who reaches the port may read it.
    #[arg(long, env = "SLURMOPS_UI_TOKEN_FILE", conflicts_with = "no_ui")]
    ui_token_file: Option<PathBuf>,
    /// A small config file of `key: value` lines (`repo: https://...`, `interval: 30s`, ...), one
    /// per flag of this command; flags and environment variables given as well win.
    #[arg(long, env = "SLURMOPS_CONFIG")]
    config: Option<PathBuf>,
    /// Log lines as text or as JSON objects (one per line).
    #[arg(long, env = "SLURMOPS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// The least severe lines logged: `debug` adds one line per pass with its wall time, each
    /// phase and its requests to the apiserver and slurmrestd.
    #[arg(long, env = "SLURMOPS_LOG_LEVEL", value_enum, default_value_t = LogLevel::Info)]
    log_level: LogLevel,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn init_logs(format: LogFormat, level: LogLevel) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let level = match level {
        LogLevel::Error => tracing::Level::ERROR,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Debug => tracing::Level::DEBUG,
    };
    // Debug lines are slurmops' own; the libraries' stay at info and above.
    let only = tracing_subscriber::filter::Targets::new()
        .with_target("slurmops", level)
        .with_default(level.min(tracing::Level::INFO));
    let b = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stdout)
        .with_target(false);
    let _ = match format {
        LogFormat::Text => b.finish().with(only).try_init(),
        LogFormat::Json => b.json().flatten_event(true).finish().with(only).try_init(),
    };
}

/// `slurmops run`: the daemon, until it is stopped (or one pass with `--once`).
pub fn exec(a: RunArgs) -> Outcome {
    daemon::allocator::settle();
    init_logs(a.log_format, a.log_level);
    let cfg = settings::config(&a).map_err(CliError::Other)?;
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = multi.block_on(async {
        let cluster = Connection::connect(a.kube.kubeconfig.as_deref(), a.kube.context.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        daemon::run(cluster, cfg).await
    });
    // A git fetch still in flight (a silent server) must not hold the exit: it is abandoned.
    multi.shutdown_timeout(std::time::Duration::from_secs(1));
    result.map_err(CliError::Other)?;
    Ok(Success::Done)
}
