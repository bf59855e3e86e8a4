//! A pass's fetch: started when due (on a blocking thread, beside the passes), and the commit a
//! finished fetch brought verified and validated: the new target, or refused with the last good
//! target kept.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::result::{happen, now_rfc3339, short, verdict};
use crate::daemon::http::Shared;
use crate::daemon::{Config, Loaded, State};
use crate::source::admit::{Owned, Refusal, admit_within};
use crate::source::remote::Fetched;
use crate::status::verdict::{Happened, Verdict};

/// A new leader's last fetch is recent enough to act on: it fetches again only past this.
const LEADER_FRESH: Duration = Duration::from_secs(10);

/// Whether this pass starts a fetch (none is in flight): asked for (startup, webhook), the poll
/// interval passed, or this replica just took the lead with a fetch older than LEADER_FRESH.
pub(super) fn fetch_due(cfg: &Config, shared: &Shared, state: &State) -> bool {
    let asked = shared.fetch_now.swap(false, Ordering::SeqCst);
    let stale = |age: Duration| state.fetched_at.is_none_or(|t| t.elapsed() >= age);
    let leading = shared.became_leader.swap(false, Ordering::SeqCst) && stale(LEADER_FRESH);
    asked || leading || stale(cfg.interval)
}

/// Fetches the branch on a blocking thread, with where its tip stands to LAST (the last applied
/// commit); wakes the loop when done.
pub(super) fn start_fetch(
    cfg: &Config,
    shared: &Arc<Shared>,
    last: String,
) -> crate::daemon::Fetching {
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
pub(super) fn fetched_commit(
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
    crate::daemon::report::count(shared, verdict, started);
}
