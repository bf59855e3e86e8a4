//! The daemon's status as a ConfigMap, one key per fact, so that `kubectl get cm slurmops-status
//! -o yaml` and `slurmops status` read it without CRDs. Written with server-side apply under its
//! own field manager, only when something changed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::vocab as v;

/// Name of the status ConfigMap of a daemon without `--cluster` (one cluster per namespace).
pub use crate::vocab::STATUS_CONFIGMAP as NAME;
/// The label every status ConfigMap carries (`slurmops status` lists them by it), and the one
/// naming the cluster of a daemon run with `--cluster`.
pub use crate::vocab::{LABEL_CLUSTER, LABEL_STATUS};

/// The status ConfigMap of the daemon for CLUSTER (`--cluster`), or the one-per-namespace name.
pub fn name_for(cluster: Option<&str>) -> String {
    match cluster {
        Some(c) => format!("{NAME}-{c}"),
        None => NAME.to_string(),
    }
}
/// Field manager of the status writes.
pub use crate::vocab::MANAGER_STATUS as MANAGER;

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
    /// Objects kept at their live versions for now (the later steps of a Slurm upgrade, a
    /// control-plane change waiting for a maintenance window), and what they wait for.
    pub held: String,
    /// With backup controllers: which one has control (the first that answers, as Slurm's
    /// clients choose) and which do not answer. Empty without backups.
    pub controllers: String,
    /// With several slurmrestd: which pod answered the pass's last request and which could not
    /// be reached. Empty with one, or with `--slurmrestd-url`.
    pub slurmrestd: String,
    /// Active checks: per NodeSet and check, workers passed, failed (with the first failures),
    /// running and waiting. Empty without `policy.activeChecks`.
    pub checks: String,
    /// The highest Slurm job id the daemon has listed: a restarted daemon (or a new leader)
    /// reads the jobs above it first, before the whole queue's ids and states are listed.
    pub jobs_listed_to: String,
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
            (v::STATUS_REPOSITORY, &self.repository),
            (v::STATUS_BRANCH, &self.branch),
            (v::STATUS_LAST_SEEN_COMMIT, &self.last_seen_commit),
            (v::STATUS_LAST_APPLIED_COMMIT, &self.last_applied_commit),
            (v::STATUS_RESULT, &self.result),
            (v::STATUS_RESULT_COMMIT, &self.result_commit),
            (v::STATUS_ERRORS, &self.errors),
            (v::STATUS_SUMMARY, &self.summary),
            (v::STATUS_LAST_FETCH, &self.last_fetch),
            (v::STATUS_LAST_ATTEMPT, &self.last_attempt),
            (v::STATUS_NODE_SETS, &self.node_sets),
            (v::STATUS_SLURM, &self.slurm),
            (v::STATUS_HELD, &self.held),
            (v::STATUS_CONTROLLERS, &self.controllers),
            (v::STATUS_SLURMRESTD, &self.slurmrestd),
            (v::STATUS_CHECKS, &self.checks),
            (v::STATUS_JOBS_LISTED_TO, &self.jobs_listed_to),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
    }

    pub fn from_data(d: &BTreeMap<String, String>) -> Status {
        let g = |k: &str| d.get(k).cloned().unwrap_or_default();
        Status {
            repository: g(v::STATUS_REPOSITORY),
            branch: g(v::STATUS_BRANCH),
            last_seen_commit: g(v::STATUS_LAST_SEEN_COMMIT),
            last_applied_commit: g(v::STATUS_LAST_APPLIED_COMMIT),
            result: g(v::STATUS_RESULT),
            result_commit: g(v::STATUS_RESULT_COMMIT),
            errors: g(v::STATUS_ERRORS),
            summary: g(v::STATUS_SUMMARY),
            last_fetch: g(v::STATUS_LAST_FETCH),
            last_attempt: g(v::STATUS_LAST_ATTEMPT),
            node_sets: g(v::STATUS_NODE_SETS),
            slurm: g(v::STATUS_SLURM),
            held: g(v::STATUS_HELD),
            controllers: g(v::STATUS_CONTROLLERS),
            slurmrestd: g(v::STATUS_SLURMRESTD),
            checks: g(v::STATUS_CHECKS),
            jobs_listed_to: g(v::STATUS_JOBS_LISTED_TO),
        }
    }
}

/// Writes STATUS to the status ConfigMap of CLUSTER's daemon in NAMESPACE.
pub async fn write(
    client: &kube::Client,
    namespace: &str,
    cluster: Option<&str>,
    status: &Status,
) -> Result<(), kube::Error> {
    let name = name_for(cluster);
    let mut labels = json!({crate::vocab::LABEL_MANAGED_BY: "slurmops", LABEL_STATUS: "true"});
    if let Some(c) = cluster {
        labels[LABEL_CLUSTER] = c.into();
    }
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": bounded(status)});
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map(|_| ())
}

/// STATUS's data with each free-text key cut to its share of the status' size (see
/// `status::bound`; the daemon keeps `nodeSets` within its own share).
fn bounded(status: &Status) -> BTreeMap<String, String> {
    let mut data = status.to_data();
    for k in [
        "errors",
        "summary",
        "held",
        "slurm",
        "controllers",
        "slurmrestd",
        "checks",
    ] {
        if let Some(v) = data.get_mut(k) {
            *v = super::bound::text(v);
        }
    }
    data
}

/// Reads the status of CLUSTER's daemon in NAMESPACE (None when it never wrote one).
pub async fn read(
    client: &kube::Client,
    namespace: &str,
    cluster: Option<&str>,
) -> Result<Option<Status>, kube::Error> {
    Ok(Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(&name_for(cluster))
        .await?
        .map(|cm| Status::from_data(&cm.data.unwrap_or_default())))
}

/// Every daemon's status in NAMESPACE, by cluster (`None`: a daemon without `--cluster`).
pub async fn read_all(
    client: &kube::Client,
    namespace: &str,
) -> Result<Vec<(Option<String>, Status)>, kube::Error> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let listed = api
        .list(&kube::api::ListParams::default().labels(&format!("{LABEL_STATUS}=true")))
        .await?;
    let mut out: Vec<(Option<String>, Status)> = listed
        .items
        .into_iter()
        .map(|cm| {
            let cluster = cm
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_CLUSTER).cloned());
            (cluster, Status::from_data(&cm.data.unwrap_or_default()))
        })
        .collect();
    // Written by an earlier release, before the label.
    if out.is_empty()
        && let Some(s) = read(client, namespace, None).await?
    {
        out.push((None, s));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
