//! `slurmops import slinky` end to end: the Slinky chart's own values (1.2.1, from
//! ../shared/anchors/slinky-values) with a user's overlay on top, as `helm -f` takes them, become a
//! cluster.yaml that slurmops applies to the real apiserver, and its workers register with the
//! real slurmctld.

use std::time::Duration;

use crate::support::slurm::client as slurm;
use crate::support::{TestEnv, bed, eventually, slurm_release};
use slurmops::slurm::SlurmNodes;

/// A user's values file as they are written: a GPU-less worker pool sized for the test host, the
/// Secrets named, the images of the release under test, a partition of its own.
fn overlay(node_set: &str, release: &str) -> String {
    format!(
        r#"slurmKey: {{secretRef: {{name: slurm-auth, key: slurm.key}}}}
jwtKey: {{secretRef: {{name: slurm-jwt, key: jwt_hs256.key}}}}
controller:
  slurmctld:
    image: {{repository: ghcr.io/slinkyproject/slurmctld, tag: {release}-ubuntu24.04}}
  extraConf: |
    MinJobAge=300
restapi:
  slurmrestd:
    image: {{repository: ghcr.io/slinkyproject/slurmrestd, tag: {release}-ubuntu24.04}}
nodesetDefaults:
  slurmd:
    image: {{repository: ghcr.io/slinkyproject/slurmd, tag: {release}-ubuntu24.04}}
nodesets:
  {node_set}:
    replicas: 2
    slurmd:
      resources:
        limits: {{cpu: "1", memory: 256Mi}}
    extraConf: Features=cpu-pool Weight=5
    updateStrategy: {{rollingUpdate: {{maxUnavailable: 1}}}}
partitions:
  all: {{enabled: false}}
  batch:
    enabled: true
    nodesets: [{node_set}]
    configMap: {{Default: "YES", MaxTime: "1-00:00:00"}}
"#
    )
}

#[tokio::test]
async fn an_imported_slinky_cluster_applies_and_its_workers_register() {
    let env = TestEnv::new("import").await;
    let w = env.name("imp");
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("my-values.yaml");
    std::fs::write(&mine, overlay(&w, slurm_release())).unwrap();
    let chart = "../shared/anchors/slinky-values/values-v1.2.1.yaml";
    assert!(
        std::path::Path::new(chart).exists(),
        "{chart} is missing: the test needs ../shared beside the repository"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["import", "slinky", chart, mine.to_str().unwrap()])
        .args(["--name", "c", "--namespace", &env.ns])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "everything maps:\n{report}");
    for want in [
        format!("nodesets.{w}.replicas: → spec.nodeSets[{w}].replicas"),
        "partitions.all: disabled".to_string(),
    ] {
        assert!(
            report.lines().any(|l| l.contains(&want)),
            "no report line with {want:?}:\n{report}"
        );
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let c = slurmops::spec::load("cluster.yaml", &text).unwrap();
    let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_admin), None)
        .await
        .unwrap();
    let opts = slurmops::apply::Options {
        wait: Some(Duration::from_secs(90)),
        ..Default::default()
    };
    let rendered = slurmops::render::render(&c);
    slurmops::apply::apply(
        &cluster,
        &c,
        &text,
        &rendered,
        &opts,
        &slurmops::apply::NoSlurm,
    )
    .await
    .unwrap();
    let s = slurm();
    for i in 0..2 {
        let name = format!("{w}-{i}");
        eventually(
            &format!("{name} registered"),
            Duration::from_secs(60),
            async || {
                let node = s.get(&name).await.ok()?;
                let idle = node.state.has("IDLE") && !node.state.has("NOT_RESPONDING");
                (idle && node.features.iter().any(|f| f == "cpu-pool")).then_some(())
            },
        )
        .await;
    }
}
