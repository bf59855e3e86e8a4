use super::*;
use crate::cluster::canary::{Builtin, Canary, Validate};
use crate::cluster::values::Duration;
use crate::controller::decide::tests::{NOW, node};
use crate::controller::decide::{Decision, Policy, Want};
use crate::controller::decisions::gated;
use crate::slurm::JobRequest;

fn worker(i: u32, rev: &str) -> Worker {
    Worker {
        name: format!("w-{i}"),
        uid: format!("uid-{i}"),
        ordinal: Some(i),
        revision: rev.into(),
        ready: true,
        deleting: false,
        created: Some(NOW - 3600),
        host: None,
        checks: Default::default(),
    }
}

fn set(revs: &[&str], record: Option<Record>) -> SetView {
    SetView {
        name: "w".into(),
        replicas: revs.len() as u32,
        update_revision: Some("new".into()),
        managed: false,
        canary: record.map(|r| r.to_json()),
        current_revision: Some("old".into()),
        workers: revs
            .iter()
            .enumerate()
            .map(|(i, r)| worker(i as u32, r))
            .collect(),
    }
}

fn validation(replicas: u32, nodes: ValidateNodes) -> Validation {
    Validation {
        canary: Canary {
            replicas,
            validate: Validate {
                builtin: Some(Builtin::Hostname),
                script: None,
                config_map_ref: None,
                check: None,
                timeout: Duration::from_secs(300),
                nodes,
            },
            ready_timeout: Duration::from_secs(1800),
        },
        partition: "gpu".into(),
        gpus: 8,
        check: None,
    }
}

fn slurm(nodes: Vec<Node>, jobs: Vec<Job>) -> SlurmView {
    SlurmView::new(nodes, jobs)
}

fn idle(names: &[&str]) -> Vec<Node> {
    names.iter().map(|n| node(n, &["IDLE"], "")).collect()
}

fn run(s: &SetView, v: &Validation, view: &SlurmView, max_unavailable: u32) -> Decision {
    let mut p = Policy {
        max_unavailable,
        ..Policy::default()
    };
    gated(s, &Want::Current, &mut p, Some(v), view, NOW)
}

fn validation_job(id: u64, target: &str, state: &str, exit: Option<i64>, comment: &str) -> Job {
    Job {
        id,
        name: job_name("w", "new", target).into(),
        user: "root".into(),
        state: state.into(),
        nodes: vec![target.into()],
        exit_code: exit,
        comment: comment.into(),
        submit_time: Some(NOW - 30),
        ..Job::default()
    }
}

fn drains(d: &Decision) -> Vec<String> {
    d.actions
        .iter()
        .filter_map(|a| match a {
            Action::Drain { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_rollout_under_a_canary_drains_only_the_canaries_whatever_max_unavailable_allows() {
    let s = set(&["old", "old", "old", "old"], None);
    let view = slurm(idle(&["w-0", "w-1", "w-2", "w-3"]), vec![]);
    let d = run(&s, &validation(1, ValidateNodes::PerNode), &view, 3);
    assert_eq!(drains(&d), vec!["w-0".to_string()]);
    let c = d.progress.canary.expect("canary progress");
    assert_eq!(c.stage, CanaryStage::Replacing);
    assert!(!d.progress.done);
}

#[test]
fn a_canary_deleted_and_not_yet_recreated_still_fills_the_canary_limit() {
    // w-0 was the canary: drained, its pod deleted; the StatefulSet has not recreated it yet.
    let mut s = set(&["old", "old", "old", "old"], None);
    s.workers.remove(0);
    let view = slurm(idle(&["w-1", "w-2", "w-3"]), vec![]);
    let d = run(&s, &validation(1, ValidateNodes::PerNode), &view, 3);
    assert_eq!(drains(&d), Vec::<String>::new(), "{:?}", d.actions);
    assert_eq!(
        d.progress.canary.expect("canary progress").stage,
        CanaryStage::Replacing
    );
}

#[test]
fn registered_canaries_get_their_job_first_and_are_resumed_after_it_no_other_worker_moves() {
    let s = set(&["new", "new", "old", "old"], None);
    let mut nodes = idle(&["w-2", "w-3"]);
    nodes.push(node("w-0", &["IDLE", "DRAIN"], "slurmops: rollout"));
    nodes.push(node("w-1", &["IDLE", "DRAIN"], "slurmops: rollout"));
    let view = slurm(nodes, vec![]);
    let d = run(&s, &validation(2, ValidateNodes::PerNode), &view, 2);
    let kinds: Vec<String> = d
        .actions
        .iter()
        .map(|a| match a {
            Action::Submit { job, .. } => format!("submit {}", job.nodes.join(",")),
            Action::Resume { node } => format!("resume {node}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["submit w-0", "submit w-1", "resume w-0", "resume w-1"],
        "the jobs are submitted while the canaries are still drained, then they are resumed"
    );
    let Some(Action::Submit { job, from: None }) = d.actions.first() else {
        panic!("{:?}", d.actions)
    };
    assert_eq!(job.name, "slurmops-canary:w:new:w-0");
    assert_eq!(job.partition, "gpu");
    assert_eq!(job.time_limit_minutes, 5);
    assert!(job.script.contains("runs jobs"), "{}", job.script);
}

#[test]
fn all_canaries_share_one_job_spanning_them() {
    let s = set(&["new", "new", "old"], None);
    let mut nodes = idle(&["w-2"]);
    nodes.push(node("w-0", &["IDLE", "DRAIN"], "slurmops: rollout"));
    nodes.push(node("w-1", &["IDLE", "DRAIN"], "slurmops: rollout"));
    let d = run(
        &s,
        &validation(2, ValidateNodes::AllCanaries),
        &slurm(nodes, vec![]),
        1,
    );
    let submits: Vec<&JobRequest> = d
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Submit { job, .. } => Some(job),
            _ => None,
        })
        .collect();
    assert_eq!(submits.len(), 1);
    assert_eq!(submits[0].nodes, vec!["w-0", "w-1"]);
    assert!(submits[0].script.contains("srun --ntasks-per-node=1"));
}

#[test]
fn canaries_that_are_not_registered_yet_wait_without_a_job_or_a_resume() {
    let mut s = set(&["new", "old", "old"], None);
    // Replaced two minutes ago, well within readyTimeout.
    s.workers[0].created = Some(NOW - 120);
    let mut nodes = idle(&["w-1", "w-2"]);
    nodes.push(node(
        "w-0",
        &["IDLE", "DRAIN", "NOT_RESPONDING"],
        "slurmops: rollout",
    ));
    let d = run(
        &s,
        &validation(1, ValidateNodes::PerNode),
        &slurm(nodes, vec![]),
        2,
    );
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert_eq!(d.progress.canary.unwrap().stage, CanaryStage::Replacing);
}

#[test]
fn a_running_validation_holds_the_rest_and_a_completed_one_records_a_pass() {
    let s = set(&["new", "old", "old"], None);
    let nodes = idle(&["w-0", "w-1", "w-2"]);
    let running = validation_job(7, "w-0", "RUNNING", None, "");
    let v = validation(1, ValidateNodes::PerNode);
    let d = run(&s, &v, &slurm(nodes.clone(), vec![running]), 2);
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert_eq!(
        d.progress.canary.as_ref().unwrap().stage,
        CanaryStage::Validating
    );
    // Submitted 30 s ago with a 300 s timeout: judged once that and a minute's grace have passed.
    assert_eq!(
        d.progress.canary.as_ref().unwrap().deadline,
        Some(NOW - 30 + 300 + 61)
    );
    assert_eq!(d.progress.canary.unwrap().jobs, vec![7]);

    let done = validation_job(
        7,
        "w-0",
        "COMPLETED",
        Some(0),
        "slurmops-canary rc=0; error: ; tail: ok",
    );
    let d = run(&s, &v, &slurm(nodes.clone(), vec![done]), 2);
    let r = d.record.expect("a verdict");
    assert_eq!(
        (r.verdict, r.job, r.revision.as_str()),
        (Verdict::Passed, Some(7), "new")
    );
    // The next pass reads the verdict: the rest rolls within maxUnavailable.
    let s = set(&["new", "old", "old"], Some(r));
    let d = run(&s, &v, &slurm(nodes, vec![]), 2);
    assert_eq!(drains(&d), vec!["w-1".to_string(), "w-2".to_string()]);
}

/// Issue 33: any Slurm user can name a job like a canary's. Only jobs of the user slurmops
/// submits as count: a look-alike neither passes a canary nor fails it.
#[test]
fn a_job_named_like_a_canarys_by_another_user_is_ignored() {
    let s = set(&["new", "old", "old"], None);
    let nodes = idle(&["w-0", "w-1", "w-2"]);
    let v = validation(1, ValidateNodes::PerNode);
    let ok = "slurmops-canary rc=0; error: ; tail: ok";
    let bad = "slurmops-canary rc=1; error: boom; tail: boom";
    for (comment, exit) in [(ok, 0), (bad, 1)] {
        let spoof = Job {
            user: "mallory".into(),
            ..validation_job(9, "w-0", "COMPLETED", Some(exit), comment)
        };
        let view = slurm(nodes.clone(), vec![spoof]).canaries_of(Some("root"));
        let d = run(&s, &v, &view, 2);
        assert!(
            d.record.is_none(),
            "a verdict from mallory's job: {:?}",
            d.record
        );
        assert!(
            d.actions.iter().any(|a| matches!(a, Action::Submit { .. })),
            "the canary's own job is still submitted: {:?}",
            d.actions
        );
    }
    // The same job from the submitter is judged.
    let own = validation_job(9, "w-0", "COMPLETED", Some(0), ok);
    let view = slurm(nodes, vec![own]).canaries_of(Some("root"));
    assert!(run(&s, &v, &view, 2).record.is_some());
}

#[test]
fn a_failed_validation_holds_the_canaries_with_its_error_and_halts_everything() {
    let s = set(&["new", "new", "old", "old"], None);
    let nodes = idle(&["w-0", "w-1", "w-2", "w-3"]);
    let failed = validation_job(
        8,
        "w-1",
        "FAILED",
        Some(1),
        "slurmops-canary rc=1; error: nvidia-smi not found on w-1; tail: checking|nvidia-smi not found on w-1",
    );
    let still = validation_job(9, "w-0", "RUNNING", None, "");
    let v = validation(2, ValidateNodes::PerNode);
    let d = run(&s, &v, &slurm(nodes.clone(), vec![failed, still]), 2);
    assert!(
        d.actions.contains(&Action::Cancel { job: 9 }),
        "{:?}",
        d.actions
    );
    let reason = DrainReason::ours("canary failed: job 8: nvidia-smi not found on w-1");
    for n in ["w-0", "w-1"] {
        assert!(
            d.actions.contains(&Action::Hold {
                node: n.into(),
                reason: reason.clone()
            }),
            "{:?}",
            d.actions
        );
    }
    assert!(drains(&d).is_empty(), "no other worker is touched");
    let r = d.record.expect("a verdict");
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(
        r.tail.as_deref(),
        Some("checking\nnvidia-smi not found on w-1")
    );

    // Later passes: halted, even with room and outdated workers; nothing at all happens.
    let mut nodes = idle(&["w-2", "w-3"]);
    nodes.push(node("w-0", &["IDLE", "DRAIN"], &reason.to_string()));
    nodes.push(node("w-1", &["IDLE", "DRAIN"], &reason.to_string()));
    let s = set(&["new", "new", "old", "old"], Some(r.clone()));
    let d = run(&s, &v, &slurm(nodes.clone(), vec![]), 4);
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert_eq!(d.progress.canary.unwrap().stage, CanaryStage::Failed);
    assert!(!d.progress.done);

    // An operator resumes past it: the canaries are resumed and the rest rolls.
    let resumed = Record {
        verdict: Verdict::Resumed,
        ..r
    };
    let s = set(&["new", "new", "old", "old"], Some(resumed));
    let d = run(&s, &v, &slurm(nodes, vec![]), 4);
    assert!(d.actions.contains(&Action::Resume { node: "w-0".into() }));
    assert!(d.actions.contains(&Action::Resume { node: "w-1".into() }));
    assert_eq!(drains(&d).len(), 2, "{:?}", d.actions);
}

#[test]
fn a_new_revision_after_a_failure_replaces_the_failed_canaries_first() {
    let failed = Record {
        revision: "new".into(),
        verdict: Verdict::Failed,
        job: Some(8),
        error: Some("bad".into()),
        tail: None,
    };
    let mut s = set(&["new", "old", "old"], Some(failed));
    s.update_revision = Some("fix".into());
    let mut nodes = idle(&["w-1", "w-2"]);
    nodes.push(node(
        "w-0",
        &["IDLE", "DRAIN"],
        "slurmops: canary failed: job 8: bad",
    ));
    let d = run(
        &s,
        &validation(1, ValidateNodes::PerNode),
        &slurm(nodes, vec![]),
        2,
    );
    assert!(
        d.actions
            .iter()
            .any(|a| matches!(a, Action::Delete { pod, .. } if pod == "w-0")),
        "{:?}",
        d.actions
    );
    assert!(
        drains(&d).is_empty(),
        "the canary is the only one out: {:?}",
        d.actions
    );
}

#[test]
fn rolling_back_to_the_revision_the_node_set_ran_needs_no_canary() {
    let mut s = set(&["new", "old", "old"], None);
    s.update_revision = Some("old".into());
    let nodes = idle(&["w-0", "w-1", "w-2"]);
    let d = run(
        &s,
        &validation(1, ValidateNodes::PerNode),
        &slurm(nodes, vec![]),
        1,
    );
    assert_eq!(d.progress.canary, None);
    assert_eq!(drains(&d), vec!["w-0".to_string()]);
}

#[test]
fn a_validation_that_never_ends_fails_after_its_timeout_and_is_cancelled() {
    let s = set(&["new", "old"], None);
    let nodes = idle(&["w-0", "w-1"]);
    let mut pending = validation_job(5, "w-0", "PENDING", None, "");
    pending.submit_time = Some(NOW - 301 - 60);
    let d = run(
        &s,
        &validation(1, ValidateNodes::PerNode),
        &slurm(nodes, vec![pending]),
        1,
    );
    let r = d.record.expect("a verdict");
    assert_eq!(r.verdict, Verdict::Failed);
    assert!(r.error.unwrap().contains("did not end within its timeout"));
}

#[test]
fn a_new_node_set_or_a_settled_one_has_no_canary_step() {
    let mut s = set(&["new", "new"], None);
    s.current_revision = None;
    let d = run(
        &s,
        &validation(1, ValidateNodes::PerNode),
        &slurm(idle(&["w-0", "w-1"]), vec![]),
        1,
    );
    assert!(d.actions.is_empty());
    assert_eq!(d.progress.canary, None);
    assert!(d.progress.done);
}

/// A canary replaced onto a bad image never becomes Ready (or never registers): once
/// `readyTimeout` has passed since its pod was made, the canary fails without a job, the canary
/// is held with why, and nothing else moves; before that, it is only waited for.
#[test]
fn a_canary_that_does_not_come_up_within_ready_timeout_fails_the_canary() {
    let v = validation(1, ValidateNodes::PerNode);
    let at = |age: i64, ready: bool| {
        let mut s = set(&["new", "old", "old"], None);
        s.workers[0].ready = ready;
        s.workers[0].created = Some(NOW - age);
        s
    };
    let others = idle(&["w-1", "w-2"]);
    let view = slurm(others.clone(), vec![]);

    let d = run(&at(29 * 60, false), &v, &view, 3);
    assert!(d.record.is_none() && d.actions.is_empty(), "{d:?}");
    let c = d.progress.canary.expect("canary");
    assert_eq!(c.stage, CanaryStage::Replacing);
    // Judged one second after its readyTimeout runs out: the daemon passes then.
    assert_eq!(c.deadline, Some(NOW - 29 * 60 + 30 * 60 + 1));

    let d = run(&at(31 * 60, false), &v, &view, 3);
    let reason = "canary failed: w-0 not up within readyTimeout 30m: its pod is not Ready";
    assert_eq!(
        d.actions,
        vec![Action::Hold {
            node: "w-0".into(),
            reason: DrainReason::ours(reason)
        }]
    );
    let r = d.record.clone().expect("a verdict");
    assert_eq!((r.verdict, r.job), (Verdict::Failed, None));
    let c = d.progress.canary.expect("canary");
    assert_eq!(c.stage, CanaryStage::Failed);
    assert!(c.jobs.is_empty(), "{c:?}");

    // Ready but slurmd never registered, or registered and DOWN.
    let d = run(&at(31 * 60, true), &v, &view, 3);
    let r = d.record.expect("a verdict");
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .ends_with("its slurmd has not registered in Slurm"),
        "{r:?}"
    );
    let mut nodes = others;
    nodes.push(node("w-0", &["DOWN"], ""));
    let d = run(&at(31 * 60, true), &v, &slurm(nodes, vec![]), 3);
    let r = d.record.expect("a verdict");
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .ends_with("its Slurm node is DOWN"),
        "{r:?}"
    );
}

#[test]
fn a_canary_validated_by_an_active_check_runs_its_script_and_fails_on_its_figure() {
    let check: crate::cluster::active_checks::ActiveCheck =
        serde_json::from_value(serde_json::json!(
            {"name": "nccl", "builtin": "nccl", "minValue": 350, "unit": "GB/s"}
        ))
        .unwrap();
    let mut v = validation(1, ValidateNodes::PerNode);
    v.canary.validate.builtin = None;
    v.canary.validate.check = Some("nccl".into());
    v.check = Some(check);
    let s = set(&["new", "old"], None);
    let mut nodes = idle(&["w-1"]);
    nodes.push(node("w-0", &["IDLE", "DRAIN"], "slurmops: rollout"));
    let d = run(&s, &v, &slurm(nodes.clone(), vec![]), 1);
    let Some(Action::Submit { job, from: None }) = d.actions.first() else {
        panic!("{:?}", d.actions)
    };
    // The check's own script (all_reduce_perf across the node's 8 GPUs), judged at 350 GB/s;
    // the canary's timeout and its own hold on failure (the job drains nothing itself).
    assert!(
        job.script.contains("all_reduce_perf -b 8M -e 1G -f 2 -g 8"),
        "{}",
        job.script
    );
    assert!(job.script.contains("m=\"350\""), "{}", job.script);
    assert!(!job.script.contains("State=DRAIN"), "{}", job.script);
    assert_eq!(job.time_limit_minutes, 5);
    // Its figure below the threshold fails the canary with the figure.
    let failed = validation_job(
        8,
        "w-0",
        "FAILED",
        Some(1),
        "slurmops-check rc=1; value: 180; error: figure 180 GB/s below 350 GB/s; tail: ",
    );
    let d = run(&s, &v, &slurm(idle(&["w-0", "w-1"]), vec![failed]), 1);
    assert!(
        d.actions.contains(&Action::Hold {
            node: "w-0".into(),
            reason: DrainReason::ours("canary failed: job 8: figure 180 GB/s below 350 GB/s")
        }),
        "{:?}",
        d.actions
    );
}

/// A canary's job and an active check's are one probe: a canary validated by a check runs the
/// very job the check runs on a worker (its script in the same wrapper, judged on the same
/// figure; the canary's own hold on failure instead of the check's), and a built-in is the
/// catalogue's script in that wrapper.
#[test]
fn a_canary_and_an_active_check_submit_the_same_probe_for_the_same_script() {
    let spec = crate::controller::features::checks::tests::spec(
        "{name: nccl, builtin: nccl, minValue: 350, unit: GB/s, onFailure: report, nodeSets: [gpu]}",
    );
    let mut cx = validation(1, ValidateNodes::PerNode);
    cx.canary.validate.builtin = None;
    cx.canary.validate.check = Some("nccl".into());
    cx.check = spec.policy.active_checks.first().cloned();
    // As many GPUs as the check's NodeSet has (none).
    cx.gpus = 0;
    let name = job_name("gpu", "new", "gpu-0");
    let Action::Submit { job, from: None } = submit(&cx, &name, &["gpu-0".into()]) else {
        panic!("a submission")
    };
    let checks = crate::controller::features::checks::jobs(&spec);
    let [(check, set, check_job)] = &checks[..] else {
        panic!("{checks:?}")
    };
    assert_eq!((check.as_str(), set.as_str()), ("nccl", "gpu"));
    assert_eq!(
        job.script.replace(&name, "JOB"),
        check_job.script.replace(&check_job.name, "JOB")
    );
    let (text, how) = probe::check(cx.check.as_ref().unwrap(), 0, false);
    assert_eq!(job.script, probe::wrap(&name, &text, &how));
    assert!(text.contains("-g 1 "), "{text}");

    let v = validation(1, ValidateNodes::AllCanaries);
    let Action::Submit { job, .. } = submit(&v, &name, &["w-0".into(), "w-1".into()]) else {
        panic!("a submission")
    };
    let text = probe::scripts::canary_builtin(Builtin::Hostname, ValidateNodes::AllCanaries, 8);
    assert_eq!(job.script, probe::wrap(&name, &text, &Judge::ExitCode));
}
