//! Active health checks (`policy.activeChecks`): named checks that run as Slurm jobs on the
//! workers — after a worker registers and before it takes users' jobs, and on a cron schedule —
//! with a cap on how many run at once and what a failure does. A node can look healthy to
//! Kubernetes and to slurmd and still fail the first real job; only a job proves it.
//! The decisions are in `controller::features::checks`; this is what cluster.yaml says.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::nodeset::NodeSet;
use super::values::Duration;

/// One named check: what runs, where, when, at what cost, and what a failure does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActiveCheck {
    /// Its name (lowercase letters, digits and `-`): in job names, drain reasons, pod
    /// conditions (`checks.slurmops.dev/NAME`) and metrics.
    pub name: String,
    /// A check slurmops ships: `gpu` (every GPU seen, then `dcgmi diag` at `level`), `nccl`
    /// (all_reduce_perf across the node's GPUs, its average bus bandwidth in GB/s as the figure),
    /// `ib` (every InfiniBand port Active, the lowest rate in Gb/s as the figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<CheckBuiltin>,
    /// The script itself (a `#!` line picks its interpreter; bash without one). It passes when
    /// it exits 0; a line `slurmops-value: X` it prints is its figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// The `gpu` check's `dcgmi diag -r` level: 1 (seconds) to 4 (an hour or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<u8>,
    /// The check fails when its figure is below this (or when it prints none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_value: Option<f64>,
    /// The figure's unit, as status and metrics show it (e.g. `GB/s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The NodeSets whose workers it checks; empty: every NodeSet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_sets: Vec<String>,
    /// Only NodeSets with all these Slurm features (their name and `features`), e.g. `ib`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// Run on every new worker (a new pod) before it takes users' jobs: the worker registers
    /// drained and is resumed only once the check passed.
    #[serde(default = "yes")]
    pub on_register: bool,
    /// Cron (minute hour day-of-month month day-of-week, days by name): run again on every
    /// checked worker at each time it names, on idle workers (see `whileJobsRun`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// IANA time zone of the schedule (default UTC).
    #[serde(default = "utc")]
    pub time_zone: String,
    /// At most this many of its jobs exist in Slurm at once, pending or running (default 1).
    #[serde(default = "one")]
    pub max_concurrent: u32,
    /// Its job's time limit: a job running longer is cancelled and counts as failed.
    #[serde(default = "ten_minutes")]
    pub timeout: Duration,
    /// `drain` (default): the node is drained with `slurmops: check NAME failed: …` until the
    /// check passes again; `report`: only status, the pod condition, metrics and an Event.
    #[serde(default)]
    pub on_failure: OnFailure,
    /// A scheduled run may share a node with users' jobs (a light check); by default it runs
    /// only on a node with no job.
    #[serde(default)]
    pub while_jobs_run: bool,
    /// What one job checks: `node` (default: each worker alone), `block` (one job across all
    /// the workers of a topology block, e.g. NCCL over NVLink), `pair` (one job across two
    /// workers, e.g. InfiniBand bandwidth between them). A check across nodes runs on its
    /// schedule only, when every worker of the group is free, and its result counts for each
    /// of them: a failure drains them all (`onFailure: report` only reports).
    #[serde(default, skip_serializing_if = "super::serde_defaults::is_default")]
    pub span: CheckSpan,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CheckSpan {
    #[default]
    Node,
    Block,
    Pair,
}

impl CheckSpan {
    pub fn name(self) -> &'static str {
        match self {
            CheckSpan::Node => "node",
            CheckSpan::Block => "block",
            CheckSpan::Pair => "pair",
        }
    }
}

fn yes() -> bool {
    true
}
fn utc() -> String {
    "UTC".into()
}
fn one() -> u32 {
    1
}
fn ten_minutes() -> Duration {
    Duration::from_secs(600)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CheckBuiltin {
    Gpu,
    Nccl,
    Ib,
}

impl CheckBuiltin {
    pub fn name(self) -> &'static str {
        match self {
            CheckBuiltin::Gpu => "gpu",
            CheckBuiltin::Nccl => "nccl",
            CheckBuiltin::Ib => "ib",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    #[default]
    Drain,
    Report,
}

impl ActiveCheck {
    /// Whether it checks the workers of NODE_SET: named (or none named), and with every
    /// feature asked for.
    pub fn covers(&self, node_set: &NodeSet) -> bool {
        let named = self.node_sets.is_empty() || self.node_sets.contains(&node_set.name);
        let has = |f: &String| *f == node_set.name || node_set.features.contains(f);
        named && self.features.iter().all(has)
    }

    /// The parsed schedule, when it has one.
    pub fn parsed_schedule(&self) -> Option<Result<super::window::Cron, String>> {
        let s = self.schedule.as_deref()?;
        Some(super::window::parse_cron(s, &self.time_zone))
    }

    /// The last time its schedule named at or before NOW (UNIX seconds).
    pub fn last_tick(&self, now: i64) -> Option<i64> {
        let (schedule, tz) = self.parsed_schedule()?.ok()?;
        let z = jiff::Timestamp::from_second(now.saturating_add(1))
            .ok()?
            .to_zoned(tz);
        Some(schedule.after(z).next_back()?.timestamp().as_second())
    }

    /// The first time its schedule names after NOW.
    pub fn next_tick(&self, now: i64) -> Option<i64> {
        let (schedule, tz) = self.parsed_schedule()?.ok()?;
        let z = jiff::Timestamp::from_second(now).ok()?.to_zoned(tz);
        Some(schedule.after(z).next()?.timestamp().as_second())
    }

    /// How plans and status name what runs.
    pub fn describe(&self) -> String {
        let what = match (&self.builtin, &self.script) {
            (Some(b), _) => format!("the built-in {} check", b.name()),
            _ => "its script".into(),
        };
        match self.span {
            CheckSpan::Node => what,
            CheckSpan::Block => format!("{what} across the workers of each topology block"),
            CheckSpan::Pair => format!("{what} across each pair of workers"),
        }
    }

    /// The Slurm license that caps its jobs: slurm.conf declares `maxConcurrent` of it and each
    /// job takes one, so slurmctld runs no more at once whatever submitted them.
    pub fn license(&self) -> String {
        format!("{}{}", crate::vocab::CHECK_LICENSE_PREFIX, self.name)
    }

    /// Whether one job checks several workers together.
    pub fn across_nodes(&self) -> bool {
        self.span != CheckSpan::Node
    }
}

/// Whether any check holds the workers of NODE_SET until it passed (they register drained).
pub fn holds_new_workers(checks: &[ActiveCheck], node_set: &NodeSet) -> bool {
    checks
        .iter()
        .any(|c| c.on_register && !c.across_nodes() && c.covers(node_set))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(schedule: &str, zone: &str) -> ActiveCheck {
        serde_json::from_value(serde_json::json!(
            {"name": "c", "script": "true", "schedule": schedule, "timeZone": zone}
        ))
        .unwrap()
    }

    #[test]
    fn a_schedule_names_its_last_and_next_time_in_its_zone() {
        // 2026-11-27 12:00:00 UTC; 03:00 in Amsterdam (UTC+1 in winter) is 02:00 UTC.
        let now = 1_795_780_800;
        let c = check("0 3 * * *", "Europe/Amsterdam");
        assert_eq!(c.last_tick(now), Some(1_795_780_800 - 10 * 3600));
        assert_eq!(c.next_tick(now), Some(1_795_780_800 + 14 * 3600));
        // A tick exactly now is the last one.
        let every = check("* * * * *", "UTC");
        assert_eq!(every.last_tick(now), Some(now));
        assert_eq!(every.next_tick(now), Some(now + 60));
    }

    #[test]
    fn defaults_check_new_workers_one_at_a_time_and_drain_on_failure() {
        let c: ActiveCheck =
            serde_json::from_value(serde_json::json!({"name": "c", "builtin": "gpu"})).unwrap();
        let gpu: NodeSet = serde_json::from_value(serde_json::json!(
            {"name": "gpu", "replicas": 2, "features": ["ib"]}
        ))
        .unwrap();
        assert!(c.on_register && c.covers(&gpu));
        assert_eq!((c.max_concurrent, c.on_failure), (1, OnFailure::Drain));
        assert!(holds_new_workers(std::slice::from_ref(&c), &gpu));
        // Features narrow it: the NodeSet's name and features count.
        let mut on = c.clone();
        on.features = vec!["gpu".into(), "ib".into()];
        assert!(on.covers(&gpu));
        on.features.push("nvlink".into());
        assert!(!on.covers(&gpu) && !holds_new_workers(&[on], &gpu));
    }
}
