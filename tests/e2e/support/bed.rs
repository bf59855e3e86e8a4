//! The shared test bed (tests/bed/bed.sh): started by the first test that needs it, reused by every
//! other test process while it runs, torn down by PID at the end of `tests/run-all.sh`.
//! If a part cannot start, the test fails and the message names the part (never a skip).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use slurmops::cluster::load;
use slurmops::render::render;

use super::slurm::test_host_overlay;

/// The Slurm releases the bed runs side by side, each as its own shared instance
/// (tests/bed/slurm.sh): (release, instance, slurmctld port).
pub const RELEASES: [(&str, &str, u16); 3] = [
    ("24.11", "bed", 16817),
    ("25.11", "bed2511", 16837),
    ("26.05", "bed2605", 16827),
];

/// The Slurm release this test process runs against: chosen once, before the bed is used, by the
/// `on_each_slurm!` test it runs (nextest runs each test in its own process); 24.11 otherwise.
static SELECTED: OnceLock<&'static str> = OnceLock::new();

/// Makes RELEASE this process's Slurm. A process that already chose another fails: run the
/// suite with `cargo nextest` (one process per test), as tests/run-all.sh does.
pub fn select_slurm(release: &'static str) {
    let chosen = SELECTED.get_or_init(|| release);
    assert_eq!(
        *chosen, release,
        "this test process already runs against Slurm {chosen}: run the tests with cargo nextest"
    );
}

/// The Slurm release of this test process.
pub fn slurm_release() -> &'static str {
    SELECTED.get_or_init(|| RELEASES[0].0)
}

/// The shared Slurm instance (tests/bed/slurm.sh) of this process's release.
pub fn slurm_instance() -> &'static str {
    let release = slurm_release();
    RELEASES
        .iter()
        .find(|(r, _, _)| *r == release)
        .map(|(_, inst, _)| *inst)
        .unwrap_or_else(|| panic!("the bed runs no Slurm {release}"))
}

pub struct Bed {
    pub kube_url: String,
    pub kubeconfig_admin: PathBuf,
    pub kubeconfig_restricted: PathBuf,
    /// slurmctld, slurmrestd and a root JWT of this process's Slurm release.
    pub slurmctld_port: u16,
    pub slurmrestd_url: String,
    pub slurm_jwt: String,
    pub git: GitServers,
}

pub struct GitServers {
    /// Directory holding the served bare repositories.
    pub root: PathBuf,
    pub daemon_url: String,
    pub http_url: String,
    /// `ssh://user@127.0.0.1:PORT/abs/root`: append `/NAME.git`.
    pub ssh_url: String,
    pub ssh_key: PathBuf,
    /// known_hosts with the server's pinned host key.
    pub known_hosts: PathBuf,
}

/// The label that names a test Node's block, and the blocks the bed's Slurm declares where the
/// release has topologies (no other test submits jobs of more than one node to `all`).
pub const BLOCK_LABEL: &str = "slurmops.dev/test-block";
pub const BLOCKS: [&str; 2] = ["rack-a", "rack-b"];
/// The label that names a test Node's leaf switch, and the leaf switches of the bed's tree.
pub const SWITCH_LABEL: &str = "slurmops.dev/test-switch";
pub const SWITCHES: [&str; 2] = ["leaf-1", "leaf-2"];

/// The bed's topologies: BLOCKS of 2 nodes (workers join by the BLOCK_LABEL of their Node), the
/// cluster's default, and a tree of SWITCHES (by SWITCH_LABEL), partition `tree`'s.
pub fn bed_topology() -> slurmops::cluster::types::Topology {
    use slurmops::cluster::types::{BlockTopology, Topology, TreeTopology};
    Topology {
        block: Some(BlockTopology {
            node_label: BLOCK_LABEL.into(),
            blocks: BLOCKS.iter().map(|b| b.to_string()).collect(),
            node_sets: vec!["cpu".into()],
            block_size: 2,
            block_as_node_rank: true,
        }),
        tree: Some(TreeTopology {
            node_label: SWITCH_LABEL.into(),
            switches: SWITCHES.iter().map(|b| b.to_string()).collect(),
            node_sets: vec!["tree".into()],
        }),
    }
}

/// Runs the bed script SCRIPT with ARGS and returns the `KEY=VALUE` lines it prints; panics
/// with its output, naming WHAT, when it fails.
pub fn script_env(script: &str, args: &[&std::ffi::OsStr], what: &str) -> BTreeMap<String, String> {
    let out = Command::new("bash")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    assert!(
        out.status.success(),
        "{what} did not start ({script}):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The running bed; starts it on first use in this process.
pub fn bed() -> &'static Bed {
    static BED: OnceLock<Bed> = OnceLock::new();
    BED.get_or_init(start)
}

fn start() -> Bed {
    let file = "tests/bed/cluster.yaml";
    let text = std::fs::read_to_string(file).expect("read tests/bed/cluster.yaml");
    let cluster = load(file, &text).unwrap_or_else(|d| panic!("{file} is invalid: {d:?}"));
    let confs: Vec<tempfile::TempDir> = RELEASES
        .iter()
        .map(|(release, instance, port)| {
            let mut cluster = cluster.clone();
            cluster.spec.slurm_version = release.to_string();
            if slurmops::cluster::release::find(release).is_some_and(|r| r.block_topology) {
                cluster.spec.topology = Some(bed_topology());
                for p in cluster
                    .spec
                    .partitions
                    .iter_mut()
                    .filter(|p| p.name == "tree")
                {
                    p.topology = Some(slurmops::cluster::types::TopologyKind::Tree);
                }
            }
            // Where the release has them, slurmctld serves its own metrics, as a production
            // cluster with `controller.metrics` does (tests/e2e/prometheus.rs scrapes them).
            cluster.spec.controller.metrics.enabled =
                slurmops::cluster::release::find(release).is_some_and(|r| r.openmetrics);
            let conf = tempfile::tempdir().expect("temp dir");
            for (name, content) in test_host_overlay(&cluster, &render(&cluster), instance, *port) {
                std::fs::write(conf.path().join(name), content).expect("write bed slurm config");
            }
            conf
        })
        .collect();
    let args: Vec<&std::ffi::OsStr> = std::iter::once("up".as_ref())
        .chain(confs.iter().map(|c| c.path().as_os_str()))
        .collect();
    let env = script_env("tests/bed/bed.sh", &args, "the test bed");
    let get = |k: &str| {
        env.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("tests/bed/bed.sh up did not report {k}"))
    };
    let tag = slurm_release().replace('.', "_");
    Bed {
        kube_url: get("KUBE_URL"),
        kubeconfig_admin: get("KUBECONFIG_ADMIN").into(),
        kubeconfig_restricted: get("KUBECONFIG_RESTRICTED").into(),
        slurmctld_port: get(&format!("SLURM_{tag}_CTLD_PORT"))
            .parse()
            .expect("port"),
        slurmrestd_url: get(&format!("SLURM_{tag}_RESTD_URL")),
        slurm_jwt: get(&format!("SLURM_{tag}_JWT")),
        git: GitServers {
            root: get("GIT_ROOT").into(),
            daemon_url: get("GIT_DAEMON_URL"),
            http_url: get("GIT_HTTP_URL"),
            ssh_url: get("GIT_SSH_URL"),
            ssh_key: get("GIT_SSH_KEY").into(),
            known_hosts: get("GIT_KNOWN_HOSTS").into(),
        },
    }
}
