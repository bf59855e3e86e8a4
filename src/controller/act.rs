//! Act: carries out the steps `decide` found safe, each one call with its own deadline (the Slurm
//! client's and kube's timeouts), checking before every write that this process may still write
//! (fencing: a replica that lost the Lease stops before its next write).

use k8s_openapi::api::core::v1::{Pod, PodTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

use super::decide::Action;
use super::{Fence, PassError};
use crate::rollout::{Event, Observer};
use crate::slurm::{Drain, SlurmError, SlurmNodes};

/// What acting on one NodeSet did, and the Slurm error that stopped it (its other steps wait for
/// the next pass: nothing is deleted on an unknown).
#[derive(Debug, Default)]
pub struct Acted {
    pub events: Vec<Event>,
    pub slurm_error: Option<SlurmError>,
    /// Workers Slurm refused to put in their block, and its answer (no outage: other steps go on).
    pub unplaced: Vec<String>,
}

pub async fn act<S: SlurmNodes>(
    pods: &Api<Pod>,
    slurm: &S,
    node_set: &str,
    actions: &[Action],
    fence: &Fence<'_>,
    observer: &Observer,
) -> Result<Acted, PassError> {
    let mut out = Acted::default();
    for a in actions {
        if !fence() {
            return Err(PassError::Fenced);
        }
        let event = match a {
            Action::Drain { node, reason } => match slurm.drain(node, reason).await {
                Ok(d) => Event::Drain {
                    node: node.clone(),
                    ours: !matches!(d, Drain::HeldByOther { .. }),
                },
                Err(SlurmError::UnknownNode(_)) => continue,
                Err(e) => {
                    out.slurm_error = Some(e);
                    break;
                }
            },
            Action::Resume { node } => match slurm.resume(node).await {
                Ok(crate::slurm::Resume::Resumed) => Event::Resume { node: node.clone() },
                Ok(_) | Err(SlurmError::UnknownNode(_)) => continue,
                Err(e) => {
                    out.slurm_error = Some(e);
                    break;
                }
            },
            Action::SetTopology { node, topology } => {
                match slurm.set_topology(node, topology).await {
                    Ok(()) => Event::Block {
                        node: node.clone(),
                        topology: topology.clone(),
                    },
                    Err(SlurmError::UnknownNode(_)) => continue,
                    Err(e) if e.is_transient() => {
                        out.slurm_error = Some(e);
                        break;
                    }
                    Err(e) => {
                        out.unplaced
                            .push(format!("{node}: Slurm refused block {topology}: {e}"));
                        continue;
                    }
                }
            }
            Action::Delete { pod, uid, forced } => {
                if !delete(pods, pod, uid)
                    .await
                    .map_err(|source| PassError::Kube {
                        what: format!("delete pod {pod}"),
                        source,
                    })?
                {
                    continue;
                }
                Event::Delete {
                    pod: pod.clone(),
                    forced: *forced,
                }
            }
        };
        observer.emit(node_set, &event);
        out.events.push(event);
    }
    Ok(out)
}

/// Deletes POD if it is still the one observed (uid); false when it is already gone or replaced.
async fn delete(pods: &Api<Pod>, pod: &str, uid: &str) -> Result<bool, kube::Error> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(pod, &dp).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Makes a slurmops-made NodeSet's pods (pod name, the node a perNode one is bound to) from the
/// observed TEMPLATE. The pod name is the Slurm node name and its hostname (under SERVICE).
pub async fn create(
    pods: &Api<Pod>,
    template: &PodTemplate,
    service: &str,
    node_set: &str,
    creates: &[(String, Option<String>)],
    fence: &Fence<'_>,
    observer: &Observer,
) -> Result<Vec<Event>, PassError> {
    let mut out = Vec::new();
    for (name, node) in creates {
        if !fence() {
            return Err(PassError::Fenced);
        }
        let Some(pod) = pod_for(template, service, name, node.as_deref()) else {
            break;
        };
        match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => {}
            // Made by an earlier pass that did not see it yet.
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(source) => {
                return Err(PassError::Kube {
                    what: format!("create pod {name}"),
                    source,
                });
            }
        }
        let e = Event::Create {
            pod: name.clone(),
            node: node.clone(),
        };
        observer.emit(node_set, &e);
        out.push(e);
    }
    Ok(out)
}

/// The pod NAME on NODE from TEMPLATE, owned by it (removed with it, once slurmops let the
/// PodTemplate go: only after every worker drained).
fn pod_for(template: &PodTemplate, service: &str, name: &str, node: Option<&str>) -> Option<Pod> {
    let t = template.template.clone()?;
    let meta = t.metadata.unwrap_or_default();
    let mut spec = t.spec?;
    spec.node_name = node.map(str::to_string);
    spec.hostname = Some(name.to_string());
    spec.subdomain = Some(service.to_string());
    Some(Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: meta.labels,
            annotations: meta.annotations,
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "PodTemplate".into(),
                name: template.metadata.name.clone()?,
                uid: template.metadata.uid.clone()?,
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}
