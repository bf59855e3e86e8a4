//! The controllers' roll, act: one controller pod deleted behind the fence, if it is still the
//! one observed (the StatefulSet, `OnDelete`, makes it again from the new template).

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::Roll;
use crate::cluster::ClusterFile;
use crate::controller::{Fence, PassError};
use crate::rollout::Event;

/// Carries out ROLL behind FENCE: the Event of the pod deleted, None when there was nothing to
/// delete or the pod was already gone or replaced.
pub async fn act(
    client: &kube::Client,
    c: &ClusterFile,
    roll: &Roll,
    fence: &Fence<'_>,
) -> Result<Option<Event>, PassError> {
    let Roll::Replace {
        pod,
        uid,
        in_control,
    } = roll
    else {
        return Ok(None);
    };
    if !fence() {
        return Err(PassError::Fenced);
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &c.metadata.namespace);
    let deleted = crate::controller::pods::delete(&pods, pod, uid)
        .await
        .map_err(|source| PassError::Kube {
            what: format!("delete controller pod {pod}"),
            source,
        })?;
    Ok(deleted.then(|| Event::ControllerReplaced {
        pod: pod.clone(),
        in_control: *in_control,
    }))
}
