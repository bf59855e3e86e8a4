use super::*;

const SAMPLES: &str = "../shared/notes/real-slurm/samples";
const SAMPLES_26_05: &str = "../shared/notes/real-slurm-26.05/samples";

fn state(flags: &[&str]) -> NodeState {
    NodeState(flags.iter().map(|s| s.to_string()).collect())
}

#[test]
fn drained_means_drain_and_nothing_running() {
    assert!(state(&["IDLE", "DRAIN"]).is_drained());
    assert!(state(&["DOWN", "DRAIN"]).is_drained());
    assert!(!state(&["ALLOCATED", "DRAIN"]).is_drained());
    assert!(!state(&["MIXED", "DRAIN"]).is_drained());
    assert!(!state(&["IDLE", "DRAIN", "COMPLETING"]).is_drained());
    assert!(!state(&["IDLE", "DRAIN", "UNDRAIN"]).is_drained());
    assert!(!state(&["IDLE"]).is_drained());
    assert!(!NodeState::default().is_drained());
    assert_eq!(state(&["DRAIN", "IDLE"]).to_string(), "IDLE+DRAIN");
}

/// Real slurmrestd answers, recorded on 24.11 (v0.0.42) and 26.05 (v0.0.42 and v0.0.45),
/// read into the same typed values.
#[test]
fn real_samples_parse_in_every_release_and_data_parser() {
    let dirs = [SAMPLES, SAMPLES_26_05];
    for d in dirs {
        assert!(
            std::path::Path::new(d).exists(),
            "{d} is missing: the samples ship with ../shared beside the repository"
        );
    }
    let read = |d: &str, f: &str| std::fs::read_to_string(format!("{d}/{f}")).unwrap();
    // 24.11: a node draining under a job, and the jobs list.
    let nodes: NodesWire =
        serde_json::from_str(&read(SAMPLES, "nodes-draining-v0.0.42.json")).unwrap();
    let nodes: Vec<Node> = nodes.nodes.into_iter().map(Node::from).collect();
    let n1 = nodes.iter().find(|n| n.name == "node1").unwrap();
    assert_eq!(n1.state, state(&["MIXED", "DRAIN"]));
    assert!(!n1.state.is_drained());
    assert_eq!(n1.reason, "maint-ticket-42");
    assert!(n1.reason_changed_at.is_some());
    for (d, v) in [
        (SAMPLES, "v0.0.42"),
        (SAMPLES_26_05, "v0.0.42"),
        (SAMPLES_26_05, "v0.0.45"),
    ] {
        let jobs: JobsWire = serde_json::from_str(&read(d, &format!("jobs-{v}.json"))).unwrap();
        let jobs: Vec<Job> = jobs
            .jobs
            .into_iter()
            .map(|j| j.try_into().unwrap())
            .collect();
        let running = jobs.iter().find(|j| j.has_state("RUNNING")).unwrap();
        assert!(
            !running.nodes.is_empty() && running.end_time.is_some(),
            "{d} {v}"
        );
        // Each sample job was submitted naming its node (`-w`).
        assert!(jobs.iter().all(|j| j.pinned), "{d} {v}");
    }
    // A job that names no node: `required_nodes` empty.
    let free: JobWire = serde_json::from_str(r#"{"job_id": 7, "required_nodes": ""}"#).unwrap();
    assert!(!Job::try_from(free).unwrap().pinned);
    // 26.05: the same node read through v0.0.42 and v0.0.45 is the same, but for topology.
    for f in ["node-draining", "node-busy", "node-drained-idle"] {
        let one = |v: &str| {
            let w: NodesWire =
                serde_json::from_str(&read(SAMPLES_26_05, &format!("{f}-{v}.json"))).unwrap();
            Node::from(w.nodes.into_iter().next().unwrap())
        };
        let (old, new) = (one("v0.0.42"), one("v0.0.45"));
        assert!(!old.name.is_empty() && !old.state.0.is_empty(), "{f}");
        // Recorded a few seconds apart: times may differ.
        let same = |n: Node| Node {
            topology: String::new(),
            reason_changed_at: None,
            last_busy: None,
            ..n
        };
        assert_eq!(same(new), same(old), "{f}");
    }
}
