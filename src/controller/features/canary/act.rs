//! The canary's act: its validation job sent (its script read from its ConfigMap; one of the
//! pass's actions, called by `act.rs`), its verdict recorded on the NodeSet's workload, and an
//! operator's `rollout --resume` past a failed one.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodTemplate};
use kube::api::{Api, Patch, PatchParams};

use crate::apply::CANARY_MANAGER;
use crate::cluster::canary::{SCRIPT_END, ScriptRef};
use crate::controller::PassError;
use crate::controller::decide::SetView;
use crate::controller::written::Written;
use crate::render::names::ANNOTATION_CANARY;
use crate::rollout::Event;
use crate::slurm::{JobRequest, SlurmNodes};

/// Keeps a canary's verdict R on SET's workload (annotation, field manager `slurmops-canary`); the
/// event it returns is what the drivers tell (the daemon as a Kubernetes Event too).
pub async fn record(
    client: &kube::Client,
    namespace: &str,
    set: &SetView,
    r: &super::Record,
) -> Result<Event, PassError> {
    use super::Verdict;
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
    set: &SetView,
) -> Result<(Event, String), PassError> {
    use super::{Record, Verdict};
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

/// Submits a canary's validation JOB (`Action::Submit`), its script read from FROM when set; a
/// script that cannot be read is noted and the validation waits.
pub(crate) async fn submit_canary<S: SlurmNodes>(
    pods: &Api<Pod>,
    slurm: &S,
    job: &JobRequest,
    from: Option<&ScriptRef>,
) -> Written {
    let job = match from {
        None => job.clone(),
        Some(r) => match script_of(pods, r).await {
            Ok(text) => JobRequest {
                script: super::super::probe::wrap(
                    &job.name,
                    &text,
                    &super::super::probe::Judge::ExitCode,
                ),
                ..job.clone()
            },
            Err(e) => return Written::CanaryError(e),
        },
    };
    match slurm.submit(&job).await {
        Ok(id) => Written::Wrote(Event::CanarySubmitted {
            job: id,
            nodes: job.nodes.clone(),
        }),
        Err(e) => Written::Stopped(e),
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
