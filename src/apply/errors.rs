//! What apply fails with, how a Kubernetes API error becomes one, and the retries of the
//! transient ones (429, 5xx, a lost connection).

use std::time::Duration;

impl From<crate::k8s::ConnectError> for ApplyError {
    fn from(e: crate::k8s::ConnectError) -> ApplyError {
        ApplyError::Connect(e.0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    Connect(String),
    #[error(
        "{object}: {message}\n  another field manager owns these fields; to take them over run with --force-conflicts or set spec.policy.forceConflicts"
    )]
    Conflict { object: String, message: String },
    #[error("{object}: the API server rejected it (HTTP {code}): {message}")]
    Rejected {
        object: String,
        code: u16,
        message: String,
    },
    #[error("{object}: {source}")]
    Api {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "StatefulSet {name}: {fields} cannot change in place. Set spec.policy.allowRecreate: true to let slurmops recreate it (pods are orphaned and adopted again, none is killed); nothing was changed"
    )]
    Immutable { name: String, fields: String },
    #[error("{0}")]
    SlurmRelease(String),
    #[error(
        "StatefulSet {name}: its selector changed; recreating it would leave the running pods unmanaged. Rename the NodeSet instead; nothing was changed"
    )]
    SelectorChanged { name: String },
    #[error(
        "refusing to prune {count} of the {total} objects slurmops manages in {namespace} ({which}); more than the allowed {limit}. If that is intended, run with --allow-mass-prune; nothing was changed"
    )]
    MassPrune {
        count: usize,
        total: usize,
        namespace: String,
        limit: String,
        which: String,
    },
    #[error(
        "refusing to prune StatefulSet {name}: its workers {nodes} may run jobs. Drain them first (slurmops slurm drain NODE) and apply with --slurmrestd-url so slurmops can confirm it, or scale the NodeSet to 0 first; nothing was changed"
    )]
    UnsafePrune { name: String, nodes: String },
    #[error(
        "{object} uses DRA resource claims (IMEX), which this Kubernetes ({server}) does not serve (resource.k8s.io, Kubernetes >= 1.32). Disable imex for its NodeSet or upgrade the cluster; nothing was changed"
    )]
    NoDra { object: String, server: String },
    #[error(
        "refusing to scale NodeSet {name} from {from} to {to}: the StatefulSet would delete {nodes}, which may run jobs. Apply with --slurmrestd-url (and --slurm-jwt): slurmops drains them, waits for their jobs, then scales in; nothing was changed"
    )]
    UnsafeScaleIn {
        name: String,
        from: i64,
        to: i64,
        nodes: String,
    },
    #[error(
        "{object}: controller.metrics.serviceMonitor needs the Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1), which this cluster does not serve. Install the Prometheus Operator's CRDs, or set serviceMonitor.enabled: false and scrape the annotated Service; nothing was changed"
    )]
    NoServiceMonitor { object: String },
    #[error(
        "controller.ha: the controllers share their state on PersistentVolumeClaim {claim} (controller.persistence.existingClaim), which {problem} in {namespace}. Backups need a ReadWriteMany claim (NFS, CephFS, Filestore...): create one and name it there; nothing was changed"
    )]
    StateClaim {
        claim: String,
        namespace: String,
        problem: String,
    },
    #[error("timed out after {after:?} waiting for: {pending}")]
    Timeout { after: Duration, pending: String },
    #[error(
        "{} in {namespace} already exist and are not this cluster's (no {}={set}, not written by field manager {}/{instance}): slurmops does not take over objects it did not make, whatever their labels. Delete or rename them, or rename what cluster.yaml names; nothing was changed",
        objects.join(", "),
        crate::vocab::LABEL_APPLYSET_PART_OF,
        crate::vocab::MANAGER_APPLY
    )]
    Foreign {
        objects: Vec<String>,
        namespace: String,
        instance: String,
        set: String,
    },
}

pub(crate) fn api_err(object: &str, e: kube::Error) -> ApplyError {
    match e {
        kube::Error::Api(s) if s.code == 409 => ApplyError::Conflict {
            object: object.into(),
            message: s.message,
        },
        kube::Error::Api(s) if (400..500).contains(&s.code) => ApplyError::Rejected {
            object: object.into(),
            code: s.code,
            message: s.message,
        },
        e => ApplyError::Api {
            object: object.into(),
            source: e,
        },
    }
}

fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Retries an idempotent request on 429/5xx/connection errors: 4 attempts, backoff from 250 ms.
pub(super) async fn retry<T, F, Fut>(mut f: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut delay = Duration::from_millis(250);
    for attempt in 1.. {
        match f().await {
            Err(e) if attempt < 4 && transient(&e) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            other => return other,
        }
    }
    unreachable!()
}
