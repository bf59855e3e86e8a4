//! One daemon pass: start a fetch when due (it runs beside the passes: a silent git server never
//! holds up autoscale, sync or the workers), adopt the newest valid commit a finished fetch
//! brought as the target, run the
//! controller's pass for the target (apply when the commit is new, drift correction is due, or a
//! scale-in/removal was held back last time; always move the workers on), keep the workers in sync
//! with Slurm, and record where everything stands. Never waits for a job, a pod or a NodeSet.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::http::Shared;
use super::{Config, Loaded, SlurmSource, State};
use crate::cluster;
use crate::controller::observe::Scope;
use crate::controller::watch::Cache;
use crate::controller::{self, Env, Outcome, Target};
use crate::k8s::Connection;
use crate::slurm::Client;
use crate::source::admit::{Owned, Refusal, admit_within};
use crate::source::remote::Fetched;
use crate::status::verdict::{self, Happened, Verdict};
use crate::vocab::SLURM_OFF;

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// One pass; returns true when it acted (the next pass follows at once).
pub async fn pass(
    cluster: &Connection,
    cfg: &Config,
    shared: &Arc<Shared>,
    state: &mut State,
    fence: &controller::Fence<'_>,
) -> bool {
    let started = Instant::now();
    let sent = cluster.log.summary();
    let acted = pass_inner(cluster, cfg, shared, state, fence, started).await;
    cost_line(state, started, cluster.log.summary() - sent, acted);
    acted
}

/// One line per pass at debug level (`--log-level debug`): its wall time, each phase, and what it
/// asked of the apiserver and slurmrestd (what the scale bench reads).
fn cost_line(state: &mut State, started: Instant, kube: crate::k8s::Requests, acted: bool) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (phases, slurm, jobs, slurm_known) = state.cost.take().unwrap_or_default();
    tracing::debug!(
        pass_ms = ms(started.elapsed()),
        observe_kubernetes_ms = ms(phases.observe_kubernetes),
        observe_slurm_ms = ms(phases.observe_slurm),
        decide_ms = ms(phases.decide),
        apply_ms = ms(phases.apply),
        act_ms = ms(phases.act),
        kube_lists = kube.lists,
        kube_fleet_lists = kube.fleet_lists,
        kube_reads = kube.reads,
        kube_writes = kube.writes,
        slurm_requests = slurm.requests,
        slurm_bytes = slurm.bytes,
        slurm_jobs = jobs,
        slurm_known,
        acted,
        "pass: {:.0} ms, {} Kubernetes request(s) ({} LIST), {} slurmrestd request(s) ({} bytes)",
        ms(started.elapsed()),
        kube.total,
        kube.lists,
        slurm.requests,
        slurm.bytes,
    );
}

async fn pass_inner(
    cluster: &Connection,
    cfg: &Config,
    shared: &Arc<Shared>,
    state: &mut State,
    fence: &controller::Fence<'_>,
    started: Instant,
) -> bool {
    let mut apply_now = false;
    if state.fetching.is_none() && fetch_due(cfg, shared, state) {
        let last = state.status.last_applied_commit.clone();
        state.fetching = Some(start_fetch(cfg, shared, last));
    }
    // `--once` waits for its fetch; the loop takes a fetch's result in the pass after it ended
    // (its end wakes the loop).
    if let Some(fetching) = state.fetching.take_if(|f| cfg.once || f.is_finished()) {
        let fetched = fetching
            .await
            .unwrap_or_else(|e| Err(format!("the fetch task failed: {e}")));
        apply_now |= fetched_commit(cfg, shared, state, fetched);
        if let Some(message) = state.force_pushed.take() {
            super::report::warn(
                cluster,
                cfg,
                &state.events,
                crate::vocab::EVENT_FORCE_PUSH_FOLLOWED,
                message,
            )
            .await;
        }
    }
    state.status.last_attempt = now_rfc3339();
    if cfg.suspend
        || state
            .target
            .as_ref()
            .is_some_and(|t| t.c.spec.policy.suspend)
    {
        suspended(cfg, state);
        super::report::write_status(cluster, cfg, shared, state).await;
        return false;
    }
    let drift_due = state
        .applied_at
        .is_none_or(|t| t.elapsed() >= cfg.drift_interval);
    // A failed apply is retried every pass; a held scale-in or removal is applied again.
    apply_now |= drift_due || state.held || verdict(state) == Verdict::Failed;
    let acted = match state.target.take() {
        Some(t) => {
            let acted = reconcile(cluster, cfg, shared, state, &t, apply_now, fence, started).await;
            state.target = Some(t);
            acted
        }
        None => false,
    };
    if !fence() {
        // The lease moved during the pass: the new leader writes the status now.
        return false;
    }
    let writing = Instant::now();
    super::report::write_status(cluster, cfg, shared, state).await;
    shared
        .metrics
        .lock()
        .expect("metrics")
        .phase("status", writing.elapsed());
    // Ready once a pass has acted on a fetch: the first pass only starts the fetch, and a daemon
    // ready before it ends would apply whatever the branch holds when it does.
    if state.fetched_at.is_some() {
        shared.metrics.lock().expect("metrics").ready = true;
    }
    acted
}

/// The daemon's current verdict.
fn verdict(state: &State) -> Verdict {
    Verdict::parse(&state.status.result)
}

/// The one way the result changes: H happened; the status says what that came to.
fn happen(state: &mut State, h: Happened) -> Verdict {
    let cur = verdict::Result {
        verdict: verdict(state),
        commit: state.status.result_commit.clone(),
    };
    let n = verdict::next(&cur, &h);
    state.status.result = n.verdict.as_str().to_string();
    state.status.result_commit = n.commit;
    n.verdict
}

/// A new leader's last fetch is recent enough to act on: it fetches again only past this.
const LEADER_FRESH: Duration = Duration::from_secs(10);

/// Whether this pass starts a fetch (none is in flight): asked for (startup, webhook), the poll
/// interval passed, or this replica just took the lead with a fetch older than LEADER_FRESH.
fn fetch_due(cfg: &Config, shared: &Shared, state: &State) -> bool {
    let asked = shared.fetch_now.swap(false, Ordering::SeqCst);
    let stale = |age: Duration| state.fetched_at.is_none_or(|t| t.elapsed() >= age);
    let leading = shared.became_leader.swap(false, Ordering::SeqCst) && stale(LEADER_FRESH);
    asked || leading || stale(cfg.interval)
}

/// Fetches the branch on a blocking thread, with where its tip stands to LAST (the last applied
/// commit); wakes the loop when done.
pub(super) fn start_fetch(cfg: &Config, shared: &Arc<Shared>, last: String) -> super::Fetching {
    let remote = cfg.remote.clone();
    let shared = shared.clone();
    *shared.fetching_since.lock().expect("fetching") = Some(Instant::now());
    tokio::spawn(async move {
        let started = Instant::now();
        let fetched = tokio::task::spawn_blocking(move || remote.fetch_after(&last))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        shared
            .metrics
            .lock()
            .expect("metrics")
            .fetched(started.elapsed().as_secs_f64());
        *shared.fetching_since.lock().expect("fetching") = None;
        shared.sync_now.notify_one();
        fetched
    })
}

/// Takes a finished fetch; true when a new valid commit became the target.
fn fetched_commit(
    cfg: &Config,
    shared: &Arc<Shared>,
    state: &mut State,
    fetched: Result<Fetched, String>,
) -> bool {
    state.fetched_at = Some(Instant::now());
    let f = match fetched {
        Err(e) => {
            // Keep the last applied state; say since when git is out of reach.
            happen(state, Happened::FetchFailed);
            state.status.errors = e.clone();
            tracing::error!(result = Verdict::FetchFailed.as_str(), "{e}");
            return false;
        }
        Ok(f) => f,
    };
    state.status.last_fetch = now_rfc3339();
    state.status.last_seen_commit = f.commit.clone();
    let known = state
        .target
        .as_ref()
        .is_some_and(|t| t.fetched.commit == f.commit)
        || (matches!(verdict(state), Verdict::Invalid | Verdict::Refused)
            && state.status.result_commit == f.commit);
    if known {
        if verdict(state) == Verdict::FetchFailed {
            let last_applied = state.status.last_applied_commit.clone();
            happen(
                state,
                Happened::Fetched {
                    commit: &f.commit,
                    last_applied: &last_applied,
                },
            );
            state.status.errors.clear();
        }
        return false;
    }
    match adopt(cfg, shared, state, &f) {
        Some(loaded) => {
            state.target = Some(loaded);
            true
        }
        None => false,
    }
}

/// How long a commit's admission may take: every input the parser accepts is admitted in
/// about 2 s on a release build (docs/benchmarks.md); past this, the commit is refused and the
/// pass goes on.
const ADMISSION_DEADLINE: Duration = Duration::from_secs(20);

/// Verifies and validates commit F; the target it becomes, or None (status says why; the last
/// good target stays).
fn adopt(cfg: &Config, shared: &Shared, state: &mut State, f: &Fetched) -> Option<Loaded> {
    let started = Instant::now();
    let owned = Owned {
        name: f.name.clone(),
        text: f.text.clone(),
        commit: Some((f.commit.clone(), f.signature.clone(), f.lineage.clone())),
        signers: cfg.allowed_signers.clone(),
        allow_force_push: cfg.allow_force_push,
        cluster: cfg.cluster.clone(),
        guard: Some(cfg.guard.clone()),
    };
    match admit_within(owned, ADMISSION_DEADLINE) {
        Ok(a) => {
            if let Some(taken) = &a.force_pushed {
                tracing::warn!(commit = %f.commit, "{taken}");
                state.force_pushed = Some(taken.clone());
            }
            Some(Loaded {
                fetched: f.clone(),
                c: a.c,
                r: a.rendered,
            })
        }
        Err(refusal) => {
            refused(shared, state, f, &refusal, started);
            None
        }
    }
}

/// Commit F not admitted for REFUSAL: said, recorded in status (the last good target stays).
fn refused(shared: &Shared, state: &mut State, f: &Fetched, refusal: &Refusal, started: Instant) {
    let commit = &f.commit;
    let verdict = match refusal.invalid() {
        true => {
            let stays = if state.status.last_applied_commit.is_empty() {
                "its current state".to_string()
            } else {
                short(&state.status.last_applied_commit).to_string()
            };
            tracing::warn!(
                commit = %commit,
                result = Verdict::Invalid.as_str(),
                "commit {}: {refusal}; not applied, the cluster stays at {stays}",
                short(commit),
            );
            happen(state, Happened::Invalid(commit));
            Verdict::Invalid
        }
        false => {
            tracing::warn!(commit = %commit, result = Verdict::Refused.as_str(), "commit {}: refused: {refusal}", short(commit));
            happen(state, Happened::Refused(commit));
            Verdict::Refused
        }
    };
    state.status.errors = refusal.lines().join("\n");
    super::report::count(shared, verdict, started);
}

fn suspended(cfg: &Config, state: &mut State) {
    happen(state, Happened::Suspended);
    state.status.errors.clear();
    state.status.summary = if cfg.suspend {
        "suspended (--suspend): nothing applied".into()
    } else {
        "spec.policy.suspend is set: nothing applied".into()
    };
}

/// The controller's pass for target T, and everything that follows from it.
#[allow(clippy::too_many_arguments)]
async fn reconcile(
    cluster: &Connection,
    cfg: &Config,
    shared: &Arc<Shared>,
    state: &mut State,
    t: &Loaded,
    apply_now: bool,
    fence: &controller::Fence<'_>,
    started: Instant,
) -> bool {
    let slurm = connect(cluster, cfg, state, &t.c).await;
    if let Some(s) = &slurm {
        find_replicas(cluster, cfg, state, &t.c, s);
        watch(cluster, shared, state, &t.c);
        // A restarted daemon (or a new leader) reads the jobs queued since the last one it
        // listed first: its first pass decides on them while the whole queue is listed.
        if let Ok(last) = state.status.jobs_listed_to.parse::<u64>() {
            s.lead_from(last).await;
        }
        if let Some(n) = s.jobs_listed_to().await {
            state.status.jobs_listed_to = n.to_string();
        }
    }
    // A restarted daemon (or a new leader) at 10,000 workers: until its watches hold every
    // worker, a pass would LIST them all in one answer itself, on each pass (and the passes that
    // the listing's pages wake). Wait instead; its end wakes the next pass. `--once` has no next
    // pass: it reads for itself.
    let listing = !cfg.once && state.cache.as_ref().is_some_and(Cache::listing);
    let waiting = listing.then_some(
        "the watches of the workers are making their first listing: passes decide autoscale's scale-out alone until it ends",
    );
    match state.told.listing.see(waiting, Instant::now()) {
        Some(super::told::Told::Ended { after, .. }) => tracing::info!(
            "the watches listed every worker ({:.1} s): passes decide everything again",
            after.as_secs_f64()
        ),
        Some(t) => tracing::info!("{t}"),
        None => {}
    }
    if listing {
        if apply_now {
            state.held = true;
            state.status.held =
                "everything, for a moment: the watches of the workers are making their first listing".into();
        }
        // Meanwhile autoscale's scale-out, which needs no pod, is decided and carried out.
        let sts = state.cache.as_ref().and_then(Cache::listed_stateful_sets);
        return match (&slurm, sts) {
            (Some(s), Some(sts)) if controller::early::applies(&t.c) => {
                super::early::pass(cluster, shared, state, t, s, &sts, fence).await
            }
            _ => false,
        };
    }
    let progress = shared.clone();
    let observer = crate::rollout::Observer::new(move |set, e| {
        match e.quiet() {
            true => tracing::debug!(node_set = set, "{set}: {e}"),
            false => tracing::info!(node_set = set, "{set}: {e}"),
        }
        progress.metrics.lock().expect("metrics").rollout(e);
    });
    let env = Env {
        cluster,
        slurm: slurm.as_deref(),
        cache: state.cache.as_ref(),
        fence,
        observer: &observer,
        registration_grace: crate::controller::decide::REGISTRATION_GRACE,
    };
    let target = Target {
        c: &t.c,
        text: &t.fetched.text,
        rendered: &t.r,
        apply: apply_now.then_some(&cfg.apply),
        scope: Default::default(),
        // The watch caches serve every pass, the one right after an acting pass too: the pods
        // this pass deletes show as deleting in the cache at once (`Cache::expect_deleted`), so no
        // pass LISTs the workers (at 10,000 workers each LIST is hundreds of MB).
        fresh: false,
        decrees: None,
    };
    match controller::pass(&env, &target).await {
        Ok(out) => {
            shared
                .metrics
                .lock()
                .expect("metrics")
                .pass_cost(&out.phases, out.slurm_traffic);
            let jobs = out.slurm.as_ref().map_or(0, |v| match v.jobs_error {
                Some(_) => -1,
                None => v.jobs().len() as i64,
            });
            let known = out.slurm.is_some();
            state.cost = Some((out.phases, out.slurm_traffic, jobs, known));
            // An accounting step that met slurmrestd or slurmdbd not up runs again, alone (the
            // objects are not applied again for it), in each pass that finds Slurm answering.
            let retried = match state.accounting_pending
                && out.applied.is_none()
                && out.slurm_error.is_none()
            {
                true => controller::accounting_again(&env, &t.c)
                    .await
                    .ok()
                    .flatten(),
                false => None,
            };
            record(
                shared,
                state,
                t,
                &out,
                retried.as_ref(),
                started,
                slurm.is_some(),
            );
            if slurm.is_none()
                && out.applied.is_some()
                && t.c.spec.accounting.enabled
                && !matches!(cfg.slurm, SlurmSource::Off)
            {
                // Not connected (the JWT key Secret not there yet): accounting waits for it.
                let waits = crate::apply::Report {
                    accounting_error: Some("not run: Slurm is not connected".into()),
                    accounting_pending: true,
                    ..Default::default()
                };
                accounting_seen(state, &t.fetched.commit, &waits);
                wake_within(state, SLURM_RETRY_S);
            }
            // Which controller has control: one small request, only with backups.
            let pings = match (&t.c.spec.controller.ha, &slurm) {
                (Some(_), Some(s)) => Some(s.ping().await),
                _ => None,
            };
            state.status.controllers = match (&t.c.spec.controller.ha, &pings) {
                (None, _) => String::new(),
                (Some(_), Some(Ok(pings))) => crate::status::show::controllers(pings),
                (Some(_), Some(Err(e))) => format!("unknown: {e}"),
                (Some(_), None) => "unknown: Slurm is not connected".into(),
            };
            let in_control = slurm.as_ref().and_then(|_| {
                let read = out.slurm.is_some();
                super::slurm_metrics::in_control(pings.as_ref(), read, out.slurm_error.as_ref())
            });
            shared
                .metrics
                .lock()
                .expect("metrics")
                .slurmctld(in_control);
            // Behind one address slurmops rolls the controllers: where that roll stands.
            if let Some(roll) = out
                .controllers
                .as_ref()
                .and_then(controller::ctld_roll::words)
            {
                state.status.controllers = format!("{}; {roll}", state.status.controllers);
            }
            // After the pass's last request (the ping): a replica this pass moved on from is
            // named whichever of its requests that was, and one that stopped before stays named
            // until it answers its check again.
            if let Some(s) = &slurm {
                s.recheck_missed().await;
            }
            state.status.slurmrestd = slurm
                .as_ref()
                .and_then(|s| s.take_answered())
                .map(|a| a.line())
                .unwrap_or_default();
            super::report::rollout_events(
                cluster,
                &t.c.metadata.namespace,
                &out,
                &state.events,
                &mut state.waiting_told,
            )
            .await;
            match state
                .told
                .upkeep
                .see(out.upkeep_error.as_deref(), Instant::now())
            {
                Some(t @ super::told::Told::Ended { .. }) => {
                    tracing::info!("worker sync and autoscale write again: {t}")
                }
                Some(t) => tracing::warn!("worker sync or autoscale: {t}"),
                None => {}
            }
            // A copy before a Slurm upgrade that failed: said (and an Event) when it starts and
            // changes; a pass that applied nothing saw nothing of it.
            if let Some(rep) = &out.applied {
                let failed = rep
                    .copy_failed
                    .as_ref()
                    .map(|(pod, why)| format!("{why} (pod {pod}): the Slurm upgrade stops here"));
                match state.told.copy.see(failed.as_deref(), Instant::now()) {
                    Some(super::told::Told::Started(m) | super::told::Told::Changed(m)) => {
                        tracing::warn!("{m}");
                        super::report::warn(
                            cluster,
                            cfg,
                            &state.events,
                            crate::vocab::EVENT_UPGRADE_STOPPED,
                            m,
                        )
                        .await;
                    }
                    Some(t) => tracing::info!("the copy before the Slurm upgrade was made: {t}"),
                    None => {}
                }
            }
            out.events.iter().any(|(_, e)| e.changed())
        }
        Err(controller::PassError::Fenced) => {
            tracing::warn!("lost the lease during a pass: stopped before its next write");
            false
        }
        Err(e) => {
            let commit = &t.fetched.commit;
            tracing::error!(commit = %commit, result = Verdict::Failed.as_str(), "commit {}: {e}", short(commit));
            happen(state, Happened::PassFailed(commit));
            state.status.errors = e.to_string();
            super::report::count(shared, Verdict::Failed, started);
            false
        }
    }
}

/// Records what the pass did: the applied commit, each NodeSet's progress, Slurm's reachability;
/// RETRIED: the accounting step run again alone. CONNECTED: the pass had Slurm (otherwise
/// `connect` already said why not).
fn record(
    shared: &Shared,
    state: &mut State,
    t: &Loaded,
    out: &Outcome,
    retried: Option<&crate::apply::Report>,
    started: Instant,
    connected: bool,
) {
    let commit = &t.fetched.commit;
    if let Some(rep) = &out.applied {
        let summary = rep.counts();
        if state.status.last_applied_commit != *commit || verdict(state) != Verdict::Applied {
            tracing::info!(commit = %commit, result = Verdict::Applied.as_str(), "commit {}: applied: {summary}", short(commit));
        }
        let last_seen = state.status.last_seen_commit.clone();
        let h = Happened::Applied {
            commit,
            last_seen: &last_seen,
        };
        if happen(state, h) == Verdict::Applied {
            state.status.errors.clear();
        }
        state.status.summary = summary;
        state.status.held = rep.held_line().unwrap_or_default();
        accounting_seen(state, commit, rep);
        state.status.last_applied_commit = commit.clone();
        state.applied_at = Some(Instant::now());
        shared
            .metrics
            .lock()
            .expect("metrics")
            .applied(rep.drifted.len());
        super::report::count(shared, Verdict::Applied, started);
    } else if let Some(rep) = retried {
        accounting_seen(state, commit, rep);
    }
    state.held = out.next.reapply();
    state.wake_at = out.next.at();
    if out.slurm_error.is_some() || state.accounting_pending {
        // Slurm does not answer (a new cluster starting, slurmrestd restarting), or accounting
        // met slurmdbd not up: pass again soon rather than at the next poll, so perNode workers
        // are made, waiting steps resume and accounting is reconciled within seconds of Slurm
        // answering.
        wake_within(state, SLURM_RETRY_S);
    }
    if out.slurm.as_ref().is_some_and(|v| v.jobs_soon) {
        // The job queue's first read is in flight (a start against a large queue): pass again
        // in a moment to decide on it, not a poll interval later.
        wake_within(state, QUEUE_RETRY_S);
    }
    state.status.node_sets = crate::status::bound::progress(&out.progress);
    state.status.checks = crate::status::show::checks(&out.progress);
    // A failed canary marks the commit: it applied, and its rollout is halted.
    let halted: Vec<String> = out
        .progress
        .iter()
        .filter_map(|p| {
            let c = p
                .canary
                .as_ref()
                .filter(|c| c.stage == crate::controller::canary::CanaryStage::Failed)?;
            Some(format!(
                "NodeSet {}: canary failed{}: {}",
                p.node_set,
                c.jobs
                    .first()
                    .map(|j| format!(" (job {j})"))
                    .unwrap_or_default(),
                c.error.as_deref().unwrap_or("no error reported")
            ))
        })
        .collect();
    if halted.is_empty() && verdict(state) == Verdict::CanaryFailed {
        let last_applied = state.status.last_applied_commit.clone();
        happen(
            state,
            Happened::CanaryClear {
                last_applied: &last_applied,
            },
        );
        state.status.errors.clear();
    }
    if !halted.is_empty() {
        if verdict(state) != Verdict::CanaryFailed {
            tracing::warn!(commit = %commit, result = Verdict::CanaryFailed.as_str(), "commit {}: {}", short(commit), halted.join("; "));
        }
        happen(state, Happened::CanaryHalted(commit));
        state.status.errors = halted.join("\n");
    }
    if connected {
        let jobs_error = out.slurm.as_ref().and_then(|v| v.jobs_error.as_ref());
        tell_slurm(state, out, jobs_error);
        let partial = out
            .slurm
            .as_ref()
            .is_some_and(|v| v.pending_unread.is_some());
        state.status.slurm = match (&out.slurm_error, jobs_error) {
            (Some(e), _) => format!("unreachable or failing, destructive steps wait: {e}"),
            (None, Some(e)) if partial => format!(
                "nodes read; the job queue in part, so canary and check verdicts wait (rollouts go on from node states): {e}"
            ),
            (None, Some(e)) => format!(
                "nodes read; the job queue not, so autoscale and canary verdicts wait (rollouts go on from node states): {e}"
            ),
            (None, None) => String::new(),
        };
    }
    let metrics = shared.metrics.lock().expect("metrics");
    metrics.progress(&out.progress);
    metrics.checks(&out.sets);
    metrics.slurm(out.slurm.as_ref(), connected);
}

/// The next pass comes at most SECS seconds from now.
fn wake_within(state: &mut State, secs: i64) {
    let soon = k8s_openapi::jiff::Timestamp::now().as_second() + secs;
    state.wake_at = Some(state.wake_at.map_or(soon, |t| t.min(soon)));
}

/// The status's held line while accounting waits for slurmrestd or slurmdbd.
const ACCOUNTING_WAITS: &str = "accounting: QOS, accounts and users (waiting for slurmrestd and slurmdbd to answer: tried again within seconds of them answering)";

/// What an accounting step came to, in an apply or run again alone: logged, and in the status
/// (its error, and a held line while it waits for slurmrestd or slurmdbd) until it reads slurmdbd.
fn accounting_seen(state: &mut State, commit: &str, rep: &crate::apply::Report) {
    // Objects made by hand are reported on every pass: logged only when slurmdbd changed.
    if rep.accounting_writes > 0 {
        for line in &rep.accounting {
            tracing::info!(commit = %commit, "accounting: {line}");
        }
    }
    let waited = std::mem::replace(&mut state.accounting_pending, rep.accounting_pending);
    let mut held: Vec<String> = state
        .status
        .held
        .lines()
        .filter(|l| *l != ACCOUNTING_WAITS)
        .map(String::from)
        .collect();
    held.extend(rep.accounting_pending.then(|| ACCOUNTING_WAITS.to_string()));
    state.status.held = held.join("\n");
    // Told when it starts, changes and ends, not on every pass that tries again.
    let waiting = rep
        .accounting_error
        .as_deref()
        .filter(|_| rep.accounting_pending);
    match state.told.accounting.see(waiting, Instant::now()) {
        Some(t @ super::told::Told::Ended { .. }) => {
            tracing::info!("accounting reads slurmdbd again: {t}")
        }
        Some(t) => tracing::warn!("accounting waits for slurmrestd or slurmdbd: {t}"),
        None => {}
    }
    match &rep.accounting_error {
        Some(e) => {
            if !rep.accounting_pending {
                tracing::warn!(commit = %commit, "accounting: {e}");
            }
            state.status.errors = format!("accounting: {e}");
        }
        None if waited && state.status.errors.starts_with("accounting: ") => {
            state.status.errors.clear()
        }
        None => {}
    }
}

/// Said of a queue read job by job since a start, until every job is read.
const PARTIAL_QUEUE: &str = "it is read job by job since the start: canary and check verdicts wait for the rest, autoscale scales out for the pending jobs read";

/// Slurm unknown, and the job queue unknown while the nodes are read: each logged when it
/// starts, changes and ends, not every pass (a queue of 50,000 jobs takes slurmrestd minutes).
fn tell_slurm(state: &mut State, out: &Outcome, jobs_error: Option<&String>) {
    use super::told::Told;
    let now = Instant::now();
    let unknown = out.slurm_error.as_ref().map(ToString::to_string);
    match state.told.slurm.see(unknown.as_deref(), now) {
        Some(t @ Told::Ended { .. }) => tracing::info!("Slurm answers again: {t}"),
        Some(t) => tracing::warn!("Slurm's state is unknown, destructive steps wait: {t}"),
        None => {}
    }
    // Read in part (job by job since a start, its counts changing every pass): said once.
    let partial = out
        .slurm
        .as_ref()
        .is_some_and(|v| v.pending_unread.is_some());
    let queue = jobs_error
        .filter(|_| unknown.is_none())
        .map(|e| match partial {
            true => PARTIAL_QUEUE,
            false => e.as_str(),
        });
    match state.told.queue.see(queue, now) {
        Some(t @ Told::Ended { .. }) => tracing::info!("the job queue is read again: {t}"),
        Some(t) => tracing::warn!(
            "the job queue is not known, autoscale and canary verdicts wait (rollouts go on from node states): {t}"
        ),
        None => {}
    }
}

/// With several slurmrestd and the cluster's own Service (no `--slurmrestd-url`): SLURM sends to
/// the pods behind it, as a watch of its Endpoints holds them (`daemon::replicas`), and names the
/// one that answered. No Endpoints yet: the Service.
fn find_replicas(
    cluster: &Connection,
    cfg: &Config,
    state: &mut State,
    c: &cluster::ClusterFile,
    slurm: &Client,
) {
    let own_service = matches!(&cfg.slurm, SlurmSource::Cluster { url: None, .. });
    if !own_service || c.spec.restapi.replicas < 2 {
        state.replicas = None;
        return;
    }
    let (ns, name) = (
        &c.metadata.namespace,
        crate::render::Names::new(c).restapi(),
    );
    let key = format!("{ns}/{name}");
    if state.replicas.as_ref().is_none_or(|f| f.key != key) {
        state.replicas = Some(super::replicas::Follow::start(&cluster.client, ns, &name));
    }
    if let Some(f) = &state.replicas {
        slurm.set_replicas(f.source());
    }
}

/// How long a pass waits for a job queue refresh's first batch (`jobs/state/` and the first jobs
/// read) before it goes on with what was read before (the refresh goes on in the background; a
/// later pass takes it).
pub const QUEUE_WAIT: Duration = Duration::from_secs(5);

/// While the job queue's first read is in flight, the next pass comes at most this many seconds
/// later.
const QUEUE_RETRY_S: i64 = 2;

/// While Slurm does not answer, the next pass comes at most this many seconds later.
const SLURM_RETRY_S: i64 = 10;

/// The Slurm client for cluster C: the configured one, or one minting tokens from C's JWT key
/// Secret (re-read every 10 minutes). None, with the reason in the status, when there is none.
async fn connect(
    cluster: &Connection,
    cfg: &Config,
    state: &mut State,
    c: &cluster::ClusterFile,
) -> Option<Arc<Client>> {
    let (url, user, job_user, allow_http) = match &cfg.slurm {
        SlurmSource::Off => {
            state.status.slurm = format!(
                "{SLURM_OFF} (--no-slurm): nothing rolls; scale-ins and prunes over workers are refused"
            );
            return None;
        }
        SlurmSource::Static(client) => return Some(client.clone()),
        SlurmSource::Cluster {
            url,
            user,
            job_user,
            allow_http,
        } => (url, user, job_user, *allow_http),
    };
    let ns = &c.metadata.namespace;
    let key = format!(
        "{ns}/{}/{}/{}",
        c.spec.auth.jwt_key.name,
        c.spec.auth.jwt_key.key,
        url.as_deref().unwrap_or("")
    );
    if let Some((k, client, at)) = &state.slurm
        && *k == key
        && at.elapsed() < Duration::from_secs(600)
    {
        return Some(client.clone());
    }
    match crate::slurm::connect::from_secret(&cluster.client, c, url.clone(), user, allow_http)
        .await
    {
        Ok(mut client) => {
            if let Some(t) = state.told.connect.see(None, Instant::now()) {
                tracing::info!("Slurm connected: {t}");
            }
            client.set_queue_wait(QUEUE_WAIT);
            client.set_queue_every(cfg.interval);
            client.set_job_user(job_user);
            // The same slurmrestd with the Secret read again: what the last client read of the
            // queue and the nodes goes on (a large queue takes minutes to read job by job).
            if let Some((k, old, _)) = &state.slurm
                && *k == key
            {
                client.take_reads_from(old).await;
            }
            let client = Arc::new(client);
            state.slurm = Some((key, client.clone(), Instant::now()));
            Some(client)
        }
        Err(e) => {
            state.slurm = None;
            state.status.slurm = format!("not connected: {e}");
            let told = state.told.connect.see(Some(&e.to_string()), Instant::now());
            if let Some(t) = told {
                tracing::warn!("Slurm: {t}");
            }
            None
        }
    }
}

/// Watches the target's workers, so that a pod becoming Ready or going away wakes the next pass.
fn watch(cluster: &Connection, shared: &Shared, state: &mut State, c: &cluster::ClusterFile) {
    let scope = Scope::cluster(&c.metadata.namespace, &c.metadata.name);
    if !state.cache.as_ref().is_some_and(|w| *w.scope() == scope) {
        state.cache = Some(Cache::start(
            &cluster.client,
            scope,
            shared.sync_now.clone(),
        ));
    }
    // Nodes for perNode placement, topology labels and sync's node health, from one watch,
    // started once the workers' watches have listed them: at a restart at 10,000 workers the
    // Nodes' first listing (hundreds of MB of JSON) would compete with theirs and with the
    // early pass's read of Slurm (docs/benchmarks.md, 2026-12-02).
    if let Some(cache) = state.cache.as_mut().filter(|c| !c.listing()) {
        cache.follow_nodes(
            &cluster.client,
            &crate::controller::observe::node_label_keys(c),
        );
    }
}
