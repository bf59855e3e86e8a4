//! Job isolation as rendered: a worker's slurmd runs with the cgroup.conf slurmops renders
//! (`CgroupPlugin=autodetect`, ConstrainCores, ConstrainRAMSpace) and slurm.conf's cgroup plugins
//! (proctrack/cgroup, task/cgroup, jobacct_gather/cgroup), sized by the StatefulSet's own
//! `--conf` (CPUs and RealMemory from the NodeSet). A job that asks for 1 CPU and 100 MB sees one
//! CPU, its memory cgroup says 100 MB, and when it takes more it is OOM-killed by its own cgroup:
//! the job ends OUT_OF_MEMORY, the node and its slurmd stay up.
//!
//! This machine's kernel mounts the cgroup controllers as v1 hierarchies (cgroup2 holds hugetlb
//! only), so autodetect picks cgroup/v1 here, where a Kubernetes node of today gets cgroup/v2:
//! the plugins, the constraints and the sizes are the rendered ones; the cgroup version is the
//! host's.

use std::time::{Duration, Instant};

use slurmops::cluster::load;
use slurmops::render::render;

use crate::support::slurm::{
    confining_overlay, node_state, rendered_slurmd_conf, sh, start_ctld, start_idle_slurmd,
};
use crate::support::{cluster_head, slurm_release, unique_suffix};

/// An instance of its own per release (slurmctld port, first slurmd port).
fn instance_of(release: &str) -> (String, u16, u16) {
    match release {
        "24.11" => ("cg2411".into(), 16967, 17301),
        "25.11" => ("cg2511".into(), 16977, 17311),
        "26.05" => ("cg2605".into(), 16987, 17321),
        other => panic!("the test bed runs no Slurm {other}"),
    }
}

on_each_slurm! {
async fn a_job_is_confined_to_what_it_asked_for_by_the_rendered_cgroup_settings() {
    let release = slurm_release();
    let (instance, ctld_port, slurmd_port) = instance_of(release);
    let set = format!("cg{}", unique_suffix());
    let yaml = cluster_head("c", "confined")
        + &format!("  nodeSets:\n    - {{name: {set}, replicas: 1, cpu: \"2\", memory: 1Gi}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n");
    let c = load("cluster.yaml", &yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let r = render(&c);
    let conf = rendered_slurmd_conf(&r, &set);
    assert!(conf.contains("CPUs=2") && conf.contains("RealMemory=1024"), "{conf}");
    let files = confining_overlay(&c, &r, &instance, ctld_port);
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in &files {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    start_ctld(&instance, release, dir.path());
    let node = format!("{set}-0");
    start_idle_slurmd(release, &instance, &node, slurmd_port, &conf, ctld_port).await;

    // What the job sees: its CPUs (affinity), its job cgroup's cpuset, the memory limit of its job cgroup (v1's memory hierarchy, or
    // v2's unified one), then 400 MB held in one line by tail.
    let script = r#"nproc
path=$(sed -n 's/^[0-9]*:cpuset://p' /proc/self/cgroup)
if [ -n "$path" ]; then cat "/sys/fs/cgroup/cpuset${path%%/step_*}/cpuset.cpus"
else path=$(sed -n 's/^0:://p' /proc/self/cgroup); cat "/sys/fs/cgroup${path%%/step_*}/cpuset.cpus.effective"; fi
path=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
if [ -n "$path" ]; then cat "/sys/fs/cgroup/memory${path%%/step_*}/memory.limit_in_bytes"
else path=$(sed -n 's/^0:://p' /proc/self/cgroup); cat "/sys/fs/cgroup${path%%/step_*}/memory.max"; fi
head -c 400000000 /dev/zero | tail > /dev/null
echo done"#;
    let out_file = format!("/tmp/{node}.out");
    let submitted = sh(&[
        "exec", &instance, "sbatch", "--parsable", "-p", "all", "-w", &node, "-n1", "-c1",
        "--mem=100M", "-o", &out_file, "--wrap", script,
    ]);
    let job = submitted.trim().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let state = loop {
        let s = sh(&["exec", &instance, "squeue", "-h", "-j", &job, "-o", "%T"]);
        if s.trim().is_empty() || Instant::now() > deadline {
            break sh(&["exec", &instance, "scontrol", "-o", "show", "job", &job]);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let out = sh(&["exec", &instance, "cat", &out_file]);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("1"), "the job saw more than its one CPU:\n{out}\n{state}");
    let cpuset = lines.next().unwrap_or_default();
    assert!(
        cpuset.parse::<u32>().is_ok(),
        "the job's cpuset is not one CPU of the node's two:\n{out}\n{state}"
    );
    assert_eq!(
        lines.next(),
        Some("104857600"),
        "the job's memory cgroup is not its 100 MB:\n{out}\n{state}"
    );
    assert!(
        state.contains("JobState=OUT_OF_MEMORY"),
        "the job took 400 MB and was not OOM-killed by its cgroup:\n{out}\n{state}"
    );
    // The OOM kill was the job's own: its slurmd lives on (slurm.sh fails when it does not).
    sh(&["slurmd-alive", &instance, &node]);
    assert!(
        node_state(&instance, &node).is_some_and(|s| s.starts_with("IDLE")),
        "{node} after the job: {:?}", node_state(&instance, &node)
    );
    sh(&["stop", &instance]);
    // The node's cgroups, as a pod's go with it (empty once its slurmd stopped).
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        crate::support::slurm::remove_cgroups(&hierarchy.path().join(format!("slurm_{node}")));
    }
}
}
