//! The cgroup v2 guest (tests/bed/vm.sh: Debian trixie's kernel and systemd under QEMU, every
//! controller on), booted once for the suite, and a release's slurmctld in it: the bed's own
//! chroot of the release (the host's Slurm cache, shared into the guest read-only over virtio-9p)
//! run as a systemd service rooted in it, with the files a test writes at its /etc/slurm.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The guest, booted once per test process (it stays up for the suite); how long its boot took.
pub fn up() -> &'static str {
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
pub fn run(cmd: &str, stdin: &[u8]) -> Result<String, String> {
    let mut child = Command::new("bash")
        .args(["tests/bed/vm.sh", "ssh", cmd])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tests/bed/vm.sh ssh");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
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

/// CMD in the guest; panics with its output when it fails.
pub fn ok(cmd: &str) -> String {
    run(cmd, b"").unwrap_or_else(|e| panic!("in the guest: {e}"))
}

/// The guest mounts the unified hierarchy with the controllers Slurm confines jobs with.
pub fn assert_cgroup_v2() {
    assert_eq!(
        ok("stat -fc %T /sys/fs/cgroup").trim(),
        "cgroup2fs",
        "the guest mounts the unified hierarchy"
    );
    let controllers = ok("cat /sys/fs/cgroup/cgroup.controllers");
    for c in ["cpuset", "cpu", "memory", "pids"] {
        assert!(
            controllers.split_whitespace().any(|x| x == c),
            "{controllers}"
        );
    }
}

/// A release's Slurm in the guest: the bed's chroot of it (tests/bed/slurm-chroot.sh), the
/// host's cache mounted read-only at /mnt/cache; the test's files bound at its /etc/slurm.
/// slurmctld runs on Slurm's own ports there (one test in the guest at a time: the test group
/// `cgroup-v2-guest`). Its daemons and files go when it is dropped.
pub struct Slurm {
    pub instance: String,
    path: String,
    pub etc: String,
    /// slurmctld's /run/slurmctld, shared with the clients: its socket for local clients
    /// (`AuthInfo=use_client_ids`, as rendered) is there.
    run: String,
    /// Bound at /mnt in every daemon and client: a directory every job can write.
    pub out: String,
    /// passwd and group files bound over the chroot's, when the slurm user's ids are set.
    ids: Option<String>,
}

impl Slurm {
    /// Release's slurmctld of INSTANCE with FILES at /etc/slurm (`/etc/slurm-INSTANCE` in them
    /// read as /etc/slurm), a fresh slurm.key and JWT key, once it answers. SLURM_IDS gives the
    /// slurm user the uid and gid an image has (the chroot's are Debian's 64030, or a build's),
    /// so that slurmd of that image takes its RPCs as SlurmUser's.
    pub async fn start(
        release: &str,
        instance: &str,
        files: &std::collections::BTreeMap<String, String>,
        slurm_ids: Option<u32>,
    ) -> Slurm {
        // One guest serves the suite: a run that failed before its end left its daemons (on
        // Slurm's fixed ports there); this run's go when it ends, however it ends.
        ok(
            "systemctl stop 'ctld-v2*' 'slurmd-v2*' && systemctl reset-failed 'ctld-v2*' 'slurmd-v2*' || true",
        );
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
        ok(
            "mountpoint -q /mnt/cache || { mkdir -p /mnt/cache && mount -t 9p -o trans=virtio,version=9p2000.L,ro cache /mnt/cache; }",
        );
        let s = Slurm {
            instance: instance.to_string(),
            path: format!("/mnt/cache/{name}"),
            etc: format!("/etc/slurm-{instance}"),
            run: format!("/run/ctld-{instance}"),
            out: format!("/srv/out-{instance}"),
            ids: slurm_ids.map(|_| format!("/srv/ids-{instance}")),
        };
        let (path, etc, outdir, rundir) = (&s.path, &s.etc, &s.out, &s.run);
        if let (Some(dir), Some(id)) = (&s.ids, slurm_ids) {
            ok(&format!(
                "mkdir -p {dir} && \
                 awk -F: -v OFS=: '$1==\"slurm\" {{$3={id}; $4={id}}} 1' {path}/etc/passwd > {dir}/passwd && \
                 awk -F: -v OFS=: '$1==\"slurm\" {{$3={id}}} 1' {path}/etc/group > {dir}/group"
            ));
        }
        // Owned by the slurm user (of the chroot, or the ids set).
        let passwd = s
            .ids
            .as_ref()
            .map_or(format!("{path}/etc/passwd"), |d| format!("{d}/passwd"));
        ok(&format!(
            "u=$(awk -F: '$1==\"slurm\" {{print $3\":\"$4}}' {passwd}) && \
             mkdir -p {etc} {outdir} {rundir} && chmod 777 {outdir} && chown $u {rundir} && \
             dd if=/dev/urandom of={etc}/slurm.key bs=1024 count=1 2>/dev/null && \
             cp {etc}/slurm.key {etc}/jwt_hs256.key && chown $u {etc}/*.key && chmod 600 {etc}/*.key"
        ));
        // The files as the chroot's daemons read them: at /etc/slurm.
        for (name, content) in files {
            let content = content.replace(&format!("/etc/slurm-{instance}"), "/etc/slurm");
            run(&format!("cat > {etc}/{name}"), content.as_bytes())
                .unwrap_or_else(|e| panic!("write {name} in the guest: {e}"));
        }
        let dirs = s.dirs();
        ok(&s.daemon(&format!(
            "--unit=ctld-{instance} /bin/sh -c '{dirs} && exec /usr/sbin/slurmctld -D -f /etc/slurm/slurm.conf'"
        )));
        let ping = Instant::now();
        loop {
            let answer = s.client("/usr/bin/scontrol ping", "");
            if answer.as_ref().is_ok_and(|o| o.contains("is UP")) {
                break;
            }
            assert!(
                ping.elapsed() < Duration::from_secs(60),
                "slurmctld {release} did not answer in the guest ({answer:?}):\n{}",
                s.journal()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        s
    }

    /// What a daemon of the chroot needs made at its start: its state and pid directories.
    pub fn dirs(&self) -> String {
        let i = &self.instance;
        format!(
            "mkdir -p /var/spool/slurm-{i}/ctld /run/slurm-{i} && chown slurm:slurm /var/spool/slurm-{i}/ctld /run/slurm-{i}"
        )
    }

    /// `systemd-run` rooted in the chroot, with the test's files, the guest's host names, and its
    /// own /tmp and /var/spool.
    pub fn daemon(&self, args: &str) -> String {
        let ids = self.ids.as_ref().map_or(String::new(), |d| {
            format!(
                "-p BindReadOnlyPaths={d}/passwd:/etc/passwd -p BindReadOnlyPaths={d}/group:/etc/group "
            )
        });
        format!(
            "systemd-run -p RootDirectory={} -p MountAPIVFS=yes -p BindReadOnlyPaths={}:/etc/slurm \
             -p BindReadOnlyPaths=/etc/hosts:/etc/hosts {ids}-p BindPaths={}:/run/slurmctld \
             -p BindPaths={}:/mnt -p TemporaryFileSystem=/tmp -p TemporaryFileSystem=/var/spool {args}",
            self.path, self.etc, self.run, self.out
        )
    }

    /// A Slurm client of the release, run in the chroot: its output.
    pub fn client(&self, cmd: &str, stdin: &str) -> Result<String, String> {
        run(
            &self.daemon(&format!("-P -q -E SLURM_CONF=/etc/slurm/slurm.conf {cmd}")),
            stdin.as_bytes(),
        )
    }

    /// The last lines of the instance's daemons' journal.
    pub fn journal(&self) -> String {
        let i = &self.instance;
        run(
            &format!("journalctl -u slurmd-{i} -u ctld-{i} --no-pager | tail -40"),
            b"",
        )
        .unwrap_or_else(|e| e)
    }

    /// Waits until NODE is IDLE (120 s); panics with WHY_NOT's output and the journal.
    pub async fn wait_idle(&self, node: &str, why_not: impl Fn() -> String) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let s = self
                .client(&format!("/usr/bin/sinfo -h -n {node} -o %T"), "")
                .unwrap_or_default();
            if s.trim() == "idle" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{node} not IDLE in 120 s: {s}\n{}\n{}",
                why_not(),
                self.journal()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Submits SCRIPT with sbatch ARGS; waits for the job's end (120 s): its id and
    /// `scontrol show job` of it.
    pub async fn job(&self, args: &str, script: &str) -> (String, String) {
        let job = self
            .client(&format!("/usr/bin/sbatch --parsable {args}"), script)
            .unwrap_or_else(|e| panic!("sbatch: {e}"))
            .trim()
            .to_string();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let s = self
                .client(&format!("/usr/bin/squeue -h -j {job} -o %T"), "")
                .unwrap_or_default();
            if s.trim().is_empty() || Instant::now() > deadline {
                let shown = self
                    .client(&format!("/usr/bin/scontrol -o show job {job}"), "")
                    .unwrap_or_else(|e| e);
                return (job, shown);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let i = &self.instance;
        let _ = run(
            &format!(
                "systemctl stop slurmd-{i} ctld-{i}; systemctl reset-failed slurmd-{i} ctld-{i}; rm -rf /srv/out-{i} /etc/slurm-{i} /run/ctld-{i} /srv/ids-{i}"
            ),
            b"",
        );
    }
}
