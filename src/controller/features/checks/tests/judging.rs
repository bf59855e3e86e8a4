//! A check job's result: judged when it ends (or fails and waits for its drain), kept on the
//! pod, and a failure drains the worker until the check passes again.

use super::*;

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
fn a_failed_worker_s_other_check_jobs_are_cancelled_and_not_submitted_again() {
    let spec_text = "{name: c, script: 'true', nodeSets: [gpu]}\n      - {name: d, script: 'true', nodeSets: [gpu]}";
    let due = NOW - 600;
    let mut bad = check_job(8, "gpu-0", due, "FAILED");
    bad.exit_code = Some(1);
    bad.name = job_name("c", "gpu-0", due).into();
    let mut waits = check_job(9, "gpu-0", due, "PENDING");
    waits.name = job_name("d", "gpu-0", due).into();
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
    gone.name = job_name("d", "gpu-0", due).into();
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
fn a_check_job_submitted_in_the_second_of_the_last_result_is_judged_when_it_ends() {
    // Seen in CI: a check passed, the worker's node was cordoned and uncordoned, and the worker
    // was held, given a new job and resumed, all within that second. The new job's stamp equals
    // the last result's time: it is still a newer job (another id), and its result is kept.
    let mut j = check_job(40, "gpu-0", NOW - 100, "COMPLETED");
    j.exit_code = Some(0);
    let c = run(
        REGISTER,
        vec![worker(0, &[("c", passed(NOW - 100))])],
        vec![node("gpu-0", &["IDLE"], "")],
        vec![j],
        &[],
    );
    assert_eq!(steps(&c), ["mark gpu-0 job=40 : passed"]);
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
