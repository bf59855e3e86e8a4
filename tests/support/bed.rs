//! The shared test bed (tests/bed/bed.sh): started by the first test that needs it, reused by every
//! other test process while it runs, torn down by PID at the end of `tests/run-all.sh`.
//! If a part cannot start, the test fails and the message names the part (never a skip).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use slurmops::render::render;
use slurmops::spec::load;

use super::slurm::test_host_overlay;

/// The Slurm instance (tests/bed/slurm.sh) every Kubernetes-driven test shares.
pub const SLURM_INSTANCE: &str = "bed";

pub struct Bed {
    pub kube_url: String,
    pub kubeconfig_admin: PathBuf,
    pub kubeconfig_restricted: PathBuf,
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

/// The running bed; starts it on first use in this process.
pub fn bed() -> &'static Bed {
    static BED: OnceLock<Bed> = OnceLock::new();
    BED.get_or_init(start)
}

fn start() -> Bed {
    let file = "tests/bed/cluster.yaml";
    let text = std::fs::read_to_string(file).expect("read tests/bed/cluster.yaml");
    let cluster = load(file, &text).unwrap_or_else(|d| panic!("{file} is invalid: {d:?}"));
    let conf = tempfile::tempdir().expect("temp dir");
    for (name, content) in test_host_overlay(&cluster, &render(&cluster), SLURM_INSTANCE, 16817) {
        std::fs::write(conf.path().join(name), content).expect("write bed slurm config");
    }
    let out = Command::new("bash")
        .args(["tests/bed/bed.sh", "up"])
        .arg(conf.path())
        .output()
        .expect("run tests/bed/bed.sh");
    assert!(
        out.status.success(),
        "the test bed did not start (tests/bed/bed.sh up):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let env: BTreeMap<String, String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let get = |k: &str| {
        env.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("tests/bed/bed.sh up did not report {k}"))
    };
    Bed {
        kube_url: get("KUBE_URL"),
        kubeconfig_admin: get("KUBECONFIG_ADMIN").into(),
        kubeconfig_restricted: get("KUBECONFIG_RESTRICTED").into(),
        slurmctld_port: get("SLURMCTLD_PORT").parse().expect("port"),
        slurmrestd_url: get("SLURMRESTD_URL"),
        slurm_jwt: get("SLURM_JWT"),
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
