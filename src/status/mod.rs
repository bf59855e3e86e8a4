//! `status`: what slurmops tells people about what it did, without CRDs. Kubernetes Events on
//! the objects it changed (so `kubectl describe` and `kubectl get events` show them), and the
//! daemon's status ConfigMap (`slurmops-status`): commits seen and applied, result, errors,
//! rollout progress, the plan summary.

pub mod bound;
pub mod configmap;
pub mod show;
pub mod verdict;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, PostParams};

/// Component name on every Event slurmops records.
pub use crate::vocab::EVENT_COMPONENT as COMPONENT;

/// An Event about one object.
pub struct Note<'a> {
    pub involved: ObjectReference,
    /// CamelCase, e.g. `ScaledOut`.
    pub reason: &'a str,
    pub message: String,
    pub warning: bool,
}

/// The object that stands for NodeSet NAME in NAMESPACE: its StatefulSet, or the PodTemplate of
/// a NodeSet whose pods slurmops makes (MANAGED: perNode, `podManagement: slurmops`).
pub fn node_set_ref(namespace: &str, name: &str, managed: bool) -> ObjectReference {
    let (api_version, kind) = match managed {
        true => ("v1", "PodTemplate"),
        false => ("apps/v1", "StatefulSet"),
    };
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        ..Default::default()
    }
}

/// Records NOTE as a core/v1 Event in the object's namespace (served by every Kubernetes
/// version slurmops supports).
pub async fn record(client: &kube::Client, note: Note<'_>) -> Result<(), kube::Error> {
    let ns = note.involved.namespace.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let name = note.involved.name.clone().unwrap_or_default();
    let ev = Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(ns.clone()),
            ..ObjectMeta::default()
        },
        involved_object: note.involved,
        reason: Some(note.reason.to_string()),
        message: Some(note.message),
        type_: Some(if note.warning { "Warning" } else { "Normal" }.into()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: None,
        }),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Event::default()
    };
    Api::<Event>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &ev)
        .await
        .map(|_| ())
}
