#!/usr/bin/env bash
# A Slurm instance the size slurmops is sold for, for the benchmark (`tests/bench.sh queue`): its
# own slurmctld and slurmrestd (instance "scale", Slurm $SLURM_RELEASE, default 24.11), holding
# SETS x PER node records NAME-ORDINAL of NodeSets s000, s001, ... (static records without a
# slurmd: Slurm lists and keeps them, DOWN once they do not answer, as a worker that is gone),
# all in partition "all", and room for 200,000 jobs (MaxJobCount). Each record has its own
# loopback address (127.x.y.z), where its slurmd listens once one is started (NoInAddrAny; the
# instance's hosts file names each address), as a replaced worker pod's slurmd registers.
#   scale.sh up SETS PER     start it afresh; prints SCALE_RESTD_URL=... and SCALE_JWT=...
#   scale.sh slurmd NAME...  start the slurmd of records NAME... (a replaced worker's pod)
#   scale.sh stop-slurmd NAME...  stop them
#   scale.sh down            stop it (and every slurmd started)
# Ports: slurmctld 16847, slurmrestd 16850.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RUN=${SLURMOPS_BED_RUN:-/tmp/slurmops-bed}/scale
case "${1:-}" in
  up)
    sets=${2:?SETS}; per=${3:?PER}
    [ "$per" -le 254 ] || { echo "scale.sh: at most 254 workers per NodeSet" >&2; exit 2; }
    mkdir -p "$RUN"; conf=$RUN/conf; rm -rf "$conf"; mkdir -p "$conf"
    {
      cat <<CONF
ClusterName=scale
SlurmctldHost=localhost
SlurmctldPort=16847
SlurmdPort=16848
StateSaveLocation=/var/spool/slurm-scale/ctld
SlurmctldPidFile=/run/slurm-scale/slurmctld.pid
SlurmdPidFile=/run/slurm-scale/slurmd-%n.pid
SlurmUser=slurm
SlurmdUser=root
SlurmdSpoolDir=/var/spool/slurmd
AuthType=auth/slurm
CredType=cred/slurm
AuthInfo=use_client_ids
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm-scale/jwt_hs256.key
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MaxJobCount=200000
SlurmdTimeout=30
ReturnToService=2
# A worker's slurmd listens on its record's own address (this host has one CPU count, the
# records another: their declared size stands).
CommunicationParameters=NoInAddrAny
SlurmdParameters=config_overrides
CONF
      for ((s = 0; s < sets; s++)); do
        # Loopback addresses, one per record: nothing to resolve, nothing answers.
        printf 'NodeName=s%03d-[0-%d] NodeAddr=127.%d.%d.[1-%d] CPUs=8 RealMemory=1000 Features=s%03d State=UNKNOWN\n' \
          "$s" $((per - 1)) $((1 + s / 256)) $((s % 256)) "$per" "$s"
      done
      echo "PartitionName=all Nodes=ALL Default=YES State=UP"
    } > "$conf/slurm.conf"
    {
      echo "127.0.0.1 localhost"
      for ((s = 0; s < sets; s++)); do
        for ((i = 0; i < per; i++)); do
          printf '127.%d.%d.%d s%03d-%d\n' $((1 + s / 256)) $((s % 256)) $((i + 1)) "$s" "$i"
        done
      done
    } > "$RUN/hosts"
    echo "CgroupPlugin=disabled" > "$conf/cgroup.conf"
    "$HERE/slurm.sh" stop scale >/dev/null 2>&1 || true
    "$HERE/slurm.sh" start-ctld scale "$conf" >&2
    "$HERE/slurm.sh" start-restd scale 16850 >&2
    echo "SCALE_RESTD_URL=http://127.0.0.1:16850"
    echo "SCALE_JWT=$("$HERE/slurm.sh" token scale root)"
    ;;
  slurmd) shift; "$HERE/slurm.sh" start-nodes scale "$RUN/hosts" "$@" ;;
  stop-slurmd) shift; "$HERE/slurm.sh" stop-nodes scale "$@" ;;
  down) "$HERE/slurm.sh" stop scale ;;
  *) sed -n '2,13p' "$0" >&2; exit 2 ;;
esac
