//! The controller's pass for the target, and everything that follows from it: Slurm connected,
//! the watches started, the pass run and recorded, the controllers pinged, what changed told.

use std::sync::Arc;
use std::time::Instant;

use super::connect::{connect, find_replicas, watch};
use super::record::{SLURM_RETRY_S, accounting_seen, record, wake_within};
use super::result::{happen, short};
use crate::controller::watch::Cache;
use crate::controller::{self, Env, Target};
use crate::daemon::http::Shared;
use crate::daemon::{Config, Loaded, SlurmSource, State};
use crate::k8s::Connection;
use crate::status::verdict::{Happened, Verdict};

/// The controller's pass for target T, and everything that follows from it.
#[allow(clippy::too_many_arguments)]
pub(super) async fn reconcile(
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
        Some(crate::daemon::told::Told::Ended { after, .. }) => tracing::info!(
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
                crate::daemon::early::pass(cluster, shared, state, t, s, &sts, fence).await
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
                crate::daemon::slurm_metrics::in_control(
                    pings.as_ref(),
                    read,
                    out.slurm_error.as_ref(),
                )
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
                .and_then(controller::features::controllers_roll::words)
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
            crate::daemon::report::rollout_events(
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
                Some(t @ crate::daemon::told::Told::Ended { .. }) => {
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
                    Some(
                        crate::daemon::told::Told::Started(m)
                        | crate::daemon::told::Told::Changed(m),
                    ) => {
                        tracing::warn!("{m}");
                        crate::daemon::report::warn(
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
            crate::daemon::report::count(shared, Verdict::Failed, started);
            false
        }
    }
}
