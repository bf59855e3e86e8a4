//! GPUs as rendered, on the real slurmd (issue 57, item 1): a GPU NodeSet's worker runs with the
//! gres.conf slurmops renders, loaded *unchanged* (no rewrite to stand-in paths), the rendered
//! cgroup.conf (`ConstrainDevices=yes`) and slurm.conf's cgroup plugins, and the StatefulSet's own
//! `--conf` (its `Gres=gpu:TYPE:N`). The device files sit where the rendered gres.conf points,
//! `/dev/nvidia0..N-1`, made by tests/bed/slurm.sh as the NVIDIA driver makes them (character
//! devices, major 195, minor N; `/dev/nvidiactl` 195:255) — with no driver behind them. A job then
//! tells an allowed device from a denied one by open(2): ENXIO ("No such device or address": the
//! device cgroup let it through, no driver answered) against EPERM ("Operation not permitted":
//! the job's device cgroup denied it).
//!
//! The rendered gres.conf has two forms: `AutoDetect=nvml` for a NodeSet whose
//! `gpus.autodetect` is `nvml` (its default; slurmd then needs NVML, which this host lacks) and
//! `File=/dev/nvidia[0-N]` for `autodetect: files`. This test uses the `File=` form.
//!
//! What the real slurmd does (24.11, 25.11 and 26.05 alike): the check's job (exclusive,
//! `gres/gpu:N`) can open exactly the node's GPUs; a job asking for one GPU can open that one and
//! is denied the other; an *exclusive* job that asks for no GRES is given the node's GPUs all the
//! same (its JOB_GRES is `gpu:TYPE:N`, its device cgroup allows them, CUDA_VISIBLE_DEVICES names
//! them); a job sharing the node that asks for none gets none, both denied. A device gres.conf
//! does not name (/dev/nvidia2 here) is never constrained. Seen failing: with the check's job
//! submitted sharing the node and asking for no GPU, both of the node's GPUs were denied.
//!
//! The check's job as `slurmops render --output-dir` writes it (jobs/, an `sbatch` script: what
//! an operator runs by hand, and what `tests/gpu/run.sh` submits on a GPU machine) is the same
//! request for Slurm as the job slurmops submits through slurmrestd: both sent, Slurm's records
//! of them compared (seen failing with the file's `--exclusive` left out); and sent by the job
//! user (`daemon`, no login shell), it runs and reports as slurmops' own job, in the same
//! environment (seen failing with `--export=PATH=…`, which has slurmd load the user's login
//! environment: `SLURM_GET_USER_ENV`; where that fails, the job is held).
//!
//! The jobs are submitted through slurmops' own Slurm client (the `job/submit` body its checks
//! and canaries send), to a slurmrestd of the test's own instance. The cgroup version is the
//! host's (v1 here, see confinement.rs).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use slurmops::cluster::load;
use slurmops::render::render;
use slurmops::slurm::{JobRequest, SlurmNodes};

use crate::support::slurm::{
    confining_overlay, rendered_slurmd_conf, restd_client, sh, start_ctld, start_idle_slurmd,
};
use crate::support::{cluster_head, slurm_release, unique_suffix};

/// An instance of its own per release (slurmctld port, slurmd port, slurmrestd port).
fn instance_of(release: &str) -> (String, u16, u16, u16) {
    match release {
        "24.11" => ("gpu2411".into(), 16891, 17331, 16881),
        "25.11" => ("gpu2511".into(), 16893, 17341, 16883),
        "26.05" => ("gpu2605".into(), 16895, 17351, 16885),
        other => panic!("the test bed runs no Slurm {other}"),
    }
}

/// What a job saw of /dev/nvidia0..2 (`DEV allowed` / `DEV denied` / `DEV other: ERR`), one per
/// line; the node has two GPUs, /dev/nvidia2 is a device outside its gres.conf.
const SEE_DEVICES: &str = r#"#!/bin/bash
out=/tmp/$SLURM_JOB_NAME.out
: > "$out.tmp"
for d in /dev/nvidia0 /dev/nvidia1 /dev/nvidia2; do
  if err=$( (: < "$d") 2>&1 ); then echo "$d opened" >> "$out.tmp"
  else case "$err" in
    *"No such device or address"*) echo "$d allowed" >> "$out.tmp";;
    *"Operation not permitted"*) echo "$d denied" >> "$out.tmp";;
    *) echo "$d other: $err" >> "$out.tmp";;
  esac; fi
done
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}" >> "$out.tmp"
mv "$out.tmp" "$out"
"#;

on_each_slurm! {
async fn the_unmodified_rendered_gres_conf_loads_and_a_check_job_sees_exactly_the_nodes_gpus() {
    let release = slurm_release();
    let (instance, ctld_port, slurmd_port, restd_port) = instance_of(release);
    let set = format!("g{}", unique_suffix());
    let yaml = cluster_head("c", "gpus")
        + &format!("  nodeSets:\n    - {{name: {set}, replicas: 1, cpu: \"2\", memory: 1Gi, gpus: {{count: 2, type: h100, autodetect: files}}}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n  policy:\n    activeChecks:\n      - {{name: gpu, builtin: gpu, nodeSets: [{set}], onRegister: false, schedule: \"0 3 * * Sun\"}}\n      - {{name: env, script: \"#!/bin/bash\\nenv > /tmp/env-$SLURM_JOB_ID\", nodeSets: [{set}], onRegister: false, schedule: \"0 3 * * Sun\"}}\n");
    let c = load("cluster.yaml", &yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let r = render(&c);
    let gres = r.slurm["gres.conf"].clone();
    assert!(gres.contains(" File=/dev/nvidia[0-1]"), "{gres}");
    assert!(r.slurm["cgroup.conf"].contains("ConstrainDevices=yes"));
    let conf = rendered_slurmd_conf(&r, &set);
    assert!(conf.contains("Gres=gpu:h100:2"), "{conf}");
    let mut files = confining_overlay(&c, &r, &instance, ctld_port);
    // The rendered gres.conf as it is: its paths are where the bed made the device files.
    files.insert("gres.conf".into(), gres.clone());
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in &files {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    start_ctld(&instance, release, dir.path());
    for i in 0..3 {
        let dev = format!("/dev/nvidia{i}");
        let meta = std::fs::metadata(&dev).unwrap_or_else(|e| panic!("{dev}: {e}"));
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        assert!(meta.file_type().is_char_device(), "{dev} is no character device");
        assert_eq!((meta.rdev() >> 8) & 0xfff, 195, "{dev}'s major");
    }
    let node = format!("{set}-0");
    start_idle_slurmd(release, &instance, &node, slurmd_port, &conf, ctld_port).await;
    let log = || sh(&["log", &instance, &format!("slurmd-{node}")]);
    // slurmd read the rendered gres.conf as it is (configless, from slurmctld) and found both
    // devices at its paths.
    assert_eq!(
        crate::support::slurm::conf_cache(&instance, &node, "gres.conf").as_deref(),
        Some(gres.as_str()),
        "slurmd's gres.conf is not the rendered one"
    );
    let shown = sh(&["exec", &instance, "scontrol", "-o", "show", "node", &node]);
    assert!(shown.contains("Gres=gpu:h100:2"), "{shown}");

    let client = restd_client(&instance, release, restd_port);
    // A job as the checks submit one: exclusive, on this node, asking for GPUS GPUs; what it saw
    // and what Slurm says it was given.
    let run = |tag: &'static str, exclusive: bool, gpus: u32| {
        let client = &client;
        let instance = instance.clone();
        let node = node.clone();
        let set = set.clone();
        async move {
            let job = JobRequest {
                name: format!("{set}-{tag}"),
                script: SEE_DEVICES.into(),
                partition: "all".into(),
                nodes: vec![node.clone()],
                time_limit_minutes: 1,
                exclusive,
                licenses: None,
                gpus,
            };
            let id = client.submit(&job).await.unwrap_or_else(|e| panic!("{tag}: {e}"));
            let out_file = format!("/tmp/{set}-{tag}.out");
            let deadline = Instant::now() + Duration::from_secs(60);
            let shown = loop {
                let shown = sh(&["exec", &instance, "scontrol", "-d", "-o", "show", "job", &id.to_string()]);
                let done = !shown.contains("JobState=PENDING") && !shown.contains("JobState=RUNNING");
                if done || Instant::now() > deadline {
                    break shown;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            let seen = crate::support::slurm::run(&["exec", &instance, "cat", &out_file], &[])
                .unwrap_or_else(|e| format!("no output: {e}"));
            eprintln!("[{release} {tag}] {shown}\n[{release} {tag}] saw:\n{seen}");
            (seen, shown)
        }
    };

    // The check's job: exclusive, all the node's GPUs. It can open exactly those two.
    let (seen, shown) = run("check", true, 2).await;
    assert!(
        seen.contains("/dev/nvidia0 allowed\n") && seen.contains("/dev/nvidia1 allowed\n"),
        "the check job could not open the node's GPUs:\n{seen}\n{shown}\n{}", log()
    );
    assert!(shown.contains(" JOB_GRES=gpu:h100:2 "), "{shown}");
    // One GPU asked: the other is denied by the job's device cgroup (ConstrainDevices holds).
    let (seen, shown) = run("one", false, 1).await;
    let allowed = seen.lines().filter(|l| l.ends_with(" allowed") && !l.starts_with("/dev/nvidia2")).count();
    let denied = seen.lines().filter(|l| l.ends_with(" denied")).count();
    assert_eq!((allowed, denied), (1, 1), "a one-GPU job:\n{seen}\n{shown}");
    // Exclusive, no GRES asked: Slurm gives an exclusive job the node's GPUs too (24.11 to
    // 26.05), in its JOB_GRES and its device cgroup.
    let (seen, shown) = run("bare", true, 0).await;
    assert!(
        seen.contains("/dev/nvidia0 allowed\n") && seen.contains("/dev/nvidia1 allowed\n"),
        "an exclusive job with no GRES request:\n{seen}\n{shown}"
    );
    assert!(shown.contains(" JOB_GRES=gpu:h100:2 "), "{shown}");
    // Sharing the node, no GRES asked (a check beside users' jobs): no GPU, both denied.
    let (seen, shown) = run("shared", false, 0).await;
    assert!(
        seen.contains("/dev/nvidia0 denied\n") && seen.contains("/dev/nvidia1 denied\n"),
        "a shared job with no GRES request:\n{seen}\n{shown}"
    );
    assert!(!shown.contains(" JOB_GRES=gpu"), "{shown}");

    // The check's job as `render --output-dir` writes it under jobs/, sent with sbatch as an
    // operator runs a check by hand, is the job slurmops sends through slurmrestd: Slurm
    // records the same request for both (both left pending behind a held node).
    let check = slurmops::controller::features::checks::jobs(&c.spec).remove(0).2;
    let (_, file) = slurmops::ops::render::probe_jobs(&c.spec)
        .into_iter()
        .find(|(f, _)| f == &format!("check-gpu-{set}.sbatch"))
        .expect("the check's job file");
    sh(&["exec", &instance, "scontrol", "update", &format!("NodeName={node}"), "State=DRAIN", "Reason=held"]);
    let by_client = client.submit(&check).await.unwrap().to_string();
    // Sent by the job user, as slurmops' jobs run (`daemon`, no login shell).
    let by_sbatch = sh(&["exec", &instance, "runuser", "-u", "daemon", "--", "bash", "-c", r#"cd /tmp && printf %s "$1" | sbatch --parsable"#, "_", &file]);
    let by_sbatch = by_sbatch.trim().split(';').next().unwrap_or_default().to_string();
    // What the daemon's metrics count (`slurmops_partition_gpus`, `_job_gpus`), read from this
    // release's answers: the node's two GPUs, none in use, and the pending job's two.
    let seen = client.get(&node).await.unwrap();
    assert_eq!((seen.gpus, seen.alloc_gpus), (2, 0), "the node's GPUs as read: {seen:?}");
    let jobs = client.jobs().await.unwrap();
    let pending = jobs.iter().find(|j| j.id.to_string() == by_client).expect("the check's job read");
    assert_eq!((pending.gpus, pending.cpus > 0), (2, true), "the job's GPUs as read: {pending:?}");
    let fields = |id: &str| -> BTreeMap<String, String> {
        let shown = sh(&["exec", &instance, "scontrol", "-o", "show", "job", id]);
        let keep = [
            "JobName", "Partition", "TimeLimit", "NumNodes", "NumTasks", "ReqNodeList", "OverSubscribe",
            "Licenses", "TresPerNode", "WorkDir", "StdOut", "StdErr", "ReqTRES",
        ];
        let got: BTreeMap<String, String> = shown
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter(|(k, _)| keep.contains(k))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(got.len() >= 10, "{shown}");
        got
    };
    let (a, b) = (fields(&by_client), fields(&by_sbatch));
    assert_eq!(a, b, "the rendered sbatch file differs from the job slurmops submits");
    assert_eq!(a.get("TresPerNode").map(String::as_str), Some("gres/gpu:2"), "{a:?}");
    assert_eq!(a.get("OverSubscribe").map(String::as_str), Some("NO"), "{a:?}");
    sh(&["exec", &instance, "scancel", &by_client, &by_sbatch]);
    // And it runs as slurmops' own job does, for the job user, in the same environment: a check
    // that keeps its environment, sent both ways.
    sh(&["exec", &instance, "scontrol", "update", &format!("NodeName={node}"), "State=RESUME"]);
    let env = slurmops::controller::features::checks::jobs(&c.spec)
        .into_iter()
        .find(|(check, _, _)| check == "env")
        .expect("the env check's job")
        .2;
    let (_, env_file) = slurmops::ops::render::probe_jobs(&c.spec)
        .into_iter()
        .find(|(f, _)| f == &format!("check-env-{set}.sbatch"))
        .expect("the env check's job file");
    let by_client = client.submit(&env).await.unwrap().to_string();
    let by_sbatch = sh(&["exec", &instance, "runuser", "-u", "daemon", "--", "bash", "-c", r#"cd /tmp && printf %s "$1" | sbatch --parsable"#, "_", &env_file]);
    let by_sbatch = by_sbatch.trim().split(';').next().unwrap_or_default().to_string();
    // What the daemon's metrics count (`slurmops_partition_gpus`, `_job_gpus`), read from this
    // release's answers: the node's two GPUs, none in use, and the pending job's two.
    let seen = client.get(&node).await.unwrap();
    assert_eq!((seen.gpus, seen.alloc_gpus), (2, 0), "the node's GPUs as read: {seen:?}");
    let jobs = client.jobs().await.unwrap();
    let pending = jobs.iter().find(|j| j.id.to_string() == by_client).expect("the check's job read");
    assert_eq!((pending.gpus, pending.cpus > 0), (2, true), "the job's GPUs as read: {pending:?}");
    let environment = async |id: &str| -> BTreeMap<String, String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let shown = loop {
            let shown = sh(&["exec", &instance, "scontrol", "-o", "show", "job", id]);
            if shown.contains("JobState=COMPLETED") || shown.contains("JobState=FAILED") || Instant::now() > deadline {
                break shown;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(shown.contains("JobState=COMPLETED") && shown.contains("Comment=slurmops-check rc=0;"), "{shown}");
        let text = sh(&["exec", &instance, "cat", &format!("/tmp/env-{id}")]);
        // Slurm's own variables, and the MPI launchers' hints sbatch adds, aside: the rest is
        // the environment the job was given. Slurm's are every name that starts with SLURM, as
        // `--export=NIL` keeps them from the submitter: the test runner's own (SLURMOPS_CACHE,
        // when set) reach the sbatch job so.
        let sbatch_adds = ["HYDRA_", "I_MPI_", "OMPI_MCA_", "PRTE_MCA_"];
        text.lines()
            .filter_map(|l| l.split_once('='))
            .filter(|(k, _)| (!k.starts_with("SLURM") || *k == "SLURM_GET_USER_ENV") && *k != "_" && !sbatch_adds.iter().any(|p| k.starts_with(p)))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (a, b) = (environment(&by_client).await, environment(&by_sbatch).await);
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "the environment of the job file differs");
    assert_eq!(a.get("PATH"), b.get("PATH"));
    assert!(!b.contains_key("SLURM_GET_USER_ENV"), "{b:?}");

    sh(&["stop", &instance]);
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        crate::support::slurm::remove_cgroups(&hierarchy.path().join(format!("slurm_{node}")));
    }
}
}
