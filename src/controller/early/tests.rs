//! The early pass's decisions: scale-out from the StatefulSets and Slurm alone, never anything
//! else, whatever Slurm says of the workers.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use serde_json::json;

use super::*;
use crate::controller::decide::tests::NOW;
use crate::controller::decide::{self, SlurmView};
use crate::slurm::{Job, Node};

fn cluster(a: &str) -> ClusterFile {
    crate::cluster::load(
        "c.yaml",
        &format!(
            r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {{name: c, namespace: slurm}}
spec:
  slurmVersion: "24.11"
  auth:
    slurmKey: {{name: k, key: slurm.key}}
    jwtKey: {{name: j, key: jwt_hs256.key}}
  nodeSets:
    - {{name: a, replicas: 1, cpu: "1", memory: 1Gi{a}}}
  partitions:
    - {{name: p, nodeSets: [a], default: true}}
"#
        ),
    )
    .unwrap()
}

const AUTOSCALED: &str = ", autoscale: {min: 0, max: 8, scaleDownDelay: 60s}";

/// NodeSet a's StatefulSet at REPLICAS.
fn sts(replicas: u32) -> Vec<Arc<StatefulSet>> {
    vec![Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "a", "labels": {crate::vocab::LABEL_NODESET: "a"}},
            "spec": {"replicas": replicas, "selector": {}, "template": {}, "serviceName": "a"},
        }))
        .unwrap(),
    )]
}

fn node(name: &str, flags: &[&str], reason: &str) -> Node {
    Node {
        last_busy: Some(NOW - 3600),
        ..decide::tests::node(name, flags, reason)
    }
}

fn pending(id: u64, nodes: u32) -> Job {
    Job {
        id,
        name: "j".into(),
        state: "PENDING".into(),
        partition: "p".into(),
        state_reason: "Resources".into(),
        node_count: nodes,
        ..Default::default()
    }
}

fn to(u: &Upkeep) -> Vec<(String, u32, Option<u32>)> {
    u.scale
        .iter()
        .map(|s| (s.node_set.clone(), s.from, s.to))
        .collect()
}

#[test]
fn before_any_pod_is_known_pending_jobs_scale_out_over_the_workers_slurm_says_are_busy() {
    let c = cluster(AUTOSCALED);
    // Two workers, both running jobs (Slurm alone says so: no pod is known), one job pending for
    // two nodes: 2 busy + 2 asked = 4.
    let nodes = vec![node("a-0", &["ALLOCATED"], ""), node("a-1", &["MIXED"], "")];
    let view = SlurmView::new(nodes, vec![pending(7, 2)]);
    let u = decide(&c, &sts(2), &view, NOW);
    assert_eq!(to(&u), [("a".into(), 2, Some(4))]);
    assert!(u.sync.is_empty() && u.scale[0].drain.is_empty() && u.scale[0].resume.is_empty());
    // From 0 workers (a NodeSet scaled in to nothing): the pending job's two.
    let view = SlurmView::new(vec![], vec![pending(7, 2)]);
    assert_eq!(
        to(&decide(&c, &sts(0), &view, NOW)),
        [("a".into(), 0, Some(2))]
    );
}

#[test]
fn without_pods_nothing_but_a_scale_out_is_decided() {
    let c = cluster(AUTOSCALED);
    // Idle past the delay, nothing pending: the full pass would scale in; here nothing.
    let idle = vec![node("a-0", &["IDLE"], ""), node("a-1", &["IDLE"], "")];
    let u = decide(&c, &sts(2), &SlurmView::new(idle, vec![]), NOW);
    assert!(u.is_empty(), "{u:?}");
    // Workers drained for an earlier scale-in, a job pending that two busy workers cover:
    // the full pass would give them back or lower the replicas; here nothing.
    let ours = "slurmops: autoscale";
    let nodes = vec![
        node("a-0", &["ALLOCATED"], ""),
        node("a-1", &["ALLOCATED"], ""),
        node("a-2", &["IDLE", "DRAIN"], ours),
    ];
    let u = decide(
        &c,
        &sts(3),
        &SlurmView::new(nodes, vec![pending(1, 1)]),
        NOW,
    );
    assert!(u.is_empty(), "{u:?}");
}

#[test]
fn an_unknown_queue_or_a_nodeset_without_autoscale_scales_nothing() {
    let busy = vec![node("a-0", &["ALLOCATED"], "")];
    let view = SlurmView::without_jobs(
        Arc::new(busy.iter().map(|n| (n.name.clone(), n.clone())).collect()),
        "too slow".into(),
    );
    assert!(decide(&cluster(AUTOSCALED), &sts(1), &view, NOW).is_empty());
    let view = SlurmView::new(busy, vec![pending(1, 1)]);
    assert!(decide(&cluster(""), &sts(1), &view, NOW).is_empty());
    assert!(!applies(&cluster("")) && applies(&cluster(AUTOSCALED)));
}

/// At 10,000 workers the whole node list is 23 MB, which slurmrestd took 8 s to build while a
/// restarted daemon's watches listed the pods: the early pass reads only the autoscaled
/// NodeSets' workers, by name, while they are few.
#[test]
fn the_early_pass_reads_only_the_autoscaled_workers_by_name_while_they_are_few() {
    let names = |a: &str, r: u32| nodes_to_read(&cluster(a), &sts(r));
    assert_eq!(names(AUTOSCALED, 0), Some(vec![]));
    assert_eq!(
        names(AUTOSCALED, 3),
        Some(vec!["a-0".into(), "a-1".into(), "a-2".into()])
    );
    // A NodeSet without autoscale is not decided on: none of its nodes is read.
    assert_eq!(names("", 500), Some(vec![]));
    // Past the bound, one request for the whole list costs less than one per node.
    assert_eq!(
        names(AUTOSCALED, NODES_READ_BY_NAME as u32).map(|n| n.len()),
        Some(NODES_READ_BY_NAME)
    );
    assert_eq!(names(AUTOSCALED, NODES_READ_BY_NAME as u32 + 1), None);
}
