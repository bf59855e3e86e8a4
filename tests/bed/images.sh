#!/usr/bin/env bash
# Builds (once) the container images the real node runs Slurm from, as OCI archives for
# `node.sh import` (no registry, no Docker), and prints their paths, one per line:
#   slurm-24.11.oci.tar   Slurm 24.11 from Debian trixie: slurmctld, slurmd, slurmdbd, slurmrestd,
#                         sackd, sshd, SSSD and the client commands in one root filesystem, named
#                         as Slinky names each daemon's image (ghcr.io/slinkyproject/PROGRAM:
#                         24.11-ubuntu24.04, the references slurmops renders by default), so the
#                         rendered pods start as they would from Slinky's: the program on PATH,
#                         SlurmUser `slurm` with uid/gid 401, /etc/slurm, /var/spool/*, /run/slurm{ctld,dbd}
#                         owned as the daemons expect (../shared/anchors/slinky-containers:
#                         Dockerfile, "Create SlurmUser"). slurmops sets each daemon's command, so
#                         no entrypoint runs there; the login image (…/login:24.11-ubuntu24.04, the
#                         same layer) runs images/login-entrypoint.sh, the contract of Slinky's
#                         login image: the rendered login pod sets no command.
#                         Also named bed.local/slurm/slurmd:24.11-next: the image a test pushes.
#   slurm-25.11.oci.tar   The same names and layout for 25.11 (SchedMD's source, built by
#   slurm-26.05.oci.tar   slurm-chroot.sh) and 26.05 (Debian forky, whose archive has no SSSD: its
#                         login image runs sackd and sshd), from the bed's own chroots, without
#                         compilers, headers, caches or the bed's state.
#   mariadb-11.8.oci.tar  docker.io/library/mariadb:11.8 from Debian trixie's mariadb-server 11.8, with
#                         the official image's contract: mysql is uid/gid 999, /etc/mysql/conf.d is
#                         read, and its entrypoint makes the database and user of MARIADB_DATABASE,
#                         MARIADB_USER and MARIADB_PASSWORD at the first start, with a random root
#                         password when MARIADB_RANDOM_ROOT_PASSWORD is set (images/mariadb-entrypoint.sh).
# SLURMOPS_IMAGE_VARIANT=debian-uid builds the Slurm images with Debian's own slurm user (uid 64030)
# instead: images whose contract differs from what slurmops renders (tests/e2e/deployed.rs says
# what then fails).
# Cached under $SLURMOPS_CACHE (default /var/cache/slurmops), keyed by this script, the
# entrypoints, scripts/image.py and the chroots it copies. Needs root and the Debian archive
# (debootstrap, apt in the chroots only).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${SLURMOPS_CACHE:-/var/cache/slurmops}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
VARIANT=${SLURMOPS_IMAGE_VARIANT:-}
# The chroots of 25.11 and 26.05 (built by the bed's prepare beside this script: this waits for
# them; cached, it answers at once).
CHROOT_2511=$("$HERE/slurm-chroot.sh" 25.11)
CHROOT_2605=$("$HERE/slurm-chroot.sh" 26.05)
key=$({ cat "$0" "$HERE"/images/*.sh "$HERE/../../scripts/image.py"; echo "$CHROOT_2511 $CHROOT_2605"; } \
  | sha256sum | cut -c1-12)
OUT="$CACHE/images-$key${VARIANT:+-$VARIANT}"
SLURM_TAGS="slurmctld slurmd slurmdbd slurmrestd"
NEXT_SLURMD=bed.local/slurm/slurmd:24.11-next
log() { echo "[images] $*" >&2; }

if [ -f "$OUT/.ready" ]; then
  ls "$OUT"/*.oci.tar; exit 0
fi
mkdir -p "$CACHE"
exec 9> "$CACHE/images.lock"
flock 9
if [ -f "$OUT/.ready" ]; then ls "$OUT"/*.oci.tar; exit 0; fi
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2
rm -rf "$OUT.tmp"; mkdir -p "$OUT.tmp"
W=$OUT.tmp
started=$(date +%s)

# One minimal trixie, copied for each image.
log "debootstrap trixie (log: $W/build.log)"
debootstrap --variant=minbase trixie "$W/base" "$MIRROR" > "$W/build.log" 2>&1 \
  || { tail -20 "$W/build.log" >&2; log "FAILED: debootstrap trixie from $MIRROR"; exit 1; }
printf '#!/bin/sh\nexit 101\n' > "$W/base/usr/sbin/policy-rc.d"; chmod +x "$W/base/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$W/base/etc/resolv.conf"
chroot "$W/base" apt-get update -q >> "$W/build.log" 2>&1 || { tail -20 "$W/build.log" >&2; log "FAILED: apt-get update"; exit 1; }

# Leaves only what the image needs: no apt lists or caches, docs, man pages or locales.
slim() {
  local r=$1
  rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/* "$r"/usr/share/doc/* "$r"/usr/share/man/* \
    "$r"/usr/share/locale/* "$r"/usr/share/info/* "$r"/var/log/*.log "$r"/var/log/apt/* "$r"/tmp/* \
    "$r/usr/sbin/policy-rc.d"
  : > "$r/etc/resolv.conf"   # the kubelet mounts the pod's own
}

install_in() {
  local r=$1; shift
  chroot "$r" bash -ec "export DEBIAN_FRONTEND=noninteractive; $*" >> "$W/build.log" 2>&1 \
    || { tail -20 "$W/build.log" >&2; log "FAILED in $(basename "$r"): $*"; exit 1; }
}

log "Slurm 24.11 (slurmctld, slurmd, slurmdbd, slurmrestd, client)"
cp -a "$W/base" "$W/slurm"
SLURM_UID=401
[ "$VARIANT" = debian-uid ] && SLURM_UID=64030
# The image's SlurmUser and the places the daemons write, as Slinky's images have them.
# No /run/slurm: slurmd (root) makes it for its configless cache and, from 25.11, refuses one
# the slurm user owns; sackd, in the login image, runs as root and makes it too.
slurm_layout="mkdir -p /etc/slurm /var/spool/slurmd /var/spool/slurmctld /run/slurmd /run/slurmctld \
    /run/slurmdbd /var/log/slurm
  chown slurm:slurm /var/spool/slurmctld /run/slurmctld /run/slurmdbd /var/log/slurm"
install_in "$W/slurm" "groupadd -r -g $SLURM_UID slurm
  useradd -r -u $SLURM_UID -g $SLURM_UID -M -d /nonexistent -s /usr/sbin/nologin slurm
  apt-get install -y -q --no-install-recommends slurmctld slurmd slurmdbd slurmrestd slurm-client \
    slurm-wlm-jwt-plugin sackd openssh-server sssd-ldap libnss-sss procps
  rm -f /etc/ssh/ssh_host_*
  $slurm_layout"
install -m 0755 "$HERE/images/login-entrypoint.sh" "$W/slurm/usr/local/bin/login-entrypoint.sh"
slim "$W/slurm"

# 25.11 and 26.05: the bed's chroot of the release, less what only building or the bed needs.
from_chroot() {
  local rel=$1 src=$2 r="$W/slurm-$1"
  log "Slurm $rel (from $src)"
  rsync -a --exclude='/proc/*' --exclude='/sys/*' --exclude='/dev/*' --exclude='/run/*' \
    --exclude='/tmp/*' --exclude='/root/*' --exclude='/var/spool/*' --exclude='/var/log/*' \
    --exclude='/var/cache/*' --exclude='/var/lib/apt/lists/*' --exclude='/usr/include/*' \
    --exclude='/usr/lib/gcc/*' --exclude='/usr/libexec/gcc/*' --exclude='/etc/slurm/*' \
    --exclude='/.slurmops-*' "$src/" "$r/"
  # The chroot's slurm user (Debian's 64030, or the source build's system uid) becomes the
  # image's; files it owned follow.
  install_in "$r" "old=\$(id -u slurm); oldg=\$(id -g slurm)
    usermod -u $SLURM_UID slurm; groupmod -g $SLURM_UID slurm
    find / -xdev \\( -uid \$old -o -gid \$oldg \\) -exec chown -h slurm:slurm {} +
    rm -f /etc/ssh/ssh_host_*
    $slurm_layout"
  install -m 0755 "$HERE/images/login-entrypoint.sh" "$r/usr/local/bin/login-entrypoint.sh"
  slim "$r"
}
from_chroot 25.11 "$CHROOT_2511"
from_chroot 26.05 "$CHROOT_2605"

log "MariaDB 11.8"
cp -a "$W/base" "$W/mariadb"
install_in "$W/mariadb" "groupadd -r -g 999 mysql; useradd -r -u 999 -g 999 -M -d /var/lib/mysql -s /usr/sbin/nologin mysql
  apt-get install -y -q --no-install-recommends mariadb-server mariadb-client pwgen
  # As the official image: listen beyond loopback (a pod's config in conf.d says where), no log
  # file of its own (stderr), data and socket directories the mysql user owns.
  sed -i -E 's/^(bind-address|log_error|user\b)/#&/' /etc/mysql/mariadb.conf.d/50-server.cnf
  rm -rf /var/lib/mysql; mkdir -p /var/lib/mysql /run/mysqld /etc/mysql/conf.d
  chown mysql:mysql /var/lib/mysql /run/mysqld"
install -m 0755 "$HERE/images/mariadb-entrypoint.sh" "$W/mariadb/usr/local/bin/docker-entrypoint.sh"
slim "$W/mariadb"

log "packing (scripts/image.py)"
pack_slurm() {
  local rel=$1 root=$2; shift 2
  local tags=()
  for p in $SLURM_TAGS; do tags+=(--tag "ghcr.io/slinkyproject/$p:$rel-ubuntu24.04"); done
  python3 "$HERE/../../scripts/image.py" rootfs "$root" --entrypoint /bin/sh "${tags[@]}" "$@" \
    --image "ghcr.io/slinkyproject/login:$rel-ubuntu24.04=/usr/local/bin/login-entrypoint.sh" \
    --output "$W/slurm-$rel.oci.tar" 2>> "$W/build.log" || { log "FAILED: packing the Slurm $rel image"; exit 1; }
  rm -rf "$root"
}
# A second name for 24.11's slurmd, for a push that changes the workers' image (tests/e2e/deployed.rs).
pack_slurm 24.11 "$W/slurm" --tag "$NEXT_SLURMD"
pack_slurm 25.11 "$W/slurm-25.11"
pack_slurm 26.05 "$W/slurm-26.05"
python3 "$HERE/../../scripts/image.py" rootfs "$W/mariadb" --entrypoint /usr/local/bin/docker-entrypoint.sh \
  --cmd mariadbd --user 999:999 --tag docker.io/library/mariadb:11.8 \
  --output "$W/mariadb-11.8.oci.tar" 2>> "$W/build.log" || { log "FAILED: packing the MariaDB image"; exit 1; }
rm -rf "$W/base" "$W/mariadb"
touch "$W/.ready"
rm -rf "$OUT"; mv "$W" "$OUT"
log "built in $(( $(date +%s) - started )) s: $(du -sh "$OUT"/*.oci.tar | tr '\n\t' '  ')"
ls "$OUT"/*.oci.tar
