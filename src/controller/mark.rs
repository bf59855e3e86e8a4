//! What active checks leave behind: a check's last result on a worker (`Mark`), kept on its
//! pod as condition `checks.slurmops.dev/CHECK` (what a pass reads back to know which checks are
//! due), and where a check stands on a NodeSet (`Summary`, in status). Its own file so that the
//! pass's views can hold them without knowing the checks' decisions.

use std::collections::BTreeMap;

use crate::vocab::{CONDITION_CHECK_PREFIX, CheckResult};

/// A check's last result on a worker, as its pod condition keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub passed: bool,
    /// When it was judged (UNIX seconds): the condition's lastProbeTime.
    pub at: i64,
    pub job: Option<u64>,
    pub value: Option<f64>,
    /// The error, or what passed.
    pub text: String,
}

impl Mark {
    /// The condition's (status, reason, message): `job=N value=X: TEXT`.
    pub fn condition(&self) -> (&'static str, &'static str, String) {
        let job = self.job.map(|j| format!("job={j} ")).unwrap_or_default();
        let value = self
            .value
            .map(|v| format!("value={v} "))
            .unwrap_or_default();
        let r = CheckResult::of(self.passed);
        (
            r.status(),
            r.reason(),
            format!("{job}{value}: {}", self.text),
        )
    }

    /// The mark of a condition STATUS with MESSAGE, judged AT.
    pub fn parse(status: &str, message: &str, at: i64) -> Mark {
        let (head, text) = message.split_once(": ").unwrap_or(("", message));
        let field = |k: &str| {
            head.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .map(str::to_string)
        };
        Mark {
            passed: CheckResult::parse(status) == CheckResult::Passed,
            at,
            job: field("job=").and_then(|j| j.parse().ok()),
            value: field("value=")
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite()),
            text: text.to_string(),
        }
    }
}

// The figure is parsed finite (`Mark::parse`), so equality is an equivalence.
impl Eq for Mark {}

/// The check marks of pod P: its `checks.slurmops.dev/NAME` conditions.
pub fn marks(p: &k8s_openapi::api::core::v1::Pod) -> BTreeMap<String, Mark> {
    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c.type_.strip_prefix(CONDITION_CHECK_PREFIX)?;
            let at = c.last_probe_time.as_ref().map_or(0, |t| t.0.as_second());
            let message = c.message.as_deref().unwrap_or("");
            Some((name.to_string(), Mark::parse(&c.status, message, at)))
        })
        .collect()
}

/// Where one check stands on one NodeSet's workers, for status.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub check: String,
    pub passed: u32,
    pub failed: u32,
    pub running: u32,
    /// Due and waiting: for room under the cap, for the worker to be idle, or (a block's) for
    /// the block to be whole.
    pub waiting: u32,
    /// `NODE: job N: ERROR`, the first failures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
    /// When a pass is next needed: the schedule's next tick, a running job's timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<i64>,
}
