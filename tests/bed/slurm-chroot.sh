#!/usr/bin/env bash
# Builds (once) a Debian chroot holding the real Slurm daemons of one release, for the test bed:
#   24.11 from trixie, 26.05 from forky (bookworm's debootstrap has no forky script: the sid one is
#   used; the frozen mirror's forky Release is past Valid-Until, so apt in the chroot does not
#   check it), 25.11 built from SchedMD's source in a trixie chroot (no Debian suite carries 25.x:
#   $SLURMOPS_SOURCES/slurm-25.11.7.tar.xz, default ../shared/sources beside the repository;
#   configure and make take about 3 minutes here). The host's apt sources are never touched.
# The chroot is cached under $SLURMOPS_CACHE (default /var/cache/slurmops), keyed by this script's
# content (and the source tarball's), so only the first run on a machine pays for debootstrap
# (~30 s) and the build. Prints the chroot path.
# Usage: slurm-chroot.sh [24.11|25.11|26.05]   (default 24.11; needs root, network to the Debian archive)
set -euo pipefail
RELEASE=${1:-24.11}
LOGIN_PACKAGES=
case $RELEASE in
  # The bed's MariaDB and LDAP directory (slapd, for login pods' SSSD) run from the 24.11 chroot.
  24.11) SUITE=trixie SCRIPT= EXTRA="mariadb-server mariadb-client slapd ldap-utils sackd" ;;
  # forky (the frozen snapshot the mirror serves) carries no sssd: its login pods run without.
  26.05) SUITE=forky SCRIPT=/usr/share/debootstrap/scripts/sid EXTRA=sackd LOGIN_PACKAGES=openssh-server ;;
  # What configure needs for slurmctld, slurmd, slurmdbd (MariaDB client), slurmrestd and its JWT
  # plugin (../shared/sources/README.md), and the runtime libraries that stay.
  25.11) SUITE=trixie SCRIPT= TARBALL=slurm-25.11.7.tar.xz
    EXTRA="build-essential pkg-config libjwt-dev libjson-c-dev libhttp-parser-dev libyaml-dev libssl-dev \
      liblz4-dev libpam0g-dev libreadline-dev zlib1g-dev libmunge-dev libmariadb-dev libmariadb-dev-compat \
      libdbus-1-dev xz-utils python3-minimal" ;;
  *) echo "slurm-chroot.sh: unknown Slurm release $RELEASE (24.11, 25.11 or 26.05)" >&2; exit 2 ;;
esac
# A login pod's other daemons (sackd comes with each release): sshd, and SSSD with its NSS module.
LOGIN_PACKAGES=${LOGIN_PACKAGES:-openssh-server sssd-ldap libnss-sss}
CACHE=${SLURMOPS_CACHE:-/var/cache/slurmops}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
key=$(sha256sum "$0" | cut -c1-12)
ROOT="$CACHE/slurm-$SUITE-$key"
log() { echo "[slurm-chroot $RELEASE] $*" >&2; }
if [ -n "${TARBALL:-}" ]; then
  SOURCES=${SLURMOPS_SOURCES:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/sources}
  [ -f "$SOURCES/$TARBALL" ] || { log "FAILED: no $SOURCES/$TARBALL (set SLURMOPS_SOURCES to the directory holding it)"; exit 1; }
  key=$(cat "$0" "$SOURCES/$TARBALL" | sha256sum | cut -c1-12)
  ROOT="$CACHE/slurm-src$RELEASE-$key"
fi

if [ -f "$ROOT/.slurmops-ready" ] && [ -e "$ROOT/usr/sbin/slurmctld" ]; then
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
if [ -z "${TARBALL:-}" ]; then
  log "installing Slurm $RELEASE packages"
  chroot "$ROOT.tmp" bash -c "export DEBIAN_FRONTEND=noninteractive; apt-get update -q &&
    apt-get install -y -q --no-install-recommends slurmctld slurmd slurmrestd slurmdbd slurm-client \
      slurm-wlm-jwt-plugin procps $LOGIN_PACKAGES $EXTRA" >> "$ROOT.log" 2>&1 \
    || { tail -20 "$ROOT.log" >&2; log "FAILED: apt-get install slurm in the chroot"; exit 1; }
else
  log "building Slurm $RELEASE from $TARBALL (log: $ROOT.log)"
  mkdir -p "$ROOT.tmp/dev/pts" && mount --bind /dev/pts "$ROOT.tmp/dev/pts"
  cp "$SOURCES/$TARBALL" "$ROOT.tmp/tmp/"
  started=$(date +%s)
  # The Debian packages' layout: daemons in /usr/sbin, config in /etc/slurm, the slurm user.
  chroot "$ROOT.tmp" bash -ec "export DEBIAN_FRONTEND=noninteractive; apt-get update -q
    apt-get install -y -q --no-install-recommends procps $LOGIN_PACKAGES $EXTRA
    id slurm >/dev/null 2>&1 || useradd -r -M -d /var/lib/slurm -s /usr/sbin/nologin slurm
    mkdir -p /usr/src/slurm /etc/slurm /var/log/slurm /var/spool/slurmctld /var/spool/slurmd
    tar xJf /tmp/$TARBALL -C /usr/src/slurm --strip-components=1
    cd /usr/src/slurm
    # The default build's flags (-ggdb3 -g -O1) less the debug information, which no test reads:
    # the same code, compiled in less time.
    ./configure --prefix=/usr --sysconfdir=/etc/slurm --enable-slurmrestd --with-jwt --with-json \
      --with-yaml --with-http-parser --disable-debug CFLAGS='-O1 -fno-strict-aliasing'
    make -j\$(nproc) && make install
    cd / && rm -rf /usr/src/slurm /tmp/$TARBALL
    ldconfig" >> "$ROOT.log" 2>&1 \
    || { umount "$ROOT.tmp/dev/pts"; tail -20 "$ROOT.log" >&2; log "FAILED: building Slurm $RELEASE in the chroot"; exit 1; }
  umount "$ROOT.tmp/dev/pts"
  log "built and installed in $(( $(date +%s) - started )) s"
fi
rm -rf "$ROOT.tmp/var/cache/apt/archives/"*.deb "$ROOT.tmp/var/lib/apt/lists/"*_Packages
chroot "$ROOT.tmp" bash -c 'id restd >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin restd
  for u in alice bob carol; do id $u >/dev/null 2>&1 || useradd -m $u; done
  [ ! -e /usr/sbin/sssd ] || grep -q "^passwd:.* sss" /etc/nsswitch.conf || sed -i "s/^\\(passwd\\|group\\):.*/& sss/" /etc/nsswitch.conf
  ls /etc/ssh/ssh_host_ed25519_key >/dev/null 2>&1 || ssh-keygen -A'
version=$(chroot "$ROOT.tmp" /usr/sbin/slurmctld -V)
echo "$version" >&2
case $version in "slurm-wlm $RELEASE".*|"slurm $RELEASE".*) ;;
  *) log "FAILED: $SUITE carries $version, not Slurm $RELEASE"; exit 1 ;;
esac
touch "$ROOT.tmp/.slurmops-ready"
rm -rf "$ROOT"; mv "$ROOT.tmp" "$ROOT"
echo "$ROOT"
