//! The one catalogue of the scripts slurmops ships, for canaries and active checks alike: a
//! canary's `validate.builtin` (`hostname`, `gpu`, `nccl`) and an active check's (`gpu`,
//! `nccl`, `ib`), as a node runs it, alone or across the nodes of its job. Their common steps
//! (a tool missing, the GPUs seen) are written once. A check's prints its figure as
//! `slurmops-value: X`; the wrapper judges it.

use crate::cluster::active_checks::{ActiveCheck, CheckBuiltin, CheckSpan};
use crate::cluster::canary::{Builtin, ValidateNodes};

/// The step every built-in starts with: TOOL is there, or the node fails.
fn need(tool: &str) -> String {
    format!(
        r#"command -v {tool} >/dev/null || {{ echo "{tool} not found on $(hostname)" >&2; exit 1; }}"#
    )
}

/// nvidia-smi sees at least WANT GPUs (`$n`: how many it sees).
fn gpus_seen(want: u32) -> String {
    format!(
        r#"{}
n=$(nvidia-smi -L | grep -c '^GPU') || {{ echo "nvidia-smi -L failed on $(hostname)" >&2; exit 1; }}
[ "$n" -ge {want} ] || {{ echo "$(hostname) sees $n GPUs, expected {want}" >&2; exit 1; }}"#,
        need("nvidia-smi")
    )
}

/// A canary's built-in check on a worker with GPUS GPUs. Under `allCanaries` the job runs it on
/// every canary with srun.
pub fn canary_builtin(b: Builtin, nodes: ValidateNodes, gpus: u32) -> String {
    let one = match b {
        Builtin::Hostname => r#"h=$(hostname); echo "$h runs jobs"
[ -z "$SLURMD_NODENAME" ] || [ "$h" = "$SLURMD_NODENAME" ] || { echo "hostname $h is not the Slurm node name $SLURMD_NODENAME" >&2; exit 1; }"#
            .to_string(),
        Builtin::Gpu => gpus_seen(gpus) + "\n" + r#"echo "$(hostname): $n GPUs""#,
        Builtin::Nccl => format!(
            r#"{}
out=$(all_reduce_perf -b 8M -e 256M -f 2 -g {} 2>&1); echo "$out"
echo "$out" | grep -q 'Avg bus bandwidth' || {{ echo "all_reduce_perf failed on $(hostname)" >&2; exit 1; }}"#,
            need("all_reduce_perf"),
            gpus.max(1)
        ),
    };
    match nodes {
        ValidateNodes::PerNode => format!("#!/bin/bash\n{one}\n"),
        ValidateNodes::AllCanaries => format!(
            "#!/bin/bash\nsrun --ntasks-per-node=1 bash -c {}\n",
            shell_quote(&one)
        ),
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script of check C on a worker with GPUS GPUs.
pub fn check(c: &ActiveCheck, gpus: u32) -> String {
    match (c.builtin, &c.script) {
        (Some(b), _) => check_builtin(b, c.level.unwrap_or(1), gpus, c.span),
        (None, Some(s)) => s.clone(),
        (None, None) => "echo 'no check script' >&2; exit 1".into(),
    }
}

/// The checks slurmops ships, as a GPU node runs them (SPAN: alone, or across the nodes of the
/// job). Each prints its figure as `slurmops-value: X`.
pub fn check_builtin(b: CheckBuiltin, level: u8, gpus: u32, span: CheckSpan) -> String {
    let want = gpus.max(1);
    let body = match (b, span) {
        // One MPI rank per GPU on every node of the job (nccl-tests built with MPI=1).
        (CheckBuiltin::Nccl, CheckSpan::Block | CheckSpan::Pair) => format!(
            r#"{need}
out=$(srun --mpi=pmix --ntasks-per-node={want} all_reduce_perf -b 8M -e 1G -f 2 -g 1 2>&1); rc=$?; echo "$out"
bw=$(echo "$out" | sed -n 's/^# *Avg bus bandwidth *: *\([0-9.]*\).*/\1/p' | tail -n1)
[ "$rc" = 0 ] && [ -n "$bw" ] || {{ echo "all_reduce_perf across $SLURM_JOB_NODELIST failed" >&2; exit 1; }}
echo "slurmops-value: $bw""#,
            need = need("all_reduce_perf")
        ),
        // RDMA write bandwidth from each other node of the job to the first (perftest's
        // ib_write_bw); the lowest is the figure.
        (CheckBuiltin::Ib, CheckSpan::Pair) => {
            need("ib_write_bw")
                + "\n"
                + r#"nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
[ "${#nodes[@]}" -ge 2 ] || { echo "the pair check needs 2 nodes, got ${#nodes[@]}" >&2; exit 1; }
addr=$(scontrol show node "${nodes[0]}" | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
low=
for peer in "${nodes[@]:1}"; do
  srun -N1 -n1 -w "${nodes[0]}" ib_write_bw --report_gbits -D 10 >/dev/null 2>&1 & server=$!
  sleep 2
  out=$(srun -N1 -n1 -w "$peer" ib_write_bw --report_gbits -D 10 "${addr:-${nodes[0]}}" 2>&1); rc=$?; echo "$out"
  wait $server
  bw=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = $4 } END { print v }')
  [ "$rc" = 0 ] && [ -n "$bw" ] || { echo "ib_write_bw from $peer to ${nodes[0]} failed" >&2; exit 1; }
  low=$(awk -v a="$low" -v b="$bw" 'BEGIN { print (a == "" || b + 0 < a + 0) ? b : a }')
done
echo "slurmops-value: $low""#
        }
        (b, _) => per_node(b, level, want),
    };
    format!("#!/bin/bash\n{body}\n")
}

/// The checks of one node.
fn per_node(b: CheckBuiltin, level: u8, want: u32) -> String {
    match b {
        // What nvidia-smi can tell on every node, then DCGM's diagnostics where dcgmi is.
        CheckBuiltin::Gpu => format!(
            r#"{seen}
bad=()
# One query per signal: a field this driver does not know (or N/A on this GPU) is skipped.
q() {{ nvidia-smi --query-gpu="index,$1" --format=csv,noheader,nounits 2>/dev/null; }}
yes() {{ case "${{1,,}}" in yes|true|1|active) return 0;; esac; return 1; }}
while IFS=', ' read -r i v; do
  case "$v" in ''|\[*|0) ;; *[!0-9]*) ;; *) bad+=("GPU $i: $v uncorrected ECC errors since the driver loaded");; esac
done < <(q ecc.errors.uncorrected.volatile.total)
while IFS=', ' read -r i v; do yes "$v" && bad+=("GPU $i: retired pages pending (reset the GPU)"); done < <(q retired_pages.pending)
while IFS=', ' read -r i v; do yes "$v" && bad+=("GPU $i: row remapping pending (reset the GPU)"); done < <(q remapped_rows.pending)
while IFS=', ' read -r i v; do yes "$v" && bad+=("GPU $i: row remapping failed"); done < <(q remapped_rows.failure)
# Clock event reasons: their name since driver R535, the older name (clocks_throttle_reasons) before.
for r in hw_slowdown hw_thermal_slowdown hw_power_brake_slowdown; do
  while IFS=', ' read -r i v; do yes "$v" && bad+=("GPU $i: clocks held back ($r)"); done < <(q clocks_event_reasons.$r || q clocks_throttle_reasons.$r)
done
while IFS=', ' read -r i cur max; do
  case "$cur$max" in *[!0-9]*|'') continue;; esac
  [ "$cur" -lt "$max" ] && bad+=("GPU $i: PCIe link x$cur of x$max")
done < <(q pcie.link.width.current,pcie.link.width.max)
# XIDs the driver logged since boot that mean broken hardware (the kernel log, where readable).
if log=$(dmesg 2>/dev/null); then
  xids=$(echo "$log" | sed -n 's/.*NVRM: Xid (\(PCI:[^)]*\)): \([0-9]*\).*/\1 \2/p' | awk '$2 ~ /^(48|62|63|64|74|79|92|94|95|119|120|140)$/' | sort -u | head -n 4 | paste -sd' ')
  [ -z "$xids" ] || bad+=("XID errors since boot: $xids")
else
  echo "the kernel log is not readable here: XIDs not checked"
fi
summary=index,name,ecc.errors.uncorrected.volatile.total,pcie.link.width.current
nvidia-smi --query-gpu=$summary,clocks_event_reasons.active --format=csv 2>/dev/null || nvidia-smi --query-gpu=$summary,clocks_throttle_reasons.active --format=csv 2>/dev/null
if [ "${{#bad[@]}}" -gt 0 ]; then (IFS=';'; echo "${{bad[*]}}" | sed 's/;/; /g' >&2); exit 1; fi
if command -v dcgmi >/dev/null; then
  dcgmi diag -r {level} || {{ echo "dcgmi diag -r {level} failed on $(hostname)" >&2; exit 1; }}
else
  echo "dcgmi not found: DCGM diagnostics skipped (nvidia-smi's checks passed)"
fi
echo "slurmops-value: $n""#,
            seen = gpus_seen(want)
        ),
        // With one GPU an all-reduce moves nothing between GPUs (its bus bandwidth is 0 by
        // definition): the figure is then the algorithm bandwidth at the largest size.
        CheckBuiltin::Nccl if want == 1 => {
            need("all_reduce_perf")
                + "\n"
                + r#"out=$(all_reduce_perf -b 8M -e 1G -f 2 -g 1 2>&1); rc=$?; echo "$out"
bw=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF >= 8 { v = $7 } END { print v }')
[ "$rc" = 0 ] && [ -n "$bw" ] || { echo "all_reduce_perf failed on $(hostname)" >&2; exit 1; }
echo "one GPU: the figure is the algorithm bandwidth at the largest size (the bus bandwidth of one rank is 0)"
echo "slurmops-value: $bw""#
        }
        CheckBuiltin::Nccl => format!(
            r#"{need}
out=$(all_reduce_perf -b 8M -e 1G -f 2 -g {want} 2>&1); rc=$?; echo "$out"
bw=$(echo "$out" | sed -n 's/^# *Avg bus bandwidth *: *\([0-9.]*\).*/\1/p' | tail -n1)
[ "$rc" = 0 ] && [ -n "$bw" ] || {{ echo "all_reduce_perf failed on $(hostname)" >&2; exit 1; }}
echo "slurmops-value: $bw""#,
            need = need("all_reduce_perf")
        ),
        CheckBuiltin::Ib => {
            need("ibstat")
                + "\n"
                + r#"out=$(ibstat) || { echo "ibstat failed on $(hostname)" >&2; exit 1; }; echo "$out"
down=$(echo "$out" | grep -c '^[[:space:]]*State: ' ); active=$(echo "$out" | grep -c '^[[:space:]]*State: Active')
[ "$down" -gt 0 ] || { echo "no InfiniBand port on $(hostname)" >&2; exit 1; }
[ "$active" = "$down" ] || { echo "$((down - active)) of $down InfiniBand ports not Active on $(hostname)" >&2; exit 1; }
rate=$(echo "$out" | sed -n 's/^[[:space:]]*Rate: *\([0-9.]*\).*/\1/p' | sort -n | head -n1)
echo "slurmops-value: $rate""#
        }
    }
}

#[cfg(test)]
mod tests;
