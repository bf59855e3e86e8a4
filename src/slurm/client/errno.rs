//! Slurm error numbers slurmops reacts to (slurm_errno.h), one place for every release.

/// Communication with slurmctld failed (connect/send/receive/shutdown): transient.
pub const COMMUNICATIONS: std::ops::RangeInclusive<i64> = 1001..=1004;
/// The same failures as Slurm's client library reports them for slurmctld
/// (SLURMCTLD_COMMUNICATIONS_*: connection, send, receive, shutdown, backoff, hard drop).
/// slurmrestd 24.11 answers 1800 ("Unable to contact slurm controller (connect failure)")
/// with slurmctld down.
pub const SLURMCTLD_COMMUNICATIONS: std::ops::RangeInclusive<i64> = 1800..=1805;
/// Protocol authentication error: bad or expired token.
pub const AUTH: i64 = 1007;
/// Invalid node state transition (e.g. RESUME of an IDLE node): 24.11 answers this number
/// (HTTP 500), 25.11 the one below with HTTP 500, 26.05 the one below with HTTP 422.
pub const INVALID_NODE_STATE: i64 = 2028;
pub const INVALID_NODE_STATE_TRANSITION: i64 = 2180;
/// The job is gone from slurmctld (purged), or ended already: nothing to cancel.
pub const INVALID_JOB_ID: i64 = 2017;
pub const ALREADY_DONE: i64 = 2021;
/// A job names a license slurmctld does not know (ESLURM_INVALID_LICENSES).
pub const INVALID_LICENSES: i64 = 2048;
