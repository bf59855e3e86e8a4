#!/usr/bin/env bash
# Runs real Slurm 24.11 daemons from the cached trixie chroot on 127.0.0.1, for tests.
#   slurm.sh start-ctld CONF_DIR   copy CONF_DIR/* to the chroot's /etc/slurm, start slurmctld
#   slurm.sh start-slurmd NAME PORT CONF   start a dynamic slurmd (-Z) named NAME
#   slurm.sh stop                  stop every daemon started here, by PID, and unmount
#   slurm.sh exec CMD...           run a Slurm client command inside the chroot
# Daemon output goes to $RUN/*.out; on failure the tail of the relevant log is printed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
R=$("$HERE/slurm-chroot.sh")
RUN=${SLURMOPS_BED_RUN:-/tmp/slurmops-bed}/slurm
mkdir -p "$RUN"

mounts() {
  mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
  mountpoint -q "$R/sys" || mount -t sysfs sysfs "$R/sys"
  mountpoint -q "$R/dev" || mount --bind /dev "$R/dev"
  mountpoint -q "$R/dev/pts" || mount --bind /dev/pts "$R/dev/pts"
  mountpoint -q "$R/run" || mount -t tmpfs tmpfs "$R/run"
}

stop() {
  for f in "$RUN"/*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    if kill "$p" 2>/dev/null; then
      for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$p" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  # Job processes can outlive slurmd; they run inside the chroot: end them by PID.
  for p in $(ls /proc | grep -E '^[0-9]+$'); do
    [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$R" ] && kill -9 "$p" 2>/dev/null || true
  done
  sleep 0.2
  for m in run dev/pts dev sys proc; do mountpoint -q "$R/$m" && umount -R "$R/$m" || true; done
}

case "${1:-}" in
  start-ctld)
    conf=$2
    stop >/dev/null 2>&1 || true
    mounts
    rm -rf "$R/etc/slurm" "$R/var/spool/slurmctld" "$R/var/spool/slurmd"
    mkdir -p "$R/etc/slurm"
    cp "$conf"/* "$R/etc/slurm/"
    printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$(hostname)" > "$R/etc/hosts"
    chroot "$R" bash -ec '
      mkdir -p /run/slurmctld /run/slurmd /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
      chown -R slurm:slurm /run/slurmctld /var/spool/slurmctld /var/log/slurm
      dd if=/dev/urandom of=/etc/slurm/slurm.key bs=1024 count=1 status=none
      dd if=/dev/urandom of=/etc/slurm/jwt_hs256.key bs=32 count=1 status=none
      chown slurm:slurm /etc/slurm/slurm.key /etc/slurm/jwt_hs256.key
      chmod 600 /etc/slurm/slurm.key /etc/slurm/jwt_hs256.key
      chmod 755 /etc/slurm/*.sh 2>/dev/null || true
      # Stand-ins for GPU device files (this host has none): character devices like /dev/null.
      mkdir -p /run/fake-gpu; for i in $(seq 0 15); do mknod /run/fake-gpu/nvidia$i c 1 3; done'
    setsid chroot "$R" /usr/sbin/slurmctld -D > "$RUN/slurmctld.out" 2>&1 < /dev/null &
    echo $! > "$RUN/slurmctld.pid"
    for _ in $(seq 1 100); do
      chroot "$R" scontrol ping 2>/dev/null | grep -q UP && exit 0
      kill -0 "$(cat "$RUN/slurmctld.pid")" 2>/dev/null || break
      sleep 0.2
    done
    echo "slurmctld did not come up with this configuration; its log:" >&2
    tail -30 "$RUN/slurmctld.out" >&2
    exit 1
    ;;
  start-slurmd)
    name=$2 port=$3 conf=$4
    mkdir -p "$R/var/spool/slurmd/$name"
    setsid chroot "$R" /usr/sbin/slurmd -D -N "$name" -Z --conf-server localhost:6817 --conf "$conf Port=$port NodeHostname=localhost NodeAddr=127.0.0.1" \
      > "$RUN/slurmd-$name.out" 2>&1 < /dev/null &
    echo $! > "$RUN/slurmd-$name.pid"
    ;;
  log)
    cat "$RUN/$2.out"
    ;;
  exec)
    shift
    chroot "$R" "$@"
    ;;
  stop)
    stop
    ;;
  *)
    echo "usage: slurm.sh start-ctld DIR | start-slurmd NAME PORT CONF | exec CMD... | log NAME | stop" >&2
    exit 2
    ;;
esac
