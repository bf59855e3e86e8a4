//! The rendered Slurm config is only proven when real Slurm accepts it: for every example,
//! start the real slurmctld of the release it names (24.11 or 26.05, from the test bed's chroots)
//! with the rendered slurm.conf, cgroup.conf, gres.conf and topology.yaml, then start one dynamic
//! slurmd per NodeSet with the exact `--conf` line the worker StatefulSet passes, and check each
//! registers in its partitions.
//!
//! Only what a test host must differ in is overlaid (see `support::slurm::test_host_overlay`):
//! controller host and port, per-instance state and pid paths, no cgroups, no slurmdbd, stand-in GPU device files, and a memory size
//! that fits (CPUs are detected).

use std::time::{Duration, Instant};

use slurmops::cluster::load;
use slurmops::render::{Rendered, render};

use crate::support::slurm::{conf_cache, node, sh, start_ctld, test_host_overlay};

/// An example's own Slurm instance, slurmctld port and first slurmd port, by release (the shared
/// bed instances keep running beside it; both examples run at once).
fn instance_of(release: &str) -> (&'static str, u16, u16) {
    match release {
        "24.11" => ("examples", 16917, 17001),
        "26.05" => ("examples2605", 16937, 17101),
        other => panic!("the test bed runs no Slurm {other}"),
    }
}

/// The `--conf` argument of a NodeSet's slurmd, as rendered, sized for the test host.
fn slurmd_conf(r: &Rendered, node_set: &str) -> String {
    let conf = crate::support::slurm::rendered_slurmd_conf(r, node_set);
    let mut parts: Vec<String> = conf
        .split(' ')
        .filter(|p| !p.starts_with("CPUs=") && !p.starts_with("RealMemory="))
        .map(str::to_string)
        .collect();
    parts.push("RealMemory=256".into());
    parts.join(" ")
}

/// The body of `GET PATH` from 127.0.0.1:PORT (HTTP/1.0, the connection closes after it).
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // One write: slurmctld parses the request from the first segment it reads.
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_once("\r\n\r\n")
        .map_or(out.clone(), |(_, b)| b.to_string())
}

fn check_example(dir: &str) {
    let file = format!("{dir}/cluster.yaml");
    let c =
        load(&file, &std::fs::read_to_string(&file).unwrap()).unwrap_or_else(|d| panic!("{d:?}"));
    let r = render(&c);
    let (instance, ctld_port, slurmd_port) = instance_of(&c.spec.slurm_version);
    let conf_dir = tempfile::tempdir().unwrap();
    for (name, content) in test_host_overlay(&c, &r, instance, ctld_port) {
        std::fs::write(conf_dir.path().join(name), content).unwrap();
    }
    start_ctld(instance, &c.spec.slurm_version, conf_dir.path());
    for (i, ns) in c.spec.node_sets.iter().enumerate() {
        let name = format!("{}-0", ns.name);
        sh(&[
            "start-slurmd",
            instance,
            &name,
            &(usize::from(slurmd_port) + i).to_string(),
            &slurmd_conf(&r, &ns.name),
            "-D",
            "-Z",
            "--conf-server",
            &format!("localhost:{ctld_port}"),
        ]);
    }
    for ns in &c.spec.node_sets {
        let name = format!("{}-0", ns.name);
        let deadline = Instant::now() + Duration::from_secs(30);
        let fields = loop {
            let f = node(instance, &name).unwrap_or_default();
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
            sh(&["log", instance, &format!("slurmd-{name}")])
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
    // Every config file written in cluster.yaml reached every slurmd, configless.
    for (file, f) in &c.spec.controller.config_files {
        let Some(content) = &f.content else { continue };
        for ns in &c.spec.node_sets {
            let name = format!("{}-0", ns.name);
            assert_eq!(
                conf_cache(instance, &name, file).as_ref(),
                Some(content),
                "{dir}: {name} did not receive {file} from slurmctld"
            );
        }
    }
    if c.spec.controller.metrics.enabled {
        // metrics/openmetrics answers on slurmctld's own port, counting the registered workers
        // and the FUTURE placeholders of NodeSets that autoscale from zero.
        let metrics = http_get(ctld_port, "/metrics/nodes");
        let placeholders: Vec<String> = c
            .spec
            .node_sets
            .iter()
            .filter(|n| n.autoscale.as_ref().is_some_and(|a| a.min == 0))
            .map(slurmops::render::slurm::placeholder)
            .collect();
        for p in &placeholders {
            assert!(
                metrics.contains(&format!("node=\"{p}\"")),
                "{dir}: placeholder {p} missing from /metrics/nodes: {metrics}"
            );
        }
        let nodes = c.spec.node_sets.len() + placeholders.len();
        assert!(
            metrics.lines().any(|l| l == format!("slurm_nodes {nodes}")),
            "{dir}: slurmctld's /metrics/nodes: {metrics}"
        );
        // Every endpoint the ServiceMonitor scrapes answers. (The dashboard charts the daemon's
        // registry only, none of this slurmctld's: tests/offline/dashboard.rs.)
        for path in slurmops::render::metrics::ENDPOINTS {
            let body = http_get(ctld_port, path);
            assert!(body.contains("# TYPE slurm_"), "{dir}: {path}: {body}");
        }
    }
    // slurmctld accepted every file: it is still up after the nodes registered.
    assert!(
        sh(&["exec", instance, "scontrol", "ping"]).contains("UP"),
        "{dir}: slurmctld went down"
    );
    sh(&["stop", instance]);
}

#[test]
fn real_slurmctld_accepts_the_gpu_example_and_a_dynamic_slurmd_of_each_node_set() {
    check_example("examples/repo");
}

#[test]
fn real_slurmctld_accepts_the_minimal_example_and_a_dynamic_slurmd_of_each_node_set() {
    check_example("examples/minimal");
}

#[test]
fn config_files_reach_every_slurmd_configless_and_a_failing_health_check_drains_its_node() {
    let text = std::fs::read_to_string("examples/minimal/cluster.yaml")
        .unwrap()
        .replace(
            "  nodeSets:\n",
            r#"  controller:
    configFiles:
      plugstack.conf:
        content: |
          optional /usr/lib/x86_64-linux-gnu/slurm/spank_pyxis.so runtime_path=/run/pyxis
      oci.conf:
        content: |
          RunTimeQuery="runc --rootless=true --root=/run/user/%U/ state %n.%u.%j.%s.%t"
          RunTimeKill="runc --rootless=true --root=/run/user/%U/ kill -a %n.%u.%j.%s.%t"
    healthCheck:
      interval: 2s
      program: |
        #!/bin/sh
        scontrol update nodename="$(hostname)" state=drain reason="health check: /scratch is full"
        exit 1
  nodeSets:
"#,
        );
    let c = load("cluster.yaml", &text).unwrap_or_else(|d| panic!("{d:?}"));
    let r = render(&c);
    let (instance, ctld_port, slurmd_port) = ("extras", 16957, 17201);
    let conf_dir = tempfile::tempdir().unwrap();
    for (name, content) in test_host_overlay(&c, &r, instance, ctld_port) {
        std::fs::write(conf_dir.path().join(name), content).unwrap();
    }
    start_ctld(instance, &c.spec.slurm_version, conf_dir.path());
    let name = "cpu-0";
    sh(&[
        "start-slurmd",
        instance,
        name,
        &slurmd_port.to_string(),
        &slurmd_conf(&r, "cpu"),
        "-D",
        "-Z",
        "--conf-server",
        &format!("localhost:{ctld_port}"),
    ]);
    // The worker runs the script slurm.conf names every 2 s; it drains its own node.
    let deadline = Instant::now() + Duration::from_secs(30);
    let fields = loop {
        let f = node(instance, name).unwrap_or_default();
        if f.get("State").is_some_and(|s| s.contains("DRAIN")) || Instant::now() > deadline {
            break f;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        fields
            .get("Reason")
            .is_some_and(|r| r.starts_with("health")),
        "{name} was not drained by its health check: {fields:?}\nslurmd log:\n{}",
        sh(&["log", instance, &format!("slurmd-{name}")])
    );
    let reason = sh(&["exec", instance, "sinfo", "-h", "-R", "-o", "%E"]);
    assert_eq!(reason.trim(), "health check: /scratch is full");
    for file in ["plugstack.conf", "oci.conf"] {
        let sent = c.spec.controller.config_files[file].content.clone();
        assert_eq!(
            conf_cache(instance, name, file),
            sent,
            "{name} did not receive {file} from slurmctld"
        );
    }
    sh(&["stop", instance]);
}
