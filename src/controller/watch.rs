//! Watches, not polls: kube-runtime reflectors keep the worker StatefulSets, pods and
//! PodTemplates of one scope in memory, and every change wakes the daemon's next pass at once (a
//! worker that becomes Ready or goes away starts the next wave without waiting for the poll
//! interval). A pass reads the stores instead of listing, so an idle pass sends no LIST. The
//! Kubernetes nodes are watched too, holding only what slurmops reads of them (labels, taints,
//! cordon, conditions: a node's images and capacity are most of its size): perNode placement,
//! block labels and node health come from there. A change to a node's labels, taints, cordon or
//! condition states wakes a pass; heartbeats do not. Each store drops `managedFields`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplate};
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::render::names::LABEL_NODESET;

mod slim;
use slim::{slim_meta, slim_node, slim_pod};

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

/// What a watch cache holds of one kind of object.
#[derive(Debug, Clone, Default)]
pub enum Held<T> {
    /// Not watched here: the reader reads it itself (one LIST).
    #[default]
    NotWatched,
    /// Watched, its first listing not complete yet: the reader waits for it (its end wakes a
    /// pass) rather than LIST what the watch is listing (at 10,000 Nodes or pods, hundreds of MB
    /// on every pass until the watch is ready).
    Listing,
    /// A complete listing.
    Ready(T),
}

impl<T> Held<T> {
    pub fn listing(&self) -> bool {
        matches!(self, Held::Listing)
    }
    pub fn ready(self) -> Option<T> {
        match self {
            Held::Ready(t) => Some(t),
            _ => None,
        }
    }
}

/// Watched workers of one scope; the watches stop when it is dropped.
pub struct Cache {
    scope: Scope,
    sts: Store<StatefulSet>,
    pods: Store<Pod>,
    templates: Store<PodTemplate>,
    ready: [Arc<AtomicBool>; 3],
    tasks: Vec<JoinHandle<()>>,
    trigger: Arc<Notify>,
    /// The node watch (`follow_nodes`); replaced by one keeping more label keys when a pass
    /// reads one it does not keep.
    nodes: std::sync::Mutex<Option<NodeWatch>>,
    /// Pods this process deleted (uid → when) that the store may not show as deleting yet.
    deleted: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

/// How long a deletion is remembered for a store that has not shown it (a watch that lags
/// longer than this has reconnected and listed since).
const EXPECT_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// The watch of the Kubernetes nodes: what it keeps of each (`slim_node`), with the label keys
/// it keeps.
struct NodeWatch {
    client: kube::Client,
    store: Store<Node>,
    ready: Arc<AtomicBool>,
    task: JoinHandle<()>,
    keys: Arc<LabelKeys>,
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Node label keys.
pub type LabelKeys = std::collections::BTreeSet<String>;

impl Drop for Cache {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Objects per page of a watch's initial listing: a page is parsed whole before the store slims
/// it, and 500 (kube-runtime's default) GPU nodes of ~30 KB each is a 15 MB page.
const LIST_PAGE: u32 = 100;

/// STATE's pods, those in DELETED (uid → when this process deleted it) shown as deleting; what
/// DELETED need not remember any longer (too old, or the store shows the deletion) is dropped.
fn with_deletions(
    state: Vec<Arc<Pod>>,
    deleted: &mut std::collections::HashMap<String, std::time::Instant>,
) -> Vec<Arc<Pod>> {
    deleted.retain(|_, at| at.elapsed() < EXPECT_FOR);
    if deleted.is_empty() {
        // Most passes: nothing to look up for each pod.
        return state;
    }
    // Shared with the store: only a pod shown as deleting is copied. An expectation is kept
    // while its pod is still listed without a deletion.
    let mut listed = std::collections::HashSet::new();
    let pods: Vec<Arc<Pod>> = state
        .into_iter()
        .map(|p| {
            let uid = p.metadata.uid.as_deref().unwrap_or_default();
            if p.metadata.deletion_timestamp.is_some() || !deleted.contains_key(uid) {
                return p;
            }
            listed.insert(uid.to_string());
            let mut p = (*p).clone();
            p.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                ));
            Arc::new(p)
        })
        .collect();
    deleted.retain(|uid, _| listed.contains(uid));
    pods
}

impl Cache {
    /// Starts watching SCOPE; each change notifies TRIGGER.
    pub fn start(client: &kube::Client, scope: Scope, trigger: Arc<Notify>) -> Cache {
        // The server ends each watch before the client's read deadline (`k8s::API_TIMEOUT`);
        // the watcher resumes it from the last resourceVersion, without a new listing.
        let server_timeout = (crate::k8s::API_TIMEOUT.as_secs() * 3 / 4) as u32;
        let cfg = watcher::Config::default()
            .labels(&scope.selector)
            .timeout(server_timeout)
            .page_size(LIST_PAGE);
        let (sts, sts_w) = reflector::store();
        let (pods, pods_w) = reflector::store();
        let (templates, templates_w) = reflector::store();
        let ready = [
            Arc::new(AtomicBool::new(false)),
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
                    .default_backoff()
                    .modify(|s| slim_meta(&mut s.metadata)),
                ),
                ready[0].clone(),
                trigger.clone(),
                set_inputs,
            )),
            tokio::spawn(follow(
                reflector::reflector(
                    pods_w,
                    watcher(
                        Api::<Pod>::namespaced(client.clone(), &scope.namespace),
                        cfg.clone(),
                    )
                    .default_backoff()
                    .modify(slim_pod),
                ),
                ready[1].clone(),
                trigger.clone(),
                worker_inputs,
            )),
            tokio::spawn(follow(
                reflector::reflector(
                    templates_w,
                    watcher(
                        Api::<PodTemplate>::namespaced(client.clone(), &scope.namespace),
                        cfg,
                    )
                    .default_backoff()
                    .modify(|t| slim_meta(&mut t.metadata)),
                ),
                ready[2].clone(),
                trigger.clone(),
                template_inputs,
            )),
        ];
        Cache {
            scope,
            sts,
            pods,
            templates,
            ready,
            tasks,
            trigger,
            nodes: Default::default(),
            deleted: Default::default(),
        }
    }

    /// Also keeps the Kubernetes nodes (slimmed, see `slim_node`: of their labels, those of
    /// KEYS), and wakes a pass when a node's labels, taints, cordon or condition states change.
    /// A watch that keeps fewer label keys is replaced by one keeping both sets (a new listing).
    /// Needs the node reader ClusterRole; without it the watch logs why and retries, and passes
    /// read nodes themselves.
    pub fn follow_nodes(&mut self, client: &kube::Client, keys: &LabelKeys) {
        let nodes = self.nodes.get_mut().unwrap_or_else(|e| e.into_inner());
        Cache::widen(nodes, client, keys, &self.trigger);
    }

    /// Starts the node watch in NODES unless it keeps every label key of KEYS already; a new one
    /// keeps those it kept too.
    fn widen(
        nodes: &mut Option<NodeWatch>,
        client: &kube::Client,
        keys: &LabelKeys,
        trigger: &Arc<Notify>,
    ) {
        if nodes.as_ref().is_some_and(|w| keys.is_subset(&w.keys)) {
            return;
        }
        let mut kept = keys.clone();
        if let Some(w) = nodes.as_ref() {
            kept.extend(w.keys.iter().cloned());
        }
        let kept = Arc::new(kept);
        let server_timeout = (crate::k8s::API_TIMEOUT.as_secs() * 3 / 4) as u32;
        let (store, writer) = reflector::store();
        let ready = Arc::new(AtomicBool::new(false));
        let slim_keys = kept.clone();
        let stream = reflector::reflector(
            writer,
            watcher(
                Api::<Node>::all(client.clone()),
                watcher::Config::default()
                    .timeout(server_timeout)
                    .page_size(LIST_PAGE),
            )
            .default_backoff()
            .modify(move |n| slim_node(n, &slim_keys)),
        );
        let task = tokio::spawn(follow(
            stream,
            ready.clone(),
            trigger.clone(),
            placement_inputs,
        ));
        // The watch it replaces (if any) stops when dropped here.
        *nodes = Some(NodeWatch {
            client: client.clone(),
            store,
            ready,
            task,
            keys: kept,
        });
    }

    /// The Kubernetes nodes of CACHE (slimmed: their labels of KEYS, taints, cordon,
    /// conditions), shared with the store, not copied: at 10,000 nodes a copy per pass is
    /// hundreds of MB. A watch that does not keep every key of KEYS is replaced by one that does:
    /// its nodes are `Listing` until it has listed them (never a node without a label it has).
    pub fn nodes(cache: Option<&Cache>, keys: &LabelKeys) -> Held<Vec<Arc<Node>>> {
        let Some(c) = cache else {
            return Held::NotWatched;
        };
        let mut nodes = c.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let Some(w) = nodes.as_ref() else {
            return Held::NotWatched;
        };
        if !keys.is_subset(&w.keys) {
            tracing::info!(
                "the Kubernetes nodes are listed again, keeping their labels {:?} too (a pass reads them)",
                keys.difference(&w.keys).collect::<Vec<_>>()
            );
            let client = w.client.clone();
            Cache::widen(&mut nodes, &client, keys, &c.trigger);
            return Held::Listing;
        }
        match w.ready.load(Ordering::SeqCst) {
            false => Held::Listing,
            true => Held::Ready(w.store.state()),
        }
    }

    /// The PodTemplates of the scope (perNode NodeSets).
    pub fn templates(&self) -> Vec<PodTemplate> {
        self.templates
            .state()
            .iter()
            .map(|t| (**t).clone())
            .collect()
    }

    /// True when this cache watches SCOPE and its stores hold a complete listing.
    pub fn serves(&self, scope: &Scope) -> bool {
        self.scope == *scope && !self.listing()
    }

    /// True while a store of the workers (StatefulSets, pods, PodTemplates) makes its first
    /// listing.
    pub fn listing(&self) -> bool {
        !self.ready.iter().all(|r| r.load(Ordering::SeqCst))
    }

    /// The scope's StatefulSets once their store holds a complete listing (one per NodeSet: it
    /// comes long before the pods' at thousands of workers), shared with the store.
    pub fn listed_stateful_sets(&self) -> Option<Vec<Arc<StatefulSet>>> {
        self.ready[0]
            .load(Ordering::SeqCst)
            .then(|| self.sts.state())
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The scope's StatefulSets, shared with the store (a pass copies none).
    pub fn stateful_sets(&self) -> Vec<Arc<StatefulSet>> {
        self.sts.state()
    }

    /// The scope's pods, those this process deleted shown as deleting even before the watch
    /// brings their deletion (read-after-write without a LIST: Kubernetes controllers'
    /// "expectations"), so a pass right after one that deleted never counts them available.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        let mut deleted = self.deleted.lock().unwrap_or_else(|e| e.into_inner());
        with_deletions(self.pods.state(), &mut deleted)
    }

    /// Pod UID was deleted by this process: `pods` shows it deleting from now on.
    pub fn expect_deleted(&self, uid: &str) {
        self.deleted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid.to_string(), std::time::Instant::now());
    }
}

/// What passes read of a node: its labels, taints and cordon (placement, blocks) and the states
/// of its conditions (health), not their heartbeats.
fn placement_inputs(n: &Node) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    n.metadata.labels.hash(&mut h);
    let spec = n.spec.as_ref();
    spec.and_then(|s| s.unschedulable).hash(&mut h);
    drain_request(&n.metadata).hash(&mut h);
    for t in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten() {
        (&t.key, &t.value, &t.effect).hash(&mut h);
    }
    let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
    for c in conditions.into_iter().flatten() {
        (&c.type_, &c.status).hash(&mut h);
    }
    Some(h.finish())
}

/// What passes read of a PodTemplate: its labels (revision, replicas annotation aside) and
/// annotations, and its pod template.
fn template_inputs(t: &PodTemplate) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    let m = &t.metadata;
    (&m.name, &m.uid, &m.labels, &m.annotations, &m.generation).hash(&mut h);
    serde_json::to_string(&t.template).ok().hash(&mut h);
    Some(h.finish())
}

/// What the decisions read of a worker pod (`observe::worker`): its name, uid, NodeSet and
/// revision labels, Ready condition, deletion, creation, node and drain request. The daemon's own writes to a
/// pod (sync's `slurmops.dev/slurm-node` condition and busy label) change none of it, so they
/// never wake a pass; kubelet heartbeats of other conditions neither.
fn worker_inputs(p: &Pod) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    let m = &p.metadata;
    let at = |t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.as_ref().map(|t| t.0.as_second())
    };
    (
        &m.name,
        &m.uid,
        at(&m.deletion_timestamp),
        at(&m.creation_timestamp),
    )
        .hash(&mut h);
    let labels = m.labels.as_ref();
    for k in [
        LABEL_NODESET,
        crate::vocab::LABEL_REVISION,
        "controller-revision-hash",
    ] {
        labels.and_then(|l| l.get(k)).hash(&mut h);
    }
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .hash(&mut h);
    crate::rollout::pod_ready(p).hash(&mut h);
    drain_request(m).hash(&mut h);
    Some(h.finish())
}

/// The drain requests (`slurmops.dev/drain`, Slinky's) an object carries: a change to one wakes
/// a pass.
fn drain_request(
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> [Option<&String>; 3] {
    let a = m.annotations.as_ref();
    crate::controller::features::sync::health::REQUEST_ANNOTATIONS.map(|k| a.and_then(|a| a.get(k)))
}

/// What the decisions read of a worker StatefulSet (`observe::views`): replicas, generation,
/// the revisions its controller reports, and the canary record.
fn set_inputs(s: &StatefulSet) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    let m = &s.metadata;
    let deleting = m.deletion_timestamp.is_some();
    (&m.name, &m.uid, &m.generation, deleting).hash(&mut h);
    m.annotations
        .as_ref()
        .and_then(|a| a.get(crate::vocab::ANNOTATION_CANARY))
        .hash(&mut h);
    s.spec.as_ref().and_then(|x| x.replicas).hash(&mut h);
    let st = s.status.as_ref();
    st.and_then(|x| x.observed_generation).hash(&mut h);
    st.and_then(|x| x.update_revision.as_ref()).hash(&mut h);
    st.and_then(|x| x.current_revision.as_ref()).hash(&mut h);
    Some(h.finish())
}

/// Drives one reflector: marks the store ready after the initial listing, wakes the next pass
/// when an object appears, goes, or changes in what a pass reads of it (INPUTS: a digest of that),
/// and keeps going through errors (the watcher backs off and re-lists by itself; each distinct
/// error is logged once).
async fn follow<K, S>(
    stream: S,
    ready: Arc<AtomicBool>,
    trigger: Arc<Notify>,
    inputs: fn(&K) -> Option<u64>,
) where
    K: kube::Resource,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut last_error = String::new();
    // Object (namespace/name) → the digest of what passes read of it, as last seen.
    let mut seen: std::collections::HashMap<String, Option<u64>> = Default::default();
    let id = |o: &K| {
        let m = o.meta();
        format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or_default(),
            m.name.as_deref().unwrap_or_default()
        )
    };
    while let Some(e) = stream.next().await {
        match e {
            Ok(watcher::Event::InitApply(o)) => {
                seen.insert(id(&o), inputs(&o));
            }
            Ok(watcher::Event::InitDone) => {
                ready.store(true, Ordering::SeqCst);
                trigger.notify_one();
            }
            Ok(watcher::Event::Apply(o)) => {
                if seen.insert(id(&o), inputs(&o)) != Some(inputs(&o)) {
                    trigger.notify_one();
                }
            }
            Ok(watcher::Event::Delete(o)) => {
                seen.remove(&id(&o));
                trigger.notify_one();
            }
            Ok(watcher::Event::Init) => seen.clear(),
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

#[cfg(test)]
mod tests;
