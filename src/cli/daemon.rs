//! `slurmops run` (the daemon) and `slurmops status` (what it last did).

use std::net::SocketAddr;
use std::path::PathBuf;

use super::apply::{KubeArgs, runtime};
use super::{CliError, Outcome, Success};
use crate::apply::Options;
use crate::cluster::values::Duration;
use crate::daemon::{self, Config, SlurmSource};
use crate::k8s::Connection;
use crate::source::remote::{Auth, Remote};

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
    guard: super::guard::GuardArgs,
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

/// A duration like `90s`, `10m` or `250ms` (at least 10 ms).
fn interval(text: &str) -> Result<std::time::Duration, String> {
    let d = match text.trim().strip_suffix("ms") {
        Some(ms) => ms
            .parse::<u64>()
            .map(std::time::Duration::from_millis)
            .map_err(|_| format!("invalid duration {text:?}: write it like 250ms, 90s or 10m"))?,
        None => std::time::Duration::from_secs(Duration::parse(text)?.as_secs()),
    };
    Ok(d.max(std::time::Duration::from_millis(10)))
}

/// A secret from a file: trimmed, at most 64 KiB, not empty.
fn read_secret(path: &PathBuf, what: &str) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the {what} {shown}: {e}"))?;
    if bytes.len() > 64 << 10 {
        return Err(format!(
            "the {what} {shown} is larger than 64 KiB: is it the right file?"
        ));
    }
    let secret = bytes.trim_ascii().to_vec();
    if secret.is_empty() {
        return Err(format!(
            "the {what} {shown} is empty: an empty secret would accept anything signed with it"
        ));
    }
    Ok(secret)
}

/// Where the daemon's Slurm client comes from.
fn slurm_source(a: &RunArgs) -> Result<SlurmSource, String> {
    use crate::slurm::auth::{Credentials, KeyBytes, Secret};
    let refused = crate::slurm::client::REFUSED_JOB_USERS;
    let u = a.job_user.trim();
    if !a.no_slurm && (u.is_empty() || u == a.slurm_user || refused.contains(&u)) {
        return Err(format!(
            "--job-user {:?}: the jobs slurmops submits (checks, canaries' validations) never run as the Slurm administrator ({}) or root, nor as nobody (Slurm refuses its jobs); name an unprivileged user that slurmctld and every worker know (default {})",
            a.job_user,
            a.slurm_user,
            crate::slurm::client::DEFAULT_JOB_USER
        ));
    }
    let credentials = match (&a.slurm_jwt, &a.slurm_jwt_file, &a.slurm_jwt_key_file) {
        _ if a.no_slurm => return Ok(SlurmSource::Off),
        (Some(t), _, _) => Credentials::Token {
            token: Secret::new(t.clone()),
            user: None,
        },
        (_, Some(f), _) => Credentials::Token {
            token: Secret::new(
                String::from_utf8(read_secret(f, "Slurm JWT file")?)
                    .map_err(|_| "the Slurm JWT file is not text".to_string())?,
            ),
            user: None,
        },
        (_, _, Some(f)) => Credentials::Key {
            key: KeyBytes(read_secret(f, "Slurm JWT key file")?),
            user: a.slurm_user.clone(),
            lifetime: crate::slurm::connect::TOKEN_LIFETIME,
        },
        _ => {
            return Ok(SlurmSource::Cluster {
                url: a.slurmrestd_url.clone(),
                user: a.slurm_user.clone(),
                job_user: a.job_user.clone(),
                allow_http: a.allow_http,
            });
        }
    };
    let url = a.slurmrestd_url.clone().unwrap_or_default();
    let mut config = crate::slurm::Config::new(url, credentials);
    config.allow_http = a.allow_http;
    config.queue_wait = crate::daemon::QUEUE_WAIT;
    config.job_user = a.job_user.clone();
    let client = crate::slurm::Client::new(config).map_err(|e| e.to_string())?;
    Ok(SlurmSource::Static(std::sync::Arc::new(client)))
}

/// Refuses credentials for the repository over a plain-text transport, and a plain-text
/// repository beyond this host and the cluster's own Services without signature checks (whoever
/// is on the path would decide what is applied), unless allowed.
fn git_transport_ok(a: &RunArgs, auth: &Auth) -> Result<(), String> {
    let scheme = ["http://", "git://"]
        .into_iter()
        .find(|p| a.repo.starts_with(p));
    let Some(scheme) = scheme.filter(|_| !a.allow_http) else {
        return Ok(());
    };
    let url = crate::source::remote::redact(&a.repo);
    if matches!(auth, Auth::Token(_)) || url != a.repo {
        return Err(format!(
            "{url}: refusing to send git credentials over plain {scheme}; use https:// or ssh://, or allow it explicitly with --allow-http"
        ));
    }
    let signed = a.allowed_signers.is_some() || a.allowed_gpg_keys.is_some();
    let near = crate::net::stays_near(&a.repo);
    if !signed && !near {
        return Err(format!(
            "{url}: refusing to follow a repository over plain {scheme} without signature checks: anyone on the network path could change what is applied. Use https:// or ssh://, check signatures (--allowed-signers, --allowed-gpg-keys), or allow it explicitly with --allow-http"
        ));
    }
    Ok(())
}

fn allowed_signers(
    a: &RunArgs,
) -> Result<Option<crate::source::signature::AllowedSigners>, String> {
    use crate::source::signature::AllowedSigners;
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    let mut allowed = match &a.allowed_signers {
        Some(p) => AllowedSigners::parse(&p.display().to_string(), &read(p)?)?,
        None if a.allowed_gpg_keys.is_some() => AllowedSigners::default(),
        None => return Ok(None),
    };
    if let Some(p) = &a.allowed_gpg_keys {
        allowed.add_gpg(&p.display().to_string(), &read(p)?)?;
    }
    Ok(Some(allowed))
}

fn config(a: &RunArgs) -> Result<Config, String> {
    let auth = match (&a.ssh_key, &a.known_hosts, &a.token_file) {
        (Some(key), Some(kh), _) => Auth::Ssh {
            private_key: key.clone(),
            known_hosts: kh.clone(),
        },
        (_, _, Some(t)) => Auth::Token(secrecy::SecretString::from(
            String::from_utf8(read_secret(t, "token file")?)
                .map_err(|_| "the token file is not text".to_string())?,
        )),
        _ => Auth::Anonymous,
    };
    git_transport_ok(a, &auth)?;
    let slurm = slurm_source(a)?;
    Ok(Config {
        remote: Remote {
            url: a.repo.clone(),
            branch: a.branch.clone(),
            path: a.path.clone(),
            auth,
            mirror: a.mirror.clone(),
            timeout: std::time::Duration::from_secs(a.git_timeout.as_secs().max(1)),
        },
        interval: a.interval,
        drift_interval: std::time::Duration::from_secs(a.drift_interval.as_secs().max(1)),
        listen: Some(a.listen),
        webhook_secret: match &a.webhook_secret_file {
            Some(f) => Some(secrecy::SecretSlice::from(read_secret(
                f,
                "webhook secret file",
            )?)),
            None => None,
        },
        namespace: a.namespace.clone(),
        guard: a.guard.guardrails(Some(&a.namespace))?,
        cluster: a.cluster.clone(),
        identity: a.identity.clone(),
        pod: a.pod_name.clone(),
        slurm,
        apply: Options {
            detect_only: a.detect_only,
            ..Options::default()
        },
        allowed_signers: allowed_signers(a)?,
        allow_force_push: a.allow_force_push,
        once: a.once,
        suspend: a.suspend,
        ui: !a.no_ui,
        ui_token: match &a.ui_token_file {
            Some(f) => {
                let t = read_secret(f, "UI token file")?;
                let t = String::from_utf8(t)
                    .map_err(|_| format!("{}: the UI token file is not text", f.display()))?;
                if t.trim().len() < 16 {
                    return Err(format!(
                        "{}: the UI token is shorter than 16 characters: write a longer one (e.g. `openssl rand -hex 24`)",
                        f.display()
                    ));
                }
                Some(secrecy::SecretSlice::from(t.trim().as_bytes().to_vec()))
            }
            None => None,
        },
    })
}

pub fn run(a: RunArgs) -> Outcome {
    init_logs(a.log_format, a.log_level);
    let cfg = config(&a).map_err(CliError::Other)?;
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

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Namespace the daemon runs in.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    /// Only the daemon of this cluster (default: every daemon of the namespace).
    #[arg(long)]
    cluster: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
    /// Redraw every 2 seconds (a table to follow a long rollout).
    #[arg(long, conflicts_with = "output")]
    watch: bool,
    /// text, or json for scripts (one document: `version`, `statuses`).
    #[arg(long, short = 'o', value_enum, default_value_t = super::Output::Text)]
    output: super::Output,
}

/// `slurmops status`: the daemon's status ConfigMap, readable; `--watch` redraws it.
pub fn status(a: StatusArgs) -> Outcome {
    let result = runtime().block_on(async {
        let cluster = Connection::connect(a.kube.kubeconfig.as_deref(), a.kube.context.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        loop {
            let all = read_statuses(&cluster.client, &a.namespace, a.cluster.as_deref()).await?;
            if matches!(a.output, super::Output::Json) {
                print!("{}", crate::status::show::json(&all));
                return Ok(());
            }
            let now = k8s_openapi::jiff::Timestamp::now();
            let text = crate::status::show::all(&all, now.as_second());
            if !a.watch {
                print!("{text}");
                return Ok::<(), String>(());
            }
            // Clear the screen and draw again, like watch(1).
            print!("\x1b[2J\x1b[H{now}  (every 2s, Ctrl-C to stop)\n\n{text}");
            use std::io::Write;
            let _ = std::io::stdout().flush();
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        }
    });
    result.map_err(CliError::Other)?;
    Ok(Success::Done)
}

/// The statuses to show: CLUSTER's daemon's, or every daemon's of NAMESPACE.
async fn read_statuses(
    client: &kube::Client,
    namespace: &str,
    cluster: Option<&str>,
) -> Result<Vec<(Option<String>, crate::status::configmap::Status)>, String> {
    use crate::status::configmap;
    let all = match cluster {
        Some(c) => configmap::read(client, namespace, Some(c))
            .await
            .map_err(|e| e.to_string())?
            .map(|s| vec![(Some(c.to_string()), s)])
            .unwrap_or_default(),
        None => configmap::read_all(client, namespace)
            .await
            .map_err(|e| e.to_string())?,
    };
    if all.is_empty() {
        let which = cluster.map_or(String::new(), |c| format!(" for cluster {c}"));
        return Err(format!(
            "no status{which} in namespace {namespace} (is the daemon running there?)"
        ));
    }
    Ok(all)
}

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
    #[arg(long, default_value = concat!("ghcr.io/slurmops/slurmops:", env!("CARGO_PKG_VERSION")))]
    image: String,
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
    /// The most workers its clusters will have: the daemon's memory limit is sized for them from
    /// the scale bench's measured formula (see docs/benchmarks.md).
    #[arg(long, default_value_t = 1000)]
    workers: u32,
    /// The most jobs their queues will hold: sizes the memory limit too (the daemon keeps the
    /// queue when autoscale or canaries need it).
    #[arg(long, default_value_t = 50_000)]
    jobs: u32,
}

/// `slurmops install --print`: the daemon's Deployment, ServiceAccount, Role(s), RoleBinding(s)
/// and Service.
pub fn install(a: InstallArgs) -> Outcome {
    let _ = a.print;
    let i = crate::daemon::install::Install {
        namespace: a.namespace,
        cluster_namespaces: a.cluster_namespaces,
        cluster: a.cluster,
        image: a.image,
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
        },
        workers: a.workers,
        jobs: a.jobs,
    };
    if !i.verifies_signatures() {
        eprintln!("{}", crate::daemon::install::UNSIGNED_WARNING);
        println!("# {}", crate::daemon::install::UNSIGNED_WARNING);
    }
    let docs: Vec<String> = crate::daemon::install::objects(&i)
        .iter()
        .map(|o| serde_saphyr::to_string(o).expect("objects serialize"))
        .collect();
    print!("---\n{}", docs.join("---\n"));
    Ok(Success::Done)
}

/// `slurmops run --config FILE` (or SLURMOPS_CONFIG): each `key: value` line of FILE becomes
/// `--key value` unless the command line already has `--key`; `key: true` becomes `--key`.
pub fn expand_config(args: Vec<String>) -> Result<Vec<String>, String> {
    if args.get(1).map(String::as_str) != Some("run") {
        return Ok(args);
    }
    let from_flag = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--config=").map(str::to_string))
        });
    let Some(path) = from_flag.or_else(|| std::env::var("SLURMOPS_CONFIG").ok()) else {
        return Ok(args);
    };
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("cannot read config {path}: {e}"))?;
    let mut out = args.clone();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // `key: value` or `key=value`, whichever separator comes first (values hold URLs).
        let Some((key, value)) = line.find([':', '=']).map(|i| (&line[..i], &line[i + 1..])) else {
            return Err(format!("{path}:{}:1: expected `key: value`", n + 1));
        };
        let (key, value) = (key.trim(), value.trim().trim_matches('"'));
        let flag = format!("--{key}");
        let given = args
            .iter()
            .any(|a| *a == flag || a.starts_with(&format!("{flag}=")));
        if given || key == "config" {
            continue;
        }
        match value {
            "true" => out.push(flag),
            "false" => {}
            v => {
                out.push(flag);
                out.push(v.to_string());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_file_lines_become_flags_the_command_line_did_not_give() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("slurmops.conf");
        std::fs::write(
            &f,
            "# daemon\nrepo: https://git.example/a.git\ninterval: 30s\nonce: true\nbranch: prod\n",
        )
        .unwrap();
        let args: Vec<String> = [
            "slurmops",
            "run",
            "--config",
            f.to_str().unwrap(),
            "--branch",
            "main",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = expand_config(args).unwrap();
        assert_eq!(
            out[4..],
            [
                "--branch",
                "main",
                "--repo",
                "https://git.example/a.git",
                "--interval",
                "30s",
                "--once"
            ]
        );
        std::fs::write(&f, "no separator here\n").unwrap();
        let args: Vec<String> = ["slurmops", "run", "--config", f.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let err = expand_config(args).unwrap_err();
        assert!(err.ends_with(":1:1: expected `key: value`"), "{err}");
    }

    fn run_args(args: &[&str]) -> RunArgs {
        use clap::FromArgMatches;
        let cmd = <RunArgs as clap::Args>::augment_args(clap::Command::new("run"));
        let m = cmd
            .try_get_matches_from(std::iter::once("run").chain(args.iter().copied()))
            .unwrap();
        RunArgs::from_arg_matches(&m).unwrap()
    }

    #[test]
    fn credentials_over_plain_text_transports_and_empty_secrets_are_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "ghp_secret\n").unwrap();
        let t = token.to_str().unwrap();
        for repo in ["http://git.example/a.git", "git://git.example/a.git"] {
            let err = config(&run_args(&["--repo", repo, "--token-file", t]))
                .err()
                .unwrap();
            assert!(err.contains("refusing to send git credentials"), "{err}");
            assert!(!err.contains("ghp_secret"));
        }
        let err = config(&run_args(&[
            "--repo",
            "http://ci:ghp_secret@git.example/a.git",
        ]))
        .err()
        .unwrap();
        assert!(
            err.contains("refusing") && !err.contains("ghp_secret"),
            "{err}"
        );
        // Unsigned over plain text beyond this host and the cluster's Services: refused, unless
        // signatures are checked or it is allowed.
        for repo in ["http://git.example/a.git", "git://10.1.2.3/a.git"] {
            let err = config(&run_args(&["--repo", repo])).err().unwrap();
            assert!(err.contains("without signature checks"), "{err}");
        }
        let signers = dir.path().join("signers");
        let key =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKQWDWLMUXfKWlDZ2T2vjStNjBmZKBz0rnetU2O76mEP";
        std::fs::write(&signers, format!("ops@example.com {key}\n")).unwrap();
        let s = signers.to_str().unwrap();
        for args in [
            &["--repo", "http://git.example/a.git", "--allowed-signers", s][..],
            &["--repo", "http://git.example/a.git", "--allow-http"],
            &["--repo", "http://127.0.0.1:3000/a.git"],
            &["--repo", "git://gitea.git.svc/a.git"],
        ] {
            config(&run_args(args)).unwrap();
        }
        // Explicitly allowed, or over https: accepted.
        config(&run_args(&[
            "--repo",
            "http://git.example/a.git",
            "--token-file",
            t,
            "--allow-http",
        ]))
        .unwrap();
        config(&run_args(&[
            "--repo",
            "https://git.example/a.git",
            "--token-file",
            t,
        ]))
        .unwrap();

        let empty = dir.path().join("empty");
        std::fs::write(&empty, " \n").unwrap();
        let err = config(&run_args(&[
            "--repo",
            "https://git.example/a.git",
            "--webhook-secret-file",
            empty.to_str().unwrap(),
        ]))
        .err()
        .unwrap();
        assert!(err.contains("is empty"), "{err}");

        // Slurm tokens: plain http only to loopback or in-cluster Services.
        let jwt = dir.path().join("jwt");
        std::fs::write(&jwt, "eyJ.x.y\n").unwrap();
        let j = jwt.to_str().unwrap();
        let slurm = |url: &str, extra: &[&str]| {
            let mut args = vec!["--repo", "https://g/a.git", "--slurmrestd-url", url];
            args.extend(["--slurm-jwt-file", j]);
            args.extend(extra);
            config(&run_args(&args)).map(|_| ())
        };
        assert!(
            slurm("http://slurmrestd.example.com:6820", &[])
                .unwrap_err()
                .contains("plain http://")
        );
        slurm("http://slurmrestd.example.com:6820", &["--allow-http"]).unwrap();
        slurm("http://127.0.0.1:6820", &[]).unwrap();
        slurm("http://c-restapi.slurm.svc:6820", &[]).unwrap();
        slurm("https://slurmrestd.example.com", &[]).unwrap();
    }
}
