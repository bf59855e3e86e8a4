//! Copies before what cannot be undone, on the real node (tests/bed/node.sh: scheduler, kubelet,
//! containerd, runc) from each release's images: a cluster with accounting on the in-cluster
//! MariaDB and slurmctld's state on a volume, `spec.backup.claim` naming a claim, is upgraded
//! 24.11 → 25.11 → 26.05 by `slurmops apply`. Before each step converts anything, slurmdbd's new
//! pod dumps the database and the controller's new pod copies StateSaveLocation onto the claim.
//! A copy that cannot be written stops the upgrade there (slurmctld stays on the old release,
//! apply names why), and it goes on once the claim is writable again. After each step, the
//! restores docs/howto.md gives are run as written: the database dropped and loaded from its
//! copy (sacct lists the jobs of before), and the state put back from its copy (the job
//! cancelled since is in the queue again).

//! Scheduled copies are `backup_schedule.rs`'s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::eventually;
use crate::support::real_node::real_node;
use crate::support::slurm_images::{
    Teardown, all_ready_and_idle, archives, import, in_pod, kubectl, kubectl_ok, slurm_secrets,
};

pub(crate) const CLUSTER: &str = "bk";
pub(crate) const CTLD: &str = "bk-controller-0";

pub(crate) fn cluster_yaml(ns: &str, release: &str) -> String {
    format!(
        "apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata:
  name: {CLUSTER}
  namespace: {ns}
spec:
  slurmVersion: \"{release}\"
  backup:
    claim: slurm-copies
  auth:
    slurmKey: {{name: slurm-auth, key: slurm.key}}
    jwtKey: {{name: slurm-jwt, key: jwt_hs256.key}}
  controller:
    persistence: {{size: 1Gi}}
  accounting:
    enabled: true
    database:
      user: slurm
      password: {{name: slurm-db, key: password}}
      inCluster: {{storage: 1Gi}}
  nodeSets:
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

/// `slurmops apply ARGS DIR` against the real node: whether it succeeded, and what it said.
pub(crate) fn apply(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .arg("apply")
        .args(args)
        .arg(dir)
        .env("KUBECONFIG", &real_node().kubeconfig)
        // slurmrestd's Service address on the node's bridge: plain http beyond loopback.
        .env("SLURMOPS_ALLOW_HTTP", "true")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A PersistentVolume of the test's own on host directory DIR, bound ahead to claim CLAIM of
/// NS; deleted with the test.
struct Volume(String);
impl Volume {
    fn bound(ns: &str, claim: &str, dir: &Path) -> Volume {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let pv = format!("{ns}-{claim}");
        let doc = format!(
            "apiVersion: v1
kind: PersistentVolume
metadata: {{name: {pv}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {{path: {}, type: Directory}}
  claimRef: {{namespace: {ns}, name: {claim}}}
",
            dir.display()
        );
        let file = dir.with_extension("yaml");
        std::fs::write(&file, doc).unwrap();
        kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
        Volume(pv)
    }
}
impl Drop for Volume {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "pv", &self.0, "--wait=false"]);
    }
}

/// The entries of DIR whose names start with PREFIX.
pub(crate) fn named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

pub(crate) fn ctld(ns: &str, cmd: &str) -> Result<String, String> {
    in_pod(ns, CTLD, "slurmctld", cmd)
}

/// Runs the one-off pod of YAML (the restore docs/howto.md gives) to its end; fails with its
/// log when it does not succeed.
pub(crate) async fn run_pod(ns: &str, name: &str, yaml: &str) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), yaml).unwrap();
    kubectl_ok(&["-n", ns, "apply", "-f", file.path().to_str().unwrap()]);
    let phase = eventually(
        &format!("pod {name} to end"),
        Duration::from_secs(180),
        async || {
            let p = kubectl(&[
                "-n",
                ns,
                "get",
                "pod",
                name,
                "-o",
                "jsonpath={.status.phase}",
            ])
            .ok()?;
            if p == "Succeeded" || p == "Failed" {
                return Some(p);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            None
        },
    )
    .await;
    let log = kubectl(&["-n", ns, "logs", name]).unwrap_or_else(|e| e);
    assert_eq!(phase, "Succeeded", "pod {name}: {log}");
    kubectl_ok(&["-n", ns, "delete", "pod", name, "--wait=true"]);
}

/// Scales StatefulSet NAME to N and waits for its pods to match (0: gone; 1: Ready).
pub(crate) async fn scale(ns: &str, name: &str, n: u32) {
    kubectl_ok(&[
        "-n",
        ns,
        "scale",
        "statefulset",
        name,
        &format!("--replicas={n}"),
    ]);
    let pod = format!("{name}-0");
    eventually(
        &format!("{name} at {n} replicas"),
        Duration::from_secs(240),
        async || {
            let ready = kubectl(&[
                "-n",
                ns,
                "get",
                "pod",
                &pod,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ]);
            let done = match n {
                0 => ready.is_err_and(|e| e.contains("NotFound")),
                _ => ready.is_ok_and(|r| r == "True"),
            };
            if !done {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            done.then_some(())
        },
    )
    .await;
}

/// sacct's answer for JOB from the controller pod (empty until slurmdbd has it).
pub(crate) fn sacct(ns: &str, job: &str) -> String {
    ctld(ns, &format!("sacct -n -X -P -j {job} -o JobID,State 2>&1")).unwrap_or_default()
}

/// One upgrade step FROM → TO, with the copies, a failed copy and both restores.
/// FAIL_FIRST: the first copy meets an unwritable claim (the first step only: the same MariaDB
/// image copies on every path, and the one-at-a-time chain of CI's run is its longest). Without
/// it the apply that drives the upgrade is the one that replaces slurmdbd.
async fn step(
    ns: &str,
    dir: &Path,
    copies: &Path,
    (from, to): (&str, &str),
    fail_first: bool,
    jobs: &(String, String),
) {
    let (done, held) = jobs;
    let t0 = Instant::now();
    let old = dir.join("old.yaml");
    std::fs::write(&old, cluster_yaml(ns, from)).unwrap();
    std::fs::write(dir.join("cluster.yaml"), cluster_yaml(ns, to)).unwrap();
    let plan = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["plan"])
        .arg(dir)
        .arg("--from")
        .arg(&old)
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert!(
        plan.contains(&format!(
            "slurmdbd (a copy of its database to PersistentVolumeClaim slurm-copies ({CLUSTER}/accounting/) first, its database is converted on start)"
        )),
        "{plan}"
    );
    std::fs::remove_file(&old).unwrap();

    let acct = copies.join(CLUSTER).join("accounting");
    if fail_first {
        // The claim's accounting directory unwritable (a full or read-only volume): slurmdbd's new
        // pod cannot copy, so slurmdbd does not start on TO and nothing after it moves.
        let mode = |m: u32| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&acct, std::fs::Permissions::from_mode(m)).unwrap();
        };
        mode(0o555);
        let said = eventually(
            "apply to say the upgrade stops at the failed copy",
            Duration::from_secs(180),
            async || {
                let (_, out) = apply(dir, &["--wait", "0s"]);
                if out.contains("the copy of the accounting database before Slurm")
                    && out.contains("the upgrade stops here")
                {
                    return Some(out);
                }
                tokio::time::sleep(Duration::from_secs(3)).await;
                None
            },
        )
        .await;
        assert!(
            said.contains(&format!("StatefulSet/{CLUSTER}-controller")),
            "{said}"
        );
        let version = ctld(ns, "scontrol --version").unwrap();
        assert!(
            version.contains(&format!(" {from}.")),
            "slurmctld still runs {from} while the copy fails: {version}"
        );
        mode(0o777);
    }

    // The upgrade runs to its end (after a failed copy, the kubelet retries it once the claim is
    // writable again). slurmrestd through its Service (kube-proxy on the node): its pod is replaced on the way.
    let url = format!(
        "http://{}:6820",
        kubectl_ok(&[
            "-n",
            ns,
            "get",
            "service",
            &format!("{CLUSTER}-restapi"),
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
    );
    let token = ctld(ns, "scontrol token username=slurm lifespan=3600").unwrap();
    let token = token.trim().trim_start_matches("SLURM_JWT=").to_string();
    let (ok, out) = apply(
        dir,
        &[
            "--wait",
            "600s",
            "--slurmrestd-url",
            &url,
            "--slurm-jwt",
            &token,
        ],
    );
    assert!(ok, "{out}");
    all_ready_and_idle(ns, CTLD, Duration::from_secs(300)).await;
    let version = ctld(ns, "scontrol --version").unwrap();
    assert!(version.contains(&format!(" {to}.")), "{version}");
    eprintln!(
        "{from} → {to}: upgraded with its copies in {:.1?}",
        t0.elapsed()
    );

    // The copies, named for the step, and the release they were taken for.
    let dump = named(&acct, &format!("{from}-to-{to}-"));
    assert_eq!(dump.len(), 1, "one dump for {from} → {to}: {dump:?}");
    let sql = std::fs::read_to_string(&dump[0]).unwrap();
    assert!(
        sql.contains("CREATE DATABASE") && sql.contains("_job_table"),
        "a mariadb-dump of the accounting database: {}",
        &sql[..sql.len().min(400)]
    );
    let state_dir = copies.join(CLUSTER).join("slurmctld");
    let state = named(&state_dir, &format!("{from}-to-{to}-"));
    assert_eq!(
        state.len(),
        1,
        "one state copy for {from} → {to}: {state:?}"
    );
    assert!(state[0].join("job_state").is_file(), "{:?}", state[0]);
    for d in [&acct, &state_dir] {
        assert_eq!(
            std::fs::read_to_string(d.join("release")).unwrap().trim(),
            to
        );
    }
    assert!(
        named(&acct, "")
            .iter()
            .all(|p| !p.to_string_lossy().ends_with(".partial")),
        "no partial copy left"
    );

    // Restore the database as docs/howto.md says: slurmdbd stopped, the database dropped and
    // loaded from the copy, slurmdbd started (it converts the copy again).
    scale(ns, &format!("{CLUSTER}-accounting"), 0).await;
    let name = dump[0].file_name().unwrap().to_string_lossy().into_owned();
    run_pod(
        ns,
        "restore-db",
        &restore_db_pod(&format!("{CLUSTER}/accounting/{name}")),
    )
    .await;
    scale(ns, &format!("{CLUSTER}-accounting"), 1).await;
    eventually(
        "sacct to list the job of before from the restored database",
        Duration::from_secs(180),
        async || {
            let s = sacct(ns, done);
            if s.contains(&format!("{done}|COMPLETED")) {
                return Some(());
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            None
        },
    )
    .await;

    // Restore the state: the held job cancelled now, slurmctld stopped, its state put back from
    // the copy, slurmctld started: the job is in the queue again.
    ctld(ns, &format!("scancel {held}")).unwrap();
    let gone = ctld(ns, &format!("squeue -h -j {held} -o %T 2>&1")).unwrap_or_default();
    assert!(!gone.contains("PENDING"), "{gone}");
    scale(ns, &format!("{CLUSTER}-controller"), 0).await;
    let name = state[0].file_name().unwrap().to_string_lossy().into_owned();
    run_pod(
        ns,
        "restore-state",
        &restore_state_pod(to, &format!("{CLUSTER}/slurmctld/{name}")),
    )
    .await;
    scale(ns, &format!("{CLUSTER}-controller"), 1).await;
    eventually(
        "the job cancelled after the copy to be in the queue again",
        Duration::from_secs(120),
        async || {
            let s = ctld(ns, &format!("squeue -h -j {held} -o %T")).unwrap_or_default();
            if s.trim() == "PENDING" {
                return Some(());
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            None
        },
    )
    .await;
    // The restored state knows the workers by the addresses of the copy's time (the upgrade
    // replaced them since): as docs/howto.md says, their pods are made again to register afresh.
    kubectl_ok(&["-n", ns, "delete", "pod", "cpu-0", "--wait=true"]);
    all_ready_and_idle(ns, CTLD, Duration::from_secs(300)).await;
    eprintln!(
        "{from} → {to}: copies made and both restored in {:.1?}",
        t0.elapsed()
    );
}

/// docs/howto.md's database restore, for a copy at PATH under the claim.
pub(crate) fn restore_db_pod(path: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: restore-db}}
spec:
  restartPolicy: Never
  securityContext: {{runAsUser: 401, runAsGroup: 401}}
  containers:
    - name: restore
      image: docker.io/library/mariadb:11.8
      command: [/bin/sh, -ec]
      args:
        - |
          mariadb -h {CLUSTER}-mariadb -u slurm -e 'DROP DATABASE IF EXISTS slurm_acct_db'
          mariadb -h {CLUSTER}-mariadb -u slurm < /copies/{path}
      env:
        - name: MYSQL_PWD
          valueFrom: {{secretKeyRef: {{name: slurm-db, key: password}}}}
      volumeMounts: [{{name: copies, mountPath: /copies, readOnly: true}}]
  volumes:
    - name: copies
      persistentVolumeClaim: {{claimName: slurm-copies}}
"
    )
}

/// docs/howto.md's state restore, for a copy at PATH under the claim, in RELEASE's image.
fn restore_state_pod(release: &str, path: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: restore-state}}
spec:
  restartPolicy: Never
  securityContext: {{runAsUser: 401, runAsGroup: 401}}
  containers:
    - name: restore
      image: ghcr.io/slinkyproject/slurmctld:{release}-ubuntu24.04
      command: [/bin/sh, -ec]
      args:
        - |
          find /state -mindepth 1 -delete
          find /copies/{path} -mindepth 1 -maxdepth 1 -exec cp -a {{}} /state/ ';'
      volumeMounts:
        - {{name: copies, mountPath: /copies, readOnly: true}}
        - {{name: state, mountPath: /state}}
  volumes:
    - name: copies
      persistentVolumeClaim: {{claimName: slurm-copies}}
    - name: state
      persistentVolumeClaim: {{claimName: statesave-{CLUSTER}-controller-0}}
"
    )
}

/// A namespace of the real node with Slurm's Secrets and the test's own volumes, each bound
/// ahead to its claim (removed with the test: the bed's shared ones are not given back once
/// used): the copies (`slurm-copies`), slurmctld's state, MariaDB's data. The images of
/// RELEASES (and MariaDB's) imported first.
/// Dropped in this order: the namespace's pods, the volumes, their directories.
pub(crate) struct Setup {
    _ns: Teardown,
    _volumes: Vec<Volume>,
    pub(crate) ns: String,
    pub(crate) dir: tempfile::TempDir,
}

pub(crate) fn setup(prefix: &str, releases: &[&str]) -> Setup {
    real_node();
    for a in archives().iter().filter(|a| {
        a.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            n.starts_with("mariadb-")
                || releases
                    .iter()
                    .any(|r| n.starts_with(&format!("slurm-{r}")))
        })
    }) {
        import(a);
    }
    let ns = format!("{prefix}-{}", crate::support::unique_suffix());
    kubectl_ok(&["create", "namespace", &ns]);
    let teardown = Teardown(vec![ns.clone()]);
    slurm_secrets(&ns);
    kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "secret",
        "generic",
        "slurm-db",
        "--from-literal=password=bed-db-password-0123",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let mut volumes = Vec::new();
    for claim in [
        "slurm-copies",
        &format!("statesave-{CTLD}"),
        &format!("data-{CLUSTER}-mariadb-0"),
    ] {
        let host = dir.path().join(claim);
        volumes.push(Volume::bound(&ns, claim, &host));
    }
    let claim = "apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: slurm-copies}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: \"\"
  resources: {requests: {storage: 1Gi}}
";
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), claim).unwrap();
    kubectl_ok(&["-n", &ns, "apply", "-f", file.path().to_str().unwrap()]);
    Setup {
        _ns: teardown,
        _volumes: volumes,
        ns,
        dir,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_upgrade_copies_the_database_and_state_first_stops_when_it_cannot_and_both_restore() {
    let started = Instant::now();
    let bed = setup("bk", &["24.11", "25.11", "26.05"]);
    let (ns, dir) = (bed.ns.clone(), &bed.dir);
    std::fs::write(dir.path().join("cluster.yaml"), cluster_yaml(&ns, "24.11")).unwrap();
    let (ok, out) = apply(dir.path(), &["--wait", "0s"]);
    assert!(ok, "{out}");
    let took = all_ready_and_idle(&ns, CTLD, Duration::from_secs(420)).await;
    eprintln!("Slurm 24.11 with accounting: every pod Ready, the worker IDLE in {took:.1?}");
    let copies = dir.path().join("slurm-copies");
    // A new cluster: nothing to copy yet, the release recorded.
    for d in ["accounting", "slurmctld"] {
        let d = copies.join(CLUSTER).join(d);
        assert_eq!(
            std::fs::read_to_string(d.join("release")).unwrap().trim(),
            "24.11"
        );
        assert_eq!(named(&d, "").len(), 1, "only `release` in {d:?}");
    }

    // A job that ran (in accounting) and one held in the queue (in the state).
    let done = ctld(
        &ns,
        "cd /tmp && sbatch --wait --parsable -o /dev/null --wrap true",
    )
    .unwrap()
    .trim()
    .to_string();
    let held = ctld(
        &ns,
        "cd /tmp && sbatch -H --parsable -o /dev/null --wrap true",
    )
    .unwrap()
    .trim()
    .to_string();
    eventually(
        "slurmdbd to have the finished job",
        Duration::from_secs(120),
        async || {
            if sacct(&ns, &done).contains(&format!("{done}|COMPLETED")) {
                return Some(());
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            None
        },
    )
    .await;
    let jobs = (done, held);
    step(&ns, dir.path(), &copies, ("24.11", "25.11"), true, &jobs).await;
    step(&ns, dir.path(), &copies, ("25.11", "26.05"), false, &jobs).await;
    eprintln!("the whole test: {:.1?}", started.elapsed());
}
