//! apply in two steps: `survey` does every read and every refusal and gives each object its
//! verdict (create, update, unchanged, drifted, recreate, held) before anything is written;
//! `execute` writes by those verdicts. `verdict` is the one answer to "did this object change",
//! for apply and for `plan --cluster` (`drift`).

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use kube::api::{DeleteParams, DynamicObject, PropagationPolicy};
use serde_json::Value as Json;

use super::{
    ApplyError, Members, Options, PruneGuard, Report, api_err, apply_one, autoscale_initial,
    check_scale_in, cluster_gks, desired, handover, health, immutable_changes, key, members,
    prune_set, recreate_orphaning, retry, same_hash, served, take_back_keys, unchanged,
    update_parent, upgrade, window,
};
use crate::cluster::types::ClusterFile;
use crate::k8s::Connection;
use crate::render::{Object, Rendered};

/// What apply does with one object: the one answer to "did it change", for apply and for
/// `plan --cluster` (`drift`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Create,
    /// Applied again: git changed it, or a hand edit is taken back.
    Update,
    /// The live object holds it already (CONFIRMED_BY_DRY_RUN: the server was asked).
    Unchanged {
        confirmed_by_dry_run: bool,
    },
    /// A hand edit left in place (`--detect-only`, `policy.detectDriftOnly`).
    Drifted,
    /// Deleted with orphan propagation and applied again (an immutable StatefulSet field).
    Recreate,
}

/// The verdict for desired object O against LIVE (None: not in the cluster). RECREATE: its
/// immutable fields change and the policy allows recreating it.
pub(crate) async fn verdict(
    cluster: &Connection,
    o: &Object,
    live: Option<&DynamicObject>,
    recreate: bool,
    detect_only: bool,
    manager: &str,
) -> Result<Verdict, ApplyError> {
    let Some(l) = live else {
        return Ok(Verdict::Create);
    };
    if recreate && o.kind == "StatefulSet" {
        return Ok(Verdict::Recreate);
    }
    let dry_runs_seen = cluster.log.summary().dry_runs;
    if unchanged(cluster, o, l, manager).await? {
        let confirmed_by_dry_run = cluster.log.summary().dry_runs > dry_runs_seen;
        return Ok(Verdict::Unchanged {
            confirmed_by_dry_run,
        });
    }
    if detect_only && same_hash(o, l) {
        return Ok(Verdict::Drifted);
    }
    Ok(Verdict::Update)
}

/// What apply will do, decided before its first write: every read, every refusal, a verdict per
/// object and what is pruned.
pub struct Survey {
    live: Members,
    desired: Vec<Object>,
    /// One per desired object, in apply order; None: held back (the later steps of a Slurm
    /// upgrade, a control-plane change waiting for a maintenance window).
    verdicts: Vec<Option<Verdict>>,
    /// (apiVersion, kind, name) of each member to prune.
    prune: Vec<(String, String, String)>,
    held: upgrade::Held,
}

/// All of apply's reads and refusals: nothing is written, and an input apply would refuse is
/// refused here, before anything changed.
pub async fn survey(
    cluster: &Connection,
    c: &ClusterFile,
    r: &Rendered,
    opts: &Options,
    guard: &impl PruneGuard,
) -> Result<Survey, ApplyError> {
    let detect_only = opts.detect_only || c.spec.policy.detect_drift_only;
    served(cluster, r)?;
    super::state_claim::check(cluster, c).await?;
    let live = members(cluster, c, r).await?;
    let desired = desired(c, r, cluster, &live);
    if !cluster.dra
        && let Some(o) = desired.iter().find(|o| {
            o.body
                .pointer("/spec/template/spec/resourceClaims")
                .is_some()
        })
    {
        return Err(ApplyError::NoDra {
            object: key(&o.kind, &o.name),
            server: cluster.server_version.clone(),
        });
    }
    let mut recreate = BTreeSet::new();
    for o in desired.iter().filter(|o| o.kind == "StatefulSet") {
        let Some(l) = live.get(&key(&o.kind, &o.name)) else {
            continue;
        };
        let lj = serde_json::to_value(l).unwrap_or_default();
        let fields = immutable_changes(&o.body, &lj);
        if fields.contains(&"selector") {
            return Err(ApplyError::SelectorChanged {
                name: o.name.clone(),
            });
        }
        if !fields.is_empty() {
            if !c.spec.policy.allow_recreate {
                return Err(ApplyError::Immutable {
                    name: o.name.clone(),
                    fields: fields.join(", "),
                });
            }
            recreate.insert(o.name.clone());
        }
    }
    // The live workloads as JSON, for the release and window checks, which read their spec,
    // status and annotations: without managedFields, and freed before the verdicts (a second
    // copy of 500 live StatefulSets otherwise stayed through the whole apply).
    let workloads: Vec<(String, Json)> = desired
        .iter()
        .filter(|o| matches!(o.kind.as_str(), "StatefulSet" | "Deployment"))
        .filter_map(|o| {
            let id = key(&o.kind, &o.name);
            let mut l = serde_json::to_value(live.get(&id)?).ok()?;
            if let Some(Json::Object(meta)) = l.get_mut("metadata") {
                meta.remove("managedFields");
            }
            Some((id, l))
        })
        .collect();
    upgrade::check(&c.spec, &workloads).map_err(ApplyError::SlurmRelease)?;
    let copy_failed = copy_failed(cluster, c, &workloads).await?;
    let all: Vec<&Object> = desired.iter().collect();
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let held = upgrade::held(
        &c.spec.slurm_version,
        &all,
        &workloads,
        copy_failed.as_ref(),
    )
    .and(window::held(c, &all, &workloads, now));
    drop(workloads);
    refuse_foreign(cluster, c, &desired, &live).await?;
    let prune = prune_set(cluster, c, &desired, &live, opts, guard).await?;
    check_scale_in(cluster, c, &desired, &live, guard).await?;
    let manager = super::field_manager(c);
    let mut verdicts = Vec::with_capacity(desired.len());
    for o in &desired {
        let id = key(&o.kind, &o.name);
        if held.objects.contains(&id) {
            verdicts.push(None);
            continue;
        }
        let recreated = recreate.contains(&o.name);
        verdicts.push(Some(
            verdict(cluster, o, live.get(&id), recreated, detect_only, &manager).await?,
        ));
    }
    Ok(Survey {
        live,
        desired,
        verdicts,
        prune,
        held,
    })
}

/// A copy that failed before the data of slurmdbd or slurmctld is converted (`(pod, why)`): read
/// from the pods of the one an upgrade stands at, and only then (one LIST of its pods).
async fn copy_failed(
    cluster: &Connection,
    c: &ClusterFile,
    workloads: &[(String, Json)],
) -> Result<Option<(String, String)>, ApplyError> {
    if c.spec.backup.as_ref().and_then(|b| b.claim()).is_none() {
        return Ok(None);
    }
    let Some(w) = upgrade::converting(&c.spec.slurm_version, workloads) else {
        return Ok(None);
    };
    let Some(labels) = w
        .pointer("/spec/selector/matchLabels")
        .and_then(Json::as_object)
    else {
        return Ok(None);
    };
    let selector = labels
        .iter()
        .filter_map(|(k, v)| Some(format!("{k}={}", v.as_str()?)))
        .collect::<Vec<_>>()
        .join(",");
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(cluster.client.clone(), &c.metadata.namespace);
    let pods = api
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .map_err(|e| ApplyError::Api {
            object: format!("pods {selector}"),
            source: e,
        })?;
    let pods: Vec<Json> = pods
        .items
        .iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .collect();
    Ok(upgrade::copy_failed(&pods))
}

/// Refuses to create what already exists and is not this cluster's: an object cluster.yaml names
/// that is no member of the ApplySet (LIVE) is read by name, and one found that is no member of
/// this cluster's ApplySet and was not written by slurmops for this cluster is someone else's
/// (another cluster's daemon, a hand-made object, another tool that labels what it makes). Server-side apply would take it over. Reads only what is created.
async fn refuse_foreign(
    cluster: &Connection,
    c: &ClusterFile,
    desired: &[Object],
    live: &Members,
) -> Result<(), ApplyError> {
    let ns = &c.metadata.namespace;
    let set = super::applyset::id(&super::applyset::parent_name(&c.metadata.name), ns);
    let missing = desired
        .iter()
        .filter(|o| live.get(&key(&o.kind, &o.name)).is_none());
    let checks: Vec<_> = missing
        .map(|o| foreign_one(cluster, ns, &c.metadata.name, &set, o))
        .collect();
    let found: Vec<Result<Option<String>, ApplyError>> = futures::stream::iter(checks)
        .buffered(WRITES)
        .collect()
        .await;
    let objects: Vec<String> = found
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    if objects.is_empty() {
        return Ok(());
    }
    Err(ApplyError::Foreign {
        objects,
        namespace: ns.clone(),
        instance: c.metadata.name.clone(),
        set,
    })
}

/// O's id when an object of its name exists in NS and is not cluster INSTANCE's (ApplySet SET).
async fn foreign_one(
    cluster: &Connection,
    ns: &str,
    instance: &str,
    set: &str,
    o: &Object,
) -> Result<Option<String>, ApplyError> {
    let api_version = o.body["apiVersion"].as_str().unwrap_or("v1");
    let existing = retry(|| cluster.get(api_version, &o.kind, ns, &o.name))
        .await
        .map_err(|e| api_err(&key(&o.kind, &o.name), e))?;
    let Some(existing) = existing else {
        return Ok(None);
    };
    // A label alone never makes an object ours (Helm and Argo CD put the instance label on
    // everything they make): it is a member of this cluster's ApplySet, or was written by this
    // cluster's field manager, or by the one name all clusters shared before and labelled
    // for this cluster (handed over by the first apply).
    let labels = existing.metadata.labels.unwrap_or_default();
    let managers: Vec<String> = existing
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    let by = |m: &str| managers.iter().any(|x| x == m);
    let labelled = labels.get(crate::vocab::LABEL_INSTANCE).map(String::as_str) == Some(instance);
    let ours = labels
        .get(crate::vocab::LABEL_APPLYSET_PART_OF)
        .map(String::as_str)
        == Some(set)
        || by(&crate::vocab::apply_manager(instance))
        || (labelled && by(super::LEGACY_MANAGER));
    Ok((!ours).then(|| key(&o.kind, &o.name)))
}

/// Objects of one kind written at once.
const WRITES: usize = 16;

/// Writes O by its verdict V against LIVE; what was done to it (an update of an object that is
/// gone is a create) and its id.
async fn write_one(
    cluster: &Connection,
    c: &ClusterFile,
    o: &Object,
    v: Verdict,
    live: Option<&DynamicObject>,
    force: bool,
    manager: &str,
) -> Result<(Verdict, String), ApplyError> {
    let id = key(&o.kind, &o.name);
    match (v, live) {
        (Verdict::Recreate, _) => {
            recreate_orphaning(cluster, o).await?;
            apply_one(cluster, o, force, None, manager).await?;
            Ok((Verdict::Recreate, id))
        }
        (Verdict::Create, _) | (_, None) => {
            apply_one(cluster, o, force, None, manager).await?;
            autoscale_initial(cluster, c, o).await?;
            Ok((Verdict::Create, id))
        }
        (Verdict::Update, Some(l)) => {
            apply_one(cluster, o, force, Some(l), manager).await?;
            take_back_keys(cluster, o, l, manager).await?;
            Ok((Verdict::Update, id))
        }
        (v @ (Verdict::Unchanged { .. } | Verdict::Drifted), _) => Ok((v, id)),
    }
}

/// Carries out survey S: the parent first (naming every group-kind, so a crash never leaves a
/// member it does not name), each object by its verdict, prune in reverse apply order, the
/// parent again, then the wait for availability.
pub(super) async fn execute(
    cluster: &Connection,
    c: &ClusterFile,
    text: &str,
    r: &Rendered,
    opts: &Options,
    s: Survey,
) -> Result<Report, ApplyError> {
    let force = opts.force_conflicts || c.spec.policy.force_conflicts;
    let Survey {
        live,
        desired,
        verdicts,
        prune,
        held,
    } = s;
    let mut report = Report {
        held: held.objects.iter().cloned().collect(),
        held_for: held.waiting_for.clone(),
        window_opens: held.opens,
        copy_failed: held.copy_failed.clone(),
        ..Report::default()
    };
    let manager = super::field_manager(c);
    report.handed_over = handover::hand_over(cluster, &live, &manager).await?;
    update_parent(cluster, c, &live, cluster_gks(&live, &desired, true), None).await?;
    // Kinds in apply order; the objects of one kind (500 worker StatefulSets on a large
    // cluster) WRITES at a time, each reported in apply order.
    let work: Vec<(&Object, Verdict)> = desired
        .iter()
        .zip(verdicts)
        .filter_map(|(o, v)| Some((o, v?)))
        .collect();
    for run in work.chunk_by(|a, b| a.0.kind == b.0.kind) {
        // WRITES futures at a time, not one per object made up front: a write's future is
        // tens of KB, and 10,000 of them held 2 GB.
        let mut done: Vec<(Verdict, String)> = Vec::with_capacity(run.len());
        for some in run.chunks(WRITES) {
            let writes = some.iter().map(|(o, v)| {
                write_one(
                    cluster,
                    c,
                    o,
                    *v,
                    live.get(&key(&o.kind, &o.name)),
                    force,
                    &manager,
                )
            });
            done.extend(futures::future::try_join_all(writes).await?);
        }
        for (v, id) in done {
            match v {
                Verdict::Recreate => report.recreated.push(id),
                Verdict::Create => report.created.push(id),
                Verdict::Unchanged {
                    confirmed_by_dry_run,
                } => {
                    if confirmed_by_dry_run {
                        report.confirmed_by_dry_run.push(id.clone());
                    }
                    report.unchanged.push(id)
                }
                Verdict::Drifted => report.drifted.push(id),
                Verdict::Update => report.updated.push(id),
            }
        }
    }
    // Prune in reverse apply order.
    let order: BTreeMap<&str, usize> = r
        .objects
        .iter()
        .enumerate()
        .map(|(i, o)| (o.kind.as_str(), i))
        .collect();
    let mut gone = prune;
    gone.sort_by_key(|(_, k, _)| std::cmp::Reverse(order.get(k.as_str()).copied().unwrap_or(0)));
    for (v, kind, name) in &gone {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        retry(|| cluster.delete(v, kind, &c.metadata.namespace, name, &dp))
            .await
            .map_err(|e| api_err(&key(kind, name), e))?;
        report.pruned.push(key(kind, name));
    }
    update_parent(
        cluster,
        c,
        &live,
        cluster_gks(&live, &desired, false),
        Some(text),
    )
    .await?;
    if let Some(t) = opts.wait {
        health::wait(cluster, &desired, t).await?;
    }
    Ok(report)
}
