#!/usr/bin/env bash
# Runs real Slurm daemons on 127.0.0.1, for tests, from the cached chroot of a release
# (slurm-chroot.sh: 24.11 from trixie, 25.11 built from source, 26.05 from forky).
# Several independent Slurm instances can run at once; each has its own release, config dir
# (/etc/slurm-INST in its chroot), spool dirs and ports, chosen by the caller's overlay.
#   slurm.sh start-ctld INST CONF_DIR       copy CONF_DIR/* to /etc/slurm-INST, start slurmctld -f
#                                           (and slurmdbd first when CONF_DIR holds slurmdbd.conf);
#                                           the release is $SLURM_RELEASE (default 24.11); every
#                                           later command on INST uses the same release. With
#                                           SLURM_KEEP_STATE=1 only slurmctld restarts, its state
#                                           kept (carried over from the earlier release's chroot
#                                           on an upgrade); the instance's slurmd keep running
#                                           With several SlurmctldHost NAME(ADDR) lines, one
#                                           slurmctld per line, each with hostname NAME listening
#                                           on ADDR, sharing the state directory, and a sackd for
#                                           the instance's clients; waits until all answer
#   slurm.sh stop-ctld INST [NAME]          stop INST's slurmctld (or controller NAME of several) by
#                                           PID: SIGTERM, it saves its state and exits
#   slurm.sh stop-dbd INST                  stop INST's slurmdbd (an outage: slurmctld keeps running)
#   slurm.sh start-dbd INST                 start it again, as it was configured
#   slurm.sh crash-ctld INST NAME           kill controller NAME of several (SIGKILL)
#   slurm.sh pause-ctld INST NAME           hang controller NAME of several (SIGSTOP)
#   slurm.sh resume-ctld INST NAME          let it go on (SIGCONT)
#   slurm.sh start-ctld-pod INST NAME       start controller NAME of several unless it runs (its pod
#                                           started), its state kept; wait until all answer
#   slurm.sh start-restd INST PORT [NAME [ADDR]]
#                                           start slurmrestd (JWT auth; openapi/slurmctld and, when
#                                           INST runs slurmdbd, openapi/slurmdbd) on ADDR:PORT
#                                           (default 127.0.0.1); NAME (default slurmrestd) lets a
#                                           test run its own (a restapi pod's, at its pod's address)
#   slurm.sh stop-restd INST NAME           stop that slurmrestd by PID
#   slurm.sh token INST [USER]              print a JWT for USER (default root), 1 day
#   slurm.sh start-slurmd INST NAME PORT CONF [ARGS...]
#                                           start a dynamic slurmd (-Z) whose hostname (own UTS
#                                           namespace) and Slurm node name is NAME; from the
#                                           chroot of $SLURM_RELEASE when set (a worker may run
#                                           an older release than slurmctld), as start-restd
#   slurm.sh start-nodes INST HOSTS NAME... start the slurmd of INST's static records NAME...,
#                                           each with hostname NAME, resolving names through the
#                                           hosts file HOSTS (bound at /etc/hosts), so that with
#                                           NoInAddrAny it listens on its record's own address
#   slurm.sh stop-nodes INST NAME...        stop those slurmd by PID, all at once
#   slurm.sh stop-slurmd INST NAME          stop that slurmd by PID
#   slurm.sh refresh-conf INST CONF_DIR     copy CONF_DIR/* over INST's config, then move its
#                                           `..data` link (a kubelet's projected-volume update)
#   slurm.sh start-sidecar INST NAME CMD... run a controller pod's sidecar CMD with INST's config
#                                           directory at /etc/slurm (SLURM_CONF set) and INST's
#                                           maintenance directory at /etc/slurmops/maintenance, by PID
#   slurm.sh maintenance-dir INST           print the host path of INST's maintenance directory
#                                           (a kubelet's copy of the maintenance ConfigMap)
#   slurm.sh stop-sidecar INST NAME         stop it
#   slurm.sh start-ctld-sidecar INST NAME   the reconfigure sidecar of controller NAME (of several),
#                                           its script INST's file reconfigure.command, by PID
#   slurm.sh slurmd-alive INST NAME         exit 0 while that slurmd runs
#   slurm.sh run-as-node INST NAME CMD...   run CMD in the chroot with hostname NAME (a pod hook)
#   slurm.sh exec INST CMD...               run a Slurm client command for INST inside the chroot
#   slurm.sh start-mariadb INST PORT [CNF]  a MariaDB (Debian's mariadb-server, from the 24.11
#                                           chroot) on 127.0.0.1:PORT, its own data dir, by PID;
#                                           CNF: a my.cnf to run it with (the bed's: INST mariadb)
#   slurm.sh sql INST                       run the SQL on stdin as that MariaDB's root (socket)
#   slurm.sh start-slapd INST PORT LDIF     an LDAP directory (Debian's slapd, from the 24.11 chroot)
#                                           on 127.0.0.1:PORT, suffix dc=slurmops,dc=test, its own
#                                           database loaded from LDIF, by PID
#   slurm.sh start-login INST NAME PORT FILES SACKD_ARGS...
#                                           a login pod's container as a login image runs it: sssd
#                                           (when FILES holds etc/sssd/sssd.conf), sackd (configless:
#                                           its auth socket and config in the pod's /run/slurm) and
#                                           sshd on 127.0.0.1:PORT, in one namespace whose hostname
#                                           is NAME; FILES mirrors the pod's mounted Secrets (e.g.
#                                           etc/sssd/, root/.ssh/), bound at those paths
#   slurm.sh stop-login INST NAME           stop that pod's processes
#   slurm.sh log INST NAME                  print a daemon's output (slurmctld, slurmrestd, slurmd-NAME)
#   slurm.sh stop INST                      stop every daemon of INST by PID
#   slurm.sh down                           stop everything started from the chroot, unmount
# Daemon output goes to $RUN/INST/*.out; on failure the tail of the relevant log is printed.
set -euo pipefail
# Every Slurm process gets a private /run/slurm (an empty tmpfs) and its instance's own
# /run/slurmctld (bound from /run/sack-INST), as each pod has its own /run. Clients reach
# slurmctld's auth socket (sackd) there; shared dirs would let instances overwrite each other's
# socket, and a client finding a stale one fails to authenticate. A node's processes (its slurmd,
# its jobs, its pod hooks) also get their own /var/spool/slurmd (bound from
# /var/spool/slurm-INST/d/NAME), as each worker pod has: slurm.conf's SlurmdSpoolDir stays as
# slurmops renders it, and configless slurmd caches its configuration there.
# A controller of several (SlurmctldHost NAME(ADDR) lines, high availability) gets its own
# /run/slurmctld (BED_CTLD_RUN) and the instance's hosts file (BED_HOSTS: NAME → ADDR, as a pod's
# name resolves), so that it listens on its own address (the overlay's NoCtldInAddrAny) and knows
# itself by its hostname; the instance's clients then authenticate through a sackd of their own
# (BED_RUN_SLURM: its /run/slurm is the clients' /run/slurmctld), as login pods do.
#   slurm.sh _private ROOT HOSTNAME|- INST CMD...   (internal) exec CMD so isolated; keeps the PID
SELF=$(readlink -f "$0")
if [ "${1:-}" = _private ]; then
  exec unshare --mount --uts sh -c '
    R=$1 host=$2 inst=$3; shift 3
    [ "$host" = - ] || hostname "$host"
    { [ -z "${BED_HOSTS:-}" ] || mount --bind "$BED_HOSTS" "$R/etc/hosts"; } &&
    mkdir -p "$R/run/sack-$inst" &&
      if [ -n "${BED_RUN_SLURM:-}" ]; then mount --bind "$BED_RUN_SLURM" "$R/run/slurm"
      else mount -t tmpfs -o mode=0755 tmpfs "$R/run/slurm"; fi &&
      { [ "$host" = - ] || { mkdir -p "$R/var/spool/slurm-$inst/d/$host" "$R/var/spool/slurmd" &&
        mount --bind "$R/var/spool/slurm-$inst/d/$host" "$R/var/spool/slurmd"; }; } &&
      mount --bind "${BED_CTLD_RUN:-$R/run/sack-$inst}" "$R/run/slurmctld" && exec "$@"' \
    sh "$2" "$3" "$4" "${@:5}"
fi
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
BASE=${SLURMOPS_BED_RUN:-/tmp/slurmops-bed}/slurm
cmd=${1:-}; shift || true
inst=${1:-}
if [ "$cmd" != down ]; then
  [[ "$inst" =~ ^[a-z0-9-]+$ ]] || { echo "slurm.sh $cmd: instance name required ([a-z0-9-]+)" >&2; exit 2; }
  shift
fi
RUN=$BASE/$inst
ETC=/etc/slurm-$inst
mkdir -p "$RUN"
PREVIOUS=$(cat "$RUN/release" 2>/dev/null || echo 24.11)
if [ "$cmd" = start-ctld ]; then
  RELEASE=${SLURM_RELEASE:-24.11}
  echo "$RELEASE" > "$RUN/release"
elif [ "$cmd" = start-slurmd ] || [ "$cmd" = start-restd ]; then
  RELEASE=${SLURM_RELEASE:-$PREVIOUS}
elif [ "$cmd" != down ]; then
  RELEASE=$PREVIOUS
fi
[ "$cmd" = down ] || R=$("$HERE/slurm-chroot.sh" "$RELEASE")

mounts() {
  # Several test processes start instances at once: one of them mounts, the others wait.
  exec 8> "$BASE/mounts.lock"
  flock 8
  mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
  mountpoint -q "$R/sys" || mount -t sysfs sysfs "$R/sys"
  # The host's cgroup hierarchies, for the slurmd that run with the rendered cgroup.conf (the
  # bed's shared instances run with CgroupPlugin=disabled and never touch them).
  mountpoint -q "$R/sys/fs/cgroup" || mount --rbind /sys/fs/cgroup "$R/sys/fs/cgroup"
  mountpoint -q "$R/dev" || mount --bind /dev "$R/dev"
  mountpoint -q "$R/dev/pts" || mount --bind /dev/pts "$R/dev/pts"
  if ! mountpoint -q "$R/run"; then
    mount -t tmpfs tmpfs "$R/run"
    # Stand-ins for GPU device files (this host has none): character devices like /dev/null.
    mkdir -p "$R/run/fake-gpu" "$R/run/slurm" "$R/run/slurmctld"
    for i in $(seq 0 15); do mknod "$R/run/fake-gpu/nvidia$i" c 1 3; done
  fi
  # GPU device files where the rendered gres.conf points (its File= form), as the NVIDIA driver
  # makes them: character devices major 195, minor N (nvidiactl 255), on the host's /dev that
  # every chroot binds. No driver answers them: open(2) fails with ENXIO where a job's device
  # cgroup allows one, EPERM where it denies it.
  for i in $(seq 0 7); do [ -e "/dev/nvidia$i" ] || mknod -m 666 "/dev/nvidia$i" c 195 "$i"; done
  [ -e /dev/nvidiactl ] || mknod -m 666 /dev/nvidiactl c 195 255
  # One auth key and one JWT key for every instance of every release (slurmd reads
  # /etc/slurm/slurm.key before it has fetched its instance's config; a 26.05 slurmd joins a 24.11
  # slurmctld in an upgrade).
  if [ ! -s "$BASE/slurm.key" ]; then
    dd if=/dev/urandom of="$BASE/slurm.key.tmp" bs=1024 count=1 status=none
    dd if=/dev/urandom of="$BASE/jwt_hs256.key.tmp" bs=32 count=1 status=none
    mv "$BASE/jwt_hs256.key.tmp" "$BASE/jwt_hs256.key"; mv "$BASE/slurm.key.tmp" "$BASE/slurm.key"
  fi
  if ! cmp -s "$BASE/slurm.key" "$R/etc/slurm/slurm.key"; then
    mkdir -p "$R/etc/slurm"
    cp "$BASE/slurm.key" "$BASE/jwt_hs256.key" "$R/etc/slurm/"
    chroot "$R" bash -c 'chown slurm:slurm /etc/slurm/*.key; chmod 600 /etc/slurm/*.key'
  fi
  printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$(hostname)" | put "$R/etc/hosts"
  exec 8>&-
}

# The start time of process P (clock ticks after boot); nothing once P is gone.
started() { [ -r "/proc/$1/stat" ] && sed 's/^.*) //' "/proc/$1/stat" | cut -d' ' -f20; }
# The PID in pid file F while that process runs. A PID alone may name another process by then:
# PIDs and thread ids share one space, which wraps at /proc/sys/kernel/pid_max (32,768 here),
# within minutes under the scale bench's churn, and a reused id may be a thread of slurmctld (a
# signal to a thread's id is the whole process's: the suspect for the SIGTERM the scale
# instance's slurmctld got in the 10,000-worker bench). So each daemon's start time is kept
# beside its PID (F.start, from `note_start`) and no signal goes to a PID that changed hands.
pid_of() {
  local f=$1 p
  p=$(cat "$f" 2>/dev/null) || return 1
  [ -n "$p" ] || return 1
  # An empty F.start: the process had already ended when it was written.
  if [ -f "$f.start" ]; then [ -s "$f.start" ] && [ "$(started "$p")" = "$(cat "$f.start")" ] || return 1
  else kill -0 "$p" 2>/dev/null || return 1; fi
  echo "$p"
}
# After `echo $! > F`: keeps the start time of the process F names.
note_start() { started "$(cat "$1")" > "$1.start" || true; }

# kill_pidfile FILE [TENTHS]: SIGTERM, SIGKILL after TENTHS tenths of a second (5 s).
kill_pidfile() {
  local f=$1 p
  [ -f "$f" ] || return 0
  if p=$(pid_of "$f") && kill "$p" 2>/dev/null; then
    for _ in $(seq 1 "${2:-50}"); do pid_of "$f" >/dev/null || break; sleep 0.1; done
    if p=$(pid_of "$f"); then kill -9 "$p" 2>/dev/null || true; fi
  fi
  rm -f "$f" "$f.start"
}

alive() { [ -f "$1" ] && pid_of "$1" >/dev/null; }

# Stops the chroot's sssd (a login pod's: one at a time per chroot, as its sockets, caches and pid
# file are the chroot's), whose processes each lead a process group of their own.
stop_sssd() {
  local p
  for p in $(ls /proc | grep -E '^[0-9]+$'); do
    [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$R" ] || continue
    case $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null) in
      sssd\ *|/usr/sbin/sssd\ *|/usr/libexec/sssd/*) kill -9 "$p" 2>/dev/null || true ;;
    esac
  done
  rm -f "$R/run/sssd.pid"
  # Its caches go with the pod (libnss_sss reads the memory cache without asking sssd).
  rm -rf "${R:?}"/var/lib/sss/mc/* "${R:?}"/var/lib/sss/db/*
}

# Stops the process group a pid file names (a pod's processes, started by setsid).
stop_group() {
  local f=$1 p
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  kill -- "-$p" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -9 -- "-$p" 2>/dev/null || true
  rm -f "$f"
}

in_chroot() { private - chroot "$R" env SLURM_CONF="$ETC/slurm.conf" "$@"; }
# The instance's config directory as a kubelet leaves a projected volume: `..data` names the
# current generation and moves on every update.
mark_conf() { local gen="..$(date +%s%N)"; mkdir -p "$R$ETC/$gen"; ln -sfn "$gen" "$R$ETC/..data"; }
private() { local host=$1; shift; "$SELF" _private "$R" "$host" "$inst" "$@"; }

# The controllers slurm.conf names as NAME(ADDR), one "NAME ADDR" line each, primary first.
controllers() { sed -n 's/^SlurmctldHost=\([^(]*\)(\([^)]*\)).*/\1 \2/p' "$R$ETC/slurm.conf"; }
# Starts controller NAME of several, as its pod: hostname NAME, its own /run/slurmctld.
ctld_host() {
  local name=$1
  mkdir -p "$R/run/sack-$inst-$name"
  chroot "$R" chown slurm:slurm "/run/sack-$inst-$name"
  # The controller container's command as rendered, when the instance's files hold it (the
  # script that runs before slurmctld: the primary's safe return, render/handback.rs).
  local run=(/usr/sbin/slurmctld)
  [ ! -f "$R$ETC/slurmctld.command" ] || run=(/bin/sh -c "$(cat "$R$ETC/slurmctld.command")" slurmctld)
  BED_HOSTS="$RUN/hosts" BED_CTLD_RUN="$R/run/sack-$inst-$name" setsid "$SELF" _private "$R" "$name" "$inst" \
    chroot "$R" env PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF="$ETC/slurm.conf" "${run[@]}" -D -f "$ETC/slurm.conf" \
    > "$RUN/slurmctld-$name.out" 2>&1 < /dev/null &
  echo $! > "$RUN/slurmctld-$name.pid"
  note_start "$RUN/slurmctld-$name.pid"
}
# Waits until N controllers answer a ping; else prints their logs and fails.
wait_ctld() {
  for _ in $(seq 1 100); do
    [ "$(in_chroot scontrol ping 2>/dev/null | grep -c ' is UP')" -ge "$1" ] && return 0
    sleep 0.2
  done
  echo "slurmctld ($inst) did not come up with this configuration; scontrol ping and the logs:" >&2
  in_chroot scontrol ping >&2 || true
  for f in "$RUN"/slurmctld*.out "$RUN"/sackd.out; do [ -f "$f" ] && { echo "== $f" >&2; tail -20 "$f" >&2; }; done
  exit 1
}

# Starts the instance's slurmdbd (its release's own), waits until it listens.
start_dbd() {
  # The release's own slurmdbd. Its database must exist already, as a DBA creates it: on
  # MariaDB 11.8 a slurmdbd that creates it stops at its next query (client error 5027).
  pid_dir=$(sed -n 's/^PidFile=//p' "$R$ETC/slurmdbd.conf" | head -1)
  [ -z "$pid_dir" ] || mkdir -p "$R$(dirname "$pid_dir")"
  chroot "$R" bash -ec "chown -R slurm:slurm $ETC ${pid_dir:+$(dirname "$pid_dir")}; chmod 600 $ETC/slurmdbd.conf"
  dbd_port=$(sed -n 's/^DbdPort=//p' "$R$ETC/slurmdbd.conf" | head -1)
  setsid "$SELF" _private "$R" - "$inst" chroot "$R" env SLURM_CONF="$ETC/slurm.conf" /usr/sbin/slurmdbd -D \
    >> "$RUN/slurmdbd.out" 2>&1 < /dev/null &
  echo $! > "$RUN/slurmdbd.pid"
  note_start "$RUN/slurmdbd.pid"
  for _ in $(seq 1 150); do
    (exec 3<>"/dev/tcp/127.0.0.1/$dbd_port") 2>/dev/null && break
    alive "$RUN/slurmdbd.pid" || break
    sleep 0.2
  done
  (exec 3<>"/dev/tcp/127.0.0.1/$dbd_port") 2>/dev/null || {
    echo "slurmdbd ($inst) did not listen on 127.0.0.1:$dbd_port; its log:" >&2
    tail -30 "$RUN/slurmdbd.out" >&2; exit 1; }
}

case "$cmd" in
  start-ctld)
    conf=$1
    keep=${SLURM_KEEP_STATE:-}
    if [ -n "$keep" ]; then
      kill_pidfile "$RUN/slurmctld.pid"
    else
      for f in "$RUN"/*.pid; do [ -f "$f" ] && kill_pidfile "$f"; done
    fi
    mounts
    rm -rf "${R:?}$ETC"
    mkdir -p "$R$ETC"
    cp "$conf"/* "$R$ETC/"
    cp "$R/etc/slurm/slurm.key" "$R/etc/slurm/jwt_hs256.key" "$R$ETC/"
    mark_conf
    rm -rf "$R/run/sack-$inst"; mkdir -p "$R/run/sack-$inst"
    # The instance's own state, spool and pid directories, as its slurm.conf names them.
    # (SlurmdSpoolDir is per node: bound at start-slurmd.)
    for k in StateSaveLocation SlurmctldPidFile SlurmdPidFile SlurmctldLogFile; do
      v=$(sed -n "s/^$k=//p" "$R$ETC/slurm.conf" | head -1)
      [ -n "$v" ] || continue
      case $k in *PidFile|*LogFile) v=$(dirname "$v") ;; esac
      v=${v%%/%n*}
      # A pod's own /run/slurmctld (several controllers): private to each, made by ctld_host.
      [ "$v" != /run/slurmctld ] || continue
      if [ -z "$keep" ]; then
        rm -rf "${R:?}$v"
      elif [ "$k" = StateSaveLocation ] && [ "$PREVIOUS" != "$RELEASE" ]; then
        # An upgrade: the new release's slurmctld reads the old one's state.
        old=$("$HERE/slurm-chroot.sh" "$PREVIOUS")
        rm -rf "${R:?}$v"; mkdir -p "$(dirname "$R$v")"
        cp -a "$old$v" "$R$v"
      fi
      mkdir -p "$R$v"
    done
    chroot "$R" bash -ec "chown -R slurm:slurm $ETC /var/spool /run/sack-$inst /run/slurm-* /var/log/slurm 2>/dev/null || true
      chmod 600 $ETC/*.key; chmod 755 $ETC/*.sh 2>/dev/null || true"
    if [ -f "$R$ETC/slurmdbd.conf" ] && ! alive "$RUN/slurmdbd.pid"; then start_dbd; fi
    if [ "$(controllers | wc -l)" -gt 1 ]; then
      # High availability: a sackd for the clients, then every controller, each as its pod.
      { echo "127.0.0.1 localhost"; controllers | awk '{print $2, $1}'; } > "$RUN/hosts"
      BED_RUN_SLURM="$R/run/sack-$inst" setsid "$SELF" _private "$R" - "$inst" \
        chroot "$R" env SLURM_CONF="$ETC/slurm.conf" /usr/sbin/sackd -D \
        > "$RUN/sackd.out" 2>&1 < /dev/null &
      echo $! > "$RUN/sackd.pid"
      note_start "$RUN/sackd.pid"
      for name in $(controllers | awk '{print $1}'); do ctld_host "$name"; done
      wait_ctld "$(controllers | wc -l)"
      exit
    fi
    setsid "$SELF" _private "$R" - "$inst" chroot "$R" /usr/sbin/slurmctld -D -f "$ETC/slurm.conf" \
      > "$RUN/slurmctld.out" 2>&1 < /dev/null &
    echo $! > "$RUN/slurmctld.pid"
    note_start "$RUN/slurmctld.pid"
    for _ in $(seq 1 100); do
      in_chroot scontrol ping 2>/dev/null | grep -q UP && exit 0
      alive "$RUN/slurmctld.pid" || break
      sleep 0.2
    done
    echo "slurmctld ($inst) did not come up with this configuration; its log:" >&2
    tail -30 "$RUN/slurmctld.out" >&2
    exit 1
    ;;
  start-restd)
    port=$1 rname=${2:-slurmrestd} addr=${3:-127.0.0.1}
    kill_pidfile "$RUN/$rname.pid"
    # A pod's own address (the test kubelet's, in 198.18.0.0/15): on the loopback interface.
    case $addr in 127.*) ;; *) ip addr show dev lo | grep -q " $addr/" || ip addr add "$addr/32" dev lo ;; esac
    plugins=openapi/slurmctld
    [ -f "$R$ETC/slurmdbd.conf" ] && plugins=openapi/slurmctld,openapi/slurmdbd
    setsid "$SELF" _private "$R" - "$inst" chroot --userspec=restd:restd "$R" env SLURM_CONF="$ETC/slurm.conf" SLURM_JWT=daemon \
      /usr/sbin/slurmrestd -a rest_auth/jwt -s "$plugins" "$addr:$port" \
      > "$RUN/$rname.out" 2>&1 < /dev/null &
    echo $! > "$RUN/$rname.pid"
    for _ in $(seq 1 100); do
      (exec 3<>"/dev/tcp/$addr/$port") 2>/dev/null && exit 0
      alive "$RUN/$rname.pid" || break
      sleep 0.1
    done
    echo "slurmrestd ($inst) did not listen on $addr:$port; its log:" >&2
    tail -30 "$RUN/$rname.out" >&2
    exit 1
    ;;
  stop-restd)
    kill_pidfile "$RUN/$1.pid"
    ;;
  stop-ctld)
    # A controller pod's grace period: slurmctld saves its state on the way out.
    kill_pidfile "$RUN/slurmctld${1:+-$1}.pid" 300
    ;;
  stop-dbd)
    kill_pidfile "$RUN/slurmdbd.pid"
    ;;
  start-dbd)
    start_dbd
    ;;
  crash-ctld)
    # One controller of several dies (SIGKILL: no state saved on the way out).
    p=$(cat "$RUN/slurmctld-$1.pid")
    kill -9 "$p"
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    rm -f "$RUN/slurmctld-$1.pid"
    ;;
  pause-ctld)
    # One controller of several hangs (SIGSTOP: it holds its connections and answers nothing).
    kill -STOP "$(cat "$RUN/slurmctld-$1.pid")"
    ;;
  resume-ctld)
    # The hung controller goes on (SIGCONT).
    kill -CONT "$(cat "$RUN/slurmctld-$1.pid")"
    ;;
  start-ctld-pod)
    # That controller's pod (back): the same state directory, the others running.
    alive "$RUN/slurmctld-$1.pid" || ctld_host "$1"
    # Until it answers: a primary that returns while a backup has control first waits for the
    # backups to save and stop (render/handback.rs), which their pods then start again.
    for _ in $(seq 1 300); do
      in_chroot scontrol ping 2>/dev/null | grep -q "at $1 is UP" && exit 0
      alive "$RUN/slurmctld-$1.pid" || break
      sleep 0.2
    done
    echo "slurmctld $1 ($inst) did not answer; its log:" >&2
    tail -30 "$RUN/slurmctld-$1.out" >&2
    exit 1
    ;;
  token)
    for _ in $(seq 1 10); do
      t=$(in_chroot scontrol token "username=${1:-root}" lifespan=86400 2>"$RUN/token.err" | sed -n 's/^SLURM_JWT=//p') || true
      [ -n "$t" ] && { echo "$t"; exit 0; }
      sleep 0.5
    done
    echo "scontrol token failed for instance $inst:" >&2
    cat "$RUN/token.err" >&2
    ls -la "$R$ETC" >&2
    tail -5 "$RUN/slurmctld.out" >&2
    exit 1
    ;;
  start-slurmd)
    name=$1 port=$2 conf=$3
    shift 3
    kill_pidfile "$RUN/slurmd-$name.pid"
    # A new pod's /var/spool/slurmd starts empty.
    rm -rf "$R/var/spool/slurm-$inst/d/$name"
    mkdir -p "$R/run/slurm-$inst"
    setsid "$SELF" _private "$R" "$name" "$inst" chroot "$R" /usr/sbin/slurmd "$@" --conf "$conf Port=$port NodeHostname=localhost NodeAddr=127.0.0.1" \
      > "$RUN/slurmd-$name.out" 2>&1 < /dev/null &
    echo $! > "$RUN/slurmd-$name.pid"
    note_start "$RUN/slurmd-$name.pid"
    ;;
  start-nodes)
    hosts=$1
    shift
    mkdir -p "$R/run/slurm-$inst"
    for name in "$@"; do
      kill_pidfile "$RUN/slurmd-$name.pid"
      rm -rf "$R/var/spool/slurm-$inst/d/$name"
      BED_HOSTS=$hosts setsid "$SELF" _private "$R" "$name" "$inst" chroot "$R" /usr/sbin/slurmd -D -f "$ETC/slurm.conf" \
        > "$RUN/slurmd-$name.out" 2>&1 < /dev/null &
      echo $! > "$RUN/slurmd-$name.pid"
      note_start "$RUN/slurmd-$name.pid"
    done
    ;;
  stop-nodes)
    for name in "$@"; do p=$(pid_of "$RUN/slurmd-$name.pid") && kill "$p" 2>/dev/null || true; done
    for name in "$@"; do kill_pidfile "$RUN/slurmd-$name.pid"; done
    ;;
  refresh-conf)
    # As the kubelet updates a pod's projected volume: the new files, then `..data` moved.
    cp "$1"/* "$R$ETC/"
    mark_conf
    ;;
  start-sidecar)
    # A controller pod's sidecar: CMD in the chroot with the instance's config directory where
    # the pod mounts its files (/etc/slurm, private to the sidecar), SLURM_CONF pointing there.
    # The maintenance ConfigMap (Slurm 24.11's reservations) at /etc/slurmops/maintenance.
    name=$1
    shift
    mkdir -p "$RUN/maintenance" "$R/etc/slurmops/maintenance"
    # BED_SIDECAR_OWN_RUN set: the pod does not share slurmctld's /run/slurmctld with the
    # sidecar, which then has an empty one of its own (no authentication socket).
    own_run=
    if [ -n "${BED_SIDECAR_OWN_RUN:-}" ]; then
      own_run="$R/run/sidecar-$inst-$name"; rm -rf "$own_run"; mkdir -p "$own_run"
    fi
    BED_CTLD_RUN=$own_run setsid "$SELF" _private "$R" - "$inst" \
      sh -c 'mount --bind "$0" "$1" && mount --bind "$2" "$3" && shift 3 && exec "$@"' \
      "$R$ETC" "$R/etc/slurm" "$RUN/maintenance" "$R/etc/slurmops/maintenance" \
      chroot "$R" env SLURM_CONF=/etc/slurm/slurm.conf "$@" \
      > "$RUN/sidecar-$name.out" 2>&1 < /dev/null &
    echo $! > "$RUN/sidecar-$name.pid"
    ;;
  maintenance-dir)
    mkdir -p "$RUN/maintenance"
    echo "$RUN/maintenance"
    ;;
  stop-sidecar)
    kill_pidfile "$RUN/sidecar-$1.pid"
    ;;
  start-ctld-sidecar)
    # The reconfigure sidecar of controller NAME (of several), as rendered (the instance's file
    # reconfigure.command): its pod's hostname, names and /run/slurmctld (the controller's, as
    # the pod's shared emptyDir), the instance's config directory at /etc/slurm.
    name=$1
    mkdir -p "$R/run/sack-$inst-$name"
    BED_HOSTS="$RUN/hosts" BED_CTLD_RUN="$R/run/sack-$inst-$name" setsid "$SELF" _private "$R" "$name" "$inst" \
      sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' "$R$ETC" "$R/etc/slurm" \
      chroot "$R" env PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF=/etc/slurm/slurm.conf \
      /bin/sh -c "$(cat "$R$ETC/reconfigure.command")" \
      > "$RUN/sidecar-reconfigure-$name.out" 2>&1 < /dev/null &
    echo $! > "$RUN/sidecar-reconfigure-$name.pid"
    ;;
  stop-slurmd)
    kill_pidfile "$RUN/slurmd-$1.pid"
    ;;
  slurmd-alive)
    alive "$RUN/slurmd-$1.pid"
    ;;
  run-as-node)
    name=$1
    shift
    private "$name" chroot "$R" env SLURM_CONF="$ETC/slurm.conf" "$@"
    ;;
  start-mariadb)
    # Debian's mariadbd from the 24.11 chroot, its own data dir and socket per instance; with
    # CNF, that file (a my.cnf slurmops renders) is read after Debian's own config, and the
    # command line keeps only what a test host must differ in (address, port, paths).
    port=$1 cnf=${2:-} D=/var/lib/mysql-$inst
    kill_pidfile "$RUN/mariadbd.pid"
    mounts
    # A temporary directory of its own: a starting mariadbd removes every `#sql*` file it finds in
    # its tmpdir, and instances sharing the chroot's /tmp removed one another's temporary tables
    # (an install failed: "Unknown table 'mysql.tmp_user_sys'").
    mkdir -p "$R$D.tmp"; chroot "$R" chown mysql:mysql "$D.tmp"
    if [ ! -d "$R$D/mysql" ]; then
      rm -rf "${R:?}$D"; mkdir -p "$R$D"
      chroot "$R" bash -ec "chown mysql:mysql $D; TMPDIR=$D.tmp mariadb-install-db --user=mysql \
        --datadir=$D --skip-test-db --auth-root-authentication-method=socket" > "$RUN/install.out" 2>&1 \
        || { echo "mariadb-install-db failed:" >&2; tail -20 "$RUN/install.out" >&2; exit 1; }
    fi
    mkdir -p "$R/run/mysqld"; chroot "$R" chown mysql:mysql /run/mysqld
    if [ -n "$cnf" ]; then
      cp "$cnf" "$R/etc/mysql/$inst.cnf"
      set -- --defaults-extra-file="/etc/mysql/$inst.cnf"
    else
      # The shared bed's database: small, and without MariaDB 11.8's snapshot isolation.
      set -- --innodb-buffer-pool-size=64M --innodb-snapshot-isolation=OFF \
        --innodb-lock-wait-timeout=900 --max-allowed-packet=64M
    fi
    setsid chroot "$R" /usr/sbin/mariadbd "$@" --user=mysql --datadir="$D" --bind-address=127.0.0.1 \
      --port="$port" --socket="/run/mysqld/$inst.sock" --pid-file="/run/mysqld/$inst.pid" \
      --tmpdir="$D.tmp" --skip-name-resolve > "$RUN/mariadbd.out" 2>&1 < /dev/null &
    echo $! > "$RUN/mariadbd.pid"
    for _ in $(seq 1 150); do
      chroot "$R" mariadb-admin --socket="/run/mysqld/$inst.sock" ping >/dev/null 2>&1 && exit 0
      alive "$RUN/mariadbd.pid" || break
      sleep 0.2
    done
    echo "MariaDB did not come up on 127.0.0.1:$port; its log:" >&2
    tail -30 "$RUN/mariadbd.out" >&2
    exit 1
    ;;
  sql)
    chroot "$R" mariadb --socket="/run/mysqld/$inst.sock"
    ;;
  start-slapd)
    port=$1 ldif=$2 D=/var/lib/ldap-$inst
    kill_pidfile "$RUN/slapd.pid"
    mounts
    rm -rf "${R:?}$D"; mkdir -p "$R$D/db"
    mods=$(dirname "$(find "$R/usr/lib" -name 'back_mdb.so*' | head -1)")
    cat > "$R$D/slapd.conf" <<CONF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath ${mods#"$R"}
moduleload back_mdb
database mdb
suffix "dc=slurmops,dc=test"
rootdn "cn=admin,dc=slurmops,dc=test"
directory $D/db
CONF
    cp "$ldif" "$R$D/data.ldif"
    chroot "$R" slapadd -f "$D/slapd.conf" -l "$D/data.ldif" > "$RUN/slapadd.out" 2>&1 \
      || { echo "slapadd failed:" >&2; cat "$RUN/slapadd.out" >&2; exit 1; }
    setsid chroot "$R" /usr/sbin/slapd -d 0 -f "$D/slapd.conf" -h "ldap://127.0.0.1:$port/" \
      > "$RUN/slapd.out" 2>&1 < /dev/null &
    echo $! > "$RUN/slapd.pid"
    for _ in $(seq 1 100); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && exit 0
      alive "$RUN/slapd.pid" || break
      sleep 0.1
    done
    echo "slapd did not listen on 127.0.0.1:$port; its log:" >&2
    tail -30 "$RUN/slapd.out" >&2
    exit 1
    ;;
  start-login)
    name=$1 port=$2 files=$3
    shift 3
    stop_group "$RUN/login-$name.pid"
    stop_sssd
    mounts
    pod=/run/login-$inst-$name
    rm -rf "${R:?}$pod"; mkdir -p "$R$pod"; cp -a "$files"/. "$R$pod/"
    # In the pod's namespace: each mounted directory over its path, then the container's processes.
    setsid "$SELF" _private "$R" "$name" "$inst" sh -c '
      R=$1 pod=$2 port=$3; shift 3
      for d in etc/sssd root/.ssh; do
        [ -d "$R$pod/$d" ] && { mkdir -p "$R/$d"; mount --bind "$R$pod/$d" "$R/$d" || exit 1; }
      done
      exec chroot "$R" sh -c '"'"'
        port=$1; shift
        mkdir -p /run/sshd
        [ -f /etc/sssd/sssd.conf ] && { sssd -i --logger=stderr & }
        sackd -D "$@" &
        exec /usr/sbin/sshd -D -e -p "$port" -o ListenAddress=127.0.0.1 -o UsePAM=no'"'"' sh "$port" "$@"
    ' sh "$R" "$pod" "$port" "$@" > "$RUN/login-$name.out" 2>&1 < /dev/null &
    echo $! > "$RUN/login-$name.pid"
    ;;
  stop-login)
    stop_group "$RUN/login-$1.pid"
    stop_sssd
    ;;
  log)
    cat "$RUN/$1.out"
    ;;
  exec)
    in_chroot "$@"
    ;;
  stop)
    for f in "$RUN"/login-*.pid; do [ -f "$f" ] && stop_group "$f"; done
    # Every slurmd at once (a scale instance runs hundreds), then each waited for below.
    for f in "$RUN"/slurmd-*.pid; do p=$(pid_of "$f") && kill "$p" 2>/dev/null || true; done
    for f in "$RUN"/*.pid; do [ -f "$f" ] && kill_pidfile "$f"; done
    ;;
  down)
    for f in "$BASE"/*/slurmd-*.pid; do p=$(pid_of "$f") && kill "$p" 2>/dev/null || true; done
    for f in "$BASE"/*/*.pid; do [ -f "$f" ] && kill_pidfile "$f"; done
    # The restapi pods' addresses start-restd put on the loopback interface.
    for a in $(ip -o addr show dev lo | awk '$4 ~ /^198\.1[89]\./ {print $4}'); do ip addr del "$a" dev lo || true; done
    # Every release's chroot that has mounts (their /proc is mounted while in use).
    for R in $(awk '$2 ~ /\/slurm-[a-z0-9.]+-[0-9a-f]+\/proc$/ {sub("/proc$", "", $2); print $2}' /proc/mounts); do
      # Job processes can outlive slurmd; they run inside the chroot: end them by PID.
      for p in $(ls /proc | grep -E '^[0-9]+$'); do
        [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$R" ] && kill -9 "$p" 2>/dev/null || true
      done
      sleep 0.2
      for m in run dev/pts dev sys proc; do mountpoint -q "$R/$m" && umount -R "$R/$m" || true; done
    done
    ;;
  *)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac
