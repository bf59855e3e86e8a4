//! Watches, not polls: kube-runtime reflectors keep the worker StatefulSets and pods of one scope
//! in memory, and every change wakes the daemon's next pass at once (a worker that becomes Ready
//! or goes away starts the next wave without waiting for the poll interval). A pass reads the
//! stores instead of listing. With a perNode NodeSet, a change to a Kubernetes node's labels,
//! taints or cordon also wakes a pass (its worker may join or leave); node status heartbeats do
//! not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::render::names::LABEL_NODESET;

/// Which workers a pass looks at: a label selector matching both the worker StatefulSets and
/// their pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub namespace: String,
    pub selector: String,
}

impl Scope {
    /// Every worker of cluster NAME in NAMESPACE (also those of NodeSets removed from git).
    pub fn cluster(namespace: &str, name: &str) -> Scope {
        use crate::render::names::{LABEL_COMPONENT, LABEL_INSTANCE};
        Scope {
            namespace: namespace.into(),
            selector: format!("{LABEL_INSTANCE}={name},{LABEL_COMPONENT}=worker"),
        }
    }

    /// One NodeSet's workers.
    pub fn node_set(namespace: &str, node_set: &str) -> Scope {
        Scope {
            namespace: namespace.into(),
            selector: format!("{LABEL_NODESET}={node_set}"),
        }
    }
}

/// Watched workers of one scope; the watches stop when it is dropped.
pub struct Cache {
    scope: Scope,
    sts: Store<StatefulSet>,
    pods: Store<Pod>,
    ready: [Arc<AtomicBool>; 2],
    tasks: Vec<JoinHandle<()>>,
    trigger: Arc<Notify>,
    nodes: Option<JoinHandle<()>>,
}

impl Drop for Cache {
    fn drop(&mut self) {
        for t in self.tasks.iter().chain(&self.nodes) {
            t.abort();
        }
    }
}

impl Cache {
    /// Starts watching SCOPE; each change notifies TRIGGER.
    pub fn start(client: &kube::Client, scope: Scope, trigger: Arc<Notify>) -> Cache {
        // The server ends each watch before the client's read deadline (`k8s::API_TIMEOUT`);
        // the watcher resumes it from the last resourceVersion, without a new listing.
        let server_timeout = (crate::k8s::API_TIMEOUT.as_secs() * 3 / 4) as u32;
        let cfg = watcher::Config::default()
            .labels(&scope.selector)
            .timeout(server_timeout);
        let (sts, sts_w) = reflector::store();
        let (pods, pods_w) = reflector::store();
        let ready = [
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        ];
        let tasks = vec![
            tokio::spawn(follow(
                reflector::reflector(
                    sts_w,
                    watcher(
                        Api::<StatefulSet>::namespaced(client.clone(), &scope.namespace),
                        cfg.clone(),
                    )
                    .default_backoff(),
                ),
                ready[0].clone(),
                trigger.clone(),
            )),
            tokio::spawn(follow(
                reflector::reflector(
                    pods_w,
                    watcher(
                        Api::<Pod>::namespaced(client.clone(), &scope.namespace),
                        cfg,
                    )
                    .default_backoff(),
                ),
                ready[1].clone(),
                trigger.clone(),
            )),
        ];
        Cache {
            scope,
            sts,
            pods,
            ready,
            tasks,
            trigger,
            nodes: None,
        }
    }

    /// Also wakes a pass when a Kubernetes node's labels, taints or cordon change (perNode
    /// NodeSets; needs the node reader ClusterRole, else the watch logs why and retries).
    pub fn follow_nodes(&mut self, client: &kube::Client) {
        if self.nodes.is_some() {
            return;
        }
        let server_timeout = (crate::k8s::API_TIMEOUT.as_secs() * 3 / 4) as u32;
        let stream = watcher(
            Api::<Node>::all(client.clone()),
            watcher::Config::default().timeout(server_timeout),
        )
        .default_backoff()
        .applied_objects()
        .predicate_filter(placement_inputs, PredicateConfig::default())
        .map(|r| r.map(watcher::Event::Apply));
        let trigger = self.trigger.clone();
        self.nodes = Some(tokio::spawn(follow(
            stream,
            Arc::new(AtomicBool::new(false)),
            trigger,
        )));
    }

    /// True when this cache watches SCOPE and both stores hold a complete listing.
    pub fn serves(&self, scope: &Scope) -> bool {
        self.scope == *scope && self.ready.iter().all(|r| r.load(Ordering::SeqCst))
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    pub fn stateful_sets(&self) -> Vec<StatefulSet> {
        self.sts.state().iter().map(|s| (**s).clone()).collect()
    }

    pub fn pods(&self) -> Vec<Pod> {
        self.pods.state().iter().map(|p| (**p).clone()).collect()
    }
}

/// What decides whether a node wants a worker: its labels, taints and cordon (not its status).
fn placement_inputs(n: &Node) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    n.metadata.labels.hash(&mut h);
    let spec = n.spec.as_ref();
    spec.and_then(|s| s.unschedulable).hash(&mut h);
    for t in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten() {
        (&t.key, &t.value, &t.effect).hash(&mut h);
    }
    Some(h.finish())
}

/// Drives one reflector: marks the store ready after the initial listing, wakes the next pass on
/// every later change, and keeps going through errors (the watcher backs off and re-lists by
/// itself; each distinct error is logged once).
async fn follow<K, S>(stream: S, ready: Arc<AtomicBool>, trigger: Arc<Notify>)
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut last_error = String::new();
    while let Some(e) = stream.next().await {
        match e {
            Ok(watcher::Event::InitDone) => {
                ready.store(true, Ordering::SeqCst);
                trigger.notify_one();
            }
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => trigger.notify_one(),
            Ok(_) => {}
            Err(err) => {
                let text = err.to_string();
                if text != last_error {
                    tracing::warn!("watch: {text} (retrying)");
                    last_error = text;
                }
            }
        }
    }
}
