//! `daemon`: git → cluster, continuously, as a level-triggered controller. Each pass (see
//! `pass`) fetches when due, adopts the newest valid commit, runs the controller's pass (apply
//! what is safe now, move every NodeSet's workers on by the steps safe now) and returns. Passes
//! come every `--interval`, at once after a pass that acted, on a signed webhook, and on every
//! change of a watched worker pod or StatefulSet. No pass waits for a job: a new commit is
//! applied while another NodeSet's worker waits for its job to end.
//!
//! An invalid commit is never applied: the last good target stays and the status ConfigMap names
//! the commit and its errors. Only the replica holding the Lease writes, and a pass stops before
//! its next write once the lease is lost. SIGTERM finishes the current pass, releases the lease
//! and exits.

pub mod allocator;
mod early;
pub mod http;
pub mod install;
mod label_escape;
pub mod lease;
pub mod metrics;
pub mod monitoring;
mod pass;
mod replicas;
pub mod slurm_metrics;
pub use pass::QUEUE_WAIT;
mod report;
mod told;
pub mod view;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use self::http::{Metrics, Shared};
use crate::apply::Options;
use crate::controller::watch::Cache;
use crate::k8s::Connection;
use crate::slurm::Client;
use crate::source::remote::{Fetched, Remote};
use crate::status::configmap::{self, Status};

/// Where the daemon's Slurm client comes from.
pub enum SlurmSource {
    /// No Slurm: apply refuses what could kill a job, and nothing rolls.
    Off,
    /// A client given on the command line (`--slurmrestd-url` with `--slurm-jwt`).
    Static(Arc<Client>),
    /// Tokens minted from the target cluster.yaml's JWT key Secret, sent to its slurmrestd
    /// Service (or URL), as USER.
    Cluster {
        url: Option<String>,
        user: String,
        /// The user slurmops' jobs run as (`slurm::Config::job_user`).
        job_user: String,
        allow_http: bool,
    },
}

/// Everything the daemon runs with.
pub struct Config {
    pub remote: Remote,
    pub interval: Duration,
    /// Re-apply the last commit this often even without a new one (drift correction).
    pub drift_interval: Duration,
    pub listen: Option<SocketAddr>,
    pub webhook_secret: Option<secrecy::SecretSlice<u8>>,
    /// Namespace of the status ConfigMap and the leader Lease.
    pub namespace: String,
    /// What the install allows a commit (checked with validation: a refused commit is
    /// `refused`, each finding at its position).
    pub guard: crate::cluster::Guardrails,
    /// The cluster (cluster.yaml's metadata.name) this daemon manages, when several share the
    /// namespace: its Lease, status ConfigMap and metrics carry the name, and a cluster.yaml
    /// naming another cluster is refused.
    pub cluster: Option<String>,
    pub identity: String,
    /// This replica's own pod (`POD_NAME`, set by the installed Deployment): the leader labels it
    /// `slurmops.dev/leader=true` so the Service routes to it alone. None outside a pod.
    pub pod: Option<String>,
    pub slurm: SlurmSource,
    pub apply: Options,
    /// Apply only commits signed by one of these keys.
    pub allowed_signers: Option<crate::source::signature::AllowedSigners>,
    /// Take a tip that does not descend from the last applied commit (logged, and an Event);
    /// without it such a tip is refused.
    pub allow_force_push: bool,
    /// One pass, then exit (for jobs and tests).
    pub once: bool,
    /// Fetch, validate and report, apply nothing.
    pub suspend: bool,
    /// Serve the live view (`/` and `/api/v1/cluster`).
    pub ui: bool,
    /// The bearer token the live view's data asks for, if any.
    pub ui_token: Option<secrecy::SecretSlice<u8>>,
}

/// A valid commit: its cluster.yaml parsed and rendered.
struct Loaded {
    fetched: Fetched,
    c: crate::cluster::ClusterFile,
    r: crate::render::Rendered,
}

/// A fetch running beside the passes.
type Fetching = tokio::task::JoinHandle<Result<Fetched, String>>;

/// What the loop remembers between passes (a cache: everything that matters is derivable from the
/// cluster, Slurm and git; a restarted daemon rebuilds it in one pass).
#[derive(Default)]
struct State {
    status: Status,
    written: Option<(Status, Instant)>,
    applied_at: Option<Instant>,
    fetched_at: Option<Instant>,
    /// The fetch in flight, if any.
    fetching: Option<Fetching>,
    /// The newest valid commit: what the controller works towards.
    target: Option<Loaded>,
    /// The last pass held a scale-in or a removal back: apply again.
    held: bool,
    /// The last accounting step met slurmrestd or slurmdbd not up (or Slurm not connected): it
    /// runs again, alone, in each pass that finds Slurm answering, until it reads slurmdbd.
    accounting_pending: bool,
    /// When a maintenance window a rollout waits for opens (UNIX seconds).
    wake_at: Option<i64>,
    /// Events posted lately, to count repeats on them.
    events: crate::status::Recorder,
    /// Waiting workers (NodeSet/node/jobs) already told in an Event.
    waiting_told: std::collections::BTreeSet<String>,
    /// Conditions told once when they start, change and end (not every pass): worker sync or
    /// autoscale failing, Slurm unknown, the job queue unknown, no Slurm client.
    told: Told,
    /// Watched workers of the target.
    cache: Option<Cache>,
    /// Slurm client minted from the JWT key Secret: (which Secret and URL, client, read at).
    slurm: Option<(String, Arc<Client>, Instant)>,
    /// With several slurmrestd: the watch of its Service's Endpoints.
    replicas: Option<replicas::Follow>,
    /// What the last controller pass cost, for its debug line.
    /// The last pass's phases, slurmrestd traffic and jobs seen (-1: the queue was needed and
    /// not known; 0 also when it was not read).
    /// The last pass's cost: its phases, what it asked of slurmrestd, the jobs it read (-1:
    /// the queue unknown), and whether it read Slurm's state (a pass that did not decides
    /// nothing that needs it).
    cost: Option<(crate::controller::Phases, crate::slurm::Traffic, i64, bool)>,
    /// A force-push taken (`--allow-force-push`), to record as an Event.
    force_pushed: Option<String>,
}

/// The persisting conditions of the loop (see `told`).
#[derive(Default)]
struct Told {
    upkeep: told::Persisting,
    slurm: told::Persisting,
    queue: told::Persisting,
    connect: told::Persisting,
    /// The watches making their first listing of the workers.
    listing: told::Persisting,
    /// A copy before a Slurm upgrade failed: the upgrade stands still.
    copy: told::Persisting,
    /// Accounting waiting for slurmrestd or slurmdbd to answer.
    accounting: told::Persisting,
}

/// Runs until SIGTERM/SIGINT (or one pass with `once`).
pub async fn run(cluster: Connection, cfg: Config) -> Result<(), String> {
    let shared = Arc::new(Shared {
        secret: cfg.webhook_secret.clone(),
        branch: cfg.remote.branch.clone(),
        sync_now: Arc::new(tokio::sync::Notify::new()),
        fetch_now: AtomicBool::new(true),
        became_leader: AtomicBool::new(false),
        metrics: std::sync::Mutex::new(Metrics::for_cluster(cfg.cluster.as_deref())),
        last_pass: std::sync::Mutex::new(None),
        stale_after: cfg.interval * 5 + Duration::from_secs(60),
        fetching_since: std::sync::Mutex::new(None),
        fetch_stuck: cfg.remote.deadline() + cfg.remote.timeout + Duration::from_secs(60),
        deliveries: Default::default(),
        view: view::View::new(
            cfg.ui,
            cfg.ui_token
                .as_ref()
                .map(secrecy::ExposeSecret::expose_secret),
        ),
    });
    if let Some(addr) = cfg.listen {
        let listener = http::bind(addr).await?;
        tokio::spawn(http::serve(listener, shared.clone()));
    }
    let elector = Arc::new(lease::Elector::new(
        cluster.client.clone(),
        &cfg.namespace,
        crate::apply::rbac::lease_for(cfg.cluster.as_deref()),
        cfg.identity.clone(),
        Duration::from_secs(15),
    ));
    let leading = Arc::new(AtomicBool::new(false));
    let renewed: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    if cfg.once {
        // One pass, and only as the leader: a one-off run never races a running daemon.
        let lead = elector
            .try_lead()
            .await
            .map_err(|e| format!("leader election: {e}"))?;
        if !lead {
            return Err(format!(
                "another replica holds the Lease {}/{}; nothing applied",
                cfg.namespace, elector.name
            ));
        }
        leading.store(true, Ordering::SeqCst);
        *renewed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    } else {
        tokio::spawn(keep_leading(
            elector.clone(),
            leading.clone(),
            renewed.clone(),
            shared.clone(),
            cfg.pod.clone(),
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    tokio::spawn(watch_signals(stop.clone(), shared.clone()));

    let mut state = State {
        status: Status {
            repository: cfg.remote.shown_url(),
            branch: cfg.remote.branch.clone(),
            ..Status::default()
        },
        ..State::default()
    };
    // A restarted daemon, or a new leader, carries on from the status the last one wrote.
    if let Ok(Some(prev)) =
        configmap::read(&cluster.client, &cfg.namespace, cfg.cluster.as_deref()).await
        && prev.repository == cfg.remote.shown_url()
        && prev.branch == cfg.remote.branch
    {
        state.status = prev;
    }
    let mut waiting_said = false;
    // Fencing: a pass writes only while this replica holds the lease and renewed it within two
    // thirds of its duration (a replica stalled longer may have been replaced already).
    let (holding, renewed) = (leading.clone(), renewed.clone());
    let fresh_for = elector.duration * 2 / 3;
    let fence = move || {
        holding.load(Ordering::SeqCst)
            && renewed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|t| t.elapsed() < fresh_for)
    };
    loop {
        let mut acted = false;
        let started = Instant::now();
        if leading.load(Ordering::SeqCst) {
            acted = pass::pass(&cluster, &cfg, &shared, &mut state, &fence).await;
            waiting_said = false;
        } else {
            // A standby keeps no watches; it rebuilds everything when it leads.
            state.cache = None;
            if !waiting_said {
                tracing::info!(identity = %cfg.identity, "{}: not the leader; waiting", cfg.identity);
                waiting_said = true;
            }
        }
        *shared.last_pass.lock().expect("last pass") = Some(Instant::now());
        shared
            .metrics
            .lock()
            .expect("metrics")
            .passed(cluster.log.summary());
        if cfg.once || stop.load(Ordering::SeqCst) {
            break;
        }
        if !acted {
            // A maintenance window that a rollout waits for opens, or a canary's time runs out,
            // before the next poll: pass then (a time already past was this pass's to judge).
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let until = state
                .wake_at
                .filter(|t| *t > now)
                .map(|t| Duration::from_secs((t - now) as u64 + 1));
            let sleep = until.map_or(cfg.interval, |w| w.min(cfg.interval));
            let woken = tokio::select! {
                _ = tokio::time::sleep(sleep) => false,
                _ = shared.sync_now.notified() => true,
            };
            // Events come in bursts (a pod's several status updates, job churn on many workers):
            // take them as one, and after a pass that did nothing start at most one a second.
            let settle = Duration::from_millis(20);
            let gap = match woken {
                true => MIN_PASS_GAP.saturating_sub(started.elapsed()).max(settle),
                false => settle,
            };
            tokio::time::sleep(gap).await;
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
    }
    elector.release().await;
    Ok(())
}

/// After a pass that did nothing, the next one a watch event or a webhook brings starts at
/// least this long after it started (a pass that acted is followed at once).
const MIN_PASS_GAP: Duration = Duration::from_secs(1);

async fn keep_leading(
    elector: Arc<lease::Elector>,
    leading: Arc<AtomicBool>,
    renewed: Arc<std::sync::Mutex<Option<Instant>>>,
    shared: Arc<Shared>,
    pod: Option<String>,
) {
    // Whether our pod's leader label is known to say what we are (None: not written yet).
    let mut labelled: Option<bool> = None;
    loop {
        let answer = elector.try_lead().await;
        let now = *answer.as_ref().unwrap_or_else(|e| {
            tracing::warn!(identity = %elector.identity, "{}: leader election: {e}", elector.identity);
            &false
        });
        // A standby that follows the Lease is ready too (the Deployment's rollouts wait for
        // Ready pods: a standby that never is would hold every upgrade of the daemon for ever).
        shared.metrics.lock().expect("metrics").standby = matches!(answer, Ok(false));
        if let Some(pod) = &pod
            && answer.is_ok()
            && labelled != Some(now)
        {
            labelled = elector.label_leader(pod, now).await.then_some(now);
        }
        if now {
            *renewed.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        }
        let was = leading.swap(now, Ordering::SeqCst);
        if now != was {
            tracing::info!(
                identity = %elector.identity,
                leader = now,
                "{}: {}",
                elector.identity,
                if now {
                    "became the leader"
                } else {
                    "lost the lead"
                }
            );
            if now {
                shared.became_leader.store(true, Ordering::SeqCst);
                shared.sync_now.notify_one();
            }
        }
        shared.metrics.lock().expect("metrics").leader(now);
        tokio::time::sleep(elector.duration / 3).await;
    }
}

async fn watch_signals(stop: Arc<AtomicBool>, shared: Arc<Shared>) {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("stopping after the current pass");
    stop.store(true, Ordering::SeqCst);
    shared.sync_now.notify_one();
}
