//! `update.runningJobs: requeue` on the bed: a rollout whose worker runs a long job Slurm may
//! requeue requeues it after `after` (the node set DOWN), replaces the worker, and the job starts
//! again and completes; a worker whose job may not be requeued waits for it, its job untouched.
//! Real slurmctld and slurmrestd, a real slurmd per worker pod (the test kubelet), `slurmops
//! apply` with Slurm.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;
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

/// Submits a job that may be requeued (REQUEUE) or not, on the worker ON names: `-w NODE`, or
/// `--constraint SET` (any worker of NodeSet SET, whose name each carries as a feature). The first
/// run sleeps 600 s, a run after a requeue ends at once. Its id.
async fn submit(on: On<'_>, requeue: bool) -> u64 {
    let script = "#!/bin/sh\n[ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ] && exit 0\nsleep 600\n";
    let mut job = serde_json::json!({
        "tasks": 1, "name": "long-training", "partition": "all",
        "requeue": requeue, "current_working_directory": "/tmp",
        "environment": ["PATH=/usr/bin:/bin"]});
    match on {
        On::Node(n) => job["required_nodes"] = json!([n]),
        On::Set(s) => job["constraints"] = json!(s),
    }
    let resp = rest(
        reqwest::Method::POST,
        "job/submit",
        Some(json!({"script": script, "job": job})),
    )
    .await;
    resp["job_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("job not submitted: {resp}"))
}

/// Where a job runs: the node named, or any worker of a NodeSet.
#[derive(Clone, Copy)]
enum On<'a> {
    Node(&'a str),
    Set(&'a str),
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

/// Workers A and B of NodeSet SET idle in Slurm, then a job that may not be requeued running on
/// B (named: it is never requeued) and one that may running on A, the one worker of SET left free
/// (by the NodeSet, as users submit: a job naming its node is not requeued by a rollout, which
/// replaces the node under the same name). Their ids.
async fn two_jobs_running(set: &str, a: &str, b: &str) -> (u64, u64) {
    let s = slurm();
    for n in [a, b] {
        eventually(&format!("{n} idle"), Duration::from_secs(30), async || {
            let node = s.get(n).await.ok()?;
            (node.state.has("IDLE") && !node.state.has("NOT_RESPONDING")).then_some(())
        })
        .await;
    }
    let running = async |id: u64| {
        eventually(
            &format!("job {id} running"),
            Duration::from_secs(30),
            async || job(id).await.0.iter().any(|x| x == "RUNNING").then_some(()),
        )
        .await
    };
    let kept = submit(On::Node(b), false).await;
    running(kept).await;
    let requeued = submit(On::Set(set), true).await;
    running(requeued).await;
    let nodes =
        rest(reqwest::Method::GET, &format!("job/{requeued}"), None).await["jobs"][0]["nodes"]
            .clone();
    assert_eq!(nodes, json!(a), "the requeueable job runs on {a}");
    (requeued, kept)
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
    let (requeued, kept) = two_jobs_running(&w, &a, &b).await;
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
    // Its output read as it comes: unread, a full pipe would stop the rollout mid-pass.
    let read = |r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            use std::io::Read;
            let mut text = String::new();
            let mut r = r;
            r.read_to_string(&mut text).unwrap();
            text
        })
    };
    let stdout = read(Box::new(apply.stdout.take().unwrap()));
    let stderr = read(Box::new(apply.stderr.take().unwrap()));

    // The requeueable job is requeued 5 s into its worker's drain, the worker replaced, and the
    // job runs again (on the new worker: the only one in service) and completes. Slurm holds a
    // requeued job back `SchedulerParameters=requeue_delay` (the bed: 2 s), which Slurm 24.11
    // does not read: there, the credential lifetime, 121 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    loop {
        let (state, restarts) = job(requeued).await;
        if state == ["COMPLETED"] && restarts >= 1 {
            break;
        }
        if std::time::Instant::now() > deadline {
            // What the rollout did and where it stands, for the failure's report.
            apply.kill().ok();
            apply.wait().ok();
            let node = |n: &str| support::slurm::scontrol(&["show", "node", n, "-o"]);
            panic!(
                "timed out after 240 s waiting for the requeued job {requeued} completed after a restart: {state:?}, {restarts} restart(s)\n{}\n{}\n{}\napply printed:\n{}{}",
                support::slurm::scontrol(&["show", "job", &requeued.to_string(), "-o"]),
                node(&a),
                node(&b),
                stdout.join().unwrap(),
                stderr.join().unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
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
        (status, stdout.join().unwrap(), stderr.join().unwrap())
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

fn spot_yaml(ns: &str, w: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - {{name: {w}, replicas: 2, cpu: "1", memory: 256Mi}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
  policy:
    nodeHealth:
      taints: [{{key: {SPOT_TAINT}, requeue: true}}]
"#
        )
}

/// GKE's preemption warning on a Spot node.
const SPOT_TAINT: &str = "cloud.google.com/impending-node-termination";

on_each_slurm! {
async fn a_preemption_warning_requeues_the_requeueable_jobs_at_once_and_never_kills_another() {
    use crate::sync::{applied, sync_once};
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams};
    let env = TestEnv::new("spot").await;
    env.grant_slurmops_role().await;
    env.grant_node_reader().await;
    let w = env.name("s");
    let dir = tempfile::tempdir().unwrap();
    applied(dir.path(), &spot_yaml(&env.ns, &w));
    let s = slurm();
    let (a, b) = (format!("{w}-0"), format!("{w}-1"));
    let (requeued, kept) = two_jobs_running(&w, &a, &b).await;
    // The cloud warns: the node goes in about two minutes.
    let taint = |on: bool| {
        let taints = match on {
            true => json!([{"key": SPOT_TAINT, "value": "true", "effect": "NoSchedule"}]),
            false => json!(null),
        };
        let patch = Patch::Merge(json!({"spec": {"taints": taints}}));
        let (env, node) = (&env, env.kubelet.node.clone());
        async move {
            Api::<Node>::all(env.client.clone())
                .patch(&node, &PatchParams::default(), &patch)
                .await
                .unwrap();
        }
    };
    taint(true).await;
    let node = &env.kubelet.node;
    let reason = format!("node {node}: taint {SPOT_TAINT}:NoSchedule");
    let printed = sync_once(dir.path());
    for n in [&a, &b] {
        assert!(printed.contains(&format!("{n}: drained: {reason}")), "{printed}");
    }
    // The next pass: the worker whose job may be requeued is set DOWN and Slurm requeues it;
    // the other stays drained, its job running.
    let printed = sync_once(dir.path());
    assert!(
        printed.contains(&format!("{a}: job(s) {requeued} (")) && printed.contains("requeued (its node's rule asks for requeue)"),
        "{printed}"
    );
    assert!(!printed.contains(&format!("{b}: job(s)")), "{printed}");
    eventually("the job requeued", Duration::from_secs(30), async || {
        let (state, restarts) = job(requeued).await;
        (!state.iter().any(|x| x == "RUNNING") && (restarts >= 1 || state.iter().any(|x| x == "REQUEUED" || x == "PENDING"))).then_some(())
    })
    .await;
    // A is out of service with nothing on it: DOWN, or already back from DOWN with its drain
    // kept (ReturnToService=2 returns a DOWN node whose slurmd answers once its jobs are gone).
    let na = s.get(&a).await.unwrap();
    assert!(na.state.has("DOWN") || na.state.is_drained(), "{na:?}");
    let nb = s.get(&b).await.unwrap();
    assert!(nb.state.has("DRAIN") && !nb.state.has("DOWN"), "{nb:?}");
    assert_eq!(job(kept).await.0, ["RUNNING"], "a job that may not be requeued was touched");
    // A false alarm: the warning withdrawn, both workers are back in service.
    taint(false).await;
    let printed = sync_once(dir.path());
    for n in [&a, &b] {
        assert!(printed.contains(&format!("{n}: resumed")), "{printed}");
    }
    for n in [&a, &b] {
        eventually(&format!("{n} in service"), Duration::from_secs(30), async || {
            let node = s.get(n).await.ok()?;
            (!node.state.has("DRAIN") && !node.state.has("DOWN")).then_some(())
        })
        .await;
    }
    assert_eq!(job(kept).await.0, ["RUNNING"]);
    for id in [requeued, kept] {
        support::slurm::sh(&["exec", support::slurm_instance(), "scancel", &id.to_string()]);
    }
    env.cleanup().await;
}
}
