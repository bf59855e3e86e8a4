//! Block topology on the real Slurm 26.05 of the test bed: the bed's slurmctld runs with the
//! topology.yaml slurmops renders (blocks declared, no nodes). Workers run on Kubernetes nodes
//! whose label names their block; `slurmops apply` places each registered worker in that block
//! through slurmrestd, and Slurm then refuses a 2-node job spanning two blocks while one inside a
//! block runs. 24.11 refusing block topology is a validation test (tests/offline/validation.rs).

use crate::support;

use std::process::Command;
use std::time::Duration;

use slurmops::slurm::{DataParser, SlurmNodes};

use crate::support::bed::{BLOCK_LABEL, BLOCKS};
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

#[tokio::test(flavor = "multi_thread")]
async fn workers_join_the_block_of_their_kubernetes_node_and_jobs_stay_inside_a_block() {
    support::select_slurm("26.05");
    let (a, b) = (BLOCKS[0], BLOCKS[1]);
    // Pods go to the nodes by ordinal: w-0 and w-2 on rack-a's node, w-1 and w-3 on rack-b's.
    let env = TestEnv::on_nodes("topo", &[&[(BLOCK_LABEL, a)], &[(BLOCK_LABEL, b)]]).await;
    env.grant_slurmops_role().await;
    env.grant_node_reader().await;
    let w = env.name("w");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), cluster_yaml(&env.ns, &w)).unwrap();
    let out = apply(dir.path(), "120s");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // apply returned once every worker was in its block (it waits for them to register).
    let s = slurm();
    assert_eq!(s.parser().await.unwrap(), DataParser::V0045);
    for (i, block) in [(0, a), (1, b), (2, a), (3, b)] {
        let node = s.get(&format!("{w}-{i}")).await.unwrap();
        assert_eq!(
            node.topology,
            format!("nvlink:{block}"),
            "{w}-{i}: {stdout}"
        );
        assert!(
            stdout.contains(&format!("{w}-{i} placed in block nvlink:{block}")),
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
    assert!(!again.contains("placed in block"), "{again}");
    env.cleanup().await;
}
