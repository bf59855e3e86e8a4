#!/usr/bin/env bash
# The Debian packages the build and the test bed need on the host (bookworm), installed when
# missing. Needs root. Used by tests/run-all.sh and tests/bench.sh.
set -euo pipefail
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
python3 -c 'import venv' 2>/dev/null || need+=(python3-venv)
# git2 builds libgit2 and libssh2 from source against the system OpenSSL and zlib.
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need+=(zlib1g-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
# rsync copies the bed's Slurm chroots into images (tests/bed/images.sh).
command -v rsync >/dev/null || need+=(rsync)
# GNU time measures the peak memory of a child (tests/offline/hostile.rs).
[ -x /usr/bin/time ] || need+=(time)
# man renders the generated manual pages (tests/offline/cli.rs).
command -v man >/dev/null || need+=(man-db)
command -v groff >/dev/null || need+=(groff-base)
# Debian's Chromium, headless, loads the live view in the browser tests (tests/offline/page.rs).
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
# QEMU runs the cgroup v2 guest (tests/bed/vm.sh). Bookworm's qemu-system-x86 (7.2) cannot sit
# beside a newer qemu-utils from backports: that one goes back to bookworm's.
if ! command -v qemu-system-x86_64 >/dev/null; then
  qemu=(qemu-system-x86)
  dpkg -s qemu-utils >/dev/null 2>&1 && qemu+=(qemu-utils/bookworm)
  # Not fatal: without it only the cgroup v2 tests fail, saying why (tests/bed/vm.sh).
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --allow-downgrades "${qemu[@]}" \
    || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --allow-downgrades "${qemu[@]}"; } \
    || echo "packages.sh: QEMU could not be installed (${qemu[*]}): the cgroup v2 tests will fail" >&2
fi
# promtool checks and unit-tests the alert rules (alerts/); Prometheus comes with it, and the
# bed's Prometheus test (tests/e2e/prometheus.rs) runs it. From Debian's prometheus package,
# unpacked rather than installed: installing it would start a Prometheus service on the host.
# Its web pages (/usr/share/prometheus/web) use the JavaScript libraries the package depends on:
# those are plain files, installed as packages.
prom_js=(fonts-glyphicons-halflings libjs-bootstrap4 libjs-eonasdan-bootstrap-datetimepicker libjs-jquery
  libjs-jquery-hotkeys libjs-moment libjs-moment-timezone libjs-mustache libjs-popper.js libjs-rickshaw)
if ! command -v promtool >/dev/null || [ ! -f /usr/share/prometheus/web/templates/_base.html ]; then
  d=$(mktemp -d)
  { (cd "$d" && { apt-get download -q prometheus 2>/dev/null || { apt-get update -q && apt-get download -q prometheus; }; }) \
    && dpkg-deb -x "$d"/prometheus_*.deb "$d/x" \
    && install -m 0755 "$d/x/usr/bin/promtool" "$d/x/usr/bin/prometheus" /usr/local/bin/ \
    && mkdir -p /usr/share/prometheus && rm -rf /usr/share/prometheus/web \
    && cp -a "$d/x/usr/share/prometheus/web" /usr/share/prometheus/; } \
    || echo "packages.sh: Prometheus could not be unpacked from Debian's prometheus package: the alert rules' check and the Prometheus test will fail" >&2
  rm -rf "$d"
fi
if ! dpkg -s "${prom_js[@]}" >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${prom_js[@]}" \
    || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${prom_js[@]}"; } \
    || echo "packages.sh: Prometheus's web libraries could not be installed: its graph page will not draw" >&2
fi
