//! `controller`: one level-triggered reconcile pass — observe, decide, act, return.
//!
//! A pass never waits for the world: it reads the workers (watch cache or one LIST per kind) and
//! Slurm (its nodes, and its jobs when a decision needs them) once, applies what is safe now (a scale-in whose leaving workers
//! still run jobs keeps its replicas; a removed NodeSet's StatefulSet stays until its workers are
//! drained), then moves every NodeSet on by the steps that are safe now — drain the next worker,
//! delete drained pods, resume drains that are no longer needed — each within its own
//! `maxUnavailable`. Whatever must wait (a draining worker with a job) is looked at again by the
//! next pass, which a watch event or the poll interval brings. Progress is read from the cluster
//! and from Slurm's drain reasons, so a restarted daemon or a new leader carries on.
//!
//! One entrance: the daemon (a pass per trigger, forever), `slurmops apply` and `slurmops rollout`
//! (passes until nothing is left to do) all drive `pass`; what a command changes is its `Target`
//! (apply or not, which NodeSets, which moves). `preview` is the same observe and decide with
//! acting turned off: what `plan --cluster` shows the next pass would do.

pub mod act;
pub mod blocks;
pub mod canary;
pub mod check_scripts;
pub mod checks;
pub mod decide;
mod decisions;
pub mod drive;
pub mod gate;
pub mod kube_only;
pub mod maint;
pub mod mark;
pub mod observation;
pub mod observe;
pub mod per_node;
mod preview;
pub mod upkeep;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;

use self::decide::{Decision, Progress, SetView, SlurmView};
use self::observation::Observation;
pub use self::observation::SlurmUnknown;
use self::observe::{Needs, Scope, observe};
use self::watch::Cache;
use crate::accounting::SlurmAccounts;
use crate::apply::{self, ApplyError, NoSlurm, Options, PruneGuard, Report};
use crate::cluster::ClusterFile;
use crate::k8s::Connection;
use crate::render::Rendered;
use crate::rollout::{Event, Observer};
use crate::slurm::SlurmNodes;
pub use decisions::{Moves, Scope as PassScope, decide_pass, policy};
pub use preview::Preview;

/// After a pass acted, passes read the workers with a LIST for this long instead of trusting the
/// watch cache, which may lag behind those writes (read-after-write; watch lag is milliseconds).
pub const FRESH_AFTER_WRITE: std::time::Duration = std::time::Duration::from_secs(2);

/// May this process still write? Checked before every write of a pass.
pub type Fence<'a> = dyn Fn() -> bool + Send + Sync + 'a;

#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("this replica lost the Lease: the pass stopped before its next write")]
    Fenced,
    /// A write to Slurm failed (worker sync, autoscale).
    #[error("Slurm: {0}")]
    Slurm(#[from] crate::slurm::SlurmError),
    #[error(transparent)]
    Scale(#[from] crate::autoscale::run::ScaleError),
    #[error("{0}")]
    Missing(String),
}

/// What a pass works towards.
pub struct Target<'a> {
    pub c: &'a ClusterFile,
    pub text: &'a str,
    pub rendered: &'a Rendered,
    /// Server-side apply and prune with these options first; None: only move workers.
    pub apply: Option<&'a Options>,
    /// Which NodeSets, which moves, windows ignored or not.
    pub scope: PassScope,
    /// Read the workers with a LIST, not from the watch cache: the previous pass acted, and the
    /// cache may not have seen its writes yet.
    pub fresh: bool,
}

/// What a pass runs with.
pub struct Env<'a, S> {
    pub cluster: &'a Connection,
    /// None: no Slurm configured; apply refuses what could kill a job and nothing rolls.
    pub slurm: Option<&'a S>,
    pub cache: Option<&'a Cache>,
    pub fence: &'a Fence<'a>,
    pub observer: &'a Observer,
    /// Seconds a Ready worker may stay unknown to Slurm before it is replaced.
    pub registration_grace: i64,
}

/// What one pass saw and did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub applied: Option<Report>,
    pub events: Vec<(String, Event)>,
    pub progress: Vec<Progress>,
    /// Slurm could not be read, or failed a step: destructive steps wait for a later pass.
    pub slurm_error: Option<SlurmUnknown>,
    /// What the driver does next.
    pub next: Next,
    /// The workers as observed at the start of the pass.
    pub sets: BTreeMap<String, SetView>,
    pub slurm: Option<SlurmView>,
    /// Where the pass's time went, and what it cost slurmrestd.
    pub phases: Phases,
    pub slurm_traffic: crate::slurm::Traffic,
    /// Worker sync or autoscale failed a write (the pass's other steps are done; the next pass
    /// decides again).
    pub upkeep_error: Option<String>,
    /// What worker sync and autoscale decided this pass (what they wrote is in `events`).
    pub upkeep: upkeep::Upkeep,
    /// Why worker sync could not read the Kubernetes nodes (cordons and node health wait).
    pub health_error: Option<String>,
}

/// Wall time of each phase of a pass (`/metrics`: `slurmops_pass_phase_seconds`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    /// Workers, PodTemplates, Kubernetes nodes, block labels (watch caches or reads).
    pub observe_kubernetes: std::time::Duration,
    /// Slurm's nodes, jobs when needed, reservations.
    pub observe_slurm: std::time::Duration,
    /// The pure decisions.
    pub decide: std::time::Duration,
    /// Server-side apply, prune and accounting.
    pub apply: std::time::Duration,
    /// Drains, deletions, resumes, submissions, pod creation.
    pub act: std::time::Duration,
}

impl Phases {
    /// Each phase with its metric label.
    pub fn labelled(&self) -> [(&'static str, std::time::Duration); 5] {
        [
            ("observe_kubernetes", self.observe_kubernetes),
            ("observe_slurm", self.observe_slurm),
            ("decide", self.decide),
            ("apply", self.apply),
            ("act", self.act),
        ]
    }
}

/// What a pass asks of whoever drives it next (kube-runtime's `Action`, for a whole cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing left to do: every NodeSet settled on its revision, nothing held or waiting.
    Done,
    /// Work is left: pass again when a watched worker changes or the poll interval passes (at
    /// once when this pass acted), at the latest AT (UNIX seconds: a maintenance window opens, a
    /// canary's time runs out). REAPPLY: that pass applies the objects again (a scale-in or a
    /// removal waits for drains, an upgrade is staged, a control-plane change waits for a window).
    Requeue { reapply: bool, at: Option<i64> },
}

impl Default for Next {
    fn default() -> Next {
        Next::Requeue {
            reapply: false,
            at: None,
        }
    }
}

impl Next {
    pub fn done(self) -> bool {
        self == Next::Done
    }
    pub fn reapply(self) -> bool {
        matches!(self, Next::Requeue { reapply: true, .. })
    }
    pub fn at(self) -> Option<i64> {
        match self {
            Next::Requeue { at, .. } => at,
            Next::Done => None,
        }
    }
}

/// Builds a pass's `Next`.
#[derive(Debug, Default)]
struct NextBuilder {
    reapply: bool,
    at: Option<i64>,
}

impl NextBuilder {
    fn at(&mut self, t: i64) {
        self.at = Some(self.at.map_or(t, |w| w.min(t)));
    }
    fn finish(self, done: bool) -> Next {
        match done {
            true => Next::Done,
            false => Next::Requeue {
                reapply: self.reapply,
                at: self.at,
            },
        }
    }
}

fn kube_err(what: &str) -> impl FnOnce(kube::Error) -> PassError + '_ {
    move |source| PassError::Kube {
        what: what.to_string(),
        source,
    }
}

/// One pass for T.
pub async fn pass<S: SlurmNodes + SlurmAccounts>(
    env: &Env<'_, S>,
    t: &Target<'_>,
) -> Result<Outcome, PassError> {
    let c = t.c;
    let ns = &c.metadata.namespace;
    let Some(slurm) = env.slurm else {
        // Without Slurm nothing can be known drained: apply refuses scale-ins and prunes over
        // workers, and no worker is replaced.
        let mut out = Outcome::default();
        if let Some(opts) = t.apply {
            fenced(env)?;
            out.applied =
                Some(apply::apply(env.cluster, c, t.text, t.rendered, opts, &NoSlurm).await?);
        }
        // Every NodeSet, from Kubernetes alone, so the status and the view show them meanwhile.
        let live = kube_only::observe(&env.cluster.client, c)
            .await
            .map_err(kube_err("the NodeSets' workloads"))?;
        out.progress = kube_only::progress(c, &live);
        out.next = Next::Done;
        return Ok(out);
    };
    let traffic = slurm.traffic();
    let started = std::time::Instant::now();
    let obs = look(env, t, slurm, needs(t)).await?;
    let mut phases = Phases {
        observe_slurm: obs.slurm_time,
        observe_kubernetes: started.elapsed().saturating_sub(obs.slurm_time),
        ..Phases::default()
    };
    let decided = std::time::Instant::now();
    let mut decisions = decide_pass(c, &obs, env.registration_grace, &t.scope);
    phases.decide = decided.elapsed();
    let applied = std::time::Instant::now();
    let mut out = Outcome {
        slurm_error: obs.slurm.as_ref().err().cloned(),
        ..Outcome::default()
    };
    let mut changed = BTreeSet::new();
    let mut next = NextBuilder::default();
    if let Some(opts) = t.apply {
        fenced(env)?;
        // Read before apply records the new revision: it tells hand edits from git changes.
        let last = match c.spec.accounting.enabled {
            true => apply::applyset::last_applied(env.cluster, c)
                .await
                .ok()
                .flatten(),
            false => None,
        };
        let rendered = held(t.rendered, &decisions);
        let rep = apply_held(env, t, &rendered, opts, &obs, &decisions).await?;
        // A Slurm upgrade holds later components back, a maintenance window the control plane:
        // apply again on the next pass, at the latest when the window opens.
        next.reapply |= !rep.held.is_empty();
        if let Some(opens) = rep.window_opens {
            next.at(opens);
        }
        changed = changed_node_sets(rep.updated.iter().chain(&rep.created).chain(&rep.recreated));
        let mut rep = rep;
        accounting(env, slurm, c, last.as_ref(), &mut rep).await?;
        out.applied = Some(rep);
    }
    phases.apply = applied.elapsed();
    let acted = std::time::Instant::now();
    settle(&mut decisions, &changed);
    let pods: Api<Pod> = Api::namespaced(env.cluster.client.clone(), ns);
    let upgrading = out.applied.as_ref().is_some_and(|r| !r.held.is_empty());
    let mut all_done = out.slurm_error.is_none() && !upgrading && !obs.nodes_listing;
    let mut done_by_set = act_all(env, slurm, &pods, &decisions, &out).await?;
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
        carry_out(&hands, &name, obs.sets.get(&name), done, &mut d, &mut out).await?;
        if out.slurm_error.is_none()
            && let (false, Some(t)) = (d.create.is_empty(), obs.templates.get(&name))
        {
            let service = crate::render::names::Names::new(c).workers_service();
            let made = act::create(
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
    // Worker sync and autoscale: decided on the same observation, written behind the fence.
    if out.slurm_error.is_none() {
        let decided = std::time::Instant::now();
        let u = upkeep::decide(c, &obs, env.registration_grace, t.scope.keep);
        phases.decide += decided.elapsed();
        if !u.is_empty() {
            match upkeep::act(env.cluster, c, slurm, &u, env.fence, env.observer).await {
                Ok(events) => out.events.extend(events),
                Err(PassError::Fenced) => return Err(PassError::Fenced),
                Err(e) => out.upkeep_error = Some(e.to_string()),
            }
        }
        out.upkeep = u;
    }
    if t.scope.keep.sync {
        out.health_error = obs.health.as_ref().err().cloned();
    }
    // A NodeSet of cluster.yaml whose StatefulSet is not observed yet is not done.
    all_done &= c
        .spec
        .node_sets
        .iter()
        .filter(|n| t.scope.includes(&n.name))
        .all(|n| obs.sets.contains_key(&n.name));
    if out.slurm_error.is_some() {
        // Slurm does not answer (a new cluster's first passes): a NodeSet nothing was decided
        // for (its workload applied by this very pass, its perNode workers not made without
        // Slurm) still shows, from Kubernetes alone.
        let missing: Vec<String> = c
            .spec
            .node_sets
            .iter()
            .filter(|n| t.scope.includes(&n.name))
            .filter(|n| !out.progress.iter().any(|p| p.node_set == n.name))
            .map(|n| n.name.clone())
            .collect();
        if !missing.is_empty() {
            let live = kube_only::observe(&env.cluster.client, c)
                .await
                .map_err(kube_err("the NodeSets' workloads"))?;
            out.progress.extend(
                kube_only::progress(c, &live)
                    .into_iter()
                    .filter(|p| missing.contains(&p.node_set)),
            );
        }
    }
    out.next = next.finish(all_done && out.events.is_empty());
    phases.act = acted.elapsed();
    out.phases = phases;
    out.slurm_traffic = slurm.traffic() - traffic;
    out.sets = obs.sets;
    out.slurm = obs.slurm.ok();
    Ok(out)
}

/// QOS, accounts and users, after the Kubernetes objects (slurmdbd and slurmrestd may just have
/// been created) and before workers move. A failure is reported and does not stop the pass.
async fn accounting<S: SlurmAccounts>(
    env: &Env<'_, S>,
    slurm: &S,
    c: &ClusterFile,
    last: Option<&ClusterFile>,
    rep: &mut Report,
) -> Result<(), PassError> {
    if !c.spec.accounting.enabled {
        return Ok(());
    }
    fenced(env)?;
    match slurm.reconcile_accounting(c, last).await {
        Ok(o) => {
            rep.accounting = o.lines();
            rep.accounting_writes = o.writes;
            let refused: Vec<String> = o
                .diff
                .changes
                .iter()
                .filter_map(|ch| ch.refused.clone())
                .collect();
            rep.accounting_error =
                o.failed
                    .map(|(ch, e)| format!("{}: {e}", ch.key))
                    .or_else(|| {
                        (!refused.is_empty()).then(|| format!("refused: {}", refused.join("; ")))
                    });
        }
        Err(e) => {
            rep.accounting_error = Some(format!("cannot read slurmdbd, nothing changed: {e}"))
        }
    }
    Ok(())
}

/// Observes and decides as `pass` would, and acts on nothing (`plan --cluster`).
pub async fn preview<S: SlurmNodes>(
    env: &Env<'_, S>,
    t: &Target<'_>,
) -> Result<Preview, PassError> {
    let Some(slurm) = env.slurm else {
        return Err(PassError::Missing(
            "previewing the controller's pass needs Slurm (--slurmrestd-url)".into(),
        ));
    };
    // A preview names the jobs a change touches and the pending jobs a window holds back.
    let needs = Needs {
        jobs: observe::JobsNeed::Always,
        ..needs(t)
    };
    let observation = look(env, t, slurm, needs).await?;
    let decisions = decide_pass(t.c, &observation, env.registration_grace, &t.scope);
    let upkeep = upkeep::decide(t.c, &observation, env.registration_grace, t.scope.keep);
    Ok(Preview {
        decisions,
        upkeep,
        observation,
    })
}

/// What T's pass reads: what cluster.yaml asks for, the Kubernetes nodes' health only with
/// worker sync.
fn needs(t: &Target<'_>) -> Needs {
    let mut n = Needs::of(t.c);
    if !t.scope.keep.sync {
        n.health = None;
    }
    n
}

/// One observation for a pass or a preview: the scope's workers, Slurm and what the decisions
/// need, with a Slurm answer that cannot be trusted counted as unknown.
async fn look<S: SlurmNodes>(
    env: &Env<'_, S>,
    t: &Target<'_>,
    slurm: &S,
    needs: Needs,
) -> Result<Observation, PassError> {
    let c = t.c;
    let scope = Scope::cluster(&c.metadata.namespace, &c.metadata.name);
    let cache = env.cache.filter(|_| !t.fresh);
    let mut obs = observe(&env.cluster.client, &scope, cache, Some(slurm), &needs)
        .await
        .map_err(kube_err("observe the workers"))?;
    distrust_empty(&mut obs);
    if t.apply.is_none()
        && let Some(missing) = t
            .scope
            .only
            .iter()
            .flatten()
            .find(|n| !obs.sets.contains_key(*n))
    {
        return Err(PassError::Missing(format!(
            "NodeSet {missing}: no workload in {} (apply cluster.yaml first)",
            c.metadata.namespace
        )));
    }
    Ok(obs)
}

/// The NodeSets whose workload (StatefulSet, or PodTemplate of slurmops-made pods) IDS name.
fn changed_node_sets<'a>(ids: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
    ids.into_iter()
        .filter_map(|id| {
            id.strip_prefix("StatefulSet/")
                .or_else(|| id.strip_prefix("PodTemplate/"))
        })
        .map(str::to_string)
        .collect()
}

/// Decisions taken on a workload the apply just changed are dropped: the next pass decides on
/// the new revision.
fn settle(decisions: &mut BTreeMap<String, Decision>, changed: &BTreeSet<String>) {
    for (name, d) in decisions.iter_mut() {
        if changed.contains(name) {
            d.progress.done = false;
            d.actions.clear();
            d.create.clear();
        }
    }
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
        let e = act::record(h.client, h.namespace, set, r).await?;
        h.observer.emit(name, &e);
        out.events.push((name.to_string(), e));
    }
    Ok(())
}

/// An answer listing no Slurm node at all while workers are Ready is not believed: "unknown to
/// Slurm" lets a Ready worker be replaced after the registration grace, and a slurmrestd or
/// slurmctld in a bad state must not turn into deleted pods. Slurm's state counts as unknown.
fn distrust_empty(obs: &mut Observation) {
    let ready = obs
        .sets
        .values()
        .flat_map(|s| &s.workers)
        .filter(|w| w.ready)
        .count();
    if ready > 0 && obs.slurm.as_ref().is_ok_and(|v| v.nodes.is_empty()) {
        obs.slurm = Err(SlurmUnknown::Untrusted { ready });
    }
}

fn fenced<S>(env: &Env<'_, S>) -> Result<(), PassError> {
    if (env.fence)() {
        Ok(())
    } else {
        Err(PassError::Fenced)
    }
}

/// A worker StatefulSet may lose pods whose Slurm nodes are all drained, or unknown to Slurm.
impl PruneGuard for SlurmView {
    async fn drained(&self, nodes: &[String]) -> Result<bool, String> {
        Ok(nodes
            .iter()
            .all(|n| self.nodes.get(n).is_none_or(|x| x.state.is_drained())))
    }
}

/// R with the StatefulSets of unfinished scale-ins kept at their live replicas (they go down on
/// a later pass, once their leaving workers are drained).
fn held(r: &Rendered, decisions: &BTreeMap<String, Decision>) -> Rendered {
    let mut r = r.clone();
    for (name, d) in decisions {
        let Some(replicas) = d.hold_replicas else {
            continue;
        };
        if let Some(o) = r
            .objects
            .iter_mut()
            .find(|o| o.kind == "StatefulSet" && o.name == *name)
        {
            o.body["spec"]["replicas"] = json!(replicas);
        }
    }
    r
}

/// Applies R (T's objects, held), with the StatefulSets of removed NodeSets with undrained
/// workers kept (both go on a later pass, once drained).
async fn apply_held<S>(
    env: &Env<'_, S>,
    t: &Target<'_>,
    r: &Rendered,
    opts: &Options,
    obs: &Observation,
    decisions: &BTreeMap<String, Decision>,
) -> Result<Report, PassError> {
    let mut opts = opts.clone();
    opts.keep = decisions
        .iter()
        .filter(|(_, d)| d.keep)
        .map(|(n, _)| n.clone())
        .collect();
    let rep = match &obs.slurm {
        Ok(view) => apply::apply(env.cluster, t.c, t.text, r, &opts, view).await?,
        Err(_) => apply::apply(env.cluster, t.c, t.text, r, &opts, &NoSlurm).await?,
    };
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_node_list_while_workers_are_ready_counts_as_slurm_unknown() {
        let w = decide::Worker {
            name: "a-0".into(),
            uid: "u".into(),
            ordinal: Some(0),
            revision: "r".into(),
            ready: true,
            deleting: false,
            created: Some(0),
            host: None,
            checks: Default::default(),
        };
        let sets = BTreeMap::from([(
            "a".to_string(),
            SetView {
                name: "a".into(),
                replicas: 1,
                update_revision: Some("r2".into()),
                managed: false,
                canary: None,
                current_revision: None,
                workers: vec![w],
            },
        )]);
        let mut obs = Observation::of_sets(sets, Ok(SlurmView::default()), 10_000);
        distrust_empty(&mut obs);
        let err = obs.slurm.unwrap_err().to_string();
        assert!(
            err.contains("listed no nodes while 1 worker(s) are Ready"),
            "{err}"
        );
    }
}
