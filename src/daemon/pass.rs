//! One daemon pass: start a fetch when due (it runs beside the passes: a silent git server never
//! holds up autoscale, sync or the workers), adopt the newest valid commit a finished fetch
//! brought as the target, run the
//! controller's pass for the target (apply when the commit is new, drift correction is due, or a
//! scale-in/removal was held back last time; always move the workers on), keep the workers in sync
//! with Slurm, and record where everything stands. Never waits for a job, a pod or a NodeSet.

mod connect;
mod fetch;
mod reconcile;
mod record;
mod result;

pub use connect::QUEUE_WAIT;

use std::sync::Arc;
use std::time::{Duration, Instant};

use self::fetch::{fetch_due, fetched_commit, start_fetch};
use self::reconcile::reconcile;
use self::result::{happen, now_rfc3339, verdict};
use super::http::Shared;
use super::{Config, State};
use crate::controller;
use crate::k8s::Connection;
use crate::status::verdict::{Happened, Verdict};

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

fn suspended(cfg: &Config, state: &mut State) {
    happen(state, Happened::Suspended);
    state.status.errors.clear();
    state.status.summary = if cfg.suspend {
        "suspended (--suspend): nothing applied".into()
    } else {
        "spec.policy.suspend is set: nothing applied".into()
    };
}
