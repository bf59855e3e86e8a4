//! `rollout`: the controller's pass over the NodeSets of cluster.yaml (or one), looped until
//! every worker runs its workload's revision, each drained through Slurm first. An operator's
//! `--resume` and `--ignore-window` are decrees the first pass carries out and records.

use std::path::Path;

use super::{Error, cluster_at, connect, runtime};
use crate::controller::Decrees;
use crate::controller::drive::{Driven, Until};
use crate::render;
use crate::rollout::Observer;

/// Which NodeSets to roll, and how.
pub struct Request<'a> {
    pub path: &'a Path,
    pub kubeconfig: Option<&'a Path>,
    pub context: Option<&'a str>,
    /// Only this NodeSet (None: every NodeSet at once).
    pub node_set: Option<String>,
    pub decrees: Decrees,
}

/// What a rollout did.
pub struct Rolled {
    pub file: String,
    /// `spec.policy.suspend` is set: no worker was replaced.
    pub suspended: bool,
    /// The NodeSets rolled, in cluster.yaml's order.
    pub node_sets: Vec<String>,
    pub driven: Option<Driven>,
}

/// Rolls R's NodeSets through the Slurm client SLURM makes, once cluster.yaml has a NodeSet to
/// roll (OBSERVER hears each step).
pub fn rollout(
    r: &Request<'_>,
    slurm: impl FnOnce() -> Result<crate::slurm::Client, Error>,
    observer: &Observer,
) -> Result<Rolled, Error> {
    // Resuming past a NodeSet's canary rolls that NodeSet.
    let only = r.decrees.resume.clone().or_else(|| r.node_set.clone());
    let (loaded, c) = cluster_at(r.path)?;
    let node_sets: Vec<String> = c
        .spec
        .node_sets
        .iter()
        .filter(|n| only.as_ref().is_none_or(|x| *x == n.name))
        .map(|n| n.name.clone())
        .collect();
    if c.spec.policy.suspend {
        return Ok(Rolled {
            file: loaded.name,
            suspended: true,
            node_sets,
            driven: None,
        });
    }
    if node_sets.is_empty() {
        return Err(Error::Other(format!(
            "{}: no NodeSet {:?}",
            loaded.name,
            only.unwrap_or_default()
        )));
    }
    let slurm = slurm()?;
    let rendered = render::render(&c);
    let driven = runtime().block_on(async {
        let cluster = connect(r.kubeconfig, r.context).await?;
        let rollout = crate::controller::drive::Rollout {
            c: &c,
            text: &loaded.text,
            rendered: &rendered,
            node_set: only.clone(),
            decrees: r.decrees.clone(),
            until: Until::for_people(),
            observer: observer.clone(),
            watch: true,
        };
        Ok::<_, Error>(crate::controller::drive::roll(&cluster, &slurm, &rollout).await?)
    })?;
    Ok(Rolled {
        file: loaded.name,
        suspended: false,
        node_sets,
        driven: Some(driven),
    })
}

impl Rolled {
    /// What the rollout did, as `slurmops rollout` prints it after the passes.
    pub fn text(&self) -> String {
        let Some(done) = &self.driven else {
            return format!(
                "{}: spec.policy.suspend is set; no worker is replaced\n",
                self.file
            );
        };
        let mut out = String::new();
        for n in &self.node_sets {
            let replaced = done.rollouts.get(n).map_or(0, |r| r.replaced.len());
            out += &format!("{n}: {replaced} worker(s) replaced\n");
        }
        if !done.done {
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            out += &format!(
                "not finished (waits for a maintenance window: the daemon, or rollout then, goes on; --ignore-window rolls now); where the NodeSets stand:\n{}",
                crate::status::show::node_sets(&done.progress, now)
            );
        }
        out
    }
}
