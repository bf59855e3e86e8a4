//! Backup controllers share slurmctld's state directory, so `controller.ha` needs the claim it
//! names to be ReadWriteMany: with a ReadWriteOnce claim the backup's pod cannot mount it (or, on
//! one node, two controllers write one state unaware of the volume's limits) and the failover
//! that `ha` promises never happens. Validation cannot see the claim; apply reads it, once, and
//! refuses before anything is written.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;

use super::{ApplyError, api_err, retry};
use crate::cluster::types::ClusterFile;
use crate::k8s::Connection;

/// What is wrong with C's state claim for backup controllers, or Ok when C has none or it is
/// ReadWriteMany.
pub async fn check(cluster: &Connection, c: &ClusterFile) -> Result<(), ApplyError> {
    let ctl = &c.spec.controller;
    let (Some(_), Some(claim)) = (&ctl.ha, &ctl.persistence.existing_claim) else {
        return Ok(());
    };
    let ns = &c.metadata.namespace;
    let api: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), ns);
    let live = retry(|| api.get_opt(claim))
        .await
        .map_err(|e| api_err(&format!("PersistentVolumeClaim/{claim}"), e))?;
    let problem = match live {
        None => "does not exist".to_string(),
        Some(pvc) => {
            let modes = pvc.spec.and_then(|s| s.access_modes).unwrap_or_default();
            if modes.iter().any(|m| m == "ReadWriteMany") {
                return Ok(());
            }
            format!(
                "is {}",
                if modes.is_empty() {
                    "without access modes".into()
                } else {
                    modes.join(", ")
                }
            )
        }
    };
    Err(ApplyError::StateClaim {
        claim: claim.clone(),
        namespace: ns.clone(),
        problem,
    })
}
