use super::*;
use crate::slurm::words::Word;
use crate::slurm::{ApiMessage, NodeState};

pub(in crate::daemon) fn node(name: &str, states: &[&str], partitions: &[&str]) -> Node {
    Node {
        name: name.into(),
        state: NodeState(states.iter().map(|s| s.to_string()).collect()),
        partitions: partitions.iter().map(|p| p.to_string()).collect(),
        ..Node::default()
    }
}

fn job(id: u64, state: &str, partition: &str, cpus: u32, gpus: u32) -> Arc<Job> {
    Arc::new(Job {
        id,
        state: Word::new(state),
        partition: Word::new(partition),
        cpus,
        gpus,
        ..Job::default()
    })
}

fn base(word: &str) -> usize {
    BASE_STATES.iter().position(|(_, w)| *w == word).unwrap()
}

fn flag(word: &str) -> usize {
    FLAGS.iter().position(|(_, w)| *w == word).unwrap()
}

#[test]
fn a_node_counts_in_its_first_base_state_in_slinky_s_order_and_in_each_of_its_flags() {
    // (Slurm's state list, the base state it counts in, the flags it counts in)
    let table: &[(&[&str], Option<&str>, &[&str])] = &[
        (&["IDLE"], Some("idle"), &[]),
        (&["ALLOCATED"], Some("allocated"), &[]),
        (&["MIXED", "DRAIN"], Some("mixed"), &["drain"]),
        (
            &["IDLE", "DRAIN", "NOT_RESPONDING"],
            Some("idle"),
            &["drain", "notresponding"],
        ),
        (&["DOWN", "DRAIN", "FAIL"], Some("down"), &["drain", "fail"]),
        (&["DOWN", "IDLE"], Some("down"), &[]),
        (&["ALLOCATED", "MIXED"], Some("allocated"), &[]),
        (&["DOWN", "ALLOCATED"], Some("allocated"), &[]),
        (&["ERROR", "IDLE"], Some("error"), &[]),
        (&["FUTURE"], Some("future"), &[]),
        (&["UNKNOWN", "IDLE"], Some("idle"), &[]),
        (&["UNKNOWN"], Some("unknown"), &[]),
        (
            &[
                "IDLE",
                "COMPLETING",
                "MAINTENANCE",
                "PLANNED",
                "REBOOT_REQUESTED",
                "RESERVED",
            ],
            Some("idle"),
            &[
                "completing",
                "maintenance",
                "planned",
                "rebootrequested",
                "reserved",
            ],
        ),
        (&["CLOUD", "POWERED_DOWN"], None, &[]),
        (&[], None, &[]),
    ];
    for (states, want_base, want_flags) in table {
        let c = counts([&node("n", states, &[])], None);
        let mut base_want = [0; 7];
        if let Some(b) = want_base {
            base_want[base(b)] = 1;
        }
        let mut flags_want = [0; 8];
        for f in *want_flags {
            flags_want[flag(f)] = 1;
        }
        assert_eq!(
            (c.nodes.total, c.nodes.base, c.nodes.flags),
            (1, base_want, flags_want),
            "{states:?}"
        );
    }
}

#[test]
fn partitions_count_their_nodes_cpus_and_gpus_and_a_node_of_two_counts_in_both() {
    let mut a = node("a", &["MIXED"], &["cpu", "all"]);
    (a.cpus, a.alloc_cpus, a.gpus, a.alloc_gpus) = (64, 16, 0, 0);
    let mut b = node("b", &["ALLOCATED"], &["gpu", "all"]);
    (b.cpus, b.alloc_cpus, b.gpus, b.alloc_gpus) = (32, 32, 8, 3);
    // Slurm may report more allocated than configured (a node shrunk under jobs).
    let mut c = node("c", &["IDLE", "DRAIN"], &["gpu"]);
    (c.cpus, c.alloc_cpus, c.gpus, c.alloc_gpus) = (8, 10, 4, 0);
    let got = counts([&a, &b, &c], None);
    let part = |p: &str| {
        let n = &got.partitions[p];
        (
            n.nodes.total,
            n.cpus,
            n.cpus_alloc,
            n.cpus_idle,
            n.gpus,
            n.gpus_alloc,
        )
    };
    assert_eq!(got.partitions.len(), 3);
    assert_eq!(part("cpu"), (1, 64, 16, 48, 0, 0));
    assert_eq!(part("gpu"), (2, 40, 42, 0, 12, 3));
    assert_eq!(part("all"), (2, 96, 48, 48, 8, 3));
    assert_eq!(got.partitions["gpu"].nodes.flags[flag("drain")], 1);
    assert_eq!(got.partitions["gpu"].nodes.base[base("allocated")], 1);
    assert_eq!(got.nodes.total, 3);
    assert_eq!(got.jobs, None);
}

#[test]
fn jobs_count_by_partition_and_state_only_where_a_node_lists_the_partition() {
    let nodes = [
        node("a", &["IDLE"], &["cpu"]),
        node("b", &["MIXED"], &["gpu"]),
    ];
    let jobs = [
        job(1, "PENDING", "gpu", 8, 2),
        job(2, "RUNNING", "gpu", 16, 4),
        job(3, "RUNNING,COMPLETING", "gpu", 4, 1),
        job(4, "COMPLETING", "gpu", 2, 0),
        job(5, "COMPLETED", "gpu", 32, 8),
        // A pending job that may run in either partition counts in both.
        job(6, "PENDING", "cpu,gpu", 1, 0),
        // A partition no node lists: not a series.
        job(7, "PENDING", "ghost", 100, 100),
        job(8, "SUSPENDED", "cpu", 3, 0),
    ];
    let got = counts(&nodes, Some(&jobs)).jobs.unwrap();
    let row = |p: &str| {
        let j = &got[p];
        (j.jobs, j.pending, j.running, j.cpus_alloc, j.cpus, j.gpus)
    };
    assert_eq!(got.keys().collect::<Vec<_>>(), ["cpu", "gpu"]);
    assert_eq!(row("gpu"), (6, 2, 2, 22, [9, 20], [2, 5]));
    assert_eq!(row("cpu"), (2, 1, 0, 3, [1, 0], [0, 0]));
    // No job at all: every partition's series, at 0.
    let empty = counts(&nodes, Some(&[])).jobs.unwrap();
    assert_eq!(empty["cpu"], PartitionJobs::default());
    assert_eq!(empty.len(), 2);
}

#[test]
fn drained_nodes_count_by_who_drained_them_and_undrained_ones_do_not() {
    let drained = |reason: &str, states: &[&str]| Node {
        reason: reason.into(),
        ..node("n", states, &[])
    };
    let nodes = [
        drained("slurmops: rollout", &["IDLE", "DRAIN"]),
        drained("slurmops: rollout", &["MIXED", "DRAIN"]),
        drained(
            "slurmops: check nccl failed: job 7: slow",
            &["IDLE", "DRAIN"],
        ),
        drained("slurmops: node k8s-3 cordoned", &["DOWN", "DRAIN"]),
        drained("slurmops: an older release's words", &["IDLE", "DRAIN"]),
        drained("bad DIMM", &["IDLE", "DRAIN"]),
        drained("", &["DOWN", "DRAIN"]),
        // A reason left on a node no longer drained: not counted.
        drained("slurmops: rollout", &["IDLE"]),
        drained("bad DIMM", &["DOWN"]),
    ];
    let got = counts(&nodes, None).drained;
    let by = |b: &str| got[DRAINED_BY.iter().position(|x| *x == b).unwrap()];
    assert_eq!(
        [
            "rollout",
            "check_failed",
            "cordoned",
            "slurmops_other",
            "admin",
            "autoscale"
        ]
        .map(by),
        [2, 1, 1, 1, 2, 0]
    );
    assert_eq!(got.iter().sum::<u64>(), 7);
}

#[test]
fn only_a_pass_that_read_the_whole_queue_counts_jobs() {
    let nodes = vec![node("a", &["IDLE"], &["cpu"])];
    let jobs = vec![Job {
        partition: Word::new("cpu"),
        state: Word::new("PENDING"),
        ..Job::default()
    }];
    // (the pass read the queue, its error, jobs counted)
    for (read, error, counted) in [
        (true, None, true),
        (false, None, false),
        (true, Some("read job by job since the start"), false),
        (false, Some("too large"), false),
    ] {
        let mut v = SlurmView::new(nodes.clone(), jobs.clone());
        v.jobs_read = read;
        v.jobs_error = error.map(String::from);
        let got = of_view(&v);
        assert_eq!(got.jobs.is_some(), counted, "{read} {error:?}");
        assert_eq!(got.nodes.total, 1);
    }
}

#[test]
fn slurmctld_is_in_control_by_the_pings_else_by_what_the_pass_read() {
    let ping = |responding| Ping {
        hostname: "ctld".into(),
        pinged: String::new(),
        responding,
        mode: String::new(),
    };
    // What slurmrestd 24.11 answers with slurmctld down (seen on the bed): Slurm's client
    // library turns a communication error with slurmctld into SLURMCTLD_COMMUNICATIONS_*.
    let silent = || SlurmError::Api {
        method: "GET".into(),
        path: "nodes/".into(),
        status: 500,
        errors: vec![ApiMessage {
            error_number: Some(1800),
            error: Some("Unable to contact slurm controller (connect failure)".into()),
            description: Some("Failure to query nodes".into()),
            ..ApiMessage::default()
        }],
    };
    let unreachable = || SlurmError::Unreachable {
        url: "http://slurmrestd".into(),
        detail: "connection refused".into(),
    };
    let failed = |e: SlurmError| SlurmUnknown::from(e);
    let none_answers = Ok(vec![ping(false), ping(false)]);
    let backup_has = Ok(vec![ping(false), ping(true)]);
    let ping_silent = Err(silent());
    let ping_unreachable = Err(unreachable());
    // (pings, nodes read, the pass's error, in control)
    type Pings<'a> = Option<&'a Result<Vec<Ping>, SlurmError>>;
    let table: Vec<(Pings, bool, Option<SlurmUnknown>, Option<bool>)> = vec![
        (None, true, None, Some(true)),
        (None, false, Some(failed(silent())), Some(false)),
        (None, false, Some(failed(unreachable())), None),
        (None, false, Some(SlurmUnknown::NotConfigured), None),
        (None, false, None, None),
        // Nodes read, then a step failed: slurmctld answered.
        (None, true, Some(failed(unreachable())), Some(true)),
        (
            Some(&backup_has),
            false,
            Some(failed(unreachable())),
            Some(true),
        ),
        (Some(&none_answers), true, None, Some(false)),
        (
            Some(&ping_silent),
            false,
            Some(failed(unreachable())),
            Some(false),
        ),
        (
            Some(&ping_unreachable),
            false,
            Some(failed(unreachable())),
            None,
        ),
        (Some(&ping_unreachable), true, None, Some(true)),
    ];
    for (i, (pings, read, error, want)) in table.into_iter().enumerate() {
        assert_eq!(in_control(pings, read, error.as_ref()), want, "row {i}");
    }
}
