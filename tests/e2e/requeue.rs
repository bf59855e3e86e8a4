//! `update.runningJobs: requeue` on the bed: a rollout whose worker runs a long job Slurm may
//! requeue requeues it after `after` (the node set DOWN), replaces the worker, and the job starts
//! again and completes; a worker whose job may not be requeued waits for it, its job untouched.
//! Real slurmctld and slurmrestd, a real slurmd per worker pod (the test kubelet), `slurmops
//! apply` with Slurm.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use slurmops::slurm::SlurmNodes;

use crate::support::slurm::client as slurm;
use crate::support::{TestEnv, bed, eventually};

fn cluster_yaml(ns: &str, w: &str, image: &str) -> String {
    support::four_workers(ns, w, image)
        .replace("replicas: 4", "replicas: 2")
        .replace(
            "update: {maxUnavailable: 1}",
            "update: {maxUnavailable: 2, runningJobs: requeue, requeue: {after: 5s}}",
        )
}

/// METHOD on slurmrestd's PATH (under `/slurm/v0.0.42/`) with root's token, and BODY: its answer.
async fn rest(
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> serde_json::Value {
    let b = bed();
    let mut r = reqwest::Client::new()
        .request(method, format!("{}/slurm/v0.0.42/{path}", b.slurmrestd_url))
        .header("X-SLURM-USER-TOKEN", &b.slurm_jwt);
    if let Some(body) = body {
        r = r.json(&body);
    }
    r.send().await.unwrap().json().await.unwrap_or_default()
}

/// Submits a job on NODE that may be requeued (REQUEUE) or not: the first run sleeps 600 s, a
/// run after a requeue ends at once. Its id.
async fn submit(node: &str, requeue: bool) -> u64 {
    let script = "#!/bin/sh\n[ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ] && exit 0\nsleep 600\n";
    let body = serde_json::json!({"script": script, "job": {
        "tasks": 1, "name": "long-training", "partition": "all", "required_nodes": [node],
        "requeue": requeue, "current_working_directory": "/tmp",
        "environment": ["PATH=/usr/bin:/bin"]}});
    let resp = rest(reqwest::Method::POST, "job/submit", Some(body)).await;
    resp["job_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("job not submitted: {resp}"))
}

/// Job ID as slurmrestd has it: its states and how often it was restarted.
async fn job(id: u64) -> (Vec<String>, u64) {
    let resp = rest(reqwest::Method::GET, &format!("job/{id}"), None).await;
    let j = &resp["jobs"][0];
    (
        serde_json::from_value(j["job_state"].clone()).unwrap_or_default(),
        j["restart_cnt"].as_u64().unwrap_or(0),
    )
}

async fn uid(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get_opt(name).await.ok().flatten()?.metadata.uid
}

on_each_slurm! {
async fn a_rollout_requeues_a_long_requeueable_job_and_waits_for_one_that_may_not_be() {
    let env = TestEnv::new("requeue").await;
    let w = env.name("q");
    let dir = tempfile::tempdir().unwrap();
    let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_admin), None)
        .await
        .unwrap();
    let first = cluster_yaml(&env.ns, &w, "registry.example/slurmd:a");
    let c = slurmops::cluster::load("cluster.yaml", &first).unwrap();
    let opts = slurmops::apply::Options {
        wait: Some(Duration::from_secs(90)),
        ..Default::default()
    };
    slurmops::apply::apply(
        &cluster,
        &c,
        &first,
        &slurmops::render::render(&c),
        &opts,
        &slurmops::apply::NoSlurm,
    )
    .await
    .unwrap();
    let s = slurm();
    let (a, b) = (format!("{w}-0"), format!("{w}-1"));
    for n in [&a, &b] {
        eventually(&format!("{n} idle"), Duration::from_secs(30), async || {
            let node = s.get(n).await.ok()?;
            (node.state.has("IDLE") && !node.state.has("NOT_RESPONDING")).then_some(())
        })
        .await;
    }
    let requeued = submit(&a, true).await;
    let kept = submit(&b, false).await;
    for id in [requeued, kept] {
        eventually(&format!("job {id} running"), Duration::from_secs(30), async || {
            job(id).await.0.iter().any(|x| x == "RUNNING").then_some(())
        })
        .await;
    }
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let (a_uid, b_uid) = (uid(&pods, &a).await, uid(&pods, &b).await);

    // A new image: `slurmops apply` with Slurm rolls both workers (maxUnavailable 2).
    std::fs::write(
        dir.path().join("cluster.yaml"),
        cluster_yaml(&env.ns, &w, "registry.example/slurmd:b"),
    )
    .unwrap();
    let mut apply = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .arg("apply")
        .arg(dir.path())
        .args(["--wait", "0s", "--slurmrestd-url", &bed().slurmrestd_url])
        .args(["--slurm-jwt", &bed().slurm_jwt])
        .env("KUBECONFIG", &bed().kubeconfig_admin)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    // The requeueable job is requeued 5 s into its worker's drain, the worker replaced, and the
    // job runs again (on the new worker: the only one in service) and completes. Slurm holds a
    // requeued job back `SchedulerParameters=requeue_delay` (the bed: 2 s), which Slurm 24.11
    // does not read: there, the credential lifetime, 121 s.
    eventually("the requeued job completed after a restart", Duration::from_secs(240), async || {
        let (state, restarts) = job(requeued).await;
        (state == ["COMPLETED"] && restarts >= 1).then_some(())
    })
    .await;
    eventually(&format!("{a} replaced"), Duration::from_secs(60), async || {
        let now = uid(&pods, &a).await?;
        (Some(&now) != a_uid.as_ref()).then_some(())
    })
    .await;
    // The job that may not be requeued runs on, its worker drained and not replaced.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(job(kept).await.0, ["RUNNING"], "a job that may not be requeued was touched");
    assert_eq!(job(kept).await.1, 0);
    assert_eq!(uid(&pods, &b).await, b_uid, "{b} replaced while its job ran");
    assert!(s.get(&b).await.unwrap().state.has("DRAIN"));

    // Its job ends: the rollout ends.
    rest(reqwest::Method::DELETE, &format!("job/{kept}"), None).await;
    let out = tokio::task::spawn_blocking(move || {
        let status = apply.wait().unwrap();
        let mut printed = String::new();
        use std::io::Read;
        apply.stdout.take().unwrap().read_to_string(&mut printed).unwrap();
        let mut err = String::new();
        apply.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (status, printed, err)
    })
    .await
    .unwrap();
    let (status, printed, err) = out;
    assert!(status.success(), "{printed}{err}");
    assert!(
        printed.contains(&format!("{a}: job(s) {requeued} (root) requeued (runningJobs: requeue)")),
        "{printed}"
    );
    assert!(!printed.contains(&format!("{kept} (root) requeued")), "{printed}");
    assert_ne!(uid(&pods, &b).await, b_uid, "{b} replaced once its job ended");
    for n in [&a, &b] {
        let node = s.get(n).await.unwrap();
        assert!(!node.state.has("DRAIN") && !node.state.has("DOWN"), "{n}: {}", node.state);
    }
    env.cleanup().await;
}
}
