//! Where each NodeSet stands when Slurm does not answer (not started yet, unreachable, or the
//! daemon runs with `--no-slurm`): what Kubernetes alone tells — the workload's revision, its
//! replicas and how many of them are Ready on that revision — for every NodeSet of cluster.yaml
//! from its first apply. Nothing is decided from it (no worker is drained or replaced without
//! Slurm); it is what the status and the live view show meanwhile.
//!
//! Two small reads per pass, the NodeSets' StatefulSets and PodTemplates (one object per
//! NodeSet each), never the workers' pods.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PodTemplate;
use kube::api::{Api, ListParams};

use super::decide::Progress;
use super::watch::Scope;
use crate::cluster::ClusterFile;

/// A NodeSet's workload as Kubernetes reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workload {
    pub revision: Option<String>,
    pub replicas: u32,
    /// Ready on the update revision (a StatefulSet's `min(updatedReplicas, readyReplicas)`).
    pub updated: u32,
}

/// The workloads of cluster C, by NodeSet name: two LISTs by the cluster's worker labels.
pub async fn observe(
    client: &kube::Client,
    c: &ClusterFile,
) -> Result<BTreeMap<String, Workload>, kube::Error> {
    let scope = Scope::cluster(&c.metadata.namespace, &c.metadata.name);
    let lp = ListParams::default().labels(&scope.selector);
    let sets = Api::<StatefulSet>::namespaced(client.clone(), &scope.namespace)
        .list(&lp)
        .await?
        .items;
    let templates = Api::<PodTemplate>::namespaced(client.clone(), &scope.namespace)
        .list(&lp)
        .await?
        .items;
    Ok(workloads(&sets, &templates))
}

/// The workloads in SETS and TEMPLATES (perNode NodeSets: the PodTemplate's revision and the
/// count autoscale or the last pass set).
pub fn workloads(sets: &[StatefulSet], templates: &[PodTemplate]) -> BTreeMap<String, Workload> {
    let mut out = BTreeMap::new();
    for t in templates {
        let Some(name) = t.metadata.name.clone() else {
            continue;
        };
        let revision = t
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::render::names::LABEL_REVISION))
            .cloned();
        let replicas = super::features::per_node::managed_replicas(t).unwrap_or(0);
        out.insert(
            name,
            Workload {
                revision,
                replicas,
                updated: 0,
            },
        );
    }
    for s in sets {
        let Some(name) = s.metadata.name.clone() else {
            continue;
        };
        let status = s.status.clone().unwrap_or_default();
        let seen = status.observed_generation.unwrap_or(0) >= s.metadata.generation.unwrap_or(0);
        let updated = status
            .updated_replicas
            .unwrap_or(0)
            .min(status.ready_replicas.unwrap_or(0))
            .max(0) as u32;
        out.insert(
            name,
            Workload {
                revision: status.update_revision.filter(|_| seen),
                replicas: s.spec.as_ref().and_then(|x| x.replicas).unwrap_or(1).max(0) as u32,
                updated,
            },
        );
    }
    out
}

/// Every NodeSet of C, in cluster.yaml's order, with its workload where Kubernetes has one. None
/// is done: without Slurm nothing is known of its workers' registration.
pub fn progress(c: &ClusterFile, live: &BTreeMap<String, Workload>) -> Vec<Progress> {
    c.spec
        .node_sets
        .iter()
        .map(|n| {
            let w = live.get(&n.name).cloned().unwrap_or_default();
            Progress {
                node_set: n.name.clone(),
                revision: w.revision.unwrap_or_default(),
                replicas: w.replicas,
                updated: w.updated,
                done: false,
                ..Progress::default()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn sts(name: &str, replicas: i32, updated: i32, ready: i32, seen: bool) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                generation: Some(2),
                ..ObjectMeta::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                ..StatefulSetSpec::default()
            }),
            status: Some(StatefulSetStatus {
                observed_generation: Some(if seen { 2 } else { 1 }),
                update_revision: Some(format!("{name}-abc")),
                updated_replicas: Some(updated),
                ready_replicas: Some(ready),
                replicas,
                ..StatefulSetStatus::default()
            }),
        }
    }

    fn cluster(sets: &[&str]) -> ClusterFile {
        let mut text = String::from(
            "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {name: c, namespace: slurm}\nspec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {name: k, key: slurm.key}\n    jwtKey: {name: j, key: jwt_hs256.key}\n  nodeSets:\n",
        );
        for s in sets {
            text.push_str(&format!("    - {{name: {s}, replicas: 2}}\n"));
        }
        text.push_str("  partitions:\n    - {name: p, nodeSets: [ALL]}\n");
        crate::cluster::load("cluster.yaml", &text).expect("valid")
    }

    #[test]
    fn every_node_set_of_git_shows_from_its_first_apply_with_what_kubernetes_tells() {
        let c = cluster(&["gpu", "cpu", "new"]);
        let live = workloads(
            &[sts("gpu", 4, 3, 2, true), sts("cpu", 2, 2, 2, false)],
            &[],
        );
        let p = progress(&c, &live);
        let rows: Vec<(&str, &str, u32, u32, bool)> = p
            .iter()
            .map(|p| {
                (
                    p.node_set.as_str(),
                    p.revision.as_str(),
                    p.replicas,
                    p.updated,
                    p.done,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                // Ready on the new revision: the lower of updated and ready.
                ("gpu", "gpu-abc", 4, 2, false),
                // A revision the StatefulSet controller has not seen yet is not shown.
                ("cpu", "", 2, 2, false),
                // Not created yet: listed all the same.
                ("new", "", 0, 0, false),
            ]
        );
    }
}
