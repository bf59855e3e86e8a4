//! Inventory without CRDs, compatible with KEP-3659 ApplySets (what `kubectl apply --prune
//! --applyset` uses): a parent ConfigMap `NAME-applyset` carries the set's id and the group-kinds
//! it contains; every member carries the `part-of` label. Only members are ever pruned.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

pub use crate::vocab::{
    ANNOTATION_APPLYSET_GROUP_KINDS as ANNOTATION_GROUP_KINDS,
    ANNOTATION_APPLYSET_TOOLING as ANNOTATION_TOOLING, LABEL_APPLYSET_ID as LABEL_ID,
    LABEL_APPLYSET_PART_OF as LABEL_PART_OF,
};
/// The cluster.yaml last applied, kept in the parent so `plan --cluster` can summarise in Slurm terms.
pub const DATA_CLUSTER_YAML: &str = "cluster.yaml";

/// The largest cluster.yaml the parent keeps: a ConfigMap holds at most 1 MiB, and cluster.yaml
/// may be up to 4 MiB (`cluster::yaml::MAX_BYTES`). A larger one is not kept (`plan --cluster` then
/// summarises without the last applied revision) rather than failing every apply.
pub const KEPT_CLUSTER_YAML_BYTES: usize = 768 << 10;

/// TEXT as the parent keeps it: whole, or nothing when it is too large to keep.
pub fn kept(text: &str) -> &str {
    match text.len() <= KEPT_CLUSTER_YAML_BYTES {
        true => text,
        false => "",
    }
}

pub fn parent_name(cluster: &str) -> String {
    format!("{cluster}-applyset")
}

/// The KEP-3659 id of a ConfigMap parent: `applyset-<b64url(sha256(name.ns.ConfigMap.))>-v1`.
pub fn id(parent: &str, namespace: &str) -> String {
    let digest = Sha256::digest(format!("{parent}.{namespace}.ConfigMap.").as_bytes());
    format!("applyset-{}-v1", URL_SAFE_NO_PAD.encode(digest))
}

/// `Kind.group` as the KEP writes group-kinds (`Service`, `StatefulSet.apps`).
pub fn group_kind(api_version: &str, kind: &str) -> String {
    match api_version.split_once('/') {
        Some((group, _)) => format!("{kind}.{group}"),
        None => kind.to_string(),
    }
}

pub fn parse_group_kinds(annotation: &str) -> BTreeSet<String> {
    annotation
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The apiVersion slurmops uses for a group-kind it renders, where the cluster serves
/// PodDisruptionBudgets at PDB_API_VERSION and CronJobs at CRON_JOB_API_VERSION.
pub fn api_version_of(
    group_kind: &str,
    pdb_api_version: &str,
    cron_job_api_version: &str,
) -> Option<(String, String)> {
    let (kind, group) = group_kind.split_once('.').unwrap_or((group_kind, ""));
    let v = match (group, kind) {
        ("", "ConfigMap" | "Secret" | "Service" | "PodTemplate") => "v1".to_string(),
        ("apps", "StatefulSet" | "Deployment") => "apps/v1".to_string(),
        ("policy", "PodDisruptionBudget") => pdb_api_version.to_string(),
        ("batch", "CronJob") => cron_job_api_version.to_string(),
        ("networking.k8s.io", "NetworkPolicy") => "networking.k8s.io/v1".to_string(),
        ("monitoring.coreos.com", "ServiceMonitor") => "monitoring.coreos.com/v1".to_string(),
        _ => return None,
    };
    Some((v, kind.to_string()))
}

/// The cluster.yaml the last apply recorded in the ApplySet parent (None: none, or unreadable).
pub async fn last_applied(
    cluster: &super::Connection,
    c: &crate::cluster::ClusterFile,
) -> Result<Option<crate::cluster::ClusterFile>, super::ApplyError> {
    let name = parent_name(&c.metadata.name);
    let parent = cluster
        .get("v1", "ConfigMap", &c.metadata.namespace, &name)
        .await
        .map_err(|e| super::ApplyError::Connect(format!("reading ConfigMap/{name}: {e}")))?;
    let text = parent
        .and_then(|p| {
            p.data
                .pointer(&format!("/data/{DATA_CLUSTER_YAML}"))
                .cloned()
        })
        .and_then(|v| v.as_str().map(str::to_string));
    Ok(text.and_then(|t| crate::cluster::load("last-applied/cluster.yaml", &t).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_follows_kep_3659() {
        // applyset-<RawURL base64 of sha256("<name>.<namespace>.ConfigMap.")>-v1: 43 characters.
        let a = id("c-applyset", "slurm");
        let b64 = a
            .strip_prefix("applyset-")
            .unwrap()
            .strip_suffix("-v1")
            .unwrap();
        assert_eq!(b64.len(), 43);
        assert!(
            b64.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        let digest = URL_SAFE_NO_PAD.decode(b64).unwrap();
        assert_eq!(
            digest,
            Sha256::digest(b"c-applyset.slurm.ConfigMap.").to_vec()
        );
        assert_ne!(a, id("c-applyset", "other"));
        assert_eq!(group_kind("apps/v1", "StatefulSet"), "StatefulSet.apps");
        assert_eq!(group_kind("v1", "Service"), "Service");
        assert_eq!(
            api_version_of("PodDisruptionBudget.policy", "policy/v1beta1", "batch/v1"),
            Some(("policy/v1beta1".into(), "PodDisruptionBudget".into()))
        );
        assert_eq!(
            api_version_of("CronJob.batch", "policy/v1", "batch/v1beta1"),
            Some(("batch/v1beta1".into(), "CronJob".into()))
        );
    }
}
