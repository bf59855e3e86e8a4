use super::*;
use crate::controller::decide::Worker;
use crate::slurm::{Node, NodeState};

/// NodeSet "gpu" (revision r2) with workers gpu-0 and gpu-1 on REVS, Slurm states STATES.
fn case(
    revs: [&str; 2],
    states: [Option<&[&str]>; 2],
) -> (BTreeMap<String, SetView>, BTreeMap<String, Node>) {
    let workers = (0..2)
        .map(|i| Worker {
            name: format!("gpu-{i}"),
            uid: format!("u{i}"),
            ordinal: Some(i as u32),
            revision: revs[i].into(),
            ready: true,
            deleting: false,
            created: Some(0),
            host: None,
            checks: Default::default(),
        })
        .collect();
    let set = SetView {
        name: "gpu".into(),
        replicas: 2,
        update_revision: Some("r2".into()),
        managed: false,
        canary: None,
        current_revision: None,
        workers,
    };
    let nodes = states
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let name = format!("gpu-{i}");
            let state = NodeState(s.as_ref()?.iter().map(|x| x.to_string()).collect());
            Some((
                name.clone(),
                Node {
                    name,
                    state,
                    ..Node::default()
                },
            ))
        })
        .collect();
    (BTreeMap::from([("gpu".to_string(), set)]), nodes)
}

fn needs(wanted: Option<Option<u32>>, jobs: JobsNeed) -> Needs {
    Needs {
        jobs,
        wanted: wanted.map(|w| ("gpu".to_string(), w)).into_iter().collect(),
        ..Needs::default()
    }
}

#[test]
fn the_job_queue_is_read_only_when_a_busy_worker_may_move() {
    let idle: Option<&[&str]> = Some(&["IDLE"]);
    let busy: Option<&[&str]> = Some(&["ALLOCATED"]);
    let draining: Option<&[&str]> = Some(&["MIXED", "DRAIN"]);
    let two = Some(Some(2));
    #[rustfmt::skip]
    type Row<'a> = (&'a str, [&'a str; 2], [Option<&'a [&'a str]>; 2], Option<Option<u32>>, JobsNeed, bool);
    let table: Vec<Row> = vec![
        (
            "settled and idle",
            ["r2", "r2"],
            [idle, idle],
            two,
            JobsNeed::WhenMoving,
            false,
        ),
        (
            "settled with a job running",
            ["r2", "r2"],
            [busy, busy],
            two,
            JobsNeed::WhenMoving,
            false,
        ),
        (
            "outdated but idle",
            ["r1", "r1"],
            [idle, idle],
            two,
            JobsNeed::WhenMoving,
            false,
        ),
        (
            "outdated and busy",
            ["r2", "r1"],
            [idle, busy],
            two,
            JobsNeed::WhenMoving,
            true,
        ),
        (
            "outdated and unknown to Slurm",
            ["r1", "r2"],
            [None, idle],
            two,
            JobsNeed::WhenMoving,
            true,
        ),
        (
            "draining for someone",
            ["r2", "r2"],
            [draining, idle],
            two,
            JobsNeed::WhenMoving,
            true,
        ),
        (
            "scale-in of a busy worker",
            ["r2", "r2"],
            [idle, busy],
            Some(Some(1)),
            JobsNeed::WhenMoving,
            true,
        ),
        (
            "scale-in of an idle worker",
            ["r2", "r2"],
            [busy, idle],
            Some(Some(1)),
            JobsNeed::WhenMoving,
            false,
        ),
        (
            "NodeSet removed, busy",
            ["r2", "r2"],
            [busy, idle],
            None,
            JobsNeed::WhenMoving,
            true,
        ),
        (
            "autoscale or canary",
            ["r2", "r2"],
            [idle, idle],
            two,
            JobsNeed::Always,
            true,
        ),
    ];
    for (what, revs, states, wanted, jobs, read) in table {
        let (sets, nodes) = case(revs, states);
        assert_eq!(
            jobs_needed(&needs(wanted, jobs), &sets, &nodes),
            read,
            "{what}"
        );
    }
}

#[test]
fn a_pass_reads_the_block_label_and_the_label_keys_of_each_live_templates_placement() {
    let template: PodTemplate = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "pn"},
        "template": {"spec": {"containers": [],
            "nodeSelector": {"pool": "gpu"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["b"]}],
                    "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["k0"]}]}]}}}}},
    }))
    .unwrap();
    let needs = Needs {
        blocks: vec![("example.com/block".into(), BTreeSet::new())],
        ..Needs::default()
    };
    let keys = label_keys(&needs, &BTreeMap::from([("pn".to_string(), template)]));
    assert_eq!(
        keys.iter().map(String::as_str).collect::<Vec<_>>(),
        ["example.com/block", "pool", "zone"]
    );
    // cluster.yaml's own: what the watch keeps from its start.
    let c = crate::cluster::load(
        "c.yaml",
        r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {name: c, namespace: slurm}
spec:
  slurmVersion: "24.11"
  auth:
    slurmKey: {name: k, key: slurm.key}
    jwtKey: {name: j, key: jwt_hs256.key}
  nodeSets:
    - {name: a, replicas: perNode, cpu: "1", memory: 1Gi, nodeSelector: {pool: gpu}}
  partitions:
    - {name: p, nodeSets: [a], default: true}
"#,
    )
    .unwrap();
    assert_eq!(node_label_keys(&c), LabelKeys::from(["pool".to_string()]));
}
