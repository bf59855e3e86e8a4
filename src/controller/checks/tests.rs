use super::*;
use crate::controller::decide::tests::{NOW, node};

/// NodeSet `gpu` of workers gpu-0.., in partition `p`, checked by CHECK (YAML flow mapping).
pub(super) fn spec(check: &str) -> ClusterSpec {
    let yaml = format!(
        r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {{name: c, namespace: slurm}}
spec:
  slurmVersion: "24.11"
  auth:
    slurmKey: {{name: k, key: k}}
    jwtKey: {{name: j, key: j}}
  policy:
    activeChecks:
      - {check}
  nodeSets:
    - {{name: gpu, replicas: 3}}
    - {{name: cpu, replicas: 1}}
  partitions:
    - {{name: p, nodeSets: [gpu, cpu]}}
"#
    );
    crate::cluster::load("cluster.yaml", &yaml)
        .expect("valid")
        .spec
}

const REGISTER: &str = "{name: c, script: 'true', maxConcurrent: 1, nodeSets: [gpu]}";

pub(super) fn worker(i: u32, marks: &[(&str, Mark)]) -> Worker {
    Worker {
        name: format!("gpu-{i}"),
        uid: format!("u{i}"),
        ordinal: Some(i),
        revision: "r".into(),
        ready: true,
        deleting: false,
        created: Some(NOW - 600),
        host: None,
        checks: marks
            .iter()
            .map(|(c, m)| (c.to_string(), m.clone()))
            .collect(),
    }
}

pub(super) fn sets(workers: Vec<Worker>) -> BTreeMap<String, SetView> {
    BTreeMap::from([(
        "gpu".to_string(),
        SetView {
            name: "gpu".into(),
            replicas: workers.len() as u32,
            update_revision: Some("r".into()),
            managed: false,
            canary: None,
            current_revision: Some("r".into()),
            workers,
        },
    )])
}

pub(super) const PENDING: &str = "slurmops: checks pending";

pub(super) fn passed(at: i64) -> Mark {
    Mark {
        passed: true,
        at,
        job: Some(1),
        value: None,
        text: "passed".into(),
    }
}

pub(super) fn check_job(id: u64, node: &str, due: i64, state: &str) -> Job {
    Job {
        id,
        name: job_name("c", node, due),
        user: "slurm".into(),
        state: vec![state.into()],
        nodes: vec![node.into()],
        submit_time: Some(NOW - 30),
        start_time: (state != "PENDING").then_some(NOW - 20),
        end_time: Some(NOW - 5),
        ..Job::default()
    }
}

pub(super) fn run(
    check: &str,
    workers: Vec<Worker>,
    nodes: Vec<Node>,
    jobs: Vec<Job>,
    resumes: &[&str],
) -> Checked {
    let resumes = resumes.iter().map(|s| s.to_string()).collect();
    assess(
        &spec(check),
        &sets(workers),
        &SlurmView::new(nodes, jobs),
        &BTreeMap::new(),
        &resumes,
        NOW,
    )
}

/// The steps on NodeSet gpu, in words: `submit gpu-0`, `resume gpu-0`, `hold gpu-1: REASON`...
pub(super) fn steps(c: &Checked) -> Vec<String> {
    c.actions
        .get("gpu")
        .into_iter()
        .flatten()
        .map(|a| match a {
            Action::CheckSubmit { job } => format!("submit {}", job.nodes.join(",")),
            Action::Resume { node } => format!("resume {node}"),
            Action::Hold { node, reason } => format!("hold {node}: {}", reason.words()),
            Action::CheckCancel { job } => format!("cancel {job}"),
            Action::Mark { pod, mark, .. } => format!("mark {pod} {}", mark.condition().2),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn new_workers_are_checked_one_at_a_time_and_each_is_resumed_only_after_its_job_is_submitted() {
    let nodes = (0..3)
        .map(|i| node(&format!("gpu-{i}"), &["IDLE", "DRAIN"], PENDING))
        .collect();
    let c = run(
        REGISTER,
        (0..3).map(|i| worker(i, &[])).collect(),
        nodes,
        vec![],
        &[],
    );
    // The cap is 1: gpu-0's job goes first, then gpu-0 is resumed; the others stay held.
    assert_eq!(steps(&c), ["submit gpu-0", "resume gpu-0"]);
    let s = &c.summary["gpu"][0];
    assert_eq!((s.running, s.waiting), (1, 2));
    assert!(c.busy.contains("gpu"));
}

#[test]
fn a_job_in_slurm_counts_against_the_cap_and_is_never_submitted_twice() {
    // gpu-0 runs its check (resumed when the job was submitted); the others are held.
    let held = || {
        let mut v = vec![node("gpu-0", &["ALLOCATED"], "")];
        v.extend((1..3).map(|i| node(&format!("gpu-{i}"), &["IDLE", "DRAIN"], PENDING)));
        v
    };
    let nodes = held();
    let due = NOW - 600;
    let jobs = vec![check_job(7, "gpu-0", due, "RUNNING")];
    let c = run(
        REGISTER,
        (0..3).map(|i| worker(i, &[])).collect(),
        nodes,
        jobs,
        &[],
    );
    assert_eq!(steps(&c), Vec::<String>::new());
    let two = "{name: c, script: 'true', maxConcurrent: 2, nodeSets: [gpu]}";
    let nodes = held();
    let jobs = vec![check_job(7, "gpu-0", due, "RUNNING")];
    let c = run(
        two,
        (0..3).map(|i| worker(i, &[])).collect(),
        nodes,
        jobs,
        &[],
    );
    assert_eq!(steps(&c), ["submit gpu-1", "resume gpu-1"]);
}

#[test]
fn a_passed_job_is_kept_on_the_pod_and_a_failed_one_drains_its_node_with_the_error() {
    let due = NOW - 600;
    let mut ok = check_job(7, "gpu-0", due, "COMPLETED");
    ok.exit_code = Some(0);
    ok.comment = "slurmops-check rc=0; value: 412.5; error: ; tail: ".into();
    let mut bad = check_job(8, "gpu-1", due, "FAILED");
    bad.exit_code = Some(1);
    bad.comment = "slurmops-check rc=1; value: 10; error: figure 10 below 100; tail: x".into();
    let nodes = vec![node("gpu-0", &["IDLE"], ""), node("gpu-1", &["IDLE"], "")];
    let c = run(
        REGISTER,
        vec![worker(0, &[]), worker(1, &[])],
        nodes,
        vec![ok, bad],
        &[],
    );
    assert_eq!(
        steps(&c),
        [
            "mark gpu-0 job=7 value=412.5 : passed, 412.5",
            "hold gpu-1: check c failed: job 8: figure 10 below 100",
            "mark gpu-1 job=8 value=10 : figure 10 below 100",
        ]
    );
    // Already drained by the job itself with that reason: not drained again.
    let mut bad = check_job(8, "gpu-1", due, "FAILED");
    bad.exit_code = Some(1);
    let reason = "slurmops: check c failed: job 8: exit code 1";
    let nodes = vec![node("gpu-1", &["IDLE", "DRAIN"], reason)];
    let c = run(REGISTER, vec![worker(1, &[])], nodes, vec![bad], &[]);
    assert_eq!(steps(&c).len(), 1, "{:?}", steps(&c));
    assert!(steps(&c)[0].starts_with("mark gpu-1 job=8"));
}

#[test]
fn a_job_running_past_its_timeout_is_cancelled_and_counts_as_failed() {
    let check = "{name: c, script: 'sleep 600', timeout: 15s, nodeSets: [gpu]}";
    let due = NOW - 600;
    let job = check_job(9, "gpu-0", due, "RUNNING");
    let c = run(
        check,
        vec![worker(0, &[])],
        vec![node("gpu-0", &["ALLOCATED"], "")],
        vec![job.clone()],
        &[],
    );
    assert_eq!(
        steps(&c),
        [
            // Drained before the cancel frees it: no user's job starts there in between.
            "hold gpu-0: check c failed: job 9: ran past its timeout 15s, cancelled",
            "cancel 9",
            "mark gpu-0 job=9 : ran past its timeout 15s, cancelled",
        ]
    );
    // Within its time: the next pass is asked for at its timeout.
    let check = "{name: c, script: 'sleep 600', timeout: 1m, nodeSets: [gpu]}";
    let c = run(
        check,
        vec![worker(0, &[])],
        vec![node("gpu-0", &["ALLOCATED"], "")],
        vec![job],
        &[],
    );
    assert!(steps(&c).is_empty());
    assert_eq!(c.summary["gpu"][0].next, Some(NOW - 20 + 60));
}

#[test]
fn a_scheduled_run_starts_only_on_idle_workers_unless_the_check_runs_beside_jobs() {
    let every = "{name: c, script: 'true', onRegister: false, schedule: '*/10 * * * *', maxConcurrent: 5, nodeSets: [gpu]}";
    // NOW is 1,000,000: the last tick is at 999,600, after the marks of 999,000.
    let workers = (0..3)
        .map(|i| worker(i, &[("c", passed(999_000))]))
        .collect();
    let nodes = vec![
        node("gpu-0", &["IDLE"], ""),
        node("gpu-1", &["ALLOCATED"], ""),
        node("gpu-2", &["IDLE", "DRAIN"], "maintenance by bob"),
    ];
    let c = run(every, workers, nodes, vec![], &[]);
    // gpu-1 runs a user's job, gpu-2 is someone else's drain: neither is touched.
    assert_eq!(steps(&c), ["submit gpu-0"]);
    let job = c.actions["gpu"].iter().find_map(|a| match a {
        Action::CheckSubmit { job } => Some(job.clone()),
        _ => None,
    });
    let job = job.unwrap();
    assert_eq!(job.name, job_name("c", "gpu-0", 999_600));
    assert!(job.exclusive, "a check takes its node whole");
    assert_eq!(c.summary["gpu"][0].waiting, 2);
    assert!(
        c.busy.is_empty(),
        "a scheduled run keeps no command waiting"
    );

    let beside = every.replace("maxConcurrent: 5", "maxConcurrent: 5, whileJobsRun: true");
    let workers = (0..2)
        .map(|i| worker(i, &[("c", passed(999_000))]))
        .collect();
    let nodes = vec![node("gpu-0", &["IDLE"], ""), node("gpu-1", &["MIXED"], "")];
    let c = run(&beside, workers, nodes, vec![], &[]);
    assert_eq!(steps(&c), ["submit gpu-0", "submit gpu-1"]);
    // Results newer than the last tick: nothing is due.
    let workers = (0..2)
        .map(|i| worker(i, &[("c", passed(999_700))]))
        .collect();
    let nodes = vec![node("gpu-0", &["IDLE"], ""), node("gpu-1", &["IDLE"], "")];
    let c = run(every, workers, nodes, vec![], &[]);
    assert!(steps(&c).is_empty());
    assert_eq!(c.summary["gpu"][0].passed, 2);
}

#[test]
fn a_failed_worker_stays_drained_until_its_check_passes_again() {
    let every = "{name: c, script: 'true', schedule: '*/10 * * * *', nodeSets: [gpu]}";
    let failed = Mark {
        passed: false,
        at: 999_000,
        job: Some(3),
        value: None,
        text: "GPU 3 missing".into(),
    };
    let reason = "slurmops: check c failed: job 3: GPU 3 missing";
    // A tick passed since: the check runs again on the drained worker, which is resumed for it.
    let c = run(
        every,
        vec![worker(0, &[("c", failed.clone())])],
        vec![node("gpu-0", &["IDLE", "DRAIN"], reason)],
        vec![],
        &[],
    );
    assert_eq!(steps(&c), ["submit gpu-0", "resume gpu-0"]);
    // Before the next tick: it stays drained, and the failure is told.
    let mut recent = failed;
    recent.at = 999_700;
    let c = run(
        every,
        vec![worker(0, &[("c", recent)])],
        vec![node("gpu-0", &["IDLE", "DRAIN"], reason)],
        vec![],
        &[],
    );
    assert!(steps(&c).is_empty());
    assert_eq!(
        c.summary["gpu"][0].failures,
        ["gpu-0: job 3: GPU 3 missing"]
    );
    // Passed since (an operator ran it, or the tick): resumed.
    let c = run(
        every,
        vec![worker(0, &[("c", passed(999_700))])],
        vec![node("gpu-0", &["IDLE", "DRAIN"], reason)],
        vec![],
        &[],
    );
    assert_eq!(steps(&c), ["resume gpu-0"]);
}

#[test]
fn a_replaced_worker_the_rollout_would_resume_stays_drained_until_its_checks_are_submitted() {
    let nodes = vec![
        node("gpu-0", &["IDLE", "DRAIN"], "slurmops: rollout"),
        node("gpu-1", &["IDLE", "DRAIN"], "slurmops: rollout"),
    ];
    let c = run(
        REGISTER,
        vec![worker(0, &[]), worker(1, &[])],
        nodes,
        vec![],
        &["gpu-0", "gpu-1"],
    );
    // gpu-0's job is submitted (the rollout's own resume follows it); gpu-1 waits for room.
    assert_eq!(steps(&c), ["submit gpu-0"]);
    assert_eq!(c.keep_drained, BTreeSet::from(["gpu-1".to_string()]));
}

#[test]
fn drains_for_checks_no_check_covers_any_more_are_resumed_and_no_one_elses() {
    let nodes = vec![
        node("gpu-0", &["IDLE", "DRAIN"], PENDING),
        node(
            "gpu-1",
            &["IDLE", "DRAIN"],
            "slurmops: check old failed: job 2: x",
        ),
        node("gpu-2", &["IDLE", "DRAIN"], "bad DIMM"),
    ];
    let only_cpu = "{name: c, script: 'true', nodeSets: [cpu]}";
    let c = run(
        only_cpu,
        (0..3).map(|i| worker(i, &[])).collect(),
        nodes,
        vec![],
        &[],
    );
    assert_eq!(steps(&c), ["resume gpu-0", "resume gpu-1"]);
}

#[test]
fn a_mark_reads_back_from_its_condition() {
    let m = Mark {
        passed: false,
        at: 5,
        job: Some(12),
        value: Some(180.5),
        text: "figure 180.5 GB/s below 350 GB/s".into(),
    };
    let (status, reason, message) = m.condition();
    assert_eq!((status, reason), ("False", "Failed"));
    assert_eq!(Mark::parse(status, &message, 5), m);
    let bare = Mark {
        passed: true,
        at: 5,
        job: None,
        value: None,
        text: "passed: all good".into(),
    };
    let (status, _, message) = bare.condition();
    assert_eq!(Mark::parse(status, &message, 5), bare);
}

/// The job's script, run by bash with a stand-in `scontrol` that logs its arguments.
fn run_wrapped(check: &str, min: Option<f64>) -> (i32, String) {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("slurmops-wrap-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("log");
    let shim = dir.join("scontrol");
    std::fs::write(
        &shim,
        // Logs its arguments; `show node` says DRAIN from its second answer on.
        format!(
            "#!/bin/sh\necho \"$@\" >> '{0}'\nif [ \"$1\" = show ]; then\n  if [ -e '{0}.asked' ]; then echo 'NodeName=gpu-0 State=ALLOCATED+DRAIN'; else touch '{0}.asked'; echo 'NodeName=gpu-0 State=ALLOCATED'; fi\nfi\n",
            log.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&shim)
        .status()
        .unwrap();
    let script = crate::controller::canary::wrap_check("j", check, min, Some("GB/s"), Some("nccl"));
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .env("PATH", format!("{}:/usr/bin:/bin", dir.display()))
        .env("SLURM_JOB_ID", "42")
        .env("SLURMD_NODENAME", "gpu-0")
        .output()
        .unwrap();
    let logged =
        std::fs::read_to_string(&log).unwrap_or_default() + &String::from_utf8_lossy(&out.stderr);
    std::fs::remove_dir_all(&dir).ok();
    (out.status.code().unwrap_or(-1), logged)
}

#[test]
fn the_job_judges_its_figure_and_on_failure_waits_for_its_drain_without_draining_itself() {
    let (rc, log) = run_wrapped("echo busbw; echo 'slurmops-value: 412.5'", Some(350.0));
    assert_eq!(rc, 0, "{log}");
    assert!(!log.contains("show node"), "a pass does not wait: {log}");
    let report = crate::controller::canary::Report::of(
        log.lines()
            .find_map(|l| l.split_once("Comment=").map(|x| x.1))
            .unwrap_or_else(|| panic!("no comment in {log:?}")),
    )
    .unwrap();
    assert_eq!((report.rc, report.value), (0, Some(412.5)));

    let (rc, log) = run_wrapped("echo 'slurmops-value: 180'", Some(350.0));
    assert_eq!(rc, 1);
    let report = |log: &str| {
        crate::controller::canary::Report::of(
            log.lines()
                .find_map(|l| l.split_once("Comment=").map(|x| x.1))
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(report(&log).error, "figure 180 GB/s below 350 GB/s");
    assert_eq!(report(&log).rc, 1);
    // It reported first, then asked for its node until slurmops drained it (the stand-in says
    // so on its second answer), and never changed a node itself.
    let asked: Vec<&str> = log.lines().filter(|l| l.starts_with("show node")).collect();
    assert_eq!(asked, ["show node gpu-0", "show node gpu-0"], "{log}");
    assert!(
        log.find("Comment=").unwrap() < log.find("show node").unwrap(),
        "{log}"
    );
    assert!(!log.contains("NodeName="), "{log}");
    let (rc, log) = run_wrapped("echo no figure", Some(350.0));
    assert_eq!(rc, 1);
    assert!(log.contains("printed no figure"), "{log}");
    let (rc, log) = run_wrapped("echo 'GPU 3 fell off the bus' >&2; exit 3", None);
    assert_eq!(rc, 3);
    assert_eq!(report(&log).error, "GPU 3 fell off the bus");
    assert_eq!(report(&log).rc, 3);
}

#[test]
fn a_failed_worker_s_other_check_jobs_are_cancelled_and_not_submitted_again() {
    let spec_text = "{name: c, script: 'true', nodeSets: [gpu]}\n      - {name: d, script: 'true', nodeSets: [gpu]}";
    let due = NOW - 600;
    let mut bad = check_job(8, "gpu-0", due, "FAILED");
    bad.exit_code = Some(1);
    bad.name = job_name("c", "gpu-0", due);
    let mut waits = check_job(9, "gpu-0", due, "PENDING");
    waits.name = job_name("d", "gpu-0", due);
    waits.start_time = None;
    let reason = "slurmops: check c failed: job 8: exit code 1";
    let c = run(
        spec_text,
        vec![worker(0, &[])],
        vec![node("gpu-0", &["IDLE", "DRAIN"], reason)],
        vec![bad, waits],
        &[],
    );
    // d's job would wait on the drained worker, holding d's room, for ever.
    assert_eq!(steps(&c).len(), 2, "{:?}", steps(&c));
    assert!(steps(&c)[0].starts_with("mark gpu-0 job=8"));
    assert_eq!(steps(&c)[1], "cancel 9");
    // The next pass: d's job ended without running; d is due, but the failed worker stays out.
    // Slurm gives a job cancelled while pending a start time, and no nodes.
    let mut gone = check_job(9, "gpu-0", due, "CANCELLED");
    gone.name = job_name("d", "gpu-0", due);
    gone.nodes = vec![];
    let failed = Mark {
        passed: false,
        at: NOW - 10,
        job: Some(8),
        value: None,
        text: "exit code 1".into(),
    };
    let c = run(
        spec_text,
        vec![worker(0, &[("c", failed)])],
        vec![node("gpu-0", &["IDLE", "DRAIN"], reason)],
        vec![gone],
        &[],
    );
    assert!(steps(&c).is_empty(), "{:?}", steps(&c));
}

#[test]
fn a_failed_job_waiting_on_its_worker_is_judged_at_once_and_its_worker_drained() {
    // The job runs as an unprivileged user: it reports its failure and keeps the worker until
    // the pass has drained it, so no user's job takes the worker in between.
    let failing = "slurmops-check rc=1; value: 5; error: figure 5 below 10; tail: x";
    let job = |state: &str, comment: &str| {
        let mut j = check_job(8, "gpu-0", NOW - 600, state);
        j.comment = comment.into();
        j.end_time = None;
        j
    };
    let pass = |n: Node, j: Job| steps(&run(REGISTER, vec![worker(0, &[])], vec![n], vec![j], &[]));
    let held = node("gpu-0", &["ALLOCATED", "DRAIN"], PENDING);
    assert_eq!(
        pass(held.clone(), job("RUNNING", failing)),
        [
            "hold gpu-0: check c failed: job 8: figure 5 below 10",
            "mark gpu-0 job=8 value=5 : figure 5 below 10"
        ]
    );
    // Still running, its report not written yet, or a pass: nothing is judged before it ends.
    let busy = node("gpu-0", &["ALLOCATED"], "");
    for comment in ["", "slurmops-check rc=0; value: 12; error: ; tail: x"] {
        assert_eq!(
            pass(busy.clone(), job("RUNNING", comment)),
            Vec::<String>::new()
        );
    }
    // The next pass, the job still waiting for the drain it now sees: the worker stays out.
    let mut w = worker(0, &[]);
    let m = Mark {
        passed: false,
        at: NOW,
        job: Some(8),
        value: Some(5.0),
        text: "figure 5 below 10".into(),
    };
    w.checks.insert("c".into(), m);
    let drained = node(
        "gpu-0",
        &["ALLOCATED", "DRAIN"],
        "slurmops: check c failed: job 8: figure 5 below 10",
    );
    let c = run(
        REGISTER,
        vec![w],
        vec![drained],
        vec![job("RUNNING", failing)],
        &[],
    );
    assert!(steps(&c).is_empty(), "{:?}", steps(&c));
}

#[test]
fn a_job_cancelled_at_its_timeout_reads_so_even_before_its_mark_is_seen() {
    let check = "{name: c, script: 'sleep 600', timeout: 15s, nodeSets: [gpu]}";
    let mut j = check_job(9, "gpu-0", NOW - 600, "CANCELLED");
    (j.start_time, j.end_time) = (Some(NOW - 40), Some(NOW - 20));
    let reason = "slurmops: check c failed: job 9: ran past its timeout 15s, cancelled";
    let c = run(
        check,
        vec![worker(0, &[])],
        vec![node("gpu-0", &["IDLE", "DRAIN"], reason)],
        vec![j],
        &[],
    );
    assert_eq!(
        steps(&c),
        ["mark gpu-0 job=9 : ran past its timeout 15s, cancelled"]
    );
}

#[test]
fn with_the_job_queue_unknown_a_replaced_worker_a_check_must_pass_on_stays_drained() {
    let spec = spec(REGISTER);
    let workers = vec![worker(0, &[]), worker(1, &[("c", passed(NOW - 60))])];
    let resumes = ["gpu-0".to_string(), "gpu-1".to_string()].into();
    let keep = unchecked(&spec, &sets(workers), &resumes);
    assert_eq!(keep, BTreeSet::from(["gpu-0".to_string()]));
}

#[test]
fn a_worker_held_again_after_its_node_s_problem_cleared_runs_its_checks_again_then_is_resumed() {
    // Passed when it registered; then its Kubernetes node had a problem, which cleared: sync
    // held it `checks pending` (100 s before NOW).
    let held = vec![node("gpu-0", &["IDLE", "DRAIN"], PENDING)];
    let c = run(
        REGISTER,
        vec![worker(0, &[("c", passed(NOW - 500))])],
        held.clone(),
        vec![],
        &[],
    );
    assert_eq!(steps(&c), ["submit gpu-0", "resume gpu-0"]);
    let job = c.actions["gpu"].iter().find_map(|a| match a {
        Action::CheckSubmit { job } => Some(job.name.clone()),
        _ => None,
    });
    assert_eq!(job.unwrap(), job_name("c", "gpu-0", NOW - 100));
    // Passed since it was held: only resumed.
    let c = run(
        REGISTER,
        vec![worker(0, &[("c", passed(NOW - 50))])],
        held,
        vec![],
        &[],
    );
    assert_eq!(steps(&c), ["resume gpu-0"]);
}

#[test]
fn a_result_of_the_second_the_worker_was_held_stands_only_when_its_job_ran_for_the_hold() {
    // Seen on the bed (26.05): the check passed, then the node was cordoned and uncordoned, all
    // within one second: the worker was held `checks pending` in the second of that result, and
    // resumed on it without running the check again. (Held 100 s before NOW.)
    let held = vec![node("gpu-0", &["IDLE", "DRAIN"], PENDING)];
    let before = Mark {
        job: Some(7),
        ..passed(NOW - 100)
    };
    let registered = check_job(7, "gpu-0", NOW - 130, "COMPLETED");
    let c = run(
        REGISTER,
        vec![worker(0, &[("c", before)])],
        held.clone(),
        vec![registered],
        &[],
    );
    assert_eq!(steps(&c), ["submit gpu-0", "resume gpu-0"]);
    // The job submitted for the hold (its stamp the hold's second) ended in that same second:
    // its result stands, nothing runs again.
    let mut rerun = check_job(8, "gpu-0", NOW - 100, "COMPLETED");
    rerun.end_time = Some(NOW - 100);
    let after = Mark {
        job: Some(8),
        ..passed(NOW - 100)
    };
    let c = run(
        REGISTER,
        vec![worker(0, &[("c", after)])],
        held,
        vec![rerun],
        &[],
    );
    assert_eq!(steps(&c), ["resume gpu-0"]);
}

#[test]
fn a_check_job_of_a_worker_resumed_for_it_is_judged_when_it_ends() {
    // Held after its node's problem, resumed when its job was submitted: it is due no more
    // (in service), and its job's result is still kept.
    let mut j = check_job(12, "gpu-0", NOW - 100, "COMPLETED");
    j.exit_code = Some(0);
    let c = run(
        REGISTER,
        vec![worker(0, &[("c", passed(NOW - 500))])],
        vec![node("gpu-0", &["IDLE"], "")],
        vec![j],
        &[],
    );
    assert_eq!(steps(&c), ["mark gpu-0 job=12 : passed"]);
}

#[test]
fn a_job_that_ended_in_the_second_of_its_tick_is_judged_once() {
    // Seen on the bed: a job of tick T ended within T's second; its mark (at T) made the job
    // look newer than the result, and every pass wrote the same mark again at once.
    let every =
        "{name: c, script: 'true', onRegister: false, schedule: '*/10 * * * *', nodeSets: [gpu]}";
    let tick = 999_600;
    let mut j = check_job(35, "gpu-0", tick, "COMPLETED");
    (j.exit_code, j.start_time, j.end_time) = (Some(0), Some(tick), Some(tick));
    let mark = Mark {
        passed: true,
        at: tick,
        job: Some(35),
        value: None,
        text: "passed".into(),
    };
    let c = run(
        every,
        vec![worker(0, &[("c", mark)])],
        vec![node("gpu-0", &["IDLE"], "")],
        vec![j],
        &[],
    );
    assert!(steps(&c).is_empty(), "{:?}", steps(&c));
}

#[test]
fn a_gpu_worker_s_check_job_asks_for_its_gpus_and_one_beside_users_jobs_for_none() {
    // Slurm gives a job no GPU it did not ask for, exclusive or not, and with ConstrainDevices
    // (the rendered cgroup.conf) the job could not open one: nvidia-smi would see none.
    let s = spec("{name: c, builtin: gpu, nodeSets: [gpu]}");
    let c = &s.policy.active_checks[0];
    let job = request(c, "j", vec!["gpu-0".into()], "all", 8);
    assert_eq!(job.body()["job"]["tres_per_node"], "gres/gpu:8");
    assert_eq!(job.body()["job"]["shared"], serde_json::json!(["none"]));
    assert!(
        request(c, "j", vec!["cpu-0".into()], "all", 0).body()["job"]["tres_per_node"].is_null()
    );
    let s = spec("{name: c, builtin: gpu, whileJobsRun: true, nodeSets: [gpu]}");
    let beside = request(
        &s.policy.active_checks[0],
        "j",
        vec!["gpu-0".into()],
        "all",
        8,
    );
    assert!(beside.body()["job"]["tres_per_node"].is_null());
}
