//! `status`: what slurmops tells people about what it did, without CRDs. Kubernetes Events on
//! the objects it changed (so `kubectl describe` and `kubectl get events` show them; repeats
//! counted on one Event), and the
//! daemon's status ConfigMap (`slurmops-status`): commits seen and applied, result, errors,
//! rollout progress, the plan summary.

pub mod bound;
pub mod configmap;
pub mod show;
pub mod verdict;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};

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

/// How long a repeated Event updates the one posted before instead of posting another
/// (kube-runtime's `Recorder` keeps its series as long).
const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// Records core/v1 Events (served by every Kubernetes version slurmops supports), counting
/// repeats: the same reason and type on the same object within [`SERIES_TTL`] updates the Event
/// posted before (its count, last time and message: `kubectl get events` reads "x12 over 3m")
/// instead of posting another. A rollout of 1,000 workers leaves a few Events per NodeSet, each
/// with how often it happened and the latest workers, not one per pass. Remembers at most what it
/// posted within the TTL; a daemon restart starts new series.
#[derive(Default)]
pub struct Recorder {
    recent: Mutex<HashMap<String, Recent>>,
}

struct Recent {
    name: String,
    count: i32,
    at: Instant,
}

impl Recorder {
    pub async fn record(&self, client: &kube::Client, note: Note<'_>) -> Result<(), kube::Error> {
        let ns = note.involved.namespace.clone().unwrap_or_default();
        let object = note.involved.name.clone().unwrap_or_default();
        let kind = note.involved.kind.clone().unwrap_or_default();
        let key = format!("{ns}/{kind}/{object}/{}/{}", note.reason, note.warning);
        let prior = {
            let mut recent = self.recent.lock().expect("events");
            recent.retain(|_, r| r.at.elapsed() < SERIES_TTL);
            recent.get(&key).map(|r| (r.name.clone(), r.count))
        };
        let api = Api::<Event>::namespaced(client.clone(), &ns);
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        if let Some((name, count)) = prior {
            let patch = serde_json::json!({
                "count": count + 1, "lastTimestamp": now, "message": note.message,
            });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.remember(key, name, count + 1);
                    return Ok(());
                }
                // Gone (the apiserver's Event TTL, or deleted): a new series.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let ev = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{object}.")),
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
        let posted = api.create(&PostParams::default(), &ev).await?;
        if let Some(name) = posted.metadata.name {
            self.remember(key, name, 1);
        }
        Ok(())
    }

    fn remember(&self, key: String, name: String, count: i32) {
        let at = Instant::now();
        let mut recent = self.recent.lock().expect("events");
        recent.insert(key, Recent { name, count, at });
    }
}

/// Records NOTE as a new Event: for one-off Events (a command's, a scale change).
pub async fn record(client: &kube::Client, note: Note<'_>) -> Result<(), kube::Error> {
    Recorder::default().record(client, note).await
}
