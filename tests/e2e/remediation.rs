//! Drain requests from health tools and `remediation: replace` on the bed: the annotation NVIDIA's
//! NVSentinel sets for Slinky (`nodeset.slinky.slurm.net/node-cordon-reason`) on a Kubernetes
//! node drains its worker with the tool's reason while its job runs, the pod shows Slinky's state
//! conditions the tool waits for, and removing the request resumes it; a drain request on the
//! worker pod has it replaced once its job ended (never before), once, and the new worker is in
//! service. Real slurmctld and slurmrestd, a real slurmd per worker pod (the test kubelet),
//! `slurmops sync --once` for each pass.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use slurmops::slurm::SlurmNodes;

use crate::support::slurm::client as slurm;
use crate::support::{TestEnv, eventually, slurm_instance};
use crate::sync::{slurmops, sync_once};

fn cluster_yaml(ns: &str, w: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - {{name: {w}, replicas: 1, cpu: "1", memory: 256Mi, remediation: replace}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
        )
}

/// The status of each of Slinky's state conditions TYPES on pod NAME ("" when absent).
async fn slinky(pods: &Api<Pod>, name: &str, types: &[&str]) -> Vec<String> {
    let p = pods.get(name).await.unwrap();
    let cs = p.status.and_then(|s| s.conditions).unwrap_or_default();
    types
        .iter()
        .map(|t| {
            cs.iter()
                .find(|c| c.type_ == *t)
                .map(|c| c.status.clone())
                .unwrap_or_default()
        })
        .collect()
}

on_each_slurm! {
async fn health_tools_drain_requests_drain_and_resume_and_a_requested_worker_is_replaced_once_its_job_ended() {
    let env = TestEnv::new("remedy").await;
    env.grant_slurmops_role().await;
    env.grant_node_reader().await;
    let w = env.name("rm");
    let w0 = format!("{w}-0");
    let node = env.kubelet.node.clone();
    let dir = tempfile::tempdir().unwrap();
    crate::sync::applied(dir.path(), &cluster_yaml(&env.ns, &w));
    let s = slurm();
    eventually(&format!("{w0} idle"), Duration::from_secs(30), async || {
        let n = s.get(&w0).await.ok()?;
        (n.state.has("IDLE") && !n.state.has("NOT_RESPONDING")).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let uid0 = pods.get(&w0).await.unwrap().metadata.uid;
    let job = support::slurm::submit_sleep(&w0, 600).await;
    eventually("the job runs", Duration::from_secs(20), async || {
        (support::slurm::job_state(job).await == vec!["RUNNING".to_string()]).then_some(())
    })
    .await;

    // NVSentinel's request, as its slinky-drainer writes it on the Kubernetes node.
    let annotate = |value: Option<&str>| {
        let patch = Patch::Merge(json!({"metadata": {"annotations": {
            slurmops::vocab::ANNOTATION_SLINKY_CORDON_REASON: value}}}));
        let (env, node) = (&env, node.clone());
        async move {
            Api::<Node>::all(env.client.clone())
                .patch(&node, &PatchParams::default(), &patch)
                .await
                .unwrap();
        }
    };
    annotate(Some("[T] [NVSentinel] 79 GPU:3 - XID 79")).await;
    let reason = format!("node {node}: drain requested: [T] [NVSentinel] 79 GPU:3 - XID 79");
    let printed = sync_once(dir.path());
    assert!(printed.contains(&format!("{w0}: drained: {reason}")), "{printed}");
    let n = s.get(&w0).await.unwrap();
    assert!(n.state.has("DRAIN") && n.state.is_busy(), "{}", n.state);
    assert_eq!(n.reason, format!("slurmops: {reason}"));
    // The next pass: Slinky's conditions say drained and busy (the tool waits).
    sync_once(dir.path());
    let types = ["SlurmNodeStateDrain", "SlurmNodeStateAllocated"];
    assert_eq!(slinky(&pods, &w0, &types).await, ["True", "True"]);
    assert_eq!(support::slurm::job_state(job).await, vec!["RUNNING".to_string()]);
    // The job ends: drained and not busy, what the tool deletes the pod on. A replacement would
    // land on the same node (not cordoned) and register undrained: slurmops leaves it.
    support::slurm::sh(&["exec", slurm_instance(), "scancel", &job.to_string()]);
    let idle = async || {
        eventually("the node idle", Duration::from_secs(30), async || {
            (!s.get(&w0).await.ok()?.state.is_busy()).then_some(())
        })
        .await
    };
    idle().await;
    let printed = sync_once(dir.path());
    assert!(!printed.contains("replaced"), "{printed}");
    assert_eq!(slinky(&pods, &w0, &types).await, ["True", "False"]);
    assert_eq!(pods.get(&w0).await.unwrap().metadata.uid, uid0);
    // The tool removes its request: resumed, and Slinky's drain condition follows.
    annotate(None).await;
    let printed = sync_once(dir.path());
    assert!(printed.contains(&format!("{w0}: resumed")), "{printed}");
    assert!(!s.get(&w0).await.unwrap().state.has("DRAIN"));
    sync_once(dir.path());
    assert_eq!(slinky(&pods, &w0, &types).await, ["False", "False"]);

    // A request on the worker pod: drained while its job runs, replaced once the job ended,
    // and the new worker (without the request) in service.
    let job = support::slurm::submit_sleep(&w0, 600).await;
    eventually("the second job runs", Duration::from_secs(20), async || {
        (support::slurm::job_state(job).await == vec!["RUNNING".to_string()]).then_some(())
    })
    .await;
    let ask = Patch::Merge(json!({"metadata": {"annotations": {
        slurmops::vocab::ANNOTATION_DRAIN: "ECC errors on GPU 5"}}}));
    pods.patch(&w0, &PatchParams::default(), &ask).await.unwrap();
    let reason = "drain requested: ECC errors on GPU 5";
    let printed = sync_once(dir.path());
    assert!(printed.contains(&format!("{w0}: drained: {reason}")), "{printed}");
    let printed = sync_once(dir.path());
    assert!(!printed.contains("replaced"), "{printed}");
    assert_eq!(pods.get(&w0).await.unwrap().metadata.uid, uid0, "replaced while its job ran");
    assert_eq!(support::slurm::job_state(job).await, vec!["RUNNING".to_string()]);
    support::slurm::sh(&["exec", slurm_instance(), "scancel", &job.to_string()]);
    idle().await;
    let out = slurmops(dir.path(), &["plan", "--cluster"]).output().unwrap();
    let planned = String::from_utf8_lossy(&out.stdout);
    assert!(
        planned.contains(&format!(
            "next pass: delete {w0} (NodeSet {w}) (sync: drained ({reason}), no job left: replaced (remediation: replace))"
        )),
        "{planned}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = sync_once(dir.path());
    assert!(
        printed.contains(&format!("{w0}: replaced: drained ({reason}) and no job left")),
        "{printed}"
    );
    let uid1 = eventually("the new worker Ready", Duration::from_secs(60), async || {
        let p = pods.get(&w0).await.ok()?;
        (p.metadata.uid != uid0 && slurmops::rollout::pod_ready(&p)).then_some(p.metadata.uid)
    })
    .await;
    eventually("the new worker registered", Duration::from_secs(30), async || {
        let n = s.get(&w0).await.ok()?;
        (!n.state.has("NOT_RESPONDING") && !n.state.has("DOWN")).then_some(())
    })
    .await;
    let printed = sync_once(dir.path());
    assert!(!printed.contains("replaced"), "{printed}");
    let n = s.get(&w0).await.unwrap();
    assert!(n.state.has("IDLE") && !n.state.has("DRAIN"), "{n:?}");
    assert_eq!(pods.get(&w0).await.unwrap().metadata.uid, uid1);
    env.cleanup().await;
}
}
