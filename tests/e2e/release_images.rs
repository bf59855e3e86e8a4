//! Each Slurm release's images on the real node (tests/bed/node.sh: kube-scheduler, kubelet,
//! containerd, runc): the images of tests/bed/images.sh — 24.11 from Debian trixie, 25.11 built
//! from SchedMD's source, 26.05 from Debian forky — named and laid out as Slinky's, with a login
//! image run by its entrypoint as Slinky's login image is (the rendered login pod sets no
//! command). `slurmops apply` renders a cluster for the release with slurmctld, a worker and a
//! login pod, each with the image slurmops renders by default; the scheduler places them, the
//! kubelet starts them from the imported image. Then, as a user: ssh into the login pod (the key
//! of the pod's `authorizedKeys` Secret), and `srun` and `sbatch` from there as an unprivileged
//! user run on the worker. At the end every pod stops on the kubelet's SIGTERM, in seconds. The
//! deployed test (deployed.rs) runs the README's install on 24.11; this one what changes with the
//! release: the images' programs, paths and users, and the login image.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::eventually;
use crate::support::real_node::{ctr, real_node};
use crate::support::slurm_images::{
    Teardown, all_ready_and_idle, archives, import, kubectl, kubectl_ok, pods, slurm_secrets,
    workers,
};

/// The cluster of RELEASE in NS: one controller (no volume: nothing outlives the test), one
/// worker, one login pod whose root accepts the key of the Secret `login-ssh`.
fn cluster_yaml(release: &str, ns: &str) -> String {
    format!(
        "apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata:
  name: img
  namespace: {ns}
spec:
  slurmVersion: \"{release}\"
  auth:
    slurmKey: {{name: slurm-auth, key: slurm.key}}
    jwtKey: {{name: slurm-jwt, key: jwt_hs256.key}}
  controller:
    persistence: {{enabled: false}}
  nodeSets:
    - name: cpu
      replicas: 1
      cpu: \"1\"
      memory: 512Mi
  partitions:
    - name: debug
      nodeSets: [ALL]
      default: true
  loginSets:
    - name: users
      replicas: 1
      authorizedKeys: {{name: login-ssh, key: authorized_keys}}
"
    )
}

/// Runs CMD on the login pod at ADDR as root over ssh with KEY; stdout, or what failed.
fn ssh(addr: &str, key: &Path, cmd: &str) -> Result<String, String> {
    let out = Command::new("ssh")
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "LogLevel=ERROR",
            "-i",
        ])
        .arg(key)
        .arg(format!("root@{addr}"))
        .arg(cmd)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match out.status.success() {
        true => Ok(text(&out.stdout)),
        false => Err(format!(
            "ssh root@{addr} {cmd:?}: {}\n{}{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        )),
    }
}

async fn body(release: &str) {
    let node = real_node();
    let started = Instant::now();
    let file = format!("slurm-{release}.oci.tar");
    let archive = archives()
        .into_iter()
        .find(|a| a.file_name().is_some_and(|n| n.to_string_lossy() == file))
        .unwrap_or_else(|| panic!("tests/bed/images.sh built no {file}"));
    let t0 = Instant::now();
    import(&archive);
    eprintln!(
        "{file}: {:.1} MiB (OCI archive), imported in {:.1?}",
        std::fs::metadata(&archive).unwrap().len() as f64 / 1048576.0,
        t0.elapsed()
    );
    let login_image = format!("ghcr.io/slinkyproject/login:{release}-ubuntu24.04");
    assert!(
        ctr(&["images", "ls", "-q"])
            .lines()
            .any(|i| i == login_image),
        "{login_image} is in the node's containerd"
    );

    let ns = format!(
        "img-{}-{}",
        release.replace('.', ""),
        crate::support::unique_suffix()
    );
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id_ed25519");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "user@bed", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success(), "ssh-keygen");
    let public = dir.path().join("id_ed25519.pub");
    kubectl_ok(&["create", "namespace", &ns]);
    let _ns = Teardown(vec![ns.clone()]);
    slurm_secrets(&ns);
    kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "secret",
        "generic",
        "login-ssh",
        &format!("--from-file=authorized_keys={}", public.display()),
    ]);
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    std::fs::write(repo.join("cluster.yaml"), cluster_yaml(release, &ns)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["apply", "--wait", "0s"])
        .arg(&repo)
        .env("KUBECONFIG", &node.kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "slurmops apply: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The scheduler places every pod, the kubelet starts each from the release's image; the
    // probes pass and the worker registers through configless slurmd.
    let took = all_ready_and_idle(&ns, "img-controller-0", Duration::from_secs(300)).await;
    eprintln!("Slurm {release}: apply -> every pod Ready, the worker IDLE: {took:.1?}");
    let (worker, _, image) = workers(&ns).remove(0);
    assert_eq!(
        image,
        format!("ghcr.io/slinkyproject/slurmd:{release}-ubuntu24.04")
    );
    let login = pods(&ns)
        .into_iter()
        .map(|(name, _, _)| name)
        .find(|name| name.starts_with("img-login-users-"))
        .expect("the login pod");
    let pod: serde_json::Value = serde_json::from_str(&kubectl_ok(&[
        "-n", &ns, "get", "pod", &login, "-o", "json",
    ]))
    .unwrap();
    let status = &pod["status"]["containerStatuses"][0];
    assert_eq!(status["image"], login_image.as_str());
    assert_eq!(status["ready"], true);
    assert_eq!(
        status["restartCount"], 0,
        "the login container never restarted"
    );
    assert!(
        pod["spec"]["containers"][0]["command"].is_null(),
        "the rendered login pod sets no command: the image's entrypoint runs"
    );
    let addr = pod["status"]["podIP"].as_str().unwrap().to_string();

    // A user's session: ssh to the login pod, then Slurm's commands as an unprivileged user
    // (`daemon`, in every image) through the pod's sackd.
    let as_user = |cmd: &str| format!("cd /tmp && runuser -u daemon -- {cmd}");
    let out = ssh(&addr, &key, &as_user("srun -N1 hostname")).unwrap();
    assert_eq!(
        out.trim(),
        worker,
        "srun from the login pod ran on the worker"
    );
    let out = ssh(
        &addr,
        &key,
        &as_user("sbatch --wait --parsable -o /dev/null --wrap 'id -un; hostname'"),
    )
    .unwrap();
    let job = out.trim();
    assert!(
        job.parse::<u64>().is_ok(),
        "sbatch --wait ended with the job's id: {out:?}"
    );
    let state = kubectl(&[
        "-n",
        &ns,
        "exec",
        "img-controller-0",
        "-c",
        "slurmctld",
        "--",
        "scontrol",
        "show",
        "job",
        job,
    ])
    .unwrap();
    assert!(
        state.contains("JobState=COMPLETED") && state.contains("ExitCode=0:0"),
        "the batch job completed: {state}"
    );
    assert!(
        state.contains("UserId=daemon("),
        "it ran as the login user, not root: {state}"
    );

    // Each container stops on the kubelet's SIGTERM; none waits out the 30 s grace period for
    // its SIGKILL: slurmrestd (SIGINT from its preStop hook) and the controller's reconfigure
    // sidecar (a shell, PID 1 of its container) ignored it before, and every rollout of them
    // took 30 s more per pod. (The worker is left for the end: its preStop asks slurmctld to
    // forget the node.)
    let control: Vec<String> = pods(&ns)
        .into_iter()
        .map(|(name, _, _)| name)
        .filter(|name| !name.starts_with("cpu-"))
        .collect();
    let mut args = vec!["-n", ns.as_str(), "delete", "pods", "--wait=false"];
    args.extend(control.iter().map(String::as_str));
    let t0 = Instant::now();
    kubectl_ok(&args);
    let stopped = eventually(
        "every container of the deleted pods to stop",
        Duration::from_secs(60),
        async || {
            let text = kubectl_ok(&["-n", &ns, "get", "pods", "-o", "json"]);
            let list: serde_json::Value = serde_json::from_str(&text).unwrap();
            let running: Vec<String> = list["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| {
                    control.iter().any(|c| p["metadata"]["name"] == c.as_str())
                        && !p["metadata"]["deletionTimestamp"].is_null()
                })
                .flat_map(|p| p["status"]["containerStatuses"].as_array().cloned())
                .flatten()
                .filter(|c| !c["state"]["running"].is_null())
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect();
            if !running.is_empty() {
                tokio::time::sleep(Duration::from_millis(250)).await;
                return None;
            }
            Some(t0.elapsed())
        },
    )
    .await;
    eprintln!(
        "Slurm {release}: {} deleted, every container stopped in {stopped:.1?}",
        control.join(", ")
    );
    assert!(
        stopped < Duration::from_secs(20),
        "a container waited for SIGKILL: stopping took {stopped:.1?} (grace period 30 s)"
    );
    eprintln!("Slurm {release}: the whole test {:.1?}", started.elapsed());
}

mod a_login_pod_and_a_worker_run_from_each_release_s_images_and_a_user_s_srun_and_sbatch_complete {
    #[tokio::test(flavor = "multi_thread")]
    async fn slurm_24_11() {
        super::body("24.11").await
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slurm_25_11() {
        super::body("25.11").await
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn slurm_26_05() {
        super::body("26.05").await
    }
}
