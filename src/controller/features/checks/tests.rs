use super::*;
use crate::controller::decide::tests::{NOW, node};

/// NodeSet `gpu` of workers gpu-0.., in partition `p`, checked by CHECK (YAML flow mapping).
pub(crate) fn spec(check: &str) -> ClusterSpec {
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
    activeChecks:
      - {check}
  nodeSets:
    - {{name: gpu, replicas: 3}}
    - {{name: cpu, replicas: 1}}
  partitions:
    - {{name: p, nodeSets: [gpu, cpu]}}
"#
    );
    crate::cluster::load("cluster.yaml", &yaml)
        .expect("valid")
        .spec
}

const REGISTER: &str = "{name: c, script: 'true', maxConcurrent: 1, nodeSets: [gpu]}";

pub(super) fn worker(i: u32, marks: &[(&str, Mark)]) -> Worker {
    Worker {
        name: format!("gpu-{i}"),
        uid: format!("u{i}"),
        ordinal: Some(i),
        revision: "r".into(),
        ready: true,
        deleting: false,
        created: Some(NOW - 600),
        host: None,
        checks: marks
            .iter()
            .map(|(c, m)| (c.to_string(), m.clone()))
            .collect(),
    }
}

pub(super) fn sets(workers: Vec<Worker>) -> BTreeMap<String, SetView> {
    BTreeMap::from([(
        "gpu".to_string(),
        SetView {
            name: "gpu".into(),
            replicas: workers.len() as u32,
            update_revision: Some("r".into()),
            managed: false,
            canary: None,
            current_revision: Some("r".into()),
            workers,
        },
    )])
}

pub(super) const PENDING: &str = "slurmops: checks pending";

pub(super) fn passed(at: i64) -> Mark {
    Mark {
        passed: true,
        at,
        job: Some(1),
        value: None,
        text: "passed".into(),
    }
}

pub(super) fn check_job(id: u64, node: &str, due: i64, state: &str) -> Job {
    Job {
        id,
        name: job_name("c", node, due).into(),
        user: "slurm".into(),
        state: state.into(),
        nodes: vec![node.into()],
        submit_time: Some(NOW - 30),
        start_time: (state != "PENDING").then_some(NOW - 20),
        end_time: Some(NOW - 5),
        ..Job::default()
    }
}

pub(super) fn run(
    check: &str,
    workers: Vec<Worker>,
    nodes: Vec<Node>,
    jobs: Vec<Job>,
    resumes: &[&str],
) -> Checked {
    let resumes = resumes.iter().map(|s| s.to_string()).collect();
    assess(
        &spec(check),
        &sets(workers),
        &SlurmView::new(nodes, jobs),
        &BTreeMap::new(),
        &resumes,
        NOW,
    )
}

/// The steps on NodeSet gpu, in words: `submit gpu-0`, `resume gpu-0`, `hold gpu-1: REASON`...
pub(super) fn steps(c: &Checked) -> Vec<String> {
    c.actions
        .get("gpu")
        .into_iter()
        .flatten()
        .map(|a| match a {
            Action::CheckSubmit { job } => format!("submit {}", job.nodes.join(",")),
            Action::Resume { node } => format!("resume {node}"),
            Action::Hold { node, reason } => format!("hold {node}: {}", reason.words()),
            Action::CheckCancel { job } => format!("cancel {job}"),
            Action::Mark { pod, mark, .. } => format!("mark {pod} {}", mark.condition().2),
            other => format!("{other:?}"),
        })
        .collect()
}

mod job;
mod judging;
mod scheduling;
