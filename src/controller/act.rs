//! Act: carries out the steps `decide` found safe, each one call with its own deadline (the Slurm
//! client's and kube's timeouts), checking before every write that this process may still write
//! (fencing: a replica that lost the Lease stops before its next write).

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::decide::Action;
use super::features::{canary, checks, windows};
use super::pods::delete;
use super::written::Written;
use super::{Fence, PassError};
use crate::rollout::{Event, Observer};
use crate::slurm::{SlurmError, SlurmNodes};

mod jobs;
mod nodes;

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
            Written::Wrote(event) => {
                observer.emit(node_set, &event);
                out.events.push(event);
            }
            Written::Skipped => {}
            Written::Unplaced(why) => out.unplaced.push(why),
            Written::CanaryError(e) => out.canary_error = Some(e),
            Written::ReservationError(e) => out.reservation_error = Some(e),
            Written::Stopped(e) => {
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
) -> Result<Written, PassError> {
    Ok(match a {
        Action::Drain { node, reason } => nodes::drain(slurm, node, reason).await,
        Action::Resume { node } => nodes::resume(slurm, node).await,
        Action::SetTopology { node, topology } => nodes::set_topology(slurm, node, topology).await,
        Action::Submit { job, from } => {
            canary::act::submit_canary(pods, slurm, job, from.as_ref()).await
        }
        Action::CheckSubmit { job } => checks::act::submit_check(slurm, job, deferred).await,
        Action::CheckCancel { job } => {
            jobs::cancel(slurm, *job, |job| Event::CheckCancelled { job }).await
        }
        Action::Mark { pod, check, mark } => checks::act::keep_mark(pods, pod, check, mark).await?,
        Action::Cancel { job } => {
            jobs::cancel(slurm, *job, |job| Event::CanaryCancelled { job }).await
        }
        Action::Hold { node, reason } => nodes::hold(slurm, node, reason).await,
        Action::Requeue { node, jobs } => nodes::requeue(slurm, node, jobs).await,
        Action::Reserve { request, sidecar } => {
            windows::act::reserve(pods, slurm, request, sidecar.as_ref()).await
        }
        Action::Unreserve { name, sidecar } => {
            windows::act::unreserve(pods, slurm, name, sidecar.as_ref()).await
        }
        Action::Delete { pod, uid, forced } => delete_pod(pods, pod, uid, *forced).await?,
    })
}

/// Deletes POD if it is still the one observed (`Action::Delete`); skipped when it is already
/// gone or replaced.
async fn delete_pod(
    pods: &Api<Pod>,
    pod: &str,
    uid: &str,
    forced: bool,
) -> Result<Written, PassError> {
    if !delete(pods, pod, uid)
        .await
        .map_err(|source| PassError::Kube {
            what: format!("delete pod {pod}"),
            source,
        })?
    {
        return Ok(Written::Skipped);
    }
    Ok(Written::Wrote(Event::Delete {
        pod: pod.to_string(),
        forced,
    }))
}
