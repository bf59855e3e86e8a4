//! `/metrics` at scale: a pass's observation of a large cluster built in memory (Slurm's nodes in
//! several states and drain reasons, a job queue over the partitions, NodeSets with a share of
//! workers carrying an active check's result), set on the daemon's metrics as a pass sets them,
//! and encoded as a scrape encodes them. What is measured: the series and bytes of the text, and
//! the time of computing and encoding it.

use std::collections::BTreeMap;
use std::time::Instant;

use super::{Figure, best, fig, ms};
use crate::controller::decide::{Progress, SetView, SlurmView, Worker};
use crate::controller::features::checks::Mark;
use crate::daemon::metrics::Metrics;
use crate::slurm::words::Word;
use crate::slurm::{Job, Node, NodeState};
use crate::vocab::DrainReason;

/// A cluster's shape: its size and how its Slurm state is spread.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub nodes: usize,
    pub jobs: usize,
    pub partitions: usize,
    pub node_sets: usize,
    /// One worker in this many carries an active check's result.
    pub checked_every: usize,
}

/// The bench's cluster: 10,000 nodes, 50,000 jobs, 8 partitions, 100 NodeSets, 5% of the
/// workers with a check series.
pub const LARGE: Shape = Shape {
    nodes: 10_000,
    jobs: 50_000,
    partitions: 8,
    node_sets: 100,
    checked_every: 20,
};

/// Node I's state and drain reason: most busy, some idle, a few down, drained for one reason
/// or another (slurmops' and an administrator's), or not responding.
fn state(i: usize) -> (&'static [&'static str], String) {
    let check = DrainReason::CheckFailed {
        check: "nccl".into(),
        job: Some(7),
        error: "310 GB/s".into(),
    };
    let cordoned = DrainReason::Cordoned {
        node: "k8s-3".into(),
    };
    match i % 100 {
        0..=44 => (&["MIXED"], String::new()),
        45..=69 => (&["ALLOCATED"], String::new()),
        70..=89 => (&["IDLE"], String::new()),
        90 | 91 => (&["DOWN", "NOT_RESPONDING"], "Not responding".into()),
        92 => (&["IDLE", "DRAIN"], DrainReason::Rollout.to_string()),
        93 => (&["MIXED", "DRAIN"], DrainReason::Rollout.to_string()),
        94 => (&["IDLE", "DRAIN"], check.to_string()),
        95 => (&["IDLE", "DRAIN"], cordoned.to_string()),
        96 => (&["DOWN", "DRAIN"], "bad DIMM".into()),
        97 => (&["IDLE", "DRAIN", "REBOOT_REQUESTED"], "Reboot ASAP".into()),
        98 => (&["ALLOCATED", "COMPLETING"], String::new()),
        _ => (&["IDLE", "RESERVED"], String::new()),
    }
}

fn nodes(s: Shape) -> Vec<Node> {
    (0..s.nodes)
        .map(|i| {
            let (states, reason) = state(i);
            let busy = states.iter().any(|s| *s == "ALLOCATED" || *s == "MIXED");
            Node {
                name: format!("ns-{:03}-{i}", i % s.node_sets),
                state: NodeState(states.iter().map(|s| s.to_string()).collect()),
                reason,
                partitions: vec![format!("part-{}", i % s.partitions)],
                cpus: 128,
                alloc_cpus: if busy { 64 + (i % 64) as u32 } else { 0 },
                gpus: 8,
                alloc_gpus: if busy { (i % 9) as u32 } else { 0 },
                ..Node::default()
            }
        })
        .collect()
}

fn jobs(s: Shape) -> Vec<Job> {
    let states = ["RUNNING", "PENDING", "PENDING", "RUNNING", "PENDING"];
    (0..s.jobs)
        .map(|i| Job {
            id: i as u64 + 1,
            state: Word::new(states[i % states.len()]),
            partition: Word::new(&format!("part-{}", i % s.partitions)),
            user: Word::new(&format!("user-{}", i % 300)),
            cpus: 1 + (i % 64) as u32,
            gpus: (i % 9) as u32,
            node_count: 1,
            ..Job::default()
        })
        .collect()
}

/// The workers of S's NodeSets, one in `checked_every` with a check's result, and each
/// NodeSet's rollout progress.
fn sets(s: Shape) -> (BTreeMap<String, SetView>, Vec<Progress>) {
    let mut sets: BTreeMap<String, SetView> = BTreeMap::new();
    for i in 0..s.nodes {
        let set = format!("ns-{:03}", i % s.node_sets);
        let checks = (i % s.checked_every == 0).then(|| {
            let mark = Mark {
                passed: i % 7 != 0,
                at: 0,
                job: Some(i as u64),
                value: Some(380.0 + (i % 40) as f64),
                text: "passed".into(),
            };
            ("nccl".to_string(), mark)
        });
        let worker = Worker {
            name: format!("{set}-{i}"),
            uid: String::new(),
            ordinal: Some(i as u32),
            revision: String::new(),
            ready: true,
            deleting: false,
            created: None,
            host: None,
            checks: checks.into_iter().collect(),
        };
        sets.entry(set.clone())
            .or_insert_with(|| SetView {
                name: set,
                replicas: 0,
                update_revision: None,
                workers: vec![],
                managed: false,
                canary: None,
                current_revision: None,
            })
            .workers
            .push(worker);
    }
    let progress = sets
        .keys()
        .map(|name| Progress {
            node_set: name.clone(),
            ..Progress::default()
        })
        .collect();
    (sets, progress)
}

/// What a scrape serves after one pass over S: its text.
pub fn served(s: Shape) -> String {
    let (sets, progress) = sets(s);
    let mut view = SlurmView::new(nodes(s), jobs(s));
    view.jobs_read = true;
    let m = Metrics::for_cluster(Some("big"));
    m.progress(&progress);
    m.checks(&sets);
    m.slurm(Some(&view), true);
    m.slurmctld(Some(true));
    m.render()
}

/// Samples in TEXT (the lines that are not comments).
pub fn series(text: &str) -> usize {
    text.lines().filter(|l| !l.starts_with('#')).count()
}

/// The figures of [`LARGE`].
pub fn scrape() -> Vec<Figure> {
    let s = LARGE;
    let (sets, progress) = sets(s);
    let mut view = SlurmView::new(nodes(s), jobs(s));
    view.jobs_read = true;
    let m = Metrics::for_cluster(Some("big"));
    // A pass's part: the gauges set from its observation.
    let (set_took, _) = best(7, || {
        m.progress(&progress);
        m.checks(&sets);
        m.slurm(Some(&view), true);
        m.slurmctld(Some(true));
    });
    // A scrape's part: the text encoded.
    let (encode_took, text) = best(7, || m.render());
    let slurm_only = Metrics::default();
    slurm_only.slurm(Some(&view), true);
    let t = Instant::now();
    let counts = crate::daemon::slurm_metrics::of_view(&view);
    let count_took = t.elapsed();
    drop(counts);
    let all = series(&text);
    let slurm = series(&slurm_only.render()) - series(&Metrics::default().render());
    let what = format!(
        "{} nodes, {} jobs, {} partitions, {} NodeSets, one worker in {} with a check",
        s.nodes, s.jobs, s.partitions, s.node_sets, s.checked_every
    );
    vec![
        fig(
            "metrics.large.series",
            all as f64,
            "",
            format!("{what}; bounded by partitions, NodeSets and checked workers, not jobs"),
        ),
        fig(
            "metrics.large.slurm_series",
            slurm as f64,
            "",
            "of them, the Slurm families",
        ),
        fig(
            "metrics.large.bytes",
            text.len() as f64,
            "B",
            "the /metrics text",
        ),
        fig(
            "metrics.large.set.wall",
            ms(set_took),
            "ms",
            format!(
                "a pass setting every gauge (best of 7); of it, counting Slurm's nodes and jobs {:.2} ms",
                ms(count_took)
            ),
        ),
        fig(
            "metrics.large.encode.wall",
            ms(encode_took),
            "ms",
            "a scrape encoding the text (best of 7)",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Shape = Shape {
        nodes: 400,
        jobs: 100,
        partitions: 8,
        node_sets: 10,
        checked_every: 20,
    };

    #[test]
    fn the_series_grow_with_partitions_node_sets_and_checked_workers_never_with_jobs() {
        let base = series(&served(SMALL));
        let many_jobs = Shape {
            jobs: 20_000,
            ..SMALL
        };
        assert_eq!(series(&served(many_jobs)), base);
        let no_jobs = Shape { jobs: 0, ..SMALL };
        assert_eq!(series(&served(no_jobs)), base);
        // Each partition: 19 node series, 4 job series, 2 GPU and 4 job CPU/GPU series.
        let more_partitions = Shape {
            partitions: 9,
            ..SMALL
        };
        assert_eq!(series(&served(more_partitions)), base + 29);
        // Each worker with a check: its result and its value.
        let more_checked = Shape {
            checked_every: 10,
            ..SMALL
        };
        assert_eq!(series(&served(more_checked)), base + 2 * 20);
        // Nodes add series only as checked workers: none here.
        let more_nodes = Shape {
            nodes: 800,
            checked_every: 1_000_000,
            ..SMALL
        };
        let fewer = Shape {
            checked_every: 1_000_000,
            ..SMALL
        };
        assert_eq!(series(&served(more_nodes)), series(&served(fewer)));
    }
}
