//! `reconcile`: one full step from cluster.yaml to a cluster that runs it, with Slurm in the loop.
//! This is what `slurmops apply --slurmrestd-url` and the daemon run:
//!
//! 1. NodeSets whose replicas go down, and NodeSets removed from cluster.yaml: the workers that will
//!    go are drained in Slurm first, and slurmops waits until they are (running jobs finish);
//! 2. apply (server-side apply, prune; prune and scale-in re-check the drains through Slurm);
//! 3. every NodeSet whose pods are outdated rolls, drain-before-replace.
//!
//! Slurm unreachable before step 2 means nothing is applied; during step 3 the rollout pauses.

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::Api;

use crate::apply::{self, ApplyError, Cluster, Options, PruneGuard, Report};
use crate::render::Rendered;
use crate::rollout::{self, RolloutError, Settings};
use crate::slurm::{Client, SlurmError, SlurmNodes};
use crate::spec::ClusterFile;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Rollout(#[from] RolloutError),
}

/// What one reconcile did besides the apply itself.
#[derive(Debug, Default)]
pub struct Reconciled {
    pub applied: Report,
    /// (NodeSet, workers drained before the apply removed them).
    pub drained: Vec<(String, Vec<String>)>,
    /// (NodeSet, workers replaced).
    pub rolled: Vec<(String, Vec<String>)>,
}

/// A worker StatefulSet may lose pods when every one of their Slurm nodes is drained, or unknown
/// to Slurm (nothing can run there).
impl PruneGuard for Client {
    async fn drained(&self, nodes: &[String]) -> Result<bool, String> {
        for n in nodes {
            match self.is_drained(n).await {
                Ok(true) | Err(SlurmError::UnknownNode(_)) => {}
                Ok(false) => return Ok(false),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(true)
    }
}

/// How to reconcile.
#[derive(Debug, Clone, Default)]
pub struct How {
    pub apply: Options,
    /// Observer and drain wait for step 1; each NodeSet's rollout uses its own `update` policy
    /// with this observer.
    pub rollout: Settings,
    /// Run step 3 (roll outdated workers).
    pub roll: bool,
}

/// Runs the three steps for cluster.yaml (its TEXT, parsed C and rendering R).
pub async fn reconcile(
    cluster: &Cluster,
    slurm: &Client,
    c: &ClusterFile,
    text: &str,
    r: &Rendered,
    how: &How,
) -> Result<Reconciled, ReconcileError> {
    let mut out = Reconciled {
        drained: drain_leaving(cluster, slurm, c, &how.rollout, None).await?,
        ..Reconciled::default()
    };
    out.applied = apply::apply(cluster, c, text, r, &how.apply, slurm).await?;
    if !how.roll {
        return Ok(out);
    }
    for ns in &c.spec.node_sets {
        let s = Settings {
            observer: how.rollout.observer.clone(),
            ..Settings::of(ns)
        };
        let ns_name = &c.metadata.namespace;
        let rep = rollout::roll(&cluster.client, slurm, ns_name, &ns.name, &s, "rollout").await?;
        if !rep.replaced.is_empty() {
            out.rolled.push((ns.name.clone(), rep.replaced));
        }
    }
    Ok(out)
}

/// Step 1: drain the workers a scale-in or a NodeSet removal takes away (of every NodeSet, or
/// only ONLY), and wait for them.
pub async fn drain_leaving(
    cluster: &Cluster,
    slurm: &Client,
    c: &ClusterFile,
    settings: &Settings,
    only: Option<&str>,
) -> Result<Vec<(String, Vec<String>)>, ReconcileError> {
    let ns = &c.metadata.namespace;
    let mut leaving: Vec<(String, u32, &'static str)> = Vec::new();
    let sts: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), ns);
    for set in c.spec.node_sets.iter().filter(|n| n.autoscale.is_none()) {
        let live = sts
            .get_opt(&set.name)
            .await
            .map_err(|e| apply::api_err(&format!("StatefulSet/{}", set.name), e))?
            .and_then(|s| s.spec)
            .and_then(|s| s.replicas)
            .unwrap_or(0);
        if live > set.replicas as i32 {
            leaving.push((set.name.clone(), set.replicas, "scale-in"));
        }
    }
    for name in removed_node_sets(cluster, c).await? {
        leaving.push((name, 0, "NodeSet removed"));
    }
    leaving.retain(|(name, _, _)| only.is_none_or(|o| o == name));
    let mut out = Vec::new();
    for (name, target, reason) in leaving {
        let drained = rollout::drain_for_scale_in(
            &cluster.client,
            slurm,
            ns,
            &name,
            target,
            settings,
            reason,
        )
        .await?;
        if !drained.is_empty() {
            out.push((name, drained));
        }
    }
    Ok(out)
}

/// Worker StatefulSets of our ApplySet whose NodeSet left cluster.yaml.
async fn removed_node_sets(cluster: &Cluster, c: &ClusterFile) -> Result<Vec<String>, ApplyError> {
    let ns = &c.metadata.namespace;
    let set_id = apply::applyset::id(&apply::applyset::parent_name(&c.metadata.name), ns);
    let selector = format!(
        "{}={set_id},app.kubernetes.io/component=worker",
        apply::applyset::LABEL_PART_OF
    );
    let live = cluster
        .list("apps/v1", "StatefulSet", ns, &selector)
        .await
        .map_err(|e| apply::api_err("worker StatefulSets", e))?;
    Ok(live
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .filter(|n| !c.spec.node_sets.iter().any(|x| x.name == *n))
        .collect())
}
