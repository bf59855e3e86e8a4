//! The driver for people: `slurmops apply` (with Slurm) and `slurmops rollout` (`roll`) loop the
//! same pass the daemon runs until nothing is left to do, printing each step as it happens. A pass that
//! acted is followed at once by the next (an idle node drains within milliseconds); otherwise the
//! driver sleeps `poll`. Slurm unreachable pauses (nothing is deleted meanwhile) up to
//! `slurm_outage_timeout`; a replaced worker that never comes back halts after `progress_timeout`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::decide::{REGISTRATION_GRACE, controller_drain};
use super::{Env, Moves, Outcome, PassError, PassScope, Target};
use crate::accounting::SlurmAccounts;
use crate::cluster::ClusterFile;
use crate::k8s::Connection;
use crate::render::Rendered;
use crate::rollout::{Event, Observer, Report};
use crate::slurm::SlurmNodes;

/// Why a driver stopped before the work was done.
#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    #[error("NodeSet {node_set}: Slurm state unknown, so nothing was deleted: {error}")]
    SlurmUnknown {
        node_set: String,
        #[source]
        error: super::SlurmUnknown,
    },
    #[error(transparent)]
    Pass(#[from] PassError),
    #[error(
        "NodeSet {node_set}: rollout halted, no progress for {after:?}: {waiting}. No further node is drained until this is resolved"
    )]
    Stalled {
        node_set: String,
        after: Duration,
        waiting: String,
    },
    #[error(
        "the controllers' roll made no progress for {after:?}: {waiting}. No further controller is replaced until this is resolved"
    )]
    ControllersStalled { after: Duration, waiting: String },
    #[error(
        "NodeSet {node_set}: canary failed{job}: {error}. The rollout is halted and the canaries ({canaries}) stay drained; push a fix or a revert, or run `slurmops rollout --resume {node_set}` to proceed anyway"
    )]
    CanaryFailed {
        node_set: String,
        job: String,
        error: String,
        canaries: String,
    },
}

/// What `slurmops rollout` asks: the controller's pass over the NodeSets of cluster.yaml (or
/// one), applying nothing, with scale-ins and removals left to apply.
pub struct Rollout<'a> {
    pub c: &'a ClusterFile,
    pub text: &'a str,
    pub rendered: &'a Rendered,
    /// Only this NodeSet; None: every NodeSet of cluster.yaml at once.
    pub node_set: Option<String>,
    /// What the operator asked for on purpose (`--resume`, `--ignore-window`): carried out by
    /// the first pass, recorded as Events.
    pub decrees: super::Decrees,
    pub until: Until,
    pub observer: Observer,
    /// Watch the workers, so that a new pod Ready starts the next wave at once.
    pub watch: bool,
}

/// Rolls R's NodeSets until every worker runs its workload's revision (`slurmops rollout`): the
/// daemon's pass, looped, with the NodeSets' own policies, canaries and windows.
pub async fn roll<S: SlurmNodes + SlurmAccounts>(
    cluster: &Connection,
    slurm: &S,
    r: &Rollout<'_>,
) -> Result<Driven, RolloutError> {
    let c = r.c;
    let only: BTreeSet<String> = match &r.node_set {
        Some(n) => BTreeSet::from([n.clone()]),
        None => c.spec.node_sets.iter().map(|n| n.name.clone()).collect(),
    };
    let mut until = r.until.clone();
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    let cache = r.watch.then(|| {
        let scope = super::observe::Scope::cluster(&c.metadata.namespace, &c.metadata.name);
        let mut cache = super::watch::Cache::start(&cluster.client, scope, wake.clone());
        if c.spec.node_sets.iter().any(|n| n.replicas.per_node()) {
            cache.follow_nodes(&cluster.client, &super::observe::node_label_keys(c));
        }
        cache
    });
    if cache.is_some() {
        until.wake = Some(wake);
    }
    let env = Env {
        cluster,
        slurm: Some(slurm),
        cache: cache.as_ref(),
        fence: &|| true,
        observer: &r.observer,
        registration_grace: REGISTRATION_GRACE,
    };
    let scope = PassScope {
        only: Some(only),
        moves: Moves::Roll,
        ignore_window: r.decrees.ignore_window,
        // Worker sync and autoscale are the daemon's (and their commands').
        keep: super::upkeep::Keep::NONE,
    };
    let env = &env;
    let scope = &scope;
    drive(
        |s: Step| async move {
            let t = Target {
                c,
                text: r.text,
                rendered: r.rendered,
                apply: None,
                scope: scope.clone(),
                fresh: s.fresh,
                decrees: (s.n == 0).then_some(&r.decrees),
            };
            super::pass(env, &t).await
        },
        &until,
        &r.observer,
    )
    .await
}

impl Until {
    /// The limits of a command run by people: a pass every half second at most, a replaced
    /// worker back within 5 minutes, Slurm unreachable for an hour at most.
    pub fn for_people() -> Until {
        Until {
            poll: Duration::from_millis(500),
            wake: None,
            max_passes: None,
            progress_timeout: Duration::from_secs(300),
            slurm_outage_timeout: Duration::from_secs(3600),
        }
    }
}

/// How long to keep going.
#[derive(Debug, Clone, Default)]
pub struct Until {
    /// The longest wait between passes that did nothing.
    pub poll: Duration,
    /// Wakes the next pass before `poll` (a watched worker changed).
    pub wake: Option<std::sync::Arc<tokio::sync::Notify>>,
    /// Stop after this many passes, done or not (`apply --no-wait`: one).
    pub max_passes: Option<u32>,
    pub progress_timeout: Duration,
    pub slurm_outage_timeout: Duration,
}

/// What the passes did, for the summary.
#[derive(Debug, Default)]
pub struct Driven {
    /// What the passes' applies did (later passes lower held replicas and prune).
    pub applied: Option<crate::apply::Report>,
    /// Per NodeSet: what happened to its workers.
    pub rollouts: std::collections::BTreeMap<String, Report>,
    /// Per NodeSet: workers drained because they leave (scale-in, NodeSet removed).
    pub drained_leaving: std::collections::BTreeMap<String, Vec<String>>,
    /// Where the NodeSets stood after the last pass.
    pub progress: Vec<super::decide::Progress>,
    /// Nothing was left to do (false when `max_passes` ended the drive first).
    pub done: bool,
}

/// One step of a drive.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// 0 for the first pass.
    pub n: u32,
    /// A pass acted within `FRESH_AFTER_WRITE`: read the workers afresh, not from a watch cache
    /// that may not have seen those writes yet (a stale read could drain a replaced worker's new
    /// pod).
    pub fresh: bool,
}

/// Runs STEP (one pass) until a pass reports done.
pub async fn drive<F, Fut>(
    mut step: F,
    until: &Until,
    observer: &Observer,
) -> Result<Driven, RolloutError>
where
    F: FnMut(Step) -> Fut,
    Fut: std::future::Future<Output = Result<Outcome, PassError>>,
{
    let mut driven = Driven::default();
    let mut deleted: BTreeSet<(String, String)> = BTreeSet::new();
    let mut outage: Option<Instant> = None;
    let mut progress_at = Instant::now();
    let mut n = 0;
    let mut wrote: Option<Instant> = None;
    loop {
        let fresh = wrote.is_some_and(|t| t.elapsed() < super::FRESH_AFTER_WRITE);
        let out = step(Step { n, fresh }).await?;
        n += 1;
        if !out.events.is_empty() {
            wrote = Some(Instant::now());
        }
        match (&mut driven.applied, &out.applied) {
            (Some(first), Some(later)) => first.absorb(later),
            (None, later) => driven.applied = later.clone(),
            _ => {}
        }
        driven.record(&out, &mut deleted);
        if driven.replaced(&out, &mut deleted, observer) {
            progress_at = Instant::now();
        }
        if follow_outage(&out, &mut outage, until, observer)? {
            progress_at = Instant::now();
        }
        driven.progress = out.progress.clone();
        canary_failed(&out)?;
        if out.next.done() && deleted.is_empty() {
            driven.done = true;
            return Ok(driven);
        }
        if waits_for_window(&out) && deleted.is_empty() {
            return Ok(driven);
        }
        if until.max_passes.is_some_and(|m| n >= m) {
            return Ok(driven);
        }
        if !out.events.is_empty() {
            progress_at = Instant::now();
            continue;
        }
        stalled(&out, progress_at, until)?;
        match &until.wake {
            Some(w) => {
                tokio::select! {
                    _ = tokio::time::sleep(until.poll) => {}
                    _ = w.notified() => {}
                }
            }
            None => tokio::time::sleep(until.poll).await,
        }
    }
}

impl Driven {
    /// Takes a pass's events into the report: the pods deleted to be replaced go to DELETED (a
    /// leaving worker's, perNode whose node left, is not coming back), leaving workers' drains
    /// to `drained_leaving`.
    fn record(&mut self, out: &Outcome, deleted: &mut BTreeSet<(String, String)>) {
        for (set, e) in &out.events {
            let r = self.rollouts.entry(set.clone()).or_default();
            r.events.push(e.clone());
            match e {
                Event::Delete { pod, .. } if !leaving(out, set, pod) => {
                    deleted.insert((set.clone(), pod.clone()));
                }
                Event::Drain { node, .. } if leaving(out, set, node) => {
                    let d = self.drained_leaving.entry(set.clone()).or_default();
                    if !d.contains(node) {
                        d.push(node.clone());
                    }
                }
                _ => {}
            }
        }
    }

    /// The DELETED pods back and Ready after a pass: each reported replaced and said; true when
    /// any came back.
    fn replaced(
        &mut self,
        out: &Outcome,
        deleted: &mut BTreeSet<(String, String)>,
        observer: &Observer,
    ) -> bool {
        let back = back(out, deleted);
        let any = !back.is_empty();
        for (set, pod) in back {
            let e = Event::Ready { pod: pod.clone() };
            observer.emit(&set, &e);
            let r = self.rollouts.entry(set.clone()).or_default();
            r.events.push(e);
            r.replaced.push(pod.clone());
            deleted.remove(&(set, pod));
        }
        any
    }
}

/// Follows Slurm being out of reach across passes (since OUTAGE): said when it starts and ends,
/// an error once it lasts past the drive's limit. True when Slurm came back with this pass.
fn follow_outage(
    out: &Outcome,
    outage: &mut Option<Instant>,
    until: &Until,
    observer: &Observer,
) -> Result<bool, RolloutError> {
    match (&out.slurm_error, *outage) {
        (Some(error), None) => {
            *outage = Some(Instant::now());
            let error = error.to_string();
            say(observer, out, Event::SlurmUnreachable { error });
        }
        (Some(error), Some(since)) if since.elapsed() > until.slurm_outage_timeout => {
            return Err(RolloutError::SlurmUnknown {
                node_set: sets(out),
                error: error.clone(),
            });
        }
        (None, Some(_)) => {
            *outage = None;
            say(observer, out, Event::SlurmBack);
            return Ok(true);
        }
        _ => {}
    }
    Ok(false)
}

fn leaving(out: &Outcome, set: &str, node: &String) -> bool {
    out.progress
        .iter()
        .any(|p| p.node_set == set && p.leaving.contains(node))
}

fn sets(out: &Outcome) -> String {
    let names: Vec<&str> = out.progress.iter().map(|p| p.node_set.as_str()).collect();
    names.join(", ")
}

/// An event about the whole pass, told once per NodeSet it concerns.
fn say(observer: &Observer, out: &Outcome, e: Event) {
    for p in &out.progress {
        observer.emit(&p.node_set, &e);
    }
}

/// Pods this driver deleted that are back: updated, Ready, registered and not drained by us.
fn back(out: &Outcome, deleted: &BTreeSet<(String, String)>) -> Vec<(String, String)> {
    let Some(slurm) = &out.slurm else {
        return Vec::new();
    };
    deleted
        .iter()
        .filter(|(set, pod)| {
            let Some(s) = out.sets.get(set) else {
                return false;
            };
            let Some(rev) = &s.update_revision else {
                return false;
            };
            let fresh = s
                .workers
                .iter()
                .any(|w| w.name == *pod && w.ready && !w.deleting && w.revision == *rev);
            let registered = slurm
                .nodes
                .get(pod)
                .is_some_and(|n| !n.state.has("NOT_RESPONDING") && !controller_drain(n));
            fresh && registered
        })
        .cloned()
        .collect()
}

/// All that is left waits for a maintenance window (nothing in flight, no job to wait for): a
/// driver stops there rather than wait for days; the daemon wakes when the window opens.
fn waits_for_window(out: &Outcome) -> bool {
    out.events.is_empty()
        && out.slurm_error.is_none()
        && windowed(out.applied.as_ref(), &out.progress)
        && out
            .progress
            .iter()
            .all(|p| p.in_flight.is_empty() && p.waiting.is_empty() && p.leaving.is_empty())
}

/// Something waits for a maintenance window: a control-plane change APPLIED held back, or a
/// NodeSet's workers (PROGRESS).
pub fn windowed(
    applied: Option<&crate::apply::Report>,
    progress: &[super::decide::Progress],
) -> bool {
    applied.is_some_and(|r| r.window_opens.is_some()) || progress.iter().any(|p| p.window.is_some())
}

/// A halted canary ends the drive: nothing moves until git or an operator says so.
fn canary_failed(out: &Outcome) -> Result<(), RolloutError> {
    for p in &out.progress {
        if let Some(c) = p
            .canary
            .as_ref()
            .filter(|c| c.stage == crate::controller::features::canary::CanaryStage::Failed)
        {
            return Err(RolloutError::CanaryFailed {
                node_set: p.node_set.clone(),
                job: c
                    .jobs
                    .first()
                    .map(|j| format!(" (job {j})"))
                    .unwrap_or_default(),
                error: c
                    .error
                    .clone()
                    .unwrap_or_else(|| "no error reported".into()),
                canaries: c.canaries.join(", "),
            });
        }
    }
    Ok(())
}

/// Replaced workers that do not come back within the progress timeout halt the driver, and so
/// does a controllers' roll that waits as long (a replaced controller that never runs). Workers
/// waiting for jobs do not: jobs may run for days.
fn stalled(out: &Outcome, since: Instant, until: &Until) -> Result<(), RolloutError> {
    if since.elapsed() <= until.progress_timeout {
        return Ok(());
    }
    if let Some(super::features::controllers_roll::Roll::Wait(why)) = &out.controllers {
        return Err(RolloutError::ControllersStalled {
            after: until.progress_timeout,
            waiting: why.clone(),
        });
    }
    for p in &out.progress {
        let stuck: Vec<String> = p
            .in_flight
            .iter()
            .filter(|n| !p.waiting.iter().any(|w| w.node == **n))
            .map(|n| format!("{n} (replaced, not Ready and registered)"))
            .collect();
        if !stuck.is_empty() {
            return Err(RolloutError::Stalled {
                node_set: p.node_set.clone(),
                after: until.progress_timeout,
                waiting: stuck.join(", "),
            });
        }
    }
    Ok(())
}
