use super::*;

/// Runs built-in check B (8 GPUs) against stand-ins of the GPU tools, which log their arguments
/// and print what the real tools print: (exit code, stdout, the tools' arguments).
fn run_builtin(b: CheckBuiltin, tools: &[(&str, &str)]) -> (i32, String, String) {
    run_builtin_across(b, CheckSpan::Node, tools)
}

/// As `run_builtin`, for check B across nodes (SPAN); a tool's output that starts with `#!` is
/// its script instead.
fn run_builtin_across(
    b: CheckBuiltin,
    span: CheckSpan,
    tools: &[(&str, &str)],
) -> (i32, String, String) {
    run_builtin_on(b, 8, span, tools)
}

/// As `run_builtin_across`, on a worker with GPUS GPUs.
fn run_builtin_on(
    b: CheckBuiltin,
    gpus: u32,
    span: CheckSpan,
    tools: &[(&str, &str)],
) -> (i32, String, String) {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("slurmops-tools-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("args");
    for (tool, output) in tools {
        let path = dir.join(tool);
        let text = match output.strip_prefix("#!") {
            Some(script) => format!(
                "#!/bin/sh\necho \"{tool} $*\" >> '{}'\n{script}\n",
                log.display()
            ),
            None => format!(
                "#!/bin/sh\necho \"{tool} $*\" >> '{}'\ncat <<'OUT'\n{output}\nOUT\n",
                log.display()
            ),
        };
        std::fs::write(&path, text).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&path)
            .status()
            .unwrap();
    }
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(check_builtin(b, 2, gpus, span))
        .env("SLURM_JOB_NODELIST", "gpu-[0-1]")
        .env("PATH", format!("{}:/usr/bin:/bin", dir.display()))
        .output()
        .unwrap();
    let args = std::fs::read_to_string(&log).unwrap_or_default();
    std::fs::remove_dir_all(&dir).ok();
    let stdout =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), stdout, args)
}

#[test]
fn the_built_in_checks_call_the_tools_with_their_documented_arguments_and_read_their_output() {
    let gpus: String = (0..8)
        .map(|i| format!("GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})\n"))
        .collect();
    // dcgmi diag: -r LEVEL (1 to 4); its exit code says whether every test passed.
    let (rc, out, args) = run_builtin(
        CheckBuiltin::Gpu,
        &[
            ("nvidia-smi", &smi(&[])),
            ("dcgmi", "| Diagnostic | Result |"),
        ],
    );
    assert_eq!(rc, 0, "{out}");
    assert!(args.starts_with("nvidia-smi -L\n"), "{args}");
    assert!(args.ends_with("dcgmi diag -r 2\n"), "{args}");
    assert!(out.contains("slurmops-value: 8"), "{out}");
    let (rc, out, _) = run_builtin(
        CheckBuiltin::Gpu,
        &[("nvidia-smi", &gpus[..gpus.len() / 2]), ("dcgmi", "")],
    );
    assert_eq!(rc, 1);
    assert!(out.contains("sees 4 GPUs, expected 8"), "{out}");
    // all_reduce_perf: -b min bytes, -e max bytes, -f step factor, -g GPUs; its summary line.
    let nccl = fixture("all_reduce_perf-8gpu.txt");
    let (rc, out, args) = run_builtin(CheckBuiltin::Nccl, &[("all_reduce_perf", &nccl)]);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(args, "all_reduce_perf -b 8M -e 1G -f 2 -g 8\n");
    assert!(out.contains("slurmops-value: 391.501"), "{out}");
    // ibstat: every port's State and Rate (Gb/s); the lowest rate is the figure.
    let ib = "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\
              CA 'mlx5_1'\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 200";
    let (rc, out, args) = run_builtin(CheckBuiltin::Ib, &[("ibstat", ib)]);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(args, "ibstat \n");
    assert!(out.contains("slurmops-value: 200"), "{out}");
    let down = ib.replacen("State: Active", "State: Down", 1);
    let (rc, out, _) = run_builtin(CheckBuiltin::Ib, &[("ibstat", &down)]);
    assert_eq!(rc, 1);
    assert!(out.contains("1 of 2 InfiniBand ports not Active"), "{out}");
}

/// A fixture under tests/fixtures/gpu-tools/ without its header (`#!` lines: what documented
/// format it follows; none is output captured on a GPU, none was at hand).
fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/gpu-tools/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with("#!"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A stand-in nvidia-smi for 8 H100s answering `-L` and `--query-gpu=FIELDS --format=csv[,
/// noheader][,nounits]` from the fixtures (nvidia-smi-L.txt, nvidia-smi-query-gpu.csv), as the
/// tool documents them. FAULTS: (field, GPU, value) replacing the fixture's healthy value; a
/// field named `unknown:FIELD` makes the tool refuse FIELD as it refuses a field it does not
/// know (an older driver, or a newer name).
fn smi(faults: &[(&str, u32, &str)]) -> String {
    let csv = fixture("nvidia-smi-query-gpu.csv");
    let mut rows: Vec<Vec<String>> = csv
        .lines()
        .map(|l| l.split(", ").map(str::to_string).collect())
        .collect();
    for (field, gpu, value) in faults {
        if let Some(col) = rows[0].iter().position(|h| h == field) {
            rows[*gpu as usize + 1][col] = value.to_string();
        }
    }
    let unknown: Vec<usize> = (0..rows[0].len())
        .filter(|&c| {
            faults
                .iter()
                .any(|(f, _, _)| *f == format!("unknown:{}", rows[0][c]))
        })
        .collect();
    let table: String = rows
        .iter()
        .map(|r| {
            let kept: Vec<&str> = (0..r.len())
                .filter(|c| !unknown.contains(c))
                .map(|c| r[c].as_str())
                .collect();
            kept.join(", ") + "\n"
        })
        .collect();
    format!(
        r#"#!case "$1" in
  -L) cat <<'L'
{}L
  ;;
  --query-gpu=*)
    case "$2" in *noheader*) skip=1;; *) skip=0;; esac
    awk -v want="${{1#--query-gpu=}}" -v skip="$skip" 'BEGIN {{ FS = ", "; n = split(want, w, ",") }}
      NR == 1 {{ for (i = 1; i <= NF; i++) col[$i] = i
        for (j = 1; j <= n; j++) if (!(w[j] in col)) {{ printf "Field \"%s\" is not a valid field to query.\n", w[j] > "/dev/stderr"; exit 2 }}
        if (skip) next }}
      {{ line = ""; for (j = 1; j <= n; j++) line = line (j > 1 ? ", " : "") $col[w[j]]; print line }}' <<'CSV'
{table}CSV
  ;;
  *) exit 2;;
esac"#,
        fixture("nvidia-smi-L.txt")
    )
}

#[test]
fn the_gpu_check_reads_what_nvidia_smi_tells_without_dcgm_and_names_each_fault() {
    // Healthy, no DCGM on the node: passes on nvidia-smi's signals and says DCGM was skipped.
    let (rc, out, args) = run_builtin(CheckBuiltin::Gpu, &[("nvidia-smi", &smi(&[]))]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("slurmops-value: 8"), "{out}");
    assert!(out.contains("DCGM diagnostics skipped"), "{out}");
    for field in [
        "ecc.errors.uncorrected.volatile.total",
        "remapped_rows.failure",
        "clocks_event_reasons.hw_slowdown",
        "pcie.link.width.current,pcie.link.width.max",
    ] {
        assert!(
            args.contains(&format!(
                "nvidia-smi --query-gpu=index,{field} --format=csv,noheader,nounits"
            )),
            "{field}: {args}"
        );
    }
    // Each fault is named with its GPU, all of them in the error line the drain reason quotes.
    let faults = [
        ("ecc.errors.uncorrected.volatile.total", 3, "2"),
        ("clocks_event_reasons.hw_slowdown", 5, "Active"),
        ("pcie.link.width.current", 6, "8"),
        ("remapped_rows.failure", 1, "Yes"),
    ];
    let (rc, out, _) = run_builtin(CheckBuiltin::Gpu, &[("nvidia-smi", &smi(&faults))]);
    assert_eq!(rc, 1, "{out}");
    let error = out
        .lines()
        .find(|l| l.contains("GPU 3"))
        .unwrap_or_else(|| panic!("{out}"));
    for want in [
        "GPU 3: 2 uncorrected ECC errors since the driver loaded",
        "GPU 5: clocks held back (hw_slowdown)",
        "GPU 6: PCIe link x8 of x16",
        "GPU 1: row remapping failed",
    ] {
        assert!(error.contains(want), "{want} in {error}");
    }
    assert!(!out.contains("slurmops-value"), "{out}");
    // A driver that does not know a field (older, or a newer name) skips that signal only.
    let older = [
        ("unknown:remapped_rows.pending", 0, ""),
        ("unknown:remapped_rows.failure", 0, ""),
    ];
    let (rc, out, _) = run_builtin(CheckBuiltin::Gpu, &[("nvidia-smi", &smi(&older))]);
    assert_eq!(rc, 0, "{out}");
    // A driver before R535 knows the clock event reasons by their older name only.
    let before_r535 = [
        ("unknown:clocks_event_reasons.hw_slowdown", 0, ""),
        ("unknown:clocks_event_reasons.hw_thermal_slowdown", 0, ""),
        (
            "unknown:clocks_event_reasons.hw_power_brake_slowdown",
            0,
            "",
        ),
        ("unknown:clocks_event_reasons.active", 0, ""),
        ("clocks_throttle_reasons.hw_thermal_slowdown", 2, "Active"),
    ];
    let (rc, out, args) = run_builtin(CheckBuiltin::Gpu, &[("nvidia-smi", &smi(&before_r535))]);
    assert_eq!(rc, 1, "{out}");
    assert!(
        out.contains("GPU 2: clocks held back (hw_thermal_slowdown)"),
        "{out}"
    );
    assert!(
        args.contains("--query-gpu=index,clocks_throttle_reasons.hw_thermal_slowdown "),
        "{args}"
    );
    // A driver that knows only the new name reads the same fault there.
    let new_names_only = [
        ("unknown:clocks_throttle_reasons.hw_thermal_slowdown", 0, ""),
        ("clocks_event_reasons.hw_thermal_slowdown", 2, "Active"),
    ];
    let (rc, out, _) = run_builtin(CheckBuiltin::Gpu, &[("nvidia-smi", &smi(&new_names_only))]);
    assert_eq!(rc, 1, "{out}");
    assert!(
        out.contains("GPU 2: clocks held back (hw_thermal_slowdown)"),
        "{out}"
    );
    // The healthy table as the node's log shows it (nvidia-smi's csv with its header).
    let (_, out, _) = run_builtin(CheckBuiltin::Gpu, &[("nvidia-smi", &smi(&[]))]);
    assert!(
        out.contains("index, name, ecc.errors.uncorrected.volatile.total, pcie.link.width.current, clocks_event_reasons.active\n0, NVIDIA H100 80GB HBM3, 0, 16, 0x0000000000000000"),
        "{out}"
    );
    // No driver (nvidia-smi's documented failure): a failure naming the node, never a figure.
    let no_driver = format!(
        "#!cat <<'OUT'\n{}OUT\nexit 9",
        fixture("nvidia-smi-no-driver.txt")
    );
    let (rc, out, _) = run_builtin(CheckBuiltin::Gpu, &[("nvidia-smi", &no_driver)]);
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("nvidia-smi -L failed on"), "{out}");
    assert!(!out.contains("slurmops-value"), "{out}");
    // DCGM where it is: its failure fails the check after nvidia-smi's signals passed.
    let (rc, out, args) = run_builtin(
        CheckBuiltin::Gpu,
        &[("nvidia-smi", &smi(&[])), ("dcgmi", "#!exit 226")],
    );
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("dcgmi diag -r 2 failed"), "{out}");
    assert!(args.contains("dcgmi diag -r 2"), "{args}");
}

#[test]
fn the_nccl_check_on_one_gpu_judges_the_algorithm_bandwidth_not_the_bus_bandwidth_of_one_rank() {
    // nccl-tests' all_reduce_perf as it documents its table (out-of-place, then in-place
    // columns; not output captured on a GPU): with one rank the bus bandwidth is 0.
    let one = &fixture("all_reduce_perf-1gpu.txt");
    let (rc, out, args) = run_builtin_on(
        CheckBuiltin::Nccl,
        1,
        CheckSpan::Node,
        &[("all_reduce_perf", one)],
    );
    assert_eq!(rc, 0, "{out}");
    assert_eq!(args, "all_reduce_perf -b 8M -e 1G -f 2 -g 1\n");
    assert!(out.contains("slurmops-value: 373.54"), "{out}");
    assert!(
        out.contains("one GPU: the figure is the algorithm bandwidth"),
        "{out}"
    );
    // Eight GPUs: the average bus bandwidth, as before.
    let (rc, out, _) = run_builtin_on(
        CheckBuiltin::Nccl,
        8,
        CheckSpan::Node,
        &[("all_reduce_perf", one)],
    );
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("slurmops-value: 0\n") || out.ends_with("slurmops-value: 0"),
        "{out}"
    );
    // Malformed output (no table): a failure, not a figure.
    let (rc, out, _) = run_builtin_on(
        CheckBuiltin::Nccl,
        1,
        CheckSpan::Node,
        &[("all_reduce_perf", "NCCL WARN no device")],
    );
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("all_reduce_perf failed"), "{out}");
}

#[test]
fn the_built_in_checks_across_nodes_run_their_tools_on_every_node_of_the_job() {
    // nccl across nodes: one MPI rank per GPU on each node (-g 1 per rank), through srun.
    let nccl = "#!echo '# Avg bus bandwidth    : 371.2 '";
    let (rc, out, args) = run_builtin_across(
        CheckBuiltin::Nccl,
        CheckSpan::Block,
        &[("all_reduce_perf", ""), ("srun", nccl)],
    );
    assert_eq!(rc, 0, "{out}");
    assert_eq!(
        args,
        "srun --mpi=pmix --ntasks-per-node=8 all_reduce_perf -b 8M -e 1G -f 2 -g 1\n"
    );
    assert!(out.contains("slurmops-value: 371.2"), "{out}");
    // ib across a pair: ib_write_bw's server on the first node, its client on the second
    // (--report_gbits, -D seconds, the server's address); the average column is the figure.
    let scontrol = r#"#!case "$2" in hostnames) printf 'gpu-0\ngpu-1\n';; node) echo '   NodeAddr=10.0.0.5 NodeHostName=gpu-0';; esac"#;
    let bw = "#!echo ' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]'; echo ' 65536      1852741          0.00               388.42              0.740862'";
    let (rc, out, args) = run_builtin_across(
        CheckBuiltin::Ib,
        CheckSpan::Pair,
        &[("ib_write_bw", ""), ("scontrol", scontrol), ("srun", bw)],
    );
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("slurmops-value: 388.42"), "{out}");
    for call in [
        "scontrol show hostnames gpu-[0-1]",
        "scontrol show node gpu-0",
        "srun -N1 -n1 -w gpu-0 ib_write_bw --report_gbits -D 10\n",
        "srun -N1 -n1 -w gpu-1 ib_write_bw --report_gbits -D 10 10.0.0.5",
    ] {
        assert!(args.contains(call), "{call} in {args}");
    }
    // An odd last worker makes the last pair three: each other node to the first, the lowest.
    let three = scontrol.replace("gpu-1\\n", "gpu-1\\ngpu-2\\n");
    let slow_third = "#!if [ \"$4\" = gpu-2 ]; then echo ' 65536 1 0.00 120.5 0.2'; else echo ' 65536 1 0.00 388.42 0.7'; fi";
    let (rc, out, args) = run_builtin_across(
        CheckBuiltin::Ib,
        CheckSpan::Pair,
        &[
            ("ib_write_bw", ""),
            ("scontrol", &three),
            ("srun", slow_third),
        ],
    );
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("slurmops-value: 120.5"), "{out}");
    assert!(
        args.contains("srun -N1 -n1 -w gpu-2 ib_write_bw --report_gbits -D 10 10.0.0.5"),
        "{args}"
    );
    let (rc, out, _) = run_builtin_across(
        CheckBuiltin::Ib,
        CheckSpan::Pair,
        &[
            ("ib_write_bw", ""),
            ("scontrol", scontrol),
            ("srun", "#!exit 1"),
        ],
    );
    assert_eq!(rc, 1);
    assert!(
        out.contains("ib_write_bw from gpu-1 to gpu-0 failed"),
        "{out}"
    );
}
