use super::*;
use crate::controller::decide::{SlurmView, Waiting};
use crate::daemon::slurm_metrics::tests::node;
use crate::slurm::Job;
use crate::slurm::words::Word;

#[test]
fn rollout_progress_is_exposed_per_node_set_and_state_with_escaped_labels() {
    let m = Metrics::default();
    m.reconciled(Verdict::Applied, 0.3);
    m.rollout(&Event::Drain {
        node: "a-0".into(),
        ours: true,
    });
    let p = Progress {
        node_set: "gpu \"a\"".into(),
        replicas: 2,
        updated: 1,
        in_flight: vec!["x-0".into()],
        waiting: vec![Waiting {
            node: "x-0".into(),
            why: "rollout".into(),
            jobs: vec![],
            since: None,
        }],
        ..Progress::default()
    };
    m.progress(&[p]);
    let text = m.render();
    for line in [
        "slurmops_reconcile_total{result=\"applied\"} 1",
        "slurmops_rollout_steps_total{step=\"drain\"} 1",
        "slurmops_rollout_workers{node_set=\"gpu \\\"a\\\"\",state=\"updated\"} 1",
        "slurmops_rollout_workers{node_set=\"gpu \\\"a\\\"\",state=\"waiting\"} 1",
        "slurmops_waiting_on_jobs 1",
        "slurmops_reconcile_duration_seconds_count 1",
        "# EOF",
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
    // A NodeSet that left cluster.yaml leaves the metrics.
    m.progress(&[]);
    assert!(!m.render().contains("gpu"));
}

#[test]
fn the_result_and_slurm_s_reachability_are_states_an_alert_can_hold_on() {
    let m = Metrics::default();
    m.result(Verdict::Refused);
    m.rollout(&Event::SlurmUnreachable {
        error: "connection refused".into(),
    });
    let text = m.render();
    for line in [
        "slurmops_result{result=\"refused\"} 1",
        "slurmops_result{result=\"applied\"} 0",
        "slurmops_result{result=\"fetch-failed\"} 0",
        "slurmops_slurm_unreachable 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
    assert!(!text.contains("slurmops_result{result=\"\"}"), "{text}");
    m.result(Verdict::Applied);
    m.rollout(&Event::SlurmBack);
    let text = m.render();
    for line in [
        "slurmops_result{result=\"refused\"} 0",
        "slurmops_result{result=\"applied\"} 1",
        "slurmops_slurm_unreachable 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
}

#[test]
fn a_daemon_per_cluster_labels_every_series_with_its_cluster() {
    let m = Metrics::for_cluster(Some("a"));
    m.reconciled(Verdict::Applied, 0.3);
    let text = m.render();
    for line in text.lines().filter(|l| l.starts_with("slurmops_")) {
        assert!(line.contains("cluster=\"a\""), "{line}");
    }
    assert!(text.contains("slurmops_reconcile_total{"), "{text}");
    assert!(!Metrics::default().render().contains("cluster="));
}

/// The families as served, after a pass with VIEW.
fn served(view: Option<&SlurmView>, slurm: bool, in_control: Option<bool>) -> String {
    let m = crate::daemon::metrics::Metrics::for_cluster(Some("a"));
    m.slurm(view, slurm);
    m.slurmctld(in_control);
    m.render()
}

/// slurmops' own families of Slurm.
const OWN: [&str; 6] = [
    "slurmops_partition_gpus",
    "slurmops_slurm_drained_nodes",
    "slurmops_partition_job_cpus",
    "slurmops_partition_job_gpus",
    "slurmops_slurmctld_in_control",
    "slurmops_slurm_queue_unknown",
];

/// The Slurm families of TEXT, with their type.
fn families(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter(|l| l.starts_with("slurm_") || OWN.iter().any(|o| l.split(' ').next() == Some(o)))
        .collect()
}

#[test]
fn families_are_gauges_and_those_not_known_are_absent_not_stale() {
    let mut v = SlurmView::new(
        vec![node("a\"b", &["IDLE"], &["gpu \"x\""])],
        vec![Job {
            partition: Word::new("gpu \"x\""),
            state: Word::new("RUNNING"),
            ..Job::default()
        }],
    );
    v.jobs_read = true;
    let text = served(Some(&v), true, Some(true));
    let all = families(&text);
    assert!(all.iter().all(|f| f.ends_with(" gauge")), "{all:?}");
    // Slinky's: 16 cluster-wide, 19 per partition of nodes, 4 per partition of jobs.
    assert_eq!(all.len(), 16 + 19 + 4 + OWN.len(), "{all:?}");
    for line in [
        "slurm_nodes_total{cluster=\"a\"} 1",
        "slurm_nodes_idle_total{cluster=\"a\"} 1",
        "slurm_partition_nodes_total{cluster=\"a\",partition=\"gpu \\\"x\\\"\"} 1",
        "slurm_partition_jobs_running_total{cluster=\"a\",partition=\"gpu \\\"x\\\"\"} 1",
        "slurmops_slurm_drained_nodes{cluster=\"a\",by=\"admin\"} 0",
        "slurmops_slurmctld_in_control{cluster=\"a\"} 1",
        "slurmops_slurm_queue_unknown{cluster=\"a\"} 0",
        "slurmops_partition_gpus{cluster=\"a\",partition=\"gpu \\\"x\\\"\",state=\"total\"} 0",
        "slurmops_partition_job_cpus{cluster=\"a\",partition=\"gpu \\\"x\\\"\",state=\"pending\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
    // The queue not read whole: the job families leave, the nodes' stay.
    v.jobs_error = Some("too large".into());
    let text = served(Some(&v), true, Some(true));
    assert!(!text.contains("# TYPE slurm_partition_jobs_"), "{text}");
    assert!(!text.contains("# TYPE slurmops_partition_job_"), "{text}");
    assert!(
        text.contains("slurmops_slurm_queue_unknown{cluster=\"a\"} 1"),
        "{text}"
    );
    assert!(text.contains("slurm_partition_nodes_total{"), "{text}");
    // No node read: only the queue's flag, at 0; no Slurm at all: nothing.
    let text = served(None, true, None);
    assert_eq!(
        families(&text),
        ["slurmops_slurm_queue_unknown gauge"],
        "{text}"
    );
    assert_eq!(families(&served(None, false, None)), Vec::<&str>::new());
}
