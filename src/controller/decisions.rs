//! Every NodeSet's decision in a pass, pure: what each wants (a count, the workers of matching
//! nodes, autoscale's count, removal), under its rollout policy, its canary and the maintenance
//! windows, with the block placements and maintenance reservations due; and, with Slurm's state
//! unknown, the decision that moves nothing. Decided on the `Observation` alone: no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet};

use super::decide::{
    self, Action, Decision, DrainReason, Policy, Progress, SetView, SlurmView, Want,
};
use super::features::{blocks, canary, checks, per_node, windows};
use super::observation::Observation;
use crate::cluster::ClusterFile;
use crate::cluster::canary_validation::Validation;
use crate::cluster::window::{self, WindowMode};

/// The NodeSet's rollout policy from cluster.yaml.
/// LIVE: the workers a perNode NodeSet wants now (its percentages are of those).
pub fn policy(ns: &crate::cluster::types::NodeSet, registration_grace: i64, live: u32) -> Policy {
    let u = &ns.update;
    Policy {
        max_unavailable: ns.max_unavailable(live),
        drain_timeout: Some(u.drain_timeout.as_secs() as i64),
        force: matches!(u.on_timeout, crate::cluster::types::OnTimeout::Force),
        registration_grace,
        gate: canary::Gate::Open,
        window: decide::WindowGate::Open,
        requeue: (u.running_jobs == crate::cluster::types::RunningJobs::Requeue).then(|| {
            decide::RequeueRule {
                after: u.requeue.after.as_secs() as i64,
                partitions: u.requeue.partitions.clone(),
                qos: u.requeue.qos.clone(),
                max_nodes: u.requeue.max_nodes,
            }
        }),
    }
}

/// Which workers a pass moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Moves {
    /// Everything: outdated workers roll, leaving ones drain (the daemon, `apply`).
    #[default]
    All,
    /// Only the workers that leave (scale-in, NodeSet removed, node left): `apply --no-rollout`.
    Leaving,
    /// Outdated workers roll; a count NodeSet keeps its live replicas, since scale-ins and
    /// removals are apply's (`slurmops rollout`).
    Roll,
    /// No worker moves: only the upkeep the scope keeps (`slurmops sync`, `slurmops autoscale`).
    Nothing,
}

/// What a pass decides for: which NodeSets, which moves, and whether an operator let workers
/// drain outside the maintenance windows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Only these NodeSets (`rollout --node-set`); None: every observed one.
    pub only: Option<BTreeSet<String>>,
    pub moves: Moves,
    /// `rollout --ignore-window`: the windows gate nothing (recorded as an Event by the caller).
    pub ignore_window: bool,
    /// Which upkeep (worker sync, autoscale) the pass does besides the moves.
    pub keep: super::upkeep::Keep,
}

impl Scope {
    pub fn includes(&self, node_set: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(node_set))
    }
}

/// The whole pass's decisions, pure: every NodeSet in SCOPE, under its policy, canary and
/// windows, with the block placements and maintenance reservations due, and only the moves
/// SCOPE allows.
pub fn decide_pass(
    c: &ClusterFile,
    obs: &Observation,
    grace: i64,
    scope: &Scope,
) -> BTreeMap<String, Decision> {
    let mut decisions = decide_all(c, obs, grace, scope);
    place_in_blocks(c, obs, &mut decisions);
    reserve_for_windows(c, obs, &mut decisions);
    run_checks(c, obs, &mut decisions);
    for d in decisions.values_mut() {
        match scope.moves {
            Moves::Leaving => only_leaving(d),
            Moves::Nothing => {
                d.actions.clear();
                d.create.clear();
                d.record = None;
                d.hold_replicas = None;
                d.keep = false;
                d.progress.done = true;
            }
            Moves::All | Moves::Roll => {}
        }
    }
    decisions
}

/// Only the workers that leave move; the others wait for `slurmops rollout`.
fn only_leaving(d: &mut Decision) {
    let leaving = &d.progress.leaving;
    d.actions.retain(|a| match a {
        Action::Drain { node, .. } | Action::Resume { node } => leaving.contains(node),
        Action::SetTopology { .. } => true,
        // A canary and a window's reservation belong to a rollout, which waits.
        Action::Submit { .. }
        | Action::CheckSubmit { .. }
        | Action::CheckCancel { .. }
        | Action::Mark { .. }
        | Action::Cancel { .. }
        | Action::Hold { .. }
        | Action::Requeue { .. }
        | Action::Reserve { .. }
        | Action::Unreserve { .. } => false,
        // Only slurmops deletes a perNode NodeSet's leaving workers (once drained).
        Action::Delete { pod, .. } => leaving.contains(pod),
    });
    d.progress.done = leaving.is_empty();
}

/// Adds the active checks' steps (`policy.activeChecks`). They go first: a held worker's jobs
/// are submitted before it is resumed (by the checks, or by the rollout for a replaced worker,
/// whose resume waits while a due check cannot be submitted). With the job queue unknown, no
/// check is judged or submitted, and a replaced worker a check must pass on first stays drained.
fn run_checks(c: &ClusterFile, obs: &Observation, decisions: &mut BTreeMap<String, Decision>) {
    let Ok(view) = &obs.slurm else {
        return;
    };
    let resumes: BTreeSet<String> = decisions
        .values()
        .flat_map(|d| &d.actions)
        .filter_map(|a| match a {
            Action::Resume { node } => Some(node.clone()),
            _ => None,
        })
        .collect();
    let mut checked = match view.jobs_error {
        None => {
            let none = BTreeMap::new();
            // Checks across a block read the block label.
            let label = c.spec.topology.as_ref().and_then(|t| t.block.as_ref());
            let blocks = match (&obs.blocks, label) {
                (Ok(units), Some(b)) => units.get(&b.node_label).unwrap_or(&none),
                _ => &none,
            };
            checks::assess(&c.spec, &obs.sets, view, blocks, &resumes, obs.now)
        }
        Some(_) => checks::Checked {
            keep_drained: checks::unchecked(&c.spec, &obs.sets, &resumes),
            ..checks::Checked::default()
        },
    };
    for (name, d) in decisions.iter_mut() {
        let before = d.actions.len();
        d.actions.retain(
            |a| !matches!(a, Action::Resume { node } if checked.keep_drained.contains(node)),
        );
        d.progress.done &= d.actions.len() == before;
        if let Some(mut first) = checked.actions.remove(name) {
            first.append(&mut d.actions);
            d.actions = first;
        }
        d.progress.checks = checked.summary.remove(name).unwrap_or_default();
        d.progress.done &= !checked.busy.contains(name);
    }
}

/// Adds the topology placements due (spec.topology) to the decisions. Kubernetes nodes' labels
/// that could not be read leave placement to a later pass (it never blocks a rollout), and say
/// why.
fn place_in_blocks(c: &ClusterFile, obs: &Observation, decisions: &mut BTreeMap<String, Decision>) {
    let (Some(t), Ok(view)) = (&c.spec.topology, &obs.slurm) else {
        return;
    };
    let none = BTreeMap::new();
    for p in t.placings() {
        let labels = match &obs.blocks {
            Ok(l) => l.get(p.node_label).unwrap_or(&none),
            Err(e) => {
                for (name, d) in decisions.iter_mut() {
                    if p.node_sets.contains(name) {
                        d.progress.unplaced = vec![e.clone()];
                    }
                }
                continue;
            }
        };
        for (name, d) in decisions.iter_mut() {
            let Some(set) = obs.sets.get(name).filter(|_| p.node_sets.contains(name)) else {
                continue;
            };
            let placed = blocks::place(set, &p, labels, view);
            d.progress.done &= placed.registering.is_empty();
            d.actions.extend(placed.actions);
            d.progress.unplaced = placed.unplaced;
        }
    }
}

/// Adds the maintenance reservations due (NodeSets that wait for a window), and says which one
/// holds each NodeSet's workers. Reservations that could not be read leave it to a later pass.
/// Where slurmctld's sidecar makes them, those asked of it count as made.
fn reserve_for_windows(
    c: &ClusterFile,
    obs: &Observation,
    decisions: &mut BTreeMap<String, Decision>,
) {
    let windowed = c
        .spec
        .node_sets
        .iter()
        .any(|n| n.update.window != WindowMode::None);
    let (true, Ok(_), Ok(existing)) = (windowed, &obs.slurm, &obs.reservations) else {
        return;
    };
    let sidecar = c
        .spec
        .reserves_through_sidecar()
        .then(|| crate::render::names::Names::new(c).maintenance());
    let timing = window::timing(&c.spec.policy.maintenance_windows, obs.now);
    for (name, d) in decisions.iter_mut() {
        let steps = windows::steps(&d.progress, &timing, &existing.all, sidecar.as_deref());
        let held = existing
            .all
            .iter()
            .position(|r| r.name == windows::name(name));
        if let (Some(w), Some(i)) = (d.progress.window.as_mut(), held) {
            let r = &existing.all[i];
            let mut note = format!("{} on {}", r.name, r.nodes.join(", "));
            if let (true, Some(cm)) = (i >= existing.in_slurm, &sidecar) {
                note += &format!(
                    " (asked of slurmctld's sidecar through ConfigMap {cm}; not in Slurm yet)"
                );
            }
            w.reservation = Some(note);
        }
        d.actions.extend(steps);
    }
}

/// Whether the maintenance windows let NodeSet N drain workers now.
fn window_gate(
    n: Option<&crate::cluster::types::NodeSet>,
    t: &window::Timing,
    ignore: bool,
) -> decide::WindowGate {
    match n.map(|n| n.update.window) {
        _ if ignore => decide::WindowGate::Open,
        Some(_) if t.open.is_some() => decide::WindowGate::Open,
        Some(WindowMode::Required) => decide::WindowGate::Closed {
            idle_may_roll: false,
        },
        Some(WindowMode::Preferred) => decide::WindowGate::Closed {
            idle_may_roll: true,
        },
        _ => decide::WindowGate::Open,
    }
}

/// Every observed NodeSet's decision, by name.
fn decide_all(
    c: &ClusterFile,
    obs: &Observation,
    grace: i64,
    scope: &Scope,
) -> BTreeMap<String, Decision> {
    let windows = &c.spec.policy.maintenance_windows;
    let timing = window::timing(windows, obs.now);
    let zone = timing
        .next
        .and_then(|n| window::zone_of(windows, n, obs.now));
    obs.sets
        .values()
        .filter(|s| scope.includes(&s.name))
        .map(|s| {
            let spec = c.spec.node_sets.iter().find(|n| n.name == s.name);
            let (want, placed) = match spec {
                // `slurmops rollout`: a StatefulSet keeps its live replicas (apply's to change).
                Some(n) if scope.moves == Moves::Roll && !s.managed && n.managed() == s.managed => {
                    (Want::Current, None)
                }
                // A NodeSet that changed between a count and perNode: the old kind's workers go.
                Some(n) if n.managed() != s.managed => (Want::Removed, None),
                Some(n) if s.managed && n.replicas.per_node() => per_node_want(s, obs),
                Some(n) if s.managed => count_want(s, n, obs),
                Some(n) if n.autoscale.is_some() => (Want::Current, None),
                Some(n) => (Want::Replicas(n.replicas.count()), None),
                None => (Want::Removed, None),
            };
            let mut s = s.clone();
            if let Want::Only { keep, .. } = &want {
                s.replicas = keep.len() as u32;
            }
            let mut p = spec.map_or(
                Policy {
                    registration_grace: grace,
                    ..Policy::default()
                },
                |n| policy(n, grace, s.replicas),
            );
            p.window = window_gate(spec, &timing, scope.ignore_window);
            let validation = spec.and_then(|n| Validation::of(&c.spec, n));
            let mut d = match &obs.slurm {
                Ok(view) => gated(&s, &want, &mut p, validation.as_ref(), view, obs.now),
                Err(_) => unknown(&s, &want),
            };
            if let Some(w) = d.progress.window.as_mut() {
                (w.opens, w.closes) = timing.next.unzip();
                w.zone = zone.map(str::to_string);
            }
            if let Some(placed) = placed {
                d.progress.unplaced.extend(placed.unplaced);
                d.progress.done &= placed.create.is_empty();
                d.progress
                    .in_flight
                    .extend(placed.create.iter().map(|(pod, _)| pod.clone()));
                d.create = placed.create;
            }
            (s.name.clone(), d)
        })
        .collect()
}

/// Decides SET under its canary (VALIDATION; without one a failed verdict still halts): the
/// canary's steps (submit, resume, hold) go first.
pub(super) fn gated(
    set: &SetView,
    want: &Want,
    p: &mut Policy,
    validation: Option<&Validation>,
    view: &SlurmView,
    now: i64,
) -> Decision {
    let c = match validation {
        Some(v) => match (canary::assess(v, set, view, now), &view.jobs_error) {
            // Without the job queue a validation job can be neither judged nor submitted (it
            // may run already): the rollout holds where it is, and says why.
            (c, Some(why)) if c.gate != canary::Gate::Open => canary::Canaried {
                gate: match canary::recorded_gate(set) {
                    canary::Gate::Halt => canary::Gate::Halt,
                    _ => canary::Gate::Limit(0),
                },
                progress: c.progress.map(|mut p| {
                    p.error = Some(format!("waiting: Slurm's job queue is unknown ({why})"));
                    p
                }),
                ..canary::Canaried::default()
            },
            (c, _) => c,
        },
        None => canary::Canaried {
            gate: canary::recorded_gate(set),
            ..canary::Canaried::default()
        },
    };
    p.gate = c.gate;
    let mut d = decide::decide(set, want, p, view, now);
    if c.gate != canary::Gate::Open {
        d.progress.done = false;
    }
    let mut actions = c.actions;
    actions.append(&mut d.actions);
    d.actions = actions;
    d.record = c.record;
    d.progress.canary = c.progress;
    d
}

/// What a perNode NodeSet wants: the workers of its matching nodes. Without the nodes or Slurm
/// (whose node names new workers must not take) nothing is made and nothing leaves.
fn per_node_want(s: &SetView, obs: &Observation) -> (Want, Option<per_node::Placement>) {
    let spec = obs
        .templates
        .get(&s.name)
        .and_then(|t| t.template.as_ref())
        .and_then(|t| t.spec.as_ref());
    match (&obs.nodes, &obs.slurm, spec) {
        (Ok(nodes), Ok(slurm), Some(spec)) => {
            let names = per_node::taken_names(slurm);
            let placed = per_node::place(s, spec, nodes, &names);
            let keep = placed.keep.clone();
            let why = DrainReason::NodeLeft;
            (Want::Only { keep, why }, Some(placed))
        }
        (Err(e), _, _) => (
            Want::Current,
            Some(per_node::Placement {
                unplaced: vec![e.clone()],
                ..per_node::Placement::default()
            }),
        ),
        _ => (Want::Current, None),
    }
}

/// What a NodeSet of a count whose pods slurmops makes wants: its count (autoscale's, when it set
/// one) of workers, busy ones kept first. Without Slurm nothing is made and nothing leaves.
fn count_want(
    s: &SetView,
    n: &crate::cluster::types::NodeSet,
    obs: &Observation,
) -> (Want, Option<per_node::Placement>) {
    let Ok(slurm) = &obs.slurm else {
        return (Want::Current, None);
    };
    let count = n
        .autoscale
        .as_ref()
        .and_then(|_| obs.templates.get(&s.name))
        .and_then(per_node::managed_replicas)
        .unwrap_or(n.replicas.count());
    let placed = per_node::keep_count(s, count, slurm);
    let keep = placed.keep.clone();
    let why = DrainReason::ScaleIn;
    (Want::Only { keep, why }, Some(placed))
}

/// Slurm's state is unknown: nothing moves, and nothing that could remove a worker is applied.
fn unknown(s: &SetView, want: &Want) -> Decision {
    let leaving: Vec<String> = s
        .workers
        .iter()
        .filter(|w| want.leaves(w))
        .map(|w| w.name.clone())
        .collect();
    let removed = *want == Want::Removed;
    Decision {
        hold_replicas: (!leaving.is_empty() && !removed && !s.managed).then_some(s.replicas),
        keep: !leaving.is_empty() && removed,
        progress: Progress {
            node_set: s.name.clone(),
            revision: s.update_revision.clone().unwrap_or_default(),
            replicas: s.replicas,
            leaving,
            ..Progress::default()
        },
        ..Decision::default()
    }
}

#[cfg(test)]
mod tests;
