//! Observe: the cluster's worker StatefulSets and pods (from the watch cache when the daemon runs
//! one, else one LIST each, never one per NodeSet), Slurm's nodes and jobs, and what else the
//! decisions need (Kubernetes nodes and their block labels, reservations, the sidecar's
//! maintenance ConfigMap), read once per pass before anything is decided. Turns them into the
//! plain `Observation` that `decisions` works on; nothing is read between decide and act.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, PodTemplate};
use kube::api::{Api, ListParams};

use super::decide::{SetView, SlurmView, Worker};
pub use super::observation::{Observation, Reservations, SlurmUnknown};
use super::watch::Cache;
pub use super::watch::Scope;
use crate::render::names::{ANNOTATION_CANARY, LABEL_NODESET, LABEL_REVISION};
use crate::rollout::pod_ready;
use crate::slurm::{SlurmError, SlurmNodes};
use crate::spec::ClusterFile;
use crate::spec::window::{self, WindowMode};

/// What a pass must read besides the workers and Slurm's nodes and jobs, from cluster.yaml.
#[derive(Debug, Clone, Default)]
pub struct Needs {
    /// `spec.topology`: the Kubernetes node label naming a block, and its NodeSets.
    pub blocks: Option<(String, BTreeSet<String>)>,
    /// A NodeSet waits for maintenance windows: Slurm's reservations.
    pub reservations: bool,
    /// The ConfigMap through which slurmctld's sidecar makes reservations (Slurm 24.11).
    pub sidecar: Option<String>,
}

impl Needs {
    pub fn of(c: &ClusterFile) -> Needs {
        let reservations = c
            .spec
            .node_sets
            .iter()
            .any(|n| n.update.window != WindowMode::None);
        Needs {
            blocks: c.spec.topology.as_ref().map(|t| {
                let b = &t.block;
                (b.node_label.clone(), b.node_sets.iter().cloned().collect())
            }),
            reservations,
            sidecar: (reservations && window::reserves_through_sidecar(&c.spec))
                .then(|| crate::render::names::Names::new(c).maintenance()),
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
            (sts, pods)
        }
    };
    let lp = ListParams::default().labels(&scope.selector);
    let templates: BTreeMap<String, PodTemplate> =
        Api::<PodTemplate>::namespaced(client.clone(), &scope.namespace)
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter_map(|t| Some((t.metadata.name.clone()?, t)))
            .collect();
    let nodes = match templates.is_empty() {
        true => Ok(Vec::new()),
        false => Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| {
                format!("cannot list Kubernetes nodes ({e}): a perNode NodeSet needs the node reader ClusterRole (slurmops install --print grants it)")
            }),
    };
    let slurm_view = match slurm {
        Some(s) => read_slurm(s).await.map_err(SlurmUnknown::from),
        None => Err(SlurmUnknown::NotConfigured),
    };
    let mut sets = views(&sts, &pods);
    for (name, v) in managed_views(&templates, &pods) {
        // A NodeSet that just became perNode: its StatefulSet's workers leave first.
        sets.entry(name).or_insert(v);
    }
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let blocks = match &needs.blocks {
        Some((label, in_blocks)) if slurm_view.is_ok() => {
            let hosts: BTreeSet<String> = sets
                .values()
                .filter(|s| in_blocks.contains(&s.name))
                .flat_map(|s| s.workers.iter().filter_map(|w| w.host.clone()))
                .collect();
            host_blocks(client, label, &hosts).await.map_err(|e| {
                format!(
                    "cannot read the Kubernetes nodes' {label} labels ({e}): workers join their blocks once they can be read (slurmops needs get on nodes: install's node reader ClusterRole)"
                )
            })
        }
        _ => Ok(BTreeMap::new()),
    };
    let reservations = match (slurm, needs.reservations, &slurm_view) {
        (Some(s), true, Ok(_)) => reservations(client, s, &scope.namespace, needs, now).await,
        _ => Ok(Reservations::default()),
    };
    Ok(Observation {
        sets,
        templates,
        nodes,
        slurm: slurm_view,
        blocks,
        reservations,
        now,
    })
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
        let asked = super::maint::asked(&data, now);
        let new: Vec<_> = asked
            .into_iter()
            .filter(|a| all.iter().all(|r| r.name != a.name))
            .collect();
        all.extend(new);
    }
    Ok(Reservations { all, in_slurm })
}

/// The value of LABEL on each Kubernetes node of HOSTS that carries it (one GET per node; a node
/// that is gone is left out). Needs the optional Node reader ClusterRole.
async fn host_blocks(
    client: &kube::Client,
    label: &str,
    hosts: &BTreeSet<String>,
) -> Result<BTreeMap<String, String>, kube::Error> {
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

/// Slurm's nodes and jobs: two requests, whatever the size of the cluster.
pub async fn read_slurm<S: SlurmNodes>(s: &S) -> Result<SlurmView, SlurmError> {
    let nodes = s.all_nodes().await?;
    let jobs = s.all_jobs().await?;
    Ok(SlurmView::new(nodes, jobs))
}

/// The NodeSets' views: each StatefulSet with the pods carrying its NodeSet label.
pub fn views(sts: &[StatefulSet], pods: &[Pod]) -> BTreeMap<String, SetView> {
    let by_set = by_node_set(pods);
    sts.iter()
        .filter_map(|s| {
            let name = s.metadata.name.clone()?;
            let pods = by_set.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
            Some((name.clone(), view(name, s, pods)))
        })
        .collect()
}

fn by_node_set(pods: &[Pod]) -> BTreeMap<&str, Vec<&Pod>> {
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
pub fn managed_views(
    templates: &BTreeMap<String, PodTemplate>,
    pods: &[Pod],
) -> BTreeMap<String, SetView> {
    let by_set = by_node_set(pods);
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
            let replicas = super::per_node::managed_replicas(t)
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
        name,
    })
}
