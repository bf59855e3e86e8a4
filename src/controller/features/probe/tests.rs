use super::*;
use crate::cluster::canary::{Builtin, ValidateNodes};

/// A job comment's (error, tail), as the canary keeps them.
fn comment(c: &str) -> Option<(String, String)> {
    Report::of(c).map(|r| (r.error, r.tail))
}

#[test]
fn a_job_comment_gives_the_error_line_and_the_output_tail() {
    assert_eq!(
        comment("slurmops-canary rc=3; error: ; tail: a|b"),
        Some(("exit code 3".into(), "a\nb".into()))
    );
    assert_eq!(comment("user text"), None);
    let long = format!("slurmops-canary rc=1; error: {}; tail: ", "x".repeat(500));
    assert_eq!(comment(&long).unwrap().0.len(), MAX_ERROR);
}

#[test]
fn the_wrapper_runs_the_script_verbatim_and_reports_through_the_comment() {
    let w = wrap(
        "slurmops-canary:w:new:w-0",
        "#!/usr/bin/python3\nprint('x')",
        &Judge::ExitCode,
    );
    assert!(w.contains(
        "<<'SLURMOPS_SCRIPT_END'\n#!/usr/bin/python3\nprint('x')\nSLURMOPS_SCRIPT_END\n"
    ));
    assert!(w.contains("scontrol update JobId=\"$SLURM_JOB_ID\" Comment="));
    assert!(
        scripts::canary_builtin(Builtin::Gpu, ValidateNodes::PerNode, 8).contains("expected 8")
    );
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
    let how = Judge::Figure {
        min,
        unit: Some("GB/s"),
        hold: true,
    };
    let script = wrap("j", check, &how);
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
    let report = Report::of(
        log.lines()
            .find_map(|l| l.split_once("Comment=").map(|x| x.1))
            .unwrap_or_else(|| panic!("no comment in {log:?}")),
    )
    .unwrap();
    assert_eq!((report.rc, report.value), (0, Some(412.5)));

    let (rc, log) = run_wrapped("echo 'slurmops-value: 180'", Some(350.0));
    assert_eq!(rc, 1);
    let report = |log: &str| {
        Report::of(
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
