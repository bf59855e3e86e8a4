//! The drain reasons slurmops sets, typed. Slurm keeps a drain's reason as text; every reason
//! slurmops writes is `slurmops: ` and the words below, and every reason it reads back is parsed
//! here, so what a drain is for (and whether slurmops may ever resume it) is decided in one place.
//! A reason without the prefix is someone else's: slurmops never resumes it.

use std::fmt;

use super::{
    REASON_AUTOSCALE, REASON_CANARY_FAILED, REASON_CHECK, REASON_CHECKS_PENDING,
    REASON_DRAIN_REQUESTED, REASON_NODE_LEFT, REASON_PREFIX, REASON_REMOVED, REASON_ROLLOUT,
    REASON_SCALE_IN,
};

/// Why slurmops drained a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainReason {
    /// Replaced by a rollout.
    Rollout,
    /// Leaving for a scale-in.
    ScaleIn,
    /// Given back by autoscale.
    Autoscale,
    /// Its NodeSet left cluster.yaml.
    Removed,
    /// A perNode worker whose Kubernetes node left or stopped matching.
    NodeLeft,
    /// A new worker held until its active checks pass.
    ChecksPending,
    /// A canary whose validation failed (its job, when one ran).
    CanaryFailed { job: Option<u64>, error: String },
    /// An active check failed on the worker.
    CheckFailed {
        check: String,
        job: Option<u64>,
        error: String,
    },
    /// The worker pod's drain request, with the requester's words.
    Requested(String),
    /// Its Kubernetes node is cordoned.
    Cordoned { node: String },
    /// Its Kubernetes node has a problem: a drain request, a condition or a taint the cluster's
    /// `policy.nodeHealth` lists.
    NodeProblem { node: String, problem: String },
    /// `slurmops: ` and words this release does not write (an older release's, or typed by hand).
    Other(String),
}

impl DrainReason {
    /// The drain a Slurm REASON says slurmops set; None for someone else's (no `slurmops:`).
    pub fn parse(reason: &str) -> Option<DrainReason> {
        let r = reason.strip_prefix(REASON_PREFIX)?.trim_start();
        Some(match r {
            _ if r == REASON_ROLLOUT => DrainReason::Rollout,
            _ if r == REASON_SCALE_IN => DrainReason::ScaleIn,
            _ if r == REASON_AUTOSCALE => DrainReason::Autoscale,
            _ if r == REASON_REMOVED => DrainReason::Removed,
            _ if r == REASON_NODE_LEFT => DrainReason::NodeLeft,
            _ if r == REASON_CHECKS_PENDING => DrainReason::ChecksPending,
            _ => Self::parse_worded(r).unwrap_or_else(|| DrainReason::Other(r.to_string())),
        })
    }

    fn parse_worded(r: &str) -> Option<DrainReason> {
        if let Some(rest) = after(r, REASON_CANARY_FAILED, ": ") {
            let (job, error) = job_and_error(rest);
            return Some(DrainReason::CanaryFailed { job, error });
        }
        if let Some(rest) = after(r, REASON_CHECK, " ") {
            let (check, rest) = rest.split_once(" failed: ")?;
            let (job, error) = job_and_error(rest);
            let check = check.to_string();
            return Some(DrainReason::CheckFailed { check, job, error });
        }
        if let Some(why) = after(r, REASON_DRAIN_REQUESTED, ": ") {
            return Some(DrainReason::Requested(why.to_string()));
        }
        let rest = r.strip_prefix("node ")?;
        if let Some(node) = rest.strip_suffix(" cordoned").filter(|n| !n.contains(' ')) {
            let node = node.to_string();
            return Some(DrainReason::Cordoned { node });
        }
        let (node, problem) = rest.split_once(": ")?;
        let (node, problem) = (node.to_string(), problem.to_string());
        Some(DrainReason::NodeProblem { node, problem })
    }

    /// For tests: the reason WORDS (after `slurmops: `) parse to.
    #[cfg(test)]
    pub fn ours(words: &str) -> DrainReason {
        DrainReason::parse(&format!("{REASON_PREFIX} {words}")).expect("ours")
    }

    /// A drain request on Kubernetes node NODE, with its requester's words WHY.
    pub fn node_request(node: String, why: &str) -> DrainReason {
        let problem = format!("{REASON_DRAIN_REQUESTED}: {why}");
        DrainReason::NodeProblem { node, problem }
    }

    /// Whether the controller's rollout, scale-in, removal or canary set it: the controller may
    /// resume it once the worker is wanted again (a cordon's, a check's, autoscale's and a
    /// request's drains are resumed by those who set them).
    pub fn is_controllers(&self) -> bool {
        matches!(
            self,
            DrainReason::Rollout
                | DrainReason::ScaleIn
                | DrainReason::Removed
                | DrainReason::NodeLeft
                | DrainReason::CanaryFailed { .. }
        )
    }

    /// Whether it was set for Kubernetes node ON (a cordon or a problem of that node).
    pub fn is_for_node(&self, on: &str) -> bool {
        match self {
            DrainReason::Cordoned { node } | DrainReason::NodeProblem { node, .. } => node == on,
            _ => false,
        }
    }

    /// The words after `slurmops: `.
    pub fn words(&self) -> String {
        let with_job = |job: &Option<u64>, error: &str| match job {
            Some(j) => format!("job {j}: {error}"),
            None => error.to_string(),
        };
        match self {
            DrainReason::Rollout => REASON_ROLLOUT.into(),
            DrainReason::ScaleIn => REASON_SCALE_IN.into(),
            DrainReason::Autoscale => REASON_AUTOSCALE.into(),
            DrainReason::Removed => REASON_REMOVED.into(),
            DrainReason::NodeLeft => REASON_NODE_LEFT.into(),
            DrainReason::ChecksPending => REASON_CHECKS_PENDING.into(),
            DrainReason::CanaryFailed { job, error } => {
                format!("{REASON_CANARY_FAILED}: {}", with_job(job, error))
            }
            DrainReason::CheckFailed { check, job, error } => {
                format!("{REASON_CHECK} {check} failed: {}", with_job(job, error))
            }
            DrainReason::Requested(why) => format!("{REASON_DRAIN_REQUESTED}: {why}"),
            DrainReason::Cordoned { node } => format!("node {node} cordoned"),
            DrainReason::NodeProblem { node, problem } => format!("node {node}: {problem}"),
            DrainReason::Other(words) => words.clone(),
        }
    }
}

/// The `by` label of `slurmops_slurm_drained_nodes`: who drained a Slurm node, one value per
/// kind of [`DrainReason`], then `slurmops_other` (`slurmops: ` and words this release does not
/// write) and `admin` (a reason without the prefix: someone else's). Alerts and dashboards name
/// these values.
pub const DRAINED_BY: [&str; 13] = [
    "rollout",
    "scale_in",
    "autoscale",
    "removed",
    "node_left",
    "checks_pending",
    "canary_failed",
    "check_failed",
    "requested",
    "cordoned",
    "node_problem",
    "slurmops_other",
    "admin",
];

/// The index in [`DRAINED_BY`] of who set Slurm drain REASON.
pub fn drained_by(reason: &str) -> usize {
    match DrainReason::parse(reason) {
        None => 12,
        Some(r) => match r {
            DrainReason::Rollout => 0,
            DrainReason::ScaleIn => 1,
            DrainReason::Autoscale => 2,
            DrainReason::Removed => 3,
            DrainReason::NodeLeft => 4,
            DrainReason::ChecksPending => 5,
            DrainReason::CanaryFailed { .. } => 6,
            DrainReason::CheckFailed { .. } => 7,
            DrainReason::Requested(_) => 8,
            DrainReason::Cordoned { .. } => 9,
            DrainReason::NodeProblem { .. } => 10,
            DrainReason::Other(_) => 11,
        },
    }
}

/// As Slurm keeps it: `slurmops: WORDS`.
impl fmt::Display for DrainReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{REASON_PREFIX} {}", self.words())
    }
}

/// What follows WORD and SEP at the start of R.
fn after<'a>(r: &'a str, word: &str, sep: &str) -> Option<&'a str> {
    r.strip_prefix(word)?.strip_prefix(sep)
}

/// `job N: ERROR` or `ERROR`.
fn job_and_error(rest: &str) -> (Option<u64>, String) {
    let parsed = rest
        .strip_prefix("job ")
        .and_then(|r| r.split_once(": "))
        .and_then(|(j, e)| Some((j.parse().ok()?, e)));
    match parsed {
        Some((job, error)) => (Some(job), error.to_string()),
        None => (None, rest.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::DrainReason::{self, *};

    fn every() -> Vec<DrainReason> {
        let error = || "exit 1: nvidia-smi: no devices".to_string();
        vec![
            Rollout,
            ScaleIn,
            Autoscale,
            Removed,
            NodeLeft,
            ChecksPending,
            CanaryFailed {
                job: Some(42),
                error: error(),
            },
            CanaryFailed {
                job: None,
                error: error(),
            },
            CheckFailed {
                check: "gpu".into(),
                job: Some(7),
                error: error(),
            },
            CheckFailed {
                check: "nccl".into(),
                job: None,
                error: error(),
            },
            Requested("gpu-health: XID 79".into()),
            Cordoned {
                node: "k8s-3".into(),
            },
            NodeProblem {
                node: "k8s-3".into(),
                problem: "GpuUnhealthy: XID 79".into(),
            },
            NodeProblem {
                node: "k8s-3".into(),
                problem: "drain requested: by annotation".into(),
            },
            Other("an older release's words".into()),
        ]
    }

    #[test]
    fn every_reason_reads_back_as_itself_from_what_slurm_keeps() {
        for r in every() {
            let text = r.to_string();
            assert!(text.starts_with("slurmops: "), "{text}");
            assert_eq!(DrainReason::parse(&text), Some(r), "{text}");
        }
    }

    #[test]
    fn the_reasons_spell_what_users_and_their_scripts_read() {
        let spelled: Vec<String> = every().iter().map(|r| r.to_string()).collect();
        assert_eq!(spelled[0], "slurmops: rollout");
        assert_eq!(
            spelled[6],
            "slurmops: canary failed: job 42: exit 1: nvidia-smi: no devices"
        );
        assert_eq!(
            spelled[8],
            "slurmops: check gpu failed: job 7: exit 1: nvidia-smi: no devices"
        );
        assert_eq!(spelled[11], "slurmops: node k8s-3 cordoned");
        assert_eq!(
            spelled[13],
            "slurmops: node k8s-3: drain requested: by annotation"
        );
    }

    #[test]
    fn each_kind_of_drain_has_its_own_drained_by_label_and_someone_else_s_is_admin() {
        use super::{DRAINED_BY, drained_by};
        let by: Vec<&str> = every()
            .iter()
            .map(|r| DRAINED_BY[drained_by(&r.to_string())])
            .collect();
        assert_eq!(
            by,
            [
                "rollout",
                "scale_in",
                "autoscale",
                "removed",
                "node_left",
                "checks_pending",
                "canary_failed",
                "canary_failed",
                "check_failed",
                "check_failed",
                "requested",
                "cordoned",
                "node_problem",
                "node_problem",
                "slurmops_other",
            ]
        );
        assert_eq!(DRAINED_BY[drained_by("bad DIMM")], "admin");
        assert_eq!(DRAINED_BY[drained_by("")], "admin");
        let seen: std::collections::BTreeSet<&str> = DRAINED_BY.into_iter().collect();
        assert_eq!(seen.len(), DRAINED_BY.len());
    }

    #[test]
    fn someone_else_s_drain_is_not_ours_and_only_the_controller_s_own_are_its_to_resume() {
        assert_eq!(DrainReason::parse("rollout"), None);
        assert_eq!(
            DrainReason::parse("admin: bad DIMM, slurmops: rollout"),
            None
        );
        assert_eq!(DrainReason::parse(""), None);
        let theirs: Vec<bool> = every().iter().map(DrainReason::is_controllers).collect();
        assert_eq!(
            theirs,
            [
                true, true, false, true, true, false, true, true, false, false, false, false,
                false, false, false
            ]
        );
        assert!(
            Cordoned {
                node: "k8s-3".into()
            }
            .is_for_node("k8s-3")
        );
        assert!(
            !Cordoned {
                node: "k8s-3".into()
            }
            .is_for_node("k8s-30")
        );
        let problem = DrainReason::parse("slurmops: node k8s-30: taint gpu:NoSchedule").unwrap();
        assert!(problem.is_for_node("k8s-30") && !problem.is_for_node("k8s-3"));
    }
}
