//! Probes, pure: the Slurm jobs slurmops runs on its own workers to prove them — a canary's
//! validation and an active check's run alike. This module owns what they share: the job's spec
//! (its nodes exactly, its time limit, exclusive or not, its licenses and GPUs: [`Probe`]), the
//! batch script around the probe's script, which reports through the job's comment
//! (`wrapper.rs`), one catalogue of the scripts slurmops ships (`scripts.rs`), and what a probe
//! job's record says once read back from Slurm ([`outcome`]: passed, failed, still running).
//!
//! The job is sent by the canary's and the checks' acts (`canary/act.rs`, `checks/act.rs`)
//! through slurmrestd, as the unprivileged job user and never as the Slurm administrator
//! (`slurm::Client::submit`). When to probe, and what a verdict does, are the canary's
//! (`canary/`) and the checks' (`checks/`).

pub use self::wrapper::{HOLD_SECS, Judge, wrap};
use crate::cluster::active_checks::ActiveCheck;
use crate::slurm::{Job, JobRequest};

/// Longest error line kept from a probe's report (the wrapper cuts it there too).
pub const MAX_ERROR: usize = 160;

/// A probe's job, but for its name and script: where it runs and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe<'a> {
    /// The partition it runs in.
    pub partition: &'a str,
    /// Exactly these nodes, all of them.
    pub nodes: Vec<String>,
    /// Its timeout (seconds): Slurm's time limit is it in whole minutes, plus EXTRA_MINUTES (at
    /// least one minute in all).
    pub timeout_secs: u64,
    pub extra_minutes: u64,
    /// Its nodes whole: no other job shares them while it runs.
    pub exclusive: bool,
    /// Slurm licenses it takes while it runs (`NAME:COUNT`).
    pub licenses: Option<String>,
    /// GPUs it asks for on each node.
    pub gpus: u32,
}

impl Probe<'_> {
    /// The job NAME runs: SCRIPT in its wrapper, judged as HOW says.
    pub fn job(self, name: &str, script: &str, how: &Judge) -> JobRequest {
        JobRequest {
            name: name.into(),
            script: wrap(name, script, how),
            partition: self.partition.into(),
            nodes: self.nodes,
            time_limit_minutes: (self.timeout_secs.div_ceil(60) + self.extra_minutes)
                .clamp(1, 1 << 20) as u32,
            exclusive: self.exclusive,
            licenses: self.licenses,
            gpus: self.gpus,
        }
    }
}

/// Active check C's script on a worker with GPUS GPUs, and how its wrapper judges it (HOLD: a
/// failed job waits for its drain, see [`Judge`]): the same for a check's own job and a canary
/// validated by the check.
pub fn check(c: &ActiveCheck, gpus: u32, hold: bool) -> (String, Judge<'_>) {
    let how = Judge::Figure {
        min: c.min_value,
        unit: c.unit.as_deref(),
        hold,
    };
    (scripts::check(c, gpus), how)
}

/// Whether job J ended (and is not still completing).
pub fn ended(j: &Job) -> bool {
    [
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
    ]
    .iter()
    .any(|s| j.has_state(s))
        && !j.has_state("COMPLETING")
}

/// What a probe job's record says.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<'a> {
    /// Pending or running, and no failure reported.
    Running,
    /// Completed with exit code 0; the figure it printed.
    Passed { value: Option<f64> },
    /// It ended otherwise, or it reported a failure and still runs (it waits for its drain).
    Failed(Failure<'a>),
}

/// A probe job that failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure<'a> {
    pub job: &'a Job,
    /// What its wrapper reported through the job's comment, when it did.
    pub report: Option<Report>,
}

impl Failure<'_> {
    /// Slurm ended it at its time limit, or it was cancelled after running LIMIT seconds or
    /// more (a pass cancels a probe at its timeout).
    pub fn timed_out(&self, limit: i64) -> bool {
        let j = self.job;
        let ran = j.start_time.zip(j.end_time).map(|(s, e)| e - s);
        j.has_state("TIMEOUT") || j.has_state("CANCELLED") && ran.is_some_and(|r| r >= limit)
    }

    /// The first error line it reported, else its state.
    pub fn error(&self) -> String {
        match &self.report {
            Some(r) => r.error.clone(),
            None => self.job.state.to_string(),
        }
    }

    /// As `error`, with Slurm's reason after an unreported state (`FAILED (NonZeroExitCode)`).
    pub fn error_and_reason(&self) -> String {
        let j = self.job;
        let why = Some(&j.state_reason)
            .filter(|r| self.report.is_none() && !r.is_empty() && *r != "None")
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        format!("{}{why}", self.error())
    }

    /// The tail of its output it reported (lines apart).
    pub fn tail(&self) -> String {
        self.report
            .as_ref()
            .map(|r| r.tail.clone())
            .unwrap_or_default()
    }

    /// The figure it reported.
    pub fn value(&self) -> Option<f64> {
        self.report.as_ref().and_then(|r| r.value)
    }
}

/// What job J's record says: its state, its exit code and its wrapper's report.
pub fn outcome(j: &Job) -> Outcome<'_> {
    let report = Report::of(&j.comment);
    let reported_failure = report.as_ref().is_some_and(|r| r.rc != 0);
    if !ended(j) && !reported_failure {
        return Outcome::Running;
    }
    if j.has_state("COMPLETED") && j.exit_code.unwrap_or(0) == 0 {
        let value = report.and_then(|r| r.value);
        return Outcome::Passed { value };
    }
    Outcome::Failed(Failure { job: j, report })
}

/// What a wrapped job reported through its comment.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The exit code it reports (after the figure was judged): 0 passed.
    pub rc: i32,
    /// The first error line (or `exit code N`).
    pub error: String,
    pub tail: String,
    /// The figure it printed (`slurmops-value: X`).
    pub value: Option<f64>,
}

impl Report {
    /// `TAG rc=N; [value: X; ]error: LINE; tail: A|B` as the wrappers write it.
    pub fn of(c: &str) -> Option<Report> {
        let rest = [wrapper::TAG_CANARY, wrapper::TAG_CHECK]
            .iter()
            .find_map(|t| c.strip_prefix(t)?.strip_prefix(" rc="))?;
        let (rc, rest) = rest.split_once("; ")?;
        let (value, rest) = match rest.strip_prefix("value: ") {
            Some(v) => {
                let (v, rest) = v.split_once("; ")?;
                (v.trim().parse::<f64>().ok().filter(|v| v.is_finite()), rest)
            }
            None => (None, rest),
        };
        let rest = rest.strip_prefix("error: ")?;
        let (error, tail) = rest.split_once("; tail: ").unwrap_or((rest, ""));
        let error = match error.trim() {
            "" => format!("exit code {rc}"),
            e => e.chars().take(MAX_ERROR).collect(),
        };
        Some(Report {
            rc: rc.trim().parse().unwrap_or(1),
            error,
            tail: tail.replace('|', "\n").trim().to_string(),
            value,
        })
    }
}

pub mod scripts;
#[cfg(test)]
mod tests;
mod wrapper;
