//! Upkeep: what a pass does for the workers besides moving them, decided from the pass's one
//! observation and carried out behind its fence like every other write.
//!
//! - **Worker sync** (`sync::decide`): Slurm's view of each worker as a pod condition, the busy
//!   label the busy PodDisruptionBudget selects, a drain for a worker whose Kubernetes node is
//!   cordoned or unhealthy or that a drain request names (resumed when that clears, or held for
//!   its active checks), and a Ready worker Slurm has not known for the registration grace since
//!   it became Ready replaced.
//! - **Autoscale** (`autoscale::decide`): pending jobs add workers up to `max`; idle workers leave
//!   through a drain. A scale-in takes two passes and never waits inside one: the first drains the
//!   leaving workers (`slurmops: autoscale`), a later one lowers the replicas over those Slurm
//!   reports drained by that reason; a worker drained so that a job reached meanwhile, or that no
//!   longer leaves (the queue asks for it again), is resumed.
//!
//! `decide` is pure; `act` writes through sync's and autoscale's acts (`features/sync/act.rs`,
//! `features/autoscale/act.rs`); `steps` is what `plan --cluster` shows of them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::observation::Observation;
use super::{Fence, PassError};
use crate::cluster::ClusterFile;
use crate::controller::features::autoscale::{self, Decision, WorkerState};
use crate::controller::features::sync::{self, decide::Step};
use crate::k8s::Connection;
use crate::rollout::{Event, Observer};
use crate::slurm::SlurmNodes;
use crate::vocab::DrainReason;

/// Which upkeep a pass does (the daemon and `apply`: both; `slurmops sync` and `slurmops
/// autoscale`: theirs alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    pub sync: bool,
    pub autoscale: bool,
}

impl Keep {
    /// Neither (`apply`, `rollout`).
    pub const NONE: Keep = Keep {
        sync: false,
        autoscale: false,
    };
}

impl Default for Keep {
    fn default() -> Keep {
        Keep {
            sync: true,
            autoscale: true,
        }
    }
}

pub use crate::controller::features::autoscale::act::Scale;

/// The upkeep of one pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Upkeep {
    /// Sync's steps by NodeSet: pod writes first, then drains, resumes and replacements.
    pub sync: Vec<(String, Step)>,
    pub scale: Vec<Scale>,
}

impl Upkeep {
    pub fn is_empty(&self) -> bool {
        self.sync.is_empty()
            && self
                .scale
                .iter()
                .all(|s| s.drain.is_empty() && s.to.is_none() && s.resume.is_empty())
    }
}

/// The upkeep of C on OBS, pure: nothing while Slurm's state is unknown; autoscale only with the
/// job queue read (pending demand unknown: no NodeSet scales either way). GRACE: seconds a Ready
/// worker may stay unknown to Slurm.
pub fn decide(c: &ClusterFile, obs: &Observation, grace: i64, keep: Keep) -> Upkeep {
    let Ok(view) = &obs.slurm else {
        return Upkeep::default();
    };
    let mut out = Upkeep::default();
    if keep.sync {
        let sets = crate::controller::features::sync::sets_of(c, &obs.pods);
        let overdue: BTreeSet<String> = sets
            .iter()
            .flat_map(|(_, pods)| pods)
            .filter(|p| unregistered_for(p, &view.nodes, obs.now) > Some(grace))
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        out.sync = crate::controller::features::sync::decide::decide(
            &crate::controller::features::sync::decide::Input {
                sets: &sets,
                nodes: &view.nodes,
                problems: obs.health.as_ref().ok(),
                checked: &crate::controller::features::sync::checked_sets(c),
                overdue: &overdue,
                remediate: &crate::controller::features::sync::remediated_sets(c),
                requeue: &obs.requeue,
                slurm: Some(view),
                now: k8s_openapi::jiff::Timestamp::from_second(obs.now).unwrap_or_default(),
            },
        );
    }
    // A queue read only in part (job by job since a start) still shows the pending jobs read: a
    // floor of the demand, enough to scale out; a scale-in waits until every pending job is read.
    let floor = view.pending_unread.filter(|n| *n > 0);
    if keep.autoscale && (view.jobs_error.is_none() || view.pending_unread.is_some()) {
        let seen = c
            .spec
            .node_sets
            .iter()
            .filter(|n| n.autoscale.is_some())
            .filter_map(|ns| {
                let s = obs.sets.get(&ns.name)?;
                Some((ns, autoscale::run::seen_of(ns, s, &view.nodes, obs.now)))
            })
            .collect();
        for (ns, o, decision) in autoscale::run::decisions(c, view.jobs(), seen) {
            let decision = match (decision, floor) {
                (autoscale::Decision::ScaleIn { .. }, Some(n)) => autoscale::Decision::Hold {
                    why: format!(
                        "{n} pending job(s) not read yet (the queue is read job by job since the start): scale-in waits for them"
                    ),
                },
                (d, _) => d,
            };
            out.scale
                .push(scale(&ns.name, ns.managed(), &o, decision, |n| {
                    view.nodes.get(n).is_some_and(|n| {
                        n.state.has("DRAIN")
                            && DrainReason::parse(&n.reason) == Some(DrainReason::Autoscale)
                    })
                }));
        }
    }
    out
}

/// Seconds worker P has been Ready while Slurm knows no node of its name (None: not Ready, or
/// known).
fn unregistered_for(
    p: &Pod,
    nodes: &BTreeMap<String, crate::slurm::Node>,
    now: i64,
) -> Option<i64> {
    let name = p.metadata.name.as_deref()?;
    if nodes.contains_key(name) {
        return None;
    }
    let since = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?
        .last_transition_time
        .as_ref()?
        .0
        .as_second();
    Some(now - since)
}

/// NodeSet NAME's writes for DECISION on O: what to drain, the replicas to set now, what to give
/// back. DRAINED_BY_US: Slurm holds that node drained (or draining) for autoscale.
fn scale(
    name: &str,
    managed: bool,
    o: &autoscale::Observation,
    decision: Decision,
    drained_by_us: impl Fn(&str) -> bool,
) -> Scale {
    let mut s = Scale {
        node_set: name.to_string(),
        managed,
        from: o.replicas,
        decision: decision.clone(),
        drain: Vec::new(),
        to: None,
        resume: Vec::new(),
    };
    let state = |n: &str| o.workers.iter().find(|(w, _)| w == n).map(|(_, s)| s);
    let leaving: &[String] = match &decision {
        Decision::Hold { .. } => &[],
        Decision::ScaleOut { to, .. } => {
            s.to = (*to != o.replicas).then_some(*to);
            &[]
        }
        Decision::ScaleIn { to, leaving, .. } => {
            s.drain = leaving
                .iter()
                .filter(|n| state(n) != Some(&WorkerState::DrainedByUs))
                .cloned()
                .collect();
            // The replicas go down over the leaving workers Slurm reports drained: from the
            // top for a StatefulSet (it removes its highest ordinals), any of them otherwise.
            let drained = match o.any_order {
                true => leaving
                    .iter()
                    .filter(|n| state(n) == Some(&WorkerState::DrainedByUs))
                    .count(),
                false => leaving
                    .iter()
                    .rev()
                    .take_while(|n| state(n) == Some(&WorkerState::DrainedByUs))
                    .count(),
            } as u32;
            let now = o.replicas.saturating_sub(drained).max(*to);
            s.to = (now < o.replicas).then_some(now);
            leaving
        }
    };
    s.resume = o
        .workers
        .iter()
        .map(|(n, _)| n)
        .filter(|n| drained_by_us(n) && !leaving.contains(n))
        .cloned()
        .collect();
    s
}

/// Carries U out behind FENCE (checked before each write): sync's pod writes WRITES at a time,
/// then its drains, resumes and replacements, then each NodeSet's autoscale. Every write is an
/// Event (by NodeSet), told to OBSERVER as it happens.
pub async fn act<S: SlurmNodes>(
    cluster: &Connection,
    c: &ClusterFile,
    slurm: &S,
    u: &Upkeep,
    fence: &Fence<'_>,
    observer: &Observer,
) -> Result<Vec<(String, Event)>, PassError> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &c.metadata.namespace);
    let mut out = Told {
        observer,
        events: Vec::new(),
    };
    let (pod_writes, rest): (Vec<_>, Vec<_>) = u
        .sync
        .iter()
        .partition(|(_, s)| matches!(s, Step::Condition { .. } | Step::Busy { .. }));
    sync::act::write_pods(&pods, pod_writes, fence, &mut |set, e| out.done(set, e)).await?;
    for (set, s) in rest {
        if !fence() {
            return Err(PassError::Fenced);
        }
        sync::act::sync_node(&pods, slurm, set, s, &mut |set, e| out.done(set, e)).await?;
    }
    for s in &u.scale {
        autoscale::act::autoscale_set(cluster, c, slurm, s, fence, &mut |set, e| out.done(set, e))
            .await?;
    }
    Ok(out.events)
}

/// The events of an upkeep so far (by NodeSet), each told to the observer as it is recorded.
struct Told<'a> {
    observer: &'a Observer,
    events: Vec<(String, Event)>,
}

impl Told<'_> {
    fn done(&mut self, set: &str, e: Event) {
        self.observer.emit(set, &e);
        self.events.push((set.to_string(), e));
    }
}

/// What U does, for `plan --cluster`: sync's busy labels (they decide what may be evicted),
/// drains, resumes, holds and replacements (not its condition writes, which change no
/// behaviour), each scale-in's drains and every change of replicas.
pub fn steps(u: &Upkeep) -> Vec<crate::plan::Step> {
    use crate::plan::{Step as Shown, StepBy};
    let mut out: Vec<Shown> = u
        .sync
        .iter()
        .filter(|(_, s)| !matches!(s, Step::Condition { .. }))
        .map(|(set, s)| {
            let (action, target, detail) = s.shown();
            Shown {
                node_set: set.clone(),
                by: StepBy::Sync,
                action,
                target: target.to_string(),
                detail: format!("sync: {detail}"),
            }
        })
        .collect();
    for s in &u.scale {
        let step = |action, target: &str, detail: String| Shown {
            node_set: s.node_set.clone(),
            by: StepBy::Autoscale,
            action,
            target: target.to_string(),
            detail: format!("autoscale: {detail}"),
        };
        for n in &s.resume {
            out.push(step("resume", n, "no longer leaving: given back".into()));
        }
        match &s.decision {
            Decision::Hold { .. } => {}
            Decision::ScaleOut { to, why } => out.push(step(
                "scale",
                &s.node_set,
                format!("{} -> {to} workers: {why}", s.from),
            )),
            Decision::ScaleIn { to, why, .. } => {
                for n in &s.drain {
                    out.push(step("drain", n, format!("leaving, {why}")));
                }
                let when = match s.to {
                    Some(now) if now == *to => String::new(),
                    Some(now) => format!(" ({now} now, the rest once drained)"),
                    None => " once drained".into(),
                };
                out.push(step(
                    "scale",
                    &s.node_set,
                    format!("{} -> {to} workers{when}: {why}", s.from),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
