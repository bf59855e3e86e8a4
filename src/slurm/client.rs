//! The slurmrestd HTTP client: finds the newest data parser both sides speak, authenticates with
//! a JWT, retries what is safe to retry, and turns every answer it cannot trust into an error.

use std::sync::Mutex;
use std::time::Duration;

use super::SlurmError;
use super::auth::{Credentials, Issued};
use super::model::DataParser;
pub use nodes::WHOLE_NODES_TIMEOUT;
use nodes::{KeptNodes, WholeNodes};

mod answer;
mod answer_error;
mod endpoints;
mod names;
mod nodes;
mod ping;
mod queue;
mod replicas;
mod transport;
pub use names::plain_name;
pub use ping::Ping;
pub use queue::footprint;
pub use queue::{Cover, Known, MAX_FETCH, MAX_JOBS, MAX_JOBS_ENV, REFRESH, SLICE, max_jobs_from};
pub use replicas::{Answered, Replica, Source};

pub mod errno;

#[derive(Clone, Debug)]
pub struct Config {
    /// Base URL of slurmrestd, e.g. `http://cluster-restapi.slurm:6820`.
    pub url: String,
    pub credentials: Credentials,
    /// PEM CA bundle for an https URL.
    pub ca_pem: Option<Vec<u8>>,
    /// Speak this data parser instead of probing.
    pub parser: Option<DataParser>,
    pub timeout: Duration,
    /// Attempts for a request that failed transiently (unreachable, 502/503/504, Slurm
    /// communication errors), with exponential backoff from `backoff`.
    pub attempts: u32,
    pub backoff: Duration,
    /// Send tokens over plain http:// to any host (by default only to loopback and to in-cluster
    /// Service names, `*.svc` and `*.svc.cluster.local`).
    pub allow_http: bool,
    /// Largest answer read, in bytes ([`MAX_ANSWER`], or `SLURMOPS_SLURM_MAX_ANSWER_MIB`).
    pub max_answer: usize,
    /// Deadline of `jobs/state/`, every job's id and state (slurmrestd 24.11 needs about 18 s
    /// for 50,000 jobs, a time that grows faster than the queue).
    pub queue_timeout: Duration,
    /// How long a job read waits: the daemon for a refresh's first batch (a few seconds, its
    /// passes go on), a command for every job (the whole deadline).
    pub queue_wait: Duration,
    /// The kept queue answers at most this long without asking `jobs/state/` again (the daemon:
    /// its poll interval, so that pending jobs are seen within one).
    pub queue_every: Duration,
    /// Most job records kept ([`MAX_JOBS`], or `SLURMOPS_SLURM_MAX_JOBS`).
    pub max_jobs: usize,
    /// The Slurm user the jobs slurmops submits run as (checks, canaries' validations): an
    /// unprivileged user that exists on slurmctld and every worker, never the administrator
    /// whose token drains nodes ([`DEFAULT_JOB_USER`], or `SLURMOPS_JOB_USER`).
    pub job_user: String,
}

/// The user slurmops' jobs run as unless the install names another: an unprivileged system
/// account every image has (Debian, Ubuntu, RHEL and Alpine alike); `nobody` cannot be it, Slurm
/// refuses jobs of `nobody` since 25.05.
pub const DEFAULT_JOB_USER: &str = "daemon";

/// Users the jobs slurmops submits never run as, whatever the install says (besides the
/// administrator its token speaks for): root, and `nobody`, whose jobs Slurm 25.05+ refuses.
pub const REFUSED_JOB_USERS: [&str; 2] = ["root", "nobody"];

/// The setting that names the user slurmops' jobs run as, for every command and the daemon.
pub const JOB_USER_ENV: &str = "SLURMOPS_JOB_USER";

impl Config {
    pub fn new(url: impl Into<String>, credentials: Credentials) -> Config {
        Config {
            url: url.into(),
            credentials,
            ca_pem: None,
            parser: None,
            timeout: Duration::from_secs(10),
            attempts: 4,
            backoff: Duration::from_millis(200),
            allow_http: false,
            max_answer: max_answer_from(std::env::var(MAX_ANSWER_ENV).ok().as_deref()),
            queue_timeout: QUEUE_TIMEOUT,
            queue_wait: QUEUE_TIMEOUT,
            queue_every: JOBS_REUSE_CAP,
            max_jobs: queue::max_jobs_from(std::env::var(MAX_JOBS_ENV).ok().as_deref()),
            job_user: std::env::var(JOB_USER_ENV)
                .ok()
                .map(|u| u.trim().to_string())
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| DEFAULT_JOB_USER.into()),
        }
    }
}

/// Deadline of `jobs/state/`, and how long a command waits for every job, by default.
pub const QUEUE_TIMEOUT: Duration = Duration::from_secs(300);

/// The setting that raises [`MAX_ANSWER`] (MiB), for every command and the daemon alike.
pub const MAX_ANSWER_ENV: &str = "SLURMOPS_SLURM_MAX_ANSWER_MIB";

/// The answer cap SETTING (MiB) asks for; [`MAX_ANSWER`] when unset or not a number of MiB.
fn max_answer_from(setting: Option<&str>) -> usize {
    setting
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|m| (1..=16 * 1024).contains(m))
        .map_or(MAX_ANSWER, |m| m << 20)
}

/// A slurmrestd client; clones share everything (connections, credentials, what was read), so
/// a read may go on in a task of its own.
#[derive(Clone)]
pub struct Client(std::sync::Arc<Inner>);

impl std::ops::Deref for Client {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

#[doc(hidden)]
pub struct Inner {
    http: reqwest::Client,
    config: Config,
    base: String,
    issued: Mutex<Option<Issued>>,
    parser: Mutex<Option<DataParser>>,
    /// Requests sent (attempts included) and answer bytes read: what the passes cost Slurm.
    sent: std::sync::atomic::AtomicU64,
    received: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The last node list, asked again with `update_time`.
    kept_nodes: tokio::sync::Mutex<Option<KeptNodes>>,
    /// A whole node list asked for and not answered within a pass's deadline: its request goes
    /// on (until `WHOLE_NODES_TIMEOUT`), and the next read waits for it.
    whole_nodes: tokio::sync::Mutex<Option<WholeNodes>>,
    /// The job queue as last read (see `queue`). The lock also keeps a second refresh
    /// from starting while one is in flight.
    queue: tokio::sync::Mutex<queue::Queue>,
    /// slurmrestd's pods, addressed one by one when known (see `replicas`).
    replicas: Mutex<replicas::Replicas>,
}

/// What slurmrestd cost so far: requests sent and answer bytes read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub requests: u64,
    pub bytes: u64,
}

impl std::ops::Sub for Traffic {
    type Output = Traffic;
    fn sub(self, earlier: Traffic) -> Traffic {
        Traffic {
            requests: self.requests.saturating_sub(earlier.requests),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }
}

/// The kept queue is reused without asking `jobs/state/` again while it is younger than this many
/// times what that read took, at most [`JOBS_REUSE_CAP`] (or `Config::queue_every`, the daemon's
/// poll interval, so that a pending job is seen within one).
pub const JOBS_REUSE_FACTOR: u32 = 10;
pub const JOBS_REUSE_CAP: Duration = Duration::from_secs(60);

/// Largest slurmrestd answer read (the node and job lists of a large cluster are tens of MB).
pub const MAX_ANSWER: usize = 128 << 20;

/// Whether URL is https://, or plain http:// to loopback or to an in-cluster Service name (the
/// traffic then stays on the host or inside the cluster network).
pub fn plain_http_ok(url: &str) -> bool {
    !url.starts_with("http://") || crate::net::stays_near(url)
}

impl Client {
    pub fn new(config: Config) -> Result<Client, SlurmError> {
        // One process-wide TLS provider (ring); a second install attempt is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(3))
            .user_agent(concat!("slurmops/", env!("CARGO_PKG_VERSION")))
            // slurmrestd never redirects: a redirect would carry the token to another place.
            .redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = &config.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| SlurmError::Config(format!("the CA bundle is not valid PEM: {e}")))?;
            builder = builder.tls_certs_only(certs);
        }
        let http = builder
            .build()
            .map_err(|e| SlurmError::Config(format!("cannot build the HTTP client: {e}")))?;
        let base = config.url.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(SlurmError::Config(format!(
                "slurmrestd URL {base:?} must start with http:// or https://"
            )));
        }
        if !config.allow_http && !plain_http_ok(&base) {
            return Err(SlurmError::Config(format!(
                "slurmrestd URL {base}: refusing to send a token over plain http:// beyond this host or the cluster's own Services; use https://, a port-forward to 127.0.0.1, or allow it explicitly with SLURMOPS_ALLOW_HTTP=true (`run --allow-http`)"
            )));
        }
        Ok(Client(std::sync::Arc::new(Inner {
            http,
            parser: Mutex::new(config.parser),
            config,
            base,
            issued: Mutex::new(None),
            sent: std::sync::atomic::AtomicU64::new(0),
            received: Default::default(),
            kept_nodes: tokio::sync::Mutex::new(None),
            whole_nodes: tokio::sync::Mutex::new(None),
            queue: Default::default(),
            replicas: Default::default(),
        })))
    }

    /// Requests sent so far.
    pub fn requests(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Requests sent and answer bytes read so far.
    pub fn traffic(&self) -> Traffic {
        Traffic {
            requests: self.requests(),
            bytes: self.received.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Speak data parser P instead of probing.
    pub fn set_parser(&mut self, p: DataParser) {
        *self.parser.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
    }

    pub fn url(&self) -> &str {
        &self.base
    }
}

/// A client of the local test slurmrestd at URL: token `t`, data parser v0.0.42, one attempt.
#[cfg(test)]
fn test_config(url: String) -> Config {
    let mut config = Config::new(
        url,
        Credentials::Token {
            token: super::auth::Secret::new("t"),
            user: None,
        },
    );
    config.parser = Some(DataParser::V0042);
    config.attempts = 1;
    config
}

#[cfg(test)]
mod tests;
