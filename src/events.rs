//! Kubernetes Events: what slurmops tells people about the objects it changed (so `kubectl
//! describe` and `kubectl get events` show them), repeats counted on one Event. The edge every
//! layer records through; `status` shows them beside the daemon's status ConfigMap.

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
    /// The last [`SHOWN`] Events recorded, oldest first, for the live view.
    shown: Mutex<Shown>,
}

/// How many recent Events the live view shows.
pub const SHOWN: usize = 50;

#[derive(Default)]
struct Shown {
    /// Counts every Event recorded: the view rebuilds its copy when it moved.
    generation: u64,
    events: std::collections::VecDeque<Posted>,
}

/// An Event as the live view shows it.
#[derive(Debug, Clone)]
pub struct Posted {
    /// RFC 3339.
    pub at: String,
    /// `Kind/name`.
    pub object: String,
    pub reason: String,
    pub warning: bool,
    pub count: i32,
    pub message: String,
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
                    self.show(&note, count + 1);
                    self.remember(key, name, count + 1);
                    return Ok(());
                }
                // Gone (the apiserver's Event TTL, or deleted): a new series.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        self.show(&note, 1);
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

    /// The Events recorded lately, oldest first (at most [`SHOWN`]; a repeat updates its entry).
    pub fn recent(&self) -> Vec<Posted> {
        let shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        shown.events.iter().cloned().collect()
    }

    /// Moves whenever an Event is recorded.
    pub fn generation(&self) -> u64 {
        self.shown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .generation
    }

    /// Shows NOTE in the live view's recent Events (COUNT: how often it happened in its series).
    pub fn show(&self, note: &Note<'_>, count: i32) {
        let object = format!(
            "{}/{}",
            note.involved.kind.as_deref().unwrap_or_default(),
            note.involved.name.as_deref().unwrap_or_default()
        );
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        shown.generation += 1;
        shown.events.retain(|e| {
            !(e.object == object && e.reason == note.reason && e.warning == note.warning)
        });
        if shown.events.len() == SHOWN {
            shown.events.pop_front();
        }
        shown.events.push_back(Posted {
            at: k8s_openapi::jiff::Timestamp::now().to_string(),
            object,
            reason: note.reason.to_string(),
            warning: note.warning,
            count,
            message: cut(&note.message, 1024),
        });
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

/// TEXT cut to at most MAX bytes on a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match end < text.len() {
        true => format!("{}…", &text[..end]),
        false => text.to_string(),
    }
}
