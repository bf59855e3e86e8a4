//! What apply may delete: objects that left git (only members of the ApplySet, never more than
//! `policy.maxPrune`), and worker pods, only once Slurm reports them drained. Every refusal is
//! decided here, before apply's first write.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use super::{ApplyError, Connection, Members, Options, api_err, key};
use crate::cluster::types::ClusterFile;
use crate::cluster::values::IntOrPercent;
use crate::render::Object;

/// Answers whether pruning a worker StatefulSet may delete its pods: every pod's Slurm node must
/// be known drained (or gone). Implemented over slurmrestd by the caller; absent → refuse.
pub trait PruneGuard: Sync {
    fn drained(&self, nodes: &[String]) -> impl Future<Output = Result<bool, String>> + Send;
}

/// A guard for callers without a Slurm connection: only worker StatefulSets without pods prune.
pub struct NoSlurm;

impl PruneGuard for NoSlurm {
    async fn drained(&self, nodes: &[String]) -> Result<bool, String> {
        Ok(nodes.is_empty())
    }
}

/// Plans the prune, refusing (before any write) mass prunes and unsafe worker removal.
pub(super) async fn prune_set(
    cluster: &Connection,
    c: &ClusterFile,
    desired: &[Object],
    live: &Members,
    opts: &Options,
    guard: &impl PruneGuard,
) -> Result<Vec<(String, String, String)>, ApplyError> {
    let want: BTreeSet<String> = desired.iter().map(|o| key(&o.kind, &o.name)).collect();
    let gone: Vec<(String, String, String)> = live
        .objects
        .iter()
        .filter(|(k, _)| !want.contains(*k))
        .filter(|(k, _)| {
            k.strip_prefix("StatefulSet/")
                .or_else(|| k.strip_prefix("PodTemplate/"))
                .is_none_or(|n| !opts.keep.contains(n))
        })
        .map(|(k, (v, _))| {
            let (kind, name) = k.split_once('/').unwrap_or((k, ""));
            (v.clone(), kind.to_string(), name.to_string())
        })
        .collect();
    let total = live.objects.len();
    let limit = c.spec.policy.max_prune.unwrap_or(IntOrPercent::Percent(50));
    let allowed = match limit {
        IntOrPercent::Int(n) => n as usize,
        IntOrPercent::Percent(p) => total * p as usize / 100,
    };
    let everything = total > 0 && gone.len() == total;
    if !gone.is_empty() && (everything || gone.len() > allowed.max(1)) && !opts.allow_mass_prune {
        return Err(ApplyError::MassPrune {
            count: gone.len(),
            total,
            namespace: c.metadata.namespace.clone(),
            limit: match limit {
                IntOrPercent::Int(n) => format!("{n}"),
                IntOrPercent::Percent(p) => format!("{p}%"),
            },
            which: gone
                .iter()
                .map(|(_, k, n)| key(k, n))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let workloads = gone
        .iter()
        .filter(|(_, k, _)| k == "StatefulSet" || k == "PodTemplate");
    for (_, _, name) in workloads {
        let pods = worker_pods(cluster, &c.metadata.namespace, name).await?;
        if pods.is_empty() {
            continue;
        }
        let ok = guard.drained(&pods).await.unwrap_or(false);
        if !ok {
            return Err(ApplyError::UnsafePrune {
                name: name.clone(),
                nodes: pods.join(", "),
            });
        }
    }
    Ok(gone)
}

/// Lowering a NodeSet's replicas makes the StatefulSet delete its highest ordinals at once: only
/// allowed when those workers are drained (or do not exist).
pub(super) async fn check_scale_in(
    cluster: &Connection,
    c: &ClusterFile,
    desired: &[Object],
    live: &Members,
    guard: &impl PruneGuard,
) -> Result<(), ApplyError> {
    for o in desired.iter().filter(|o| o.kind == "StatefulSet") {
        let Some(to) = o.body.pointer("/spec/replicas").and_then(Json::as_i64) else {
            continue;
        };
        let Some(l) = live.get(&key(&o.kind, &o.name)) else {
            continue;
        };
        let from = l
            .data
            .pointer("/spec/replicas")
            .and_then(Json::as_i64)
            .unwrap_or(1);
        if to >= from || !c.spec.node_sets.iter().any(|n| n.name == o.name) {
            continue;
        }
        let leaving: Vec<String> = worker_pods(cluster, &c.metadata.namespace, &o.name)
            .await?
            .into_iter()
            .filter(|p| ordinal(p).is_some_and(|i| i >= to))
            .collect();
        if !leaving.is_empty() && !guard.drained(&leaving).await.unwrap_or(false) {
            return Err(ApplyError::UnsafeScaleIn {
                name: o.name.clone(),
                from,
                to,
                nodes: leaving.join(", "),
            });
        }
    }
    Ok(())
}

fn ordinal(pod: &str) -> Option<i64> {
    pod.rsplit_once('-').and_then(|(_, n)| n.parse().ok())
}

/// Pod names (= Slurm node names) of a NodeSet's StatefulSet.
async fn worker_pods(
    cluster: &Connection,
    ns: &str,
    node_set: &str,
) -> Result<Vec<String>, ApplyError> {
    let pods = cluster
        .list(
            "v1",
            "Pod",
            ns,
            &format!("{}={node_set}", crate::render::names::LABEL_NODESET),
        )
        .await
        .map_err(|e| api_err(&format!("pods of {node_set}"), e))?;
    Ok(pods.into_iter().filter_map(|p| p.metadata.name).collect())
}
