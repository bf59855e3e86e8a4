#!/usr/bin/env bash
# The whole test suite, from a fresh machine: lint, licences/advisories, unit and integration
# tests against the real test bed (Slurm 24.11, 25.11 and 26.05, kube-apiserver + controller-manager 1.20.2, git
# servers; see tests/bed/), and validation of every rendered object of
# every example against the official Kubernetes schemas. Needs root (apt, chroot, mounts).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step says when it started (seconds since the run began), so a slow run names its slow step.
step() { printf '\n== %s (at %d s)\n' "$*" "$SECONDS"; }
export CARGO_TERM_COLOR=never

step "system packages"
bash tests/bed/packages.sh

step "tools: cargo-deny and mdbook, built in the background while the bed is prepared"
# Debug builds: a few minutes less on a cold machine than release ones, and both tools run for
# seconds. Their output is shown if they fail; the steps that use them wait for them.
tools_log=$(mktemp)
(
  command -v cargo-deny >/dev/null || cargo install -q cargo-deny --locked --debug
  command -v mdbook >/dev/null || cargo install -q mdbook --no-default-features --locked --version 0.5.4 --debug
) > "$tools_log" 2>&1 &
tools=$!
tools_ready() { wait "$tools" || { cat "$tools_log" >&2; echo "building cargo-deny or mdbook failed (above)" >&2; exit 1; }; }

step "test bed: build or reuse every part (Slurm chroots, Kubernetes binaries, git servers, the real node)"
# The bed (tests/bed/bed.sh) is started by the first test that needs it and stopped here, by PID,
# whatever the outcome. A bed left over from an earlier run is stopped first.
bash tests/bed/bed.sh down >/dev/null 2>&1 || true
trap 'bash tests/bed/bed.sh down >/dev/null 2>&1 || true' EXIT
bash tests/bed/bed.sh prepare

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo deny check (advisories, bans, licenses, sources)"
tools_ready
# Advisories are checked against the RustSec database in .advisory-db (deny.toml's db-path): from
# the snapshot in ../shared/advisory-db when there is one (where GitHub, the database's home, is
# out of reach), refreshed on every run; otherwise fetched from GitHub as cargo-deny does.
snapshot=../shared/advisory-db/advisory-db.bundle
db=.advisory-db/advisory-db-3157b0e258782691
# cargo-deny reads `cargo metadata`, which needs every crate of Cargo.lock, those of other
# platforms too (a build downloads only this one's): fetch them from crates.io first.
cargo fetch --locked -q
if [ -f "$snapshot" ]; then
  rm -rf "$db" && mkdir -p .advisory-db
  git clone -q "$snapshot" "$db" || { echo "cannot clone the advisory snapshot $snapshot (above: git's reason)" >&2; exit 1; }
  offline=--offline
else
  echo "no advisory snapshot at $snapshot: fetching the RustSec database from GitHub"
  cargo deny fetch db || {
    echo "cannot fetch the RustSec advisory database (above: the reason) and there is no snapshot at $snapshot: run where github.com is reachable, or put a git bundle of https://github.com/rustsec/advisory-db there" >&2
    exit 1
  }
  offline=
fi
echo "advisory database: $(git -C "$db" log -1 --format='%s (committed %cs)')"
cargo deny $offline check advisories bans licenses sources

step "tests, in one static build (linked as the release's binary is; the deployed test's image is made of its slurmops)"
# One build for the tests and the static binary: statically linked for x86_64 (glibc, OpenSSL,
# libgit2 and libssh2 inside), as the release workflow builds what ships (there with the release
# profile). The deployed test builds the daemon's image of this build's slurmops; a second,
# release build of its own took 8.3 minutes of a cold run on 2 cores.
export RUSTFLAGS="-C target-feature=+crt-static" OPENSSL_STATIC=1
triple=x86_64-unknown-linux-gnu
cargo nextest run --no-run --cargo-quiet --target "$triple"
static="${CARGO_TARGET_DIR:-target}/$triple/debug/slurmops"
linkage=$(ldd "$static" 2>&1 || true)
echo "ldd $static: $linkage"
echo "$linkage" | grep -Eq "statically linked|not a dynamic executable"
"$static" --version
# Checks that need no bed run beside the tests (whose CPU is mostly idle: a bed test spends
# most of its time waiting for Slurm, the kubelets and its daemon); their output is shown after.
side_log=$(mktemp)
(
  set -euo pipefail
  # Clippy checks in a target directory of its own (the tests' build lock stays free): beside
  # the tests it costs the run no wall time (4 minutes of a cold run when it ran before them).
  echo "== cargo clippy --all-targets -D warnings"
  # Not the static build's flags: they would link the host's proc-macros statically too.
  env -u RUSTFLAGS -u OPENSSL_STATIC CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/clippy" \
    cargo clippy -q --all-targets -- -D warnings
  echo "clippy: clean"
  echo "== rendered objects against the Kubernetes OpenAPI schemas (kubernetes-validate, strict)"
  [ -x .venv/bin/kubernetes-validate ] || { python3 -m venv .venv && .venv/bin/pip install -q kubernetes-validate==1.37.0; }
  # The tests' build renders the same objects as a release one (render is pure and deterministic).
  bin=$static
  for ex in examples/repo examples/minimal examples/quickstart examples/ha; do
    out=$(mktemp -d)
    "$bin" render "$ex" --output-dir "$out" 2>/dev/null
    # DRA resource claims (IMEX) have their current shape since Kubernetes 1.31; objects that use
    # them are checked against the newest schema only, everything else against 1.29 too.
    for f in "$out"/*.yaml; do
      versions="1.29.0 1.37.0"
      grep -q 'resourceClaimTemplateName' "$f" && versions="1.37.0"
      for v in $versions; do
        .venv/bin/kubernetes-validate --strict -k "$v" "$f" >/dev/null || { .venv/bin/kubernetes-validate --strict -k "$v" "$f"; exit 1; }
      done
    done
    echo "$ex: $(ls "$out"/*.yaml | wc -l) objects valid"
    rm -rf "$out"
  done
  install=$(mktemp)
  # With the dashboard's ConfigMap (a core object; the PrometheusRule, a CRD, is checked below).
  "$bin" install --print --repo https://git.example/infra.git --namespace slurmops \
    --cluster-namespace slurm --git-secret git --webhook-secret webhook --grafana-dashboard > "$install"
  for v in 1.29.0 1.37.0; do
    .venv/bin/kubernetes-validate --strict -k "$v" "$install" >/dev/null || { .venv/bin/kubernetes-validate --strict -k "$v" "$install"; exit 1; }
  done
  echo "slurmops install --print: $(grep -c '^kind:' "$install") objects valid"
  rm -f "$install"
  echo
  echo "== the alert rules (alerts/): promtool's check and its unit tests of every rule"
  command -v promtool >/dev/null || { echo "no promtool: tests/bed/packages.sh installs it from Debian's prometheus package" >&2; exit 1; }
  (cd alerts && promtool check rules slurmops.rules.yaml && promtool test rules slurmops.rules.test.yaml)
  # The PrometheusRule `install --print --prometheus-rule` renders: its groups are the file's
  # (PyYAML, from the venv above, reads both) and promtool takes them.
  rules=$(mktemp -d)
  "$bin" install --print --prometheus-rule --repo https://git.example/infra.git > "$rules/install.yaml" 2>/dev/null
  .venv/bin/python3 - "$rules/install.yaml" alerts/slurmops.rules.yaml "$rules/groups.yaml" <<'PY'
import sys, yaml
rules = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "PrometheusRule"]
assert len(rules) == 1, f"{len(rules)} PrometheusRules in install --print --prometheus-rule"
groups = rules[0]["spec"]["groups"]
assert groups == yaml.safe_load(open(sys.argv[2]))["groups"], "the PrometheusRule's groups differ from alerts/slurmops.rules.yaml's"
yaml.safe_dump({"groups": groups}, open(sys.argv[3], "w"))
PY
  promtool check rules "$rules/groups.yaml"
  rm -rf "$rules"
  echo
  echo "== a manifest scanner over what slurmops renders: Checkov 3.3.30, every finding listed with why in tests/checkov-skips.yaml"
  # Its own venv: Checkov pins dependencies of its own.
  [ -x .venv-checkov/bin/checkov ] || { python3 -m venv .venv-checkov && .venv-checkov/bin/pip install -q checkov==3.3.30; }
  scan=$(mktemp -d)
  "$bin" install --print --prometheus-rule --grafana-dashboard --repo https://git.example/infra.git --namespace slurmops \
    --cluster-namespace slurm --git-secret git --webhook-secret webhook > "$scan/install.yaml" 2>/dev/null
  inputs=("$scan/install.yaml")
  for ex in examples/*/; do
    ex=$(basename "$ex")
    [ -f "examples/$ex/cluster.yaml" ] || continue
    "$bin" render "examples/$ex" --output-dir "$scan/$ex" >/dev/null 2>&1
    inputs+=("$scan/$ex")
  done
  .venv-checkov/bin/python3 tests/checkov.py .venv-checkov/bin/checkov tests/checkov-skips.yaml "${inputs[@]}"
  rm -rf "$scan"
  echo
  echo "== the docs as a book (mdbook build docs), every link of it leading somewhere"
  book=$(mktemp -d)
  mdbook build docs --dest-dir "$book"
  python3 tests/book-links.py "$book"
  rm -rf "$book"
) > "$side_log" 2>&1 &
side=$!

# The scale test (a thousand Nodes and worker pods on the shared apiserver, twenty thousand jobs)
# runs alone, after the others, so that its load slows no other test and its figures are its own.
# Twice as many tests at once as cores: a bed test spends most of its time waiting for Slurm, the
# kubelets and its daemon (a cold run on 2 cores measured the test step's CPU mostly idle).
cargo nextest run --target "$triple" --no-fail-fast --test-threads "$(( $(nproc) * 2 ))" -E 'not test(/^scale::/)'

step "scale goals: 1,000 workers, 20,000 jobs (tests/e2e/scale.rs; each goal of issue 32 within 2x)"
cargo nextest run --target "$triple" --no-fail-fast -E 'test(/^scale::/)'

step "beside the tests: clippy, the rendered objects against the Kubernetes schemas, the alert rules, the docs as a book"
wait "$side" && cat "$side_log" || { cat "$side_log"; echo "a check run beside the tests failed (above)" >&2; exit 1; }

step "artifacts: screenshots of the live view (tests/e2e/view.rs, tests/offline/page.rs) and of Prometheus's graph of a rollout (tests/e2e/prometheus.rs)"
# Beside the build they come from: with --target, under target/TRIPLE/.
shots="${CARGO_TARGET_DIR:-target}/$triple/artifacts/page"
for f in bed-idle bed-waiting bed-canary-failed bed-canary-failed-phone-dark view-1280-light view-1280-dark view-phone-light view-phone-dark prometheus-rollout-24_11 prometheus-rollout-26_05; do
  [ -s "$shots/$f.png" ] || { echo "missing screenshot $shots/$f.png" >&2; exit 1; }
done
ls -l "$shots"
echo "all checks passed in $SECONDS s"
