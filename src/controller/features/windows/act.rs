//! The maintenance windows' act, the pass's actions for them (called by `act.rs`): reservations
//! made or given back through slurmrestd, or through the ConfigMap slurmctld's sidecar makes
//! them from, each telling the loop what came of it.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams};

use crate::apply::MAINTENANCE_MANAGER;
use crate::controller::written::Written;
use crate::rollout::Event;
use crate::slurm::{ReservationRequest, SlurmNodes};

/// Makes reservation REQUEST (`Action::Reserve`) through SIDECAR's ConfigMap, or slurmrestd
/// (None). A reservation that cannot be made is noted and the other steps go on; a transient
/// Slurm error stops them.
pub(crate) async fn reserve<S: SlurmNodes>(
    pods: &Api<Pod>,
    slurm: &S,
    request: &ReservationRequest,
    sidecar: Option<&String>,
) -> Written {
    match sidecar {
        Some(cm) => match ask_sidecar(pods, cm, &request.name, Some(super::entry(request))).await {
            Ok(true) => Written::Wrote(reserved(request, Some(cm))),
            Ok(false) => Written::Skipped,
            Err(e) => Written::ReservationError(e),
        },
        None => match slurm.reserve(request).await {
            Ok(()) => Written::Wrote(reserved(request, None)),
            Err(e) if e.is_transient() => Written::Stopped(e),
            Err(e) => Written::ReservationError(e.to_string()),
        },
    }
}

/// Gives reservation NAME back (`Action::Unreserve`) through SIDECAR's ConfigMap, or slurmrestd
/// (None).
pub(crate) async fn unreserve<S: SlurmNodes>(
    pods: &Api<Pod>,
    slurm: &S,
    name: &str,
    sidecar: Option<&String>,
) -> Written {
    match sidecar {
        Some(cm) => match ask_sidecar(pods, cm, name, None).await {
            Ok(true) => Written::Wrote(Event::Unreserved {
                name: name.to_string(),
            }),
            Ok(false) => Written::Skipped,
            Err(e) => Written::ReservationError(e),
        },
        None => match slurm.unreserve(name).await {
            Ok(()) => Written::Wrote(Event::Unreserved {
                name: name.to_string(),
            }),
            Err(e) => Written::Stopped(e),
        },
    }
}

fn reserved(r: &ReservationRequest, sidecar: Option<&String>) -> Event {
    Event::Reserved {
        name: r.name.clone(),
        nodes: r.nodes.clone(),
        start: r.start,
        sidecar: sidecar.cloned(),
    }
}

/// Sets (VALUE) or removes (None) reservation NAME in the ConfigMap CM that slurmctld's sidecar
/// makes reservations from; true when that changed it.
async fn ask_sidecar(
    pods: &Api<Pod>,
    cm: &str,
    name: &str,
    value: Option<String>,
) -> Result<bool, String> {
    let ns = pods.namespace().unwrap_or("default");
    let cms: Api<ConfigMap> = Api::namespaced(pods.clone().into_client(), ns);
    let what = format!("maintenance reservation {name} through ConfigMap {ns}/{cm}");
    let live = match cms.get_opt(cm).await {
        Ok(Some(live)) => live,
        Ok(None) => {
            return Err(format!(
                "{what}: no such ConfigMap (it is applied with cluster.yaml: run the daemon or apply)"
            ));
        }
        Err(e) => return Err(format!("{what}: cannot be read: {e}")),
    };
    if live.data.as_ref().and_then(|d| d.get(name)) == value.as_ref() {
        return Ok(false);
    }
    let patch = serde_json::json!({"data": {name: value}});
    let params = PatchParams {
        field_manager: Some(MAINTENANCE_MANAGER.into()),
        ..PatchParams::default()
    };
    cms.patch(cm, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| format!("{what}: cannot be written: {e}"))?;
    Ok(true)
}
