//! The slurmrestd HTTP client: finds the newest data parser both sides speak, authenticates with
//! a JWT, retries what is safe to retry, and turns every answer it cannot trust into an error.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use super::SlurmError;
use super::auth::{Credentials, Issued};
use super::model::{
    ApiMessage, DataParser, Envelope, JobRequest, Node, NodesWire, Reservation, ReservationRequest,
    ReservationsWire,
};
use answer::Answer;
pub use nodes::WHOLE_NODES_TIMEOUT;
use nodes::{KeptNodes, WholeNodes};

mod answer;
mod nodes;
mod queue;
mod replicas;
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

/// One answer of the ping endpoint.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Ping {
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub pinged: String,
    #[serde(default)]
    pub responding: bool,
    #[serde(default)]
    pub mode: String,
}

#[derive(serde::Deserialize)]
struct PingsWire {
    #[serde(default)]
    pings: Vec<Ping>,
}

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

    /// The answer's body to the request for URL, at most [`MAX_ANSWER`] bytes (within the
    /// request's timeout).
    async fn read_bounded(
        &self,
        url: &str,
        mut resp: reqwest::Response,
        deadline: Duration,
    ) -> Result<Vec<u8>, SlurmError> {
        // An answer announcing more than the bound is refused before its body; within it, its
        // length is reserved at once (a buffer doubling its way to the 23 MB of 10,000 nodes
        // copied itself at every step and held 16 and 32 MB together at the last).
        let announced = resp.content_length().unwrap_or(0) as usize;
        if announced > self.config.max_answer {
            return Err(SlurmError::TooLarge {
                path: self.path_of(url),
                limit_mib: self.config.max_answer >> 20,
            });
        }
        let mut body = Vec::with_capacity(announced);
        loop {
            let chunk = resp
                .chunk()
                .await
                .map_err(|e| self.failed(url, &e, deadline))?;
            let Some(chunk) = chunk else {
                return Ok(body);
            };
            if body.len() + chunk.len() > self.config.max_answer {
                return Err(SlurmError::TooLarge {
                    path: self.path_of(url),
                    limit_mib: self.config.max_answer >> 20,
                });
            }
            self.received
                .fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
            body.extend_from_slice(&chunk);
        }
    }

    /// URL without the base (what the errors name).
    fn path_of(&self, url: &str) -> String {
        url.strip_prefix(&self.base).unwrap_or(url).to_string()
    }

    /// A failed request to URL: its deadline passed (not retried), or slurmrestd is out of reach.
    fn failed(&self, url: &str, e: &reqwest::Error, deadline: Duration) -> SlurmError {
        match e.is_timeout() {
            true => SlurmError::Timeout {
                url: self.base.clone(),
                path: self.path_of(url),
                secs: deadline.as_secs(),
            },
            false => SlurmError::Unreachable {
                url: self.base.clone(),
                detail: error_chain(e),
            },
        }
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

    /// The data parser in use, probing newest first on first use.
    pub async fn parser(&self) -> Result<DataParser, SlurmError> {
        if let Some(p) = *self.parser.lock().unwrap() {
            return Ok(p);
        }
        for p in DataParser::ALL {
            match self.send(p, Method::GET, "ping/", None).await {
                Ok(_) => {
                    *self.parser.lock().unwrap() = Some(p);
                    return Ok(p);
                }
                Err(SlurmError::Api { status: 404, .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(SlurmError::NoDataParser {
            url: self.base.clone(),
        })
    }

    pub async fn ping(&self) -> Result<Vec<Ping>, SlurmError> {
        let w: PingsWire = self.get("ping/").await?;
        Ok(w.pings)
    }

    /// One node; `UnknownNode` when Slurm does not know it.
    pub async fn node(&self, name: &str) -> Result<Node, SlurmError> {
        let path = format!("node/{}", segment(name)?);
        let w: NodesWire = match self.get(&path).await {
            Ok(w) => w,
            // slurmrestd 24.11 answers an unknown node with HTTP 200 and an error of number 0
            // ("Failure to query node"), the same as other failures. Only the full node list
            // tells them apart: absent there means unknown; anything else keeps the error.
            Err(e @ SlurmError::Api { .. }) => {
                return match self.nodes().await {
                    Ok(all) if !all.contains_key(name) => Err(SlurmError::UnknownNode(name.into())),
                    _ => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        w.nodes
            .into_iter()
            .map(Node::from)
            .find(|n| n.name == name)
            .ok_or_else(|| SlurmError::UnknownNode(name.into()))
    }

    /// Sets node state (`DRAIN`, `RESUME`, ...) with a reason.
    pub async fn update_node(
        &self,
        name: &str,
        state: &str,
        reason: Option<&str>,
    ) -> Result<(), SlurmError> {
        let mut body = serde_json::json!({"state": [state]});
        if let Some(r) = reason {
            body["reason"] = r.into();
        }
        let p = self.parser().await?;
        let path = format!("node/{}", segment(name)?);
        self.send(p, Method::POST, &path, Some(body)).await?;
        Ok(())
    }

    /// Puts node NAME in TOPOLOGY (`TOPOLOGY:UNIT`, a block or leaf switch topology.yaml
    /// declares). Needs data parser v0.0.43 or later (Slurm 25.05), the first to carry a node's
    /// topology.
    pub async fn set_topology(&self, name: &str, topology: &str) -> Result<(), SlurmError> {
        let p = self.parser().await?;
        if !p.has_node_topology() {
            return Err(SlurmError::Config(format!(
                "setting node {name:?}'s topology needs slurmrestd data parser v0.0.43 or later (Slurm 25.05); slurmrestd at {} speaks {}",
                self.base,
                p.as_str()
            )));
        }
        let path = format!("node/{}", segment(name)?);
        let body = serde_json::json!({ "topology_str": topology });
        self.send(p, Method::POST, &path, Some(body)).await?;
        Ok(())
    }

    /// Submits a batch job as the job user (`Config::job_user`, never the administrator whose
    /// token this client holds), then gives it the top priority with that token (Slurm keeps a
    /// priority only from an operator); its id. A job whose priority could not be set is
    /// cancelled and the error returned: a later pass submits it again.
    pub async fn submit(&self, job: &JobRequest) -> Result<u64, SlurmError> {
        #[derive(serde::Deserialize)]
        struct Submitted {
            job_id: Option<u64>,
        }
        let user = self.job_user()?;
        let p = self.parser().await?;
        self.jobs_changed().await;
        let url = format!("{}/slurm/{}/job/submit", self.base, p.as_str());
        let body: Vec<u8> = self
            .send_url_within(
                Method::POST,
                url,
                Some(job.body()),
                self.config.timeout,
                Some(user),
            )
            .await?;
        let s: Submitted = serde_json::from_slice(&body)
            .map_err(|e| self.parse_error("job/submit", e.to_string()))?;
        let id = s
            .job_id
            .ok_or_else(|| self.parse_error("job/submit", "no job_id in the answer".into()))?;
        let priority = serde_json::json!({ "priority": JobRequest::priority() });
        if let Err(e) = self
            .send(p, Method::POST, &format!("job/{id}"), Some(priority))
            .await
        {
            let _ = self.cancel(id).await;
            return Err(e);
        }
        Ok(id)
    }

    /// The user jobs are submitted as, when it is not the administrator this client's token
    /// speaks for (nor root): jobs slurmops submits never hold the administrator's rights.
    pub fn job_user(&self) -> Result<&str, SlurmError> {
        let u = self.config.job_user.as_str();
        let admin = self.credentials_user();
        if u.is_empty() || REFUSED_JOB_USERS.contains(&u) || admin.as_deref() == Some(u) {
            return Err(SlurmError::Config(format!(
                "the jobs slurmops submits (checks, canaries' validations) cannot run as {u:?} (the Slurm administrator, root, or nobody, whose jobs Slurm refuses); name an unprivileged user that exists on slurmctld and every worker with --job-user (or {JOB_USER_ENV}; default {DEFAULT_JOB_USER})"
            )));
        }
        Ok(u)
    }

    /// Cancels job ID (a job already ended is no error).
    pub async fn cancel(&self, id: u64) -> Result<(), SlurmError> {
        let p = self.parser().await?;
        self.jobs_changed().await;
        match self
            .send(p, Method::DELETE, &format!("job/{id}"), None)
            .await
        {
            Ok(_) => Ok(()),
            Err(SlurmError::Api { errors, .. })
                if errors.iter().any(|e| {
                    matches!(
                        e.error_number,
                        Some(errno::ALREADY_DONE | errno::INVALID_JOB_ID)
                    )
                }) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Creates reservation R (data parser v0.0.43 on; Slurm 24.11 cannot).
    pub async fn create_reservation(&self, r: &ReservationRequest) -> Result<(), SlurmError> {
        let p = self.parser().await?;
        if !p.creates_reservations() {
            return Err(SlurmError::Config(format!(
                "creating a reservation needs slurmrestd data parser v0.0.43 or later (Slurm 25.05+); slurmrestd at {} speaks {}",
                self.base,
                p.as_str()
            )));
        }
        self.send(p, Method::POST, "reservation", Some(r.body()))
            .await?;
        Ok(())
    }

    /// Deletes reservation NAME (gone already is no error).
    pub async fn delete_reservation(&self, name: &str) -> Result<(), SlurmError> {
        let p = self.parser().await?;
        let path = format!("reservation/{}", segment(name)?);
        match self.send(p, Method::DELETE, &path, None).await {
            Ok(_) => Ok(()),
            Err(_) if self.reservations().await?.iter().all(|r| r.name != name) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub async fn reservations(&self) -> Result<Vec<Reservation>, SlurmError> {
        let w: ReservationsWire = self.get("reservations/").await?;
        w.reservations
            .into_iter()
            .map(|r| {
                Reservation::try_from(r)
                    .map_err(|e| self.parse_error("reservations/", e.to_string()))
            })
            .collect()
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, SlurmError> {
        let p = self.parser().await?;
        let body = self.send(p, Method::GET, path, None).await?;
        serde_json::from_slice(&body).map_err(|e| self.parse_error(path, e.to_string()))
    }

    /// As `get`, under the deadline of `jobs/state/` (`Config::queue_timeout`).
    async fn get_slow<T: DeserializeOwned>(&self, path: &str) -> Result<T, SlurmError> {
        let p = self.parser().await?;
        let url = format!("{}/slurm/{}/{path}", self.base, p.as_str());
        let body: Vec<u8> = self
            .send_url_within(Method::GET, url, None, self.config.queue_timeout, None)
            .await?;
        serde_json::from_slice(&body).map_err(|e| self.parse_error(path, e.to_string()))
    }

    fn parse_error(&self, path: &str, detail: String) -> SlurmError {
        SlurmError::Parse {
            what: format!("{}/slurm/.../{path}", self.base),
            detail,
        }
    }

    /// The Slurm user this client's requests run as, when known.
    pub fn credentials_user(&self) -> Option<String> {
        self.config.credentials.user()
    }

    fn credentials(&self) -> Issued {
        let mut slot = self.issued.lock().unwrap();
        let now = SystemTime::now();
        match &*slot {
            Some(i) if i.renew_at.is_none_or(|t| now < t) => i.clone(),
            _ => {
                let i = self.config.credentials.issue(now);
                *slot = Some(i.clone());
                i
            }
        }
    }

    /// Sends one request, retrying transient failures; returns the body of a clean answer.
    async fn send(
        &self,
        parser: DataParser,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<Vec<u8>, SlurmError> {
        let url = format!("{}/slurm/{}/{path}", self.base, parser.as_str());
        self.send_url(method, url, body).await
    }

    /// One request to slurmrestd's slurmdbd plugin (`openapi/slurmdbd`), at data parser
    /// v0.0.42: 24.11 and 26.05 serve it with the same shapes (see `accounting::rest`).
    pub async fn slurmdb(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<Vec<u8>, SlurmError> {
        let url = format!(
            "{}/slurmdb/{}/{path}",
            self.base,
            DataParser::V0042.as_str()
        );
        self.send_url(method, url, body).await
    }

    async fn send_url(
        &self,
        method: Method,
        url: String,
        body: Option<serde_json::Value>,
    ) -> Result<Vec<u8>, SlurmError> {
        self.send_url_within(method, url, body, self.config.timeout, None)
            .await
    }

    /// As `send_url`, each attempt within DEADLINE; AS_USER: run as that Slurm user instead
    /// (X-SLURM-USER-NAME with this client's administrator token).
    async fn send_url_within<A: Answer>(
        &self,
        method: Method,
        url: String,
        body: Option<serde_json::Value>,
        deadline: Duration,
        as_user: Option<&str>,
    ) -> Result<A, SlurmError> {
        let mut delay = self.config.backoff;
        let mut attempt = 1;
        loop {
            let result = match self
                .to_replicas(&method, &url, body.as_ref(), deadline, as_user)
                .await
            {
                Some(r) => r,
                None => {
                    self.send_once(&method, &url, body.as_ref(), deadline, as_user)
                        .await
                }
            };
            match result {
                Err(e) if e.is_transient() && attempt < self.config.attempts => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn send_once<A: Answer>(
        &self,
        method: &Method,
        url: &str,
        body: Option<&serde_json::Value>,
        deadline: Duration,
        as_user: Option<&str>,
    ) -> Result<A, SlurmError> {
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut req = self.authorized(method, url, as_user).timeout(deadline);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| self.failed(url, &e, deadline))?;
        let status = resp.status();
        // A conditional list read (`update_time`) whose list did not change.
        if status == StatusCode::NOT_MODIFIED && *method == Method::GET {
            return Ok(A::unchanged());
        }
        A::take(self, method, url, status, resp, deadline).await
    }

    /// A request to URL with this client's credentials; AS_USER names the Slurm user it runs as
    /// instead of the token's (slurmctld allows it to a token of SlurmUser or root only).
    fn authorized(
        &self,
        method: &Method,
        url: &str,
        as_user: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let creds = self.credentials();
        let mut req = self
            .http
            .request(method.clone(), url)
            .header("X-SLURM-USER-TOKEN", creds.token.expose());
        if let Some(u) = as_user.or(creds.user.as_deref()) {
            req = req.header("X-SLURM-USER-NAME", u);
        }
        req
    }
}

/// The error an answer with STATUS and BYTES (to METHOD URL of slurmrestd at BASE) says, if any.
fn answer_error(
    base: &str,
    method: &Method,
    url: &str,
    status: StatusCode,
    bytes: &[u8],
) -> Option<SlurmError> {
    let envelope: Envelope = serde_json::from_slice(bytes).unwrap_or_default();
    let failed = !status.is_success() || !envelope.errors.is_empty() || auth_refused(status);
    failed.then(|| error_of(base, method, url, status, envelope.errors, bytes))
}

/// 26.05 answers a token it cannot verify with 511 (24.11: 500 with error 1007).
fn auth_refused(status: StatusCode) -> bool {
    [
        StatusCode::UNAUTHORIZED,
        StatusCode::FORBIDDEN,
        StatusCode::NETWORK_AUTHENTICATION_REQUIRED,
    ]
    .contains(&status)
}

/// The error of a failed answer with STATUS and ERRORS (Slurm's; none: the start of BYTES says
/// what failed) to METHOD URL of slurmrestd at BASE.
fn error_of(
    base: &str,
    method: &Method,
    url: &str,
    status: StatusCode,
    errors: Vec<ApiMessage>,
    bytes: &[u8],
) -> SlurmError {
    if auth_refused(status) || errors.iter().any(|e| e.error_number == Some(errno::AUTH)) {
        return SlurmError::Auth {
            url: base.to_string(),
            status: status.as_u16(),
            errors,
        };
    }
    SlurmError::Api {
        method: method.to_string(),
        path: url.strip_prefix(base).unwrap_or(url).to_string(),
        status: status.as_u16(),
        errors: if errors.is_empty() {
            vec![ApiMessage {
                description: Some(String::from_utf8_lossy(bytes).chars().take(300).collect()),
                ..ApiMessage::default()
            }]
        } else {
            errors
        },
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

/// A node name as one URL path segment; names that would escape it are refused.
fn segment(name: &str) -> Result<&str, SlurmError> {
    plain_name(name, "node")
}

/// NAME, a Slurm name of WHAT (node, account, ...), as it may stand in a URL path or query:
/// Slurm names never need escaping, so anything else is refused.
pub fn plain_name<'a>(name: &'a str, what: &str) -> Result<&'a str, SlurmError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(name)
    } else {
        Err(SlurmError::Config(format!(
            "{name:?} is not a Slurm {what} name (letters, digits, '-', '_', '.')"
        )))
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        src = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::slurm::auth::Secret;

    #[test]
    fn jobs_are_never_submitted_as_the_administrator_the_token_speaks_for_nor_root() {
        let client = |job_user: &str| {
            let creds = Credentials::Key {
                key: crate::slurm::auth::KeyBytes(b"k".to_vec()),
                user: "slurm".into(),
                lifetime: Duration::from_secs(60),
            };
            let mut c = Config::new("http://127.0.0.1:9", creds);
            c.job_user = job_user.into();
            Client::new(c).unwrap()
        };
        for admin in ["slurm", "root", "nobody", ""] {
            let e = client(admin).job_user().unwrap_err().to_string();
            assert!(e.contains("--job-user"), "{admin}: {e}");
        }
        assert_eq!(client("daemon").job_user().unwrap(), "daemon");
        let c = client("hpc-checks");
        assert_eq!(
            crate::slurm::SlurmNodes::submitter(&c).as_deref(),
            Some("hpc-checks")
        );
    }

    /// A server that answers every request with a redirect to TARGET.
    fn redirecting(target: String) -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = write!(
                    s,
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}/slurm/v0.0.42/ping/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        port
    }

    #[test]
    fn the_answer_cap_is_raised_in_mib_and_nonsense_keeps_the_default() {
        assert_eq!(max_answer_from(None), MAX_ANSWER);
        assert_eq!(max_answer_from(Some("512")), 512 << 20);
        assert_eq!(max_answer_from(Some("lots")), MAX_ANSWER);
        assert_eq!(max_answer_from(Some("0")), MAX_ANSWER);
    }

    #[tokio::test]
    async fn a_redirect_never_carries_the_token_elsewhere() {
        let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = format!("http://{}", elsewhere.local_addr().unwrap());
        let reached = Arc::new(AtomicUsize::new(0));
        let counter = reached.clone();
        std::thread::spawn(move || {
            for _ in elsewhere.incoming().flatten() {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        let port = redirecting(target);
        let mut config = Config::new(
            format!("http://127.0.0.1:{port}"),
            Credentials::Token {
                token: Secret::new("eyJ.secret.token"),
                user: None,
            },
        );
        config.attempts = 1;
        let client = Client::new(config).unwrap();
        let err = client.ping().await.unwrap_err().to_string();
        assert!(!err.contains("eyJ.secret.token"), "{err}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            reached.load(Ordering::SeqCst),
            0,
            "the redirect was followed"
        );
    }
}
