//! Slurm job writes of `act`: a canary's validation job (its script read from its ConfigMap), an
//! active check's job, and their cancels, each telling the loop what came of it.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::Api;

use super::Outcome;
use crate::cluster::canary::{SCRIPT_END, ScriptRef};
use crate::rollout::Event;
use crate::slurm::{JobRequest, SlurmNodes};

/// Submits a canary's validation JOB (`Action::Submit`), its script read from FROM when set; a
/// script that cannot be read is noted and the validation waits.
pub(super) async fn submit_canary<S: SlurmNodes>(
    pods: &Api<Pod>,
    slurm: &S,
    job: &JobRequest,
    from: Option<&ScriptRef>,
) -> Outcome {
    let job = match from {
        None => job.clone(),
        Some(r) => match script_of(pods, r).await {
            Ok(text) => JobRequest {
                script: crate::controller::features::probe::wrap(
                    &job.name,
                    &text,
                    &crate::controller::features::probe::Judge::ExitCode,
                ),
                ..job.clone()
            },
            Err(e) => return Outcome::CanaryError(e),
        },
    };
    match slurm.submit(&job).await {
        Ok(id) => Outcome::Wrote(Event::CanarySubmitted {
            job: id,
            nodes: job.nodes.clone(),
        }),
        Err(e) => Outcome::Stopped(e),
    }
}

/// Submits an active check's JOB (`Action::CheckSubmit`). When slurmctld does not know its
/// license yet, its workers join DEFERRED (their resumes wait) and a later pass submits it.
pub(super) async fn submit_check<'a, S: SlurmNodes>(
    slurm: &S,
    job: &'a JobRequest,
    deferred: &mut Vec<&'a str>,
) -> Outcome {
    match slurm.submit(job).await {
        Ok(id) => Outcome::Wrote(Event::CheckSubmitted {
            job: id,
            name: job.name.clone(),
        }),
        // slurmctld does not know the check's license yet (a check just added: its
        // slurm.conf reaches slurmctld by the next reconfigure): a later pass submits.
        Err(e) if e.has_errno(crate::slurm::client::errno::INVALID_LICENSES) => {
            deferred.extend(job.nodes.iter().map(String::as_str));
            Outcome::Wrote(Event::CheckDeferred {
                name: job.name.clone(),
                license: job.licenses.clone().unwrap_or_default(),
            })
        }
        Err(e) => Outcome::Stopped(e),
    }
}

/// Cancels JOB (`Action::CheckCancel`, `Action::Cancel`); CANCELLED is the event it makes.
pub(super) async fn cancel<S: SlurmNodes>(
    slurm: &S,
    job: u64,
    cancelled: impl FnOnce(u64) -> Event,
) -> Outcome {
    match slurm.cancel(job).await {
        Ok(()) => Outcome::Wrote(cancelled(job)),
        Err(e) => Outcome::Stopped(e),
    }
}

/// Most bytes of a validation script read from a ConfigMap.
const MAX_SCRIPT: usize = 64 * 1024;

/// The validation script in the ConfigMap R (of the pods' namespace).
async fn script_of(pods: &Api<Pod>, r: &ScriptRef) -> Result<String, String> {
    let ns = pods.namespace().unwrap_or("default");
    let cms: Api<ConfigMap> = Api::namespaced(pods.clone().into_client(), ns);
    let what = format!("canary script: ConfigMap {ns}/{} key {}", r.name, r.key);
    let cm = match cms.get_opt(&r.name).await {
        Ok(Some(cm)) => cm,
        Ok(None) => {
            return Err(format!(
                "{what}: no such ConfigMap (create it, or fix configMapRef)"
            ));
        }
        Err(e) => return Err(format!("{what}: cannot be read: {e}")),
    };
    let text = cm
        .data
        .and_then(|d| d.get(&r.key).cloned())
        .ok_or_else(|| format!("{what}: no such key (add it, or fix configMapRef.key)"))?;
    if text.len() > MAX_SCRIPT || text.lines().any(|l| l.trim() == SCRIPT_END) {
        return Err(format!(
            "{what}: more than {MAX_SCRIPT} bytes, or a line {SCRIPT_END} (which would end it)"
        ));
    }
    Ok(text)
}
