#!/usr/bin/env bash
# The GPU path on a real GPU, in one call (issue 57): on a machine with an NVIDIA GPU, CUDA at
# /usr/local/cuda, NCCL in the Python environment that holds PyTorch, root, and no network.
# 1. builds Slurm 25.11 from the packed tarball (NVML found in CUDA; no munge there, so the
#    daemons use auth/none on loopback: this run proves the GPU path, not authentication) and
#    nccl-tests' all_reduce_perf;
# 2. starts slurmctld and one dynamic slurmd named as the NodeSet's first worker, with the
#    gres.conf slurmops rendered (AutoDetect=nvml) and cgroup.conf unchanged, slurm.conf's
#    GPU, license, NodeSet and partition lines as rendered, and slurmd's --conf from the
#    rendered StatefulSet; only the addresses, auth, paths and users are this machine's (and,
#    where Slurm's cgroup/v2 plugin cannot run here, no cgroup confinement: said in results);
# 3. submits, as the unprivileged user `daemon` (as slurmops does), jobs that show what a job is
#    given (exclusive with no GRES request, one GPU, shared with none), then the rendered gpu
#    and nccl check jobs and the canary's validation job (jobs/*.sbatch from `render
#    --output-dir`), draining the node when a check reports a failure, as slurmops does;
# 4. writes under OUT (5 files): machine.txt, results.txt (each job's record: state, exit code,
#    the comment its wrapper reported, AllocTRES, its GRES; the node's state and reason; what
#    slurmd's NVML detection found), tools.txt (the tools' own output on this GPU: fixtures for
#    the parsers), slurm.log (the daemons' logs), build.log (the builds' tails).
# Every step is bounded in time (the whole within 8 minutes on 16 cores); it waits on named
# PIDs only.
# Usage: bash tests/gpu/run.sh PACK_DIR OUT_DIR   (PACK_DIR: made here by tests/gpu/pack.sh)
set -uo pipefail
pack=$(realpath "${1:?usage: run.sh PACK_DIR OUT_DIR}")
out=$(realpath -m "${2:?usage: run.sh PACK_DIR OUT_DIR}")
mkdir -p "$out"
w=/tmp/slurmops-gpu
prefix=$w/slurm
r=$pack/rendered
start=$(date +%s)
deadline=$((start + 460))
say() { echo "[gpu $(($(date +%s) - start))s] $*" | tee -a "$out/results.txt"; }
pids=()
stop_slurm() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  pids=()
}
finish() {
  stop_slurm
  [ -d "$w/log" ] && tail -n 150 "$w"/log/slurm*.log "$w"/log/*.out > "$out/slurm.log" 2>/dev/null
  say "done"
}
fail() { say "STOPPED: $*"; finish; exit 1; }
: > "$out/results.txt"

# The machine.
{
  echo "date: $(date -u +%FT%TZ)"; uname -a; echo "cores: $(nproc)"; free -g | sed -n 2p
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv 2>&1
  echo "cgroup: $(stat -fc %T /sys/fs/cgroup)"
  for t in nvidia-smi dcgmi ibstat nvcc python3 gcc make pkg-config; do echo "$t: $(command -v $t || echo missing)"; done
  cat "$r/slurmops-version"
} > "$out/machine.txt" 2>&1
command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: this script needs a machine with an NVIDIA GPU"
rm -rf "$w" && mkdir -p "$w"/{src,log,state,spool,run,etc,nccl/lib} || fail "cannot make $w"
chmod 1777 "$w"

# The driver's libraries in the loader's cache: slurmd's NVML, and jobs, which carry PATH alone.
drv=
for d in ${LD_LIBRARY_PATH//:/ } /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu; do
  [ -e "$d/libnvidia-ml.so.1" ] && { drv=$d; break; }
done
[ -n "$drv" ] || drv=$(dirname "$(find / -name libnvidia-ml.so.1 -not -path '*/stubs/*' 2>/dev/null | head -n1)")
[ -n "$drv" ] && [ "$drv" != . ] || fail "libnvidia-ml.so.1 not found"
echo "$drv" > /etc/ld.so.conf.d/000-slurmops-gpu.conf && ldconfig
ldconfig -p | grep -E 'libcuda.so.1|libnvidia-ml.so.1' >> "$out/machine.txt"
# nvidia-smi where a GPU node image has it, when the driver's folder is elsewhere.
case "$(command -v nvidia-smi)" in /usr/bin/*|/usr/local/bin/*|/bin/*) ;; *) ln -sf "$(command -v nvidia-smi)" /usr/local/bin/nvidia-smi;; esac

# nccl-tests' all_reduce_perf against the NCCL PyTorch carries, built beside Slurm.
nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null) || nccl=
[ -n "$nccl" ] && [ -d "$nccl/include" ] || fail "NCCL not found in python3's nvidia.nccl"
cp -L "$(ls "$nccl"/lib/libnccl.so* | head -n1)" "$w/nccl/lib/libnccl.so.2" && ln -s libnccl.so.2 "$w/nccl/lib/libnccl.so"
ln -s "$nccl/include" "$w/nccl/include"
nt=$w/src/nccl-tests
mkdir -p "$nt" && tar -xzf "$pack/nccl-tests-2.19.6.tar.gz" -C "$nt" || fail "unpacking nccl-tests"
timeout 300 make -C "$nt/src" MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME="$w/nccl" BIN_FILES_LIST=all_reduce \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$w/log/nccl-tests.log" 2>&1 &
nccl_build=$!

# D-Bus from the pack (cgroup/v2 builds only with it), as a pkg-config package of its own.
db=$w/dbus
mkdir -p "$db/pkgconfig" "$db/lib"
cp -a "$pack"/sysroot/lib/x86_64-linux-gnu/libdbus-1.so.3* "$db/lib/" && ln -s libdbus-1.so.3 "$db/lib/libdbus-1.so"
cat > "$db/pkgconfig/dbus-1.pc" <<EOF
Name: dbus
Description: D-Bus from tests/gpu/pack.sh
Version: 1.14.10
Libs: -L$db/lib -Wl,-rpath,$db/lib -ldbus-1
Cflags: -I$pack/sysroot/usr/include/dbus-1.0 -I$pack/sysroot/usr/lib/x86_64-linux-gnu/dbus-1.0/include
EOF

# Slurm 25.11 with NVML.
say "building Slurm 25.11 and nccl-tests"
tar -xJf "$pack/slurm-25.11.7.tar.xz" -C "$w/src" || fail "unpacking Slurm"
(
  cd "$w/src/slurm-25.11.7" &&
  PKG_CONFIG_PATH=$db/pkgconfig timeout 120 ./configure --prefix="$prefix" --sysconfdir="$w/etc" \
    --without-munge --with-nvml=/usr/local/cuda --disable-debug --disable-static >"$w/log/configure.log" 2>&1 &&
  timeout 300 make -j"$(nproc)" >"$w/log/make.log" 2>&1 &&
  timeout 120 make install >"$w/log/install.log" 2>&1
)
built=$?
wait "$nccl_build"; nccl_built=$?
{
  grep -E "nvml|dbus|bpf|cgroup" "$w/log/configure.log" | tail -n 20
  for f in gpu_nvml cgroup_v2 auth_none cred_none; do
    [ -f "$prefix/lib/slurm/$f.so" ] && echo "plugin: $f" || echo "plugin: $f MISSING"
  done
  [ "$built" = 0 ] || tail -n 40 "$w"/log/{configure,make,install}.log
  [ "$nccl_built" = 0 ] || tail -n 30 "$w/log/nccl-tests.log"
} > "$out/build.log" 2>&1
[ "$built" = 0 ] || fail "Slurm's build (build.log)"
[ "$nccl_built" = 0 ] || fail "nccl-tests' build (build.log)"
[ -f "$prefix/lib/slurm/gpu_nvml.so" ] || fail "Slurm built without NVML (build.log)"
# Where a worker image has them: on the PATH of slurmops' jobs (PATH alone).
for t in scontrol srun sbatch squeue scancel; do ln -sf "$prefix/bin/$t" /usr/local/bin/$t; done
cat > /usr/local/bin/all_reduce_perf <<EOF
#!/bin/sh
LD_LIBRARY_PATH=$w/nccl/lib:/usr/local/cuda/lib64\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec $nt/build/all_reduce_perf "\$@"
EOF
chmod +x /usr/local/bin/all_reduce_perf
say "built"

# The tools' own output on this GPU: what the checks parse.
{
  for q in "-L" "--query-gpu=index,name,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,remapped_rows.failure,pcie.link.width.current,pcie.link.width.max --format=csv,nounits" \
    "--query-gpu=index,clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown,clocks_event_reasons.active --format=csv,nounits" \
    "--query-gpu=index,clocks_throttle_reasons.hw_slowdown,clocks_throttle_reasons.active --format=csv,nounits"; do
    echo "##### nvidia-smi $q"; timeout 60 nvidia-smi $q 2>&1; echo "(exit $?)"
  done
  echo "##### all_reduce_perf -b 8M -e 1G -f 2 -g 1"; timeout 120 all_reduce_perf -b 8M -e 1G -f 2 -g 1 2>&1; echo "(exit $?)"
  echo "##### dmesg | grep -c NVRM"; timeout 10 dmesg 2>&1 | grep -c NVRM
} > "$out/tools.txt" 2>&1
say "tools captured"

# slurm.conf: the rendered one, this machine's addresses, auth, paths and users.
host=$(hostname -s)
conf=$(cat "$r/slurmd-conf")
export SLURM_CONF=$w/etc/slurm.conf PATH=$prefix/bin:$prefix/sbin:$PATH
cgroup=yes
if [ ! -f "$prefix/lib/slurm/cgroup_v2.so" ] || [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ] ||
   ldd "$prefix/lib/slurm/cgroup_v2.so" | grep -q 'not found'; then cgroup=no; fi
start_slurm() { # with cgroup confinement as rendered ($cgroup=yes) or none
  sed -e "s|^SlurmctldHost=.*|SlurmctldHost=$host(127.0.0.1)|" -e "s|^SlurmUser=.*|SlurmUser=root|" \
    -e "s|^StateSaveLocation=.*|StateSaveLocation=$w/state|" -e "s|^SlurmdSpoolDir=.*|SlurmdSpoolDir=$w/spool|" \
    -e "s|^SlurmctldPidFile=.*|SlurmctldPidFile=$w/run/slurmctld.pid|" -e "s|^SlurmdPidFile=.*|SlurmdPidFile=$w/run/slurmd.pid|" \
    -e "s|^AuthType=.*|AuthType=auth/none|" -e "s|^CredType=.*|CredType=cred/none|" \
    -e "/^AuthInfo=/d" -e "/^AuthAlt/d" -e "s|^SlurmctldParameters=.*|SlurmctldParameters=enable_configless|" \
    "$r/slurm/slurm.conf" > "$w/etc/slurm.conf"
  printf '%s\n' "SlurmctldLogFile=$w/log/slurmctld.log" "SlurmdLogFile=$w/log/slurmd.log" "SlurmdDebug=debug" \
    "DebugFlags=Gres" >> "$w/etc/slurm.conf"
  cp "$r/slurm/gres.conf" "$w/etc/gres.conf"
  if [ "$cgroup" = yes ]; then
    cp "$r/slurm/cgroup.conf" "$w/etc/cgroup.conf"
  else
    echo "CgroupPlugin=disabled" > "$w/etc/cgroup.conf"
    sed -i -e "s|^ProctrackType=.*|ProctrackType=proctrack/linuxproc|" -e "s|^TaskPlugin=.*|TaskPlugin=task/affinity|" \
      -e "s|^JobAcctGatherType=.*|JobAcctGatherType=jobacct_gather/linux|" "$w/etc/slurm.conf"
  fi
  rm -rf "$w/state"/* "$w/spool"/*
  slurmctld -D -i >"$w/log/slurmctld-$cgroup.out" 2>&1 & pids+=($!)
  for _ in $(seq 30); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 1; done
  scontrol ping 2>/dev/null | grep -q UP || return 1
  slurmd -D -Z -N h200-0 --conf "$conf" >"$w/log/slurmd-$cgroup.out" 2>&1 & pids+=($!)
  local d=$!
  for _ in $(seq 40); do
    kill -0 "$d" 2>/dev/null || return 1
    scontrol show node h200-0 2>/dev/null | grep -q 'State=IDLE' && return 0
    sleep 1
  done
  return 1
}
say "slurmd --conf (rendered): $conf"
if ! start_slurm; then
  stop_slurm
  [ "$cgroup" = yes ] || fail "Slurm did not start (slurm.log)"
  say "Slurm did not start with cgroup/v2 here (slurm.log): again without cgroup confinement"
  cgroup=no
  start_slurm || fail "Slurm did not start (slurm.log)"
fi
say "cgroup confinement (ConstrainDevices as rendered): $cgroup"
scontrol show node h200-0 >> "$out/results.txt" 2>&1
scontrol show node h200-0 | grep -q 'Gres=gpu:h200:1' || fail "h200-0 registered without its GPU (slurm.log)"
grep -iE 'nvml|/dev/nvidia|gres.*count' "$w/log/slurmd.log" | tail -n 12 >> "$out/results.txt"
grep -q '/dev/nvidia' "$w/log/slurmd.log" && say "NVML found the GPU's device file" || say "NVML named no /dev/nvidia file (slurmd.log)"
# Registered drained, as rendered for a NodeSet whose checks hold new workers; slurmops resumes
# it once its check jobs are submitted.
scontrol show node h200-0 | grep -q 'Reason=slurmops: checks pending' && say "registered drained: checks pending (as rendered)"
scontrol update NodeName=h200-0 State=RESUME

job() { # LABEL SCRIPT_FILE SBATCH_ARGS...: sent as daemon, followed to its end, recorded
  local label=$1 file=$2 id shown drained=
  shift 2
  id=$(cd /tmp && runuser -u daemon -- sbatch --parsable -w h200-0 "$@" < "$file" 2>"$w/log/sbatch-$label.err") ||
    { say "$label: sbatch failed: $(tail -n 2 "$w/log/sbatch-$label.err")"; return; }
  id=${id%%;*}
  while [ "$(date +%s)" -lt "$deadline" ]; do
    shown=$(scontrol show job "$id" 2>/dev/null)
    echo "$shown" | grep -qE 'JobState=(PENDING|CONFIGURING|RUNNING|COMPLETING)' || break
    # A failed check's job waits for its node's drain (slurmops drains it from the report).
    if [ -z "$drained" ] && echo "$shown" | grep -qE 'Comment=slurmops-[a-z]+ rc=[1-9]'; then
      scontrol update NodeName=h200-0 State=DRAIN Reason="slurmops: check failed (run.sh drains as slurmops does)"
      drained=1
    fi
    sleep 1
  done
  [ "$(date +%s)" -lt "$deadline" ] || { scancel "$id"; say "$label: out of time, cancelled"; }
  say "job $label ($id):"
  scontrol -d show job "$id" 2>&1 | grep -E 'JobState|Comment|AllocTRES|TresPerNode|GRES|OverSubscribe|ExitCode' >> "$out/results.txt"
  [ -f "$w/$label.out" ] && sed 's/^/    /' "$w/$label.out" >> "$out/results.txt"
  if [ -n "$drained" ]; then scontrol update NodeName=h200-0 State=RESUME; fi
}
printf '%s\n' '#!/bin/bash' 'echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset} SLURM_JOB_GPUS=${SLURM_JOB_GPUS-unset}"' \
  'nvidia-smi -L 2>&1' > "$w/see.sh"
for j in "see-exclusive-no-gres --exclusive" "see-one-gpu --gres=gpu:1" "see-shared-no-gres --oversubscribe"; do
  set -- $j
  job "$1" "$w/see.sh" -J "$1" --chdir=/tmp -o "$w/$1.out" "${@:2}"
done
# The rendered jobs, as slurmops submits them (the file's own options; -w names this node).
for f in check-gpu-h200 check-nccl-h200 canary-h200; do
  job "$f" "$r/jobs/$f.sbatch"
done
scontrol show node h200-0 | grep -E 'State=|Reason=' >> "$out/results.txt"
finish
