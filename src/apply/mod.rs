//! `apply`: where git becomes cluster state. Server-side apply under one field manager, in the
//! rendered order; an ApplySet inventory (no CRDs) so that objects which left git are pruned,
//! and only those; StatefulSets whose immutable fields changed are recreated with orphan
//! propagation so no pod is killed. Everything that could refuse is checked before the first
//! write, so bad input never half-applies.

pub mod applyset;
pub mod compare;
mod drift;
mod errors;
mod handover;
pub mod health;
mod prune;
pub mod rbac;
mod report;
mod state_claim;
mod survey;
pub mod upgrade;
mod window;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, PropagationPolicy};
use serde_json::{Value as Json, json};

use crate::cluster::types::ClusterFile;
use crate::k8s::Connection;
pub use crate::k8s::Requests;
use crate::plan::IMMUTABLE_STS_FIELDS;
use crate::render::{Object, Rendered};
pub use drift::drift;
pub use errors::ApplyError;
pub(crate) use errors::api_err;
use errors::retry;
pub use prune::{NoSlurm, PruneGuard};
use prune::{check_scale_in, prune_set};
pub use report::Report;
use survey::execute;
pub(crate) use survey::verdict;
pub use survey::{Survey, Verdict, survey};

pub use crate::vocab::{
    MANAGER_APPLY as LEGACY_MANAGER, MANAGER_AUTOSCALE as AUTOSCALE_MANAGER,
    MANAGER_CANARY as CANARY_MANAGER, MANAGER_MAINTENANCE as MAINTENANCE_MANAGER,
};

/// The field manager apply writes cluster C's objects under (`slurmops/NAME`).
pub fn field_manager(c: &ClusterFile) -> String {
    crate::vocab::apply_manager(&c.metadata.name)
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub force_conflicts: bool,
    /// Prune more than the policy's share (or everything).
    pub allow_mass_prune: bool,
    /// Wait until what was applied is available.
    pub wait: Option<Duration>,
    /// Report drift (hand edits) without correcting it.
    pub detect_only: bool,
    /// Worker StatefulSets not to prune yet, though they left cluster.yaml (their workers still
    /// drain: the controller prunes them on a later pass).
    pub keep: BTreeSet<String>,
}

/// The objects to apply: rendered, with the live PDB version, ApplySet membership, ignore rules
/// applied, and the hash annotation of exactly that content.
pub fn desired(c: &ClusterFile, r: &Rendered, cluster: &Connection, live: &Members) -> Vec<Object> {
    let set_id = applyset::id(
        &applyset::parent_name(&c.metadata.name),
        &c.metadata.namespace,
    );
    r.objects
        .iter()
        .map(|o| {
            let mut o = o.clone();
            if let Some(v) = served_version(cluster, &o.kind) {
                o.api_version = v.to_string();
                o.body["apiVersion"] = json!(v);
            }
            o.body["metadata"]["labels"][applyset::LABEL_PART_OF] = json!(set_id);
            for rule in ignore_rules(c, &o) {
                compare::remove_pointer(&mut o.body, &rule);
            }
            // The hash describes the steady state: an autoscaled NodeSet's replicas belong to the
            // autoscaler, even in the first apply that sets their initial value.
            let mut steady = o.body.clone();
            let autoscaled = autoscaled(c, &o);
            if autoscaled {
                compare::remove_pointer(&mut steady, "/spec/replicas");
            }
            if autoscaled && live.get(&key(&o.kind, &o.name)).is_some() {
                o.body = steady.clone();
            }
            let h = compare::hash(&steady);
            o.body["metadata"]["annotations"][compare::HASH_ANNOTATION] = json!(h);
            o
        })
        .collect()
}

/// The apiVersion the cluster serves KIND at, for the kinds whose version differs between the
/// releases slurmops supports (rendered at the newest; the body is the same at both).
fn served_version<'a>(cluster: &'a Connection, kind: &str) -> Option<&'a str> {
    match kind {
        "PodDisruptionBudget" => Some(&cluster.pdb_api_version),
        "CronJob" => Some(&cluster.cron_job_api_version),
        _ => None,
    }
}

fn autoscaled(c: &ClusterFile, o: &Object) -> bool {
    o.kind == "StatefulSet"
        && c.spec
            .node_sets
            .iter()
            .any(|n| n.name == o.name && n.autoscale.is_some())
}

/// JSON pointers the policy leaves alone on O.
fn ignore_rules(c: &ClusterFile, o: &Object) -> Vec<String> {
    c.spec
        .policy
        .ignore_differences
        .iter()
        .filter(|r| r.kind == o.kind && r.name.as_ref().is_none_or(|n| *n == o.name))
        .flat_map(|r| r.json_pointers.clone())
        .collect()
}

fn key(kind: &str, name: &str) -> String {
    format!("{kind}/{name}")
}

/// Live members of the ApplySet (and the parent), by `Kind/name`.
pub struct Members {
    pub parent: Option<DynamicObject>,
    pub group_kinds: BTreeSet<String>,
    pub objects: BTreeMap<String, (String, DynamicObject)>,
}

impl Members {
    pub fn get(&self, k: &str) -> Option<&DynamicObject> {
        self.objects.get(k).map(|(_, o)| o)
    }
}

/// Reads the parent and lists each group-kind it (or the rendering) names, once.
pub async fn members(
    cluster: &Connection,
    c: &ClusterFile,
    r: &Rendered,
) -> Result<Members, ApplyError> {
    let ns = &c.metadata.namespace;
    let parent_name = applyset::parent_name(&c.metadata.name);
    let parent = cluster
        .get("v1", "ConfigMap", ns, &parent_name)
        .await
        .map_err(|e| api_err(&format!("ConfigMap/{parent_name}"), e))?;
    let recorded = parent
        .as_ref()
        .and_then(|p| p.metadata.annotations.as_ref())
        .and_then(|a| a.get(applyset::ANNOTATION_GROUP_KINDS))
        .map(|s| applyset::parse_group_kinds(s))
        .unwrap_or_default();
    let mut gks = recorded.clone();
    gks.extend(rendered_group_kinds(r, cluster));
    let set_id = applyset::id(&parent_name, ns);
    let selector = format!("{}={set_id}", applyset::LABEL_PART_OF);
    let mut objects = BTreeMap::new();
    for gk in &gks {
        let Some((api_version, kind)) =
            applyset::api_version_of(gk, &cluster.pdb_api_version, &cluster.cron_job_api_version)
        else {
            continue;
        };
        // Recorded once, since uninstalled: there is nothing of it left to list or prune.
        if kind == "ServiceMonitor" && !cluster.service_monitors {
            continue;
        }
        let items = cluster
            .list(&api_version, &kind, ns, &selector)
            .await
            .map_err(|e| api_err(&format!("list {kind}"), e))?;
        for mut o in items {
            handover::slim_managed_fields(&mut o);
            let name = o.metadata.name.clone().unwrap_or_default();
            objects.insert(key(&kind, &name), (api_version.clone(), o));
        }
    }
    Ok(Members {
        parent,
        group_kinds: recorded,
        objects,
    })
}

/// Every rendered kind is served by the cluster (checked before anything is read or written).
fn served(cluster: &Connection, r: &Rendered) -> Result<(), ApplyError> {
    check_served(cluster.service_monitors, r)
}

/// R's kinds against what a cluster serves: SERVICE_MONITORS, the Prometheus Operator's API.
pub fn check_served(service_monitors: bool, r: &Rendered) -> Result<(), ApplyError> {
    match r.objects.iter().find(|o| o.kind == "ServiceMonitor") {
        Some(o) if !service_monitors => Err(ApplyError::NoServiceMonitor {
            object: key(&o.kind, &o.name),
        }),
        _ => Ok(()),
    }
}

fn rendered_group_kinds(r: &Rendered, cluster: &Connection) -> BTreeSet<String> {
    r.objects
        .iter()
        .map(|o| {
            let v = served_version(cluster, &o.kind).unwrap_or(&o.api_version);
            applyset::group_kind(v, &o.kind)
        })
        .collect()
}

fn spec_field(body: &Json, f: &str) -> Json {
    body.pointer(&format!("/spec/{f}"))
        .cloned()
        .unwrap_or(Json::Null)
}

/// Immutable StatefulSet fields that differ between DESIRED and LIVE (compared as the server
/// stores them: desired ⊆ live for each).
fn immutable_changes(desired: &Json, live: &Json) -> Vec<&'static str> {
    IMMUTABLE_STS_FIELDS
        .iter()
        .copied()
        // A field slurmops does not set keeps the server's default: not a change.
        .filter(|f| !spec_field(desired, f).is_null())
        .filter(|f| !compare::contains(&spec_field(desired, f), &spec_field(live, f)))
        .collect()
}

/// Applies cluster.yaml (its TEXT, parsed C and rendering R) to the cluster.
pub async fn apply(
    cluster: &Connection,
    c: &ClusterFile,
    text: &str,
    r: &Rendered,
    opts: &Options,
    guard: &impl PruneGuard,
) -> Result<Report, ApplyError> {
    let before = cluster.log.summary();
    let s = survey(cluster, c, r, opts, guard).await?;
    let mut report = execute(cluster, c, text, r, opts, s).await?;
    let after = cluster.log.summary();
    report.requests = after - before;
    Ok(report)
}

/// Group-kinds the parent must list: before applying, everything live or desired (so a crash
/// never leaves a member the parent does not name); after pruning, only what is desired.
fn cluster_gks(live: &Members, desired: &[Object], superset: bool) -> BTreeSet<String> {
    let mut gks: BTreeSet<String> = desired
        .iter()
        .map(|o| applyset::group_kind(&o.api_version, &o.kind))
        .collect();
    if superset {
        gks.extend(live.group_kinds.iter().cloned());
    }
    gks
}

/// Writes the parent only when its group-kinds (or the recorded cluster.yaml) change.
async fn update_parent(
    cluster: &Connection,
    c: &ClusterFile,
    live: &Members,
    gks: BTreeSet<String>,
    text: Option<&str>,
) -> Result<(), ApplyError> {
    let ns = &c.metadata.namespace;
    let name = applyset::parent_name(&c.metadata.name);
    let gk_value = gks.into_iter().collect::<Vec<_>>().join(",");
    let current = live.parent.as_ref();
    let cur_gk = current
        .and_then(|p| p.metadata.annotations.as_ref())
        .and_then(|a| a.get(applyset::ANNOTATION_GROUP_KINDS))
        .cloned();
    let cur_text = current
        .and_then(|p| {
            p.data
                .pointer(&format!("/data/{}", applyset::DATA_CLUSTER_YAML))
        })
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let text = text
        .map(|t| applyset::kept(t).to_string())
        .or(cur_text.clone())
        .unwrap_or_default();
    if cur_gk.as_deref() == Some(gk_value.as_str()) && cur_text.as_deref() == Some(text.as_str()) {
        return Ok(());
    }
    let body = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {applyset::LABEL_ID: applyset::id(&name, ns),
                       crate::vocab::LABEL_MANAGED_BY: "slurmops"},
            "annotations": {
                applyset::ANNOTATION_TOOLING: concat!("slurmops/v", env!("CARGO_PKG_VERSION")),
                applyset::ANNOTATION_GROUP_KINDS: gk_value,
            },
        },
        "data": {applyset::DATA_CLUSTER_YAML: text},
    });
    let manager = field_manager(c);
    retry(|| cluster.apply(&body, &manager, true, false))
        .await
        .map_err(|e| api_err(&format!("ConfigMap/{name}"), e))?;
    Ok(())
}

/// Server-side apply of O. A conflict with fields someone changed imperatively (kubectl edit,
/// patch: `Update` managers) is drift, and git wins: the fields are taken back. A conflict with
/// another *applier* (`Apply` manager, another declarative tool) is reported unless forced.
async fn apply_one(
    cluster: &Connection,
    o: &Object,
    force: bool,
    live: Option<&DynamicObject>,
    manager: &str,
) -> Result<DynamicObject, ApplyError> {
    match retry(|| cluster.apply(&o.body, manager, force, false)).await {
        Err(kube::Error::Api(s))
            if s.code == 409 && !force && other_appliers(live, manager).is_empty() =>
        {
            retry(|| cluster.apply(&o.body, manager, true, false))
                .await
                .map_err(|e| api_err(&key(&o.kind, &o.name), e))
        }
        other => other.map_err(|e| api_err(&key(&o.kind, &o.name), e)),
    }
}

/// Field managers other than this cluster's (MANAGER, its autoscale, and the name every
/// cluster's apply used before) that own fields through server-side apply. Another cluster's
/// `slurmops/NAME` is another applier.
fn other_appliers(live: Option<&DynamicObject>, manager: &str) -> Vec<String> {
    live.and_then(|l| l.metadata.managed_fields.as_ref())
        .into_iter()
        .flatten()
        .filter(|m| m.operation.as_deref() == Some("Apply"))
        .filter_map(|m| m.manager.clone())
        .filter(|m| m != manager && m != LEGACY_MANAGER && m != AUTOSCALE_MANAGER)
        .collect()
}

/// An autoscaled NodeSet's StatefulSet, just created: its replicas move to the autoscale field
/// manager, so later applies (which leave `spec.replicas` out) never reset it.
async fn autoscale_initial(
    cluster: &Connection,
    c: &ClusterFile,
    o: &Object,
) -> Result<(), ApplyError> {
    let Some(ns) = c
        .spec
        .node_sets
        .iter()
        .find(|n| n.name == o.name && o.kind == "StatefulSet")
    else {
        return Ok(());
    };
    if ns.autoscale.is_none() {
        return Ok(());
    }
    let replicas = o
        .body
        .pointer("/spec/replicas")
        .cloned()
        .unwrap_or(json!(0));
    let body = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": o.name, "namespace": o.namespace}, "spec": {"replicas": replicas}});
    retry(|| cluster.apply(&body, AUTOSCALE_MANAGER, true, false))
        .await
        .map_err(|e| api_err(&key(&o.kind, &o.name), e))?;
    Ok(())
}

fn hash_of(v: &Json) -> Option<&str> {
    v.pointer(&format!(
        "/metadata/annotations/{}",
        compare::HASH_ANNOTATION.replace('/', "~1")
    ))
    .and_then(|v| v.as_str())
}

/// What slurmops last applied is what it would apply now: a difference is someone else's edit.
fn same_hash(o: &Object, live: &DynamicObject) -> bool {
    let lj = serde_json::to_value(live).unwrap_or_default();
    hash_of(&lj).is_some() && hash_of(&lj) == hash_of(&o.body)
}

/// The live object already holds O: the hash we applied matches and every field we set has its
/// value; else the server is asked (dry run) and only a real difference counts.
async fn unchanged(
    cluster: &Connection,
    o: &Object,
    live: &DynamicObject,
    manager: &str,
) -> Result<bool, ApplyError> {
    let lj = serde_json::to_value(live).unwrap_or_default();
    if !compare::foreign_keys(&o.kind, &o.body, &lj).is_empty() {
        return Ok(false);
    }
    let ours = hash_of(&lj);
    let expected = hash_of(&o.body);
    if ours.is_some() && ours == expected && compare::contains(&compare::comparable(&o.body), &lj) {
        return Ok(true);
    }
    if ours != expected {
        return Ok(false);
    }
    let dry = retry(|| cluster.apply(&o.body, manager, true, true))
        .await
        .map_err(|e| api_err(&key(&o.kind, &o.name), e))?;
    let dj = serde_json::to_value(&dry).unwrap_or_default();
    Ok(compare::comparable(&dj) == compare::comparable(&lj))
}

/// Keys added by hand to a map slurmops owns (a ConfigMap's files) are removed: server-side
/// apply keeps them, as another manager's fields.
async fn take_back_keys(
    cluster: &Connection,
    o: &Object,
    live: &DynamicObject,
    manager: &str,
) -> Result<(), ApplyError> {
    let lj = serde_json::to_value(live).unwrap_or_default();
    let keys = compare::foreign_keys(&o.kind, &o.body, &lj);
    if !keys.is_empty() {
        retry(|| cluster.remove_keys(&o.body, manager, &keys))
            .await
            .map_err(|e| api_err(&key(&o.kind, &o.name), e))?;
    }
    Ok(())
}

/// Deletes a StatefulSet leaving its pods running (orphan), and waits until it is gone.
async fn recreate_orphaning(cluster: &Connection, o: &Object) -> Result<(), ApplyError> {
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    let id = key(&o.kind, &o.name);
    retry(|| cluster.delete(&o.api_version, &o.kind, &o.namespace, &o.name, &dp))
        .await
        .map_err(|e| api_err(&id, e))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let still = cluster
            .get(&o.api_version, &o.kind, &o.namespace, &o.name)
            .await
            .map_err(|e| api_err(&id, e))?;
        if still.is_none() {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(ApplyError::Timeout {
                after: Duration::from_secs(60),
                pending: format!("{id} to be deleted (orphan)"),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
