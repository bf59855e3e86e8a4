use std::collections::BTreeMap;

use super::super::tests::{check_job, passed, run, sets, steps, worker};
use super::super::{assess, job_name};
use crate::controller::decide::SlurmView;
use crate::controller::decide::tests::{NOW, node};
use crate::controller::mark::Mark;

/// A pair check every 10 minutes (NOW is 1,000,000: the last tick is at 999,600).
const PAIR: &str = "{name: c, script: 'true', span: pair, onRegister: false, schedule: '*/10 * * * *', maxConcurrent: 2, nodeSets: [gpu]}";

fn idle(n: u32) -> Vec<crate::slurm::Node> {
    (0..n)
        .map(|i| node(&format!("gpu-{i}"), &["IDLE"], ""))
        .collect()
}

fn checked_before_the_tick(n: u32) -> Vec<crate::controller::decide::Worker> {
    (0..n)
        .map(|i| worker(i, &[("c", passed(999_000))]))
        .collect()
}

#[test]
fn pairs_of_idle_workers_are_checked_together_one_job_each_under_the_cap() {
    // Pairs by ordinal, the odd last worker in the last pair; 2 jobs at once.
    let c = run(
        PAIR.replace("maxConcurrent: 2", "maxConcurrent: 1")
            .as_str(),
        checked_before_the_tick(5),
        idle(5),
        vec![],
        &[],
    );
    assert_eq!(steps(&c), ["submit gpu-0,gpu-1"]);
    assert_eq!(
        (c.summary["gpu"][0].running, c.summary["gpu"][0].waiting),
        (2, 3)
    );
    let c = run(PAIR, checked_before_the_tick(5), idle(5), vec![], &[]);
    assert_eq!(
        steps(&c),
        ["submit gpu-0,gpu-1", "submit gpu-2,gpu-3,gpu-4"]
    );
    let names: Vec<String> = c.actions["gpu"]
        .iter()
        .filter_map(|a| match a {
            crate::controller::decide::Action::CheckSubmit { job } => Some(job.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        [
            job_name("c", "@gpu-0", 999_600),
            job_name("c", "@gpu-2", 999_600)
        ]
    );
    let s = &c.summary["gpu"][0];
    assert_eq!((s.running, s.waiting), (5, 0));
    assert!(
        c.busy.is_empty(),
        "a scheduled run keeps no command waiting"
    );

    // A user's job on gpu-1: its pair waits, the others run.
    let mut nodes = idle(5);
    nodes[1] = node("gpu-1", &["ALLOCATED"], "");
    let c = run(PAIR, checked_before_the_tick(5), nodes, vec![], &[]);
    assert_eq!(steps(&c), ["submit gpu-2,gpu-3,gpu-4"]);
    // A single worker has no pair.
    let c = run(PAIR, checked_before_the_tick(1), idle(1), vec![], &[]);
    assert!(steps(&c).is_empty());
}

#[test]
fn a_failed_pair_drains_both_workers_and_its_next_run_resumes_them() {
    let mut bad = check_job(7, "@gpu-0", 999_600, "FAILED");
    bad.nodes = vec!["gpu-0".into(), "gpu-1".into()];
    bad.exit_code = Some(1);
    bad.comment =
        "slurmops-check rc=1; value: 90; error: figure 90 Gb/s below 350 Gb/s; tail: ".into();
    let c = run(PAIR, checked_before_the_tick(2), idle(2), vec![bad], &[]);
    let reason = "check c failed: job 7: figure 90 Gb/s below 350 Gb/s";
    assert_eq!(
        steps(&c),
        [
            format!("hold gpu-0: {reason}"),
            "mark gpu-0 job=7 value=90 : figure 90 Gb/s below 350 Gb/s".into(),
            format!("hold gpu-1: {reason}"),
            "mark gpu-1 job=7 value=90 : figure 90 Gb/s below 350 Gb/s".into(),
        ]
    );
    assert_eq!(c.summary["gpu"][0].failed, 2);

    // Both drained for it: they stay out until the next tick, then the pair runs again and
    // both are resumed for it (the job, first in line, starts before any user's job).
    let failed = Mark {
        passed: false,
        at: 999_000,
        job: Some(7),
        value: Some(90.0),
        text: "figure 90 Gb/s below 350 Gb/s".into(),
    };
    let drained = |i: u32| {
        node(
            &format!("gpu-{i}"),
            &["IDLE", "DRAIN"],
            &format!("slurmops: {reason}"),
        )
    };
    let workers = || {
        (0..2)
            .map(|i| worker(i, &[("c", failed.clone())]))
            .collect()
    };
    let c = run(PAIR, workers(), vec![drained(0), drained(1)], vec![], &[]);
    assert_eq!(
        steps(&c),
        ["submit gpu-0,gpu-1", "resume gpu-0", "resume gpu-1"]
    );
    // Before the next tick nothing resumes them.
    let mut recent = failed.clone();
    recent.at = 999_700;
    let held = (0..2)
        .map(|i| worker(i, &[("c", recent.clone())]))
        .collect();
    let c = run(PAIR, held, vec![drained(0), drained(1)], vec![], &[]);
    assert!(steps(&c).is_empty(), "{:?}", steps(&c));
    assert_eq!(c.summary["gpu"][0].failures.len(), 2);
    // A member someone else drained: the pair waits, and the other is not resumed alone.
    let mut nodes = vec![
        drained(0),
        node("gpu-1", &["IDLE", "DRAIN"], "bad fan, bob"),
    ];
    nodes[0].reason = format!("slurmops: {reason}");
    let c = run(PAIR, workers(), nodes, vec![], &[]);
    assert!(steps(&c).is_empty(), "{:?}", steps(&c));
}

#[test]
fn a_pair_job_past_its_timeout_is_cancelled_and_fails_both_and_a_stuck_one_frees_the_cap() {
    let mut hung = check_job(7, "@gpu-0", 999_600, "RUNNING");
    hung.nodes = vec!["gpu-0".into(), "gpu-1".into()];
    hung.start_time = Some(NOW - 700);
    let c = run(PAIR, checked_before_the_tick(2), idle(2), vec![hung], &[]);
    assert_eq!(
        steps(&c),
        [
            // Both drained before the cancel frees them: no user's job starts there between.
            "hold gpu-0: check c failed: job 7: ran past its timeout 10m, cancelled",
            "hold gpu-1: check c failed: job 7: ran past its timeout 10m, cancelled",
            "cancel 7",
            "mark gpu-0 job=7 : ran past its timeout 10m, cancelled",
            "mark gpu-1 job=7 : ran past its timeout 10m, cancelled",
        ]
    );
    // Pending on a worker an operator drained since: cancelled (it would hold the cap).
    let mut stuck = check_job(8, "@gpu-0", 999_600, "PENDING");
    stuck.nodes = vec![];
    let nodes = vec![
        node("gpu-0", &["IDLE"], ""),
        node("gpu-1", &["IDLE", "DRAIN"], "bad fan, bob"),
    ];
    let c = run(PAIR, checked_before_the_tick(2), nodes, vec![stuck], &[]);
    assert_eq!(steps(&c), ["cancel 8"]);
}

#[test]
fn a_block_check_runs_one_job_across_the_workers_of_each_block() {
    let yaml = r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {name: c, namespace: slurm}
spec:
  slurmVersion: "26.05"
  auth:
    slurmKey: {name: k, key: k}
    jwtKey: {name: j, key: j}
  policy:
    activeChecks:
      - {name: c, builtin: nccl, span: block, onRegister: false, schedule: '*/10 * * * *', maxConcurrent: 4, minValue: 350}
  nodeSets:
    - {name: gpu, replicas: 5, gpus: {count: 4, type: h100}}
  partitions:
    - {name: p, nodeSets: [gpu]}
  topology:
    block: {nodeLabel: clique, blocks: [a, b], nodeSets: [gpu], blockSize: 4}
"#;
    let spec = crate::cluster::load("cluster.yaml", yaml)
        .expect("valid")
        .spec;
    let mut workers = checked_before_the_tick(5);
    for (i, w) in workers.iter_mut().enumerate() {
        w.host = Some(format!("host-{i}"));
    }
    // host-4 carries no block label: its worker is in no block, so no block check runs on it.
    let blocks: BTreeMap<String, String> = [
        ("host-0", "a"),
        ("host-1", "b"),
        ("host-2", "a"),
        ("host-3", "b"),
    ]
    .into_iter()
    .map(|(h, b)| (h.to_string(), b.to_string()))
    .collect();
    // Each worker's slurmd registered and slurmops placed it in its block (host-4's in none).
    let placed = |nodes: &mut Vec<crate::slurm::Node>| {
        for n in nodes.iter_mut() {
            let host = format!("host-{}", &n.name["gpu-".len()..]);
            if let Some(b) = blocks.get(&host) {
                n.topology = format!("nvlink:{b}");
            }
        }
    };
    let mut nodes = idle(5);
    placed(&mut nodes);
    let run = |workers: Vec<crate::controller::decide::Worker>, nodes| {
        assess(
            &spec,
            &sets(workers),
            &SlurmView::new(nodes, vec![]),
            &blocks,
            &Default::default(),
            NOW,
        )
    };
    let c = run(workers.clone(), nodes.clone());
    assert_eq!(steps(&c), ["submit gpu-0,gpu-2", "submit gpu-1,gpu-3"]);
    // A block not whole yet waits (seen in CI: a job over the one worker registered first):
    // gpu-2 not placed in block a yet, gpu-3 not registered at all.
    let mut partial = nodes.clone();
    partial[2].topology.clear();
    partial.remove(3);
    let c = run(workers.clone(), partial);
    assert_eq!(steps(&c), Vec::<String>::new());
    let s = &c.summary["gpu"][0];
    assert_eq!((s.waiting, s.running), (3, 0), "{s:?}");
    let c = run(workers, nodes);
    let script = c.actions["gpu"].iter().find_map(|a| match a {
        crate::controller::decide::Action::CheckSubmit { job } => Some(job.script.clone()),
        _ => None,
    });
    // One rank per GPU on each node of the block.
    assert!(
        script
            .unwrap()
            .contains("srun --mpi=pmix --ntasks-per-node=4 all_reduce_perf -b 8M -e 1G -f 2 -g 1"),
    );
}

#[test]
fn a_worker_held_for_its_own_checks_after_a_group_failed_is_drained_for_the_group_not_resumed() {
    // gpu-0 failed its pair, then its node's problem cleared: held `checks pending` (since
    // NOW - 100). Its own check (on register) passed since: it is drained for the pair again,
    // so the pair's next run takes it, and it is not resumed before.
    let both = "{name: own, script: 'true', nodeSets: [gpu]}\n      - {name: c, script: 'true', span: pair, onRegister: false, schedule: '*/10 * * * *', nodeSets: [gpu]}";
    let failed = Mark {
        passed: false,
        at: 999_700,
        job: Some(7),
        value: None,
        text: "link down".into(),
    };
    let w0 = worker(0, &[("c", failed.clone()), ("own", passed(NOW - 50))]);
    let w1 = worker(1, &[("c", failed), ("own", passed(999_000))]);
    let nodes = vec![
        node("gpu-0", &["IDLE", "DRAIN"], "slurmops: checks pending"),
        node(
            "gpu-1",
            &["IDLE", "DRAIN"],
            "slurmops: check c failed: job 7: link down",
        ),
    ];
    let c = run(both, vec![w0, w1], nodes, vec![], &[]);
    assert_eq!(steps(&c), ["hold gpu-0: check c failed: job 7: link down"]);
}
