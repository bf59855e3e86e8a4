//! Act: carries out the steps `decide` found safe, each one call with its own deadline (the Slurm
//! client's and kube's timeouts), checking before every write that this process may still write
//! (fencing: a replica that lost the Lease stops before its next write).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};

use super::decide::Action;
use super::{Fence, PassError};
use crate::apply::CANARY_MANAGER;
use crate::render::names::ANNOTATION_CANARY;
use crate::rollout::{Event, Observer};
use crate::slurm::{SlurmError, SlurmNodes};

mod jobs;
mod nodes;
mod reservations;

/// Keeps check CHECK's result MARK on POD as its condition (a pod gone meanwhile is no error).
async fn mark_pod(
    pods: &Api<Pod>,
    pod: &str,
    check: &str,
    mark: &super::checks::Mark,
) -> Result<(), PassError> {
    let (status, reason, message) = mark.condition();
    let at =
        k8s_openapi::jiff::Timestamp::from_second(mark.at)
            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)
            .unwrap_or_else(|_| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                )
            });
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": format!("{}{check}", crate::vocab::CONDITION_CHECK_PREFIX),
        "status": status, "reason": reason, "message": message,
        "lastProbeTime": at, "lastTransitionTime": at,
    }]}});
    match pods
        .patch_status(pod, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(PassError::Kube {
            what: format!("keep check {check}'s result on pod {pod}"),
            source,
        }),
    }
}

/// What acting on one NodeSet did, and the Slurm error that stopped it (its other steps wait for
/// the next pass: nothing is deleted on an unknown).
#[derive(Debug, Default)]
pub struct Acted {
    pub events: Vec<Event>,
    pub slurm_error: Option<SlurmError>,
    /// Workers Slurm refused to put in their block, and its answer (no outage: other steps go on).
    pub unplaced: Vec<String>,
    /// A canary's script could not be read (its ConfigMap): the validation waits.
    pub canary_error: Option<String>,
    /// A maintenance reservation could not be made or asked for, and why.
    pub reservation_error: Option<String>,
}

/// What carrying out one action tells the loop of `act`.
enum Outcome {
    /// It wrote: the event is told and recorded.
    Wrote(Event),
    /// Nothing written (gone, unknown, or already so): the next action.
    Skipped,
    /// Slurm refused a worker its block: noted, the next action.
    Unplaced(String),
    /// A canary's script could not be read: noted, the next action.
    CanaryError(String),
    /// A maintenance reservation could not be made or asked for: noted, the next action.
    ReservationError(String),
    /// A Slurm error: noted, and the rest waits for the next pass.
    Stopped(SlurmError),
}

pub async fn act<S: SlurmNodes>(
    pods: &Api<Pod>,
    slurm: &S,
    node_set: &str,
    actions: &[Action],
    fence: &Fence<'_>,
    observer: &Observer,
) -> Result<Acted, PassError> {
    let mut out = Acted::default();
    // Workers whose check job waits for its license: held until a later pass submits it.
    let mut deferred: Vec<&str> = Vec::new();
    for a in actions {
        if !fence() {
            return Err(PassError::Fenced);
        }
        if let Action::Resume { node } = a
            && deferred.contains(&node.as_str())
        {
            continue;
        }
        match carry_out(pods, slurm, a, &mut deferred).await? {
            Outcome::Wrote(event) => {
                observer.emit(node_set, &event);
                out.events.push(event);
            }
            Outcome::Skipped => {}
            Outcome::Unplaced(why) => out.unplaced.push(why),
            Outcome::CanaryError(e) => out.canary_error = Some(e),
            Outcome::ReservationError(e) => out.reservation_error = Some(e),
            Outcome::Stopped(e) => {
                out.slurm_error = Some(e);
                break;
            }
        }
    }
    Ok(out)
}

/// Carries out action A: one write to Slurm or Kubernetes (an error of Kubernetes ends the pass).
/// DEFERRED: workers whose check job waits for its license (a check submit adds to it).
async fn carry_out<'a, S: SlurmNodes>(
    pods: &Api<Pod>,
    slurm: &S,
    a: &'a Action,
    deferred: &mut Vec<&'a str>,
) -> Result<Outcome, PassError> {
    Ok(match a {
        Action::Drain { node, reason } => nodes::drain(slurm, node, reason).await,
        Action::Resume { node } => nodes::resume(slurm, node).await,
        Action::SetTopology { node, topology } => nodes::set_topology(slurm, node, topology).await,
        Action::Submit { job, from } => jobs::submit_canary(pods, slurm, job, from.as_ref()).await,
        Action::CheckSubmit { job } => jobs::submit_check(slurm, job, deferred).await,
        Action::CheckCancel { job } => {
            jobs::cancel(slurm, *job, |job| Event::CheckCancelled { job }).await
        }
        Action::Mark { pod, check, mark } => keep_mark(pods, pod, check, mark).await?,
        Action::Cancel { job } => {
            jobs::cancel(slurm, *job, |job| Event::CanaryCancelled { job }).await
        }
        Action::Hold { node, reason } => nodes::hold(slurm, node, reason).await,
        Action::Requeue { node, jobs } => nodes::requeue(slurm, node, jobs).await,
        Action::Reserve { request, sidecar } => {
            reservations::reserve(pods, slurm, request, sidecar.as_ref()).await
        }
        Action::Unreserve { name, sidecar } => {
            reservations::unreserve(pods, slurm, name, sidecar.as_ref()).await
        }
        Action::Delete { pod, uid, forced } => delete_pod(pods, pod, uid, *forced).await?,
    })
}

/// Keeps check CHECK's result MARK on POD (`Action::Mark`).
async fn keep_mark(
    pods: &Api<Pod>,
    pod: &str,
    check: &str,
    mark: &super::checks::Mark,
) -> Result<Outcome, PassError> {
    mark_pod(pods, pod, check, mark).await?;
    Ok(Outcome::Wrote(Event::Checked {
        node: pod.to_string(),
        check: check.to_string(),
        passed: mark.passed,
        text: mark.condition().2,
    }))
}

/// Deletes POD if it is still the one observed (`Action::Delete`); skipped when it is already
/// gone or replaced.
async fn delete_pod(
    pods: &Api<Pod>,
    pod: &str,
    uid: &str,
    forced: bool,
) -> Result<Outcome, PassError> {
    if !delete(pods, pod, uid)
        .await
        .map_err(|source| PassError::Kube {
            what: format!("delete pod {pod}"),
            source,
        })?
    {
        return Ok(Outcome::Skipped);
    }
    Ok(Outcome::Wrote(Event::Delete {
        pod: pod.to_string(),
        forced,
    }))
}

/// Deletes POD if it is still the one observed (uid); false when it is already gone or replaced.
pub(super) async fn delete(pods: &Api<Pod>, pod: &str, uid: &str) -> Result<bool, kube::Error> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(pod, &dp).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Makes a slurmops-made NodeSet's pods (pod name, the node a perNode one is bound to) from the
/// observed TEMPLATE. The pod name is the Slurm node name and its hostname (under SERVICE).
pub async fn create(
    pods: &Api<Pod>,
    template: &PodTemplate,
    service: &str,
    node_set: &str,
    creates: &[(String, Option<String>)],
    fence: &Fence<'_>,
    observer: &Observer,
) -> Result<Vec<Event>, PassError> {
    let mut out = Vec::new();
    for (name, node) in creates {
        if !fence() {
            return Err(PassError::Fenced);
        }
        let Some(pod) = pod_for(template, service, name, node.as_deref()) else {
            break;
        };
        match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => {}
            // Made by an earlier pass that did not see it yet.
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(source) => {
                return Err(PassError::Kube {
                    what: format!("create pod {name}"),
                    source,
                });
            }
        }
        let e = Event::Create {
            pod: name.clone(),
            node: node.clone(),
        };
        observer.emit(node_set, &e);
        out.push(e);
    }
    Ok(out)
}

/// The pod NAME on NODE from TEMPLATE, owned by it (removed with it, once slurmops let the
/// PodTemplate go: only after every worker drained).
fn pod_for(template: &PodTemplate, service: &str, name: &str, node: Option<&str>) -> Option<Pod> {
    let t = template.template.clone()?;
    let meta = t.metadata.unwrap_or_default();
    let mut spec = t.spec?;
    spec.node_name = node.map(str::to_string);
    spec.hostname = Some(name.to_string());
    spec.subdomain = Some(service.to_string());
    Some(Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: meta.labels,
            annotations: meta.annotations,
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "PodTemplate".into(),
                name: template.metadata.name.clone()?,
                uid: template.metadata.uid.clone()?,
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// Keeps a canary's verdict R on SET's workload (annotation, field manager `slurmops-canary`); the
/// event it returns is what the drivers tell (the daemon as a Kubernetes Event too).
pub async fn record(
    client: &kube::Client,
    namespace: &str,
    set: &super::decide::SetView,
    r: &super::canary::Record,
) -> Result<Event, PassError> {
    use super::canary::Verdict;
    let (api_version, kind) = match set.managed {
        true => ("v1", "PodTemplate"),
        false => ("apps/v1", "StatefulSet"),
    };
    let body = serde_json::json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": set.name, "namespace": namespace,
                     "annotations": {ANNOTATION_CANARY: r.to_json()}}});
    let pp = PatchParams::apply(CANARY_MANAGER);
    let what = format!(
        "record the canary verdict on {kind} {namespace}/{}",
        set.name
    );
    let kube_err = |source| PassError::Kube {
        what: what.clone(),
        source,
    };
    match set.managed {
        true => drop(
            Api::<PodTemplate>::namespaced(client.clone(), namespace)
                .patch(&set.name, &pp, &Patch::Apply(&body))
                .await
                .map_err(kube_err)?,
        ),
        false => drop(
            Api::<StatefulSet>::namespaced(client.clone(), namespace)
                .patch(&set.name, &pp, &Patch::Apply(&body))
                .await
                .map_err(kube_err)?,
        ),
    }
    let job = r.job.map(|j| format!(" (job {j})")).unwrap_or_default();
    let (reason, message) = match r.verdict {
        Verdict::Passed => (
            crate::vocab::EVENT_CANARY_PASSED,
            format!(
                "canary of revision {} passed{job}: the rest rolls",
                r.revision
            ),
        ),
        Verdict::Failed => (
            crate::vocab::EVENT_CANARY_FAILED,
            format!(
                "canary of revision {} failed{job}: {}; the rollout is halted, the canaries stay drained",
                r.revision,
                r.error.as_deref().unwrap_or("no error reported")
            ),
        ),
        Verdict::Resumed => (
            crate::vocab::EVENT_CANARY_OVERRIDDEN,
            format!(
                "rollout of revision {} resumed past its failed canary by an operator",
                r.revision
            ),
        ),
    };
    Ok(Event::CanaryVerdict {
        reason,
        passed: r.verdict != Verdict::Failed,
        message,
    })
}

/// `slurmops rollout --resume NODE_SET`: an operator proceeds past the failed canary of SET's
/// current revision (as observed by the pass). Recorded on the workload; returns the Event and
/// the record's new annotation, so the pass that wrote it decides on it.
pub async fn resume_canary(
    client: &kube::Client,
    namespace: &str,
    set: &super::decide::SetView,
) -> Result<(Event, String), PassError> {
    use super::canary::{Record, Verdict};
    let rev = set.update_revision.clone().unwrap_or_default();
    let failed = Record::parse(set.canary.as_deref())
        .filter(|r| r.revision == rev && r.verdict == Verdict::Failed)
        .ok_or_else(|| {
            PassError::Missing(format!(
                "NodeSet {}: no failed canary to resume past (revision {rev}); nothing changed",
                set.name
            ))
        })?;
    let r = Record {
        verdict: Verdict::Resumed,
        ..failed
    };
    let e = record(client, namespace, set, &r).await?;
    Ok((e, r.to_json()))
}
