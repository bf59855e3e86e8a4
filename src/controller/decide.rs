//! The pure heart of a pass: from what was observed (a NodeSet's StatefulSet and pods, Slurm's
//! nodes and jobs) to the steps that are safe **now**, and a description of what waits and why.
//! No IO, no clock (the caller passes `now`), deterministic, table-tested.
//!
//! Nothing here remembers anything: whether a worker is being replaced is read from the cluster
//! (its pod's revision) and from Slurm (a drain reason slurmops set, and since when). That is what
//! lets a restarted daemon, or a new leader, carry on exactly where the last one stopped.

mod model;
mod requeue;
mod slurm_view;

use super::gate::Gate;
use crate::rollout::{Candidate, order};
use crate::slurm::Node;
pub use crate::vocab::DrainReason;

pub use self::model::{
    Action, Decision, Holder, Omitted, Policy, Progress, REGISTRATION_GRACE, RequeueRule, SetView,
    Waiting, Want, WindowGate, WindowWait, Worker,
};
pub use self::requeue::{requeue_now, requeued_words};
pub use self::slurm_view::SlurmView;

/// A drain slurmops set for a rollout, scale-in, removal or a failed canary (not a cordon,
/// autoscale, an active check or a hand drain through `slurmops slurm drain`): the controller may
/// resume it once the worker is wanted again.
pub fn controller_drain(n: &Node) -> bool {
    n.state.has("DRAIN") && DrainReason::parse(&n.reason).is_some_and(|r| r.is_controllers())
}

/// The workers of a NodeSet in ordinal order.
fn sorted(set: &SetView) -> Vec<&Worker> {
    let mut ws: Vec<&Worker> = set.workers.iter().collect();
    ws.sort_by_key(|w| (w.ordinal, w.name.clone()));
    ws
}

/// Decides the NodeSet's next steps. NOW is UNIX seconds.
pub fn decide(
    set: &SetView,
    want: &Want,
    policy: &Policy,
    slurm: &SlurmView,
    now: i64,
) -> Decision {
    let mut d = Decision {
        progress: Progress {
            node_set: set.name.clone(),
            revision: set.update_revision.clone().unwrap_or_default(),
            replicas: set.replicas,
            ..Progress::default()
        },
        ..Decision::default()
    };
    let target = match want {
        Want::Replicas(n) => Some(*n),
        Want::Removed => Some(0),
        Want::Current => None,
        Want::Only { keep, .. } => Some(keep.len() as u32),
    };
    let why = match want {
        Want::Removed => DrainReason::Removed,
        Want::Only { why, .. } => why.clone(),
        _ => DrainReason::ScaleIn,
    };
    let (mut leaving, staying): (Vec<&Worker>, Vec<&Worker>) =
        sorted(set).into_iter().partition(|w| want.leaves(w));
    // The highest ordinals first, as the StatefulSet removes them.
    leaving.reverse();
    let all_gone = leave(set, &leaving, &why, slurm, &mut d);
    if !all_gone || (set.managed && !leaving.is_empty()) {
        match want {
            Want::Removed => d.keep = true,
            // slurmops deletes a perNode NodeSet's pods itself: no StatefulSet to hold.
            _ if set.managed => {}
            _ => d.hold_replicas = Some(set.replicas),
        }
    }
    let expected = set.replicas.min(target.unwrap_or(set.replicas));
    match (&set.update_revision, policy.gate) {
        // A failed canary: nothing rolls, the updated workers are only counted.
        (Some(rev), Gate::Halt) => {
            d.progress.updated = staying
                .iter()
                .filter(|w| w.revision == *rev && w.ready && !w.deleting)
                .count() as u32;
        }
        (Some(rev), _) => roll(&staying, expected, rev, policy, slurm, now, &mut d),
        (None, _) => {}
    }
    let settled = staying.len() as u32 == expected && d.progress.updated == expected;
    d.progress.done = set.update_revision.is_some()
        && d.actions.is_empty()
        && d.progress.waiting.is_empty()
        && d.progress.in_flight.is_empty()
        && leaving.is_empty()
        && settled;
    d
}

/// Workers that leave: drain them; true when every one is drained or unknown to Slurm (nothing
/// can run there), so the StatefulSet may lose them. slurmops deletes a drained worker of its own
/// (perNode) pods itself.
fn leave(
    set: &SetView,
    leaving: &[&Worker],
    why: &DrainReason,
    slurm: &SlurmView,
    d: &mut Decision,
) -> bool {
    let mut all = true;
    for w in leaving {
        d.progress.leaving.push(w.name.clone());
        let gone = slurm
            .nodes
            .get(&w.name)
            .is_none_or(|n| n.state.is_drained());
        if set.managed && gone && !w.deleting {
            d.actions.push(delete(w, false));
        }
        let Some(n) = slurm.nodes.get(&w.name) else {
            continue;
        };
        if n.state.is_drained() {
            continue;
        }
        all = false;
        if !n.state.has("DRAIN") {
            d.actions.push(Action::Drain {
                node: w.name.clone(),
                reason: why.clone(),
            });
        }
        d.progress.waiting.push(waiting(&w.name, why, n, slurm));
    }
    all
}

fn waiting(node: &str, why: &DrainReason, n: &Node, slurm: &SlurmView) -> Waiting {
    Waiting {
        node: node.to_string(),
        why: why.words(),
        jobs: slurm.jobs_on(node).iter().map(holder).collect(),
        since: n
            .state
            .has("DRAIN")
            .then_some(n.reason_changed_at)
            .flatten(),
    }
}

/// A job as a waiting worker's holder.
pub(crate) fn holder(j: &crate::slurm::Job) -> Holder {
    Holder {
        id: j.id,
        user: j.user.to_string(),
        start: j.start_time,
        end: j.end_time,
    }
}

/// The rollout of the staying workers onto REV.
fn roll(
    staying: &[&Worker],
    expected: u32,
    rev: &str,
    p: &Policy,
    slurm: &SlurmView,
    now: i64,
    d: &mut Decision,
) {
    // A missing pod is out, and comes back on REV (the StatefulSet recreates deleted pods from
    // its update revision).
    let missing = (expected as usize).saturating_sub(staying.len());
    let (out, candidates) = take_stock(staying, rev, p, slurm, now, d);
    drain_next(&candidates, missing + out, missing, p, d);
}

/// Where each staying worker stands against REV: deleted ones are in flight, updated ones are
/// counted (`updated`), outdated ones unknown to Slurm or already draining go on their way
/// (`replace_unregistered`, `follow_drain`). Returns how many are out of service and the
/// outdated workers in service, which the rollout may drain next.
fn take_stock(
    staying: &[&Worker],
    rev: &str,
    p: &Policy,
    slurm: &SlurmView,
    now: i64,
    d: &mut Decision,
) -> (usize, Vec<Candidate>) {
    let mut out = 0;
    let mut candidates = Vec::new();
    for w in staying {
        let node = slurm.nodes.get(&w.name);
        if w.deleting {
            out += 1;
            d.progress.in_flight.push(w.name.clone());
            continue;
        }
        if w.revision == *rev {
            updated(w, node, matches!(p.gate, Gate::Limit(_)), d);
            if !w.ready {
                out += 1;
            }
            continue;
        }
        // Outdated.
        let Some(n) = node else {
            if replace_unregistered(w, p, slurm, now, d) {
                out += 1;
            }
            continue;
        };
        if n.state.has("DRAIN") {
            out += 1;
            follow_drain(w, n, p, slurm, now, d);
            continue;
        }
        if !w.ready {
            out += 1;
        }
        candidates.push(Candidate {
            pod: w.name.clone(),
            ready: w.ready,
            jobs: slurm.jobs_on(&w.name),
        });
    }
    (out, candidates)
}

/// An outdated worker unknown to Slurm: nothing can run there when slurmd is not up, or when it
/// never registered within the grace, so its pod is deleted (true: it is out).
fn replace_unregistered(
    w: &Worker,
    p: &Policy,
    slurm: &SlurmView,
    now: i64,
    d: &mut Decision,
) -> bool {
    let age = w.created.map_or(0, |c| now - c);
    let jobs = slurm.jobs_on(&w.name);
    if !jobs.is_empty() || slurm.jobs_error.is_some() {
        // Unknown as a node, yet a job holds it (Slurm's answers disagree), or the jobs
        // could not be read: wait.
        return false;
    }
    if !w.ready || age > p.registration_grace {
        d.progress.in_flight.push(w.name.clone());
        d.actions.push(delete(w, false));
        return true;
    }
    false
}

/// An outdated worker whose node N drains (in flight): its pod is deleted once drained, or
/// forced past the drain timeout; until then it waits for its jobs.
fn follow_drain(w: &Worker, n: &Node, p: &Policy, slurm: &SlurmView, now: i64, d: &mut Decision) {
    d.progress.in_flight.push(w.name.clone());
    if n.state.is_drained() {
        if DrainReason::parse(&n.reason).is_none() {
            // Someone else's drain: said once (drain leaves their reason alone) before the
            // pod goes.
            d.actions.push(Action::Drain {
                node: w.name.clone(),
                reason: DrainReason::Rollout,
            });
        }
        d.actions.push(delete(w, false));
    } else if timed_out(n, p, now) {
        d.actions.push(delete(w, true));
    } else {
        if DrainReason::parse(&n.reason) == Some(DrainReason::Rollout)
            && let Some(jobs) = requeue_now(n, p, slurm, now)
        {
            d.actions.push(Action::Requeue {
                node: w.name.clone(),
                jobs,
            });
        }
        d.progress
            .waiting
            .push(waiting(&w.name, &DrainReason::Rollout, n, slurm));
    }
}

/// Drains the next CANDIDATES for the rollout, in the rollout's order, while `maxUnavailable`
/// leaves room beside the OUT workers already out of service (MISSING of them pods not
/// recreated yet), the canary lets more workers leave the old revision and the maintenance
/// window lets them drain (those it holds back are listed as waiting for it).
fn drain_next(candidates: &[Candidate], out: usize, missing: usize, p: &Policy, d: &mut Decision) {
    let mut room = (p.max_unavailable.max(1) as usize).saturating_sub(out);
    // Under a canary, at most that many workers leave the old revision until it is validated:
    // those on REV, in flight, and deleted ones not recreated yet.
    let mut canary_room = match p.gate {
        Gate::Limit(n) => (n as usize)
            .saturating_sub(d.progress.updated as usize + d.progress.in_flight.len() + missing),
        _ => usize::MAX,
    };
    for pod in order(candidates) {
        if canary_room == 0 {
            break;
        }
        let c = candidates.iter().find(|c| c.pod == pod);
        let ready = c.is_some_and(|c| c.ready);
        let may = match p.window {
            WindowGate::Open => true,
            WindowGate::Closed { idle_may_roll } => {
                idle_may_roll && c.is_some_and(|c| c.jobs.is_empty())
            }
        };
        if !may {
            d.progress
                .window
                .get_or_insert_with(WindowWait::default)
                .workers
                .push(pod);
            continue;
        }
        canary_room -= 1;
        // A worker that is not Ready is out already: draining it costs no room.
        if ready {
            if room == 0 {
                continue;
            }
            room -= 1;
        }
        d.progress.in_flight.push(pod.clone());
        d.actions.push(Action::Drain {
            node: pod,
            reason: DrainReason::Rollout,
        });
    }
}

/// An updated worker: counted when Ready; a drain the controller set is resumed once its slurmd
/// answers (replaced and registered, or a change that was reverted before its pod went). HOLD:
/// a canary not validated yet keeps it (the canary resumes it once its job is submitted).
fn updated(w: &Worker, node: Option<&Node>, hold: bool, d: &mut Decision) {
    if !w.ready {
        d.progress.in_flight.push(w.name.clone());
        return;
    }
    let Some(n) = node else {
        d.progress.updated += 1;
        return;
    };
    if controller_drain(n) {
        if !hold && !n.state.has("NOT_RESPONDING") {
            d.actions.push(Action::Resume {
                node: w.name.clone(),
            });
        }
        d.progress.in_flight.push(w.name.clone());
        return;
    }
    d.progress.updated += 1;
}

fn timed_out(n: &Node, p: &Policy, now: i64) -> bool {
    p.force
        && p.drain_timeout
            .zip(n.reason_changed_at)
            .is_some_and(|(t, since)| now - since > t)
}

fn delete(w: &Worker, forced: bool) -> Action {
    Action::Delete {
        pod: w.name.clone(),
        uid: w.uid.clone(),
        forced,
    }
}

#[cfg(test)]
pub(crate) mod tests;
