//! The slurmrestd pods behind the cluster's Service, followed by a watch of its EndpointSlices
//! (`discovery.k8s.io/v1`, or `v1beta1` where the apiserver serves only that, as 1.20 does) or,
//! where no EndpointSlice is served, of its one core Endpoints object (deprecated since 1.33).
//! The daemon sends its requests (and its token) to each pod itself so that it can name the one
//! that answered and pass over one that restarts (`slurm::client::replicas`); the client reads
//! this list on every request, and a pod leaves it as soon as it is not ready — when it starts
//! terminating, before it has stopped and its IP can be given to another pod.

use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Endpoints;
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::slurm::Replica;
use crate::slurm::client::Source;
use crate::slurm::connect::{replicas_of, replicas_of_slices};

/// The group of EndpointSlices, and the label that ties a slice to its Service.
const DISCOVERY: &str = "discovery.k8s.io";
const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// A watch of the endpoints of Service NAMESPACE/NAME, stopped when dropped.
pub struct Follow {
    pub key: String,
    replicas: Arc<RwLock<Vec<Replica>>>,
    task: tokio::task::JoinHandle<()>,
}

/// What the apiserver serves for a Service's endpoints: the newest EndpointSlice version, else
/// core Endpoints.
#[derive(Debug, Clone, PartialEq)]
pub enum Watched {
    Slices(&'static str),
    Endpoints,
}

/// From the apiserver's API groups: EndpointSlices at v1, else v1beta1, else Endpoints.
pub fn watched(groups: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList) -> Watched {
    let versions: Vec<&str> = groups
        .groups
        .iter()
        .filter(|g| g.name == DISCOVERY)
        .flat_map(|g| g.versions.iter().map(|v| v.version.as_str()))
        .collect();
    ["v1", "v1beta1"]
        .into_iter()
        .find(|v| versions.contains(v))
        .map_or(Watched::Endpoints, Watched::Slices)
}

impl Follow {
    pub fn start(client: &kube::Client, namespace: &str, name: &str) -> Follow {
        let replicas = Arc::new(RwLock::new(Vec::new()));
        let (client, ns, svc, out) = (
            client.clone(),
            namespace.to_string(),
            name.to_string(),
            replicas.clone(),
        );
        let task = tokio::spawn(async move {
            // Asked once per watch; a failed discovery falls back to Endpoints, which every
            // apiserver still serves.
            let kind = match client.list_api_groups().await {
                Ok(groups) => watched(&groups),
                Err(e) => {
                    tracing::warn!(error = %e, "API discovery failed: following the slurmrestd Service's Endpoints");
                    Watched::Endpoints
                }
            };
            tracing::info!(service = %format!("{ns}/{svc}"), ?kind, "following the slurmrestd pods");
            match kind {
                Watched::Slices(version) => follow_slices(client, &ns, &svc, version, out).await,
                Watched::Endpoints => follow_endpoints(client, &ns, &svc, out).await,
            }
        });
        Follow {
            key: format!("{namespace}/{name}"),
            replicas,
            task,
        }
    }

    /// The replicas as the watch holds them now (none before its first listing: the Service).
    pub fn source(&self) -> Source {
        let replicas = self.replicas.clone();
        Arc::new(move || replicas.read().map(|r| r.clone()).unwrap_or_default())
    }
}

async fn follow_slices(
    client: kube::Client,
    ns: &str,
    svc: &str,
    version: &'static str,
    out: Arc<RwLock<Vec<Replica>>>,
) {
    let ar = ApiResource {
        group: DISCOVERY.into(),
        version: version.into(),
        api_version: format!("{DISCOVERY}/{version}"),
        kind: "EndpointSlice".into(),
        plural: "endpointslices".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &ar);
    let writer = reflector::store::Writer::new(ar);
    let store: Store<DynamicObject> = writer.as_reader();
    let cfg = watcher::Config::default().labels(&format!("{SERVICE_NAME}={svc}"));
    reflector::reflector(writer, watcher(api, cfg))
        .default_backoff()
        .for_each(|_| {
            let slices: Vec<serde_json::Value> = store
                .state()
                .iter()
                .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
                .collect();
            publish(&out, replicas_of_slices(&slices));
            async {}
        })
        .await;
}

async fn follow_endpoints(
    client: kube::Client,
    ns: &str,
    svc: &str,
    out: Arc<RwLock<Vec<Replica>>>,
) {
    let (store, writer) = reflector::store::<Endpoints>();
    let cfg = watcher::Config::default().fields(&format!("metadata.name={svc}"));
    let api: Api<Endpoints> = Api::namespaced(client, ns);
    reflector::reflector(writer, watcher(api, cfg))
        .default_backoff()
        .for_each(|_| {
            let now = store
                .state()
                .first()
                .map(|e| replicas_of(e))
                .unwrap_or_default();
            publish(&out, now);
            async {}
        })
        .await;
}

fn publish(out: &RwLock<Vec<Replica>>, now: Vec<Replica>) {
    if let Ok(mut r) = out.write() {
        *r = now;
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_endpointslice_version_served_is_followed_else_endpoints() {
        let groups = |gvs: &[(&str, &str)]| {
            serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList>(
                serde_json::json!({"groups": gvs.iter().map(|(g, v)| serde_json::json!({
                    "name": g,
                    "versions": [{"groupVersion": format!("{g}/{v}"), "version": v}]
                })).collect::<Vec<_>>()}),
            )
            .unwrap()
        };
        // 1.20: v1beta1 only; 1.21 to 1.24 both; 1.25 and later v1 only.
        assert_eq!(
            watched(&groups(&[("apps", "v1"), ("discovery.k8s.io", "v1beta1")])),
            Watched::Slices("v1beta1")
        );
        assert_eq!(
            watched(&groups(&[
                ("discovery.k8s.io", "v1beta1"),
                ("discovery.k8s.io", "v1")
            ])),
            Watched::Slices("v1")
        );
        assert_eq!(
            watched(&groups(&[("discovery.k8s.io", "v1")])),
            Watched::Slices("v1")
        );
        assert_eq!(watched(&groups(&[("apps", "v1")])), Watched::Endpoints);
    }
}
