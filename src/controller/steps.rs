//! The pass: its one list of steps, in order, each a core file or a feature's folder.
//!
//! ```text
//! observe      look: observe.rs over watch.rs (the caches); an empty Slurm answer distrusted
//! decrees      features/decrees/: a command's first pass only (`rollout --resume`, `--ignore-window`)
//! decide       decisions.rs: decide.rs per NodeSet and the features' pure decisions
//!              (features/per_node, canary, windows, blocks, checks)
//! apply        applying.rs: server-side apply and prune (held back by the decisions), accounting
//! act          carry.rs: each NodeSet's steps through act.rs, pods made (pods.rs), canary
//!              verdicts recorded (features/canary/act.rs)
//! upkeep       upkeep.rs: worker sync (features/sync/) and autoscale (features/autoscale/),
//!              decided on the same observation, then written
//! controllers  features/controllers_roll/: one step of the controllers' roll behind one address
//! return       outcome.rs: Next, Events, progress
//! ```
//!
//! `preview` runs the same observe and decide and acts on nothing; a pass without Slurm applies
//! (refusing what could kill a job), shows the NodeSets from Kubernetes alone and rolls the
//! controllers.

use super::decisions::{self, decide_pass};
use super::features::controllers_roll;
use super::features::decrees;
use super::observation::Observation;
use super::observation::SlurmUnknown;
use super::observe::{self, Needs, Scope, observe};
use super::outcome::{NextBuilder, Outcome, Phases};
use super::preview::Preview;
use super::{Env, PassError, Target, applying, carry, fenced, kube_err, kube_only, upkeep};
use crate::accounting::SlurmAccounts;
use crate::apply::{self, NoSlurm};
use crate::cluster::ClusterFile;
use crate::slurm::SlurmNodes;

/// One pass for T.
pub async fn pass<S: SlurmNodes + SlurmAccounts>(
    env: &Env<'_, S>,
    t: &Target<'_>,
) -> Result<Outcome, PassError> {
    let c = t.c;
    let Some(slurm) = env.slurm else {
        return pass_without_slurm(env, t).await;
    };
    let traffic = slurm.traffic();
    let started = std::time::Instant::now();
    let mut obs = look(env, t, slurm, needs(t)).await?;
    if let Some(d) = t.decrees {
        decrees::carry(env, c, t.scope.only.as_ref(), d, &mut obs).await?;
    }
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
    let mut next = NextBuilder::default();
    let changed =
        applying::apply_phase(env, t, slurm, &obs, &decisions, &mut next, &mut out).await?;
    phases.apply = applied.elapsed();
    let acted = std::time::Instant::now();
    applying::settle(&mut decisions, &changed);
    let upgrading = out.applied.as_ref().is_some_and(|r| !r.held.is_empty());
    let mut all_done = out.slurm_error.is_none() && !upgrading && !obs.nodes_listing;
    all_done &= carry::act_phase(env, c, slurm, &obs, decisions, &mut next, &mut out).await?;
    phases.decide += upkeep_phase(env, t, slurm, &obs, &mut out).await?;
    all_done &= roll_controllers(env, t, &mut out, &mut next).await?;
    // A NodeSet of cluster.yaml whose StatefulSet is not observed yet is not done.
    all_done &= c
        .spec
        .node_sets
        .iter()
        .filter(|n| t.scope.includes(&n.name))
        .all(|n| obs.sets.contains_key(&n.name));
    if out.slurm_error.is_some() {
        show_undecided(env, t, &mut out).await?;
    }
    out.next = next.finish(all_done && out.events.is_empty());
    phases.act = acted.elapsed();
    out.phases = phases;
    out.slurm_traffic = slurm.traffic() - traffic;
    out.sets = obs.sets;
    out.slurm = obs.slurm.ok();
    Ok(out)
}

/// The accounting step of C's pass alone, the objects not applied again: a daemon retrying one
/// that met slurmrestd or slurmdbd not up. None without Slurm.
pub async fn accounting_again<S: SlurmAccounts>(
    env: &Env<'_, S>,
    c: &ClusterFile,
) -> Result<Option<apply::Report>, PassError> {
    let Some(slurm) = env.slurm else {
        return Ok(None);
    };
    applying::accounting_alone(env, slurm, c).await.map(Some)
}

/// A pass without Slurm: nothing can be known drained, so apply refuses scale-ins and prunes
/// over workers, and no worker is replaced.
async fn pass_without_slurm<S>(env: &Env<'_, S>, t: &Target<'_>) -> Result<Outcome, PassError> {
    let c = t.c;
    let mut out = Outcome::default();
    if let Some(opts) = t.apply {
        fenced(env)?;
        out.applied = Some(apply::apply(env.cluster, c, t.text, t.rendered, opts, &NoSlurm).await?);
    }
    // Every NodeSet, from Kubernetes alone, so the status and the view show them meanwhile.
    let live = kube_only::observe(&env.cluster.client, c)
        .await
        .map_err(kube_err("the NodeSets' workloads"))?;
    out.progress = kube_only::progress(c, &live);
    let mut next = NextBuilder::default();
    let done = roll_controllers(env, t, &mut out, &mut next).await?;
    out.next = next.finish(done);
    Ok(out)
}

/// Controllers behind one address: the next step of their roll (`features/controllers_roll/`), in every pass
/// over the whole cluster that moves anything (not `sync`, `autoscale` or a NodeSet's
/// `rollout`). It reads Kubernetes only, and no watch follows the controllers: while their roll
/// goes on, the next pass comes within ROLL_RECHECK seconds. True when nothing is left to do for
/// them.
async fn roll_controllers<S>(
    env: &Env<'_, S>,
    t: &Target<'_>,
    out: &mut Outcome,
    next: &mut NextBuilder,
) -> Result<bool, PassError> {
    if t.scope.only.is_some() || t.scope.moves == decisions::Moves::Nothing {
        return Ok(true);
    }
    let Some(view) = controllers_roll::observe(&env.cluster.client, t.c).await? else {
        return Ok(true);
    };
    let roll = controllers_roll::decide(&view);
    if let Some(e) = controllers_roll::act(&env.cluster.client, t.c, &roll, env.fence).await? {
        let set = crate::render::names::Names::new(t.c).controller();
        env.observer.emit(&set, &e);
        out.events.push((set, e));
    }
    let done = roll == controllers_roll::Roll::Done;
    if !done {
        next.at(k8s_openapi::jiff::Timestamp::now().as_second() + controllers_roll::ROLL_RECHECK);
    }
    out.controllers = Some(roll);
    Ok(done)
}

/// Worker sync and autoscale: decided on the pass's observation, written behind the fence (only
/// when Slurm answered). Returns the time their decisions took.
async fn upkeep_phase<S: SlurmNodes>(
    env: &Env<'_, S>,
    t: &Target<'_>,
    slurm: &S,
    obs: &Observation,
    out: &mut Outcome,
) -> Result<std::time::Duration, PassError> {
    let mut took = std::time::Duration::ZERO;
    if out.slurm_error.is_none() {
        let decided = std::time::Instant::now();
        let u = upkeep::decide(t.c, obs, env.registration_grace, t.scope.keep);
        took = decided.elapsed();
        if !u.is_empty() {
            match upkeep::act(env.cluster, t.c, slurm, &u, env.fence, env.observer).await {
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
    Ok(took)
}

/// Slurm does not answer (a new cluster's first passes): a NodeSet nothing was decided for (its
/// workload applied by this very pass, its perNode workers not made without Slurm) still shows,
/// from Kubernetes alone.
async fn show_undecided<S>(
    env: &Env<'_, S>,
    t: &Target<'_>,
    out: &mut Outcome,
) -> Result<(), PassError> {
    let c = t.c;
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
    let controllers = controllers_roll::observe(&env.cluster.client, t.c)
        .await?
        .map(|v| controllers_roll::decide(&v));
    Ok(Preview {
        decisions,
        upkeep,
        observation,
        controllers,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::controller::decide::{self, SetView, SlurmView};

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
