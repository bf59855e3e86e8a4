//! perNode NodeSets end to end on the bed: one worker per labelled Kubernetes node, a node that
//! joins gets a worker, a node that leaves has its worker drained (its job finishing) before the
//! pod goes, and the other workers are never touched. Real kube-apiserver, real slurmctld and
//! slurmrestd, a real slurmd per worker pod (the test kubelet), `slurmops apply` with the rights
//! the Role and node reader ClusterRole give.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use slurmops::slurm::SlurmNodes;

use crate::support::slurm::{client as slurm, job_state, submit_sleep};
use crate::support::{TestEnv, eventually};

/// The label that puts a Kubernetes node in the test's pool.
const POOL: &str = "slurmops.test/pool";

fn cluster_yaml(ns: &str, set: &str, pool: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - name: {set}
      replicas: perNode
      cpu: "1"
      memory: 256Mi
      nodeSelector: {{slurmops.test/pool: "{pool}"}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
        )
}

fn apply(dir: &std::path::Path, wait: &str) -> std::process::Command {
    support::slurm::cli(dir, &["apply", "--wait", wait])
}

fn applied(out: std::process::Output) {
    assert!(
        out.status.success(),
        "apply failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// pod name → (uid, Kubernetes node; empty until bound) of the NodeSet's pods not being
/// deleted.
pub(crate) async fn workers(env: &TestEnv, set: &str) -> BTreeMap<String, (String, String)> {
    let lp = ListParams::default().labels(&format!("slurmops.dev/nodeset={set}"));
    Api::<Pod>::namespaced(env.client.clone(), &env.ns)
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let host = p.spec?.node_name.unwrap_or_default();
            Some((p.metadata.name?, (p.metadata.uid?, host)))
        })
        .collect()
}

/// Waits until the NodeSet has COUNT workers, each registered and idle in Slurm, not drained.
pub(crate) async fn idle_workers(
    env: &TestEnv,
    set: &str,
    count: usize,
) -> BTreeMap<String, (String, String)> {
    let s = slurm();
    eventually(
        &format!("{count} idle workers of {set}"),
        Duration::from_secs(90),
        async || {
            let w = workers(env, set).await;
            if w.len() != count {
                return None;
            }
            for name in w.keys() {
                let n = s.get(name).await.ok()?;
                if !n.state.has("IDLE") || n.state.has("NOT_RESPONDING") || n.state.has("DRAIN") {
                    return None;
                }
            }
            Some(w)
        },
    )
    .await
}

on_each_slurm! {
async fn workers_follow_the_matching_nodes_and_a_leaving_node_drains_before_its_pod_goes() {
    let env = TestEnv::on_nodes("pernode", &[&[], &[], &[], &[]]).await;
    env.grant_slurmops_role().await;
    env.grant_node_reader().await;
    let nodes = env.kubelet.nodes();
    let pool = env.suffix.clone();
    for n in &nodes[..3] {
        support::label_node(&env, n, POOL, Some(&pool)).await;
    }
    let set = env.name("pn");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), cluster_yaml(&env.ns, &set, &pool)).unwrap();
    applied(apply(dir.path(), "90s").output().unwrap());

    // Three labelled nodes: three workers, one on each, registered in Slurm.
    let three = idle_workers(&env, &set, 3).await;
    let hosts: Vec<&str> = three.values().map(|(_, h)| h.as_str()).collect();
    let mut sorted = hosts.clone();
    sorted.sort();
    assert_eq!(sorted, nodes[..3].iter().map(String::as_str).collect::<Vec<_>>());
    let names: Vec<&String> = three.keys().collect();
    assert_eq!(names, [&format!("{set}-0"), &format!("{set}-1"), &format!("{set}-2")]);

    // A fourth node joins the pool: a fourth worker, on it; the others are the same pods.
    support::label_node(&env, &nodes[3], POOL, Some(&pool)).await;
    applied(apply(dir.path(), "90s").output().unwrap());
    let four = idle_workers(&env, &set, 4).await;
    assert_eq!(four.get(&format!("{set}-3")).map(|(_, h)| h), Some(&nodes[3]));
    for (name, w) in &three {
        assert_eq!(four.get(name), Some(w), "{name} was replaced");
    }

    // A node leaves the pool while its worker runs a job: drained, the job completes, then the
    // pod goes and its Slurm node with it.
    let (leaver, _) = four
        .iter()
        .find(|(_, (_, h))| *h == nodes[1])
        .map(|(n, w)| (n.clone(), w.clone()))
        .unwrap();
    let job = submit_sleep(&leaver, 12).await;
    eventually("job running", Duration::from_secs(30), async || {
        (job_state(job).await == vec!["RUNNING".to_string()]).then_some(())
    })
    .await;
    support::label_node(&env, &nodes[1], POOL, None).await;
    let mut run = apply(dir.path(), "120s").spawn().unwrap();
    let s = slurm();
    eventually("the leaving worker drains", Duration::from_secs(30), async || {
        let n = s.get(&leaver).await.ok()?;
        (n.state.has("DRAIN") && n.reason == "slurmops: node left").then_some(())
    })
    .await;
    assert!(
        workers(&env, &set).await.contains_key(&leaver),
        "the pod went while its job ran"
    );
    assert_eq!(job_state(job).await, vec!["RUNNING".to_string()]);
    let status = tokio::task::spawn_blocking(move || run.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "apply did not finish");
    assert_eq!(job_state(job).await, vec!["COMPLETED".to_string()]);
    let after = workers(&env, &set).await;
    assert!(!after.contains_key(&leaver), "the leaving worker stayed");
    eventually("its Slurm node gone", Duration::from_secs(30), async || {
        s.get(&leaver).await.is_err().then_some(())
    })
    .await;
    // The other workers were never touched: same pods, idle, not drained.
    let rest = idle_workers(&env, &set, 3).await;
    for (name, w) in &rest {
        assert_eq!(four.get(name), Some(w), "{name} was replaced");
    }
    env.cleanup().await;
}
}

/// The daemon's node watch keeps, of each Kubernetes node's labels, only those its passes read
/// (a GPU node's hundred node-feature-discovery labels were 85% of the watch's memory); a pass
/// that reads another label is told the nodes are being listed again, never handed a node
/// without that label, and then reads it.
#[tokio::test(flavor = "multi_thread")]
async fn the_node_watch_keeps_the_labels_passes_read_and_lists_again_for_a_new_one() {
    use slurmops::controller::watch::{Cache, Held, LabelKeys, Scope};
    let client = support::client(&support::bed().kubeconfig_admin).await;
    let name = format!("labels-{}", support::unique_suffix());
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {POOL: "gpu", "zone": "b",
            "feature.node.kubernetes.io/cpu-cpuid.AVX512F": "true"}},
    }))
    .unwrap();
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone());
    nodes
        .create(&kube::api::PostParams::default(), &node)
        .await
        .unwrap();
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    let mut cache = Cache::start(&client, Scope::cluster("default", &name), wake);
    let pool = LabelKeys::from([POOL.to_string()]);
    cache.follow_nodes(&client, &pool);
    let labels_of = |held: Held<Vec<std::sync::Arc<k8s_openapi::api::core::v1::Node>>>| {
        let listed = held.ready()?;
        let n = listed
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(&name))?;
        Some(n.metadata.labels.clone().unwrap_or_default())
    };
    let kept = eventually(
        "the node watch listed",
        Duration::from_secs(30),
        async || labels_of(Cache::nodes(Some(&cache), &pool)),
    )
    .await;
    assert_eq!(
        kept,
        BTreeMap::from([(POOL.to_string(), "gpu".to_string())]),
        "only the label a pass reads is kept"
    );
    // A pass that reads "zone" too: the nodes are listed again, and until then not handed out.
    let both = LabelKeys::from([POOL.to_string(), "zone".to_string()]);
    assert!(Cache::nodes(Some(&cache), &both).listing());
    let kept = eventually(
        "the node watch listed again",
        Duration::from_secs(30),
        async || labels_of(Cache::nodes(Some(&cache), &both)),
    )
    .await;
    assert_eq!(kept.get("zone").map(String::as_str), Some("b"));
    assert_eq!(kept.len(), 2, "{kept:?}");
    let _ = nodes.delete(&name, &Default::default()).await;
}
