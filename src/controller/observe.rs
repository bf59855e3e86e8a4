//! Observe: the cluster's worker StatefulSets, pods and PodTemplates and the Kubernetes nodes
//! (from the daemon's watch caches, else one LIST each, never one per NodeSet), Slurm's nodes
//! (asked again with `update_time`) and its jobs only when a decision needs them (see
//! [`JobsNeed`]), and what else the decisions need (block labels, reservations, the sidecar's
//! maintenance ConfigMap), read once per pass before anything is decided. Turns them into the
//! plain `Observation` that `decisions` works on; nothing is read between decide and act.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, PodTemplate};
use kube::api::{Api, ListParams};

use super::decide::{SetView, SlurmView, Worker};
pub use super::observation::{Observation, Reservations, SlurmUnknown};
pub use super::watch::Scope;
use super::watch::{Cache, LabelKeys};
use crate::cluster::ClusterFile;
use crate::cluster::window::WindowMode;
use crate::render::names::{ANNOTATION_CANARY, LABEL_NODESET, LABEL_REVISION};
use crate::rollout::pod_ready;
use crate::slurm::{SlurmError, SlurmNodes};

/// What a pass must read besides the workers and Slurm's nodes and jobs, from cluster.yaml.
#[derive(Debug, Clone, Default)]
pub struct Needs {
    /// `spec.topology`: each topology's Kubernetes node label naming a unit (block, leaf
    /// switch), and its NodeSets.
    pub blocks: Vec<(String, BTreeSet<String>)>,
    /// A NodeSet waits for maintenance windows: Slurm's reservations.
    pub reservations: bool,
    /// The ConfigMap through which slurmctld's sidecar makes reservations (Slurm 24.11).
    pub sidecar: Option<String>,
    /// Slurm's job queue: the one heavy read (`jobs/state/`, then the jobs that changed).
    pub jobs: JobsNeed,
    /// The workers cluster.yaml wants of each NodeSet (None: perNode, as many as nodes fit);
    /// a NodeSet missing here is being removed.
    pub wanted: BTreeMap<String, Option<u32>>,
    /// Worker sync runs: the Kubernetes nodes' health under these rules (`policy.nodeHealth`).
    pub health: Option<Option<crate::cluster::policy::NodeHealth>>,
}

/// When a pass reads Slurm's job queue. Whether a node may run jobs is in its state (ALLOCATED,
/// MIXED, COMPLETING) and a drained node is told by its state alone, so the queue is read only
/// for what needs the jobs themselves: autoscale's pending demand, a canary's validation job,
/// `plan`'s jobs touched, and the jobs a moving worker waits for (named in status, Events and
/// apply's output).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum JobsNeed {
    /// Every pass (autoscale, canaries, previews).
    Always,
    /// Only while a worker that leaves, rolls or is drained is busy or unknown to Slurm.
    #[default]
    WhenMoving,
}

impl Needs {
    pub fn of(c: &ClusterFile) -> Needs {
        let reservations = c
            .spec
            .node_sets
            .iter()
            .any(|n| n.update.window != WindowMode::None);
        Needs {
            blocks: c
                .spec
                .topology
                .iter()
                .flat_map(|t| t.placings())
                .map(|p| {
                    (
                        p.node_label.to_string(),
                        p.node_sets.iter().cloned().collect(),
                    )
                })
                .collect(),
            reservations,
            sidecar: (reservations && c.spec.reserves_through_sidecar())
                .then(|| crate::render::names::Names::new(c).maintenance()),
            wanted: c
                .spec
                .node_sets
                .iter()
                .map(|n| {
                    let count = (!n.replicas.per_node()).then(|| n.replicas.count());
                    (n.name.clone(), count)
                })
                .collect(),
            jobs: match !c.spec.policy.active_checks.is_empty()
                || c.spec
                    .node_sets
                    .iter()
                    .any(|n| n.autoscale.is_some() || n.update.canary.is_some())
            {
                true => JobsNeed::Always,
                false => JobsNeed::WhenMoving,
            },
            health: Some(c.spec.policy.node_health.clone()),
        }
    }
}

/// Reads the scope's StatefulSets and pods (cache or LIST), Slurm (when given) and whatever else
/// NEEDS names: everything a pass decides on, once.
pub async fn observe<S: SlurmNodes>(
    client: &kube::Client,
    scope: &Scope,
    cache: Option<&Cache>,
    slurm: Option<&S>,
    needs: &Needs,
) -> Result<Observation, kube::Error> {
    let (sts, pods, templates) = read_workloads(client, scope, cache).await?;
    // The node cache serves perNode placement and block labels alike; without it, one LIST.
    let held = Cache::nodes(cache, &label_keys(needs, &templates));
    // A node watch still making its first listing: wait for it rather than LIST every Node.
    let listing = held.listing();
    let cached_nodes = held.ready();
    let templates_empty = templates.is_empty();
    // Read when placement or worker sync needs them, once for both.
    let read = match (templates_empty && needs.health.is_none(), &cached_nodes) {
        (true, _) => Ok(Vec::new()),
        (false, Some(n)) => Ok(n.clone()),
        (false, None) if listing => Err(LISTING.to_string()),
        (false, None) => Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| shared(l.items))
            .map_err(|e| {
                format!("cannot list Kubernetes nodes ({e}): a perNode NodeSet, cordons and node health need the node reader ClusterRole (slurmops install --print grants it)")
            }),
    };
    let health = match &needs.health {
        None => Ok(BTreeMap::new()),
        Some(rules) => read
            .as_ref()
            .map(|n| crate::controller::features::sync::health::problems(n, rules.as_ref()))
            .map_err(Clone::clone),
    };
    let requeue = match (&needs.health, &read) {
        (Some(rules), Ok(n)) => {
            crate::controller::features::sync::health::requeue_hosts(n, rules.as_ref())
        }
        _ => Default::default(),
    };
    let nodes = match templates_empty {
        true => Ok(Vec::new()),
        false => read,
    };
    let sets = views(&sts, &templates, &pods);
    let slurm_started = std::time::Instant::now();
    let slurm_view = match slurm {
        Some(s) => read_slurm(s, |nodes| jobs_needed(needs, &sets, nodes))
            .await
            .map_err(SlurmUnknown::from),
        None => Err(SlurmUnknown::NotConfigured),
    };
    let mut slurm_time = slurm_started.elapsed();
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let blocks = match slurm_view.is_ok() {
        true => read_blocks(client, needs, &sets, cached_nodes.as_deref(), listing).await,
        false => Ok(BTreeMap::new()),
    };
    let reserved_started = std::time::Instant::now();
    let reservations = match (slurm, needs.reservations, &slurm_view) {
        (Some(s), true, Ok(_)) => reservations(client, s, &scope.namespace, needs, now).await,
        _ => Ok(Reservations::default()),
    };
    slurm_time += reserved_started.elapsed();
    Ok(Observation {
        sets,
        templates,
        nodes,
        slurm: slurm_view,
        blocks,
        reservations,
        now,
        slurm_time,
        nodes_listing: listing && (!templates_empty || !needs.blocks.is_empty()),
        pods,
        health,
        requeue,
    })
}

/// The scope's StatefulSets, worker pods and PodTemplates: from the watch cache when it serves
/// the scope, else one LIST per kind.
async fn read_workloads(
    client: &kube::Client,
    scope: &Scope,
    cache: Option<&Cache>,
) -> Result<Workloads, kube::Error> {
    let (sts, pods) = match cache.filter(|c| c.serves(scope)) {
        Some(c) => (c.stateful_sets(), c.pods()),
        None => {
            let lp = ListParams::default().labels(&scope.selector);
            let sts = Api::<StatefulSet>::namespaced(client.clone(), &scope.namespace)
                .list(&lp)
                .await?
                .items;
            let pods = Api::<Pod>::namespaced(client.clone(), &scope.namespace)
                .list(&lp)
                .await?
                .items;
            (shared(sts), shared(pods))
        }
    };
    let templates = match cache.filter(|c| c.serves(scope)) {
        Some(c) => c.templates(),
        None => {
            let lp = ListParams::default().labels(&scope.selector);
            Api::<PodTemplate>::namespaced(client.clone(), &scope.namespace)
                .list(&lp)
                .await?
                .items
        }
    };
    let templates = templates
        .into_iter()
        .filter_map(|t| Some((t.metadata.name.clone()?, t)))
        .collect();
    Ok((sts, pods, templates))
}

/// ITEMS, each shared, in a list of their number. (`items.into_iter().map(Arc::new).collect()`
/// would reuse the items' own allocation for the pointers, and keep it: a whole Pod's size for
/// each 8-byte pointer, 10,000 times in a LIST of 10,000 pods.)
fn shared<T>(items: Vec<T>) -> Vec<Arc<T>> {
    let mut out = Vec::with_capacity(items.len());
    out.extend(items.into_iter().map(Arc::new));
    out
}

/// The scope's workloads: StatefulSets, pods, PodTemplates by name.
type Workloads = (
    Vec<Arc<StatefulSet>>,
    Vec<Arc<Pod>>,
    BTreeMap<String, PodTemplate>,
);

/// The Kubernetes node label keys a pass reads: the block label, and those perNode placement
/// reads for each live PodTemplate (`per_node::label_keys`).
fn label_keys(needs: &Needs, templates: &BTreeMap<String, PodTemplate>) -> LabelKeys {
    let placement = templates
        .values()
        .filter_map(|t| t.template.as_ref()?.spec.as_ref())
        .flat_map(super::features::per_node::label_keys);
    let block = needs.blocks.iter().map(|(label, _)| label.as_str());
    placement.chain(block).map(str::to_string).collect()
}

/// The node label keys cluster.yaml C names (its block label, its NodeSets' nodeSelector and
/// required node affinity): those the node watch keeps from its start (a pass that reads another
/// has the nodes listed again, keeping it too).
pub fn node_label_keys(c: &ClusterFile) -> LabelKeys {
    let mut keys: LabelKeys = c
        .spec
        .topology
        .iter()
        .flat_map(|t| t.placings())
        .map(|p| p.node_label.to_string())
        .collect();
    for n in &c.spec.node_sets {
        let pod = k8s_openapi::api::core::v1::PodSpec {
            node_selector: Some(n.pod.node_selector.clone()),
            affinity: n.pod.affinity.clone(),
            ..Default::default()
        };
        keys.extend(super::features::per_node::label_keys(&pod).map(str::to_string));
    }
    keys
}

/// Said while the node watch makes its first listing.
const LISTING: &str = "the Kubernetes nodes are not read yet (their watch is making its first listing): placement waits for it";

/// By topology label, its value on each Kubernetes node the workers of that topology's NodeSets
/// run on (when NEEDS asks for them), from CACHED nodes or their reads.
async fn read_blocks(
    client: &kube::Client,
    needs: &Needs,
    sets: &BTreeMap<String, SetView>,
    cached_nodes: Option<&[Arc<Node>]>,
    listing: bool,
) -> Result<super::observation::HostUnits, String> {
    if needs.blocks.is_empty() {
        return Ok(BTreeMap::new());
    }
    if listing {
        return Err(LISTING.to_string());
    }
    let mut out = BTreeMap::new();
    for (label, placed) in &needs.blocks {
        let hosts: BTreeSet<String> = sets
            .values()
            .filter(|s| placed.contains(&s.name))
            .flat_map(|s| s.workers.iter().filter_map(|w| w.host.clone()))
            .collect();
        let units = host_blocks(client, cached_nodes, label, &hosts).await.map_err(|e| {
            format!(
                "cannot read the Kubernetes nodes' {label} labels ({e}): workers join their topology once they can be read (slurmops needs get on nodes: install's node reader ClusterRole)"
            )
        })?;
        out.insert(label.clone(), units);
    }
    Ok(out)
}

/// Slurm's reservations, then those asked of slurmctld's sidecar that Slurm does not hold yet.
async fn reservations<S: SlurmNodes>(
    client: &kube::Client,
    slurm: &S,
    namespace: &str,
    needs: &Needs,
    now: i64,
) -> Result<Reservations, String> {
    let mut all = slurm
        .reservations()
        .await
        .map_err(|e| format!("cannot read Slurm's reservations: {e}"))?;
    let in_slurm = all.len();
    if let Some(cm) = &needs.sidecar {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let m = cms
            .get_opt(cm)
            .await
            .map_err(|e| format!("cannot read ConfigMap {cm}: {e}"))?;
        let data = m.and_then(|m| m.data).unwrap_or_default();
        let asked = super::features::windows::asked(&data, now);
        let new: Vec<_> = asked
            .into_iter()
            .filter(|a| all.iter().all(|r| r.name != a.name))
            .collect();
        all.extend(new);
    }
    Ok(Reservations { all, in_slurm })
}

/// The value of LABEL on each Kubernetes node of HOSTS that carries it (a node that is gone is
/// left out): from CACHED nodes when the daemon watches them, else one GET per node. Needs the
/// optional Node reader ClusterRole.
async fn host_blocks(
    client: &kube::Client,
    cached: Option<&[std::sync::Arc<Node>]>,
    label: &str,
    hosts: &BTreeSet<String>,
) -> Result<BTreeMap<String, String>, kube::Error> {
    if let Some(nodes) = cached {
        return Ok(nodes
            .iter()
            .filter(|n| n.metadata.name.as_ref().is_some_and(|h| hosts.contains(h)))
            .filter_map(|n| {
                let v = n.metadata.labels.as_ref()?.get(label)?;
                Some((n.metadata.name.clone()?, v.clone()))
            })
            .collect());
    }
    let api = Api::<Node>::all(client.clone());
    let mut out = BTreeMap::new();
    for h in hosts {
        let value = api
            .get_opt(h)
            .await?
            .and_then(|n| n.metadata.labels?.get(label).cloned());
        if let Some(v) = value {
            out.insert(h.clone(), v);
        }
    }
    Ok(out)
}

/// Slurm's nodes, and its jobs when NEED says so once the nodes are known: one or two requests,
/// whatever the size of the cluster (each answered in a few hundred bytes while nothing changed).
pub async fn read_slurm<S: SlurmNodes>(
    s: &S,
    need: impl FnOnce(&BTreeMap<String, crate::slurm::Node>) -> bool,
) -> Result<SlurmView, SlurmError> {
    let nodes = s.all_nodes().await?;
    read_slurm_with(s, nodes, need).await
}

/// As [`read_slurm`], with NODES already read (the early pass reads only the nodes it decides
/// on: `controller::early`).
pub async fn read_slurm_with<S: SlurmNodes>(
    s: &S,
    nodes: crate::slurm::Nodes,
    need: impl FnOnce(&BTreeMap<String, crate::slurm::Node>) -> bool,
) -> Result<SlurmView, SlurmError> {
    let needed = need(&nodes);
    let known = match needed {
        true => match s.known_jobs().await {
            Ok(k) => k,
            // A queue too slow to read blinds nothing that the node states tell: rollouts go
            // on, what needs the jobs waits (see `SlurmView::jobs_error`).
            Err(e @ SlurmError::QueueUnknown { .. }) => {
                let mut view = SlurmView::without_jobs(nodes, e.to_string());
                view.jobs_soon = true;
                return Ok(view);
            }
            Err(
                e @ (SlurmError::Timeout { .. }
                | SlurmError::TooLarge { .. }
                | SlurmError::TooManyJobs { .. }),
            ) => {
                return Ok(SlurmView::without_jobs(nodes, e.to_string()));
            }
            Err(e) => return Err(e),
        },
        false => crate::slurm::Known::default(),
    };
    let submitter = s.submitter();
    // Read job by job since a start, or past the cap: what is read decides what it can.
    let view = match known.complete() {
        true => SlurmView::shared(nodes, known.jobs),
        false => SlurmView::partial(nodes, known),
    };
    let mut view = view.canaries_of(submitter.as_deref());
    view.jobs_read = needed;
    // A running check job's report (its comment) changes no state the kept queue follows: each
    // such job of ours is read again (a few, bounded by the checks' maxConcurrent), so that a
    // failed one, waiting for its worker to be drained, is judged now.
    let reports: Vec<u64> = view.unreported_checks(MAX_REPORT_READS);
    let mut fresh = Vec::new();
    for id in reports {
        if let Some(j) = s.job(id).await? {
            fresh.push(j);
        }
    }
    view.refresh_checks(fresh);
    Ok(view)
}

/// Running check jobs read again each pass, at most.
const MAX_REPORT_READS: usize = 64;

/// Whether the pass reads the job queue (see [`JobsNeed`]): a worker of SETS may move (it
/// leaves in a scale-in or a removal, its NodeSet has another revision, or its Slurm node is
/// drained or draining) while NODES say it is busy or do not know it.
pub fn jobs_needed(
    needs: &Needs,
    sets: &BTreeMap<String, SetView>,
    nodes: &BTreeMap<String, crate::slurm::Node>,
) -> bool {
    if needs.jobs == JobsNeed::Always {
        return true;
    }
    sets.values().any(|s| {
        let staying = s.workers.iter().filter(|w| !w.deleting).count();
        let wanted = needs.wanted.get(&s.name);
        s.workers.iter().any(|w| {
            let node = nodes.get(&w.name);
            let leaving = match wanted {
                None => true,
                // perNode: which node stops fitting is placement's to say; any busy one may.
                Some(None) => true,
                // slurmops picks which workers leave a scale-in (idle ones first).
                Some(Some(n)) if s.managed => staying > *n as usize,
                Some(Some(n)) => w.ordinal.is_some_and(|o| o >= *n),
            };
            let outdated = s.update_revision.as_ref().is_some_and(|r| *r != w.revision);
            let drained = node.is_some_and(|n| n.state.has("DRAIN"));
            (leaving || outdated || drained) && node.is_none_or(|n| n.state.is_busy())
        })
    })
}

/// The NodeSets' views: each StatefulSet, and each perNode NodeSet's PodTemplate, with the pods
/// carrying its NodeSet label (the pods are sorted by NodeSet once).
pub fn views(
    sts: &[Arc<StatefulSet>],
    templates: &BTreeMap<String, PodTemplate>,
    pods: &[Arc<Pod>],
) -> BTreeMap<String, SetView> {
    let by_set = by_node_set(pods);
    let mut sets: BTreeMap<String, SetView> = sts
        .iter()
        .filter_map(|s| {
            let name = s.metadata.name.clone()?;
            let pods = by_set.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
            Some((name.clone(), view(name, s, pods)))
        })
        .collect();
    for (name, v) in managed_views(templates, &by_set) {
        // A NodeSet that just became perNode: its StatefulSet's workers leave first.
        sets.entry(name).or_insert(v);
    }
    sets
}

fn by_node_set(pods: &[Arc<Pod>]) -> BTreeMap<&str, Vec<&Pod>> {
    let mut by_set: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for p in pods {
        if let Some(set) = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_NODESET))
        {
            by_set.entry(set).or_default().push(p);
        }
    }
    by_set
}

/// perNode NodeSets: the PodTemplate's revision and the pods slurmops made from it (`replicas`
/// is their number until the pass places them).
fn managed_views(
    templates: &BTreeMap<String, PodTemplate>,
    by_set: &BTreeMap<&str, Vec<&Pod>>,
) -> BTreeMap<String, SetView> {
    templates
        .iter()
        .map(|(name, t)| {
            let pods = by_set.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
            let revision = t
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_REVISION))
                .cloned();
            let workers: Vec<Worker> = pods.iter().filter_map(|p| worker(p)).collect();
            // The count autoscale set, else the workers there are (the pass sets what git wants).
            let replicas = super::features::per_node::managed_replicas(t)
                .unwrap_or(workers.iter().filter(|w| !w.deleting).count() as u32);
            let v = SetView {
                name: name.clone(),
                replicas,
                update_revision: revision,
                managed: true,
                canary: canary_record(&t.metadata),
                current_revision: None,
                workers,
            };
            (name.clone(), v)
        })
        .collect()
}

fn view(name: String, s: &StatefulSet, pods: &[&Pod]) -> SetView {
    let replicas = s.spec.as_ref().and_then(|x| x.replicas).unwrap_or(1).max(0) as u32;
    let status = s.status.clone().unwrap_or_default();
    // The update revision only means something once the controller saw this generation.
    let seen = status.observed_generation.unwrap_or(0) >= s.metadata.generation.unwrap_or(0);
    SetView {
        name,
        replicas,
        update_revision: status.update_revision.filter(|_| seen),
        managed: false,
        canary: canary_record(&s.metadata),
        current_revision: status.current_revision.filter(|_| seen),
        workers: pods.iter().filter_map(|p| worker(p)).collect(),
    }
}

/// The canary record annotation, when it is of a sane size (it is read from the cluster).
fn canary_record(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<String> {
    m.annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_CANARY))
        .filter(|v| v.len() <= 16 * 1024)
        .cloned()
}

/// One worker pod as `decide` sees it.
pub fn worker(p: &Pod) -> Option<Worker> {
    let name = p.metadata.name.clone()?;
    let label = |k: &str| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(k))
            .cloned()
            .unwrap_or_default()
    };
    Some(Worker {
        ordinal: name.rsplit_once('-').and_then(|(_, i)| i.parse().ok()),
        uid: p.metadata.uid.clone().unwrap_or_default(),
        revision: Some(label("controller-revision-hash"))
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| label(LABEL_REVISION)),
        ready: pod_ready(p),
        deleting: p.metadata.deletion_timestamp.is_some(),
        created: p
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
        host: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        checks: super::mark::marks(p),
        name,
    })
}

#[cfg(test)]
mod tests;
