//! How much of the queue a client knows.

use super::MAX_JOBS_ENV;
use crate::slurm::Jobs;

/// How much of the queue is read: every job listed by `jobs/state/`, and those whose record is
/// not read yet, counted by job id (an array or heterogeneous job once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cover {
    /// Jobs `jobs/state/` listed (array tasks one by one).
    pub jobs: usize,
    /// Job ids not read yet.
    pub unread: usize,
    /// Of those, pending ones: autoscale's demand is a floor while any is left.
    pub pending_unread: usize,
    /// The queue is past the job cap (`SLURMOPS_SLURM_MAX_JOBS`): what is past it stays unread.
    pub limit: Option<usize>,
    /// Its first listing (`jobs/state/`) is still in flight: what is known is the jobs read
    /// above the last one listed before a restart (the lead), and how many pending jobs are not
    /// read is not known.
    pub listing: bool,
}

/// The jobs read so far, and how many are not.
#[derive(Debug, Clone, Default)]
pub struct Known {
    pub jobs: Jobs,
    pub cover: Cover,
}

impl Known {
    /// Every job of JOBS is known.
    pub fn all(jobs: Jobs) -> Known {
        Known {
            cover: Cover {
                jobs: jobs.len(),
                ..Cover::default()
            },
            jobs,
        }
    }

    /// Every job is read.
    pub fn complete(&self) -> bool {
        !self.cover.listing && self.cover.unread == 0
    }

    /// Why not every job is known, for the status and the logs.
    pub fn why(&self) -> String {
        let c = &self.cover;
        if c.listing {
            return format!(
                "its first listing (jobs/state/) is in flight; the {} job(s) queued since the last one listed before the start are read: autoscale scales out for the pending ones among them, canary and check verdicts wait",
                self.jobs.len()
            );
        }
        match c.limit {
            Some(limit) => format!(
                "{} jobs queued, more than slurmops keeps ({limit} jobs): {} not read, so canary and check verdicts wait (autoscale scales out for the pending jobs read). Raise the cap with {MAX_JOBS_ENV} (and the daemon's memory limit with it, slurmops install --jobs)",
                c.jobs, c.unread
            ),
            None => format!(
                "read job by job since the start: {} of {} job ids left ({} of them pending); canary and check verdicts wait for them, autoscale scales out for the pending jobs read",
                c.unread, c.jobs, c.pending_unread
            ),
        }
    }
}
