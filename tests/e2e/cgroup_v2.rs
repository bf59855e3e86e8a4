//! Job isolation as rendered, on a node of the unified cgroup v2 hierarchy (issue 78): the bed's
//! guest (tests/bed/vm.sh: Debian trixie's kernel and systemd under QEMU, every controller on)
//! runs Slurm 24.11 from its own packages — slurmctld, and slurmd under systemd with its cgroup
//! subtree delegated as Debian's unit runs it — with the slurm.conf cgroup plugins
//! (proctrack/cgroup, task/cgroup, jobacct_gather/cgroup) and the cgroup.conf slurmops renders
//! (`CgroupPlugin=autodetect`, which picks cgroup/v2 there), sized by the StatefulSet's own
//! `--conf`. `confinement.rs`'s job, there: asking for 1 CPU and 100 MB it sees one CPU, its job
//! cgroup's `memory.max` is 100 MB, and the 400 MB it then takes end it OUT_OF_MEMORY by its own
//! cgroup, its slurmd up and the node IDLE after.
//!
//! Not here yet (docs/tests.md): 25.11 and 26.05 in the guest, the worker image under containerd
//! and runc in it, and the guest's kubelet.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use slurmops::cluster::load;
use slurmops::render::render;

use crate::support::slurm::{confining_overlay, rendered_slurmd_conf};
use crate::support::{cluster_head, unique_suffix};

/// The guest, booted once per test process (it stays up for the suite); how long its boot took.
fn guest_up() -> &'static str {
    static UP: OnceLock<String> = OnceLock::new();
    UP.get_or_init(|| {
        let env = crate::support::bed::script_env(
            "tests/bed/vm.sh",
            &["up".as_ref()],
            "the cgroup v2 guest",
        );
        env.get("VM_BOOT_SECONDS").cloned().unwrap_or_default()
    })
}

/// CMD in the guest as root, STDIN fed to it: its output, or why it failed.
fn guest(cmd: &str, stdin: &str) -> Result<String, String> {
    let mut child = Command::new("bash")
        .args(["tests/bed/vm.sh", "ssh", cmd])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tests/bed/vm.sh ssh");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match out.status.success() {
        true => Ok(text(&out.stdout)),
        false => Err(format!(
            "{cmd}: {}\n{}{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        )),
    }
}

fn guest_ok(cmd: &str) -> String {
    guest(cmd, "").unwrap_or_else(|e| panic!("in the guest: {e}"))
}

/// Stops the run's slurmctld and slurmd in the guest and removes its state when dropped.
struct Stop(String);

impl Drop for Stop {
    fn drop(&mut self) {
        let i = &self.0;
        let _ = guest(
            &format!(
                "systemctl stop slurmd-{i} ctld-{i}; systemctl reset-failed slurmd-{i} ctld-{i}; rm -rf /var/spool/slurm-{i}"
            ),
            "",
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn on_cgroup_v2_a_job_is_confined_to_what_it_asked_for_by_the_rendered_cgroup_settings() {
    let started = Instant::now();
    let boot = guest_up();
    assert_eq!(
        guest_ok("stat -fc %T /sys/fs/cgroup").trim(),
        "cgroup2fs",
        "the guest mounts the unified hierarchy"
    );
    let controllers = guest_ok("cat /sys/fs/cgroup/cgroup.controllers");
    for c in ["cpuset", "cpu", "memory", "pids"] {
        assert!(
            controllers.split_whitespace().any(|x| x == c),
            "{controllers}"
        );
    }

    // The rendered files, with the test host's differences (controller on this host, its own
    // directories), the instance named for this run.
    let instance = format!("v2{}", &unique_suffix()[..5]);
    let set = "cg";
    let yaml = cluster_head("c", "confined")
        + &format!(
            "  nodeSets:\n    - {{name: {set}, replicas: 1, cpu: \"2\", memory: 1Gi}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n"
        );
    let c = load("cluster.yaml", &yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let r = render(&c);
    let conf = rendered_slurmd_conf(&r, set);
    assert!(
        conf.contains("CPUs=2") && conf.contains("RealMemory=1024"),
        "{conf}"
    );
    let cgroup = &r.slurm["cgroup.conf"];
    assert!(
        cgroup.contains("CgroupPlugin=autodetect"),
        "the rendered cgroup.conf lets Slurm pick the node's version:\n{cgroup}"
    );
    let files = confining_overlay(&c, &r, &instance, 6817);
    // One guest serves the suite: a run that failed before its end left its daemons (on Slurm's
    // fixed ports there); this run's go when it ends, however it ends.
    guest_ok(
        "systemctl stop 'ctld-v2*' 'slurmd-v2*' && systemctl reset-failed 'ctld-v2*' 'slurmd-v2*' || true",
    );
    let _stop = Stop(instance.clone());
    let etc = format!("/etc/slurm-{instance}");
    guest_ok(&format!(
        "mkdir -p {etc} /var/spool/slurm-{instance}/ctld /run/slurm-{instance} && \
         chown slurm:slurm /var/spool/slurm-{instance}/ctld /run/slurm-{instance} && \
         dd if=/dev/urandom of={etc}/slurm.key bs=1024 count=1 2>/dev/null && \
         cp {etc}/slurm.key {etc}/jwt_hs256.key && chown slurm:slurm {etc}/*.key && chmod 600 {etc}/*.key"
    ));
    for (name, content) in &files {
        guest(&format!("cat > {etc}/{name}"), content)
            .unwrap_or_else(|e| panic!("write {name} in the guest: {e}"));
    }
    // slurmctld, and slurmd as Debian's unit runs it (its cgroup subtree delegated: Slurm's
    // cgroup/v2 plugin makes the job and step cgroups under it).
    let node = format!("{set}-0");
    guest_ok(&format!(
        "systemd-run --unit=ctld-{instance} slurmctld -D -f {etc}/slurm.conf && \
         for i in $(seq 1 100); do SLURM_CONF={etc}/slurm.conf scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.3; done && \
         systemd-run --unit=slurmd-{instance} -p Delegate=yes -p KillMode=process \
           slurmd -D -Z -f {etc}/slurm.conf -N {node} --conf '{conf}'"
    ));
    let sconf = format!("SLURM_CONF={etc}/slurm.conf");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = guest(&format!("{sconf} sinfo -h -n {node} -o %T"), "").unwrap_or_default();
        if s.trim() == "idle" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{node} not IDLE in 120 s: {s}\n{}",
            guest(
                &format!(
                    "journalctl -u slurmd-{instance} -u ctld-{instance} --no-pager | tail -40"
                ),
                ""
            )
            .unwrap_or_else(|e| e)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // confinement.rs's job: its CPUs, its job cgroup's cpuset and memory.max, then 400 MB.
    let script = r#"nproc
path=$(sed -n 's/^0:://p' /proc/self/cgroup)
cat "/sys/fs/cgroup${path%%/step_*}/cpuset.cpus.effective"
cat "/sys/fs/cgroup${path%%/step_*}/memory.max"
head -c 400000000 /dev/zero | tail > /dev/null
echo done"#;
    let out_file = format!("/tmp/{instance}.out");
    let job = guest(
        &format!(
            "{sconf} sbatch --parsable -p all -w {node} -n1 -c1 --mem=100M -o {out_file} /dev/stdin"
        ),
        &format!("#!/bin/sh\n{script}\n"),
    )
    .unwrap_or_else(|e| panic!("sbatch: {e}"))
    .trim()
    .to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    let state = loop {
        let s = guest(&format!("{sconf} squeue -h -j {job} -o %T"), "").unwrap_or_default();
        if s.trim().is_empty() || Instant::now() > deadline {
            break guest_ok(&format!("{sconf} scontrol -o show job {job}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let out = guest_ok(&format!("cat {out_file}"));
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("1"),
        "the job saw more than its one CPU:\n{out}\n{state}"
    );
    let cpuset = lines.next().unwrap_or_default();
    assert!(
        cpuset.parse::<u32>().is_ok(),
        "the job's cpuset is not one CPU of the node's two:\n{out}\n{state}"
    );
    assert_eq!(
        lines.next(),
        Some("104857600"),
        "the job's cgroup memory.max is not its 100 MB:\n{out}\n{state}"
    );
    assert!(
        state.contains("JobState=OUT_OF_MEMORY"),
        "the job took 400 MB and was not OOM-killed by its cgroup:\n{out}\n{state}"
    );
    // The OOM kill was the job's own: slurmd lives on, the node IDLE.
    assert_eq!(
        guest_ok(&format!("systemctl is-active slurmd-{instance}")).trim(),
        "active"
    );
    let s = guest_ok(&format!("{sconf} sinfo -h -n {node} -o %T"));
    assert_eq!(s.trim(), "idle", "{node} after the job");
    eprintln!(
        "cgroup v2 guest: booted in {boot} s; the test {:.1?}",
        started.elapsed()
    );
}
