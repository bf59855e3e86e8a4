//! Which configuration changes slurmctld takes in place and which need it restarted. Since Slurm
//! 23.11, `scontrol reconfigure` re-executes the daemons on the new files (running jobs and
//! slurmctld's state stay), and "will not be able to change the daemons' listening TCP port
//! settings or authentication mechanism" (scontrol(1), 24.11 and 26.05). So only the slurm.conf
//! settings below restart slurmctld (they are hashed into its pod template); every other change
//! — partitions, scheduling parameters, plugins, gres.conf, topology, the extra files — reaches
//! slurmctld through the `reconfigure` sidecar of its pod, and the workers through that
//! reconfigure (configless).

use std::collections::BTreeMap;

/// slurm.conf settings a reconfigure cannot change, by class.
pub const RESTART: &[(&str, &str)] = &[
    // Where daemons listen and are reached: their sockets are bound at start.
    ("SlurmctldHost", "listening address"),
    ("SlurmctldAddr", "listening address"),
    ("SlurmctldPort", "listening port"),
    ("SlurmdPort", "listening port"),
    // How daemons and clients authenticate each other: fixed at start.
    ("AuthType", "authentication"),
    ("AuthAltTypes", "authentication"),
    ("AuthAltParameters", "authentication"),
    ("AuthInfo", "authentication"),
    ("CredType", "authentication"),
    ("TLSType", "authentication"),
    // What and where slurmctld's saved state is: read once, at start.
    ("ClusterName", "cluster identity"),
    ("StateSaveLocation", "state location"),
    ("SlurmUser", "daemon user"),
];

/// The restart settings of slurm.conf CONF: key → its values in order (SlurmctldHost repeats).
pub fn restart_settings(conf: &str) -> BTreeMap<&'static str, Vec<String>> {
    let mut out: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for line in conf.lines().map(str::trim) {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if let Some((k, _)) = RESTART
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key.trim()))
        {
            out.entry(k).or_default().push(value.trim().to_string());
        }
    }
    out
}

/// A digest of the restart settings: the controller's and slurmrestd's pod templates carry it.
pub fn restart_digest(conf: &str) -> String {
    super::pod::checksum(&format!("{:?}", restart_settings(conf)))
}

/// The restart settings that differ between slurm.conf OLD and NEW, with their class.
pub fn restart_changes(old: &str, new: &str) -> Vec<String> {
    let (a, b) = (restart_settings(old), restart_settings(new));
    RESTART
        .iter()
        .filter(|(k, _)| a.get(k) != b.get(k))
        .map(|(k, class)| format!("{k} ({class})"))
        .collect()
}

/// The `reconfigure` sidecar's script: once the kubelet has updated the mounted files (the
/// `..data` link of a projected volume moves on every update), ask slurmctld to re-read them;
/// retried every 5 s until slurmctld accepts. It runs beside slurmctld, as SlurmUser. The shell
/// is its container's PID 1, which the kernel spares every signal it has no handler for: without
/// the trap the kubelet's SIGTERM is lost and the pod's deletion waits out its grace period (30 s,
/// then SIGKILL; seen on the real kubelet). Each round touches [`HEARTBEAT`], which its probes
/// read: a loop stuck (a `scontrol` that never returns) restarts the container.
pub const SIDECAR_SCRIPT: &str = r#"trap 'exit 0' TERM INT
seen=$(readlink /etc/slurm/..data)
while sleep 5; do
  : > /run/slurmctld/reconfigure.alive
  now=$(readlink /etc/slurm/..data)
  [ "$now" = "$seen" ] && continue
  if scontrol reconfigure; then
    echo "reconfigured: /etc/slurm is now $now"
    seen=$now
  fi
done"#;

/// The file each round of the sidecar's loop touches, in the pod's shared /run/slurmctld.
pub const HEARTBEAT: &str = "/run/slurmctld/reconfigure.alive";

/// The sidecar's probe: its loop went round within the last 60 s (a round is 5 s, plus what its
/// `scontrol` calls take: each gives up after slurm.conf's MessageTimeout).
pub fn sidecar_probe(initial_delay: i32) -> k8s_openapi::api::core::v1::Probe {
    k8s_openapi::api::core::v1::Probe {
        exec: Some(k8s_openapi::api::core::v1::ExecAction {
            command: Some(vec![
                "/bin/sh".into(),
                "-c".into(),
                format!("test $(( $(date +%s) - $(stat -c %Y {HEARTBEAT}) )) -lt 60"),
            ]),
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(20),
        timeout_seconds: Some(5),
        failure_threshold: Some(3),
        ..Default::default()
    }
}

/// Where the `reconfigure` sidecar finds the maintenance reservations it makes.
pub const MAINTENANCE_DIR: &str = "/etc/slurmops/maintenance";

/// The sidecar's script when it also makes maintenance reservations (Slurm 24.11, whose
/// slurmrestd cannot): each file `slurmops-maint-*` of MAINTENANCE_DIR (a key of the ConfigMap
/// the controller writes: `START END NODES`, UNIX seconds and a comma list) is made a
/// `MAINT,IGNORE_JOBS` reservation unless Slurm has it or it is over; a `slurmops-maint-*`
/// reservation whose file is gone is deleted. Checked every 5 s; times go to scontrol in UTC.
pub fn reserving_script() -> String {
    let reserve = r#"at() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S; }
reserve() {
  [ -d "$M" ] || return 0
  t=$(date +%s)
  for f in "$M"/slurmops-maint-*; do
    [ -f "$f" ] || continue
    r=${f##*/}
    read -r start end nodes rest < "$f"
    case "$start" in '' | *[!0-9]*) continue ;; esac
    case "$end" in '' | *[!0-9]*) continue ;; esac
    case "$nodes" in ''|*[!A-Za-z0-9.,_-]*) continue ;; esac
    [ "$end" -gt "$t" ] || continue
    scontrol show reservation "$r" > /dev/null 2>&1 && continue
    from=now
    [ "$start" -gt "$t" ] && from=$(at "$start")
    TZ=UTC scontrol create reservation ReservationName="$r" StartTime="$from" \
      EndTime="$(at "$end")" Nodes="$nodes" Flags=MAINT,IGNORE_JOBS Users=root &&
      echo "reserved $r on $nodes from $from to $(at "$end") UTC"
  done
  for r in $(scontrol show reservation --oneliner 2> /dev/null |
    sed -n 's/^ReservationName=\(slurmops-maint-[A-Za-z0-9._-]*\) .*/\1/p'); do
    [ -f "$M/$r" ] && continue
    scontrol delete ReservationName="$r" && echo "released $r"
  done
}
"#;
    let each = "while sleep 5; do\n";
    format!(
        "M={MAINTENANCE_DIR}\n{reserve}{}",
        SIDECAR_SCRIPT.replacen(each, &format!("{each}  reserve\n"), 1)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserving_sidecar_checks_its_reservations_on_every_round() {
        let s = reserving_script();
        assert!(s.contains("while sleep 5; do\n  reserve\n"), "{s}");
        assert!(s.ends_with(SIDECAR_SCRIPT.lines().last().unwrap()), "{s}");
    }

    #[test]
    fn only_ports_auth_and_state_settings_restart() {
        let old = "ClusterName=c\nSlurmctldHost=c-0\nSlurmctldPort=6817\nPartitionName=p MaxTime=1:00:00\nMaxJobCount=10\n";
        let reconf = old
            .replace("MaxTime=1:00:00", "MaxTime=2:00:00")
            .replace("MaxJobCount=10", "MaxJobCount=20");
        assert!(restart_changes(old, &reconf).is_empty());
        assert_eq!(restart_digest(old), restart_digest(&reconf));
        let backup = format!("{old}SlurmctldHost=c-1\n");
        assert_eq!(
            restart_changes(old, &backup),
            ["SlurmctldHost (listening address)"]
        );
        let port = old.replace("SlurmctldPort=6817", "slurmctldport=7817");
        assert_eq!(
            restart_changes(old, &port),
            ["SlurmctldPort (listening port)"]
        );
        assert_ne!(restart_digest(old), restart_digest(&port));
    }
}
