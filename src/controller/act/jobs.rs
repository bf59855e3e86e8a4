//! Slurm job cancels of `act` (a canary's or a check's job), telling the loop what came of it;
//! the jobs are sent by the features' acts (`features/canary/act.rs`, `features/checks/act.rs`).

use crate::controller::written::Written;
use crate::rollout::Event;
use crate::slurm::SlurmNodes;

/// Cancels JOB (`Action::CheckCancel`, `Action::Cancel`); CANCELLED is the event it makes.
pub(super) async fn cancel<S: SlurmNodes>(
    slurm: &S,
    job: u64,
    cancelled: impl FnOnce(u64) -> Event,
) -> Written {
    match slurm.cancel(job).await {
        Ok(()) => Written::Wrote(cancelled(job)),
        Err(e) => Written::Stopped(e),
    }
}
