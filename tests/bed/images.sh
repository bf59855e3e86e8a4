#!/usr/bin/env bash
# Builds (once) the container images the real node runs the quickstart's Slurm from, as OCI archives
# for `node.sh import` (no registry, no Docker), and prints their paths, one per line:
#   slurm-24.11.oci.tar   Slurm 24.11 from Debian trixie: slurmctld, slurmd, slurmdbd, slurmrestd and
#                         the client commands in one root filesystem, named as Slinky names each
#                         daemon's image (ghcr.io/slinkyproject/PROGRAM:24.11-ubuntu24.04, the
#                         references slurmops renders by default), so the rendered pods start as they
#                         would from Slinky's: the program on PATH, SlurmUser `slurm` with uid/gid 401,
#                         /etc/slurm, /var/spool/*, /run/slurm* (Debian's pid file places) owned as the
#                         daemons expect (../shared/anchors/slinky-containers: Dockerfile, "Create
#                         SlurmUser"). slurmops sets each container's command, so no entrypoint runs.
#                         Also named bed.local/slurm/slurmd:24.11-next: the image a test pushes.
#   mariadb-11.8.oci.tar  docker.io/library/mariadb:11.8 from Debian trixie's mariadb-server 11.8, with
#                         the official image's contract: mysql is uid/gid 999, /etc/mysql/conf.d is
#                         read, and its entrypoint makes the database and user of MARIADB_DATABASE,
#                         MARIADB_USER and MARIADB_PASSWORD at the first start, with a random root
#                         password when MARIADB_RANDOM_ROOT_PASSWORD is set (images/mariadb-entrypoint.sh).
# SLURMOPS_IMAGE_VARIANT=debian-uid builds the Slurm image with Debian's own slurm user (uid 64030)
# instead: an image whose contract differs from what slurmops renders (tests/e2e/deployed.rs says
# what then fails).
# Cached under $SLURMOPS_CACHE (default /var/cache/slurmops), keyed by this script, the entrypoint
# and scripts/image.py. Needs root and the Debian archive (debootstrap, apt in the chroots only).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${SLURMOPS_CACHE:-/var/cache/slurmops}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
VARIANT=${SLURMOPS_IMAGE_VARIANT:-}
key=$(cat "$0" "$HERE/images/mariadb-entrypoint.sh" "$HERE/../../scripts/image.py" | sha256sum | cut -c1-12)
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
if [ "$VARIANT" = debian-uid ]; then
  users="groupadd -r -g 64030 slurm; useradd -r -u 64030 -g 64030 -M -d /nonexistent -s /usr/sbin/nologin slurm"
else
  users="groupadd -r -g 401 slurm; useradd -r -u 401 -g 401 -M -d /nonexistent -s /usr/sbin/nologin slurm"
fi
install_in "$W/slurm" "$users
  apt-get install -y -q --no-install-recommends slurmctld slurmd slurmdbd slurmrestd slurm-client \
    slurm-wlm-jwt-plugin procps
  mkdir -p /etc/slurm /var/spool/slurmd /var/spool/slurmctld /run/slurmd /run/slurm /run/slurmctld \
    /run/slurmdbd /var/log/slurm
  chown slurm:slurm /var/spool/slurmctld /run/slurmctld /run/slurmdbd /run/slurm /var/log/slurm"
slim "$W/slurm"

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
tags=()
for p in $SLURM_TAGS; do tags+=(--tag "ghcr.io/slinkyproject/$p:24.11-ubuntu24.04"); done
# A second name for slurmd, for a push that changes the workers' image (tests/e2e/deployed.rs).
tags+=(--tag "$NEXT_SLURMD")
python3 "$HERE/../../scripts/image.py" rootfs "$W/slurm" --entrypoint /bin/sh "${tags[@]}" \
  --output "$W/slurm-24.11.oci.tar" 2>> "$W/build.log" || { log "FAILED: packing the Slurm image"; exit 1; }
python3 "$HERE/../../scripts/image.py" rootfs "$W/mariadb" --entrypoint /usr/local/bin/docker-entrypoint.sh \
  --cmd mariadbd --user 999:999 --tag docker.io/library/mariadb:11.8 \
  --output "$W/mariadb-11.8.oci.tar" 2>> "$W/build.log" || { log "FAILED: packing the MariaDB image"; exit 1; }
rm -rf "$W/base" "$W/slurm" "$W/mariadb"
touch "$W/.ready"
rm -rf "$OUT"; mv "$W" "$OUT"
log "built in $(( $(date +%s) - started )) s: $(du -sh "$OUT"/*.oci.tar | tr '\n\t' '  ')"
ls "$OUT"/*.oci.tar
