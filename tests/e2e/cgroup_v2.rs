//! Job isolation as rendered, on a node of the unified cgroup v2 hierarchy (issue 78), for each
//! release: the bed's guest (tests/bed/vm.sh: Debian trixie's kernel and systemd under QEMU, every
//! controller on) runs the release's Slurm from the bed's own chroot (the host's Slurm cache,
//! shared into the guest read-only over virtio-9p; each daemon a systemd service rooted in it,
//! its cgroup subtree delegated as Debian's unit runs slurmd) — slurmctld and slurmd, with the
//! slurm.conf cgroup plugins (proctrack/cgroup, task/cgroup, jobacct_gather/cgroup) and the
//! cgroup.conf slurmops renders (`CgroupPlugin=autodetect`, which picks cgroup/v2 there), sized by
//! the StatefulSet's own `--conf`. `confinement.rs`'s job, there: asking for 1 CPU and 100 MB it
//! sees one CPU, its job cgroup's `memory.max` is 100 MB, and the 400 MB it then takes end it
//! OUT_OF_MEMORY by its own cgroup, its slurmd up and the node IDLE after.
//!
//! Not here yet (docs/tests.md): the worker image under containerd and runc in the guest, and
//! the guest's kubelet.

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

/// The release's Slurm in the guest: the bed's chroot of it (tests/bed/slurm-chroot.sh), the
/// host's cache mounted read-only at /mnt/cache; ETC bound at its /etc/slurm, OUT at its /mnt.
struct Root {
    path: String,
    etc: String,
    /// slurmctld's /run/slurmctld, shared with the clients: its socket for local clients
    /// (`AuthInfo=use_client_ids`, as rendered) is there.
    run: String,
    out: String,
}

impl Root {
    fn of(release: &str, instance: &str) -> Root {
        let out = Command::new("bash")
            .args(["tests/bed/slurm-chroot.sh", release])
            .output()
            .expect("run tests/bed/slurm-chroot.sh");
        assert!(out.status.success(), "the Slurm {release} chroot");
        let host = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let name = std::path::Path::new(&host)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        guest_ok(
            "mountpoint -q /mnt/cache || { mkdir -p /mnt/cache && mount -t 9p -o trans=virtio,version=9p2000.L,ro cache /mnt/cache; }",
        );
        Root {
            path: format!("/mnt/cache/{name}"),
            etc: format!("/etc/slurm-{instance}"),
            run: format!("/run/ctld-{instance}"),
            out: format!("/srv/out-{instance}"),
        }
    }

    /// `systemd-run` rooted in the chroot, with the test's files, the guest's host names, and its
    /// own /tmp and /var/spool.
    fn run(&self, args: &str) -> String {
        format!(
            "systemd-run -p RootDirectory={} -p MountAPIVFS=yes -p BindReadOnlyPaths={}:/etc/slurm \
             -p BindReadOnlyPaths=/etc/hosts:/etc/hosts -p BindPaths={}:/run/slurmctld \
             -p BindPaths={}:/mnt -p TemporaryFileSystem=/tmp -p TemporaryFileSystem=/var/spool {args}",
            self.path, self.etc, self.run, self.out
        )
    }

    /// A Slurm client of the release, run in the chroot: its output.
    fn client(&self, cmd: &str, stdin: &str) -> Result<String, String> {
        guest(
            &self.run(&format!("-P -q -E SLURM_CONF=/etc/slurm/slurm.conf {cmd}")),
            stdin,
        )
    }
}

/// Stops the run's slurmctld and slurmd in the guest and removes its state when dropped.
struct Stop(String);

impl Drop for Stop {
    fn drop(&mut self) {
        let i = &self.0;
        let _ = guest(
            &format!(
                "systemctl stop slurmd-{i} ctld-{i}; systemctl reset-failed slurmd-{i} ctld-{i}; rm -rf /srv/out-{i} /etc/slurm-{i} /run/ctld-{i}"
            ),
            "",
        );
    }
}

on_each_slurm! {
async fn on_cgroup_v2_a_job_is_confined_to_what_it_asked_for_by_the_rendered_cgroup_settings() {
    let started = Instant::now();
    let release = crate::support::slurm_release();
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
    let root = Root::of(release, &instance);
    let (etc, outdir, run) = (root.etc.clone(), root.out.clone(), root.run.clone());
    // Owned by the chroot's slurm user (Debian's packages give it 64030; a build from source
    // another id).
    let path = &root.path;
    guest_ok(&format!(
        "u=$(awk -F: '$1==\"slurm\" {{print $3\":\"$4}}' {path}/etc/passwd) && \
         mkdir -p {etc} {outdir} {run} && chmod 777 {outdir} && chown $u {run} && \
         dd if=/dev/urandom of={etc}/slurm.key bs=1024 count=1 2>/dev/null && \
         cp {etc}/slurm.key {etc}/jwt_hs256.key && chown $u {etc}/*.key && chmod 600 {etc}/*.key"
    ));
    // The files as the chroot's daemons read them: at /etc/slurm.
    for (name, content) in &files {
        let content = content.replace(&format!("/etc/slurm-{instance}"), "/etc/slurm");
        guest(&format!("cat > {etc}/{name}"), &content)
            .unwrap_or_else(|e| panic!("write {name} in the guest: {e}"));
    }
    // slurmctld, and slurmd as Debian's unit runs it (its cgroup subtree delegated: Slurm's
    // cgroup/v2 plugin makes the job and step cgroups under it).
    let node = format!("{set}-0");
    let dirs = format!(
        "mkdir -p /var/spool/slurm-{instance}/ctld /run/slurm-{instance} && chown slurm:slurm /var/spool/slurm-{instance}/ctld /run/slurm-{instance}"
    );
    guest_ok(&root.run(&format!(
        "--unit=ctld-{instance} /bin/sh -c '{dirs} && exec /usr/sbin/slurmctld -D -f /etc/slurm/slurm.conf'"
    )));
    let ping = Instant::now();
    loop {
        let answer = root.client("/usr/bin/scontrol ping", "");
        if answer.as_ref().is_ok_and(|o| o.contains("is UP")) {
            break;
        }
        assert!(
            ping.elapsed() < Duration::from_secs(60),
            "slurmctld {release} did not answer in the guest ({answer:?}):\n{}",
            guest(&format!("journalctl -u ctld-{instance} --no-pager | tail -30"), "").unwrap_or_else(|e| e)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    guest_ok(&root.run(&format!(
        "--unit=slurmd-{instance} -p Delegate=yes -p KillMode=process /bin/sh -c '{dirs} && exec /usr/sbin/slurmd -D -Z -f /etc/slurm/slurm.conf -N {node} --conf \"{conf}\"'"
    )));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = root
            .client(&format!("/usr/bin/sinfo -h -n {node} -o %T"), "")
            .unwrap_or_default();
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
    let job = root
        .client(
            &format!(
                "/usr/bin/sbatch --parsable -p all -w {node} -n1 -c1 --mem=100M -o /mnt/job.out"
            ),
            &format!("#!/bin/sh\n{script}\n"),
        )
    .unwrap_or_else(|e| panic!("sbatch: {e}"))
    .trim()
    .to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    let state = loop {
        let s = root
            .client(&format!("/usr/bin/squeue -h -j {job} -o %T"), "")
            .unwrap_or_default();
        if s.trim().is_empty() || Instant::now() > deadline {
            break root
                .client(&format!("/usr/bin/scontrol -o show job {job}"), "")
                .unwrap_or_else(|e| e);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let out = guest_ok(&format!("cat {outdir}/job.out"));
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
    let s = root
        .client(&format!("/usr/bin/sinfo -h -n {node} -o %T"), "")
        .unwrap_or_else(|e| e);
    assert_eq!(s.trim(), "idle", "{node} after the job");
    eprintln!(
        "cgroup v2 guest, Slurm {release}: booted in {boot} s; the test {:.1?}",
        started.elapsed()
    );
}
}
