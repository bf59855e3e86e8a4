//! When a worker's checks are due, submitted under their caps, and the worker held, kept
//! drained or resumed for them.

use super::*;

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
