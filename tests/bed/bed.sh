#!/usr/bin/env bash
# The whole test bed on 127.0.0.1: Kubernetes control plane (kube.sh), git servers (git.sh) and one
# shared Slurm instance per release the bed runs (slurm.sh), each with slurmctld and slurmrestd:
# "bed" runs Slurm 24.11, "bed2511" Slurm 25.11 (built from source), "bed2605" Slurm 26.05.
#   bed.sh prepare            build or fetch every slow part (cached): every Slurm chroot, kube
#                             binaries, openssh-server, the real node's containerd (node.sh) and
#                             the images its pods run (images.sh), the cgroup v2 guest's image
#                             (vm.sh; its failure fails only the cgroup v2 tests).
#                             Fails loudly, naming the part.
#   bed.sh up CONF_24_11 CONF_25_11 CONF_26_05
#                             start whatever is not running (idempotent, serialized by a lock) and
#                             print the env lines tests read. Each CONF dir holds the slurm.conf the
#                             tests rendered from tests/bed/cluster.yaml for that release, with the
#                             test-host overlay.
#   bed.sh down               stop everything by PID, the real node (node.sh) too.
# MariaDB (accounting tests: each starts its own slurmdbd and slurmctld against it) on 13306.
# Ports: apiserver 16443; Slurm 24.11 slurmctld 16817, slurmrestd 16820; Slurm 26.05 slurmctld
# 16827, slurmrestd 16830; Slurm 25.11 slurmctld 16837, slurmrestd 16840; git 19418 / 18080 / 12222.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export SLURMOPS_BED_RUN=${SLURMOPS_BED_RUN:-/tmp/slurmops-bed}
RELEASES="24.11 25.11 26.05"
mkdir -p "$SLURMOPS_BED_RUN"
part() { echo "[bed] $1" >&2; }
# instance, slurmctld port and slurmrestd port of a release
instance() { case $1 in 24.11) echo bed ;; 25.11) echo bed2511 ;; 26.05) echo bed2605 ;; esac; }
ctld_port() { case $1 in 24.11) echo 16817 ;; 25.11) echo 16837 ;; 26.05) echo 16827 ;; esac; }
rest_port() { case $1 in 24.11) echo 16820 ;; 25.11) echo 16840 ;; 26.05) echo 16830 ;; esac; }

# Starts the Slurm instance of release $1 with the config in dir $2 unless it runs; prints its env.
slurm_up() {
  local rel=$1 conf=$2 inst S tag token
  inst=$(instance "$rel"); S=$SLURMOPS_BED_RUN/slurm/$inst; tag=${rel/./_}
  if ! { [ -f "$S/slurmctld.pid" ] && kill -0 "$(cat "$S/slurmctld.pid")" 2>/dev/null; }; then
    SLURM_RELEASE=$rel "$HERE/slurm.sh" start-ctld "$inst" "$conf" \
      || { part "FAILED: slurmctld $rel (log: $S/slurmctld.out)"; return 1; }
  fi
  if ! { [ -f "$S/slurmrestd.pid" ] && kill -0 "$(cat "$S/slurmrestd.pid")" 2>/dev/null; }; then
    "$HERE/slurm.sh" start-restd "$inst" "$(rest_port "$rel")" \
      || { part "FAILED: slurmrestd $rel (log: $S/slurmrestd.out)"; return 1; }
  fi
  token=$("$HERE/slurm.sh" token "$inst" root)
  [ -n "$token" ] || { part "FAILED: scontrol token (JWT) on Slurm $rel"; return 1; }
  echo "SLURM_${tag}_INSTANCE=$inst"
  echo "SLURM_${tag}_CTLD_PORT=$(ctld_port "$rel")"
  echo "SLURM_${tag}_RESTD_URL=http://127.0.0.1:$(rest_port "$rel")"
  echo "SLURM_${tag}_JWT=$token"
}

case "${1:-}" in
  prepare)
    # The host's packages first, one apt at a time; then the slow builds side by side (the chroots'
    # apt runs inside each chroot, and releases of one Debian suite take turns on its lock): on a
    # cold machine the downloads of one overlap the compilers of another.
    part "git servers (at $SECONDS s)"; "$HERE/git.sh" prepare || { part "FAILED: openssh-server"; exit 1; }
    part "real node (containerd, runc, CNI plugins; at $SECONDS s)"; "$HERE/node.sh" prepare || { part "FAILED: the real node's packages"; exit 1; }
    jobs=()
    for rel in $RELEASES; do
      { part "Slurm $rel chroot"; "$HERE/slurm-chroot.sh" "$rel" >/dev/null || { part "FAILED: Slurm $rel chroot"; exit 1; }; part "Slurm $rel chroot: done at $SECONDS s"; } &
      jobs+=("$!:Slurm $rel chroot")
    done
    { part "Kubernetes binaries"; "$HERE/kube-build.sh" >/dev/null || { part "FAILED: kube binaries"; exit 1; }; part "Kubernetes binaries: done at $SECONDS s"; } &
    jobs+=("$!:Kubernetes binaries")
    { part "images (Slurm 24.11, MariaDB)"; "$HERE/images.sh" >/dev/null || { part "FAILED: images"; exit 1; }; part "images: done at $SECONDS s"; } &
    jobs+=("$!:images")
    # The cgroup v2 guest's image (debootstrap, 2 minutes cold): a failure here fails only the
    # cgroup v2 tests, which say why (as a QEMU that could not be installed does).
    { part "cgroup v2 guest image"; if "$HERE/vm.sh" prepare >/dev/null; then part "cgroup v2 guest image: done at $SECONDS s"; else part "cgroup v2 guest image FAILED: the cgroup v2 tests will fail"; fi; } &
    jobs+=("$!:cgroup v2 guest image")
    failed=
    for j in "${jobs[@]}"; do wait "${j%%:*}" || failed="$failed, ${j#*:}"; done
    [ -z "$failed" ] || { part "FAILED: ${failed#, }"; exit 1; }
    part "ready (at $SECONDS s)"
    ;;
  up)
    shift
    [ $# -eq "$(wc -w <<< "$RELEASES")" ] || { sed -n '2,16p' "$0" >&2; exit 2; }
    # -o: the daemons started under the lock must not inherit (and so hold) it.
    exec flock -o "$SLURMOPS_BED_RUN/bed.lock" "$0" up-locked "$@"
    ;;
  up-locked)
    env_file=$SLURMOPS_BED_RUN/bed.env
    {
      "$HERE/kube.sh" up || { part "FAILED: Kubernetes (logs in $SLURMOPS_BED_RUN/kube)"; exit 1; }
      "$HERE/git.sh" up || { part "FAILED: git servers (logs in $SLURMOPS_BED_RUN/git)"; exit 1; }
      S=$SLURMOPS_BED_RUN/slurm/mariadb
      if ! { [ -f "$S/mariadbd.pid" ] && kill -0 "$(cat "$S/mariadbd.pid")" 2>/dev/null; }; then
        "$HERE/slurm.sh" start-mariadb mariadb 13306 >&2 || { part "FAILED: MariaDB (log: $S/mariadbd.out)"; exit 1; }
      fi
      echo "MARIADB_PORT=13306"
      shift
      for rel in $RELEASES; do
        slurm_up "$rel" "$1" || exit 1
        shift
      done
    } > "$env_file.tmp"
    mv "$env_file.tmp" "$env_file"
    cat "$env_file"
    ;;
  down)
    "$HERE/vm.sh" down || true
    "$HERE/node.sh" down || true
    "$HERE/slurm.sh" down || true
    "$HERE/git.sh" down || true
    "$HERE/kube.sh" down || true
    ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
