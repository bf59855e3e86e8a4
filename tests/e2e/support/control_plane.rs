//! A Kubernetes control plane of one test's own (tests/bed/kube.sh: etcd, kube-apiserver and
//! kube-controller-manager on ports of its own, data in a directory of its own), for faults the
//! bed's shared apiserver cannot take: etcd and the apiserver crashed and started again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

pub struct ControlPlane {
    dir: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

/// A port P with P+1 and P+2 free too (kube.sh puts the controller-manager and etcd's peer and
/// metrics ports there), claimed as the slurmds' ports are: below the kernel's ephemeral range,
/// where no outgoing connection can take one between this check and its start (one took the
/// controller-manager's so, on a loaded machine, when these came from `bind :0`), and locked
/// against the other test processes.
fn three_ports() -> u16 {
    super::slurm::claim_ports(3)
}

fn kube_sh(dir: &std::path::Path, api: u16, etcd: u16, args: &[&str]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg("tests/bed/kube.sh")
        .args(args)
        .env("SLURMOPS_BED_RUN", dir)
        .env("SLURMOPS_KUBE_PORT", api.to_string())
        .env("SLURMOPS_ETCD_PORT", etcd.to_string())
        .output()
        .expect("run tests/bed/kube.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    match out.status.success() {
        true => Ok(stdout),
        false => Err(format!(
            "kube.sh {args:?}: {}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

impl ControlPlane {
    pub fn start() -> ControlPlane {
        // A port taken between the check and the start (by another test's listener): stop what
        // started, and again on other ports.
        let mut tries = 0;
        let (dir, api, etcd, out) = loop {
            let dir = tempfile::tempdir().unwrap();
            let (api, etcd) = (three_ports(), three_ports());
            match kube_sh(dir.path(), api, etcd, &["up"]) {
                Ok(out) => break (dir, api, etcd, out),
                Err(e) if e.contains("address already in use") && tries < 3 => {
                    eprintln!("control plane: a port was taken, again on others: {e}");
                    let _ = kube_sh(dir.path(), api, etcd, &["down"]);
                    tries += 1;
                }
                Err(e) => panic!("{e}"),
            }
        };
        let mut env: BTreeMap<String, String> = out
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.insert("API_PORT".into(), api.to_string());
        env.insert("ETCD_PORT".into(), etcd.to_string());
        ControlPlane { dir, env }
    }

    fn ports(&self) -> (u16, u16) {
        (
            self.env["API_PORT"].parse().unwrap(),
            self.env["ETCD_PORT"].parse().unwrap(),
        )
    }

    pub fn kubeconfig_admin(&self) -> PathBuf {
        self.env["KUBECONFIG_ADMIN"].clone().into()
    }

    pub fn kubeconfig_restricted(&self) -> PathBuf {
        self.env["KUBECONFIG_RESTRICTED"].clone().into()
    }

    /// etcd and the apiserver killed (SIGKILL), down for DOWN, started again on etcd's data;
    /// returns once the apiserver is ready.
    pub fn restart(&self, down: Duration) {
        let (api, etcd) = self.ports();
        let secs = format!("{:.1}", down.as_secs_f64());
        kube_sh(self.dir.path(), api, etcd, &["restart", &secs])
            .unwrap_or_else(|e| panic!("the own control plane did not come back: {e}"));
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let (api, etcd) = self.ports();
        let _ = kube_sh(self.dir.path(), api, etcd, &["down"]);
    }
}
