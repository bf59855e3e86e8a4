#!/usr/bin/env bash
# Packs what tests/gpu/run.sh needs on a machine with an NVIDIA GPU and no network into .gpu/
# (ignored by git; under the device tool's 64 MiB): the sources of Slurm 25.11 and nccl-tests
# from ../shared/sources, D-Bus's headers and library from Debian (Slurm's cgroup/v2 plugin
# builds only with them, and that machine has none), and what slurmops renders for
# tests/gpu/cluster.yaml (render --output-dir: slurm.conf, gres.conf, cgroup.conf, the
# StatefulSet with slurmd's --conf, and jobs/: the check and canary jobs as sbatch scripts).
# Usage: bash tests/gpu/pack.sh [SLURMOPS_BINARY]   (default: this checkout's, built by cargo)
# Then, on the GPU machine, with .gpu/ beside the checkout's files: bash tests/gpu/run.sh .gpu OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
# The slurmops of this checkout (cargo builds it if it is not current), unless one is named.
bin="${1:-}"
if [ -z "$bin" ]; then
  cargo build -q --bin slurmops
  bin="${CARGO_TARGET_DIR:-target}/debug/slurmops"
fi
[ -x "$bin" ] || { echo "$bin: no slurmops binary" >&2; exit 1; }
src=../shared/sources
for f in slurm-25.11.7.tar.xz nccl-tests-2.19.6.tar.gz; do
  [ -f "$src/$f" ] || { echo "$src/$f missing (see ../shared/sources/README.md)" >&2; exit 1; }
done
rm -rf .gpu && mkdir -p .gpu/debs .gpu/sysroot
cp "$src/slurm-25.11.7.tar.xz" "$src/nccl-tests-2.19.6.tar.gz" .gpu/
(cd .gpu/debs && apt-get download -q libdbus-1-dev libdbus-1-3 >/dev/null 2>&1) || { echo "apt-get download libdbus-1-dev libdbus-1-3 failed" >&2; exit 1; }
for d in .gpu/debs/*.deb; do dpkg-deb -x "$d" .gpu/sysroot; done
rm -rf .gpu/debs .gpu/sysroot/usr/share
"$bin" validate tests/gpu/cluster.yaml >/dev/null
"$bin" render --output-dir .gpu/rendered tests/gpu/cluster.yaml 2>/dev/null
"$bin" --version > .gpu/rendered/slurmops-version
# slurmd's --conf as the NodeSet's StatefulSet renders it (that machine may have no YAML parser).
sed -n '/- --conf$/{n;s/^ *- "//;s/"$//;s/\\"/"/g;p;}' .gpu/rendered/*-statefulset-h200.yaml > .gpu/rendered/slurmd-conf
grep -q 'Gres=gpu:h200:1' .gpu/rendered/slurmd-conf || { echo "no slurmd --conf found in the rendered StatefulSet" >&2; exit 1; }
cp tests/gpu/cluster.yaml .gpu/rendered/
du -sh .gpu | sed 's/^/packed: /'
