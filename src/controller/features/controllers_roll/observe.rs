//! The controllers' roll, observe: their StatefulSet and pods, as the roll's `decide` reads them.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::{CtldPod, CtldView};
use crate::cluster::ClusterFile;
use crate::controller::PassError;
use crate::render::components::behind_one_address;
use crate::render::names::{Component, Names};

/// The controllers' StatefulSet and pods of C; None for a cluster whose controllers are not
/// behind one address (the StatefulSet rolls them itself) or whose StatefulSet is not there.
pub async fn observe(
    client: &kube::Client,
    c: &ClusterFile,
) -> Result<Option<CtldView>, PassError> {
    if !behind_one_address(&c.spec) {
        return Ok(None);
    }
    let names = Names::new(c);
    let ns = &c.metadata.namespace;
    let err = |what: &str| {
        let what = what.to_string();
        move |source| PassError::Kube { what, source }
    };
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let Some(set) = sets
        .get_opt(&names.controller())
        .await
        .map_err(err("read the controllers' StatefulSet"))?
    else {
        return Ok(None);
    };
    let selector = names
        .selector(Component::Controller, None)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let listed = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(err("list the controller pods"))?;
    let prefix = format!("{}-", names.controller());
    let pods = listed
        .items
        .into_iter()
        .filter_map(|p| pod_of(p, &prefix))
        .collect();
    // A revision the StatefulSet controller computed before it saw the latest template is not
    // the one to roll to: wait until it has.
    let seen = set.metadata.generation;
    let status = set
        .status
        .clone()
        .filter(|s| s.observed_generation.is_some() && s.observed_generation >= seen);
    Ok(Some(CtldView {
        replicas: set
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1)
            .max(0) as u32,
        update_revision: status.and_then(|s| s.update_revision),
        pods,
    }))
}

/// Pod P of the controllers' StatefulSet (its name PREFIX and an ordinal) as the roll sees it.
fn pod_of(p: Pod, prefix: &str) -> Option<CtldPod> {
    let name = p.metadata.name.clone()?;
    let ordinal = name.strip_prefix(prefix)?.parse().ok()?;
    let status = p.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let probed = p
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == "slurmctld"))
        .and_then(|c| c.readiness_probe.as_ref())
        .is_some_and(|r| r.exec.is_some());
    let running = status
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.name == "slurmctld" && c.state.as_ref().is_some_and(|s| s.running.is_some())
            })
        });
    Some(CtldPod {
        uid: p.metadata.uid.clone().unwrap_or_default(),
        revision: p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("controller-revision-hash"))
            .cloned()
            .unwrap_or_default(),
        deleting: p.metadata.deletion_timestamp.is_some(),
        name,
        ordinal,
        ready,
        probed,
        running,
    })
}
