//! Talking to Slurm through slurmrestd, and the drain primitives rollouts rely on.
//!
//! Draining is how slurmops keeps its promise that no running job is killed, so this module is
//! exact and fails closed: any answer it cannot trust is an error, and callers treat an error as
//! "not safe" (nothing destructive follows). Reasons are owned by prefix, as in Slinky's
//! slurmcontrol: slurmops only ever resumes a node whose drain reason starts with `slurmops:`,
//! and never rewrites a reason someone else set.

pub mod auth;
pub mod client;
pub mod connect;
pub mod gres;
pub mod hostlist;
pub mod model;
pub mod words;

use std::future::Future;

pub use client::{Answered, Client, Config, Cover, Known, Replica, Traffic};
pub use model::{
    ApiMessage, DataParser, Job, JobRequest, Node, NodeState, Reservation, ReservationRequest,
};

/// Drain reasons slurmops sets start with this; only such drains are ever resumed by slurmops.
pub use crate::vocab::REASON_PREFIX;

/// The job queue as read: shared, not copied, by every pass that reads it until it changes (at
/// 50,000 jobs a copy is tens of MB of allocation). Each job is shared with the client's kept
/// queue too: a new list after a change costs a pointer per job, not a copy of each.
pub type Jobs = std::sync::Arc<[std::sync::Arc<Job>]>;

/// Slurm's nodes by name, as read: shared by every pass until a node changes (at 10,000 nodes a
/// copy per pass was a good part of an idle pass's time).
pub type Nodes = std::sync::Arc<std::collections::BTreeMap<String, Node>>;

#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("cannot reach slurmrestd at {url}: {detail}")]
    Unreachable { url: String, detail: String },
    #[error(
        "slurmrestd at {url} refused the credentials (HTTP {status}{}): check the JWT (expired? signed with the cluster's jwt key? for a Slurm admin user?)",
        list(errors)
    )]
    Auth {
        url: String,
        status: u16,
        errors: Vec<ApiMessage>,
    },
    #[error("Slurm does not know node {0:?}")]
    UnknownNode(String),
    #[error("slurmrestd {method} {path}: HTTP {status}{}", list(errors))]
    Api {
        method: String,
        path: String,
        status: u16,
        errors: Vec<ApiMessage>,
    },
    #[error("cannot understand slurmrestd's answer from {what}: {detail}")]
    Parse { what: String, detail: String },
    #[error(
        "slurmrestd at {url} serves none of the data parsers slurmops speaks (v0.0.45 to v0.0.42): Slurm 24.11 or newer is needed, with slurmrestd's default data parsers (no -d limiting them)"
    )]
    NoDataParser { url: String },
    #[error("node {node:?} did not leave DRAIN after RESUME (state {state}); it is left as it is")]
    ResumeFailed { node: String, state: String },
    #[error("{0}")]
    Config(String),
    /// slurmrestd did not answer within the request's deadline. Not retried: an answer that
    /// timed out (`jobs/state/` of a large queue) is still being built by slurmrestd, and asking
    /// again only adds load to the users' scheduler; the next pass asks again.
    #[error(
        "slurmrestd at {url} did not answer {path} within {secs} s: not retried (slurmrestd may still be building the answer; the next pass asks again)"
    )]
    Timeout {
        url: String,
        path: String,
        secs: u64,
    },
    /// A whole node list still being answered past a pass's deadline: the request goes on, and
    /// the next pass waits for its answer instead of asking again (each request abandoned and
    /// asked again made slurmrestd build the list once more, behind the ones it still built).
    #[error(
        "slurmrestd at {url} is still answering {path} after {secs} s: the next pass waits for that answer rather than ask again"
    )]
    StillAnswering {
        url: String,
        path: String,
        secs: u64,
    },
    /// An answer over the size slurmops reads. Not retried: it would be as large again.
    #[error(
        "slurmrestd's answer to {path} is larger than {limit_mib} MiB: refused and not retried (too many records for one read); raise the cap with SLURMOPS_SLURM_MAX_ANSWER_MIB (and the daemon's memory limit with it)"
    )]
    TooLarge { path: String, limit_mib: usize },
    /// A queue with more jobs than slurmops keeps records of: those past the cap stay unread.
    #[error(
        "the job queue is larger than slurmops keeps ({limit} jobs) at {path}: the jobs past it are not read, so canary and check verdicts wait (autoscale scales out for the pending jobs read). Raise the cap with SLURMOPS_SLURM_MAX_JOBS (and the daemon's memory limit with it, slurmops install --jobs)"
    )]
    TooManyJobs { path: String, limit: usize },
    /// The job queue is not known yet (its first read is in flight, or failed), or not every job
    /// is read yet where every job is asked for: what needs the jobs waits; everything else goes
    /// on.
    #[error("Slurm's job queue is not known yet: {detail}")]
    QueueUnknown { detail: String },
}

fn list(errors: &[ApiMessage]) -> String {
    if errors.is_empty() {
        String::new()
    } else {
        let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!(": {}", texts.join("; "))
    }
}

impl SlurmError {
    /// Worth another attempt: slurmrestd or slurmctld unreachable for a moment.
    pub fn is_transient(&self) -> bool {
        match self {
            SlurmError::Unreachable { .. } => true,
            SlurmError::Api { status, errors, .. } => {
                matches!(status, 502..=504)
                    || errors.iter().any(|e| {
                        e.error_number
                            .is_some_and(|n| client::errno::COMMUNICATIONS.contains(&n))
                    })
            }
            _ => false,
        }
    }

    /// slurmctld answered with error number N.
    pub fn has_errno(&self, n: i64) -> bool {
        matches!(self, SlurmError::Api { errors, .. } if errors.iter().any(|e| e.error_number == Some(n)))
    }
}

/// What `drain` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drain {
    /// DRAIN set now, with our reason.
    Requested,
    /// Already drained or draining by slurmops; the reason was refreshed.
    AlreadyOurs,
    /// Already drained or draining by someone else: left untouched (their reason stays), and
    /// slurmops will never resume it.
    HeldByOther { reason: String, by: String },
}

/// What `resume` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    Resumed,
    /// The node was not drained: nothing to do.
    NotDrained,
    /// Drained by someone else: refused, the node stays drained.
    HeldByOther {
        reason: String,
        by: String,
    },
}

/// The narrow seam between rollouts and Slurm. Every method fails closed: an error means
/// "unknown", and no caller deletes a pod on an unknown.
pub trait SlurmNodes: Send + Sync {
    /// DRAIN with a `slurmops:`-prefixed reason; harmless to repeat.
    fn drain(
        &self,
        node: &str,
        reason: &str,
    ) -> impl Future<Output = Result<Drain, SlurmError>> + Send;
    /// DRAIN set, not UNDRAIN, and nothing ALLOCATED / MIXED / COMPLETING.
    fn is_drained(&self, node: &str) -> impl Future<Output = Result<bool, SlurmError>> + Send;
    /// RESUME, only when the drain reason is ours.
    fn resume(&self, node: &str) -> impl Future<Output = Result<Resume, SlurmError>> + Send;
    /// Jobs holding the node (running, suspended, completing), with their expected end.
    fn jobs_on(&self, node: &str) -> impl Future<Output = Result<Vec<Job>, SlurmError>> + Send;
    /// The node as Slurm sees it (`UnknownNode` when it is not registered).
    fn get(&self, node: &str) -> impl Future<Output = Result<Node, SlurmError>> + Send;
    /// Every node, in one request.
    fn all_nodes(&self) -> impl Future<Output = Result<Nodes, SlurmError>> + Send;
    /// Every job (see `Client::jobs` for how the queue is kept current).
    fn all_jobs(&self) -> impl Future<Output = Result<Jobs, SlurmError>> + Send;
    /// The jobs read so far and how much of the queue that is (a large queue is read job by job
    /// after a start; see `Client::jobs_known`). By default every job, from `all_jobs`.
    fn known_jobs(&self) -> impl Future<Output = Result<Known, SlurmError>> + Send {
        async { Ok(Known::all(self.all_jobs().await?)) }
    }
    /// Puts the node in a block (`TOPOLOGY:BLOCK`); harmless to repeat.
    fn set_topology(
        &self,
        node: &str,
        topology: &str,
    ) -> impl Future<Output = Result<(), SlurmError>> + Send;
    /// The Slurm user the jobs slurmops submits run as (`Config::job_user`), when known: the
    /// owner of every job it submits.
    fn submitter(&self) -> Option<String> {
        None
    }
    /// Submits a batch job slurmops runs itself (a canary's validation); its id.
    fn submit(&self, job: &JobRequest) -> impl Future<Output = Result<u64, SlurmError>> + Send;
    /// Job ID as slurmctld has it now (its comment included); None once it left the queue.
    fn job(&self, id: u64) -> impl Future<Output = Result<Option<Job>, SlurmError>> + Send {
        let _ = id;
        async { Ok(None) }
    }
    /// Cancels a job slurmops submitted; harmless when it ended already.
    fn cancel(&self, id: u64) -> impl Future<Output = Result<(), SlurmError>> + Send;
    /// Every reservation.
    fn reservations(&self) -> impl Future<Output = Result<Vec<Reservation>, SlurmError>> + Send;
    /// Makes a maintenance reservation (Slurm 25.05 and later through slurmrestd).
    fn reserve(
        &self,
        r: &ReservationRequest,
    ) -> impl Future<Output = Result<(), SlurmError>> + Send;
    /// Deletes a reservation; harmless when it is gone.
    fn unreserve(&self, name: &str) -> impl Future<Output = Result<(), SlurmError>> + Send;
    /// Sets NODE DOWN, while it is drained by slurmops (its reason, REASON, stays): Slurm requeues
    /// the batch jobs on it that may be requeued, and kills the others, so the caller asks only
    /// for a node whose every job may be. False (nothing written) when the node's drain is no
    /// longer slurmops's.
    fn requeue_on(
        &self,
        node: &str,
        reason: &str,
    ) -> impl Future<Output = Result<bool, SlurmError>> + Send;
    /// Requests sent and answer bytes read so far (what the passes cost slurmrestd).
    fn traffic(&self) -> Traffic;
}

/// `slurmops: REASON` unless REASON already carries the prefix.
pub fn our_reason(reason: &str) -> String {
    let r = reason.trim();
    if r.starts_with(REASON_PREFIX) {
        r.to_string()
    } else {
        format!("{REASON_PREFIX} {r}")
    }
}

pub fn is_ours(node: &Node) -> bool {
    node.reason.starts_with(REASON_PREFIX)
}

impl SlurmNodes for Client {
    fn submitter(&self) -> Option<String> {
        self.job_user().ok().map(str::to_string)
    }

    async fn drain(&self, node: &str, reason: &str) -> Result<Drain, SlurmError> {
        let current = self.node(node).await?;
        let outcome = if !current.state.has("DRAIN") {
            Drain::Requested
        } else if is_ours(&current) {
            Drain::AlreadyOurs
        } else {
            return Ok(Drain::HeldByOther {
                reason: current.reason,
                by: current.reason_set_by_user,
            });
        };
        self.update_node(node, "DRAIN", Some(&our_reason(reason)))
            .await?;
        Ok(outcome)
    }

    async fn requeue_on(&self, node: &str, reason: &str) -> Result<bool, SlurmError> {
        let current = self.node(node).await?;
        if !current.state.has("DRAIN") || !is_ours(&current) {
            return Ok(false);
        }
        self.update_node(node, "DOWN", Some(&our_reason(reason)))
            .await?;
        Ok(true)
    }

    async fn is_drained(&self, node: &str) -> Result<bool, SlurmError> {
        Ok(self.node(node).await?.state.is_drained())
    }

    async fn resume(&self, node: &str) -> Result<Resume, SlurmError> {
        let current = self.node(node).await?;
        if !current.state.has("DRAIN") {
            return Ok(Resume::NotDrained);
        }
        if !is_ours(&current) {
            return Ok(Resume::HeldByOther {
                reason: current.reason,
                by: current.reason_set_by_user,
            });
        }
        match self.update_node(node, "RESUME", None).await {
            Ok(()) => {}
            // RESUME is not idempotent: Slurm answers "invalid state" when the node was resumed
            // already (e.g. our earlier attempt landed). Decide from the state itself.
            Err(SlurmError::Api { errors, .. })
                if errors.iter().any(|e| {
                    e.error_number.is_some_and(|n| {
                        [
                            client::errno::INVALID_NODE_STATE,
                            client::errno::INVALID_NODE_STATE_TRANSITION,
                        ]
                        .contains(&n)
                    })
                }) => {}
            Err(e) => return Err(e),
        }
        let after = self.node(node).await?;
        if after.state.has("DRAIN") {
            return Err(SlurmError::ResumeFailed {
                node: node.into(),
                state: after.state.to_string(),
            });
        }
        Ok(Resume::Resumed)
    }

    async fn get(&self, node: &str) -> Result<Node, SlurmError> {
        self.node(node).await
    }

    async fn all_nodes(&self) -> Result<Nodes, SlurmError> {
        self.nodes().await
    }

    async fn all_jobs(&self) -> Result<Jobs, SlurmError> {
        self.jobs().await
    }

    async fn known_jobs(&self) -> Result<Known, SlurmError> {
        self.jobs_known().await
    }

    async fn set_topology(&self, node: &str, topology: &str) -> Result<(), SlurmError> {
        Client::set_topology(self, node, topology).await
    }

    async fn submit(&self, job: &JobRequest) -> Result<u64, SlurmError> {
        Client::submit(self, job).await
    }

    async fn cancel(&self, id: u64) -> Result<(), SlurmError> {
        Client::cancel(self, id).await
    }

    async fn job(&self, id: u64) -> Result<Option<Job>, SlurmError> {
        self.job_record(id).await
    }

    async fn reservations(&self) -> Result<Vec<Reservation>, SlurmError> {
        Client::reservations(self).await
    }

    async fn reserve(&self, r: &ReservationRequest) -> Result<(), SlurmError> {
        self.create_reservation(r).await
    }

    async fn unreserve(&self, name: &str) -> Result<(), SlurmError> {
        self.delete_reservation(name).await
    }

    fn traffic(&self) -> Traffic {
        Client::traffic(self)
    }

    async fn jobs_on(&self, node: &str) -> Result<Vec<Job>, SlurmError> {
        // An unknown node is an error, not "no jobs". A node that is not ALLOCATED, MIXED or
        // COMPLETING holds no job: the queue (tens of MB on a busy cluster) is not read.
        if !self.node(node).await?.state.is_busy() {
            return Ok(Vec::new());
        }
        let jobs = self.jobs().await?;
        Ok(jobs
            .iter()
            .filter(|j| j.holds_nodes() && j.nodes.iter().any(|n| n == node))
            .map(|j| Job::clone(j))
            .collect())
    }
}
