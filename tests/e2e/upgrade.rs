//! An in-place Slurm upgrade end to end on the test bed. The test kubelet runs this test's own
//! Slurm from its pods, each daemon from the chroot of the release its pod is labelled with: the
//! controller pod's slurmctld (its state kept across pods, as on a PersistentVolume), the restapi
//! pod's slurmrestd and each worker's slurmd. A cluster on 24.11 with 4 workers and a real job on
//! one of them gets a commit changing `slurmVersion` to 26.05, and `slurmops apply` carries it out.

use crate::support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slurmops::cluster::load;
use slurmops::render::render;

use crate::support::slurm::{slurmd_port, test_host_overlay};
use crate::support::{Event, OwnSlurm, TestEnv, bed, eventually, unique_suffix};

pub(crate) fn cluster_yaml(ns: &str, w: &str, version: &str) -> String {
    format!(
        r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {{name: c, namespace: {ns}}}
spec:
  slurmVersion: "{version}"
  # The copies before a conversion are proven on the real node (backup.rs): this kubelet runs
  # no init container.
  backup: {{ownCopies: true}}
  auth:
    slurmKey: {{name: slurm-auth, key: slurm.key}}
    jwtKey: {{name: slurm-jwt, key: jwt_hs256.key}}
  nodeSets:
    - name: {w}
      replicas: 4
      cpu: "1"
      memory: 256Mi
      update: {{maxUnavailable: 1}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
    )
}

/// `slurm.sh exec INSTANCE ARGS...`: stdout, or None when it failed (slurmctld restarting).
fn exec(instance: &str, args: &[&str]) -> Option<String> {
    let out = Command::new("bash")
        .args(["tests/bed/slurm.sh", "exec", instance])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `KEY=value` of a one-line `scontrol -o show ...` answer.
fn field(line: &str, key: &str) -> Option<String> {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
}

fn slurmops(args: &[&str], dir: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(args)
        .arg(dir)
        .env("KUBECONFIG", &bed().kubeconfig_restricted)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slurm_version_commit_upgrades_24_11_to_26_05_in_place_and_the_running_job_completes() {
    let instance = format!("up{}", unique_suffix());
    let (ctld_port, restd_port) = (slurmd_port(), slurmd_port());
    let w = format!("u{}", unique_suffix());
    let confs_dir = tempfile::tempdir().unwrap();
    let own = |ns: &str| {
        let mut confs = BTreeMap::new();
        for release in ["24.11", "26.05"] {
            let c = load("cluster.yaml", &cluster_yaml(ns, &w, release)).unwrap();
            let dir = confs_dir.path().join(release);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, content) in test_host_overlay(&c, &render(&c), &instance, ctld_port) {
                std::fs::write(dir.join(name), content).unwrap();
            }
            confs.insert(release.to_string(), dir);
        }
        OwnSlurm {
            instance: instance.clone(),
            ctld_port,
            restd_port,
            confs,
            controllers: Vec::new(),
            pull: Duration::ZERO,
        }
    };
    let env = TestEnv::with_own_slurm("upgrade", own).await;
    env.grant_slurmops_role().await;
    let dir = tempfile::tempdir().unwrap();
    let write = |v: &str| {
        std::fs::write(
            dir.path().join("cluster.yaml"),
            cluster_yaml(&env.ns, &w, v),
        )
        .unwrap()
    };

    // Slurm 24.11: slurmctld, slurmrestd and 4 workers, a job on one of them.
    write("24.11");
    let (ok, out) = slurmops(&["apply", "--wait", "120s"], dir.path());
    assert!(ok, "{out}");
    let names: Vec<String> = (0..4).map(|i| format!("{w}-{i}")).collect();
    for n in &names {
        eventually(
            &format!("{n} idle on 24.11"),
            Duration::from_secs(60),
            async || {
                let line = exec(&instance, &["scontrol", "-o", "show", "node", n])?;
                let state = field(&line, "State")?;
                (state.starts_with("IDLE") && !state.contains("NOT_RESPONDING")).then_some(())
            },
        )
        .await;
    }
    let busy = names[2].clone();
    let job = exec(
        &instance,
        &[
            "sbatch",
            "--parsable",
            "-w",
            &busy,
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 45",
        ],
    )
    .expect("sbatch")
    .trim()
    .to_string();
    eventually("the job running", Duration::from_secs(30), async || {
        let line = exec(&instance, &["scontrol", "-o", "show", "job", &job])?;
        (field(&line, "JobState")? == "RUNNING").then_some(())
    })
    .await;
    let token = support::slurm::sh(&["token", &instance, "root"])
        .trim()
        .to_string();

    // The plan for the commit: the upgrade in Slurm's order.
    write("26.05");
    let (_, plan) = slurmops(&["plan", "--cluster"], dir.path());
    assert!(
        plan.contains("Slurm upgrade 24.11 → 26.05: slurmctld (state kept"),
        "{plan}"
    );

    // Sample the job while the upgrade runs: Slurm may be unreachable while slurmctld restarts,
    // but whenever it answers the job is known, RUNNING until it COMPLETES.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (seen, done, instance, job) =
            (seen.clone(), done.clone(), instance.clone(), job.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if let Some(line) = exec(&instance, &["scontrol", "-o", "show", "job", &job]) {
                    let state = field(&line, "JobState").unwrap_or_else(|| line.clone());
                    let mut s = seen.lock().unwrap();
                    if s.last() != Some(&state) {
                        s.push(state);
                    }
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    let url = format!("http://127.0.0.1:{restd_port}");
    let (ok, out) = slurmops(
        &[
            "apply",
            "--wait",
            "300s",
            "--slurmrestd-url",
            &url,
            "--slurm-jwt",
            &token,
        ],
        dir.path(),
    );
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    sampler.join().unwrap();
    assert!(ok, "{out}");

    // slurmctld came back as 26.05, with the job in its state: RUNNING, then COMPLETED.
    let config = exec(&instance, &["scontrol", "show", "config"]).unwrap();
    assert!(
        config
            .lines()
            .any(|l| l.starts_with("SLURM_VERSION") && l.contains("= 26.05")),
        "{config}"
    );
    let seen = seen.lock().unwrap().clone();
    let mut last = String::new();
    for _ in 0..120 {
        last = exec(&instance, &["scontrol", "-o", "show", "job", &job]).unwrap_or_default();
        if field(&last, "JobState").as_deref() == Some("COMPLETED") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        field(&last, "JobState").as_deref(),
        Some("COMPLETED"),
        "job {job}: {last}\nstates seen during the upgrade: {seen:?}\napply said:\n{out}\nkubelet: {:?}",
        env.kubelet.events()
    );
    assert_eq!(
        seen.first().map(String::as_str),
        Some("RUNNING"),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .all(|s| s == "RUNNING" || s == "COMPLETING" || s == "COMPLETED"),
        "the job was lost or killed: {seen:?}"
    );

    // Every worker now runs 26.05 slurmd.
    for n in &names {
        let line = exec(&instance, &["scontrol", "-o", "show", "node", n]).unwrap();
        assert!(
            field(&line, "Version").is_some_and(|v| v.starts_with("26.05")),
            "{n}: {line}"
        );
    }
    // The kubelet's log, in order: slurmctld 24.11, then 26.05; no slurmd newer than the running
    // slurmctld, ever; the busy worker replaced last.
    let events = env.kubelet.events();
    let mut ctld: Option<String> = None;
    let mut upgraded: Vec<String> = Vec::new();
    let mut busy_stopped_after = None;
    for e in &events {
        match e {
            Event::SlurmctldStarted { release } => ctld = Some(release.clone()),
            Event::SlurmctldStopped => ctld = None,
            Event::SlurmdStarted { pod, release, .. } => {
                assert!(
                    release == "24.11" || ctld.as_deref() == Some("26.05"),
                    "{pod} started on Slurm {release} while slurmctld ran {ctld:?}: {events:?}"
                );
                if release == "26.05" {
                    upgraded.push(pod.clone());
                }
            }
            Event::SlurmdStopped { pod, .. } if *pod == busy && busy_stopped_after.is_none() => {
                busy_stopped_after = Some(upgraded.clone());
            }
            _ => {}
        }
    }
    let before_busy = busy_stopped_after.expect("the busy worker was replaced");
    for n in names.iter().filter(|n| **n != busy) {
        assert!(
            before_busy.contains(n),
            "{busy} went before {n}: {events:?}"
        );
    }
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::SlurmctldStarted { release } if release == "26.05"))
            .count(),
        1,
        "{events:?}"
    );
    env.cleanup().await;
}

/// OWN for INSTANCE with its slurmctld on CTLD_PORT: the 24.11 config of the cluster in NS.
fn own_24_11(
    ns: &str,
    w: &str,
    instance: &str,
    ports: (u16, u16),
    dir: &std::path::Path,
) -> OwnSlurm {
    let c = load(
        "cluster.yaml",
        &with_max_time(&cluster_yaml(ns, w, "24.11"), "1:00:00"),
    )
    .unwrap();
    let conf = dir.join("24.11");
    std::fs::create_dir_all(&conf).unwrap();
    for (name, content) in test_host_overlay(&c, &render(&c), instance, ports.0) {
        std::fs::write(conf.join(name), content).unwrap();
    }
    OwnSlurm {
        instance: instance.to_string(),
        ctld_port: ports.0,
        restd_port: ports.1,
        confs: BTreeMap::from([("24.11".to_string(), conf)]),
        controllers: Vec::new(),
        pull: Duration::ZERO,
    }
}

/// The cluster with its partition's MaxTime set.
fn with_max_time(yaml: &str, max_time: &str) -> String {
    yaml.replace(
        "default: true}",
        &format!("default: true, maxTime: \"{max_time}\"}}"),
    )
}

/// slurmctld's PID in INSTANCE (the bed's pid file of the daemon it started).
fn ctld_pid(instance: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/{instance}/slurmctld.pid",
        support::slurm::run_dir()
    ))
    .unwrap_or_default()
    .trim()
    .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partition_change_reconfigures_slurmctld_in_place_and_the_running_job_is_untouched() {
    let instance = format!("rc{}", unique_suffix());
    let ports = (slurmd_port(), slurmd_port());
    let w = format!("r{}", unique_suffix());
    let confs_dir = tempfile::tempdir().unwrap();
    let env = TestEnv::with_own_slurm("reconf", |ns: &str| {
        own_24_11(ns, &w, &instance, ports, confs_dir.path())
    })
    .await;
    env.grant_slurmops_role().await;
    let dir = tempfile::tempdir().unwrap();
    let write = |max_time: &str| {
        let yaml = with_max_time(&cluster_yaml(&env.ns, &w, "24.11"), max_time);
        std::fs::write(dir.path().join("cluster.yaml"), yaml).unwrap()
    };
    write("1:00:00");
    let (ok, out) = slurmops(&["apply", "--wait", "120s"], dir.path());
    assert!(ok, "{out}");
    let node = format!("{w}-0");
    eventually("a worker idle", Duration::from_secs(60), async || {
        let line = exec(&instance, &["scontrol", "-o", "show", "node", &node])?;
        let state = field(&line, "State")?;
        (state.starts_with("IDLE") && !state.contains("NOT_RESPONDING")).then_some(())
    })
    .await;
    let max_time = || {
        exec(&instance, &["scontrol", "-o", "show", "partition", "all"])
            .and_then(|l| field(&l, "MaxTime"))
    };
    assert_eq!(max_time().as_deref(), Some("01:00:00"));
    let job = exec(
        &instance,
        &[
            "sbatch",
            "--parsable",
            "-w",
            &node,
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 300",
        ],
    )
    .expect("sbatch")
    .trim()
    .to_string();
    let job_state = || {
        exec(&instance, &["scontrol", "-o", "show", "job", &job])
            .and_then(|l| field(&l, "JobState"))
    };
    eventually("the job running", Duration::from_secs(30), async || {
        (job_state()? == "RUNNING").then_some(())
    })
    .await;
    let pid = ctld_pid(&instance);
    assert!(!pid.is_empty());
    let controller_uid = || async {
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(env.client.clone(), &env.ns);
        pods.get("c-controller-0").await.ok()?.metadata.uid
    };
    let uid = controller_uid().await;
    assert!(uid.is_some());

    // The plan says what happens: a reconfigure, no restart.
    let before = dir.path().join("before.yaml");
    std::fs::copy(dir.path().join("cluster.yaml"), &before).unwrap();
    write("2:00:00");
    let (_, plan) = slurmops(&["plan", "--from", before.to_str().unwrap()], dir.path());
    assert!(
        plan.contains("slurmctld reconfigures in place, no restart"),
        "{plan}"
    );
    assert!(!plan.contains("slurmctld restarts"), "{plan}");
    let (ok, out) = slurmops(&["apply", "--wait", "60s"], dir.path());
    assert!(ok, "{out}");

    // The kubelet updates the mounted files; the pod's sidecar asks for the reconfigure.
    eventually(
        "MaxTime 2:00:00 in Slurm",
        Duration::from_secs(60),
        async || (max_time()? == "02:00:00").then_some(()),
    )
    .await;
    assert_eq!(ctld_pid(&instance), pid, "slurmctld was restarted");
    assert_eq!(
        controller_uid().await,
        uid,
        "the controller pod was replaced"
    );
    assert_eq!(
        job_state().as_deref(),
        Some("RUNNING"),
        "the job was touched"
    );
    let events = env.kubelet.events();
    assert!(events.contains(&Event::SidecarStarted), "{events:?}");
    assert!(events.contains(&Event::ConfigRefreshed), "{events:?}");
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::SlurmctldStarted { .. }))
            .count(),
        1,
        "{events:?}"
    );
    let _ = exec(&instance, &["scancel", &job]);
    env.cleanup().await;
}
