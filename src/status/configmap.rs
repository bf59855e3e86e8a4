//! The daemon's status as a ConfigMap, one key per fact, so that `kubectl get cm slurmops-status
//! -o yaml` and `slurmops status` read it without CRDs. Written with server-side apply under its
//! own field manager, only when something changed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Name of the status ConfigMap in the daemon's namespace.
pub const NAME: &str = "slurmops-status";
/// Field manager of the status writes.
pub const MANAGER: &str = "slurmops-status";

/// What the daemon reports. Keys are the ConfigMap's data keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub repository: String,
    pub branch: String,
    /// The newest commit fetched.
    pub last_seen_commit: String,
    /// The commit whose cluster.yaml is applied.
    pub last_applied_commit: String,
    /// applied | invalid | refused (signature) | failed | fetch-failed | suspended
    pub result: String,
    /// The commit the result is about.
    pub result_commit: String,
    /// Errors of the last attempt (validation diagnostics with positions, API errors), one per line.
    pub errors: String,
    /// What the last apply and rollout did.
    pub summary: String,
    /// When the last fetch succeeded (RFC 3339); the age tells how stale the view of git is.
    pub last_fetch: String,
    pub last_attempt: String,
    /// Where each NodeSet stands (JSON list of `controller::decide::Progress`): revision, workers
    /// updated, in flight, and the jobs each waiting worker waits for.
    pub node_sets: String,
    /// Slurm as the last pass saw it: empty when it answered, else why not.
    pub slurm: String,
}

impl Status {
    /// The NodeSets' progress (empty when none was recorded or it does not parse).
    pub fn progress(&self) -> Vec<crate::controller::decide::Progress> {
        serde_json::from_str(&self.node_sets).unwrap_or_default()
    }
}

impl Status {
    pub fn to_data(&self) -> BTreeMap<String, String> {
        [
            ("repository", &self.repository),
            ("branch", &self.branch),
            ("lastSeenCommit", &self.last_seen_commit),
            ("lastAppliedCommit", &self.last_applied_commit),
            ("result", &self.result),
            ("resultCommit", &self.result_commit),
            ("errors", &self.errors),
            ("summary", &self.summary),
            ("lastFetch", &self.last_fetch),
            ("lastAttempt", &self.last_attempt),
            ("nodeSets", &self.node_sets),
            ("slurm", &self.slurm),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
    }

    pub fn from_data(d: &BTreeMap<String, String>) -> Status {
        let g = |k: &str| d.get(k).cloned().unwrap_or_default();
        Status {
            repository: g("repository"),
            branch: g("branch"),
            last_seen_commit: g("lastSeenCommit"),
            last_applied_commit: g("lastAppliedCommit"),
            result: g("result"),
            result_commit: g("resultCommit"),
            errors: g("errors"),
            summary: g("summary"),
            last_fetch: g("lastFetch"),
            last_attempt: g("lastAttempt"),
            node_sets: g("nodeSets"),
            slurm: g("slurm"),
        }
    }
}

/// Writes STATUS to the ConfigMap in NAMESPACE.
pub async fn write(
    client: &kube::Client,
    namespace: &str,
    status: &Status,
) -> Result<(), kube::Error> {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "slurmops"}},
        "data": status.to_data()});
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            NAME,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map(|_| ())
}

/// Reads the status in NAMESPACE (None when the daemon never wrote one).
pub async fn read(client: &kube::Client, namespace: &str) -> Result<Option<Status>, kube::Error> {
    Ok(Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(NAME)
        .await?
        .map(|cm| Status::from_data(&cm.data.unwrap_or_default())))
}
