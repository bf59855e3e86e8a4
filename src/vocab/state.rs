//! The words of slurmops' state that users, their scripts and the live view read: the daemon's
//! result, a canary's stage and verdict, an active check's result. Each is an enum spelled here
//! once, written and read back (status ConfigMap, annotations, pod conditions) through its type.

use serde::{Deserialize, Serialize};

use super::{
    EVENT_APPLIED, EVENT_APPLY_FAILED, EVENT_CANARY_FAILED, EVENT_FETCH_FAILED,
    EVENT_INVALID_COMMIT, EVENT_REFUSED_COMMIT, EVENT_SUSPENDED,
};

/// What the last attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verdict {
    /// Nothing yet (a new daemon), or git back with a commit not applied yet.
    #[default]
    None,
    Applied,
    /// cluster.yaml of the commit is invalid: nothing applied, the last good state stays.
    Invalid,
    /// The commit is refused (signature, another cluster's file): nothing applied.
    Refused,
    /// Applying failed: retried on every pass.
    Failed,
    /// git cannot be fetched: the last applied state stays.
    FetchFailed,
    /// `--suspend` or `spec.policy.suspend`: nothing applied.
    Suspended,
    /// The commit applied and its canary failed: its rollout is halted.
    CanaryFailed,
}

impl Verdict {
    pub const ALL: [Verdict; 8] = [
        Verdict::None,
        Verdict::Applied,
        Verdict::Invalid,
        Verdict::Refused,
        Verdict::Failed,
        Verdict::FetchFailed,
        Verdict::Suspended,
        Verdict::CanaryFailed,
    ];

    /// As the status ConfigMap and the metric label spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::None => "",
            Verdict::Applied => "applied",
            Verdict::Invalid => "invalid",
            Verdict::Refused => "refused",
            Verdict::Failed => "failed",
            Verdict::FetchFailed => "fetch-failed",
            Verdict::Suspended => "suspended",
            Verdict::CanaryFailed => "canary-failed",
        }
    }

    /// The verdict a status ConfigMap spells (unknown words read as None).
    pub fn parse(s: &str) -> Verdict {
        Verdict::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .unwrap_or_default()
    }

    /// The Event recorded when the result becomes this one: its reason, and whether it warns.
    pub fn event(self) -> Option<(&'static str, bool)> {
        Some(match self {
            Verdict::None => return None,
            Verdict::Applied => (EVENT_APPLIED, false),
            Verdict::Suspended => (EVENT_SUSPENDED, false),
            Verdict::Invalid => (EVENT_INVALID_COMMIT, true),
            Verdict::Refused => (EVENT_REFUSED_COMMIT, true),
            Verdict::FetchFailed => (EVENT_FETCH_FAILED, true),
            Verdict::Failed => (EVENT_APPLY_FAILED, true),
            Verdict::CanaryFailed => (EVENT_CANARY_FAILED, true),
        })
    }

    /// Whether the attempt's duration counts in the reconcile histogram (an apply was tried).
    pub fn timed(self) -> bool {
        matches!(self, Verdict::Applied | Verdict::Failed)
    }
}

/// Where a canary is (its words in the status and the view: `replacing`, `validating`, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CanaryStage {
    /// The canaries are being replaced by pods of the new revision.
    #[default]
    Replacing,
    /// Their validation job runs.
    Validating,
    /// The validation failed: the rollout halts.
    Failed,
    /// The revision is validated: the rest rolls.
    Passed,
    /// An operator proceeded past a failed canary.
    Resumed,
}

impl CanaryStage {
    pub const ALL: [CanaryStage; 5] = [
        CanaryStage::Replacing,
        CanaryStage::Validating,
        CanaryStage::Failed,
        CanaryStage::Passed,
        CanaryStage::Resumed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CanaryStage::Replacing => "replacing",
            CanaryStage::Validating => "validating",
            CanaryStage::Failed => "failed",
            CanaryStage::Passed => "passed",
            CanaryStage::Resumed => "resumed",
        }
    }
}

impl std::fmt::Display for CanaryStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
/// A canary's verdict, as the workload's annotation keeps it.
pub enum CanaryVerdict {
    Passed,
    Failed,
    /// An operator proceeded past a failed canary (`slurmops rollout --resume`).
    Resumed,
}

/// How the status's `slurm` line begins when the daemon runs without Slurm (`--no-slurm`).
pub const SLURM_OFF: &str = "off";

/// An active check's result on a worker, as its pod condition keeps it (status and reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckResult {
    Passed,
    Failed,
}

impl CheckResult {
    pub fn of(passed: bool) -> CheckResult {
        match passed {
            true => CheckResult::Passed,
            false => CheckResult::Failed,
        }
    }

    /// The condition's status: `True` when it passed.
    pub fn status(self) -> &'static str {
        match self {
            CheckResult::Passed => "True",
            CheckResult::Failed => "False",
        }
    }

    /// The condition's reason.
    pub fn reason(self) -> &'static str {
        match self {
            CheckResult::Passed => "Passed",
            CheckResult::Failed => "Failed",
        }
    }

    /// The result a condition's STATUS says (anything but `True` is a failure).
    pub fn parse(status: &str) -> CheckResult {
        CheckResult::of(status == "True")
    }
}
