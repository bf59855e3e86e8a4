//! Worker sync and autoscale decided on the pass's observation: table tests of `decide` and of
//! what `plan --cluster` shows of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::controller::decide::tests::NOW;
use crate::controller::decide::{self, SetView, SlurmView, Worker};
use crate::slurm::{Job, Node};
use crate::vocab::DrainReason;

fn cluster(extra: &str) -> ClusterFile {
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
    - {{name: a, replicas: 1, cpu: "1", memory: 1Gi{extra}}}
  partitions:
    - {{name: p, nodeSets: [a], default: true}}
"#
        ),
    )
    .unwrap()
}

fn autoscaled() -> ClusterFile {
    cluster(", autoscale: {min: 1, max: 4, scaleDownDelay: 60s}")
}

/// A Slurm node with state FLAGS and drain REASON, busy last at LAST_BUSY.
fn node(name: &str, flags: &[&str], reason: &str, last_busy: Option<i64>) -> Node {
    Node {
        last_busy,
        ..decide::tests::node(name, flags, reason)
    }
}

/// Worker a-I, Ready since READY_SINCE (UNIX seconds; None: not Ready), on Kubernetes node kI.
fn pod(i: u32, ready_since: Option<i64>) -> Arc<Pod> {
    let conditions: Vec<serde_json::Value> = ready_since
        .map(|t| {
            let at = k8s_openapi::jiff::Timestamp::from_second(t).unwrap();
            json!({"type": "Ready", "status": "True", "lastTransitionTime": at.to_string()})
        })
        .into_iter()
        .collect();
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": format!("a-{i}"), "uid": format!("u{i}"),
                         "labels": {crate::vocab::LABEL_NODESET: "a"}},
            "spec": {"nodeName": format!("k{i}"), "containers": []},
            "status": {"conditions": conditions},
        }))
        .unwrap(),
    )
}

/// NodeSet a with REPLICAS workers (all Ready), Slurm's NODES and JOBS, and the Kubernetes
/// nodes' problems.
fn observed(
    replicas: u32,
    nodes: Vec<Node>,
    jobs: Vec<Job>,
    problems: &[(&str, &str)],
) -> Observation {
    let workers = (0..replicas)
        .map(|i| Worker {
            name: format!("a-{i}"),
            uid: format!("u{i}"),
            ordinal: Some(i),
            revision: "r".into(),
            ready: true,
            deleting: false,
            created: Some(NOW - 3600),
            host: Some(format!("k{i}")),
            checks: Default::default(),
        })
        .collect();
    let sets = BTreeMap::from([(
        "a".to_string(),
        SetView {
            name: "a".into(),
            replicas,
            update_revision: Some("r".into()),
            workers,
            managed: false,
            canary: None,
            current_revision: Some("r".into()),
        },
    )]);
    let mut obs = Observation::of_sets(sets, Ok(SlurmView::new(nodes, jobs)), NOW);
    obs.pods = (0..replicas).map(|i| pod(i, Some(NOW - 3600))).collect();
    obs.health = Ok(problems
        .iter()
        .map(|(n, r)| (n.to_string(), DrainReason::ours(r)))
        .collect());
    obs
}

fn pending(id: u64) -> Job {
    Job {
        id,
        name: "j".into(),
        state: "PENDING".into(),
        partition: "p".into(),
        state_reason: "Resources".into(),
        node_count: 1,
        ..Default::default()
    }
}

fn shown(u: &Upkeep) -> Vec<String> {
    steps(u)
        .iter()
        .map(|s| format!("{} {}: {}", s.action, s.target, s.detail))
        .collect()
}

const AUTOSCALE: Keep = Keep {
    sync: false,
    autoscale: true,
};
const SYNC: Keep = Keep {
    sync: true,
    autoscale: false,
};

#[test]
fn the_queue_scales_out_and_the_plan_says_so_and_a_hold_says_nothing() {
    let c = autoscaled();
    let busy = vec![node("a-0", &["ALLOCATED"], "", None)];
    let u = decide(
        &c,
        &observed(1, busy.clone(), vec![pending(1), pending(2)], &[]),
        300,
        AUTOSCALE,
    );
    assert_eq!(u.scale.len(), 1);
    assert_eq!(u.scale[0].to, Some(3));
    assert_eq!(
        shown(&u),
        ["scale a: autoscale: 1 -> 3 workers: pending jobs ask for 2 worker(s), 1 worker(s) busy"]
    );
    // Nothing pending, the one worker busy: a hold, nothing to write or show.
    let u = decide(&c, &observed(1, busy, vec![], &[]), 300, AUTOSCALE);
    assert!(u.is_empty() && shown(&u).is_empty(), "{u:?}");
}

#[test]
fn a_scale_in_drains_in_one_pass_and_lowers_the_replicas_in_a_later_one() {
    let c = autoscaled();
    let idle = |n: &str| node(n, &["IDLE"], "", Some(NOW - 600));
    // Three idle past the delay, min 1: a-2 and a-1 leave. First pass: drain them, keep 3.
    let first = observed(3, vec![idle("a-0"), idle("a-1"), idle("a-2")], vec![], &[]);
    let u = decide(&c, &first, 300, AUTOSCALE);
    assert_eq!(u.scale[0].drain, ["a-1", "a-2"]);
    assert_eq!(u.scale[0].to, None, "lowered before Slurm drained them");
    assert_eq!(
        shown(&u),
        [
            "drain a-1: autoscale: leaving, idle for 60s, no pending jobs",
            "drain a-2: autoscale: leaving, idle for 60s, no pending jobs",
            "scale a: autoscale: 3 -> 1 workers once drained: idle for 60s, no pending jobs",
        ]
    );
    // A later pass: a-2 drained, a job reached a-1 meanwhile (draining with it): 3 -> 2, a-1
    // given back.
    let ours = "slurmops: autoscale";
    let later = observed(
        3,
        vec![
            idle("a-0"),
            node("a-1", &["ALLOCATED", "DRAIN"], ours, None),
            node("a-2", &["IDLE", "DRAIN"], ours, None),
        ],
        vec![],
        &[],
    );
    let u = decide(&c, &later, 300, AUTOSCALE);
    let s = &u.scale[0];
    assert_eq!((s.to, s.drain.clone()), (Some(2), vec![]), "{s:?}");
    assert_eq!(
        s.resume,
        ["a-1"],
        "a busy worker is given back, not removed"
    );
}

#[test]
fn a_worker_drained_for_a_scale_in_is_given_back_when_the_queue_wants_it_again() {
    let c = autoscaled();
    let ours = "slurmops: autoscale";
    let obs = observed(
        2,
        vec![
            node("a-0", &["ALLOCATED"], "", None),
            node("a-1", &["IDLE", "DRAIN"], ours, None),
        ],
        vec![pending(7)],
        &[],
    );
    let u = decide(&c, &obs, 300, AUTOSCALE);
    assert_eq!(u.scale[0].resume, ["a-1"]);
    assert_eq!(u.scale[0].to, None);
    // Someone else's drain is theirs: never resumed.
    let theirs = observed(
        2,
        vec![
            node("a-0", &["ALLOCATED"], "", None),
            node("a-1", &["IDLE", "DRAIN"], "admin: bad DIMM", None),
        ],
        vec![pending(7)],
        &[],
    );
    assert!(
        decide(&c, &theirs, 300, AUTOSCALE).scale[0]
            .resume
            .is_empty()
    );
}

#[test]
fn sync_drains_for_a_cordon_and_replaces_a_worker_ready_past_the_grace_unknown_to_slurm() {
    let c = cluster("");
    let mut obs = observed(
        2,
        vec![node("a-0", &["IDLE"], "", None)],
        vec![],
        &[("k0", "node k0 cordoned")],
    );
    let u = decide(&c, &obs, 300, SYNC);
    let plan = shown(&u);
    assert!(
        plan.contains(&"drain a-0: sync: node k0 cordoned".to_string()),
        "{plan:?}"
    );
    assert!(
        plan.contains(&"delete a-1: sync: Ready but never registered in Slurm: replaced".into()),
        "{plan:?}"
    );
    // Ready for less than the grace: not yet; not Ready: never (slurmd is not up).
    obs.pods[1] = pod(1, Some(NOW - 60));
    assert!(
        !shown(&decide(&c, &obs, 300, SYNC))
            .iter()
            .any(|s| s.starts_with("delete"))
    );
    obs.pods[1] = pod(1, None);
    assert!(
        !shown(&decide(&c, &obs, 300, SYNC))
            .iter()
            .any(|s| s.starts_with("delete"))
    );
    // The Kubernetes nodes unreadable: no drain and no resume for node health.
    obs.health = Err("forbidden".into());
    assert!(
        !shown(&decide(&c, &obs, 300, SYNC))
            .iter()
            .any(|s| s.starts_with("drain"))
    );
}

#[test]
fn nothing_is_decided_while_slurm_is_unknown_and_nothing_scales_without_the_queue() {
    let c = autoscaled();
    let mut obs = observed(
        1,
        vec![node("a-0", &["ALLOCATED"], "", None)],
        vec![pending(1)],
        &[("k0", "node k0 cordoned")],
    );
    obs.slurm = Err(crate::controller::SlurmUnknown::NotConfigured);
    assert_eq!(decide(&c, &obs, 300, Keep::default()), Upkeep::default());
    let mut view = SlurmView::new(vec![node("a-0", &["ALLOCATED"], "", None)], vec![]);
    view.jobs_error = Some("the queue is too large".into());
    obs.slurm = Ok(view);
    let u = decide(&c, &obs, 300, Keep::default());
    assert!(u.scale.is_empty(), "{u:?}");
    assert!(!u.sync.is_empty(), "sync goes on from node states");
}

#[test]
fn a_queue_read_in_part_scales_out_for_the_pending_jobs_read_and_never_in() {
    let c = autoscaled();
    let partial = |nodes: Vec<Node>, jobs: Vec<Job>, pending_unread: usize| {
        let view = SlurmView::partial(
            Arc::new(nodes.into_iter().map(|n| (n.name.clone(), n)).collect()),
            crate::slurm::Known {
                jobs: jobs.into_iter().map(Arc::new).collect(),
                cover: crate::slurm::Cover {
                    jobs: 50_000,
                    unread: 40_000,
                    pending_unread,
                    limit: None,
                    listing: false,
                },
            },
        );
        assert!(view.jobs_error.is_some(), "canary and check verdicts wait");
        view
    };
    // The pending jobs read ask for two workers: a scale-out, though 39,000 pending are unread.
    let mut obs = observed(1, vec![], vec![], &[]);
    let busy = vec![node("a-0", &["ALLOCATED"], "", None)];
    obs.slurm = Ok(partial(busy, vec![pending(1), pending(2)], 39_000));
    let u = decide(&c, &obs, 300, AUTOSCALE);
    assert_eq!(u.scale[0].to, Some(3), "{u:?}");
    // Idle workers past the delay and nothing pending read: no scale-in while pending jobs are
    // left unread (they may ask for these workers) ...
    let idle = |n: &str| node(n, &["IDLE"], "", Some(NOW - 600));
    let mut obs = observed(3, vec![], vec![], &[]);
    let nodes = vec![idle("a-0"), idle("a-1"), idle("a-2")];
    obs.slurm = Ok(partial(nodes.clone(), vec![], 39_000));
    let u = decide(&c, &obs, 300, AUTOSCALE);
    assert!(
        u.scale[0].drain.is_empty() && u.scale[0].to.is_none(),
        "{u:?}"
    );
    assert!(
        matches!(&u.scale[0].decision, Decision::Hold { why } if why.contains("39000 pending job(s) not read yet")),
        "{u:?}"
    );
    // ... and once every pending job is read (other jobs still unread), it goes on.
    obs.slurm = Ok(partial(nodes, vec![], 0));
    let u = decide(&c, &obs, 300, AUTOSCALE);
    assert_eq!(u.scale[0].drain, ["a-1", "a-2"], "{u:?}");
}
