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
    let c = slurmops::cluster::load("cluster.yaml", &text).unwrap();
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

/// Slinky's slurm.conf, as its operator writes it (docs anchor: ClusterName `NAMESPACE_RELEASE`,
/// dynamic workers joining their NodeSet by feature, a NodeSet's own partition), with the paths
/// and ports of a test host.
fn slinky_conf(inst: &str, port: u16) -> String {
    format!(
        "ClusterName=slurm_slurm\nSlurmctldHost=localhost\nSlurmctldPort={port}\nSlurmUser=slurm\n\
         StateSaveLocation=/var/spool/slurm-{inst}/ctld\nSlurmctldPidFile=/run/slurm-{inst}/slurmctld.pid\n\
         SlurmdPidFile=/run/slurm-{inst}/slurmd-%n.pid\nSlurmdUser=root\nSlurmdSpoolDir=/var/spool/slurmd\n\
         MaxNodeCount=1024\nAuthType=auth/slurm\nCredType=cred/slurm\nAuthInfo=use_client_ids\n\
         AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=/etc/slurm-{inst}/jwt_hs256.key\n\
         SlurmctldParameters=enable_configless,reconfig_on_restart\nProctrackType=proctrack/linuxproc\n\
         TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
         NodeSet=gpu Feature=gpu\nPartitionName=gpu Nodes=gpu MaxTime=UNLIMITED State=UP\n"
    )
}

/// The queue moves with the state directory: a slurmctld configured as Slinky configures it
/// holds two held jobs and stops (saving its state); slurmctld started on that directory from
/// the imported cluster's rendered slurm.conf has both, under the same ids, in the same
/// partition. With the ClusterName slurmops would choose by itself (metadata.name), slurmctld
/// refuses that directory: why the import keeps Slinky's.
#[tokio::test]
async fn a_slinky_controllers_queue_survives_the_move_to_the_imported_configuration() {
    use crate::support::slurm::{
        node_state, sh, start_ctld, start_ctld_keeping_state, test_host_overlay,
    };
    let release = slurm_release();
    let (inst, port, slurmd_port) = ("slinkymove", 16977u16, 17301u16);
    // Its daemons stop with the test, whatever the outcome.
    struct Stop(&'static str);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = std::process::Command::new("bash")
                .args(["tests/bed/slurm.sh", "stop", self.0])
                .output();
        }
    }
    let _stop = Stop(inst);
    let dir = tempfile::tempdir().unwrap();
    let slinky = dir.path().join("slinky");
    std::fs::create_dir(&slinky).unwrap();
    std::fs::write(slinky.join("slurm.conf"), slinky_conf(inst, port)).unwrap();
    std::fs::write(slinky.join("cgroup.conf"), "CgroupPlugin=disabled\n").unwrap();
    start_ctld(inst, release, &slinky);
    sh(&[
        "start-slurmd",
        inst,
        "gpu-0",
        &slurmd_port.to_string(),
        "Features=gpu CPUs=1 RealMemory=256",
        "-D",
        "-Z",
        "--conf-server",
        &format!("localhost:{port}"),
    ]);
    eventually(
        "gpu-0 registered with Slinky's slurmctld",
        Duration::from_secs(30),
        async || {
            node_state(inst, "gpu-0")
                .filter(|s| s.contains("IDLE"))
                .map(|_| ())
        },
    )
    .await;
    let held: Vec<String> = (0..2)
        .map(|_| {
            sh(&[
                "exec",
                inst,
                "sbatch",
                "--parsable",
                "-H",
                "-p",
                "gpu",
                "-o",
                "/dev/null",
                "--wrap",
                "true",
            ])
            .trim()
            .to_string()
        })
        .collect();
    sh(&["stop-slurmd", inst, "gpu-0"]);
    sh(&["stop-ctld", inst]);

    // The values that made that cluster, imported.
    let values = dir.path().join("values.yaml");
    std::fs::write(
        &values,
        format!(
            "slurmKey: {{secretRef: {{name: slurm-auth, key: slurm.key}}}}\njwtKey: {{secretRef: {{name: slurm-jwt, key: jwt_hs256.key}}}}\n\
             controller: {{slurmctld: {{image: {{repository: ghcr.io/slinkyproject/slurmctld, tag: {release}-ubuntu24.04}}}}}}\n\
             nodesets:\n  gpu:\n    replicas: 1\n    partition: {{enabled: true, configMap: {{MaxTime: UNLIMITED}}}}\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args([
            "import",
            "slinky",
            values.to_str().unwrap(),
            "--name",
            "slurm",
            "--namespace",
            "slurm",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("clusterName: slurm_slurm"),
        "{report}\n{text}"
    );
    let start = |text: &str, sub: &str| {
        let c = slurmops::cluster::load("cluster.yaml", text).unwrap();
        let conf = dir.path().join(sub);
        std::fs::create_dir(&conf).unwrap();
        for (name, content) in test_host_overlay(&c, &slurmops::render::render(&c), inst, port) {
            std::fs::write(conf.join(name), content).unwrap();
        }
        start_ctld_keeping_state(inst, release, &conf)
    };
    let own_name = text.replace("clusterName: slurm_slurm", "clusterName: slurm");
    assert!(
        !start(&own_name, "own-name"),
        "slurmctld took state saved under another ClusterName"
    );
    assert!(
        start(&text, "imported"),
        "slurmctld refused the state:\n{}",
        sh(&["log", inst, "slurmctld"])
    );
    for id in &held {
        let job = sh(&["exec", inst, "scontrol", "-o", "show", "job", id]);
        assert!(
            job.contains("JobState=PENDING")
                && job.contains("Partition=gpu")
                && job.contains("Reason=JobHeldUser"),
            "job {id} after the move: {job}"
        );
    }
}
