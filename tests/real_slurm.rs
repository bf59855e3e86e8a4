//! The rendered Slurm config is only proven when real Slurm accepts it: for every example,
//! start the real slurmctld 24.11 (test bed chroot) with the rendered slurm.conf, cgroup.conf,
//! gres.conf and topology.conf, then start one dynamic slurmd per NodeSet with the exact
//! `--conf` line the worker StatefulSet passes, and check each registers in its partitions.
//!
//! Only what a test host must differ in is overlaid (see `test_host_overlay`): controller host,
//! per-node spool/pid paths, no cgroups, no slurmdbd, stand-in GPU device files, and a memory size
//! that fits (CPUs are detected).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use slurmops::render::{Rendered, render};
use slurmops::spec::{ClusterFile, load};

const BED: &str = "tests/bed/slurm.sh";

fn bed(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(BED)
        .args(args)
        .output()
        .expect("run tests/bed/slurm.sh");
    assert!(
        out.status.success(),
        "test bed failed: slurm.sh {args:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn set_params(conf: &str, set: &[(&str, &str)], drop: &[&str]) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in conf.lines() {
        let key = line.split('=').next().unwrap_or("");
        if drop.contains(&key) || set.iter().any(|(k, _)| *k == key) {
            continue;
        }
        out.push(line.to_string());
    }
    let mut head: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
    head.extend(out);
    head.join("\n") + "\n"
}

/// The rendered files with the test host's differences applied.
fn test_host_overlay(c: &ClusterFile, r: &Rendered) -> BTreeMap<String, String> {
    let mut files = r.slurm.clone();
    files.remove("slurmdbd.conf");
    let slurm_conf = set_params(
        &files["slurm.conf"],
        &[
            ("SlurmctldHost", "localhost"),
            ("SlurmdSpoolDir", "/var/spool/slurmd/%n"),
            ("SlurmdPidFile", "/run/slurmd/slurmd-%n.pid"),
            ("ProctrackType", "proctrack/linuxproc"),
            ("TaskPlugin", "task/none"),
            ("JobAcctGatherType", "jobacct_gather/none"),
            ("AccountingStorageType", "accounting_storage/none"),
        ],
        &["AccountingStorageHost", "AccountingStoragePort"],
    );
    files.insert("slurm.conf".into(), slurm_conf);
    files.insert("cgroup.conf".into(), "CgroupPlugin=disabled\n".into());
    if let Some(gres) = files.get_mut("gres.conf") {
        // No GPUs here: the same GRES on stand-in device files (see tests/bed/slurm.sh).
        for ns in c
            .spec
            .node_sets
            .iter()
            .filter_map(|n| n.gpus.as_ref().map(|g| (n, g)))
        {
            let (n, g) = ns;
            *gres = gres
                .lines()
                .map(|l| {
                    if l.starts_with(&format!("NodeName={}-", n.name)) {
                        format!(
                            "{} File=/run/fake-gpu/nvidia[0-{}]",
                            l.replace(" AutoDetect=nvml", "")
                                .split(" File=")
                                .next()
                                .unwrap_or(l),
                            g.count - 1
                        )
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n";
        }
    }
    files.extend(r.scripts.clone());
    files
}

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

fn node_fields(name: &str) -> BTreeMap<String, String> {
    let out = Command::new("bash")
        .arg(BED)
        .args(["exec", "scontrol", "-o", "show", "node", name])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

fn check_example(dir: &str) {
    let file = format!("{dir}/cluster.yaml");
    let c =
        load(&file, &std::fs::read_to_string(&file).unwrap()).unwrap_or_else(|d| panic!("{d:?}"));
    let r = render(&c);
    let conf_dir = tempfile::tempdir().unwrap();
    for (name, content) in test_host_overlay(&c, &r) {
        std::fs::write(conf_dir.path().join(name), content).unwrap();
    }
    bed(&["start-ctld", conf_dir.path().to_str().unwrap()]);
    for (i, ns) in c.spec.node_sets.iter().enumerate() {
        let name = format!("{}-0", ns.name);
        bed(&[
            "start-slurmd",
            &name,
            &(17001 + i).to_string(),
            &slurmd_conf(&r, &ns.name),
        ]);
    }
    for ns in &c.spec.node_sets {
        let name = format!("{}-0", ns.name);
        let deadline = Instant::now() + Duration::from_secs(30);
        let fields = loop {
            let f = node_fields(&name);
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
            bed(&["log", &format!("slurmd-{name}")])
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
        bed(&["exec", "scontrol", "ping"]).contains("UP"),
        "{dir}: slurmctld went down"
    );
    bed(&["stop"]);
}

#[test]
fn real_slurmctld_accepts_every_example_and_a_dynamic_slurmd_of_each_node_set() {
    assert!(Path::new(BED).exists());
    for dir in ["examples/repo", "examples/minimal"] {
        check_example(dir);
    }
}
