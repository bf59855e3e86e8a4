//! What slurmops reads from Slurm, typed, and the wire shapes of slurmrestd's data parsers.
//! Every version-specific detail lives here. v0.0.42 to v0.0.45 (Slurm 24.11 serves 40-42, 26.05
//! serves 42-45) agree on the fields slurmops uses: node `state` is a list of upper-case flags,
//! numbers may come as `{set, infinite, number}` objects, job `nodes` is a hostlist expression.
//! What differs: v0.0.43 adds a node's `topology` (`name:unit`), v0.0.45 drops ping's `pinged` and
//! `mode` (both optional here). v0.0.40 and v0.0.41 are not spoken: every supported Slurm serves
//! v0.0.42, and 26.05 no longer serves the older two.

use std::collections::BTreeSet;

use serde::{Deserialize, Deserializer};

use super::hostlist;
pub use super::words::Word;
use crate::text;

/// slurmrestd data parsers slurmops speaks, newest first (the probing order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DataParser {
    V0045,
    V0044,
    V0043,
    V0042,
}

impl DataParser {
    pub const ALL: [DataParser; 4] = [
        DataParser::V0045,
        DataParser::V0044,
        DataParser::V0043,
        DataParser::V0042,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DataParser::V0045 => "v0.0.45",
            DataParser::V0044 => "v0.0.44",
            DataParser::V0043 => "v0.0.43",
            DataParser::V0042 => "v0.0.42",
        }
    }

    pub fn parse(s: &str) -> Option<DataParser> {
        DataParser::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Every name, newest first, for messages and the CLI.
    pub fn names() -> Vec<&'static str> {
        DataParser::ALL
            .into_iter()
            .map(DataParser::as_str)
            .collect()
    }

    /// Creates reservations (`POST reservation`): v0.0.43 on (Slurm 25.05 and later).
    pub fn creates_reservations(self) -> bool {
        !matches!(self, DataParser::V0042)
    }

    /// Reports a node's topology (`topology` in the node, `topology_str` in an update).
    pub fn has_node_topology(self) -> bool {
        matches!(
            self,
            DataParser::V0043 | DataParser::V0044 | DataParser::V0045
        )
    }
}

/// A node's state: its base state and flags, as slurmrestd lists them (`["IDLE","DRAIN"]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeState(pub BTreeSet<String>);

impl NodeState {
    pub fn has(&self, flag: &str) -> bool {
        self.0.contains(flag)
    }

    /// Safe to take away: DRAIN set, not being undrained, nothing allocated or completing.
    pub fn is_drained(&self) -> bool {
        self.has("DRAIN")
            && !self.has("UNDRAIN")
            && !["ALLOCATED", "MIXED", "COMPLETING"]
                .iter()
                .any(|f| self.has(f))
    }

    /// Jobs may run here: ALLOCATED, MIXED or COMPLETING.
    pub fn is_busy(&self) -> bool {
        ["ALLOCATED", "MIXED", "COMPLETING"]
            .iter()
            .any(|f| self.has(f))
    }
}

impl std::fmt::Display for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Base state first, as sinfo prints it.
        let bases = [
            "IDLE",
            "ALLOCATED",
            "MIXED",
            "DOWN",
            "ERROR",
            "FUTURE",
            "UNKNOWN",
        ];
        let mut parts: Vec<&str> = bases.iter().copied().filter(|b| self.has(b)).collect();
        parts.extend(
            self.0
                .iter()
                .map(String::as_str)
                .filter(|s| !bases.contains(s)),
        );
        write!(f, "{}", parts.join("+"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    pub name: String,
    pub state: NodeState,
    pub reason: String,
    pub reason_set_by_user: String,
    pub reason_changed_at: Option<i64>,
    pub comment: String,
    pub partitions: Vec<String>,
    pub features: Vec<String>,
    pub cpus: u32,
    pub alloc_cpus: u32,
    pub address: String,
    pub port: u32,
    /// When a job last ran here (UNIX seconds; Slurm sets it at registration too).
    pub last_busy: Option<i64>,
    /// `TOPOLOGY:BLOCK` of a node in a block (v0.0.45 and later; empty before, or in no block).
    pub topology: String,
    /// GPUs configured (its `gres`) and allocated (`gres_used`).
    pub gpus: u32,
    pub alloc_gpus: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Job {
    pub id: u64,
    // Text that repeats across the queue is a shared [`Word`] (users, accounts, partitions,
    // QOS, states, reasons, node names): 50,000 records say a few hundred of them.
    pub name: Word,
    pub user: Word,
    /// The Slurm account the job charges.
    pub account: Word,
    /// Its state flags, comma-separated as Slurm lists them (`PENDING`, `RUNNING,COMPLETING`).
    pub state: Word,
    pub partition: Word,
    /// Expanded from the hostlist slurmrestd reports.
    pub nodes: Vec<Word>,
    /// Real or expected end (UNIX seconds); None when unlimited or unknown.
    pub end_time: Option<i64>,
    pub start_time: Option<i64>,
    /// Why a pending job waits (e.g. `Resources`, `Priority`, `Dependency`, `JobHeldUser`).
    pub state_reason: Word,
    /// Nodes the job asks for (the minimum of a range), at least 1.
    pub node_count: u32,
    /// It takes its nodes whole (`--exclusive`): no other job shares them.
    pub exclusive: bool,
    /// The job's comment (a slurmops validation job writes its result there).
    pub comment: String,
    /// The batch script's exit code, once it ended.
    pub exit_code: Option<i64>,
    /// Submission (UNIX seconds).
    pub submit_time: Option<i64>,
    /// The job's time limit in minutes; None when unlimited or not set (the partition's).
    pub time_limit: Option<i64>,
    /// A batch job (not an `salloc` or `srun` allocation).
    pub batch: bool,
    /// Slurm may requeue it (`--requeue`, or `JobRequeue=1` and not `--no-requeue`).
    pub requeue: bool,
    /// It names the nodes it must run on (`--nodelist`): requeued after its worker was replaced,
    /// Slurm may never start it again (seen on 25.11 and 26.05: pending, `BadConstraints`, the
    /// new worker idle under the same name).
    pub pinned: bool,
    /// Its QOS.
    pub qos: Word,
    /// CPUs allocated, or asked for while pending.
    pub cpus: u32,
    /// GPUs allocated, or asked for while pending (see `gres::JobGpus`).
    pub gpus: u32,
}

impl Job {
    pub fn has_state(&self, s: &str) -> bool {
        self.state.split(',').any(|x| x == s)
    }

    /// Holding nodes: running, suspended or completing.
    pub fn holds_nodes(&self) -> bool {
        ["RUNNING", "SUSPENDED", "COMPLETING"]
            .iter()
            .any(|s| self.has_state(s))
    }
}

/// Job state flags as one [`Word`], comma-separated in Slurm's order.
pub fn state_word(flags: &[String]) -> Word {
    match flags {
        [one] => Word::new(one),
        _ => Word::new(&flags.join(",")),
    }
}

/// A batch job slurmops submits itself (a canary's validation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRequest {
    pub name: String,
    pub script: String,
    pub partition: String,
    /// Exactly these nodes, all of them.
    pub nodes: Vec<String>,
    pub time_limit_minutes: u32,
    /// Its nodes whole: no other job shares them while it runs (an active check).
    pub exclusive: bool,
    /// Slurm licenses it takes while it runs (`NAME:COUNT`): an active check's cap, enforced
    /// by slurmctld.
    pub licenses: Option<String>,
    /// GPUs it asks for on each node (`gres/gpu:N`): a GPU worker's all. Slurm (24.11 to
    /// 26.05) gives an exclusive job the node's GPUs even when it asks for none, but a job
    /// sharing the node gets none, and under ConstrainDevices (what slurmops renders) cannot
    /// open one; asked for explicitly, the GPUs are the job's either way (bed test
    /// `gpu_devices`).
    pub gpus: u32,
}

impl JobRequest {
    /// The priority of slurmops' jobs: the highest a job can be given (an operator's to set).
    pub fn priority() -> serde_json::Value {
        serde_json::json!({"set": true, "infinite": false, "number": 4_294_967_293u32})
    }

    /// The `job/submit` body (the same in v0.0.42 to v0.0.45). The job is submitted while its
    /// nodes are still drained; the highest priority (`priority`, set by the administrator right
    /// after, see `Client::submit`) lets it start before any user job once they are resumed. Its output goes nowhere: the job reports through its comment.
    pub fn body(&self) -> serde_json::Value {
        let n = self.nodes.len().max(1);
        let mut body = serde_json::json!({
            "script": self.script,
            "job": {
                "name": self.name,
                "partition": self.partition,
                "required_nodes": self.nodes,
                "minimum_nodes": n,
                "maximum_nodes": n,
                "tasks": n,
                "time_limit": {"set": true, "infinite": false, "number": self.time_limit_minutes},
                "current_working_directory": "/tmp",
                "environment": [JOB_PATH],
                "standard_output": "/dev/null",
                "standard_error": "/dev/null",
            }
        });
        if self.exclusive {
            body["job"]["shared"] = serde_json::json!(["none"]);
        }
        if let Some(l) = &self.licenses {
            body["job"]["licenses"] = serde_json::json!(l);
        }
        if self.gpus > 0 {
            body["job"]["tres_per_node"] = serde_json::json!(format!("gres/gpu:{}", self.gpus));
        }
        body
    }
}

impl JobRequest {
    /// The same job as a batch script for `sbatch`: `body`'s fields as `#SBATCH` lines after
    /// the script's first line, its interpreter (options given to sbatch on its command line,
    /// e.g. `--nodelist`, override them), and its environment, PATH alone, set after them. What `body` sets and sbatch cannot: the priority, which
    /// slurmops sets as the administrator right after submitting (`Client::submit`).
    pub fn sbatch(&self) -> String {
        let n = self.nodes.len().max(1);
        let mut opts = vec![
            format!("--job-name={}", self.name),
            format!("--partition={}", self.partition),
            format!("--nodes={n}"),
            format!("--ntasks={n}"),
            format!("--time={}", self.time_limit_minutes),
            "--chdir=/tmp".to_string(),
            // Only Slurm's variables from the submitter, PATH set below: `--export=PATH=…`
            // would have slurmd load the user's login environment, which fails for a user with
            // no login shell (`daemon`: the job held, `user_env_retrieval_failed_requeued_held`).
            "--export=NIL".to_string(),
            "--output=/dev/null".to_string(),
            "--error=/dev/null".to_string(),
        ];
        if !self.nodes.is_empty() {
            opts.push(format!("--nodelist={}", self.nodes.join(",")));
        }
        if self.exclusive {
            opts.push("--exclusive".into());
        }
        if let Some(l) = &self.licenses {
            opts.push(format!("--licenses={l}"));
        }
        if self.gpus > 0 {
            opts.push(format!("--gres=gpu:{}", self.gpus));
        }
        let mut header: String = opts.iter().map(|o| format!("#SBATCH {o}\n")).collect();
        header.push_str(&format!("export {JOB_PATH}\n"));
        match self.script.split_once('\n') {
            Some((first, rest)) if first.starts_with("#!") => format!("{first}\n{header}{rest}"),
            _ => format!("#!/bin/sh\n{header}{}", self.script),
        }
    }
}

/// The only environment of slurmops' jobs.
const JOB_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A maintenance reservation slurmops makes ahead of a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationRequest {
    pub name: String,
    pub nodes: Vec<String>,
    pub start: i64,
    pub end: i64,
}

impl ReservationRequest {
    /// `MAINT`: the nodes show as in maintenance; `IGNORE_JOBS`: made even while jobs run there
    /// (they may end before the window). Slurm starts no job there that would run into it.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "node_list": self.nodes,
            "start_time": {"set": true, "infinite": false, "number": self.start},
            "end_time": {"set": true, "infinite": false, "number": self.end},
            "flags": ["MAINT", "IGNORE_JOBS"],
            "users": ["root"],
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub name: String,
    pub nodes: Vec<String>,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    pub flags: Vec<String>,
}

// ---- wire shapes (serde), shared by v0.0.42-45 ----

/// An error or warning entry of a slurmrestd answer.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[serde(default)]
pub struct ApiMessage {
    pub error_number: Option<i64>,
    pub error: Option<String>,
    pub description: Option<String>,
    pub source: Option<String>,
}

impl std::fmt::Display for ApiMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = [self.description.as_deref(), self.error.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        match self.error_number {
            Some(n) => write!(f, "{text} (Slurm error {n})"),
            None => write!(f, "{text}"),
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Envelope {
    pub errors: Vec<ApiMessage>,
    pub warnings: Vec<ApiMessage>,
}

/// A number as slurmrestd writes it: plain, or `{set, infinite, number}`. None: unset/infinite.
fn number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Plain(i64),
        Struct {
            #[serde(default)]
            set: bool,
            #[serde(default)]
            infinite: bool,
            #[serde(default)]
            number: i64,
        },
        Null(()),
    }
    Ok(match Wire::deserialize(d)? {
        Wire::Plain(n) => Some(n),
        Wire::Struct {
            set: true,
            infinite: false,
            number,
        } => Some(number),
        Wire::Struct { .. } | Wire::Null(()) => None,
    })
}

#[derive(Deserialize)]
pub struct NodesWire {
    #[serde(default)]
    pub nodes: Vec<NodeWire>,
    /// slurmctld's last change of the list (UNIX seconds), to ask again with `update_time`;
    /// absent (or 0) in a "no change" answer.
    #[serde(default, deserialize_with = "number")]
    pub last_update: Option<i64>,
    /// Slurm's errors, when the answer carries any (it is then an error).
    #[serde(default)]
    pub errors: Vec<ApiMessage>,
}

#[derive(Deserialize)]
pub struct NodeWire {
    name: String,
    #[serde(default)]
    state: Vec<String>,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    reason_set_by_user: String,
    #[serde(default, deserialize_with = "number")]
    reason_changed_at: Option<i64>,
    #[serde(default)]
    comment: String,
    #[serde(default)]
    partitions: Vec<String>,
    #[serde(default)]
    features: Vec<String>,
    #[serde(default)]
    cpus: u32,
    #[serde(default)]
    alloc_cpus: u32,
    #[serde(default)]
    address: String,
    #[serde(default)]
    port: u32,
    #[serde(default, deserialize_with = "number")]
    last_busy: Option<i64>,
    #[serde(default)]
    topology: String,
    #[serde(default)]
    gres: String,
    #[serde(default)]
    gres_used: String,
}

impl From<NodeWire> for Node {
    fn from(w: NodeWire) -> Node {
        Node {
            name: w.name,
            state: NodeState(w.state.into_iter().map(|s| s.to_uppercase()).collect()),
            // Set by Slurm users and administrators: shown in status, Events and plans.
            reason: text::clean(w.reason),
            reason_set_by_user: text::clean(w.reason_set_by_user),
            reason_changed_at: w.reason_changed_at,
            comment: text::clean(w.comment),
            partitions: w.partitions,
            features: w.features,
            cpus: w.cpus,
            alloc_cpus: w.alloc_cpus,
            address: w.address,
            port: w.port,
            last_busy: w.last_busy.filter(|t| *t > 0),
            topology: w.topology,
            gpus: super::gres::gpus_in_gres(&w.gres),
            alloc_gpus: super::gres::gpus_in_gres(&w.gres_used),
        }
    }
}

#[derive(Deserialize)]
pub struct JobsWire {
    #[serde(default)]
    pub jobs: Vec<JobWire>,
    /// slurmctld's last change of the list (UNIX seconds), to ask again with `update_time`;
    /// absent (or 0) in a "no change" answer.
    #[serde(default, deserialize_with = "number")]
    pub last_update: Option<i64>,
}

#[derive(Deserialize)]
pub struct JobWire {
    job_id: u64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    user_name: String,
    #[serde(default)]
    account: String,
    #[serde(default)]
    job_state: Vec<String>,
    #[serde(default)]
    partition: String,
    #[serde(default)]
    nodes: String,
    #[serde(default, deserialize_with = "number")]
    end_time: Option<i64>,
    #[serde(default, deserialize_with = "number")]
    start_time: Option<i64>,
    #[serde(default)]
    state_reason: String,
    #[serde(default, deserialize_with = "number")]
    node_count: Option<i64>,
    /// `["none"]` (or `["exclusive"]`) for a job that shares no node.
    #[serde(default)]
    shared: Vec<String>,
    #[serde(default)]
    comment: String,
    #[serde(default)]
    exit_code: ExitCodeWire,
    #[serde(default, deserialize_with = "number")]
    submit_time: Option<i64>,
    #[serde(default, deserialize_with = "number")]
    time_limit: Option<i64>,
    #[serde(default)]
    batch_flag: bool,
    #[serde(default)]
    requeue: bool,
    /// The hostlist it must run on, empty for none.
    #[serde(default)]
    required_nodes: String,
    #[serde(default)]
    qos: String,
    #[serde(default, deserialize_with = "number")]
    cpus: Option<i64>,
    #[serde(default, deserialize_with = "number")]
    tasks: Option<i64>,
    #[serde(default)]
    gres_detail: Vec<String>,
    #[serde(default)]
    tres_alloc_str: String,
    #[serde(default)]
    tres_req_str: String,
    #[serde(default)]
    tres_per_job: String,
    #[serde(default)]
    tres_per_node: String,
    #[serde(default)]
    tres_per_task: String,
}

/// A count slurmrestd answered, within `u32` (None or negative: 0).
fn small(n: Option<i64>) -> u32 {
    n.map_or(0, |n| n.clamp(0, i64::from(u32::MAX)) as u32)
}

/// `exit_code` of a job: `{status, return_code: number}`.
#[derive(Deserialize, Default)]
struct ExitCodeWire {
    #[serde(default)]
    status: Vec<String>,
    #[serde(default, deserialize_with = "number")]
    return_code: Option<i64>,
}

impl TryFrom<JobWire> for Job {
    type Error = hostlist::HostlistError;
    fn try_from(w: JobWire) -> Result<Job, Self::Error> {
        Ok(Job {
            id: w.job_id,
            // A Slurm user's choice: shown in status, Events and plans.
            name: Word::new(&text::clean(w.name)),
            user: Word::new(&text::clean(w.user_name)),
            account: Word::new(&text::clean(w.account)),
            state: state_word(&w.job_state),
            partition: Word::new(&w.partition),
            nodes: hostlist::expand(&w.nodes)?
                .iter()
                .map(|n| Word::new(n))
                .collect(),
            end_time: w.end_time.filter(|t| *t > 0),
            start_time: w.start_time.filter(|t| *t > 0),
            state_reason: Word::new(&text::clean(w.state_reason)),
            node_count: w
                .node_count
                .map_or(1, |n| n.clamp(1, i64::from(u32::MAX)) as u32),
            exclusive: w.shared.iter().any(|x| x == "none" || x == "exclusive"),
            comment: text::clean(w.comment),
            // PENDING/RUNNING jobs report status ["PENDING"] and code 0: not an exit yet.
            exit_code: w.exit_code.return_code.filter(|_| {
                w.exit_code
                    .status
                    .iter()
                    .any(|s| s == "SUCCESS" || s == "ERROR" || s == "SIGNALED")
            }),
            submit_time: w.submit_time.filter(|t| *t > 0),
            time_limit: w.time_limit.filter(|t| *t > 0),
            batch: w.batch_flag,
            requeue: w.requeue,
            pinned: !w.required_nodes.trim().is_empty(),
            qos: Word::new(&text::clean(w.qos)),
            cpus: small(w.cpus),
            gpus: super::gres::JobGpus {
                gres_detail: &w.gres_detail,
                tres_alloc_str: &w.tres_alloc_str,
                tres_req_str: &w.tres_req_str,
                tres_per_job: &w.tres_per_job,
                tres_per_node: &w.tres_per_node,
                tres_per_task: &w.tres_per_task,
                nodes: small(w.node_count),
                tasks: small(w.tasks),
            }
            .count(),
        })
    }
}

#[derive(Deserialize)]
pub struct ReservationsWire {
    #[serde(default)]
    pub reservations: Vec<ReservationWire>,
}

#[derive(Deserialize)]
pub struct ReservationWire {
    name: String,
    #[serde(default)]
    node_list: String,
    #[serde(default, deserialize_with = "number")]
    start_time: Option<i64>,
    #[serde(default, deserialize_with = "number")]
    end_time: Option<i64>,
    #[serde(default)]
    flags: Vec<String>,
}

impl TryFrom<ReservationWire> for Reservation {
    type Error = hostlist::HostlistError;
    fn try_from(w: ReservationWire) -> Result<Reservation, Self::Error> {
        Ok(Reservation {
            name: w.name,
            nodes: hostlist::expand(&w.node_list)?,
            start_time: w.start_time,
            end_time: w.end_time,
            flags: w.flags,
        })
    }
}

#[cfg(test)]
mod tests {
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
}
