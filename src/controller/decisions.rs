//! Every NodeSet's decision in a pass, pure: what each wants (a count, the workers of matching
//! nodes, autoscale's count, removal), under its rollout policy, its canary and the maintenance
//! windows; and, with Slurm's state unknown, the decision that moves nothing.

use std::collections::BTreeMap;

use super::decide::{self, Decision, Policy, Progress, SetView, SlurmView, Want};
use super::observe::Observation;
use super::{canary, per_node};
use crate::spec::ClusterFile;
use crate::spec::canary::Validation;
use crate::spec::window::{self, WindowMode};

/// The NodeSet's rollout policy from cluster.yaml.
/// LIVE: the workers a perNode NodeSet wants now (its percentages are of those).
pub fn policy(ns: &crate::spec::types::NodeSet, registration_grace: i64, live: u32) -> Policy {
    let u = &ns.update;
    Policy {
        max_unavailable: ns.max_unavailable(live),
        drain_timeout: Some(u.drain_timeout.as_secs() as i64),
        force: matches!(u.on_timeout, crate::spec::types::OnTimeout::Force),
        registration_grace,
        gate: canary::Gate::Open,
        window: decide::WindowGate::Open,
    }
}

/// Whether the maintenance windows let NodeSet N drain workers now.
fn window_gate(n: Option<&crate::spec::types::NodeSet>, t: &window::Timing) -> decide::WindowGate {
    match n.map(|n| n.update.window) {
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
pub(super) fn decide_all(
    c: &ClusterFile,
    obs: &Observation,
    grace: i64,
) -> BTreeMap<String, Decision> {
    let windows = &c.spec.policy.maintenance_windows;
    let timing = window::timing(windows, obs.now);
    let zone = timing
        .next
        .and_then(|n| window::zone_of(windows, n, obs.now));
    obs.sets
        .values()
        .map(|s| {
            let spec = c.spec.node_sets.iter().find(|n| n.name == s.name);
            let (want, placed) = match spec {
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
            p.window = window_gate(spec, &timing);
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
pub(crate) fn gated(
    set: &SetView,
    want: &Want,
    p: &mut Policy,
    validation: Option<&Validation>,
    view: &SlurmView,
    now: i64,
) -> Decision {
    let c = match validation {
        Some(v) => canary::assess(v, set, view, now),
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
            let names = slurm.nodes.keys().cloned().collect();
            let placed = per_node::place(s, spec, nodes, &names);
            let keep = placed.keep.clone();
            let why = decide::REASON_NODE_LEFT;
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
    n: &crate::spec::types::NodeSet,
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
    let why = decide::REASON_SCALE_IN;
    (Want::Only { keep, why }, Some(placed))
}

/// Slurm's state is unknown: nothing moves, and nothing that could remove a worker is applied.
pub(super) fn unknown(s: &SetView, want: &Want) -> Decision {
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
