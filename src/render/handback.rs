//! The primary controller's safe return after a failover.
//!
//! With backups, a primary slurmctld that starts asks the backup in control for control
//! (`REQUEST_CONTROL`) and then reads the shared state directory. On Slurm 24.11 to 26.05 the
//! backup answers only after a 29 s wait (its handler waits for the shutdown that waits for the
//! handler: "REQUEST_CONTROL reply but backup not completely done relinquishing control. Old
//! state possible") and writes its last save right after: the primary reads the state while the
//! backup writes it, and nobody schedules for those 29 s. So slurmops hands control back through
//! the shared state directory instead, with no new permission:
//! - the primary's container (`PRIMARY`), when the heartbeat the controller in control writes
//!   there says a backup has control, asks for it back (the file `slurmops-return`, rewritten
//!   every second) and starts slurmctld only once that heartbeat has stopped: a slurmctld stops
//!   its heartbeat last, after its final save;
//! - the `reconfigure` sidecar of the backup in control (`sidecar`) sees the request and has
//!   its slurmctld save its state and stop (`scontrol shutdown slurmctld`, through slurmctld's
//!   own authentication socket in the pod's shared /run/slurmctld; Slurm sends it to every
//!   controller, so a standby backup stops too); the kubelet starts them again, in standby;
//! - the sidecar then waits for slurmctld's pid file to go (slurmctld removes it as it exits,
//!   after its last heartbeat) and says so in the state directory (`slurmops-stopped`, holding
//!   the time of that last heartbeat), so the primary starts at once instead of waiting for the
//!   heartbeat to go stale (up to SlurmctldTimeout/4 + 3 s, 10 s as rendered: with the
//!   primary's own start, longer than a client's MessageTimeout, 10 s, for which it waits for a
//!   controller; a bed run saw one submission refused so).

/// Reading slurm.conf (`$SLURM_CONF`, else /etc/slurm/slurm.conf) and the heartbeat: two
/// big-endian 64-bit numbers, when it was written and the index of the controller in control
/// (0: the primary). `beat DIR` sets `at` (when), `inx` (who) and `age` (seconds since); false
/// without a heartbeat.
const READ: &str = r#"conf=${SLURM_CONF:-/etc/slurm/slurm.conf}
setting() { sed -n "s/^$1=//p" "$conf" | head -n 1; }
beat() {
  set -- $(od -An -v -tu1 -N16 "$1/heartbeat" 2>/dev/null)
  [ $# -eq 16 ] || return 1
  at=0 inx=0 n=0
  for b do
    n=$((n + 1))
    if [ $n -le 8 ]; then at=$((at * 256 + b)); else inx=$((inx * 256 + b)); fi
  done
  age=$(($(date +%s) - at))
}
state=$(setting StateSaveLocation)
timeout=$(setting SlurmctldTimeout)
# slurmctld beats every SlurmctldTimeout/4 s (at most 30): older by 3 s more, it has stopped.
stale=$((${timeout:-120} / 4))
[ "$stale" -le 30 ] || stale=30
stale=$((stale + 3))
"#;

/// The primary's container: run as `/bin/sh -c PRIMARY /usr/sbin/slurmctld ARGS...`; it ends by
/// `exec`ing that program (its `$0`) with ARGS. It waits while a backup's heartbeat is fresh and that backup's
/// sidecar has not said it stopped after that beat.
const PRIMARY: &str = r#"primary=$(setting SlurmctldHost | sed 's/(.*//')
if [ "$(uname -n)" = "$primary" ]; then
  told= why=
  while beat "$state" && [ "$inx" -gt 0 ]; do
    why="its heartbeat went stale"
    [ "$age" -lt "$stale" ] || break
    why="its sidecar saw it stop"
    [ "$(cat "$state/slurmops-stopped" 2>/dev/null)" != "$at" ] || break
    if [ -z "$told" ]; then
      echo "slurmops: backup controller $inx has control: its reconfigure sidecar hands control back (it saves its state and stops) before this primary starts"
      told=1
    fi
    date +%s > "$state/slurmops-return"
    sleep 1
    why="its heartbeat is gone"
  done
  rm -f "$state/slurmops-return" "$state/slurmops-stopped"
  [ -z "$told" ] || echo "slurmops: the backup has saved its state and stopped ($why): starting the primary"
fi
exec "$0" "$@"
"#;

/// The sidecar's step: when the primary asked within the last 10 s and this pod's slurmctld
/// has control (the heartbeat names its index), shut it down, and once it has exited (its pid
/// file gone, at most 60 s) tell the primary.
const SIDECAR_STEP: &str = r#"handback() {
  [ -f "$state/slurmops-return" ] || return 0
  asked=$(cat "$state/slurmops-return" 2>/dev/null)
  case "$asked" in '' | *[!0-9]*) return 0 ;; esac
  [ $(($(date +%s) - asked)) -lt 10 ] || return 0
  me=$(sed -n 's/^SlurmctldHost=//p' "$conf" | sed 's/(.*//' | grep -n -x "$(uname -n)" | cut -d: -f1)
  [ -n "$me" ] && [ "$me" -gt 1 ] && beat "$state" && [ "$inx" -eq $((me - 1)) ] || return 0
  [ "$age" -lt "$stale" ] || return 0
  pid=$(setting SlurmctldPidFile)
  pid=${pid:-/var/run/slurmctld.pid}
  echo "the primary is back: this backup saves its state and stops, and hands control back"
  # It fails for a controller that does not answer (the primary, not started yet): its own
  # stop shows in its pid file.
  scontrol shutdown slurmctld
  waited=0
  while [ -e "$pid" ] && [ "$waited" -lt 600 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  [ ! -e "$pid" ] && beat "$state" && [ "$inx" -eq $((me - 1)) ] || return 0
  echo "$at" > "$state/slurmops-stopped"
  echo "its slurmctld has stopped after its last heartbeat: the primary starts now"
}
"#;

/// The readiness of a controller behind one address (`controller.ha.serviceAddress`): Ready
/// while its slurmctld runs (the pid in its pid file is a slurmctld: a pid file left by one
/// that died names PID 1, the container's shell, when it restarts) and either the heartbeat
/// names it
/// (it has control) or no heartbeat is fresh (nobody has control: every running controller is
/// Ready, so a client sent to a standby hears Slurm's "in standby" answer and waits for a
/// controller instead of being refused). A standby while another has control is not Ready: the
/// Service sends nobody to it. A heartbeat that is there but cannot be read is not taken for
/// none: not Ready.
const IN_CONTROL: &str = r#"me=$(sed -n 's/^SlurmctldHost=//p' "$conf" | sed 's/(.*//' | grep -n -x "$(uname -n)" | cut -d: -f1)
[ -n "$me" ] || exit 1
pid=$(setting SlurmctldPidFile)
pid=$(cat "${pid:-/var/run/slurmctld.pid}" 2>/dev/null) || exit 1
[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmctld ] || exit 1
if ! beat "$state"; then
  [ ! -e "$state/heartbeat" ]
  exit
fi
[ "$age" -lt "$stale" ] || exit 0
[ "$inx" -eq $((me - 1)) ]
"#;

/// The exec readiness probe's command of a controller behind one address.
pub fn in_control() -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), format!("{READ}{IN_CONTROL}")]
}

/// The controller container's command (its arguments stay `-D`): slurmctld, through the
/// primary's script when there are backups.
pub fn command(backups: u32, slurmctld: String) -> Vec<String> {
    match backups {
        0 => vec![slurmctld],
        _ => vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("{READ}{PRIMARY}"),
            slurmctld,
        ],
    }
}

/// SCRIPT, the sidecar's loop (`while sleep 5; do`), with the hand-back step at the head of
/// every round.
pub fn sidecar(script: &str) -> String {
    let each = "while sleep 5; do\n";
    format!(
        "{READ}{SIDECAR_STEP}{}",
        script.replacen(each, &format!("{each}  handback\n"), 1)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sidecar_checks_for_a_returning_primary_on_every_round() {
        let s = sidecar(super::super::reconfigure::SIDECAR_SCRIPT);
        assert!(s.contains("while sleep 5; do\n  handback\n"), "{s}");
        assert!(s.starts_with(READ), "{s}");
    }

    #[test]
    fn without_backups_slurmctld_runs_as_it_is() {
        assert_eq!(
            command(0, "/usr/sbin/slurmctld".into()),
            ["/usr/sbin/slurmctld"]
        );
        let c = command(1, "/usr/sbin/slurmctld".into());
        assert!(c[2].ends_with("exec \"$0\" \"$@\"\n") && c[3] == "/usr/sbin/slurmctld");
    }

    /// The primary's script, run by sh on this host as the primary, with a backup's fresh
    /// heartbeat in the state directory and, 1 s in, STOPPED (if any: the beat's time plus it)
    /// as the sidecar's word; a stand-in
    /// `slurmctld` on PATH prints that it started. Its output once it ended or after 3 s, and
    /// whether it asked for control back.
    fn primary_with(stopped: Option<i64>) -> (String, bool) {
        let (dir, host, state) = scratch();
        let conf = dir.path().join("slurm.conf");
        let conf_text = format!(
            "SlurmctldHost={host}\nSlurmctldHost=backup\nStateSaveLocation={}\nSlurmctldTimeout=30\n",
            state.display()
        );
        std::fs::write(&conf, conf_text).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let at = now - 1;
        let mut beat = at.to_be_bytes().to_vec();
        beat.extend(1u64.to_be_bytes());
        std::fs::write(state.join("heartbeat"), beat).unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let ctld = bin.join("slurmctld");
        std::fs::write(&ctld, "#!/bin/sh\necho started \"$@\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ctld, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = dir.path().join("out");
        // The script runs slurmctld by its absolute path: here, the stand-in's.
        let c = command(1, ctld.display().to_string());
        let mut child = std::process::Command::new(&c[0])
            .args(&c[1..])
            .arg("-D")
            .env("SLURM_CONF", &conf)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .stdout(std::fs::File::create(&out).unwrap())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_secs(1));
        if let Some(t) = stopped {
            std::fs::write(state.join("slurmops-stopped"), format!("{}\n", at + t)).unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        let asked = state.join("slurmops-return").exists();
        (std::fs::read_to_string(&out).unwrap(), asked)
    }

    /// A scratch directory with a `state` directory in it, and this host's name (`uname -n`,
    /// as the scripts name the pod they run in).
    fn scratch() -> (tempfile::TempDir, String, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let host = std::process::Command::new("uname")
            .arg("-n")
            .output()
            .unwrap();
        let host = String::from_utf8_lossy(&host.stdout).trim().to_string();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        (dir, host, state)
    }

    /// The readiness probe run by sh on this host as controller ME (0: the primary) of two,
    /// with a heartbeat naming INX written AGO seconds ago (None: no heartbeat) and slurmctld's
    /// pid file holding PID (None: no pid file). Whether it says Ready.
    fn ready(me: usize, beat: Option<(u64, i64)>, pid: Option<u32>) -> bool {
        let beat = beat.map(|(inx, ago)| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            let mut b = (now - ago).to_be_bytes().to_vec();
            b.extend(inx.to_be_bytes());
            b
        });
        ready_with(me, beat, pid)
    }

    /// `ready` with the heartbeat file's bytes as they are (None: no file).
    fn ready_with(me: usize, heartbeat: Option<Vec<u8>>, pid: Option<u32>) -> bool {
        let (dir, host, state) = scratch();
        let pid_file = dir.path().join("slurmctld.pid");
        let mut hosts = ["c-0(c-0.h)".to_string(), "c-1(c-1.h)".to_string()];
        hosts[me] = format!("{host}(x.h)");
        let conf = dir.path().join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "SlurmctldHost={}\nSlurmctldHost={}\nStateSaveLocation={}\nSlurmctldTimeout=30\nSlurmctldPidFile={}\n",
                hosts[0],
                hosts[1],
                state.display(),
                pid_file.display()
            ),
        )
        .unwrap();
        if let Some(b) = heartbeat {
            std::fs::write(state.join("heartbeat"), b).unwrap();
        }
        if let Some(pid) = pid {
            std::fs::write(&pid_file, format!("{pid}\n")).unwrap();
        }
        let c = in_control();
        std::process::Command::new(&c[0])
            .args(&c[1..])
            .env("SLURM_CONF", &conf)
            .status()
            .unwrap()
            .success()
    }

    /// A process named slurmctld (a copy of `sleep`, in a directory kept while it runs),
    /// stopped when dropped.
    struct Slurmctld(std::process::Child, #[allow(dead_code)] tempfile::TempDir);
    impl Slurmctld {
        fn start() -> Slurmctld {
            let dir = tempfile::tempdir().unwrap();
            let bin = dir.path().join("slurmctld");
            std::fs::copy("/bin/sleep", &bin).unwrap();
            let child = std::process::Command::new(&bin).arg("30").spawn().unwrap();
            Slurmctld(child, dir)
        }
        fn pid(&self) -> Option<u32> {
            Some(self.0.id())
        }
    }
    impl Drop for Slurmctld {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn behind_one_address_only_the_controller_the_heartbeat_names_is_ready() {
        let ctld = Slurmctld::start();
        let running = ctld.pid();
        // The primary has control: it is Ready, the backup stands by and is not.
        assert!(ready(0, Some((0, 1)), running));
        assert!(!ready(1, Some((0, 1)), running));
        // After a failover, the other way round.
        assert!(ready(1, Some((1, 2)), running));
        assert!(!ready(0, Some((1, 2)), running));
    }

    #[test]
    fn while_nobody_has_control_every_running_controller_is_ready_and_a_stopped_one_never() {
        let ctld = Slurmctld::start();
        let running = ctld.pid();
        // A heartbeat older than SlurmctldTimeout/4 + 3 s (10 s here), or none yet.
        assert!(ready(1, Some((0, 11)), running));
        assert!(ready(0, Some((0, 11)), running));
        assert!(ready(1, None, running));
        // No slurmctld: no pid file (the primary's script waits for the hand-back), or a pid
        // file left by one that died.
        assert!(!ready(0, Some((0, 1)), None));
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        assert!(!ready(0, Some((0, 1)), Some(dead)));
        assert!(!ready(1, None, Some(dead)));
        // A live process that is not slurmctld (what a stale pid file names in a restarted
        // container: its shell).
        assert!(!ready(1, None, Some(std::process::id())));
        // A heartbeat there but cut short is not taken for none.
        assert!(!ready_with(1, Some(vec![0; 5]), running));
    }

    #[test]
    fn the_primary_starts_as_soon_as_the_backup_s_sidecar_says_it_stopped_after_its_last_beat() {
        let (out, asked) = primary_with(Some(0));
        assert!(out.contains("backup controller 1 has control"), "{out}");
        assert!(!asked, "it still asks for control: {out}");
        assert!(
            out.contains("(its sidecar saw it stop): starting the primary"),
            "{out}"
        );
        assert!(out.ends_with("started -D\n"), "{out}");
    }

    #[test]
    fn the_primary_waits_while_the_backup_beats_and_its_sidecar_has_said_nothing_of_this_beat() {
        for stopped in [None, Some(-7)] {
            let (out, asked) = primary_with(stopped);
            assert!(out.contains("backup controller 1 has control"), "{out}");
            assert!(!out.contains("started"), "{stopped:?}: {out}");
            assert!(asked, "{stopped:?}: it asked for control back");
        }
    }
}
