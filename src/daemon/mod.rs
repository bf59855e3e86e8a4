//! `daemon`: git → cluster, continuously. Each pass fetches the branch, reads cluster.yaml from
//! the fetched commit, and — when the commit is new, or the drift interval passed — validates and
//! reconciles it through the same code as `slurmops apply`. An invalid commit is never applied:
//! the last good state stays and the status ConfigMap names the commit and its errors. An
//! unreachable remote keeps the last applied state and reports since when it could not fetch.
//!
//! Only the replica holding the Lease applies; the others wait. SIGTERM finishes the current pass,
//! releases the lease and exits.

pub mod http;
pub mod install;
pub mod lease;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use self::http::{Metrics, Shared};
use crate::apply::{self, Cluster, NoSlurm, Options};
use crate::reconcile::{self, How};
use crate::render;
use crate::slurm::Client;
use crate::source::remote::{Fetched, Remote};
use crate::spec;
use crate::status::configmap::{self, Status};

/// Everything the daemon runs with.
pub struct Config {
    pub remote: Remote,
    pub interval: Duration,
    /// Re-apply the last commit this often even without a new one (drift correction).
    pub drift_interval: Duration,
    pub listen: Option<SocketAddr>,
    pub webhook_secret: Option<Vec<u8>>,
    /// Namespace of the status ConfigMap and the leader Lease.
    pub namespace: String,
    pub identity: String,
    pub slurm: Option<Client>,
    pub apply: Options,
    /// Apply only commits signed by one of these keys.
    pub allowed_signers: Option<crate::source::signature::AllowedSigners>,
    /// One pass, then exit (for jobs and tests).
    pub once: bool,
    /// Fetch, validate and report, apply nothing.
    pub suspend: bool,
}

/// What the loop remembers between passes.
#[derive(Default)]
struct State {
    status: Status,
    written: Option<(Status, Instant)>,
    applied_at: Option<Instant>,
    /// The last commit applied, for drift correction while newer commits are invalid.
    last_good: Option<Fetched>,
    /// Worker state sync between passes (with Slurm).
    syncer: Option<crate::sync::Syncer>,
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// Runs until SIGTERM/SIGINT (or one pass with `once`).
pub async fn run(cluster: Cluster, cfg: Config) -> Result<(), String> {
    let shared = Arc::new(Shared {
        secret: cfg.webhook_secret.clone(),
        branch: cfg.remote.branch.clone(),
        sync_now: tokio::sync::Notify::new(),
        metrics: std::sync::Mutex::new(Metrics::default()),
    });
    if let Some(addr) = cfg.listen {
        let listener = http::bind(addr).await?;
        tokio::spawn(http::serve(listener, shared.clone()));
    }
    let elector = Arc::new(lease::Elector::new(
        cluster.client.clone(),
        &cfg.namespace,
        cfg.identity.clone(),
        Duration::from_secs(15),
    ));
    let leading = Arc::new(AtomicBool::new(false));
    if cfg.once {
        // One pass, and only as the leader: a one-off run never races a running daemon.
        let lead = elector
            .try_lead()
            .await
            .map_err(|e| format!("leader election: {e}"))?;
        if !lead {
            return Err(format!(
                "another replica holds the Lease {}/{}; nothing applied",
                cfg.namespace,
                lease::NAME
            ));
        }
        leading.store(true, Ordering::SeqCst);
    } else {
        tokio::spawn(keep_leading(
            elector.clone(),
            leading.clone(),
            shared.clone(),
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    tokio::spawn(watch_signals(stop.clone(), shared.clone()));

    let mut state = State {
        status: Status {
            repository: cfg.remote.url.clone(),
            branch: cfg.remote.branch.clone(),
            ..Status::default()
        },
        ..State::default()
    };
    // A restarted daemon, or a new leader, carries on from the status the last one wrote.
    if let Ok(Some(prev)) = configmap::read(&cluster.client, &cfg.namespace).await
        && prev.repository == cfg.remote.url
        && prev.branch == cfg.remote.branch
    {
        state.status = prev;
    }
    let mut waiting_said = false;
    loop {
        if leading.load(Ordering::SeqCst) {
            pass(&cluster, &cfg, &shared, &mut state).await;
            waiting_said = false;
        } else if !waiting_said {
            tracing::info!(identity = %cfg.identity, "{}: not the leader; waiting", cfg.identity);
            waiting_said = true;
        }
        if cfg.once || stop.load(Ordering::SeqCst) {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(cfg.interval) => {}
            _ = shared.sync_now.notified() => {}
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
    }
    elector.release().await;
    Ok(())
}

async fn keep_leading(elector: Arc<lease::Elector>, leading: Arc<AtomicBool>, shared: Arc<Shared>) {
    loop {
        let now = elector.try_lead().await.unwrap_or_else(|e| {
            tracing::warn!(identity = %elector.identity, "{}: leader election: {e}", elector.identity);
            false
        });
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
                shared.sync_now.notify_one();
            }
        }
        shared.metrics.lock().expect("metrics").leader = now;
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

/// One pass: fetch, and reconcile when the commit is new or drift correction is due.
async fn pass(cluster: &Cluster, cfg: &Config, shared: &Arc<Shared>, state: &mut State) {
    let started = Instant::now();
    let remote = cfg.remote.clone();
    let fetched = tokio::task::spawn_blocking(move || remote.fetch())
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    shared.metrics.lock().expect("metrics").last_fetch_seconds = started.elapsed().as_secs_f64();
    state.status.last_attempt = now_rfc3339();
    match fetched {
        Err(e) => {
            // Keep the last applied state; say since when git is out of reach.
            state.status.result = "fetch-failed".into();
            state.status.errors = e.clone();
            tracing::error!(result = "fetch-failed", "{e}");
        }
        Ok(f) => {
            state.status.last_fetch = now_rfc3339();
            state.status.last_seen_commit = f.commit.clone();
            let drift_due = state
                .applied_at
                .is_none_or(|t| t.elapsed() >= cfg.drift_interval);
            let known_invalid = matches!(state.status.result.as_str(), "invalid" | "refused")
                && state.status.result_commit == f.commit;
            if known_invalid {
                // The last good commit stays applied, and drift against it is still corrected.
                if let Some(good) = state.last_good.clone().filter(|_| drift_due) {
                    let (result, errors) =
                        (state.status.result.clone(), state.status.errors.clone());
                    reconcile_commit(cluster, cfg, shared, state, &good).await;
                    state.status.result = result;
                    state.status.errors = errors;
                    state.status.result_commit = f.commit.clone();
                }
            } else if f.commit != state.status.last_applied_commit
                || drift_due
                || state.status.result != "applied"
            {
                reconcile_commit(cluster, cfg, shared, state, &f).await;
            }
        }
    }
    if let Some(slurm) = &cfg.slurm {
        keep_workers(cluster, cfg, slurm, state).await;
    }
    write_status(cluster, cfg, state).await;
    shared.metrics.lock().expect("metrics").ready = true;
}

/// With Slurm, every pass also runs autoscale and worker state sync for the applied cluster.yaml.
async fn keep_workers(cluster: &Cluster, cfg: &Config, slurm: &Client, state: &mut State) {
    let Some(good) = &state.last_good else { return };
    let Ok(c) = spec::load(&good.name, &good.text) else {
        return;
    };
    if c.spec.policy.suspend || cfg.suspend {
        return;
    }
    match crate::autoscale::run::tick(cluster, slurm, &c).await {
        Ok(outcomes) => {
            for o in outcomes.iter().filter(|o| o.from != o.to) {
                tracing::info!(node_set = %o.node_set, from = o.from, to = o.to, "{o}");
            }
        }
        Err(e) => tracing::warn!("autoscale: {e}"),
    }
    let syncer = state
        .syncer
        .get_or_insert_with(|| crate::sync::Syncer::new(Duration::from_secs(300)));
    match syncer.tick(cluster, slurm, &c).await {
        Ok(r) => {
            for n in &r.replaced_unregistered {
                tracing::warn!(pod = %n, "{n}: replaced: Ready but never registered in Slurm");
            }
            for n in &r.drained_for_cordon {
                tracing::info!(pod = %n, "{n}: drained: its Kubernetes node is cordoned");
            }
        }
        Err(e) => tracing::warn!("sync: {e}"),
    }
}

async fn reconcile_commit(
    cluster: &Cluster,
    cfg: &Config,
    shared: &Arc<Shared>,
    state: &mut State,
    f: &Fetched,
) {
    let started = Instant::now();
    let short = &f.commit[..12];
    state.status.result_commit = f.commit.clone();
    if let Some(allowed) = &cfg.allowed_signers
        && let Err(why) = allowed.verify(&f.commit, f.signature.as_ref())
    {
        tracing::warn!(commit = %f.commit, result = "refused", "commit {short}: refused: {why}");
        state.status.result = "refused".into();
        state.status.errors = why;
        count(shared, "refused", started);
        return;
    }
    let c = match spec::load(&f.name, &f.text) {
        Ok(c) => c,
        Err(diags) => {
            let errors: Vec<String> = diags.iter().map(ToString::to_string).collect();
            tracing::warn!(
                commit = %f.commit,
                result = "invalid",
                "commit {short}: cluster.yaml invalid ({} error(s)); not applied, the cluster stays at {}",
                errors.len(),
                if state.status.last_applied_commit.is_empty() {
                    "its current state".to_string()
                } else {
                    state.status.last_applied_commit[..12].to_string()
                }
            );
            state.status.result = "invalid".into();
            state.status.errors = errors.join("\n");
            count(shared, "invalid", started);
            return;
        }
    };
    if c.spec.policy.suspend || cfg.suspend {
        state.status.result = "suspended".into();
        state.status.errors.clear();
        state.status.summary = if cfg.suspend {
            "suspended (--suspend): nothing applied".into()
        } else {
            "spec.policy.suspend is set: nothing applied".into()
        };
        count(shared, "suspended", started);
        return;
    }
    let r = render::render(&c);
    let outcome = match &cfg.slurm {
        Some(slurm) => {
            let progress = shared.clone();
            let how = How {
                apply: cfg.apply.clone(),
                roll: true,
                rollout: crate::rollout::Settings {
                    observer: crate::rollout::Observer::new(move |set, e| {
                        tracing::info!(node_set = set, "{set}: {e}");
                        progress.metrics.lock().expect("metrics").rollout(e);
                    }),
                    ..Default::default()
                },
            };
            reconcile::reconcile(cluster, slurm, &c, &f.text, &r, &how)
                .await
                .map(|done| summary(&done.applied, &done.rolled))
                .map_err(|e| e.to_string())
        }
        None => apply::apply(cluster, &c, &f.text, &r, &cfg.apply, &NoSlurm)
            .await
            .map(|rep| summary(&rep, &[]))
            .map_err(|e| e.to_string()),
    };
    match outcome {
        Ok((text, drifted)) => {
            tracing::info!(commit = %f.commit, result = "applied", "commit {short}: applied: {text}");
            state.status.result = "applied".into();
            state.status.errors.clear();
            state.status.summary = text;
            state.status.last_applied_commit = f.commit.clone();
            state.applied_at = Some(Instant::now());
            state.last_good = Some(f.clone());
            let mut m = shared.metrics.lock().expect("metrics");
            m.drifted_objects = drifted;
            m.last_applied_timestamp = k8s_openapi::jiff::Timestamp::now().as_second();
            drop(m);
            count(shared, "applied", started);
        }
        Err(e) => {
            tracing::error!(commit = %f.commit, result = "failed", "commit {short}: apply failed: {e}");
            state.status.result = "failed".into();
            state.status.errors = e;
            count(shared, "failed", started);
        }
    }
}

fn count(shared: &Shared, result: &str, started: Instant) {
    let mut m = shared.metrics.lock().expect("metrics");
    *m.reconciles.entry(result.to_string()).or_default() += 1;
    m.last_reconcile_seconds = started.elapsed().as_secs_f64();
}

/// (one-line summary, drifted objects left in place).
fn summary(rep: &apply::Report, rolled: &[(String, Vec<String>)]) -> (String, usize) {
    let mut s = rep.counts();
    for (set, nodes) in rolled {
        s.push_str(&format!("; NodeSet {set} rolled: {}", nodes.join(", ")));
    }
    (s, rep.drifted.len())
}

async fn write_status(cluster: &Cluster, cfg: &Config, state: &mut State) {
    // lastAttempt and lastFetch change every pass: write when anything else changed, or once a
    // minute so that their age tells how fresh the daemon's view is.
    let facts = |s: &Status| Status {
        last_attempt: String::new(),
        last_fetch: String::new(),
        ..s.clone()
    };
    let fresh = state.written.as_ref().is_some_and(|(w, at)| {
        facts(w) == facts(&state.status) && at.elapsed() < Duration::from_secs(60)
    });
    if fresh {
        return;
    }
    let transition = state.written.as_ref().is_none_or(|(w, _)| {
        w.result != state.status.result || w.result_commit != state.status.result_commit
    });
    if transition && !state.status.result.is_empty() {
        record_result(cluster, cfg, &state.status).await;
    }
    match configmap::write(&cluster.client, &cfg.namespace, &state.status).await {
        Ok(()) => state.written = Some((state.status.clone(), Instant::now())),
        Err(e) => tracing::error!("writing the status ConfigMap: {e}"),
    }
}

/// An Event on the status ConfigMap when the result changes (for `kubectl get events`).
async fn record_result(cluster: &Cluster, cfg: &Config, s: &Status) {
    let short = s.result_commit.get(..12).unwrap_or(&s.result_commit);
    let (reason, warning) = match s.result.as_str() {
        "applied" => ("Applied", false),
        "suspended" => ("Suspended", false),
        "invalid" => ("InvalidCommit", true),
        "refused" => ("RefusedCommit", true),
        "fetch-failed" => ("FetchFailed", true),
        _ => ("ApplyFailed", true),
    };
    let message = match s.result.as_str() {
        "applied" => format!("commit {short} applied: {}", s.summary),
        "fetch-failed" => format!("cannot fetch {}: {}", s.repository, s.errors),
        _ => format!(
            "commit {short}: {}",
            s.errors.lines().next().unwrap_or(&s.result)
        ),
    };
    let note = crate::status::Note {
        involved: k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            name: Some(configmap::NAME.into()),
            namespace: Some(cfg.namespace.clone()),
            ..Default::default()
        },
        reason,
        message,
        warning,
    };
    if let Err(e) = crate::status::record(&cluster.client, note).await {
        tracing::warn!("recording an Event: {e}");
    }
}
