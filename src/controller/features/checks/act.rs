//! The checks' act, the pass's actions for them (called by `act.rs`): a check's job sent, and a
//! check's result kept on its worker's pod as condition `checks.slurmops.dev/CHECK`.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};

use super::Mark;
use crate::controller::PassError;
use crate::controller::written::Written;
use crate::rollout::Event;
use crate::slurm::{JobRequest, SlurmNodes};

/// Submits an active check's JOB (`Action::CheckSubmit`). When slurmctld does not know its
/// license yet, its workers join DEFERRED (their resumes wait) and a later pass submits it.
pub(crate) async fn submit_check<'a, S: SlurmNodes>(
    slurm: &S,
    job: &'a JobRequest,
    deferred: &mut Vec<&'a str>,
) -> Written {
    match slurm.submit(job).await {
        Ok(id) => Written::Wrote(Event::CheckSubmitted {
            job: id,
            name: job.name.clone(),
        }),
        // slurmctld does not know the check's license yet (a check just added: its
        // slurm.conf reaches slurmctld by the next reconfigure): a later pass submits.
        Err(e) if e.has_errno(crate::slurm::client::errno::INVALID_LICENSES) => {
            deferred.extend(job.nodes.iter().map(String::as_str));
            Written::Wrote(Event::CheckDeferred {
                name: job.name.clone(),
                license: job.licenses.clone().unwrap_or_default(),
            })
        }
        Err(e) => Written::Stopped(e),
    }
}

/// Keeps check CHECK's result MARK on POD (`Action::Mark`).
pub(crate) async fn keep_mark(
    pods: &Api<Pod>,
    pod: &str,
    check: &str,
    mark: &Mark,
) -> Result<Written, PassError> {
    mark_pod(pods, pod, check, mark).await?;
    Ok(Written::Wrote(Event::Checked {
        node: pod.to_string(),
        check: check.to_string(),
        passed: mark.passed,
        text: mark.condition().2,
    }))
}

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
