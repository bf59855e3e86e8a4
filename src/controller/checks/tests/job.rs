//! The check job itself: what it asks Slurm for, and how its script judges its figure and
//! reports a failure.

use super::*;

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
