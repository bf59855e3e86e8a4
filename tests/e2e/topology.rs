//! Topologies on the real Slurm 25.11 and 26.05 of the test bed: the bed's slurmctld runs with the
//! topology.yaml slurmops renders (blocks and leaf switches declared, no nodes; partition `tree`
//! bound to the tree). Workers run on Kubernetes nodes whose label names their block or leaf
//! switch; `slurmops apply` places each registered worker there through slurmrestd. Slurm then
//! refuses a 2-node job spanning two blocks while one inside a block runs, and places a 2-node job
//! of the tree's partition under one leaf switch (first fit would take w-0 and w-1, under two).
//! 24.11 refusing topologies is a validation test (tests/offline/validation.rs).

use crate::support;

use std::process::Command;
use std::time::Duration;

use slurmops::slurm::SlurmNodes;

use crate::support::bed::{BLOCK_LABEL, BLOCKS, SWITCH_LABEL, SWITCHES};
use crate::support::slurm::{client as slurm, sh};
use crate::support::{TestEnv, bed, eventually, slurm_instance};

fn cluster_yaml(ns: &str, w: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - {{name: {w}, replicas: 4, cpu: "1", memory: 256Mi}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
  topology:
    block:
      nodeLabel: {BLOCK_LABEL}
      blocks: [{}]
      nodeSets: [{w}]
      blockSize: 2
"#,
            BLOCKS.join(", ")
        )
}

/// `slurmops apply DIR` with the bed's Slurm, as the restricted identity.
fn apply(dir: &std::path::Path, wait: &str) -> std::process::Output {
    let bed = bed();
    Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["apply", "--wait", wait])
        .arg(dir)
        .args(["--slurmrestd-url", &bed.slurmrestd_url])
        .args(["--slurm-jwt", &bed.slurm_jwt])
        .env("KUBECONFIG", &bed.kubeconfig_restricted)
        .output()
        .unwrap()
}

/// A test namespace on two Kubernetes nodes, the first labelled LABEL=A, the second LABEL=B (pods
/// go to them by ordinal: even workers on the first), and YAML(namespace, NodeSet) applied with
/// the bed's Slurm: the environment, the NodeSet, the directory of cluster.yaml and apply's output.
async fn applied_on_two_nodes(
    name: &str,
    label: &str,
    (a, b): (&str, &str),
    yaml: fn(&str, &str) -> String,
) -> (TestEnv, String, tempfile::TempDir, String) {
    let env = TestEnv::on_nodes(name, &[&[(label, a)], &[(label, b)]]).await;
    env.grant_slurmops_role().await;
    env.grant_node_reader().await;
    let w = env.name(&name[..1]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), yaml(&env.ns, &w)).unwrap();
    let out = apply(dir.path(), "120s");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (env, w, dir, stdout)
}

/// `sbatch -N2 -w NODES` in the bed's Slurm: Ok(job id) or Err(sbatch's refusal).
fn sbatch_two(nodes: &str) -> Result<u64, String> {
    let out = Command::new("bash")
        .args(["tests/bed/slurm.sh", "exec", slurm_instance()])
        .args([
            "sbatch",
            "--parsable",
            "-N2",
            "-w",
            nodes,
            "-o",
            "/dev/null",
        ])
        .args(["--wrap", "sleep 1"])
        .output()
        .expect("run sbatch");
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match text.parse() {
        Ok(id) if out.status.success() => Ok(id),
        _ => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

on_slurm_releases! {
async fn workers_join_the_block_of_their_kubernetes_node_and_jobs_stay_inside_a_block() {
    let (a, b) = (BLOCKS[0], BLOCKS[1]);
    // w-0 and w-2 on rack-a's node, w-1 and w-3 on rack-b's.
    let (env, w, dir, stdout) =
        applied_on_two_nodes("wtopo", BLOCK_LABEL, (a, b), cluster_yaml).await;
    // apply returned once every worker was in its block (it waits for them to register).
    let s = slurm();
    assert!(s.parser().await.unwrap().has_node_topology());
    for (i, block) in [(0, a), (1, b), (2, a), (3, b)] {
        let node = s.get(&format!("{w}-{i}")).await.unwrap();
        assert_eq!(
            node.topology,
            format!("nvlink:{block}"),
            "{w}-{i}: {stdout}"
        );
        assert!(
            stdout.contains(&format!("{w}-{i} placed in nvlink:{block}")),
            "apply did not say so: {stdout}"
        );
    }
    // slurmctld's own view agrees with the REST one.
    let topo = sh(&["exec", slurm_instance(), "scontrol", "show", "topology"]);
    let members = |block: &str| {
        topo.lines()
            .find(|l| l.starts_with(&format!("BlockName={block} ")))
            .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("Nodes=")))
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(members(a), format!("{w}-[0,2]"), "{topo}");
    assert_eq!(members(b), format!("{w}-[1,3]"), "{topo}");

    // A 2-node job across the blocks is refused; inside one block it runs to completion.
    let refused = sbatch_two(&format!("{w}-0,{w}-1")).unwrap_err();
    assert!(
        refused.contains("Requested node configuration is not available"),
        "{refused}"
    );
    let job = sbatch_two(&format!("{w}-0,{w}-2")).unwrap();
    eventually(
        "the in-block job completed",
        Duration::from_secs(30),
        async || {
            (support::slurm::job_state(job).await == vec!["COMPLETED".to_string()]).then_some(())
        },
    )
    .await;

    // A second apply finds every worker in place: nothing to do.
    let again = apply(dir.path(), "30s");
    let again = String::from_utf8_lossy(&again.stdout);
    assert!(!again.contains("placed in"), "{again}");
    env.cleanup().await;
}
; slurm_25_11 "25.11", slurm_26_05 "26.05"
}

fn tree_yaml(ns: &str, w: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - {{name: {w}, replicas: 4, cpu: "1", memory: 256Mi, features: [tree]}}
  partitions:
    - {{name: tree, nodeSets: [{w}], default: true, topology: tree}}
  topology:
    tree:
      nodeLabel: {SWITCH_LABEL}
      switches: [{}]
      nodeSets: [{w}]
"#,
            SWITCHES.join(", ")
        )
}

on_slurm_releases! {
async fn workers_join_the_leaf_switch_of_their_kubernetes_node_and_a_job_runs_under_one() {
    let (l1, l2) = (SWITCHES[0], SWITCHES[1]);
    // w-0 and w-2 under leaf-1, w-1 and w-3 under leaf-2.
    let (env, w, _dir, stdout) =
        applied_on_two_nodes("tree", SWITCH_LABEL, (l1, l2), tree_yaml).await;
    let s = slurm();
    for (i, leaf) in [(0, l1), (1, l2), (2, l1), (3, l2)] {
        let node = s.get(&format!("{w}-{i}")).await.unwrap();
        assert_eq!(node.topology, format!("fabric:{leaf}"), "{w}-{i}: {stdout}");
        assert!(
            stdout.contains(&format!("{w}-{i} placed in fabric:{leaf}")),
            "apply did not say so: {stdout}"
        );
    }
    let topo = sh(&["exec", slurm_instance(), "scontrol", "show", "topology", "fabric"]);
    assert!(topo.contains(l1) && topo.contains(l2), "{topo}");
    // Every worker idle: a 2-node job of the tree's partition runs under one leaf switch.
    for i in 0..4 {
        eventually(&format!("{w}-{i} idle"), Duration::from_secs(30), async || {
            let n = s.get(&format!("{w}-{i}")).await.ok()?;
            (n.state.has("IDLE") && !n.state.has("NOT_RESPONDING")).then_some(())
        })
        .await;
    }
    let out = Command::new("bash")
        .args(["tests/bed/slurm.sh", "exec", slurm_instance()])
        .args(["sbatch", "--parsable", "-p", "tree", "-N2", "-o", "/dev/null", "--wrap", "sleep 5"])
        .output()
        .expect("run sbatch");
    let job: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or_else(|_| {
        panic!("sbatch: {}", String::from_utf8_lossy(&out.stderr))
    });
    let nodes = eventually("the job runs", Duration::from_secs(30), async || {
        let j = s.jobs().await.ok()?.iter().find(|j| j.id == job).cloned()?;
        j.has_state("RUNNING").then(|| j.nodes.clone())
    })
    .await;
    let under = |leaf_workers: [u32; 2]| {
        let mut want: Vec<String> = leaf_workers.iter().map(|i| format!("{w}-{i}")).collect();
        want.sort();
        let mut got = nodes.clone();
        got.sort();
        got == want
    };
    assert!(under([0, 2]) || under([1, 3]), "the job runs on {nodes:?}, across leaf switches:\n{topo}");
    env.cleanup().await;
}
; slurm_25_11 "25.11", slurm_26_05 "26.05"
}
