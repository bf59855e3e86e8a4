#!/usr/bin/env bash
# The benchmark from a fresh machine, in one run: every figure `slurmops bench` prints offline
# (plan at scale, render scaling, parser throughput, binary size, cold start) plus those that need
# the test bed (no-op reconcile requests/writes, the daemon's idle memory, rollout overhead per
# wave, drain latency). Size, cold start and daemon memory are those of the static binary that
# ships (built here as in tests/run-all.sh). Needs root like tests/run-all.sh: it builds (once)
# and starts the same bed.
# Usage: bash tests/bench.sh [JSON_FILE]   (default: target/bench.json)
#        bash tests/bench.sh queue [JSON_FILE]
#          only the Slurm side at scale: a slurmctld and slurmrestd of their own (tests/bed/scale.sh,
#          Slurm 24.11) with SLURMOPS_BENCH_WORKERS node records (default 1,000, as NodeSets of 20)
#          and SLURMOPS_BENCH_JOBS held jobs (default 50,000): one whole-queue read, an idle pass,
#          `slurm drain` (benches/bed/queue.rs).
#        bash tests/bench.sh scale [JSON_FILE]
#          the daemon at scale: as many GPU-sized Nodes and worker pods (kube-controller-manager
#          makes them, a light kubelet binds them and marks them Ready) as node records, the same
#          queue, `slurmops run` idle, under job churn and starting a rollout
#          (benches/bed/fleet.rs, tests/e2e/support/at_scale.rs); SLURMOPS_SCALE_LOG=FILE keeps the
#          daemon's log (one line per pass with its phases and requests).
#        bash tests/bench.sh jobs [JSON_FILE]
#          the daemon against a growing queue: SLURMOPS_BENCH_WORKERS workers (default 100) whose
#          NodeSets have a canary (every pass needs the queue), 1,000 to SLURMOPS_BENCH_JOBS (default
#          50,000) held jobs, a daemon started afresh at each length (benches/bed/jobs.rs).
#        bash tests/bench.sh generated
#          only the generator's long run (no bed, no root; the full run ends with it):
#          SLURMOPS_GEN_CASES (default 100,000) cluster.yaml files generated from the JSON Schema
#          against the default policy on a release build (tests/offline/generated/), printing the
#          cases, the seconds, the admitted/refused/invalid shares and any violation with its seed.
#        bash tests/bench.sh campaign
#          only the fault campaigns' long runs (tests/e2e/campaign*.rs): SLURMOPS_CAMPAIGN_RUNS
#          (default 20) seeds one after another, SLURMOPS_CAMPAIGN_FAULTS (default 5) faults each,
#          printing each seed, its faults and convergence, then the figures line (faults injected,
#          survived, jobs lost, convergence p50/p99). A failing seed stops the run and is printed;
#          SLURMOPS_CAMPAIGN_SEED=N runs it again.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
target="${CARGO_TARGET_DIR:-target}"
generated() {
  echo "generator long run: ${SLURMOPS_GEN_CASES:-100000} generated cluster.yaml files admitted under the default policy (guarded), each admitted rendering checked by the test's own oracle (release build): cases, seconds, admitted/refused/invalid shares, violations"
  SLURMOPS_GEN_CASES=${SLURMOPS_GEN_CASES:-100000} cargo test -q --release --test offline -- generated:: --nocapture
}
if [ "${1:-}" = generated ]; then generated; exit 0; fi
if [ "${1:-}" = campaign ]; then
  bash tests/bed/packages.sh
  bash tests/bed/bed.sh down >/dev/null 2>&1 || true
  trap 'bash tests/bed/bed.sh down >/dev/null 2>&1 || true' EXIT
  bash tests/bed/bed.sh prepare
  SLURMOPS_CAMPAIGN_RUNS=${SLURMOPS_CAMPAIGN_RUNS:-20} RUSTFLAGS="-C target-feature=+crt-static" OPENSSL_STATIC=1 \
    cargo nextest run --target x86_64-unknown-linux-gnu --test bed --no-capture -E 'test(/^campaign/)'
  exit 0
fi
only=()
case "${1:-}" in queue|scale|jobs) only=(--only "$1"); shift ;; esac
json=$(realpath -m "${1:-$target/bench.json}")
bash tests/bed/packages.sh
bash tests/bed/bed.sh down >/dev/null 2>&1 || true
trap 'bash tests/bed/bed.sh down >/dev/null 2>&1 || true' EXIT
bash tests/bed/bed.sh prepare
if [ ${#only[@]} -gt 0 ]; then
  workers=${SLURMOPS_BENCH_WORKERS:-1000}
  [ "${only[1]}" = jobs ] && workers=${SLURMOPS_BENCH_WORKERS:-100}
  trap 'bash tests/bed/scale.sh down >/dev/null 2>&1 || true; bash tests/bed/bed.sh down >/dev/null 2>&1 || true' EXIT
  set -a; eval "$(bash tests/bed/scale.sh up $((workers / 20)) 20)"; set +a
  cargo bench -q --bench bed -- --json "$json" "${only[@]}"
  exit 0
fi
RUSTFLAGS="-C target-feature=+crt-static" OPENSSL_STATIC=1 cargo build -q --release --target x86_64-unknown-linux-gnu
static=$(realpath "$target/x86_64-unknown-linux-gnu/release/slurmops")
cargo bench -q --bench bed -- --json "$json" --binary "$static"
generated
