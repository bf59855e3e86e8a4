//! Canary rollouts end to end: the daemon follows a repository on the bed's git server with the
//! rights `slurmops install --print` gives it, against the bed's real slurmctld and slurmrestd,
//! with a real slurmd per worker pod (the test kubelet). The validation job is a real Slurm job on
//! the canaries.
//!
//! What a user relies on: a bad change replaces only the canaries, which stay drained with the
//! job's error while every other worker and its job are left alone, and the commit shows as
//! failed with the job named; the next commit (a fix) validates its canary with a job Slurm
//! completes, then rolls every worker, never killing a job.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use slurmops::slurm::SlurmNodes;

use crate::support::daemon::{applied, status};
use crate::support::eventually;
use crate::support::gitops::{Bed, running};
use crate::support::slurm::cli;
use crate::support::slurm::{job_state, submit_sleep};
use slurmops::status::configmap::Status;

/// One NodeSet of three workers running IMAGE, all three allowed out at once, under a canary
/// of one worker validated by VALIDATE (a YAML flow mapping).
pub(crate) fn cluster(ns: &str, set: &str, image: &str, validate: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - name: {set}
      replicas: 3
      cpu: "1"
      memory: 256Mi
      image: {image}
      update:
        maxUnavailable: 3
        canary: {{replicas: 1, validate: {validate}}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
        )
}

/// A check that fails, kept in a ConfigMap (`make_check` creates it), as a platform team would.
pub(crate) const FAILING: &str = "{configMapRef: {name: gpu-check, key: check.sh}, timeout: 2m}";
const CHECK: &str =
    "#!/bin/sh\necho checking $(hostname)\necho \"GPU 0 missing on $(hostname)\" >&2\nexit 1\n";
pub(crate) const PASSING: &str = "{builtin: hostname, timeout: 2m}";

pub(crate) async fn make_check(env: &support::TestEnv) {
    let cm = k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("gpu-check".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "check.sh".to_string(),
            CHECK.to_string(),
        )])),
        ..Default::default()
    };
    kube::api::Api::namespaced(env.client.clone(), &env.ns)
        .create(&kube::api::PostParams::default(), &cm)
        .await
        .unwrap();
}

/// The daemon's status once its result for COMMIT is `canary-failed` (within SECS), and the
/// Warning Event `CanaryFailed` it records on its status ConfigMap for the commit.
async fn canary_failed(env: &support::TestEnv, commit: &str, secs: u64) -> Status {
    let st = eventually("the canary fails", Duration::from_secs(secs), async || {
        let st = status(env).await?;
        (st.result == "canary-failed" && st.result_commit == commit).then_some(st)
    })
    .await;
    let short = &commit[..12];
    eventually(
        "the CanaryFailed Event",
        Duration::from_secs(20),
        async || {
            let events: kube::Api<k8s_openapi::api::core::v1::Event> =
                kube::Api::namespaced(env.client.clone(), &env.ns);
            let list = events.list(&Default::default()).await.ok()?;
            list.items
                .into_iter()
                .find(|e| {
                    e.involved_object.kind.as_deref() == Some("ConfigMap")
                        && e.reason.as_deref() == Some(slurmops::vocab::EVENT_CANARY_FAILED)
                        && e.message.as_deref().is_some_and(|m| m.contains(short))
                })
                .map(|_| ())
        },
    )
    .await;
    st
}

/// Waits (SECS) until the three workers of SET run the applied revision and nothing is left.
async fn rolled(env: &support::TestEnv, set: &str, secs: u64) {
    eventually(
        "every worker rolled",
        Duration::from_secs(secs),
        async || {
            let st = status(env).await?;
            let p = st.progress().into_iter().find(|p| p.node_set == set)?;
            (st.result == "applied" && p.done && p.updated == 3).then_some(())
        },
    )
    .await;
}

/// Every job slurmctld still knows whose name starts with PREFIX: (id, state).
async fn jobs_named(prefix: &str) -> Vec<(u64, Vec<String>)> {
    let jobs = support::slurm::client().jobs().await.unwrap_or_default();
    jobs.iter()
        .filter(|j| j.name.starts_with(prefix))
        .map(|j| (j.id, j.state.split(',').map(String::from).collect()))
        .collect()
}

on_oldest_and_newest_slurm! {
async fn a_failing_canary_halts_with_only_the_canary_replaced_and_a_fix_rolls_everything() {
    let t = Bed::new("canary").await;
    make_check(&t.env).await;
    let set = t.env.name("cn");
    let daemon = t
        .deployed(&cluster(&t.env.ns, &set, "img:1", FAILING), "d", &[(&set, 3)])
        .await;
    let s = support::slurm::client();
    // A job on the first worker: the canary is an idle one, and this job must never be touched.
    let busy = format!("{set}-0");
    let job = submit_sleep(&busy, 45).await;
    running(job).await;
    let before: BTreeMap<String, String> =
        t.pods(&set).await.into_iter().map(|(n, (uid, _))| (n, uid)).collect();

    // The plan of the change against the live cluster names the canary: an idle worker.
    let dir = tempfile::tempdir().unwrap();
    let bad_text = cluster(&t.env.ns, &set, "img:2", FAILING);
    std::fs::write(dir.path().join("cluster.yaml"), &bad_text).unwrap();
    let out = cli(dir.path(), &["plan", "--cluster"])
        .env("KUBECONFIG", &support::bed().kubeconfig_admin)
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(
        plan.contains(&format!("NodeSet {set}: canary: {set}-1 replaced first and validated by the script in ConfigMap gpu-check key check.sh (a job on each, timeout 2m), then 2 more workers")),
        "{plan}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A new image whose canary fails: the commit is marked failed, naming the job and its error.
    let bad = t.repo.push(&bad_text, "img:2");
    let st = canary_failed(&t.env, &bad, 120).await;
    let p = st.progress().into_iter().find(|p| p.node_set == set).unwrap();
    let c = p.canary.clone().expect("canary progress");
    let failed_job = *c.jobs.first().expect("the validation job");
    assert_eq!(c.canaries.len(), 1, "{c:?}");
    let canary = c.canaries[0].clone();
    assert_ne!(canary, busy, "the busy worker was chosen as the canary");
    assert!(st.errors.contains(&format!("job {failed_job}")), "{}", st.errors);
    assert!(st.errors.contains("GPU 0 missing on"), "{}", st.errors);
    assert!(job_state(failed_job).await.iter().any(|x| x == "FAILED"));

    // Only the canary was replaced; it stays drained with the job's error; the others, and the
    // running job, are untouched, pass after pass.
    let reason = format!("slurmops: canary failed: job {failed_job}: GPU 0 missing on {canary}");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let after: BTreeMap<String, String> =
        t.pods(&set).await.into_iter().map(|(n, (uid, _))| (n, uid)).collect();
    for (name, uid) in &before {
        assert_eq!(after.get(name) == Some(uid), *name != canary, "{name}: {before:?} -> {after:?}");
    }
    let n = s.get(&canary).await.unwrap();
    assert!(n.state.has("DRAIN"), "{canary}: {}", n.state);
    assert_eq!(n.reason, reason);
    for name in before.keys().filter(|n| **n != canary) {
        let n = s.get(name).await.unwrap();
        assert!(!n.state.has("DRAIN"), "{name} was drained: {} {}", n.state, n.reason);
    }
    assert_eq!(job_state(job).await, ["RUNNING"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["status", "--namespace", &t.env.ns])
        .env("KUBECONFIG", &t.kubeconfig)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("canary-failed"), "{text}");
    assert!(text.contains(&format!("canary FAILED (job {failed_job}) on {canary}")), "{text}");
    assert!(text.contains(&format!("| GPU 0 missing on {canary}")), "{text}");
    assert!(text.contains(&format!("slurmops rollout --resume {set}")), "{text}");

    // The fix: a new image whose canary passes. The failed canary is replaced first, validated by
    // a job Slurm completes, then every worker rolls; the job on the busy one ends first.
    let fix = t.repo.push(&cluster(&t.env.ns, &set, "img:3", PASSING), "img:3");
    applied(&t.env, &fix, Duration::from_secs(60)).await;
    rolled(&t.env, &set, 180).await;
    let now: BTreeMap<String, String> =
        t.pods(&set).await.into_iter().map(|(n, (uid, _))| (n, uid)).collect();
    for (name, uid) in &before {
        assert_ne!(now.get(name), Some(uid), "{name} was not replaced");
    }
    assert_eq!(job_state(job).await, ["COMPLETED"], "the busy worker's job was killed");
    let validations = jobs_named(&format!("slurmops-canary:{set}:")).await;
    let passed: Vec<&(u64, Vec<String>)> = validations
        .iter()
        .filter(|(id, st)| *id != failed_job && st.iter().any(|x| x == "COMPLETED"))
        .collect();
    assert_eq!(passed.len(), 1, "one validation job COMPLETED: {validations:?}");
    for name in now.keys() {
        let n = s.get(name).await.unwrap();
        assert!(!n.state.has("DRAIN"), "{name} still drained: {}", n.reason);
    }
    drop(daemon);
    t.env.cleanup().await;
}
}

on_each_slurm! {
async fn an_operator_resumes_past_a_failed_canary_on_purpose() {
    let t = Bed::new("canary-resume").await;
    make_check(&t.env).await;
    let set = t.env.name("cr");
    let daemon = t
        .deployed(&cluster(&t.env.ns, &set, "img:1", FAILING), "d", &[(&set, 3)])
        .await;
    let text = cluster(&t.env.ns, &set, "img:2", FAILING);
    let bad = t.repo.push(&text, "img:2");
    canary_failed(&t.env, &bad, 120).await;
    // `rollout --resume`: recorded as an Event, then every worker rolls, none left drained.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), &text).unwrap();
    let out = cli(dir.path(), &["rollout", "--resume", &set])
        .env("KUBECONFIG", &support::bed().kubeconfig_admin)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("resumed past its failed canary by an operator"), "{said}");
    let events: kube::api::Api<k8s_openapi::api::core::v1::Event> =
        kube::api::Api::namespaced(t.env.client.clone(), &t.env.ns);
    let list = events.list(&Default::default()).await.unwrap();
    assert!(
        list.items.iter().any(|e| e.reason.as_deref() == Some("CanaryOverridden")
            && e.involved_object.name.as_deref() == Some(set.as_str())),
        "no CanaryOverridden Event"
    );
    rolled(&t.env, &set, 120).await;
    let s = support::slurm::client();
    for i in 0..3 {
        let n = s.get(&format!("{set}-{i}")).await.unwrap();
        assert!(!n.state.has("DRAIN"), "{set}-{i} still drained: {}", n.reason);
    }
    // A second resume has nothing to resume past: refused, nothing changed.
    let out = cli(dir.path(), &["rollout", "--resume", &set])
        .env("KUBECONFIG", &support::bed().kubeconfig_admin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no failed canary to resume past"));
    drop(daemon);
    t.env.cleanup().await;
}
}

on_oldest_and_newest_slurm! {
async fn a_canary_that_never_starts_fails_after_its_ready_timeout_and_a_revert_rolls_back() {
    let t = Bed::new("canary-ready").await;
    let set = t.env.name("cd");
    let within = |image: &str| {
        cluster(&t.env.ns, &set, image, PASSING)
            .replace("canary: {replicas: 1,", "canary: {replicas: 1, readyTimeout: 20s,")
    };
    let daemon = t.deployed(&within("img:1"), "d", &[(&set, 3)]).await;
    let before: BTreeMap<String, String> =
        t.pods(&set).await.into_iter().map(|(n, (uid, _))| (n, uid)).collect();

    // An image no registry serves: the canary's new pod never starts. Once readyTimeout has
    // passed, the canary fails without a validation job and nothing else moves. The daemon
    // polls git only every 10 minutes and nothing changes once the pod is Pending: it passes
    // again when the canary's time runs out.
    drop(daemon);
    let bad = t.repo.push(&within("registry.invalid/slurmd:broken"), "broken image");
    let daemon = t.daemon_polling("d", "10m");
    let st = canary_failed(&t.env, &bad, 90).await;
    let p = st.progress().into_iter().find(|p| p.node_set == set).unwrap();
    let c = p.canary.clone().expect("canary progress");
    assert_eq!(c.canaries.len(), 1, "{c:?}");
    assert!(c.jobs.is_empty(), "no validation job for a canary that never started: {c:?}");
    let canary = c.canaries[0].clone();
    let why = format!("{canary} not up within readyTimeout 20s: its pod is not Ready");
    assert!(st.errors.contains(&why), "{}", st.errors);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after: BTreeMap<String, String> =
        t.pods(&set).await.into_iter().map(|(n, (uid, _))| (n, uid)).collect();
    let s = support::slurm::client();
    for (name, uid) in &before {
        assert_eq!(after.get(name) == Some(uid), *name != canary, "{name}: {before:?} -> {after:?}");
        if *name != canary {
            let n = s.get(name).await.unwrap();
            assert!(!n.state.has("DRAIN"), "{name} was drained: {} {}", n.state, n.reason);
        }
    }

    // The revert needs no canary (the revision every other worker runs): the broken pod is
    // replaced and every worker serves again, none left drained.
    drop(daemon);
    let daemon = t.daemon("d");
    let revert = t.repo.push(&within("img:1"), "revert");
    applied(&t.env, &revert, Duration::from_secs(60)).await;
    rolled(&t.env, &set, 120).await;
    for name in before.keys() {
        let n = eventually("the worker registered", Duration::from_secs(60), async || {
            s.get(name).await.ok()
        })
        .await;
        assert!(!n.state.has("DRAIN"), "{name} still drained: {} {}", n.state, n.reason);
    }
    drop(daemon);
    t.env.cleanup().await;
}
}

on_each_slurm! {
async fn a_canary_validated_by_an_active_check_fails_on_the_check_s_figure() {
    let t = Bed::new("canary-check").await;
    let set = t.env.name("cq");
    // A check declared for the canary alone: its figure (5) is below its threshold (10).
    let text = |image: &str| {
        support::cluster_head("c", &t.env.ns)
            + &format!(
                r#"  policy:
    activeChecks:
      - name: bandwidth
        onRegister: false
        minValue: 10
        unit: GB/s
        script: "echo checking; echo slurmops-value: 5"
  nodeSets:
    - name: {set}
      replicas: 2
      cpu: "1"
      memory: 256Mi
      image: {image}
      update:
        maxUnavailable: 2
        canary: {{replicas: 1, validate: {{check: bandwidth, timeout: 2m}}}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
            )
    };
    let _daemon = t.deployed(&text("img:1"), "d", &[(&set, 2)]).await;
    let bad = t.repo.push(&text("img:2"), "img:2");
    let st = canary_failed(&t.env, &bad, 120).await;
    let p = st.progress().into_iter().find(|p| p.node_set == set).unwrap();
    let c = p.canary.clone().expect("canary progress");
    let job = *c.jobs.first().expect("the validation job");
    let canary = c.canaries[0].clone();
    assert!(st.errors.contains("figure 5 GB/s below 10 GB/s"), "{}", st.errors);
    let n = support::slurm::client().get(&canary).await.unwrap();
    assert!(n.state.has("DRAIN"), "{canary}: {}", n.state);
    assert_eq!(n.reason, format!("slurmops: canary failed: job {job}: figure 5 GB/s below 10 GB/s"));
    let names = jobs_named(&format!("slurmops-canary:{set}:")).await;
    assert!(names.iter().any(|(id, _)| *id == job), "the check ran as the canary's job: {names:?}");
}
}
