//! Sync's act, its steps carried out behind the fence (called by the pass's upkeep step,
//! `upkeep::act`): pod writes (conditions, busy labels) WRITES at a time, then each worker's
//! drain, recheck, resume, requeue, replacement or remediation. Every write is an Event, handed to
//! DONE by NodeSet as it happens.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::decide::Step;
use crate::controller::{Fence, PassError};
use crate::rollout::Event;
use crate::slurm::{Drain, SlurmNodes};
use crate::vocab::DrainReason;

/// Pod writes (condition, busy label) in flight at once.
const WRITES: usize = 16;

/// Sync's pod writes (conditions, busy labels), WRITES at a time, each behind FENCE: every one
/// that wrote is recorded, in order, then the first error, if any, ends the upkeep.
pub(crate) async fn write_pods(
    pods: &Api<Pod>,
    pod_writes: Vec<&(String, Step)>,
    fence: &Fence<'_>,
    done: &mut impl FnMut(&str, Event),
) -> Result<(), PassError> {
    // The futures made first: a stream over a closure would not be Send for every lifetime.
    let writes: Vec<_> = pod_writes
        .into_iter()
        .map(|(set, s)| pod_write(pods, set, s, fence))
        .collect();
    let written: Vec<Result<Option<(&String, Event)>, PassError>> = futures::stream::iter(writes)
        .buffered(WRITES)
        .collect()
        .await;
    let mut first_error = None;
    for w in written {
        match w {
            Ok(Some((set, e))) => done(set, e),
            Ok(None) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Sync's step S on a worker of NodeSet SET: a drain, recheck, resume or replacement (pod
/// writes are `write_pods`'s).
pub(crate) async fn sync_node<S: SlurmNodes>(
    pods: &Api<Pod>,
    slurm: &S,
    set: &str,
    s: &Step,
    done: &mut impl FnMut(&str, Event),
) -> Result<(), PassError> {
    match s {
        Step::Drain { node, reason } => {
            if slurm.drain(node, &reason.to_string()).await? == Drain::Requested {
                let e = Event::DrainedFor {
                    node: node.clone(),
                    reason: reason.words(),
                };
                done(set, e);
            }
        }
        Step::Recheck { node } => {
            slurm
                .drain(node, &DrainReason::ChecksPending.to_string())
                .await?;
            done(set, Event::Rechecked { node: node.clone() });
        }
        Step::Resume { node } => {
            slurm.resume(node).await?;
            done(set, Event::ResumedFor { node: node.clone() });
        }
        Step::Replace { pod, uid } => {
            super::replace(pods, pod, uid).await?;
            done(set, Event::Unregistered { pod: pod.clone() });
        }
        Step::Requeue { node, jobs, reason } => {
            if slurm.requeue_on(node, reason).await? {
                let e = Event::Requeued {
                    node: node.clone(),
                    jobs: jobs.iter().map(|j| (j.id, j.user.clone())).collect(),
                    why: "its node's rule asks for requeue".into(),
                };
                done(set, e);
            }
        }
        Step::Remediate { pod, uid, reason } => {
            // Gone already (a rollout's replacement of it in the same pass): nothing to do.
            if super::remediate(pods, pod, uid).await? {
                let e = Event::Remediated {
                    pod: pod.clone(),
                    reason: reason.clone(),
                };
                done(set, e);
            }
        }
        Step::Condition { .. } | Step::Busy { .. } => {}
    }
    Ok(())
}

/// Sync's write S on a pod of NodeSet SET, behind FENCE (None: S writes no pod).
async fn pod_write<'a>(
    pods: &Api<Pod>,
    set: &'a String,
    s: &Step,
    fence: &Fence<'_>,
) -> Result<Option<(&'a String, Event)>, PassError> {
    if !fence() {
        return Err(PassError::Fenced);
    }
    let e = match s {
        Step::Condition { pod, patch } => {
            super::write_condition(pods, pod, patch.clone()).await?;
            Event::Condition { pod: pod.clone() }
        }
        Step::Busy { pod, busy } => {
            super::write_busy(pods, pod, *busy).await?;
            Event::Busy {
                pod: pod.clone(),
                busy: *busy,
            }
        }
        Step::Drain { .. }
        | Step::Recheck { .. }
        | Step::Resume { .. }
        | Step::Replace { .. }
        | Step::Requeue { .. }
        | Step::Remediate { .. } => {
            return Ok(None);
        }
    };
    Ok(Some((set, e)))
}
