//! Pods the pass makes and deletes itself: a slurmops-made NodeSet's pods from its PodTemplate,
//! and the delete of a pod that is still the one observed (a worker's, or a controller's in
//! their roll). Shared by `act` and the features, so neither imports the other.

use k8s_openapi::api::core::v1::{Pod, PodTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

use super::{Fence, PassError};
use crate::rollout::{Event, Observer};

/// Deletes POD if it is still the one observed (uid); false when it is already gone or replaced.
pub(crate) async fn delete(pods: &Api<Pod>, pod: &str, uid: &str) -> Result<bool, kube::Error> {
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
