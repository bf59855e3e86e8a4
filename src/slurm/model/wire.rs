//! The wire shapes of slurmrestd's answers (serde), shared by data parsers v0.0.42 to v0.0.45,
//! and how each becomes what slurmops reads.

use serde::{Deserialize, Deserializer};

use super::job::{Job, state_word};
use super::node::{Node, NodeState};
use super::reservation::Reservation;
use crate::slurm::hostlist;
use crate::slurm::words::Word;
use crate::text;

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
            gpus: crate::slurm::gres::gpus_in_gres(&w.gres),
            alloc_gpus: crate::slurm::gres::gpus_in_gres(&w.gres_used),
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
            gpus: crate::slurm::gres::JobGpus {
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
