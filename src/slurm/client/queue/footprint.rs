//! What the kept queue costs in memory per job (`slurmops bench`'s `queue.kept_bytes_per_job`):
//! a queue of generated jobs, shaped as a busy GPU cluster's (a few hundred users, tens of
//! accounts and partitions, a fifth of the jobs running), taken through the same steps as a
//! refresh's (`jobs/state/` and `job/{id}` answers parsed from JSON, kept, handed out once).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::kept::{Delta, Kept, apply};
use crate::slurm::model::{Job, JobsWire};

/// The `job/{id}` answer of generated job I.
fn answer(i: usize) -> String {
    let running = i.is_multiple_of(5);
    let (state, reason, nodes) = match running {
        true => (
            "RUNNING",
            "None",
            format!("ns-{:04}-[{}-{}]", i % 500, i % 16, i % 16 + 1),
        ),
        false => (
            "PENDING",
            ["Priority", "Resources", "QOSMaxGRESPerUser"][i % 3],
            String::new(),
        ),
    };
    let qos = ["normal", "high"][i % 2];
    let start = if running { 1_764_000_000 } else { 0 };
    serde_json::json!({"jobs": [{
        "job_id": i + 1,
        "name": format!("train-{}", i % 400),
        "user_name": format!("user{:03}", i % 300),
        "account": format!("acct-{:02}", i % 40),
        "job_state": [state],
        "partition": format!("part-{:02}", i % 50),
        "nodes": nodes,
        "state_reason": reason,
        "node_count": {"set": true, "infinite": false, "number": 2},
        "shared": [],
        "comment": "",
        "exit_code": {"status": ["PENDING"], "return_code": {"set": true, "infinite": false, "number": 0}},
        "start_time": {"set": true, "infinite": false, "number": start},
        "end_time": {"set": true, "infinite": false, "number": 1_764_086_400},
        "submit_time": {"set": true, "infinite": false, "number": 1_763_990_000},
        "time_limit": {"set": true, "infinite": false, "number": 1440},
        "batch_flag": true,
        "requeue": true,
        "required_nodes": "",
        "qos": qos,
    }]})
    .to_string()
}

/// A kept queue, and the list of its records handed out.
pub struct KeptQueue {
    kept: Option<Kept>,
    list: crate::slurm::Jobs,
}

impl KeptQueue {
    /// Job records kept.
    pub fn records(&self) -> usize {
        self.kept
            .as_ref()
            .map_or(0, |k| k.records)
            .min(self.list.len())
    }
}

/// A kept queue of JOBS generated jobs, listed and read whole, its records handed out once.
pub fn kept_queue(jobs: usize) -> KeptQueue {
    let state = |i: usize| {
        if i.is_multiple_of(5) {
            "RUNNING"
        } else {
            "PENDING"
        }
    };
    let listing = serde_json::json!({"jobs": (0..jobs).map(|i| serde_json::json!({
        "job_id": i + 1,
        "state": [state(i)],
    })).collect::<Vec<_>>()})
    .to_string();
    let states =
        super::states_of(serde_json::from_str(&listing).expect("generated jobs/state/ parses"));
    let groups = super::order::groups(&states);
    let started = Instant::now();
    let mut kept: Option<Kept> = None;
    apply(
        &mut kept,
        started,
        Delta {
            states: Some((states, Duration::ZERO)),
            ..Delta::default()
        },
        usize::MAX,
    );
    // Batches of the size a refresh hands over.
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(super::MAX_FETCH) {
        let read = chunk
            .iter()
            .map(|&i| {
                let w: JobsWire =
                    serde_json::from_str(&answer(i)).expect("generated answer parses");
                let records: Vec<Job> = w
                    .jobs
                    .into_iter()
                    .map(|j| Job::try_from(j).expect("valid"))
                    .collect();
                let id = i as u64 + 1;
                (id, groups.get(&id).map_or(0, |g| g.digest), records)
            })
            .collect();
        apply(
            &mut kept,
            started,
            Delta {
                read,
                ..Delta::default()
            },
            usize::MAX,
        );
    }
    let list = kept
        .as_mut()
        .map(|k| k.list())
        .unwrap_or_else(|| Arc::from(Vec::new()));
    KeptQueue { kept, list }
}
