#!/usr/bin/env bash
# Builds (once) a Debian chroot holding the real Slurm daemons of one release, for the test bed:
#   24.11 from trixie, 26.05 from forky (bookworm's debootstrap has no forky script: the sid one is
#   used; the frozen mirror's forky Release is past Valid-Until, so apt in the chroot does not
#   check it). The host's apt sources are never touched.
# The chroot is cached under $SLURMOPS_CACHE (default /var/cache/slurmops), keyed by this script's
# content, so only the first run on a machine pays for debootstrap (~30 s). Prints the chroot path.
# Usage: slurm-chroot.sh [24.11|26.05]   (default 24.11; needs root, network to the Debian archive)
set -euo pipefail
RELEASE=${1:-24.11}
case $RELEASE in
  # The bed's MariaDB (mariadb.sh) runs from the 24.11 chroot; every release's slurmdbd uses it.
  24.11) SUITE=trixie SCRIPT= EXTRA="mariadb-server mariadb-client" ;;
  26.05) SUITE=forky SCRIPT=/usr/share/debootstrap/scripts/sid EXTRA= ;;
  *) echo "slurm-chroot.sh: unknown Slurm release $RELEASE (24.11 or 26.05)" >&2; exit 2 ;;
esac
CACHE=${SLURMOPS_CACHE:-/var/cache/slurmops}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
key=$(sha256sum "$0" | cut -c1-12)
ROOT="$CACHE/slurm-$SUITE-$key"
log() { echo "[slurm-chroot $RELEASE] $*" >&2; }

if [ -f "$ROOT/.slurmops-ready" ] && [ -e "$ROOT/usr/sbin/slurmctld-wlm" ]; then
  echo "$ROOT"; exit 0
fi
mkdir -p "$CACHE"
exec 9> "$CACHE/slurm-$SUITE.lock"
flock 9
if [ -f "$ROOT/.slurmops-ready" ]; then echo "$ROOT"; exit 0; fi
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2; }
fi
rm -rf "$ROOT.tmp"
log "debootstrap $SUITE into $ROOT (log: $ROOT.log)"
# shellcheck disable=SC2086 # SCRIPT is empty or one path
debootstrap --variant=minbase "$SUITE" "$ROOT.tmp" "$MIRROR" $SCRIPT > "$ROOT.log" 2>&1 \
  || { tail -20 "$ROOT.log" >&2; log "FAILED: debootstrap $SUITE from $MIRROR"; exit 1; }
printf '#!/bin/sh\nexit 101\n' > "$ROOT.tmp/usr/sbin/policy-rc.d"
chmod +x "$ROOT.tmp/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$ROOT.tmp/etc/resolv.conf"
echo 'Acquire::Check-Valid-Until "false";' > "$ROOT.tmp/etc/apt/apt.conf.d/99no-check-valid-until"
log "installing Slurm $RELEASE packages"
chroot "$ROOT.tmp" bash -c "export DEBIAN_FRONTEND=noninteractive; apt-get update -q &&
  apt-get install -y -q --no-install-recommends slurmctld slurmd slurmrestd slurmdbd slurm-client \
    slurm-wlm-jwt-plugin procps $EXTRA" >> "$ROOT.log" 2>&1 \
  || { tail -20 "$ROOT.log" >&2; log "FAILED: apt-get install slurm in the chroot"; exit 1; }
rm -rf "$ROOT.tmp/var/cache/apt/archives/"*.deb "$ROOT.tmp/var/lib/apt/lists/"*_Packages
chroot "$ROOT.tmp" bash -c 'id restd >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin restd
  for u in alice bob carol; do id $u >/dev/null 2>&1 || useradd -m $u; done'
version=$(chroot "$ROOT.tmp" /usr/sbin/slurmctld -V)
echo "$version" >&2
case $version in "slurm-wlm $RELEASE".*|"slurm $RELEASE".*) ;;
  *) log "FAILED: $SUITE carries $version, not Slurm $RELEASE"; exit 1 ;;
esac
touch "$ROOT.tmp/.slurmops-ready"
rm -rf "$ROOT"; mv "$ROOT.tmp" "$ROOT"
echo "$ROOT"
