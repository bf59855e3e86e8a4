use super::*;
use crate::controller::decide::Waiting;

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
