//! The quickstart's Slurm on the real node, from images (tests/bed/images.sh): what a user sees
//! with kubectl once the images are there — every pod Ready through its probes, the worker IDLE in
//! Slurm after configless registration, `srun` and `sbatch` from a pod — and a worker rollout
//! through the real kubelet.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::real_node::real_node;

/// The image archives of tests/bed/images.sh (built once per machine, cached), built now if
/// missing.
pub fn archives() -> Vec<PathBuf> {
    let out = Command::new("bash")
        .arg("tests/bed/images.sh")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tests/bed/images.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .collect()
}

/// Imports ARCHIVE into the node's containerd.
pub fn import(archive: &std::path::Path) {
    let out = Command::new("bash")
        .args(["tests/bed/node.sh", "import"])
        .arg(archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "importing {} failed: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Removes the images of tests/bed/images.sh from the node's containerd (they outlive
/// `node.sh down`), so that a test starts on a node without them.
pub fn forget() {
    let listed = super::real_node::ctr(&["images", "ls", "-q"]);
    let ours: Vec<&str> = listed
        .lines()
        .filter(|i| {
            i.starts_with("ghcr.io/slinkyproject/")
                || i.starts_with("bed.local/slurm/")
                || i.starts_with("docker.io/library/mariadb:")
        })
        .collect();
    if !ours.is_empty() {
        let mut args = vec!["images", "rm"];
        args.extend(ours);
        super::real_node::ctr(&args);
    }
}

/// Namespaces of the real node, deleted with everything in them when the test ends, however it
/// ends: the node has two CPUs, and the next test's workers need what this one's hold.
pub struct Teardown(pub Vec<String>);
impl Drop for Teardown {
    fn drop(&mut self) {
        for ns in &self.0 {
            // The pods gone is what the next test needs; the namespace's own end takes longer.
            // No grace: the test is over, and a worker's preStop would wait for a slurmctld
            // already stopped (30 s a worker, on the longest chain of CI's run).
            let _ = kubectl(&["delete", "namespace", ns, "--wait=false"]);
            let pods = ["-n", ns, "delete", "pods", "--all", "--grace-period=1"];
            if let Err(e) = kubectl(&[&pods[..], &["--timeout=3m"]].concat()) {
                eprintln!("deleting the pods of {ns}: {e}");
            }
        }
    }
}

/// `kubectl ARGS` against the real node as its administrator: stdout, or stderr on failure.
pub fn kubectl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", &real_node().kubeconfig)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match out.status.success() {
        true => Ok(text(&out.stdout)),
        false => Err(format!("{}{}", text(&out.stdout), text(&out.stderr))),
    }
}

pub fn kubectl_ok(args: &[&str]) -> String {
    kubectl(args).unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")))
}

/// A Slurm command run in the pod POD's first container (`kubectl exec`).
pub fn in_pod(ns: &str, pod: &str, container: &str, cmd: &str) -> Result<String, String> {
    kubectl(&[
        "-n", ns, "exec", pod, "-c", container, "--", "sh", "-c", cmd,
    ])
}

/// Every pod of NS: (name, Ready, the reasons its containers wait for, comma-separated).
pub fn pods(ns: &str) -> Vec<(String, bool, String)> {
    let text = kubectl_ok(&["-n", ns, "get", "pods", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let name = p["metadata"]["name"].as_str().unwrap().to_string();
            let ready = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            let waiting = p["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["state"]["waiting"]["reason"].as_str())
                .collect::<Vec<_>>()
                .join(",");
            (name, ready, waiting)
        })
        .collect()
}

/// The worker pods of the quickstart's NodeSet `cpu`: (name, uid, image of slurmd).
pub fn workers(ns: &str) -> Vec<(String, String, String)> {
    let text = kubectl_ok(&[
        "-n",
        ns,
        "get",
        "pods",
        "-l",
        "slurmops.dev/nodeset=cpu",
        "-o",
        "json",
    ]);
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                p["metadata"]["uid"].as_str().unwrap().to_string(),
                p["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// `NAME STATE` of every Slurm node, from slurmctld's own pod.
pub fn sinfo(ns: &str, controller: &str) -> Option<String> {
    in_pod(ns, controller, "slurmctld", "sinfo -h -N -o '%N %T'").ok()
}

/// Waits until every pod of NS is Ready and every worker IDLE in Slurm; the time it took. On
/// timeout it fails with what a user would look at: the pods, and the last log lines of each
/// container that is not ready.
pub async fn all_ready_and_idle(ns: &str, controller: &str, timeout: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let pods = pods(ns);
        let workers = workers(ns);
        let settled = !pods.is_empty() && !workers.is_empty() && pods.iter().all(|(_, r, _)| *r);
        if settled && let Some(nodes) = sinfo(ns, controller) {
            let idle = workers
                .iter()
                .all(|(w, _, _)| nodes.lines().any(|l| l == format!("{w} idle")));
            if idle {
                return t0.elapsed();
            }
        }
        if t0.elapsed() > timeout {
            let mut why = kubectl(&["-n", ns, "get", "pods", "-o", "wide"]).unwrap_or_else(|e| e);
            for (pod, _, _) in pods.iter().filter(|(_, r, _)| !r) {
                let logs = kubectl(&["-n", ns, "logs", pod, "--all-containers", "--tail=15"])
                    .unwrap_or_else(|e| e);
                why.push_str(&format!("\n--- {pod}:\n{logs}"));
            }
            if let Some(nodes) = sinfo(ns, controller) {
                why.push_str(&format!("\n--- sinfo:\n{nodes}"));
            }
            panic!("not every pod Ready and every worker IDLE after {timeout:?}:\n{why}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Seconds since the oldest pod of NS was made.
pub fn since_made(ns: &str) -> i64 {
    let text = kubectl_ok(&["-n", ns, "get", "pods", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    let oldest = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            p["metadata"]["creationTimestamp"]
                .as_str()?
                .parse::<k8s_openapi::jiff::Timestamp>()
                .ok()
        })
        .map(|t| t.as_second())
        .min()
        .expect("pods");
    k8s_openapi::jiff::Timestamp::now().as_second() - oldest
}

/// Each pod of NS: seconds from its creation to Ready (`NAME: N s`), for the figures.
pub fn ready_after(ns: &str) -> Vec<String> {
    let text = kubectl_ok(&["-n", ns, "get", "pods", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    let at = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(|t| t.as_second())
    };
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let created = at(&p["metadata"]["creationTimestamp"])?;
            let ready = p["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Ready" && c["status"] == "True")
                .and_then(|c| at(&c["lastTransitionTime"]))?;
            Some(format!(
                "{}: {} s",
                p["metadata"]["name"].as_str()?,
                ready - created
            ))
        })
        .collect()
}

/// Evicts POD through the Eviction API, as `kubectl drain` does: Ok on 201, Err with the
/// apiserver's answer otherwise (policy/v1beta1: the bed's apiserver is 1.20).
pub fn evict(ns: &str, pod: &str) -> Result<String, String> {
    let body = serde_json::json!({"apiVersion": "policy/v1beta1", "kind": "Eviction",
                                  "metadata": {"name": pod, "namespace": ns}});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), body.to_string()).unwrap();
    kubectl(&[
        "create",
        "--raw",
        &format!("/api/v1/namespaces/{ns}/pods/{pod}/eviction"),
        "-f",
        file.path().to_str().unwrap(),
    ])
}

/// The Secrets a rendered cluster in NS names for Slurm's keys (`slurm-auth`, `slurm-jwt`), with
/// the bed's fixed keys.
pub fn slurm_secrets(ns: &str) {
    for (secret, from) in [
        (
            "slurm-auth",
            "--from-literal=slurm.key=bed-slurm-key-0123456789abcdef0123456789",
        ),
        (
            "slurm-jwt",
            "--from-literal=jwt_hs256.key=bed-jwt-key-0123456789abcdef0123456789ab",
        ),
    ] {
        kubectl_ok(&["-n", ns, "create", "secret", "generic", secret, from]);
    }
}
