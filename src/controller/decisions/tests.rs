use super::*;
use crate::controller::decide::Worker;
use crate::controller::decide::tests::{NOW, node};

/// NodeSets `a` (window: required, a window twelve hours away) and `b` (2 replicas in git).
fn cluster() -> ClusterFile {
    cluster_with("")
}

/// As `cluster`, with EXTRA in A's update policy.
fn cluster_with(extra: &str) -> ClusterFile {
    let hour = (NOW / 3600 + 12) % 24;
    let yaml = format!(
        r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {{name: c, namespace: slurm}}
spec:
  slurmVersion: "24.11"
  auth:
    slurmKey: {{name: k, key: k}}
    jwtKey: {{name: j, key: j}}
  policy:
    maintenanceWindows:
      - {{schedule: "0 {hour} * * *", duration: 1h}}
  nodeSets:
    - {{name: a, replicas: 2, update: {{maxUnavailable: 2, window: required{extra}}}}}
    - {{name: b, replicas: 2}}
  partitions:
    - {{name: p, nodeSets: [ALL]}}
"#
    );
    crate::cluster::load("cluster.yaml", &yaml).expect("valid")
}

/// A's two workers are outdated; B runs three (git says two), all current; all idle.
fn observed() -> Observation {
    let worker = |set: &str, i: u32, rev: &str| Worker {
        name: format!("{set}-{i}"),
        uid: format!("u-{set}-{i}"),
        ordinal: Some(i),
        revision: rev.into(),
        ready: true,
        deleting: false,
        created: Some(NOW - 3600),
        host: None,
        checks: Default::default(),
    };
    let set = |name: &str, workers: Vec<Worker>| SetView {
        name: name.into(),
        replicas: workers.len() as u32,
        update_revision: Some("new".into()),
        managed: false,
        canary: None,
        current_revision: None,
        workers,
    };
    let sets = BTreeMap::from([
        (
            "a".to_string(),
            set("a", (0..2).map(|i| worker("a", i, "old")).collect()),
        ),
        (
            "b".to_string(),
            set("b", (0..3).map(|i| worker("b", i, "new")).collect()),
        ),
    ]);
    let nodes = ["a-0", "a-1", "b-0", "b-1", "b-2"]
        .iter()
        .map(|n| node(n, &["IDLE"], ""))
        .collect();
    Observation::of_sets(sets, Ok(SlurmView::new(nodes, Vec::new())), NOW)
}

fn drains(d: &BTreeMap<String, Decision>) -> Vec<String> {
    d.values()
        .flat_map(|d| &d.actions)
        .filter_map(|a| match a {
            Action::Drain { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn what_each_command_moves_comes_from_its_scope_over_one_decision() {
    let (c, obs) = (cluster(), observed());
    let roll = |only: Option<&[&str]>, ignore_window| Scope {
        only: only.map(|o| o.iter().map(|s| s.to_string()).collect()),
        moves: Moves::Roll,
        ignore_window,
        ..Scope::default()
    };
    let cases: Vec<(&str, Scope, Vec<&str>)> = vec![
        // The daemon: A waits for its window; B's third worker leaves for the scale-in.
        ("daemon", Scope::default(), vec!["b-2"]),
        // `apply --no-rollout`: only the leaving worker.
        (
            "apply --no-rollout",
            Scope {
                moves: Moves::Leaving,
                ..Scope::default()
            },
            vec!["b-2"],
        ),
        // `rollout`: A still waits for its window; B keeps its live replicas (apply's).
        ("rollout", roll(None, false), vec![]),
        // `rollout --ignore-window`: A rolls now.
        (
            "rollout --ignore-window",
            roll(None, true),
            vec!["a-0", "a-1"],
        ),
        // `rollout --node-set b`: A is not looked at.
        ("rollout --node-set b", roll(Some(&["b"]), true), vec![]),
    ];
    for (what, scope, want) in cases {
        let d = decide_pass(&c, &obs, 300, &scope);
        assert_eq!(drains(&d), want, "{what}");
        if let Some(only) = &scope.only {
            assert!(d.keys().all(|k| only.contains(k)), "{what}: {:?}", d.keys());
        }
    }
    // A job queue that cannot be read (too large, too slow) blinds nothing the node states
    // tell: the same workers move.
    let (nodes, _) = obs.slurm.clone().unwrap().into_parts();
    let mut blind = observed();
    blind.slurm = Ok(SlurmView::without_jobs(nodes, "too large".into()));
    for (scope, want) in [
        (Scope::default(), vec!["b-2"]),
        (roll(None, true), vec!["a-0", "a-1"]),
    ] {
        assert_eq!(drains(&decide_pass(&c, &blind, 300, &scope)), want);
    }
    // A canary can be neither judged nor submitted without it: A holds, and says why.
    let canaried = cluster_with(", canary: {replicas: 1, validate: {builtin: hostname}}");
    assert!(canaried.spec.node_sets[0].update.canary.is_some());
    let d = decide_pass(&canaried, &blind, 300, &roll(None, true));
    assert!(d["a"].actions.is_empty(), "{:?}", d["a"].actions);
    let why = d["a"]
        .progress
        .canary
        .as_ref()
        .and_then(|p| p.error.clone());
    assert!(why.is_some_and(|w| w.contains("job queue is unknown")));
    let d = decide_pass(&canaried, &obs, 300, &roll(None, true));
    assert!(
        !d["a"].actions.is_empty(),
        "with the queue, the canary goes ahead"
    );

    // Outside its window, A's rollout says what it waits for.
    let d = decide_pass(&c, &obs, 300, &roll(None, false));
    let w = d["a"]
        .progress
        .window
        .as_ref()
        .expect("A waits for a window");
    assert_eq!(w.workers, ["a-0", "a-1"]);
    assert!(w.opens.is_some_and(|t| t > NOW));
}

/// 500 NodeSets of 20 workers (10,000), every one rolling: worker 0 already on the new
/// revision (the canary, up), the others busy with a job each; half the canaries' jobs are
/// in a queue of 50,000.
#[test]
fn a_pass_reads_each_job_a_bounded_number_of_times_at_ten_thousand_workers() {
    use crate::slurm::Job;
    let (sets_n, per_set, queued) = (500usize, 20u32, 50_000u64);
    let mut yaml = String::from(
        "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {name: c, namespace: slurm}\nspec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {name: k, key: k}\n    jwtKey: {name: j, key: j}\n  nodeSets:\n",
    );
    for s in 0..sets_n {
        yaml += &format!(
            "    - {{name: s{s}, replicas: {per_set}, update: {{maxUnavailable: 2, canary: {{replicas: 1, validate: {{builtin: hostname}}}}}}}}\n"
        );
    }
    yaml += "  partitions:\n    - {name: p, nodeSets: [ALL]}\n";
    let c = crate::cluster::load("cluster.yaml", &yaml).expect("valid");
    let (mut sets, mut nodes, mut jobs) = (BTreeMap::new(), Vec::new(), Vec::new());
    for s in 0..sets_n {
        let name = format!("s{s}");
        let workers: Vec<Worker> = (0..per_set)
            .map(|i| Worker {
                name: format!("{name}-{i}"),
                uid: format!("u-{name}-{i}"),
                ordinal: Some(i),
                revision: if i == 0 { "new" } else { "old" }.into(),
                ready: true,
                deleting: false,
                created: Some(NOW - 60),
                host: None,
                checks: Default::default(),
            })
            .collect();
        for w in &workers {
            let busy = w.revision == "old";
            nodes.push(node(
                &w.name,
                &[if busy { "ALLOCATED" } else { "IDLE" }],
                "",
            ));
            if busy {
                jobs.push(Job {
                    id: jobs.len() as u64 + 1,
                    name: "train".into(),
                    state: "RUNNING".into(),
                    nodes: vec![w.name.clone().into()],
                    end_time: Some(NOW + 3600),
                    ..Job::default()
                });
            }
        }
        if s % 2 == 0 {
            jobs.push(Job {
                id: jobs.len() as u64 + 1,
                name: crate::controller::features::canary::job_name(
                    &name,
                    "new",
                    &format!("{name}-0"),
                )
                .into(),
                state: "RUNNING".into(),
                nodes: vec![format!("{name}-0").into()],
                ..Job::default()
            });
        }
        let view = SetView {
            name: name.clone(),
            replicas: per_set,
            update_revision: Some("new".into()),
            managed: false,
            canary: None,
            current_revision: Some("old".into()),
            workers,
        };
        sets.insert(name, view);
    }
    while (jobs.len() as u64) < queued {
        jobs.push(Job {
            id: jobs.len() as u64 + 1,
            state: "PENDING".into(),
            partition: "p".into(),
            ..Job::default()
        });
    }
    let workers = sets_n * per_set as usize;
    let obs = Observation::of_sets(sets, Ok(SlurmView::new(nodes, jobs)), NOW);
    let d = decide_pass(&c, &obs, 300, &Scope::default());
    // The pass decided what it should: half the canaries validate, half are submitted.
    let submits = d
        .values()
        .flat_map(|d| &d.actions)
        .filter(|a| matches!(a, Action::Submit { .. }))
        .count();
    assert_eq!(submits, sets_n / 2);
    let view = obs.slurm.as_ref().unwrap();
    let handed = view.handed();
    // Each worker's jobs a few times, each canary's job once or twice: O(workers + jobs).
    // A scan of the queue per worker or per NodeSet would hand out millions.
    assert!(
        handed <= 4 * workers + queued as usize,
        "decide read {handed} job records for {workers} workers and {queued} jobs"
    );
}
