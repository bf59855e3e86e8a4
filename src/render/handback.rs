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
//!   controller, so a standby backup stops too); the kubelet starts them again, in standby.

/// Reading slurm.conf (`$SLURM_CONF`, else /etc/slurm/slurm.conf) and the heartbeat: two
/// big-endian 64-bit numbers, when it was written and the index of the controller in control
/// (0: the primary). `beat DIR` prints "AGE INDEX", nothing without a heartbeat.
const READ: &str = r#"conf=${SLURM_CONF:-/etc/slurm/slurm.conf}
setting() { sed -n "s/^$1=//p" "$conf" | head -n 1; }
beat() {
  set -- $(od -An -v -tu1 -N16 "$1/heartbeat" 2>/dev/null)
  [ $# -eq 16 ] || return 0
  t=0 i=0 n=0
  for b do
    n=$((n + 1))
    if [ $n -le 8 ]; then t=$((t * 256 + b)); else i=$((i * 256 + b)); fi
  done
  echo "$(($(date +%s) - t)) $i"
}
state=$(setting StateSaveLocation)
timeout=$(setting SlurmctldTimeout)
# slurmctld beats every SlurmctldTimeout/4 s (at most 30): older by 3 s more, it has stopped.
stale=$((${timeout:-120} / 4))
[ "$stale" -le 30 ] || stale=30
stale=$((stale + 3))
"#;

/// The primary's container: run as `/bin/sh -c PRIMARY slurmctld ARGS...`; it ends by
/// `exec slurmctld ARGS`.
const PRIMARY: &str = r#"primary=$(setting SlurmctldHost | sed 's/(.*//')
if [ "$(uname -n)" = "$primary" ]; then
  told=
  while hb=$(beat "$state") && [ -n "$hb" ] && [ "${hb#* }" -gt 0 ] && [ "${hb% *}" -lt "$stale" ]; do
    if [ -z "$told" ]; then
      echo "slurmops: backup controller ${hb#* } has control: its reconfigure sidecar hands control back (it saves its state and stops) before this primary starts"
      told=1
    fi
    date +%s > "$state/slurmops-return"
    sleep 1
  done
  rm -f "$state/slurmops-return"
  [ -z "$told" ] || echo "slurmops: the backup has saved its state and stopped: starting the primary"
fi
exec slurmctld "$@"
"#;

/// The sidecar's step: when the primary asked within the last 10 s and this pod's slurmctld
/// has control (the heartbeat names its index), shut it down.
const SIDECAR_STEP: &str = r#"handback() {
  [ -f "$state/slurmops-return" ] || return 0
  asked=$(cat "$state/slurmops-return" 2>/dev/null)
  case "$asked" in '' | *[!0-9]*) return 0 ;; esac
  [ $(($(date +%s) - asked)) -lt 10 ] || return 0
  me=$(sed -n 's/^SlurmctldHost=//p' "$conf" | sed 's/(.*//' | grep -n -x "$(uname -n)" | cut -d: -f1)
  hb=$(beat "$state")
  [ -n "$me" ] && [ -n "$hb" ] && [ "${hb#* }" -eq $((me - 1)) ] && [ "$me" -gt 1 ] || return 0
  [ "${hb% *}" -lt "$stale" ] || return 0
  echo "the primary is back: this backup saves its state and stops, and hands control back"
  scontrol shutdown slurmctld
}
"#;

/// The controller container's command (its arguments stay `-D`): slurmctld, through the
/// primary's script when there are backups.
pub fn command(backups: u32) -> Vec<String> {
    match backups {
        0 => vec!["slurmctld".into()],
        _ => vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("{READ}{PRIMARY}"),
            "slurmctld".into(),
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
        assert_eq!(command(0), ["slurmctld"]);
        assert!(command(1)[2].ends_with("exec slurmctld \"$@\"\n"));
    }
}
