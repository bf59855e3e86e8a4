//! The canary gate of a rollout, pure: from a NodeSet's workers, its canary record and Slurm's
//! jobs to what the rollout may do this pass. A rollout under a canary replaces `replicas`
//! workers first and keeps them drained; once all are Ready and registered, a validation job is
//! submitted through slurmrestd pinned to exactly them (while still drained, with the highest
//! priority, so no user job lands there first), and then they are resumed. A job that completes
//! opens the gate: the rest of the NodeSet rolls. A job that fails, or does not end within its
//! timeout, halts the rollout: the canaries are drained with `slurmops: canary failed: job N:
//! <its error>` and nothing else moves until a new revision (a fix or a revert) or
//! `slurmops rollout --resume`.
//!
//! Nothing is remembered in memory: the jobs are found in Slurm by name, and the verdict is kept
//! in the workload's `slurmops.dev/canary` annotation (jobs leave slurmctld after MinJobAge),
//! by `act.rs`.

use super::probe::{self, Judge, Outcome, Probe, ended};
use crate::cluster::canary::{ScriptRef, ScriptSource, ValidateNodes};
use crate::cluster::canary_validation::Validation;
use crate::controller::decide::{
    Action, DrainReason, SetView, SlurmView, Worker, controller_drain,
};
pub use crate::controller::gate::{CanaryProgress, CanaryStage, Gate, Record, Verdict};
use crate::slurm::{Job, Node};

pub mod act;

/// Validation jobs are named `slurmops-canary:<NodeSet>:<revision>:<node or "all">`.
pub use crate::vocab::CANARY_JOB_PREFIX as JOB_PREFIX;

/// The gate a recorded verdict alone sets (a driver without the canary's spec: a failed canary
/// still halts the rollout).
pub fn recorded_gate(set: &SetView) -> Gate {
    let rev = set.update_revision.as_deref();
    match Record::parse(set.canary.as_deref()) {
        Some(r) if Some(r.revision.as_str()) == rev && r.verdict == Verdict::Failed => Gate::Halt,
        _ => Gate::Open,
    }
}

/// The canary's part of a pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Canaried {
    pub gate: Gate,
    /// Run before the rollout's own steps: submit, resume, cancel, hold.
    pub actions: Vec<Action>,
    /// A verdict to keep on the workload (after the actions succeeded).
    pub record: Option<Record>,
    pub progress: Option<CanaryProgress>,
}

/// The canary's decision for SET this pass. NOW is UNIX seconds.
pub fn assess(cx: &Validation, set: &SetView, slurm: &SlurmView, now: i64) -> Canaried {
    let Some(rev) = set.update_revision.as_deref() else {
        return Canaried::default();
    };
    let record = Record::parse(set.canary.as_deref()).filter(|r| r.revision == rev);
    let at_rev = at_revision(set, rev);
    let progress = |stage: CanaryStage, r: Option<&Record>| CanaryProgress {
        revision: rev.to_string(),
        stage,
        canaries: at_rev.iter().map(|w| w.name.clone()).collect(),
        jobs: r.and_then(|r| r.job).into_iter().collect(),
        error: r.and_then(|r| r.error.clone()),
        tail: r.and_then(|r| r.tail.clone()),
        deadline: None,
    };
    match record.as_ref().map(|r| r.verdict) {
        Some(v @ (Verdict::Passed | Verdict::Resumed)) => {
            let stage = if v == Verdict::Passed {
                CanaryStage::Passed
            } else {
                CanaryStage::Resumed
            };
            return Canaried {
                progress: Some(progress(stage, record.as_ref())),
                ..Canaried::default()
            };
        }
        Some(Verdict::Failed) => {
            return Canaried {
                gate: Gate::Halt,
                progress: Some(progress(CanaryStage::Failed, record.as_ref())),
                ..Canaried::default()
            };
        }
        None => {}
    }
    // Back to the revision the NodeSet ran before: nothing new to prove.
    if set.current_revision.as_deref() == Some(rev) {
        return Canaried::default();
    }
    let outdated = set.workers.iter().any(|w| w.revision != rev);
    let held = at_rev
        .iter()
        .any(|w| slurm.nodes.get(&w.name).is_some_and(controller_drain));
    // Nothing rolls (a new NodeSet, a settled one), or more workers than canaries run it already
    // (what the NodeSet ran before a revert): no canary.
    if (!outdated && !held) || at_rev.len() as u32 > cx.canary.replicas {
        return Canaried::default();
    }
    let need = cx.canary.replicas.min(set.replicas.max(1)) as usize;
    let limit = Gate::Limit(cx.canary.replicas);
    let registered = at_rev.iter().all(|w| up(w, slurm));
    if let Some(error) = not_up(&at_rev, cx, slurm, now) {
        return fail(rev, &at_rev, slurm, &[], None, error, String::new());
    }
    if at_rev.len() < need || !registered {
        let mut p = progress(CanaryStage::Replacing, None);
        p.deadline = ready_deadline(&at_rev, cx, slurm);
        return Canaried {
            gate: limit,
            progress: Some(p),
            ..Canaried::default()
        };
    }
    validate(cx, set, rev, &at_rev, slurm, now)
}

/// Workers on REV, not being deleted, in ordinal order.
fn at_revision<'a>(set: &'a SetView, rev: &str) -> Vec<&'a Worker> {
    let mut v: Vec<&Worker> = set
        .workers
        .iter()
        .filter(|w| w.revision == rev && !w.deleting)
        .collect();
    v.sort_by_key(|w| (w.ordinal, w.name.clone()));
    v
}

/// When the first canary not up yet runs out of its readyTimeout.
fn ready_deadline(canaries: &[&Worker], cx: &Validation, slurm: &SlurmView) -> Option<i64> {
    let limit = cx.canary.ready_timeout.as_secs() as i64;
    canaries
        .iter()
        .filter(|w| !up(w, slurm))
        .filter_map(|w| w.created)
        .map(|c| c.saturating_add(limit).saturating_add(1))
        .min()
}

/// The first canary not Ready and registered in Slurm `readyTimeout` after its pod was created,
/// and what it lacks: a bad image never starts, so no validation job could ever judge it.
fn not_up(canaries: &[&Worker], cx: &Validation, slurm: &SlurmView, now: i64) -> Option<String> {
    let limit = cx.canary.ready_timeout;
    canaries.iter().find_map(|w| {
        let late = w.created.is_some_and(|c| now - c > limit.as_secs() as i64);
        let lacks = match slurm.nodes.get(&w.name) {
            _ if !w.ready => "its pod is not Ready".to_string(),
            None => "its slurmd has not registered in Slurm".to_string(),
            Some(n) if !answers(n) => format!("its Slurm node is {}", n.state),
            Some(_) => return None,
        };
        late.then(|| format!("{} not up within readyTimeout {limit}: {lacks}", w.name))
    })
}

/// The canary is up: its pod Ready, its slurmd registered in Slurm and answering.
fn up(w: &Worker, slurm: &SlurmView) -> bool {
    w.ready && slurm.nodes.get(&w.name).is_some_and(answers)
}

/// slurmd answers: not DOWN, not NOT_RESPONDING.
fn answers(n: &Node) -> bool {
    !n.state.has("DOWN") && !n.state.has("NOT_RESPONDING")
}

/// The canaries are up: submit what is missing, resume them once their job waits, and judge
/// the jobs that ended.
fn validate(
    cx: &Validation,
    set: &SetView,
    rev: &str,
    canaries: &[&Worker],
    slurm: &SlurmView,
    now: i64,
) -> Canaried {
    let names: Vec<String> = canaries.iter().map(|w| w.name.clone()).collect();
    let targets: Vec<(String, Vec<String>)> = match cx.canary.validate.nodes {
        ValidateNodes::PerNode => names.iter().map(|n| (n.clone(), vec![n.clone()])).collect(),
        ValidateNodes::AllCanaries => vec![("all".into(), names.clone())],
    };
    let timeout = cx.canary.validate.timeout.as_secs() as i64;
    let mut out = Canaried {
        gate: Gate::Limit(cx.canary.replicas),
        ..Canaried::default()
    };
    let (mut jobs, mut failed, mut passed) = (Vec::new(), None, 0);
    for (target, nodes) in &targets {
        let name = job_name(&set.name, rev, target);
        let Some(j) = slurm.canary_job(&name) else {
            out.actions.push(submit(cx, &name, nodes));
            continue;
        };
        jobs.push(j.id);
        match judge(j, timeout, now) {
            Judged::Running => {}
            Judged::Passed => passed += 1,
            Judged::Failed { error, tail } => {
                failed.get_or_insert((j.id, error, tail));
            }
        }
    }
    if let Some((job, error, tail)) = failed {
        return fail(rev, canaries, slurm, &jobs, Some(job), error, tail);
    }
    if passed == targets.len() {
        let record = Record {
            revision: rev.into(),
            verdict: Verdict::Passed,
            job: jobs.first().copied(),
            error: None,
            tail: None,
        };
        out.progress = Some(progress_of(rev, &names, &jobs, CanaryStage::Passed, None));
        out.record = Some(record);
        return out;
    }
    // Every job is submitted (now or before): the canaries may take it.
    for w in canaries {
        if slurm.nodes.get(&w.name).is_some_and(controller_drain) {
            out.actions.push(Action::Resume {
                node: w.name.clone(),
            });
        }
    }
    let mut p = progress_of(rev, &names, &jobs, CanaryStage::Validating, None);
    p.deadline = jobs
        .iter()
        .filter_map(|id| slurm.job(*id))
        .filter(|j| !ended(j))
        .filter_map(|j| j.submit_time)
        .map(|t| t.saturating_add(timeout).saturating_add(61))
        .min();
    out.progress = Some(p);
    out
}

fn progress_of(
    rev: &str,
    names: &[String],
    jobs: &[u64],
    stage: CanaryStage,
    failed: Option<(&str, &str)>,
) -> CanaryProgress {
    CanaryProgress {
        revision: rev.into(),
        stage,
        canaries: names.to_vec(),
        jobs: jobs.to_vec(),
        error: failed.map(|f| f.0.to_string()),
        tail: failed.map(|f| f.1.to_string()).filter(|t| !t.is_empty()),
        deadline: None,
    }
}

/// A validation (JOB) failed, or a canary did not come up (no job): cancel the other jobs, drain
/// every canary with the error, keep the verdict.
#[allow(clippy::too_many_arguments)]
fn fail(
    rev: &str,
    canaries: &[&Worker],
    slurm: &SlurmView,
    jobs: &[u64],
    job: Option<u64>,
    error: String,
    tail: String,
) -> Canaried {
    let names: Vec<String> = canaries.iter().map(|w| w.name.clone()).collect();
    let mut actions: Vec<Action> = jobs
        .iter()
        .filter(|id| Some(**id) != job)
        .filter(|id| slurm.job(**id).is_some_and(|j| !ended(j)))
        .map(|id| Action::Cancel { job: *id })
        .collect();
    let reason = DrainReason::CanaryFailed {
        job,
        error: error.clone(),
    };
    actions.extend(names.iter().map(|n| Action::Hold {
        node: n.clone(),
        reason: reason.clone(),
    }));
    Canaried {
        gate: Gate::Halt,
        actions,
        record: Some(Record {
            revision: rev.into(),
            verdict: Verdict::Failed,
            job,
            error: Some(error.clone()),
            tail: Some(tail.clone()).filter(|t| !t.is_empty()),
        }),
        progress: Some(progress_of(
            rev,
            &names,
            jobs,
            CanaryStage::Failed,
            Some((&error, &tail)),
        )),
    }
}

pub fn job_name(node_set: &str, rev: &str, target: &str) -> String {
    format!("{JOB_PREFIX}:{node_set}:{rev}:{target}")
}

enum Judged {
    Running,
    Passed,
    Failed { error: String, tail: String },
}

/// Job J judged once it ended; one not ended within TIMEOUT (seconds) of its submission (a
/// minute's grace on top), pending included, failed.
fn judge(j: &Job, timeout: i64, now: i64) -> Judged {
    if !ended(j) {
        let late = j.submit_time.is_some_and(|t| now - t > timeout + 60);
        return match late {
            true => Judged::Failed {
                error: format!(
                    "did not end within its timeout ({}s), state {}",
                    timeout, j.state
                ),
                tail: String::new(),
            },
            false => Judged::Running,
        };
    }
    match probe::outcome(j) {
        Outcome::Passed { .. } => Judged::Passed,
        Outcome::Failed(f) => Judged::Failed {
            error: f.error_and_reason(),
            tail: f.tail(),
        },
        // Not once it ended.
        Outcome::Running => Judged::Running,
    }
}

/// Each NodeSet's canary validation job as slurmops submits it (for revision `REV`, on the
/// NodeSet's first workers as its canaries): (NodeSet, job, where its script is read from when
/// sent, a ConfigMap's).
pub fn jobs(
    spec: &crate::cluster::types::ClusterSpec,
) -> Vec<(String, crate::slurm::JobRequest, Option<ScriptRef>)> {
    let mut out = Vec::new();
    for n in &spec.node_sets {
        let Some(cx) = Validation::of(spec, n) else {
            continue;
        };
        let names: Vec<String> = (0..cx.canary.replicas.max(1))
            .map(|i| format!("{}-{i}", n.name))
            .collect();
        let (target, nodes) = match cx.canary.validate.nodes {
            ValidateNodes::PerNode => (names[0].clone(), vec![names[0].clone()]),
            ValidateNodes::AllCanaries => ("all".to_string(), names),
        };
        if let Action::Submit { job, from } =
            submit(&cx, &job_name(&n.name, "REV", &target), &nodes)
        {
            out.push((n.name.clone(), job, from));
        }
    }
    out
}

/// The submission of one validation job (the script of a ConfigMap is read when it is sent).
fn submit(cx: &Validation, name: &str, nodes: &[String]) -> Action {
    let v = &cx.canary.validate;
    let missing = || "echo 'no validation script' >&2; exit 1".to_string();
    let (script, how, from) = match v.source() {
        Some(ScriptSource::Builtin(b)) => (
            probe::scripts::canary_builtin(b, v.nodes, cx.gpus),
            Judge::ExitCode,
            None,
        ),
        Some(ScriptSource::Inline(s)) => (s, Judge::ExitCode, None),
        Some(ScriptSource::ConfigMap(r)) => (String::new(), Judge::ExitCode, Some(r)),
        // The active check's own script and threshold; a failure is the canary's to handle.
        Some(ScriptSource::Check(_)) => match &cx.check {
            Some(c) => {
                let (script, how) = probe::check(c, cx.gpus, false);
                (script, how, None)
            }
            None => (missing(), Judge::ExitCode, None),
        },
        None => (missing(), Judge::ExitCode, None),
    };
    let probe = Probe {
        partition: &cx.partition,
        nodes: nodes.to_vec(),
        timeout_secs: v.timeout.as_secs(),
        extra_minutes: 0,
        exclusive: false,
        licenses: None,
        // A canary is new and held for its validation: the job takes its GPUs.
        gpus: cx.gpus,
    };
    Action::Submit {
        job: probe.job(name, &script, &how),
        from,
    }
}

#[cfg(test)]
mod tests;
