#!/usr/bin/env bash
# Builds (once) a Debian trixie chroot holding the real Slurm 24.11 daemons, for the test bed.
# The chroot is cached under $SLURMOPS_CACHE (default /var/cache/slurmops), keyed by this script's
# content, so only the first run on a machine pays for debootstrap (~30 s). Prints the chroot path.
# Usage: slurm-chroot.sh            (needs root, network to the Debian archive)
set -euo pipefail
CACHE=${SLURMOPS_CACHE:-/var/cache/slurmops}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
key=$(sha256sum "$0" | cut -c1-12)
ROOT="$CACHE/slurm-trixie-$key"
log() { echo "[slurm-chroot] $*" >&2; }

if [ -f "$ROOT/.slurmops-ready" ] && [ -e "$ROOT/usr/sbin/slurmctld-wlm" ]; then
  echo "$ROOT"; exit 0
fi
mkdir -p "$CACHE"
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2; }
fi
rm -rf "$ROOT.tmp"
log "debootstrap trixie into $ROOT (log: $ROOT.log)"
debootstrap --variant=minbase trixie "$ROOT.tmp" "$MIRROR" > "$ROOT.log" 2>&1 \
  || { tail -20 "$ROOT.log" >&2; log "FAILED: debootstrap trixie from $MIRROR"; exit 1; }
printf '#!/bin/sh\nexit 101\n' > "$ROOT.tmp/usr/sbin/policy-rc.d"
chmod +x "$ROOT.tmp/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$ROOT.tmp/etc/resolv.conf"
log "installing Slurm 24.11 packages"
chroot "$ROOT.tmp" bash -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -q &&
  apt-get install -y -q --no-install-recommends slurmctld slurmd slurmrestd slurm-client \
    slurm-wlm-jwt-plugin procps' >> "$ROOT.log" 2>&1 \
  || { tail -20 "$ROOT.log" >&2; log "FAILED: apt-get install slurm in the chroot"; exit 1; }
rm -rf "$ROOT.tmp/var/cache/apt/archives/"*.deb "$ROOT.tmp/var/lib/apt/lists/"*_Packages
chroot "$ROOT.tmp" bash -c 'id restd >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin restd
  id alice >/dev/null 2>&1 || useradd -m alice'
chroot "$ROOT.tmp" /usr/sbin/slurmctld -V >&2
touch "$ROOT.tmp/.slurmops-ready"
rm -rf "$ROOT"; mv "$ROOT.tmp" "$ROOT"
echo "$ROOT"
