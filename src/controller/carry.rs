//! The act phase of a pass: each NodeSet's actions carried out (a few NodeSets at once, each its
//! steps in order, every write behind the fence), its new pods made, its canary verdict recorded,
//! and what it did taken into the outcome.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::decide::{self, Decision, SetView};
use super::features::canary;
use super::observation::Observation;
use super::outcome::{NextBuilder, Outcome};
use super::watch::Cache;
use super::{Env, Fence, PassError, act};
use crate::cluster::ClusterFile;
use crate::rollout::{Event, Observer};
use crate::slurm::SlurmNodes;

/// Carries out DECISIONS (taken on OBS for cluster C): events, progress and errors go to OUT,
/// the times the next pass is due to NEXT. True when every NodeSet is done.
pub(super) async fn act_phase<S: SlurmNodes>(
    env: &Env<'_, S>,
    c: &ClusterFile,
    slurm: &S,
    obs: &Observation,
    decisions: BTreeMap<String, Decision>,
    next: &mut NextBuilder,
    out: &mut Outcome,
) -> Result<bool, PassError> {
    let ns = &c.metadata.namespace;
    let pods: Api<Pod> = Api::namespaced(env.cluster.client.clone(), ns);
    let mut all_done = true;
    let mut done_by_set = act_all(env, slurm, &pods, &decisions, out).await?;
    for (name, mut d) in decisions {
        next.reapply |= d.hold_replicas.is_some() || d.keep;
        all_done &= d.progress.done && d.hold_replicas.is_none() && !d.keep;
        let hands = Hands {
            client: &env.cluster.client,
            namespace: ns,
            cache: env.cache,
            fence: env.fence,
            observer: env.observer,
        };
        let done = done_by_set.remove(&name);
        carry_out(&hands, &name, obs.sets.get(&name), done, &mut d, out).await?;
        if out.slurm_error.is_none()
            && let (false, Some(t)) = (d.create.is_empty(), obs.templates.get(&name))
        {
            let service = crate::render::names::Names::new(c).workers_service();
            let made = super::pods::create(
                &pods,
                t,
                &service,
                &name,
                &d.create,
                env.fence,
                env.observer,
            )
            .await?;
            out.events
                .extend(made.into_iter().map(|e| (name.clone(), e)));
        }
        let opens = d.progress.window.as_ref().and_then(|w| w.opens);
        let judged = d.progress.canary.as_ref().and_then(|c| c.deadline);
        let checks = d.progress.checks.iter().filter_map(|c| c.next).min();
        if let Some(t) = opens.into_iter().chain(judged).chain(checks).min() {
            next.at(t);
        }
        out.progress.push(d.progress);
    }
    Ok(all_done)
}

/// What a pass writes with.
struct Hands<'a> {
    client: &'a kube::Client,
    namespace: &'a str,
    /// Told of each pod deleted, so the next pass needs no LIST to see it go.
    cache: Option<&'a Cache>,
    fence: &'a Fence<'a>,
    observer: &'a Observer,
}

/// NodeSets acting at once (each its steps in order): a wave over 500 NodeSets is 1,000 drains
/// and as many deletions, one after the other half a minute at 10,000 workers.
const ACTING: usize = 8;

/// The DECISIONS' actions, ACTING NodeSets at a time (nothing when Slurm is unknown): what each
/// NodeSet's steps did, by NodeSet; the first error once all have stopped.
async fn act_all<S: SlurmNodes>(
    env: &Env<'_, S>,
    slurm: &S,
    pods: &Api<Pod>,
    decisions: &BTreeMap<String, Decision>,
    out: &Outcome,
) -> Result<BTreeMap<String, act::Acted>, PassError> {
    if out.slurm_error.is_some() {
        return Ok(BTreeMap::new());
    }
    // ACTING futures at a time, not one per NodeSet made up front (each is tens of KB).
    let acting: Vec<(&String, &Decision)> = decisions
        .iter()
        .filter(|(_, d)| !d.actions.is_empty())
        .collect();
    let mut done: Vec<(String, Result<act::Acted, PassError>)> = Vec::new();
    for some in acting.chunks(ACTING) {
        let acts = some.iter().map(|(name, d)| async move {
            let r = act::act(pods, slurm, name, &d.actions, env.fence, env.observer).await;
            (name.to_string(), r)
        });
        done.extend(futures::future::join_all(acts).await);
    }
    done.into_iter().map(|(n, r)| Ok((n, r?))).collect()
}

/// Takes ACTED (what the actions of NodeSet NAME, SET as observed, did) into D and OUT, and
/// records its canary verdict: the events and any Slurm failure go to OUT, the errors of single
/// steps to D's progress.
async fn carry_out(
    h: &Hands<'_>,
    name: &str,
    set: Option<&SetView>,
    acted: Option<act::Acted>,
    d: &mut Decision,
    out: &mut Outcome,
) -> Result<(), PassError> {
    if let Some(acted) = acted {
        for a in &d.actions {
            if let (Some(c), decide::Action::Delete { pod, uid, .. }) = (h.cache, a)
                && acted
                    .events
                    .iter()
                    .any(|e| matches!(e, Event::Delete { pod: p, .. } if p == pod))
            {
                c.expect_deleted(uid);
            }
        }
        let events = acted.events.into_iter().map(|e| (name.to_string(), e));
        out.events.extend(events);
        d.progress.unplaced.extend(acted.unplaced);
        if let (Some(e), Some(p)) = (acted.canary_error, d.progress.canary.as_mut()) {
            p.error = Some(e);
        }
        if let (Some(e), Some(w)) = (acted.reservation_error, d.progress.window.as_mut()) {
            w.reservation = Some(format!("none: {e}"));
        }
        if let Some(e) = acted.slurm_error {
            out.slurm_error = Some(e.into());
        }
    }
    if let (None, Some(r), Some(set)) = (&out.slurm_error, &d.record, set) {
        if !(h.fence)() {
            return Err(PassError::Fenced);
        }
        let e = canary::act::record(h.client, h.namespace, set, r).await?;
        h.observer.emit(name, &e);
        out.events.push((name.to_string(), e));
    }
    Ok(())
}
