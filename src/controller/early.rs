//! The pass of a daemon whose watches are still making their first listing of the workers (a
//! restart, an upgrade of the daemon or a new leader: at 10,000 workers the pods' listing takes
//! tens of seconds). The pods are not known yet, so nothing that needs them is decided: no
//! rollout step, no drain, no resume, no worker sync, no scale-in. One decision needs no pod and
//! is safe on what is known: autoscale's **scale-out**, from the StatefulSets (listed first: one
//! per NodeSet) and Slurm alone — a NodeSet's worker `NAME-ORDINAL` is busy when Slurm says its
//! node runs jobs, exactly as the full pass reads it, and the pending jobs are the queue's demand
//! (the jobs read so far while a restarted daemon reads it job by job: a floor). The decisions are
//! `autoscale::decide`'s; a scale-in or hold it gives is not carried out here (the pass after the
//! listing decides with every pod). A NodeSet whose pods slurmops makes (its workers are its
//! pods, whatever their ordinals) waits for the listing too. Slurm's nodes are read by name,
//! only the autoscaled NodeSets' workers, while they are few ([`NODES_READ_BY_NAME`]): the
//! whole list is what the full pass reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;

use super::features::autoscale::{self, Decision};
use super::observe::{JobsNeed, Needs, read_slurm_with};
use super::outcome::Phases;
use super::upkeep::{self, Scale, Upkeep};
use super::{Env, PassError};
use crate::cluster::ClusterFile;
use crate::cluster::types::NodeSet;
use crate::slurm::{SlurmError, SlurmNodes};

/// What an early pass decided and wrote.
#[derive(Debug, Default)]
pub struct Early {
    /// The scale-outs decided (and written, unless a write failed: `error`).
    pub upkeep: Upkeep,
    pub events: Vec<(String, crate::rollout::Event)>,
    pub phases: Phases,
    pub slurm_traffic: crate::slurm::Traffic,
    /// Jobs the pass saw (-1: the queue was needed and not known).
    pub jobs: i64,
    /// Slurm could not be read, or a write failed: said, nothing else done.
    pub error: Option<String>,
}

/// The NodeSets of C an early pass may scale out: autoscaled, StatefulSet workers.
pub fn applies(c: &ClusterFile) -> bool {
    decided(c).next().is_some()
}

/// The NodeSets of C an early pass decides on: autoscaled, their workers a StatefulSet's.
fn decided(c: &ClusterFile) -> impl Iterator<Item = &NodeSet> {
    c.spec
        .node_sets
        .iter()
        .filter(|n| n.autoscale.is_some() && !n.managed())
}

/// Decides autoscale's scale-outs of C from STS (the listed StatefulSets) and SLURM, and carries
/// them out behind the fence. Never drains, resumes, deletes or lowers replicas.
pub async fn scale_out<S: SlurmNodes>(
    env: &Env<'_, S>,
    c: &ClusterFile,
    slurm: &S,
    sts: &[Arc<StatefulSet>],
) -> Result<Early, PassError> {
    let traffic = slurm.traffic();
    let started = std::time::Instant::now();
    let needs = Needs {
        jobs: JobsNeed::Always,
        ..Needs::default()
    };
    let read = async {
        let nodes = match nodes_to_read(c, sts) {
            Some(names) => nodes_named(slurm, &names).await?,
            None => slurm.all_nodes().await?,
        };
        read_slurm_with(slurm, nodes, |_| needs.jobs == JobsNeed::Always).await
    };
    let view = match read.await {
        Ok(v) => v,
        Err(e) => {
            return Ok(Early {
                error: Some(e.to_string()),
                phases: Phases {
                    observe_slurm: started.elapsed(),
                    ..Phases::default()
                },
                slurm_traffic: slurm.traffic() - traffic,
                ..Early::default()
            });
        }
    };
    let mut phases = Phases {
        observe_slurm: started.elapsed(),
        ..Phases::default()
    };
    let decided = std::time::Instant::now();
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let u = decide(c, sts, &view, now);
    phases.decide = decided.elapsed();
    let jobs = match view.jobs_error {
        Some(_) if view.pending_unread.is_none() => -1,
        _ => view.jobs().len() as i64,
    };
    let mut early = Early {
        jobs,
        ..Early::default()
    };
    let acted = std::time::Instant::now();
    if !u.is_empty() {
        super::fenced(env)?;
        match upkeep::act(env.cluster, c, slurm, &u, env.fence, env.observer).await {
            Ok(events) => early.events = events,
            Err(PassError::Fenced) => return Err(PassError::Fenced),
            Err(e) => early.error = Some(e.to_string()),
        }
    }
    phases.act = acted.elapsed();
    early.upkeep = u;
    early.phases = phases;
    early.slurm_traffic = slurm.traffic() - traffic;
    Ok(early)
}

/// Nodes an early pass reads one by one, at most: past them it reads Slurm's whole node list.
/// At 10,000 workers that list is 23 MB, which slurmrestd took 8 s to build while the restarted
/// daemon's watches listed the pods (docs/benchmarks.md, 2026-12-02).
pub const NODES_READ_BY_NAME: usize = 32;

/// The Slurm nodes an early pass decides on, when few enough to read by name: the workers
/// `NAME-0..replicas` of each autoscaled StatefulSet NodeSet of C (STS: the listed
/// StatefulSets; a NodeSet without one has no worker). None: more than [`NODES_READ_BY_NAME`].
pub fn nodes_to_read(c: &ClusterFile, sts: &[Arc<StatefulSet>]) -> Option<Vec<String>> {
    let sets = super::observe::views(sts, &BTreeMap::new(), &[]);
    let mut names = Vec::new();
    for ns in decided(c) {
        let replicas = sets.get(&ns.name).map_or(0, |s| s.replicas) as usize;
        if names.len() + replicas > NODES_READ_BY_NAME {
            return None;
        }
        names.extend((0..replicas).map(|i| format!("{}-{i}", ns.name)));
    }
    Some(names)
}

/// NAMES as Slurm knows them, one request each; a node Slurm does not know is left out (a
/// worker not registered yet), as the whole list would leave it out. Slurm 24.11 answers a node
/// it does not know as it answers other failures, so there the client tells them apart by the
/// whole list (`Client::node`): a restart with an autoscaled worker not registered yet reads it.
async fn nodes_named<S: SlurmNodes>(
    slurm: &S,
    names: &[String],
) -> Result<crate::slurm::Nodes, SlurmError> {
    let mut nodes = BTreeMap::new();
    for name in names {
        match slurm.get(name).await {
            Ok(n) => {
                nodes.insert(name.clone(), n);
            }
            Err(SlurmError::UnknownNode(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Arc::new(nodes))
}

/// The scale-outs of C, pure: each autoscaled StatefulSet NodeSet of STS whose queue demand asks
/// for more workers than it has. Its workers are `NAME-0..replicas`, seen through Slurm's NODES
/// alone (no pod is known): busy, drained, idle or not registered as Slurm says.
pub fn decide(
    c: &ClusterFile,
    sts: &[Arc<StatefulSet>],
    view: &super::decide::SlurmView,
    now: i64,
) -> Upkeep {
    // Pending demand unknown (no job read at all): no NodeSet scales.
    if view.jobs_error.is_some() && view.pending_unread.is_none() {
        return Upkeep::default();
    }
    // The NodeSets as the full pass names them, without workers (no pod is known).
    let sets = super::observe::views(sts, &BTreeMap::new(), &[]);
    let seen = decided(c)
        .filter_map(|ns| {
            let r = sets.get(&ns.name)?.replicas;
            Some((
                ns,
                autoscale::run::seen_through_slurm(&ns.name, r, &view.nodes, now),
            ))
        })
        .collect();
    let scale = autoscale::run::decisions(c, view.jobs(), seen)
        .into_iter()
        .filter_map(|(ns, o, decision)| match decision {
            Decision::ScaleOut { to, .. } if to > o.replicas => Some(Scale {
                node_set: ns.name.clone(),
                managed: false,
                from: o.replicas,
                decision,
                drain: Vec::new(),
                to: Some(to),
                resume: Vec::new(),
            }),
            _ => None,
        })
        .collect();
    Upkeep {
        scale,
        ..Upkeep::default()
    }
}

#[cfg(test)]
mod tests;
