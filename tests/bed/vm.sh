#!/usr/bin/env bash
# A node as production runs them (issue 78): a Debian trixie guest booting the unified cgroup v2
# hierarchy under QEMU's software emulation (TCG: /dev/kvm here cannot boot a stock kernel,
# ../shared/notes/cgroup-v2-vm.md), for the tests that need cgroup v2 (this machine mounts v1).
#   vm.sh prepare   build the guest's image once, cached under $SLURMOPS_CACHE like the Slurm
#                   chroots: debootstrap trixie (systemd, Debian's kernel, openssh-server, Slurm
#                   24.11's slurmctld and slurmd, containerd and runc, none started at boot), an
#                   SSH key of the bed's, an ext4
#                   image; print its directory
#   vm.sh up        boot one guest (idempotent, under a lock) on a throwaway copy-on-write layer of
#                   the image (QEMU's -snapshot: nothing it writes outlives it), with its link only
#                   inside the network namespace slurmops-vm (a tap: 10.232.0.1 here, 10.232.0.2
#                   the guest; no route out), the bed's run directory and its cache (the Slurm
#                   chroots) shared read-only over virtio-9p (tags bed and cache; /mnt/bed is
#                   mounted at boot); wait for its SSH; print env lines
#   vm.sh ssh CMD   run CMD in the guest as root (its output, its exit status)
#   vm.sh down      stop it, remove the namespace
# The console goes to $SLURMOPS_BED_RUN/vm/console.log (a test that fails to boot it prints its tail).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CACHE=${SLURMOPS_CACHE:-/var/cache/slurmops}
BASE=${SLURMOPS_BED_RUN:-/tmp/slurmops-bed}
RUN=$BASE/vm
NS=slurmops-vm
HOST_IP=10.232.0.1
GUEST_IP=10.232.0.2
# The image is made by `prepare` alone: a change elsewhere in this script keeps it.
key=$(sed -n '/^prepare() {/,/^}/p' "$0" | sha256sum | cut -c1-12)
IMAGE="$CACHE/vm-trixie-$key"
log() { echo "[vm] $*" >&2; }

# The Debian mirror the host's apt uses (its first deb source that is not the security archive).
mirror() {
  [ -n "${DEBIAN_MIRROR:-}" ] && { echo "$DEBIAN_MIRROR"; return; }
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *//p' | grep -v security | head -1)
  [ -n "$m" ] || m=$(sed -n 's/^deb  *\(\[[^]]*\] *\)\{0,1\}\([^ ]*\).*/\2/p' /etc/apt/sources.list 2>/dev/null | grep -v security | head -1)
  [ -n "$m" ] || { log "FAILED: no Debian mirror in the host's apt sources (set DEBIAN_MIRROR)"; exit 1; }
  echo "$m"
}

prepare() {
  if [ -f "$IMAGE/.slurmops-ready" ]; then echo "$IMAGE"; return 0; fi
  mkdir -p "$CACHE"
  exec 9> "$CACHE/vm-trixie.lock"
  flock 9
  if [ -f "$IMAGE/.slurmops-ready" ]; then echo "$IMAGE"; return 0; fi
  command -v qemu-system-x86_64 >/dev/null || { log "FAILED: no qemu-system-x86_64 (tests/bed/packages.sh installs it)"; exit 1; }
  local root="$IMAGE.tmp/root" started
  started=$(date +%s)
  rm -rf "$IMAGE.tmp"; mkdir -p "$IMAGE.tmp"
  log "debootstrap trixie into $root (log: $IMAGE.log)"
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,udev,kmod,initramfs-tools,linux-image-amd64,iproute2,procps,openssh-server,e2fsprogs,slurmd,slurmctld,slurm-client,slurm-wlm-jwt-plugin,containerd,runc \
    trixie "$root" "$(mirror)" > "$IMAGE.log" 2>&1 \
    || { tail -20 "$IMAGE.log" >&2; log "FAILED: debootstrap trixie"; exit 1; }
  # The guest's root filesystem, its 9p share, no password, the bed's key for root.
  printf '/dev/vda / ext4 rw 0 1\nbed /mnt/bed 9p trans=virtio,version=9p2000.L,ro,nofail 0 0\n' > "$root/etc/fstab"
  mkdir -p "$root/mnt/bed" "$root/root/.ssh"
  chroot "$root" passwd -d root >/dev/null
  ssh-keygen -q -t ed25519 -N '' -C slurmops-bed -f "$IMAGE.tmp/id_ed25519"
  cp "$IMAGE.tmp/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
  chmod 700 "$root/root/.ssh"; chmod 600 "$root/root/.ssh/authorized_keys"
  echo slurmops-vm > "$root/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 slurmops-vm\n' > "$root/etc/hosts"
  printf '9p\n9pnet_virtio\nvirtio_net\n' > "$root/etc/modules-load.d/bed.conf"
  # Its address on the tap (net.ifnames=0 on the command line: eth0), before sshd.
  cat > "$root/etc/systemd/system/bed-net.service" <<UNIT
[Unit]
Description=the bed's link
Before=ssh.service network.target
Wants=network.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for i in \$(seq 1 100); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done; ip link set lo up; ip addr add $GUEST_IP/24 dev eth0; ip link set eth0 up'
[Install]
WantedBy=multi-user.target
UNIT
  ln -sf /etc/systemd/system/bed-net.service "$root/etc/systemd/system/multi-user.target.wants/bed-net.service"
  # What TCG makes slow and the tests do not need (the note's pitfall 5); a volatile journal.
  for u in e2scrub_reap.service e2scrub_all.timer apt-daily.timer apt-daily-upgrade.timer \
    man-db.timer fstrim.timer slurmd.service slurmctld.service systemd-timesyncd.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$u"
  done
  # containerd runs the worker image (started by the tests that need it, not at every boot).
  rm -f "$root/etc/systemd/system/multi-user.target.wants/containerd.service"
  mkdir -p "$root/etc/systemd/journald.conf.d"
  printf '[Journal]\nStorage=volatile\n' > "$root/etc/systemd/journald.conf.d/bed.conf"
  cp "$root"/boot/vmlinuz-* "$IMAGE.tmp/vmlinuz"
  cp "$root"/boot/initrd.img-* "$IMAGE.tmp/initrd.img"
  truncate -s 4G "$IMAGE.tmp/root.img"
  mkfs.ext4 -q -d "$root" -F "$IMAGE.tmp/root.img"
  rm -rf "$root"
  touch "$IMAGE.tmp/.slurmops-ready"
  rm -rf "$IMAGE"; mv "$IMAGE.tmp" "$IMAGE"
  log "image ready in $(( $(date +%s) - started )) s: $IMAGE"
  echo "$IMAGE"
}

alive() { [ -f "$RUN/qemu.pid" ] && kill -0 "$(cat "$RUN/qemu.pid")" 2>/dev/null; }

in_guest() {
  ip netns exec "$NS" ssh -q -i "$IMAGE/id_ed25519" -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5 -o BatchMode=yes "root@$GUEST_IP" "$@"
}

up() {
  prepare >/dev/null
  mkdir -p "$RUN"
  exec 8> "$RUN/../vm.lock"
  flock 8
  if ! alive; then
    ip netns del "$NS" 2>/dev/null || true
    ip netns add "$NS"
    ip -n "$NS" link set lo up
    ip -n "$NS" tuntap add tap0 mode tap
    ip -n "$NS" addr add "$HOST_IP/24" dev tap0
    ip -n "$NS" link set tap0 up
    rm -f "$RUN/console.log"
    local t0; t0=$(date +%s.%N)
    echo "$t0" > "$RUN/started"
    # QEMU must not hold the locks (the file descriptors 8 and 9 closed for it).
    ip netns exec "$NS" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m 2048 \
      -kernel "$IMAGE/vmlinuz" -initrd "$IMAGE/initrd.img" \
      -append "root=/dev/vda rw console=ttyS0 net.ifnames=0 panic=-1 quiet" -no-reboot \
      -drive "file=$IMAGE/root.img,format=raw,if=virtio,cache=unsafe" -snapshot \
      -netdev tap,id=n0,ifname=tap0,script=no,downscript=no -device virtio-net-pci,netdev=n0 \
      -virtfs "local,path=$BASE,mount_tag=bed,security_model=none,readonly=on" \
      -virtfs "local,path=$CACHE,mount_tag=cache,security_model=none,readonly=on" \
      -display none -serial "file:$RUN/console.log" -monitor none \
      -pidfile "$RUN/qemu.pid" -daemonize 8>&- 9>&-
  fi
  for _ in $(seq 1 400); do
    in_guest true 2>/dev/null && break
    alive || { log "FAILED: QEMU stopped; the console's last lines:"; tail -30 "$RUN/console.log" >&2; exit 1; }
    sleep 1
  done
  in_guest true || { log "FAILED: the guest's SSH did not answer in 400 s; the console's last lines:"; tail -30 "$RUN/console.log" >&2; exit 1; }
  [ -f "$RUN/booted" ] || echo "$(date +%s.%N) $(cat "$RUN/started")" | awk '{printf "%.1f\n", $1 - $2}' > "$RUN/booted"
  echo "VM_NAMESPACE=$NS"
  echo "VM_GUEST_IP=$GUEST_IP"
  echo "VM_HOST_IP=$HOST_IP"
  echo "VM_CONSOLE=$RUN/console.log"
  echo "VM_BOOT_SECONDS=$(cat "$RUN/booted")"
}

down() {
  if [ -f "$RUN/qemu.pid" ]; then kill_pidfile "$RUN/qemu.pid"; fi
  rm -f "$RUN/booted" "$RUN/started"
  ip netns del "$NS" 2>/dev/null || true
}

case "${1:-}" in
  prepare) prepare ;;
  up) up ;;
  ssh) shift; prepare >/dev/null; in_guest "$@" ;;
  down) down ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
