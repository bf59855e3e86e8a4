//! Real Slurm for tests: the test-host overlay applied to slurm.conf as slurmops renders it, and
//! small helpers over `tests/bed/slurm.sh` (run daemons and Slurm client commands in the chroot).

use std::collections::BTreeMap;
use std::process::Command;

use slurmops::cluster::ClusterFile;
use slurmops::render::Rendered;

const SLURM_SH: &str = "tests/bed/slurm.sh";

/// `slurm.sh ARGS` with ENV set: its output, or why it failed (exit status, stdout, stderr).
pub fn run(args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(SLURM_SH)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run tests/bed/slurm.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "slurm.sh {args:?} {env:?}: {}\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Runs `slurm.sh ARGS`; panics with its output when it fails (a bed failure, not a test result).
pub fn sh(args: &[&str]) -> String {
    run(args, &[]).unwrap_or_else(|e| panic!("test bed failed: {e}"))
}

/// `slurm.sh ARGS` with the daemon it starts from Slurm RELEASE's chroot (`SLURM_RELEASE`).
pub fn sh_on(release: &str, args: &[&str]) -> String {
    run(args, &[("SLURM_RELEASE", release)]).unwrap_or_else(|e| panic!("test bed failed: {e}"))
}

/// Like a kubelet starting a container: true when the daemon came up; why not on stderr (the
/// caller starts it again later).
fn try_start(args: &[&str], env: &[(&str, &str)]) -> bool {
    run(args, env)
        .map_err(|e| eprintln!("did not start (retried): {e}"))
        .is_ok()
}

/// Restarts only slurmctld of INSTANCE, on Slurm RELEASE with the config in CONF, keeping its
/// state (carried over from the earlier release's chroot on an upgrade); its slurmd keep running.
/// False when it did not come up.
pub fn start_ctld_keeping_state(instance: &str, release: &str, conf: &std::path::Path) -> bool {
    let conf = conf.to_string_lossy();
    let env = [("SLURM_RELEASE", release), ("SLURM_KEEP_STATE", "1")];
    try_start(&["start-ctld", instance, &conf], &env)
}

/// Starts controller NAME of INSTANCE's several (its pod started), its state kept, unless it
/// runs; false when not every controller answers.
pub fn start_ctld_pod(instance: &str, release: &str, name: &str) -> bool {
    try_start(
        &["start-ctld-pod", instance, name],
        &[("SLURM_RELEASE", release)],
    )
}

/// Starts slurmrestd (JWT) of INSTANCE from Slurm RELEASE's chroot on 127.0.0.1:PORT; false
/// when it did not come up (slurmctld not up yet, say).
pub fn start_restd(instance: &str, release: &str, port: u16) -> bool {
    let port = port.to_string();
    try_start(
        &["start-restd", instance, &port],
        &[("SLURM_RELEASE", release)],
    )
}

/// Starts (or restarts) slurmctld of INSTANCE on Slurm RELEASE with the config files in CONF.
pub fn start_ctld(instance: &str, release: &str, conf: &std::path::Path) {
    sh_on(release, &["start-ctld", instance, &conf.to_string_lossy()]);
}

/// `scontrol -o show node NAME` of INSTANCE as key=value pairs; None when Slurm does not know it.
pub fn node(instance: &str, name: &str) -> Option<BTreeMap<String, String>> {
    let out = Command::new("bash")
        .arg(SLURM_SH)
        .args(["exec", instance, "scontrol", "-o", "show", "node", name])
        .output()
        .expect("run scontrol");
    if !out.status.success() {
        return None;
    }
    let fields: BTreeMap<String, String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    (fields.get("NodeName").map(String::as_str) == Some(name)).then_some(fields)
}

/// The node's State (e.g. `IDLE`, `IDLE+DYNAMIC_NORM`), or None when it does not exist.
pub fn node_state(instance: &str, name: &str) -> Option<String> {
    node(instance, name).and_then(|f| f.get("State").cloned())
}

fn set_params(conf: &str, set: &[(&str, String)], drop: &[&str]) -> String {
    let mut out: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
    for line in conf.lines() {
        let key = line.split('=').next().unwrap_or("");
        if !drop.contains(&key) && !set.iter().any(|(k, _)| *k == key) {
            out.push(line.to_string());
        }
    }
    out.join("\n") + "\n"
}

/// The rendered Slurm files with only what a test host must differ in: controller host and port,
/// per-instance state and pid paths (several instances share the chroot; each node gets its own
/// /var/spool/slurmd from tests/bed/slurm.sh), no cgroups, no slurmdbd, stand-in GPU device files.
pub fn test_host_overlay(
    c: &ClusterFile,
    r: &Rendered,
    instance: &str,
    ctld_port: u16,
) -> BTreeMap<String, String> {
    let mut files = r.slurm.clone();
    files.extend(r.scripts.clone());
    if let Some(h) = &c.spec.controller.health_check {
        files.insert("health-check.sh".into(), h.program.clone());
    }
    let mut files = overlay_files(files, instance, ctld_port);
    if let Some(gres) = files.get_mut("gres.conf") {
        *gres = fake_gpu_files(c, gres);
    }
    files
}

/// As `test_host_overlay`, but with the job confinement slurmops renders kept: its cgroup.conf and
/// slurm.conf's ProctrackType, TaskPlugin and JobAcctGatherType (the cgroup plugins).
pub fn confining_overlay(
    c: &ClusterFile,
    r: &Rendered,
    instance: &str,
    ctld_port: u16,
) -> BTreeMap<String, String> {
    let rendered = &r.slurm["slurm.conf"];
    let keep: Vec<(&str, String)> = ["ProctrackType", "TaskPlugin", "JobAcctGatherType"]
        .into_iter()
        .map(|k| {
            let line = rendered
                .lines()
                .find(|l| l.starts_with(&format!("{k}=")))
                .unwrap_or_else(|| panic!("the rendered slurm.conf sets no {k}"));
            (k, line[k.len() + 1..].to_string())
        })
        .collect();
    let mut files = test_host_overlay(c, r, instance, ctld_port);
    let conf = set_params(&files["slurm.conf"], &keep, &[]);
    files.insert("slurm.conf".into(), conf);
    files.insert("cgroup.conf".into(), r.slurm["cgroup.conf"].clone());
    files
}

/// FILES as slurmctld's config directory holds them (the slurm ConfigMap's keys, say), with the
/// test host's differences (see `test_host_overlay`; GPUs aside, which need the cluster spec).
pub fn overlay_files(
    mut files: BTreeMap<String, String>,
    instance: &str,
    ctld_port: u16,
) -> BTreeMap<String, String> {
    files.remove("slurmdbd.conf");
    let conf = files.get("slurm.conf").cloned().unwrap_or_default();
    let mut set = vec![
        ("SlurmctldHost", "localhost".to_string()),
        ("SlurmctldPort", ctld_port.to_string()),
        (
            "StateSaveLocation",
            format!("/var/spool/slurm-{instance}/ctld"),
        ),
        (
            "SlurmctldPidFile",
            format!("/run/slurm-{instance}/slurmctld.pid"),
        ),
        (
            "SlurmdPidFile",
            format!("/run/slurm-{instance}/slurmd-%n.pid"),
        ),
        (
            "AuthAltParameters",
            format!("jwt_key=/etc/slurm-{instance}/jwt_hs256.key"),
        ),
        ("ProctrackType", "proctrack/linuxproc".into()),
        ("TaskPlugin", "task/none".into()),
        ("JobAcctGatherType", "jobacct_gather/none".into()),
        ("AccountingStorageType", "accounting_storage/none".into()),
    ];
    // The health check at the path slurm.conf names: a worker pod mounts it in /etc/slurm; here
    // it sits in the instance's config directory, which its slurmd see too.
    if conf.lines().any(|l| l.starts_with("HealthCheckProgram=")) {
        set.push((
            "HealthCheckProgram",
            format!("/etc/slurm-{instance}/health-check.sh"),
        ));
    }
    let conf = set_params(
        &conf,
        &set,
        &[
            "AccountingStorageHost",
            "AccountingStoragePort",
            "AccountingStorageEnforce",
            "AccountingStorageTRES",
        ],
    );
    files.insert("slurm.conf".into(), conf);
    files.insert("cgroup.conf".into(), "CgroupPlugin=disabled\n".into());
    files
}

/// The `--conf` argument of NodeSet NAME's slurmd, as its StatefulSet renders it.
pub fn rendered_slurmd_conf(r: &Rendered, name: &str) -> String {
    let sts = r
        .get("StatefulSet", name)
        .expect("a StatefulSet per NodeSet");
    let args: Vec<String> = serde_json::from_value(
        sts.body
            .pointer("/spec/template/spec/containers/0/args")
            .cloned()
            .expect("the slurmd container's args"),
    )
    .expect("args are strings");
    let at = args
        .iter()
        .position(|a| a == "--conf")
        .expect("a --conf argument");
    args[at + 1].clone()
}

/// gres.conf with each NodeSet's GPUs on the bed's stand-in device files instead of NVML.
fn fake_gpu_files(c: &ClusterFile, gres: &str) -> String {
    let lines = gres.lines().map(|l| {
        let gpus = c
            .spec
            .node_sets
            .iter()
            .filter_map(|n| n.gpus.as_ref().map(|g| (n, g)))
            .find(|(n, _)| l.starts_with(&format!("NodeName={}-", n.name)));
        match gpus {
            Some((_, g)) => format!(
                "{} File=/run/fake-gpu/nvidia[0-{}]",
                l.replace(" AutoDetect=nvml", "")
                    .split(" File=")
                    .next()
                    .unwrap_or(l),
                g.count - 1
            ),
            None => l.to_string(),
        }
    });
    lines.collect::<Vec<_>>().join("\n") + "\n"
}

/// A dynamic slurmd of the shared bed instance, named NAME, run directly (no pod). Stopped and
/// removed from Slurm when dropped.
pub struct Slurmd {
    pub name: String,
}

/// A port for a slurmd, outside the kernel's ephemeral range (32768-60999), so that no outgoing
/// connection can take it between this check and slurmd's bind. Test processes run side by side,
/// so a port is claimed across processes: an exclusive lock on a file named after it, held open
/// until this process exits (the kernel drops the lock then, whatever way the process ends). A
/// port whose earlier claimer is gone but whose slurmd still listens fails the bind check. A new
/// node's; a replacement's is `slurmd_port_again`.
pub fn slurmd_port() -> u16 {
    claim_ports(1)
}

/// N consecutive ports P..P+N claimed as [`slurmd_port`] claims one (a test's own control
/// plane takes three: tests/e2e/support/control_plane.rs); returns P.
pub fn claim_ports(n: u16) -> u16 {
    const FIRST: u16 = 20000;
    const COUNT: u16 = 12000;
    static CLAIMS: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());
    let dir = std::env::temp_dir().join("slurmops-slurmd-ports");
    std::fs::create_dir_all(&dir).expect("create the slurmd port claims directory");
    // Processes started one after the other begin far apart.
    let start = (u64::from(std::process::id()) * 7919 % u64::from(COUNT)) as u16;
    let mut claims = CLAIMS.lock().unwrap_or_else(|e| e.into_inner());
    let claim = |port: u16| -> Option<std::fs::File> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))
            .ok()?;
        // Locked by another process, or by this one through an earlier claim (a new open file
        // description does not share the lock): either way, not free.
        file.try_lock().ok()?;
        // slurmd binds every address: a listener on any of them makes the port taken.
        std::net::TcpListener::bind(("0.0.0.0", port)).ok()?;
        Some(file)
    };
    for i in 0..COUNT {
        let port = FIRST + (start + i) % COUNT;
        if port + n > FIRST + COUNT {
            continue;
        }
        // Claimed together or not at all (a file dropped unlocks its port).
        let files: Vec<std::fs::File> = (0..n).map_while(|k| claim(port + k)).collect();
        if files.len() == usize::from(n) {
            claims.extend(files);
            return port;
        }
    }
    panic!("no {n} free ports in 127.0.0.1:{FIRST}..{}", FIRST + COUNT);
}

/// The port a node's replacement slurmd serves: PREVIOUS, its earlier slurmd's, once free.
pub fn slurmd_port_again(previous: u16) -> u16 {
    // slurmctld keeps a dynamic node's port across its registrations (it takes only the
    // address from each: node_mgr.c's validate_node_specs), and restores it with the node from
    // its state. On a real cluster every slurmd serves 6818 and a new pod's address is all that
    // changes; here the node's slurmds share 127.0.0.1, so a replacement must serve the port its
    // node's record names, or slurmctld pings the old one and marks the node NOT_RESPONDING
    // whenever the record outlived the old pod (its preStop's `scontrol delete` refused by a
    // controller in standby, a state saved before the deletion). PREVIOUS was claimed by this
    // process for the node's earlier slurmd; it is free once that slurmd has exited.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while std::time::Instant::now() < deadline {
        if std::net::TcpListener::bind(("0.0.0.0", previous)).is_ok() {
            return previous;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let port = slurmd_port();
    eprintln!(
        "slurmd port {previous} still taken after 15 s (sockets: {}): the node's new slurmd serves {port}, which slurmctld may not ping",
        sockets_on(previous)
    );
    port
}

/// Whether slurmd NAME answers on PORT within a few seconds; false when its process died.
pub fn slurmd_listens(name: &str, port: u16) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(10) {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        let alive = Command::new("bash")
            .args([SLURM_SH, "slurmd-alive", super::slurm_instance(), name])
            .status()
            .is_ok_and(|s| s.success());
        if !alive {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

impl Slurmd {
    /// Starts NAME with Slurm features FEATURES (comma-separated), and makes sure it listens
    /// (started again, on another port, if it died at start).
    pub fn start(name: &str, features: &str) -> Slurmd {
        let bed = super::bed();
        for _ in 0..3 {
            let port = slurmd_port();
            sh(&[
                "start-slurmd",
                super::slurm_instance(),
                name,
                &port.to_string(),
                &format!("Features={features} CPUs=1 RealMemory=256"),
                "-D",
                "-Z",
                "--conf-server",
                &format!("localhost:{}", bed.slurmctld_port),
            ]);
            if slurmd_listens(name, port) {
                return Slurmd { name: name.into() };
            }
        }
        panic!(
            "slurmd {name} never listened; its log:\n{}",
            sh(&["log", super::slurm_instance(), &format!("slurmd-{name}")])
        );
    }
}

impl Drop for Slurmd {
    fn drop(&mut self) {
        // A failed test may leave its jobs behind: they would keep the node from being deleted.
        let _ = Command::new("bash")
            .args([
                "tests/bed/slurm.sh",
                "exec",
                super::slurm_instance(),
                "scancel",
                "-w",
            ])
            .arg(&self.name)
            .output();
        let _ = Command::new("bash")
            .args([
                "tests/bed/slurm.sh",
                "stop-slurmd",
                super::slurm_instance(),
                &self.name,
            ])
            .output();
        let _ = Command::new("bash")
            .args([
                "tests/bed/slurm.sh",
                "exec",
                super::slurm_instance(),
                "scontrol",
                "delete",
            ])
            .arg(format!("nodename={}", self.name))
            .output();
    }
}

/// Runs `scontrol ARGS` in the bed instance (an administrator's action).
pub fn scontrol(args: &[&str]) -> String {
    let mut all = vec!["exec", super::slurm_instance(), "scontrol"];
    all.extend(args);
    sh(&all)
}

/// Submits `sleep SECS` as root on exactly NODE through slurmrestd; returns the job id.
pub async fn submit_sleep(node: &str, secs: u32) -> u64 {
    submit_job(
        serde_json::json!({"partition": "all", "required_nodes": [node]}),
        secs,
    )
    .await
}

/// Submits `sleep SECS` to PARTITION, on any of its nodes; returns the job id.
pub async fn submit_to_partition(partition: &str, secs: u32) -> u64 {
    submit_job(serde_json::json!({"partition": partition}), secs).await
}

/// Submits `sleep SECS` with the job fields PLACEMENT (partition, node counts, ...).
pub async fn submit_job(placement: serde_json::Value, secs: u32) -> u64 {
    let bed = super::bed();
    let mut job = serde_json::json!({"tasks": 1, "name": "bed-sleep",
        "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"]});
    for (k, v) in placement.as_object().expect("placement fields") {
        job[k] = v.clone();
    }
    let body = serde_json::json!({"script": format!("#!/bin/sh\nsleep {secs}\n"), "job": job});
    let resp: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/slurm/v0.0.42/job/submit", bed.slurmrestd_url))
        .header("X-SLURM-USER-TOKEN", &bed.slurm_jwt)
        .json(&body)
        .send()
        .await
        .expect("submit a job")
        .json()
        .await
        .expect("submit answer");
    resp["job_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("job not submitted: {resp}"))
}

/// A job's state list as slurmrestd reports it (e.g. `["COMPLETED"]`).
pub async fn job_state(id: u64) -> Vec<String> {
    let bed = super::bed();
    let resp: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/slurm/v0.0.42/job/{id}", bed.slurmrestd_url))
        .header("X-SLURM-USER-TOKEN", &bed.slurm_jwt)
        .send()
        .await
        .expect("get job")
        .json()
        .await
        .expect("job answer");
    serde_json::from_value(resp["jobs"][0]["job_state"].clone()).unwrap_or_default()
}

/// A slurmops Slurm client for the bed's slurmrestd (root's JWT).
pub fn client() -> slurmops::slurm::Client {
    let b = super::bed();
    slurmops::slurm::Client::new(slurmops::slurm::Config::new(
        b.slurmrestd_url.clone(),
        slurmops::slurm::auth::Credentials::Token {
            token: slurmops::slurm::auth::Secret::new(b.slurm_jwt.clone()),
            user: None,
        },
    ))
    .expect("slurmrestd client")
}

/// slurmrestd of INSTANCE started on PORT (asserted), and a slurmops client for it with the
/// instance's root JWT.
pub fn restd_client(instance: &str, release: &str, port: u16) -> slurmops::slurm::Client {
    assert!(
        start_restd(instance, release, port),
        "slurmrestd did not start"
    );
    let token = sh(&["token", instance]).trim().to_string();
    slurmops::slurm::Client::new(slurmops::slurm::Config::new(
        format!("http://127.0.0.1:{port}"),
        slurmops::slurm::auth::Credentials::Token {
            token: slurmops::slurm::auth::Secret::new(token),
            user: None,
        },
    ))
    .expect("slurmrestd client")
}

/// A configless slurmd NODE of INSTANCE (its --conf CONF, slurmctld on CTLD_PORT) started on
/// PORT, waited for until Slurm shows it IDLE (asserted, with its log).
pub async fn start_idle_slurmd(
    release: &str,
    instance: &str,
    node: &str,
    port: u16,
    conf: &str,
    ctld_port: u16,
) {
    sh_on(
        release,
        &[
            "start-slurmd",
            instance,
            node,
            &port.to_string(),
            conf,
            "-D",
            "-Z",
            "--conf-server",
            &format!("localhost:{ctld_port}"),
        ],
    );
    let idle = || node_state(instance, node).is_some_and(|s| s.starts_with("IDLE"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !idle() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    assert!(
        idle(),
        "{node} did not register idle: {:?}\n{}",
        node_state(instance, node),
        sh(&["log", instance, &format!("slurmd-{node}")])
    );
}

/// Removes cgroup DIR and those below it, deepest first (a cgroup is removed with rmdir).
pub fn remove_cgroups(dir: &std::path::Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroups(&e.path());
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
}

/// Where tests/bed/slurm.sh keeps each instance's pid files and daemon output.
pub fn run_dir() -> String {
    let base = std::env::var("SLURMOPS_BED_RUN").unwrap_or_else(|_| "/tmp/slurmops-bed".into());
    format!("{base}/slurm")
}

/// Every socket on local PORT with its process (`ss`), to say who took a slurmd's port.
pub fn sockets_on(port: u16) -> String {
    Command::new("ss")
        .args(["-tanpH", &format!("sport = :{port}")])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| format!("ss: {e}"))
}

/// FILE as slurmd NAME of INSTANCE received it configless (its cache in its own
/// /var/spool/slurmd), or None when it did not.
pub fn conf_cache(instance: &str, name: &str, file: &str) -> Option<String> {
    let path = format!("/var/spool/slurm-{instance}/d/{name}/conf-cache/{file}");
    run(&["exec", instance, "cat", &path], &[]).ok()
}

/// `slurmops ARGS DIR` as the restricted identity, talking to the bed's slurmrestd of this
/// process's release.
pub fn cli(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let b = super::bed();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"));
    c.args(args)
        .arg(dir)
        .args([
            "--slurmrestd-url",
            &b.slurmrestd_url,
            "--slurm-jwt",
            &b.slurm_jwt,
        ])
        .env("KUBECONFIG", &b.kubeconfig_restricted);
    c
}
