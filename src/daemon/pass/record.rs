//! What a pass did, recorded: the status (the applied commit, each NodeSet's progress, the
//! accounting step, Slurm's reachability), the metrics, when the next pass comes, and what is
//! told in the log when it starts, changes and ends.

use std::time::Instant;

use super::result::{happen, short, verdict};
use crate::controller::Outcome;
use crate::daemon::http::Shared;
use crate::daemon::{Loaded, State};
use crate::status::verdict::{Happened, Verdict};

/// Records what the pass did: the applied commit, each NodeSet's progress, Slurm's reachability;
/// RETRIED: the accounting step run again alone. CONNECTED: the pass had Slurm (otherwise
/// `connect` already said why not).
pub(super) fn record(
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
        crate::daemon::report::count(shared, Verdict::Applied, started);
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
    let halted: Vec<String> =
        out.progress
            .iter()
            .filter_map(|p| {
                let c = p.canary.as_ref().filter(|c| {
                    c.stage == crate::controller::features::canary::CanaryStage::Failed
                })?;
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
    // Counted before the lock: a scrape waits for it.
    let figures = crate::daemon::slurm_metrics::observed(out.slurm.as_ref(), connected);
    let metrics = shared.metrics.lock().expect("metrics");
    metrics.progress(&out.progress);
    metrics.checks(&out.sets);
    metrics.slurm_counted(figures);
}

/// The next pass comes at most SECS seconds from now.
pub(super) fn wake_within(state: &mut State, secs: i64) {
    let soon = k8s_openapi::jiff::Timestamp::now().as_second() + secs;
    state.wake_at = Some(state.wake_at.map_or(soon, |t| t.min(soon)));
}

/// The status's held line while accounting waits for slurmrestd or slurmdbd.
const ACCOUNTING_WAITS: &str = "accounting: QOS, accounts and users (waiting for slurmrestd and slurmdbd to answer: tried again within seconds of them answering)";

/// What an accounting step came to, in an apply or run again alone: logged, and in the status
/// (its error, and a held line while it waits for slurmrestd or slurmdbd) until it reads slurmdbd.
pub(super) fn accounting_seen(state: &mut State, commit: &str, rep: &crate::apply::Report) {
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
        Some(t @ crate::daemon::told::Told::Ended { .. }) => {
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
    use crate::daemon::told::Told;
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

/// While the job queue's first read is in flight, the next pass comes at most this many seconds
/// later.
const QUEUE_RETRY_S: i64 = 2;

/// While Slurm does not answer, the next pass comes at most this many seconds later.
pub(super) const SLURM_RETRY_S: i64 = 10;
