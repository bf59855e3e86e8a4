//! HA controllers behind one address (`controller.ha.serviceAddress`, issue 58) on the real node
//! (tests/bed/node.sh: kube-scheduler, kubelet, containerd, runc, kube-proxy, the cluster DNS),
//! from the bed's Slurm 24.11 images. slurm.conf's `SlurmctldAddr` names the controllers'
//! Service, whose one endpoint is the controller in control (its readiness reads the heartbeat
//! in the shared state directory). Shown here as a user meets it:
//! - slurmops replaces the controllers after a change, the standby first and the controller in
//!   control last (the StatefulSet's own rolling update would wait forever for a standby to be
//!   Ready);
//! - when the primary stops answering (its slurmctld stopped, not dead: connections to it are
//!   accepted and never answered), the backup takes control, the Service follows it, and a
//!   client in a worker pod gets its answer at once, where a client of the same slurm.conf
//!   without `SlurmctldAddr` waits out MessageTimeout (10 s) on the primary and fails;
//! - when that primary goes on, it takes control back and the Service sends clients to it alone
//!   (on a loaded machine the kubelet may restart the stopped primary first, which then takes
//!   control back by the hand-back); the worker is IDLE through the address, and slurmctld holds
//!   its pod's address for it (where its pings go).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::eventually;
use crate::support::real_node::{ctr, real_node};
use crate::support::slurm_images::{
    Teardown, archives, import, in_pod, kubectl, kubectl_ok, slurm_secrets, workers,
};

/// The cluster in NS: a primary and a backup behind one address, their state on the claim
/// `state`, one worker. EXTRA goes under `controller:`.
fn cluster_yaml(ns: &str, extra: &str) -> String {
    format!(
        "apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata:
  name: one
  namespace: {ns}
spec:
  slurmVersion: \"24.11\"
  auth:
    slurmKey: {{name: slurm-auth, key: slurm.key}}
    jwtKey: {{name: slurm-jwt, key: jwt_hs256.key}}
  controller:
    ha:
      backups: 1
      serviceAddress: true
    persistence:
      existingClaim: state
{extra}  nodeSets:
    - name: cpu
      replicas: 1
      cpu: \"1\"
      memory: 512Mi
  partitions:
    - name: debug
      nodeSets: [ALL]
      default: true
"
    )
}

/// A controller pod as kubectl shows it.
#[derive(Debug)]
struct Ctld {
    name: String,
    ready: bool,
    running: bool,
    ip: String,
    revision: String,
    uid: String,
    /// `containerd://ID` of its slurmctld container.
    container: String,
}

fn controllers(ns: &str) -> Vec<Ctld> {
    let text = kubectl_ok(&[
        "-n",
        ns,
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/component=controller",
        "-o",
        "json",
    ]);
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out: Vec<Ctld> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            let main = p["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["name"] == "slurmctld");
            Ctld {
                name: p["metadata"]["name"].as_str().unwrap().to_string(),
                ready: p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True"),
                running: main.is_some_and(|c| !c["state"]["running"].is_null()),
                ip: p["status"]["podIP"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                revision: p["metadata"]["labels"]["controller-revision-hash"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                uid: p["metadata"]["uid"].as_str().unwrap().to_string(),
                container: main
                    .and_then(|c| c["containerID"].as_str())
                    .unwrap_or_default()
                    .to_string(),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The addresses the controllers' Service sends clients to.
fn endpoints(ns: &str) -> Vec<String> {
    let ips = kubectl(&[
        "-n",
        ns,
        "get",
        "endpoints",
        "one-controller",
        "-o",
        "jsonpath={.subsets[*].addresses[*].ip}",
    ])
    .unwrap_or_default();
    let mut ips: Vec<String> = ips.split_whitespace().map(String::from).collect();
    ips.sort();
    ips
}

/// `sinfo` in the worker pod WORKER, with the slurm.conf its slurmd fetched (PLAIN: a copy
/// without `SlurmctldAddr`, as every client was before): how long it took, and its output or
/// why it failed.
fn sinfo_from(ns: &str, worker: &str, plain: bool) -> (Duration, Result<String, String>) {
    let conf = match plain {
        true => "SLURM_CONF=/tmp/plain/slurm.conf ",
        false => "",
    };
    let cmd = format!(
        "s=$(date +%s%N); {conf}sinfo -h -N -o '%N %T' > /tmp/out 2>&1; rc=$?; e=$(date +%s%N); \
         echo \"took $(( (e - s) / 1000000 )) rc $rc\"; cat /tmp/out"
    );
    let out = in_pod(ns, worker, "slurmd", &cmd).unwrap();
    let mut lines = out.lines();
    let head: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let took = Duration::from_millis(
        head.get(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX / 2),
    );
    let rest = lines.collect::<Vec<_>>().join("\n");
    match head.get(3) == Some(&"0") {
        true => (took, Ok(rest)),
        false => (took, Err(rest)),
    }
}

/// The claim `state` in NS on a ReadWriteMany volume of its own at DIR.
fn shared_state(ns: &str, dir: &Path) -> String {
    let pv = format!("{ns}-state");
    let docs = format!(
        "apiVersion: v1
kind: PersistentVolume
metadata: {{name: {pv}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {{path: {}, type: Directory}}
  claimRef: {{namespace: {ns}, name: state}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: state, namespace: {ns}}}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: \"\"
  volumeName: {pv}
  resources: {{requests: {{storage: 1Gi}}}}
",
        dir.display()
    );
    let file = dir.with_extension("yaml");
    std::fs::write(&file, docs).unwrap();
    kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
    pv
}

/// The PersistentVolume of the test, removed with it.
struct Volume(String);
impl Drop for Volume {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "pv", &self.0, "--wait=false"]);
    }
}

/// A stopped slurmctld, let go on with the test however it ends (its pod's deletion waits
/// for it).
struct Stopped(i32);
impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

fn slurmops_apply(repo: &Path, wait: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["apply", "--wait", wait])
        .arg(repo)
        .env("KUBECONFIG", &real_node().kubeconfig)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "slurmops apply: {text}");
    text
}

/// Waits until the primary or the backup (IN_CONTROL) alone is Ready, the Service sends
/// clients to it alone, and the worker is IDLE as a client through that address sees it.
async fn settled(ns: &str, in_control: &str, what: &str, timeout: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let c = controllers(ns);
        let ready: Vec<&Ctld> = c.iter().filter(|p| p.ready).collect();
        let one = c.len() == 2 && ready.len() == 1 && ready[0].name == in_control;
        let routed = one && endpoints(ns) == [ready[0].ip.clone()];
        let idle = routed
            && workers(ns).first().is_some_and(|(w, _, _)| {
                sinfo_from(ns, w, false)
                    .1
                    .is_ok_and(|o| o.trim() == format!("{w} idle"))
            });
        if idle {
            return t0.elapsed();
        }
        if t0.elapsed() > timeout {
            panic!(
                "timed out after {timeout:?} waiting for {what}:\n{}",
                looked(ns, &c)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What a person would look at when the controllers do not settle: the pods, the Service's
/// Endpoints, the heartbeat and each controller's last log lines.
fn looked(ns: &str, c: &[Ctld]) -> String {
    let mut out = format!("controllers: {c:?}\nendpoints: {:?}\n", endpoints(ns));
    let beat = "od -An -tu8 --endian=big /var/spool/slurmctld/heartbeat; date +%s";
    for p in c {
        out += &format!(
            "--- {}: heartbeat (time, index; now) {:?}\n{}\n",
            p.name,
            in_pod(ns, &p.name, "slurmctld", beat),
            kubectl(&["-n", ns, "logs", &p.name, "--all-containers", "--tail=25"])
                .unwrap_or_else(|e| e)
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn behind_one_address_slurmops_rolls_the_standby_first_and_after_a_failover_clients_skip_the_silent_primary()
 {
    let started = Instant::now();
    real_node();
    let archive = archives()
        .into_iter()
        .find(|a| a.file_name().is_some_and(|n| n == "slurm-24.11.oci.tar"))
        .expect("tests/bed/images.sh built slurm-24.11.oci.tar");
    import(&archive);
    // The volume's directory outlives the namespace's pods (dropped after the Teardown).
    let dir = tempfile::tempdir().unwrap();
    let ns = format!("one-{}", crate::support::unique_suffix());
    kubectl_ok(&["create", "namespace", &ns]);
    let _ns = Teardown(vec![ns.clone()]);
    slurm_secrets(&ns);
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let _pv = Volume(shared_state(&ns, &state));
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    std::fs::write(repo.join("cluster.yaml"), cluster_yaml(&ns, "")).unwrap();
    slurmops_apply(&repo, "0s");

    // The primary has control: it alone is Ready and behind the Service; the backup runs and
    // stands by, not Ready.
    let took = settled(
        &ns,
        "one-controller-0",
        "the primary alone Ready and routed, the worker IDLE",
        Duration::from_secs(300),
    )
    .await;
    eprintln!("apply -> the primary in control behind the Service, the worker IDLE: {took:.1?}");
    let c = controllers(&ns);
    assert!(c.iter().all(|p| p.running), "both slurmctld run: {c:?}");
    let conf = in_pod(
        &ns,
        "one-controller-1",
        "slurmctld",
        "cat /etc/slurm/slurm.conf",
    )
    .unwrap();
    assert!(
        conf.lines()
            .any(|l| l == format!("SlurmctldAddr=one-controller.{ns}.svc.cluster.local")),
        "{conf}"
    );

    // A change that restarts slurmctld: slurmops replaces the standby, then the primary.
    let before: Vec<String> = controllers(&ns).iter().map(|p| p.uid.clone()).collect();
    std::fs::write(
        repo.join("cluster.yaml"),
        cluster_yaml(
            &ns,
            "    podTemplate:\n      annotations: {bed.slurmops.dev/change: \"1\"}\n",
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    let out = slurmops_apply(&repo, "300s");
    let standby = out
        .find("one-controller-1: a standby controller, deleted")
        .unwrap_or_else(|| panic!("{out}"));
    let primary = out
        .find("one-controller-0: the controller in control, deleted last")
        .unwrap_or_else(|| panic!("{out}"));
    assert!(standby < primary, "the standby first: {out}");
    let took = settled(
        &ns,
        "one-controller-0",
        "the primary in control again after the roll",
        Duration::from_secs(180),
    )
    .await;
    eprintln!(
        "the roll: apply {:.1?}, then the primary in control and routed {took:.1?} later",
        t0.elapsed() - took
    );
    let sts: serde_json::Value = serde_json::from_str(&kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "statefulset",
        "one-controller",
        "-o",
        "json",
    ]))
    .unwrap();
    let rev = sts["status"]["updateRevision"].as_str().unwrap();
    let c = controllers(&ns);
    assert!(
        c.iter()
            .all(|p| p.revision == rev && !before.contains(&p.uid)),
        "both replaced: {c:?}"
    );

    // The primary stops answering: its slurmctld stopped (SIGSTOP), its connections accepted.
    let worker = workers(&ns).remove(0).0;
    in_pod(
        &ns,
        &worker,
        "slurmd",
        "c=$(ls /run/slurm/conf/slurm.conf /etc/slurm/slurm.conf 2>/dev/null | head -n 1); mkdir -p /tmp/plain && \
         ln -sf \"$(dirname \"$c\")\"/* /tmp/plain/ && rm /tmp/plain/slurm.conf && grep -v '^SlurmctldAddr=' \"$c\" > /tmp/plain/slurm.conf",
    )
    .unwrap();
    let (took, plain) = sinfo_from(&ns, &worker, true);
    assert!(
        plain.is_ok(),
        "the copy without SlurmctldAddr works while the primary answers: {plain:?}"
    );
    eprintln!("before: sinfo without SlurmctldAddr {took:.1?}");
    let primary = c.iter().find(|p| p.name == "one-controller-0").unwrap();
    let backup_ip = c
        .iter()
        .find(|p| p.name == "one-controller-1")
        .unwrap()
        .ip
        .clone();
    let id = primary.container.trim_start_matches("containerd://");
    let pid: i32 = ctr(&["tasks", "ls"])
        .lines()
        .find(|l| l.starts_with(id))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("no task {id} in the node's containerd"));
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let stopped = Stopped(pid);
    let t0 = Instant::now();
    // The backup takes control after SlurmctldTimeout (30 s); its heartbeat makes it Ready and
    // the primary not, and the Service sends clients to the backup alone.
    eventually(
        "the Service to send clients to the backup alone",
        Duration::from_secs(120),
        async || {
            let only = endpoints(&ns) == [backup_ip.clone()];
            if !only {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            only.then_some(())
        },
    )
    .await;
    let failover = t0.elapsed();
    // kube-proxy writes the Service's rules from the EndpointSlice within its sync period (1 s):
    // a client a moment later goes where the Endpoints say.
    std::thread::sleep(Duration::from_secs(3));
    let (took, answer) = sinfo_from(&ns, &worker, false);
    let (waited, refused) = sinfo_from(&ns, &worker, true);
    eprintln!(
        "primary stopped -> the Service on the backup: {failover:.1?}; then sinfo through SlurmctldAddr {took:.1?} ({answer:?}), without it {waited:.1?} ({refused:?})"
    );
    assert_eq!(
        answer.as_deref().map(str::trim),
        Ok(format!("{worker} idle").as_str()),
        "the client through the address is answered by the backup"
    );
    assert!(
        took < Duration::from_secs(3),
        "the client through the address did not wait for the primary: {took:.1?}"
    );
    // The same client without the address first asks the primary, which accepts and never
    // answers: it waits out MessageTimeout (10 s) and fails.
    assert!(
        waited >= Duration::from_secs(9) && refused.is_err(),
        "a client without SlurmctldAddr waits out the silent primary: {waited:.1?} {refused:?}"
    );

    // The primary goes on (SIGCONT): it asks the backup for control back (Slurm's own
    // REQUEST_CONTROL, "Old state possible") and keeps what it held before it hung; its
    // heartbeat makes it alone Ready and the Service follows.
    drop(stopped);
    let t0 = Instant::now();
    let primary_ip = primary.ip.clone();
    eventually(
        "the Service to send clients to the resumed primary alone",
        Duration::from_secs(90),
        async || {
            let only = endpoints(&ns) == [primary_ip.clone()];
            if !only {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            only.then_some(())
        },
    )
    .await;
    let routed = t0.elapsed();
    eprintln!("primary resumed -> the Service on the primary alone: {routed:.1?}");
    // Clients through the address settle: the worker is IDLE as a client through the address sees
    // it. Its registration reached slurmctld through the Service, and slurmctld takes the address
    // a dynamic node's registration comes from for its NodeAddr: it must be the pod's own (a path
    // that NATs pod->Service traffic would give the NAT's, where no slurmd listens, and the
    // worker would go NOT_RESPONDING at slurmctld's next ping, about 100 s later): slurmctld's
    // pings go to the address it holds for the node.
    let idle = settled(
        &ns,
        "one-controller-0",
        "the worker IDLE through the address after the primary went on",
        Duration::from_secs(120),
    )
    .await;
    let addr = kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "pod",
        &worker,
        "-o",
        "jsonpath={.status.podIP}",
    ]);
    // A client's read may time out while slurmctld is busy (seen in a loaded full run: "Socket
    // timed out on send/recv operation"): asked again, as a user would.
    let node = eventually(
        "scontrol show node answering from the worker's pod",
        Duration::from_secs(60),
        async || {
            in_pod(
                &ns,
                &worker,
                "slurmd",
                &format!("scontrol show node {worker}"),
            )
            .ok()
        },
    )
    .await;
    assert!(
        node.split_whitespace()
            .any(|f| f == format!("NodeAddr={}", addr.trim())),
        "slurmctld reaches the worker at its pod's address {addr}:\n{node}"
    );
    eprintln!(
        "primary resumed -> the worker IDLE through the address: {:.1?} after the Service followed",
        idle
    );

    eprintln!("the whole test {:.1?}", started.elapsed());
}
