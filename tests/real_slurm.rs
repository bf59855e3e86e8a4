//! The rendered Slurm config is only proven when real Slurm accepts it: for every example,
//! start the real slurmctld 24.11 (test bed chroot) with the rendered slurm.conf, cgroup.conf,
//! gres.conf and topology.conf, then start one dynamic slurmd per NodeSet with the exact
//! `--conf` line the worker StatefulSet passes, and check each registers in its partitions.
//!
//! Only what a test host must differ in is overlaid (see `support::slurm::test_host_overlay`): controller host and port,
//! per-node spool/pid paths, no cgroups, no slurmdbd, stand-in GPU device files, and a memory size
//! that fits (CPUs are detected).

use std::time::{Duration, Instant};

use slurmops::render::{Rendered, render};
use slurmops::spec::load;

mod support;

use support::slurm::{node, sh, test_host_overlay};

/// This test's own Slurm instance (the shared "bed" instance keeps running beside it).
const INSTANCE: &str = "examples";
const CTLD_PORT: u16 = 16917;

/// The `--conf` argument of a NodeSet's slurmd, as rendered, sized for the test host.
fn slurmd_conf(r: &Rendered, node_set: &str) -> String {
    let sts = r
        .get("StatefulSet", node_set)
        .expect("a StatefulSet per NodeSet");
    let args: Vec<String> = serde_json::from_value(
        sts.body
            .pointer("/spec/template/spec/containers/0/args")
            .cloned()
            .unwrap(),
    )
    .unwrap();
    let conf = &args[args.iter().position(|a| a == "--conf").unwrap() + 1];
    let mut parts: Vec<String> = conf
        .split(' ')
        .filter(|p| !p.starts_with("CPUs=") && !p.starts_with("RealMemory="))
        .map(str::to_string)
        .collect();
    parts.push("RealMemory=256".into());
    parts.join(" ")
}

fn check_example(dir: &str) {
    let file = format!("{dir}/cluster.yaml");
    let c =
        load(&file, &std::fs::read_to_string(&file).unwrap()).unwrap_or_else(|d| panic!("{d:?}"));
    let r = render(&c);
    let conf_dir = tempfile::tempdir().unwrap();
    for (name, content) in test_host_overlay(&c, &r, INSTANCE, CTLD_PORT) {
        std::fs::write(conf_dir.path().join(name), content).unwrap();
    }
    sh(&["start-ctld", INSTANCE, conf_dir.path().to_str().unwrap()]);
    for (i, ns) in c.spec.node_sets.iter().enumerate() {
        let name = format!("{}-0", ns.name);
        sh(&[
            "start-slurmd",
            INSTANCE,
            &name,
            &(17001 + i).to_string(),
            &slurmd_conf(&r, &ns.name),
            "-D",
            "-Z",
            "--conf-server",
            &format!("localhost:{CTLD_PORT}"),
        ]);
    }
    for ns in &c.spec.node_sets {
        let name = format!("{}-0", ns.name);
        let deadline = Instant::now() + Duration::from_secs(30);
        let fields = loop {
            let f = node(INSTANCE, &name).unwrap_or_default();
            let state = f.get("State").cloned().unwrap_or_default();
            if state.starts_with("IDLE") || Instant::now() > deadline {
                break f;
            }
            std::thread::sleep(Duration::from_millis(300));
        };
        let state = fields.get("State").cloned().unwrap_or_default();
        assert!(
            state.starts_with("IDLE") && !state.contains("INVAL"),
            "{dir}: {name} did not register idle: {fields:?}\nslurmd log:\n{}",
            sh(&["log", INSTANCE, &format!("slurmd-{name}")])
        );
        let features = fields.get("AvailableFeatures").cloned().unwrap_or_default();
        for f in std::iter::once(&ns.name).chain(ns.features.iter()) {
            assert!(
                features.split(',').any(|x| x == f),
                "{dir}: {name} lacks feature {f}: {features}"
            );
        }
        if let Some(g) = &ns.gpus {
            assert_eq!(
                fields.get("Gres").map(String::as_str),
                Some(format!("gpu:{}:{}", g.type_, g.count).as_str()),
                "{dir}: {name} GRES"
            );
        }
        let partitions: Vec<&str> = fields
            .get("Partitions")
            .map(|p| p.split(',').collect())
            .unwrap_or_default();
        for p in c
            .spec
            .partitions
            .iter()
            .filter(|p| p.node_sets.iter().any(|n| n == "ALL" || *n == ns.name))
        {
            assert!(
                partitions.contains(&p.name.as_str()),
                "{dir}: {name} is not in partition {}: {partitions:?}",
                p.name
            );
        }
    }
    // slurmctld accepted every file: it is still up after the nodes registered.
    assert!(
        sh(&["exec", INSTANCE, "scontrol", "ping"]).contains("UP"),
        "{dir}: slurmctld went down"
    );
    sh(&["stop", INSTANCE]);
}

#[test]
fn real_slurmctld_accepts_every_example_and_a_dynamic_slurmd_of_each_node_set() {
    for dir in ["examples/repo", "examples/minimal"] {
        check_example(dir);
    }
}
