#!/usr/bin/env bash
# The whole test bed on 127.0.0.1: Kubernetes control plane (kube.sh), git servers (git.sh) and one
# shared Slurm 24.11 instance "bed" (slurm.sh) with slurmctld and slurmrestd.
#   bed.sh prepare            build or fetch every slow part (cached): Slurm chroot, kube binaries,
#                             openssh-server. Fails loudly, naming the part.
#   bed.sh up SLURM_CONF_DIR  start whatever is not running (idempotent, serialized by a lock) and
#                             print the env lines tests read. SLURM_CONF_DIR holds the slurm.conf the
#                             tests rendered from tests/bed/cluster.yaml with the test-host overlay.
#   bed.sh down               stop everything by PID.
# Ports: apiserver 16443, slurmctld 16817, slurmrestd 16820, git 19418 / 18080 / 12222.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export SLURMOPS_BED_RUN=${SLURMOPS_BED_RUN:-/tmp/slurmops-bed}
CTLD_PORT=16817
REST_PORT=16820
mkdir -p "$SLURMOPS_BED_RUN"
part() { echo "[bed] $1" >&2; }

case "${1:-}" in
  prepare)
    part "Slurm chroot"; "$HERE/slurm-chroot.sh" >/dev/null || { part "FAILED: Slurm chroot"; exit 1; }
    part "kube-apiserver + kube-controller-manager"; "$HERE/kube-build.sh" >/dev/null || { part "FAILED: kube binaries"; exit 1; }
    part "git servers"; "$HERE/git.sh" prepare || { part "FAILED: openssh-server"; exit 1; }
    ;;
  up)
    conf=${2:?bed.sh up SLURM_CONF_DIR}
    # -o: the daemons started under the lock must not inherit (and so hold) it.
    exec flock -o "$SLURMOPS_BED_RUN/bed.lock" "$0" up-locked "$conf"
    ;;
  up-locked)
    conf=$2
    env_file=$SLURMOPS_BED_RUN/bed.env
    {
      "$HERE/kube.sh" up || { part "FAILED: Kubernetes (logs in $SLURMOPS_BED_RUN/kube)"; exit 1; }
      "$HERE/git.sh" up || { part "FAILED: git servers (logs in $SLURMOPS_BED_RUN/git)"; exit 1; }
      S=$SLURMOPS_BED_RUN/slurm/bed
      if ! { [ -f "$S/slurmctld.pid" ] && kill -0 "$(cat "$S/slurmctld.pid")" 2>/dev/null; }; then
        "$HERE/slurm.sh" start-ctld bed "$conf" || { part "FAILED: slurmctld (log: $S/slurmctld.out)"; exit 1; }
      fi
      if ! { [ -f "$S/slurmrestd.pid" ] && kill -0 "$(cat "$S/slurmrestd.pid")" 2>/dev/null; }; then
        "$HERE/slurm.sh" start-restd bed "$REST_PORT" || { part "FAILED: slurmrestd (log: $S/slurmrestd.out)"; exit 1; }
      fi
      token=$("$HERE/slurm.sh" token bed root)
      [ -n "$token" ] || { part "FAILED: scontrol token (JWT)"; exit 1; }
      echo "SLURMCTLD_PORT=$CTLD_PORT"
      echo "SLURMRESTD_URL=http://127.0.0.1:$REST_PORT"
      echo "SLURM_JWT=$token"
    } > "$env_file.tmp"
    mv "$env_file.tmp" "$env_file"
    cat "$env_file"
    ;;
  down)
    "$HERE/slurm.sh" down || true
    "$HERE/git.sh" down || true
    "$HERE/kube.sh" down || true
    ;;
  *) sed -n '2,11p' "$0" >&2; exit 2 ;;
esac
