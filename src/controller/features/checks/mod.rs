//! Active checks (`policy.activeChecks`), pure: from the workers, their check marks (pod
//! conditions) and Slurm's nodes and check jobs to the steps of this pass.
//!
//! A check is due on a worker when its pod has no result yet (`onRegister`: a new worker) or
//! its last result is older than the schedule's last tick. A due check is a Slurm job pinned to
//! the worker, exclusive, with the highest priority, named `slurmops-check:CHECK:NODE:DUE`, so a
//! pass finds it again in Slurm and never submits it twice. A new worker registers drained
//! (`slurmops: checks pending`); once every check due on it is submitted it is resumed, and its
//! jobs take it before any user's job. A scheduled run starts only on an idle worker (unless the
//! check runs beside jobs). At most `maxConcurrent` jobs of a check exist in Slurm at once.
//!
//! A job that ended is judged (exit code, and its figure against `minValue`) and the result kept
//! on the pod as condition `checks.slurmops.dev/CHECK`. A failure drains the worker with
//! `slurmops: check CHECK failed: job N: ERROR`: the job, an unprivileged user's, cannot drain
//! it, so a failed one reports through its comment and keeps the worker until a pass has
//! judged it from that report and drained it (no user's job starts there in between); a later
//! pass of the check resumes it. A job running past
//! its timeout is cancelled and counts as failed. Only slurmops' own drains are ever resumed.

use std::collections::{BTreeMap, BTreeSet};

use super::probe::{self, HOLD_SECS, Outcome, Probe, ended};
use crate::cluster::active_checks::{ActiveCheck, OnFailure};
use crate::cluster::types::ClusterSpec;
use crate::controller::decide::{Action, SetView, SlurmView, Worker};
pub use crate::controller::mark::{Mark, Summary, marks};
use crate::slurm::{Job, JobRequest, Node};
use crate::vocab::{CHECK_JOB_PREFIX, DrainReason};

pub mod act;

/// What the checks add to a pass.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Checked {
    /// Steps by NodeSet: submissions, resumes, holds, cancellations, marks.
    pub actions: BTreeMap<String, Vec<Action>>,
    /// Workers whose rollout resume waits for their checks to be submitted.
    pub keep_drained: BTreeSet<String>,
    /// NodeSets with a worker held for its checks, or a new worker's first check running: their
    /// pass is not done (`apply` and `rollout` wait for them).
    pub busy: BTreeSet<String>,
    /// Where each check stands, by NodeSet.
    pub summary: BTreeMap<String, Vec<Summary>>,
}

/// Failures a summary names (the counts stay exact).
const MAX_FAILURES: usize = 20;

/// The drain reason of a failed check.
pub fn failed_reason(check: &str, job: Option<u64>, error: &str) -> DrainReason {
    let (check, error) = (check.to_string(), error.to_string());
    DrainReason::CheckFailed { check, job, error }
}

/// The check N's drain names, when N is drained by slurmops for a check: Some("") when held
/// for pending checks, Some(CHECK) for a failed one.
fn check_drain(n: &Node) -> Option<String> {
    if !n.state.has("DRAIN") {
        return None;
    }
    match DrainReason::parse(&n.reason)? {
        DrainReason::ChecksPending => Some(String::new()),
        DrainReason::CheckFailed { check, .. } => Some(check),
        _ => None,
    }
}

pub fn job_name(check: &str, node: &str, due: i64) -> String {
    format!("{CHECK_JOB_PREFIX}:{check}:{node}:{due}")
}

/// The checks' part of a pass over SETS. ROLLOUT_RESUMES: the workers the rollout resumes this
/// pass (a replaced worker back on its revision), which a due check keeps drained instead.
pub fn assess(
    spec: &ClusterSpec,
    sets: &BTreeMap<String, SetView>,
    slurm: &SlurmView,
    host_blocks: &BTreeMap<String, String>,
    rollout_resumes: &BTreeSet<String>,
    now: i64,
) -> Checked {
    let checks = &spec.policy.active_checks;
    let mut out = Checked::default();
    let mut room: BTreeMap<&str, u32> = BTreeMap::new();
    for c in checks {
        let running = slurm.check_jobs(&format!("{CHECK_JOB_PREFIX}:{}:", c.name));
        let outstanding = running.iter().filter(|j| !ended(j)).count() as u32;
        room.insert(&c.name, c.max_concurrent.saturating_sub(outstanding));
    }
    let latest = latest_jobs(slurm);
    for set in sets.values() {
        let spec_set = spec.node_sets.iter().find(|n| n.name == set.name);
        let mine: Vec<&ActiveCheck> = match spec_set {
            Some(ns) => checks.iter().filter(|c| c.covers(ns)).collect(),
            None => Vec::new(),
        };
        let partition = spec.partition_of(&set.name).map(|p| p.name.clone());
        let (false, Some(partition)) = (mine.is_empty(), partition) else {
            release(set, slurm, &mut out);
            continue;
        };
        out.summary.insert(
            set.name.clone(),
            mine.iter()
                .map(|c| Summary {
                    check: c.name.clone(),
                    next: c.next_tick(now),
                    ..Summary::default()
                })
                .collect(),
        );
        let gpus = spec_set
            .and_then(|n| n.gpus.as_ref())
            .map_or(0, |g| g.count);
        let mut workers: Vec<&Worker> = set.workers.iter().filter(|w| !w.deleting).collect();
        workers.sort_by_key(|w| (w.ordinal, w.name.clone()));
        for w in workers {
            let Some(n) = slurm.nodes.get(&w.name) else {
                continue;
            };
            let cx = worker::Worker1 {
                w,
                n,
                latest: &latest,
                set: &set.name,
                partition: &partition,
                gpus,
                resumed_by_rollout: rollout_resumes.contains(&w.name),
            };
            worker::worker(&cx, &mine, &mut room, now, &mut out);
        }
        for c in mine.iter().filter(|c| c.across_nodes()) {
            let on = groups::On {
                set,
                latest: &latest,
                partition: &partition,
                gpus,
            };
            for g in groups::of(c, set, slurm, host_blocks) {
                groups::run(&on, c, &g, checks, &mut room, now, &mut out);
            }
        }
    }
    out
}

/// With Slurm's job queue unknown no check can be judged or submitted: of the workers the
/// rollout would resume (ROLLOUT_RESUMES), those a check must pass on first (a new pod, no
/// result) stay drained.
pub fn unchecked(
    spec: &ClusterSpec,
    sets: &BTreeMap<String, SetView>,
    rollout_resumes: &BTreeSet<String>,
) -> BTreeSet<String> {
    let checks = &spec.policy.active_checks;
    sets.values()
        .flat_map(|set| {
            let ns = spec.node_sets.iter().find(|n| n.name == set.name);
            let mine: Vec<&ActiveCheck> = checks
                .iter()
                .filter(|c| c.on_register && ns.is_some_and(|ns| c.covers(ns)))
                .collect();
            set.workers
                .iter()
                .filter(move |w| {
                    rollout_resumes.contains(&w.name)
                        && mine.iter().any(|c| !w.checks.contains_key(&c.name))
                })
                .map(|w| w.name.clone())
        })
        .collect()
}

/// No check covers SET (any more): a drain slurmops set for checks is resumed.
fn release(set: &SetView, slurm: &SlurmView, out: &mut Checked) {
    for w in set.workers.iter().filter(|w| !w.deleting) {
        let n = slurm.nodes.get(&w.name);
        if n.is_some_and(|n| check_drain(n).is_some() && !n.state.has("NOT_RESPONDING")) {
            out.actions
                .entry(set.name.clone())
                .or_default()
                .push(Action::Resume {
                    node: w.name.clone(),
                });
        }
    }
}

/// The newest job of each check on each node: (check, node) → (its due stamp, the job).
type Latest<'a> = BTreeMap<(&'a str, &'a str), (i64, &'a Job)>;

/// Every check job's target and stamp, from its name (`slurmops-check:CHECK:NODE:DUE`), the
/// newest per target: one walk of the check jobs per pass.
fn latest_jobs(slurm: &SlurmView) -> Latest<'_> {
    let mut out: Latest = BTreeMap::new();
    for j in slurm.check_jobs(&format!("{CHECK_JOB_PREFIX}:")) {
        let mut parts = j.name.splitn(4, ':').skip(1);
        let (Some(check), Some(node), Some(due)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Ok(due) = due.parse::<i64>() else {
            continue;
        };
        let e = out.entry((check, node)).or_insert((due, j));
        if e.1.id < j.id {
            *e = (due, j);
        }
    }
    out
}

fn summary<'a>(out: &'a mut Checked, set: &str, check: &str) -> &'a mut Summary {
    out.summary
        .get_mut(set)
        .and_then(|v| v.iter_mut().find(|s| s.check == check))
        .expect("a summary per NodeSet and check")
}

/// Counts W's standing result of C in its summary: whether it failed and drains the worker.
fn count(out: &mut Checked, set: &str, c: &ActiveCheck, w: &Worker) -> bool {
    let Some(m) = w.checks.get(&c.name) else {
        return false;
    };
    tally(out, set, c, w, m);
    !m.passed && c.on_failure == OnFailure::Drain
}

/// Counts W's result M of C.
fn tally(out: &mut Checked, set: &str, c: &ActiveCheck, w: &Worker, m: &Mark) {
    let s = summary(out, set, &c.name);
    if m.passed {
        s.passed += 1;
    } else {
        s.failed += 1;
        if s.failures.len() < MAX_FAILURES {
            let job = m.job.map(|j| format!("job {j}: ")).unwrap_or_default();
            s.failures.push(format!("{}: {job}{}", w.name, m.text));
        }
    }
}

fn mark_of(w: &Worker, c: &ActiveCheck, mark: Mark) -> Action {
    Action::Mark {
        pod: w.name.clone(),
        check: c.name.clone(),
        mark,
    }
}

fn hold(check: &str, node: &str, job: Option<u64>, error: &str) -> Action {
    Action::Hold {
        node: node.into(),
        reason: failed_reason(check, job, error),
    }
}

/// Whether J is to be judged now: it ended after it ran (one cancelled while pending has no
/// nodes), or it still runs and reports a failure (it waits for its worker to be drained).
fn judgeable(j: &Job) -> bool {
    match probe::outcome(j) {
        Outcome::Running => false,
        _ if ended(j) => !j.nodes.is_empty(),
        _ => true,
    }
}

/// The result of job J of check C, which is judgeable.
fn judge(c: &ActiveCheck, j: &Job, now: i64) -> Mark {
    let at = j.end_time.filter(|t| *t > 0).unwrap_or(now);
    let unit = c.unit.as_deref().unwrap_or("");
    let (passed, value, text) = match probe::outcome(j) {
        Outcome::Passed { value } => (
            true,
            value,
            match value {
                Some(v) => format!("passed, {v} {unit}").trim_end().to_string(),
                None => "passed".into(),
            },
        ),
        // Cancelled at its timeout (by a pass whose mark this pass may not see yet), or by Slurm.
        Outcome::Failed(f) if f.timed_out(c.timeout.as_secs() as i64) => (
            false,
            f.value(),
            format!("ran past its timeout {}, cancelled", c.timeout),
        ),
        Outcome::Failed(f) => (false, f.value(), f.error()),
        // Not judgeable: read as it stands.
        Outcome::Running => (false, None, j.state.to_string()),
    };
    Mark {
        passed,
        at,
        job: Some(j.id),
        value,
        text,
    }
}

/// The submission of check C's job NAME on NODES.
fn request(
    c: &ActiveCheck,
    name: &str,
    nodes: Vec<String>,
    partition: &str,
    gpus: u32,
) -> JobRequest {
    let (script, how) = probe::check(c, gpus, c.on_failure == OnFailure::Drain);
    let probe = Probe {
        partition,
        nodes,
        // Slurm's limit is a backstop: the pass cancels a job at its timeout. A failed job
        // waits for its drain on top (`probe::HOLD_SECS`).
        timeout_secs: c.timeout.as_secs(),
        extra_minutes: 1 + HOLD_SECS.div_ceil(60),
        exclusive: !c.while_jobs_run,
        licenses: Some(format!("{}:1", c.license())),
        // Beside users' jobs it takes no GPU of theirs.
        gpus: if c.while_jobs_run { 0 } else { gpus },
    };
    probe.job(name, &script, &how)
}

/// Every check's job on each NodeSet it covers, as slurmops submits it for workers of that
/// NodeSet: (check, NodeSet, job). The workers named are the NodeSet's first (two for a pair;
/// a block's job names one, its block's workers being known only once placed), and the job
/// name's time is 0.
pub fn jobs(spec: &ClusterSpec) -> Vec<(String, String, JobRequest)> {
    let mut out = Vec::new();
    for c in &spec.policy.active_checks {
        for n in spec.node_sets.iter().filter(|n| c.covers(n)) {
            let gpus = n.gpus.as_ref().map_or(0, |g| g.count);
            let partition = spec
                .partition_of(&n.name)
                .map(|p| p.name.clone())
                .unwrap_or_default();
            let count = match c.span {
                crate::cluster::active_checks::CheckSpan::Pair => 2,
                _ => 1,
            };
            let nodes: Vec<String> = (0..count).map(|i| format!("{}-{i}", n.name)).collect();
            let target = match count {
                1 => nodes[0].clone(),
                _ => nodes.join(","),
            };
            let name = job_name(&c.name, &target, 0);
            let job = request(c, &name, nodes, &partition, gpus);
            out.push((c.name.clone(), n.name.clone(), job));
        }
    }
    out
}

mod groups;
#[cfg(test)]
pub(crate) mod tests;
mod worker;
