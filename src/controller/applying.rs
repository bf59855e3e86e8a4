//! The apply phase of a pass: the rendered objects applied with what the decisions hold back (a
//! scale-in's replicas, a removed NodeSet's undrained workers), then Slurm's accounting. Which
//! workloads it changed is handed back, so the decisions taken on them wait for the next pass.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::decide::{Decision, SlurmView};
use super::observation::Observation;
use super::outcome::{NextBuilder, Outcome};
use super::{Env, PassError, Target, fenced};
use crate::accounting::SlurmAccounts;
use crate::apply::{self, NoSlurm, Options, PruneGuard, Report};
use crate::cluster::ClusterFile;
use crate::render::Rendered;
use crate::slurm::SlurmError;

/// Applies T when it applies (what DECISIONS hold back kept as it is live) and reconciles
/// accounting: the report goes to OUT, what must be applied again to NEXT; returns the NodeSets
/// whose workload changed.
pub(super) async fn apply_phase<S: SlurmAccounts>(
    env: &Env<'_, S>,
    t: &Target<'_>,
    slurm: &S,
    obs: &Observation,
    decisions: &BTreeMap<String, Decision>,
    next: &mut NextBuilder,
    out: &mut Outcome,
) -> Result<BTreeSet<String>, PassError> {
    let c = t.c;
    let Some(opts) = t.apply else {
        return Ok(BTreeSet::new());
    };
    fenced(env)?;
    // Read before apply records the new revision: it tells hand edits from git changes.
    let last = match c.spec.accounting.enabled {
        true => apply::applyset::last_applied(env.cluster, c)
            .await
            .ok()
            .flatten(),
        false => None,
    };
    let rendered = held(t.rendered, decisions);
    let mut rep = apply_held(env, t, &rendered, opts, obs, decisions).await?;
    // A Slurm upgrade holds later components back, a maintenance window the control plane:
    // apply again on the next pass, at the latest when the window opens.
    next.reapply |= !rep.held.is_empty();
    if let Some(opens) = rep.window_opens {
        next.at(opens);
    }
    let changed = changed_node_sets(rep.updated.iter().chain(&rep.created).chain(&rep.recreated));
    accounting(env, slurm, c, last.as_ref(), &mut rep).await?;
    out.applied = Some(rep);
    Ok(changed)
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
            // slurmrestd or slurmdbd not up (a new cluster starting, a restart): the daemon runs
            // this step again as soon as they answer. Not what waiting does not heal.
            rep.accounting_pending = !matches!(
                e,
                SlurmError::Config(_)
                    | SlurmError::NoDataParser { .. }
                    | SlurmError::Parse { .. }
                    | SlurmError::TooLarge { .. }
            );
            rep.accounting_error = Some(format!("cannot read slurmdbd, nothing changed: {e}"))
        }
    }
    Ok(())
}

/// The accounting step alone, for a driver retrying one that met slurmrestd or slurmdbd not up:
/// the objects are not applied again.
pub(super) async fn accounting_alone<S: SlurmAccounts>(
    env: &Env<'_, S>,
    slurm: &S,
    c: &ClusterFile,
) -> Result<Report, PassError> {
    let last = apply::applyset::last_applied(env.cluster, c)
        .await
        .ok()
        .flatten();
    let mut rep = Report::default();
    accounting(env, slurm, c, last.as_ref(), &mut rep).await?;
    Ok(rep)
}

/// The NodeSets whose workload (StatefulSet, or PodTemplate of slurmops-made pods) IDS name.
pub(super) fn changed_node_sets<'a>(ids: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
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
pub(super) fn settle(decisions: &mut BTreeMap<String, Decision>, changed: &BTreeSet<String>) {
    for (name, d) in decisions.iter_mut() {
        if changed.contains(name) {
            d.progress.done = false;
            d.actions.clear();
            d.create.clear();
        }
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
/// a later pass, once their leaving workers are drained). R itself when no scale-in is held: a
/// copy of every rendered object (14 MiB at 500 NodeSets) lived through each apply for nothing.
pub(super) fn held<'r>(
    r: &'r Rendered,
    decisions: &BTreeMap<String, Decision>,
) -> Cow<'r, Rendered> {
    if decisions.values().all(|d| d.hold_replicas.is_none()) {
        return Cow::Borrowed(r);
    }
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
    Cow::Owned(r)
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
