#!/usr/bin/env bash
# The benchmark from a fresh machine, in one run: every figure `slurmops bench` prints offline
# (plan at scale, render scaling, parser throughput, binary size, cold start) plus those that need
# the test bed (no-op reconcile requests/writes, the daemon's idle memory, rollout overhead per
# wave, drain latency). Size, cold start and daemon memory are those of the static binary that
# ships (built here as in tests/run-all.sh). Needs root like tests/run-all.sh: it builds (once)
# and starts the same bed.
# Usage: bash tests/bench.sh [JSON_FILE]   (default: target/bench.json)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
target="${CARGO_TARGET_DIR:-target}"
json=$(realpath -m "${1:-$target/bench.json}")
bash tests/bed/packages.sh
bash tests/bed/bed.sh down >/dev/null 2>&1 || true
trap 'bash tests/bed/bed.sh down >/dev/null 2>&1 || true' EXIT
bash tests/bed/bed.sh prepare
RUSTFLAGS="-C target-feature=+crt-static" OPENSSL_STATIC=1 cargo build -q --release --target x86_64-unknown-linux-gnu
static=$(realpath "$target/x86_64-unknown-linux-gnu/release/slurmops")
cargo bench -q --bench bed -- --json "$json" --binary "$static"
