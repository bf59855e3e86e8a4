//! What a rollout may do under its canary, and the canary's verdict as the workload keeps it:
//! the small vocabulary `decide` and `canary` share (`canary` decides; `decide` obeys).

use serde::{Deserialize, Serialize};

pub use crate::vocab::{CanaryStage, CanaryVerdict as Verdict};

/// A canary's verdict, as the workload's annotation keeps it (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub revision: String,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
}

impl Record {
    /// The record an annotation holds; None when it is absent or not one.
    pub fn parse(text: Option<&str>) -> Option<Record> {
        serde_json::from_str(text?).ok()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What the canary lets the rollout do this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gate {
    /// No canary, or this revision is validated: roll as usual.
    #[default]
    Open,
    /// At most this many workers on the new revision, and none of them resumed by the rollout
    /// (the canary resumes them once their job is submitted).
    Limit(u32),
    /// The canary failed: no worker rolls.
    Halt,
}

/// Where a NodeSet's canary stands, for `slurmops status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryProgress {
    pub revision: String,
    pub stage: CanaryStage,
    pub canaries: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
    /// When the canary is judged at the latest if nothing changes before (UNIX seconds): a
    /// canary's readyTimeout or a validation job's timeout runs out. The daemon passes then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<i64>,
}
