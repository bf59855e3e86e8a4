//! Act: carries out the steps `decide` found safe, each one call with its own deadline (the Slurm
//! client's and kube's timeouts), checking before every write that this process may still write
//! (fencing: a replica that lost the Lease stops before its next write).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};

use super::decide::Action;
use super::mark::Mark;
use super::pods::delete;
use super::{Fence, PassError};
use crate::rollout::{Event, Observer};
use crate::slurm::{SlurmError, SlurmNodes};

mod jobs;
mod nodes;
mod reservations;

/// Keeps check CHECK's result MARK on POD as its condition (a pod gone meanwhile is no error).
async fn mark_pod(pods: &Api<Pod>, pod: &str, check: &str, mark: &Mark) -> Result<(), PassError> {
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
    mark: &Mark,
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
