//! The slurmrestd pods behind the cluster's Service, followed by a watch of its one Endpoints
//! object. The daemon sends its requests (and its token) to each pod itself so that it can name
//! the one that answered and pass over one that restarts (`slurm::client::replicas`); the client
//! reads this list on every request, and a pod leaves it as soon as it leaves the Endpoints —
//! when it starts terminating, before it has stopped and its IP can be given to another pod.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Endpoints;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::slurm::client::Source;
use crate::slurm::connect::replicas_of;

/// A watch of Endpoints NAMESPACE/NAME, stopped when dropped.
pub struct Follow {
    pub key: String,
    store: Store<Endpoints>,
    task: tokio::task::JoinHandle<()>,
}

impl Follow {
    pub fn start(client: &kube::Client, namespace: &str, name: &str) -> Follow {
        let (store, writer) = reflector::store();
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let api: Api<Endpoints> = Api::namespaced(client.clone(), namespace);
        let task = tokio::spawn(
            reflector::reflector(writer, watcher(api, cfg))
                .default_backoff()
                .for_each(|_| async {}),
        );
        Follow {
            key: format!("{namespace}/{name}"),
            store,
            task,
        }
    }

    /// The replicas as the watch holds them now (none before its first listing: the Service).
    pub fn source(&self) -> Source {
        let store = self.store.clone();
        Arc::new(move || {
            store
                .state()
                .first()
                .map(|e| replicas_of(e))
                .unwrap_or_default()
        })
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.task.abort();
    }
}
