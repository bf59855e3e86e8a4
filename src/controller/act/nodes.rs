//! Slurm node writes of `act`: drains, resumes, holds and blocks, one function per kind of action,
//! each telling the loop what came of it.

use crate::controller::written::Written;
use crate::rollout::Event;
use crate::slurm::{Drain, SlurmError, SlurmNodes};
use crate::vocab::DrainReason;

/// DRAIN NODE with REASON (`Action::Drain`); an unknown node is skipped.
pub(super) async fn drain<S: SlurmNodes>(slurm: &S, node: &str, reason: &DrainReason) -> Written {
    match slurm.drain(node, &reason.to_string()).await {
        Ok(d) => Written::Wrote(Event::Drain {
            node: node.to_string(),
            ours: !matches!(d, Drain::HeldByOther { .. }),
        }),
        Err(SlurmError::UnknownNode(_)) => Written::Skipped,
        Err(e) => Written::Stopped(e),
    }
}

/// RESUME NODE (`Action::Resume`); a node not drained, or unknown, is skipped.
pub(super) async fn resume<S: SlurmNodes>(slurm: &S, node: &str) -> Written {
    match slurm.resume(node).await {
        Ok(crate::slurm::Resume::Resumed) => Written::Wrote(Event::Resume {
            node: node.to_string(),
        }),
        Ok(_) | Err(SlurmError::UnknownNode(_)) => Written::Skipped,
        Err(e) => Written::Stopped(e),
    }
}

/// Puts NODE in TOPOLOGY, its block or leaf switch (`Action::SetTopology`); a refusal that is not transient leaves
/// the node unplaced and the other steps go on.
pub(super) async fn set_topology<S: SlurmNodes>(slurm: &S, node: &str, topology: &str) -> Written {
    match slurm.set_topology(node, topology).await {
        Ok(()) => Written::Wrote(Event::Block {
            node: node.to_string(),
            topology: topology.to_string(),
        }),
        Err(SlurmError::UnknownNode(_)) => Written::Skipped,
        Err(e) if e.is_transient() => Written::Stopped(e),
        Err(e) => Written::Unplaced(format!("{node}: Slurm refused block {topology}: {e}")),
    }
}

/// DRAIN NODE with REASON for a failed canary (`Action::Hold`); an unknown node is skipped.
pub(super) async fn hold<S: SlurmNodes>(slurm: &S, node: &str, reason: &DrainReason) -> Written {
    match slurm.drain(node, &reason.to_string()).await {
        Ok(_) => Written::Wrote(Event::CanaryHeld {
            node: node.to_string(),
            reason: reason.clone(),
        }),
        Err(SlurmError::UnknownNode(_)) => Written::Skipped,
        Err(e) => Written::Stopped(e),
    }
}

/// Requeues the jobs on NODE, drained for the rollout, by setting it DOWN (`Action::Requeue`):
/// Slurm requeues each (every one may be: `decide::requeue_now`); a node whose drain is no longer
/// ours, or unknown, is skipped.
pub(super) async fn requeue<S: SlurmNodes>(
    slurm: &S,
    node: &str,
    jobs: &[crate::controller::decide::Holder],
) -> Written {
    match slurm
        .requeue_on(node, &DrainReason::Rollout.to_string())
        .await
    {
        Ok(true) => Written::Wrote(Event::Requeued {
            node: node.to_string(),
            jobs: jobs.iter().map(|j| (j.id, j.user.clone())).collect(),
            why: "runningJobs: requeue".into(),
        }),
        Ok(false) | Err(SlurmError::UnknownNode(_)) => Written::Skipped,
        Err(e) => Written::Stopped(e),
    }
}
