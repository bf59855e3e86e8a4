//! What one pass saw, as plain data: the workers, the PodTemplates and Kubernetes nodes of
//! slurmops-made NodeSets, the block labels of the workers' hosts, Slurm's nodes, jobs and
//! reservations, the maintenance reservations asked of slurmctld's sidecar, and the time.
//! `observe` (I/O) fills it once per pass; `decisions` (pure) decides on it alone.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, PodTemplate};

use super::decide::{SetView, SlurmView};
use crate::slurm::{Reservation, SlurmError};
use crate::vocab::DrainReason;

/// Why Slurm's state is unknown to a pass (so nothing destructive happens), kept typed up to
/// whoever reports it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SlurmUnknown {
    #[error("no slurmrestd configured")]
    NotConfigured,
    /// slurmrestd could not be read, or failed a step of the pass.
    #[error(transparent)]
    Failed(#[from] std::sync::Arc<SlurmError>),
    /// An answer listing no node while workers are Ready is not believed.
    #[error(
        "slurmrestd listed no nodes while {ready} worker(s) are Ready: not trusted, nothing is deleted"
    )]
    Untrusted { ready: usize },
}

impl From<SlurmError> for SlurmUnknown {
    fn from(e: SlurmError) -> SlurmUnknown {
        SlurmUnknown::Failed(std::sync::Arc::new(e))
    }
}

/// By Kubernetes node label, each node's value of it.
pub type HostUnits = BTreeMap<String, BTreeMap<String, String>>;

/// What one pass saw. Each part that could not be read holds why, and stops only the decisions
/// that need it.
#[derive(Debug, Clone)]
pub struct Observation {
    pub sets: BTreeMap<String, SetView>,
    /// The PodTemplates of NodeSets whose pods slurmops makes, by name.
    pub templates: BTreeMap<String, PodTemplate>,
    /// Kubernetes nodes, read when a perNode NodeSet exists.
    pub nodes: Result<Vec<std::sync::Arc<Node>>, String>,
    /// Slurm as read once; an error means Slurm's state is unknown: nothing destructive.
    pub slurm: Result<SlurmView, SlurmUnknown>,
    /// By topology label (`spec.topology`), its value on each Kubernetes node hosting a worker
    /// of that topology's NodeSets (empty without `spec.topology`).
    pub blocks: Result<HostUnits, String>,
    /// Slurm's reservations, read when a NodeSet waits for maintenance windows (else empty),
    /// with those asked of slurmctld's sidecar and not yet made (`in_slurm` tells them apart).
    pub reservations: Result<Reservations, String>,
    /// UNIX seconds.
    pub now: i64,
    /// Wall time spent reading Slurm (nodes, jobs, reservations), for the pass's phase figures.
    pub slurm_time: std::time::Duration,
    /// The node watch is still making its first listing: what needs the Kubernetes nodes
    /// (perNode placement, blocks) waits, and the pass is not done.
    pub nodes_listing: bool,
    /// The cluster's worker pods as read (watch cache or LIST): worker sync reads their Slurm
    /// condition and busy label.
    pub pods: Vec<std::sync::Arc<k8s_openapi::api::core::v1::Pod>>,
    /// Kubernetes nodes with a problem (cordon, a listed condition or taint, a drain request)
    /// and its drain reason, read when worker sync runs; why not, when they could not be read
    /// (then sync neither drains nor resumes for node health).
    pub health: Result<BTreeMap<String, DrainReason>, String>,
    /// Kubernetes nodes whose listed condition or taint asks for requeue (a preemption warning).
    pub requeue: std::collections::BTreeSet<String>,
}

/// Maintenance reservations: those Slurm holds first, then those only asked of the sidecar.
#[derive(Debug, Clone, Default)]
pub struct Reservations {
    pub all: Vec<Reservation>,
    pub in_slurm: usize,
}

impl Observation {
    /// An observation of SETS alone (no Slurm, nodes, blocks or reservations): for tests and
    /// tools that build one by hand.
    pub fn of_sets(
        sets: BTreeMap<String, SetView>,
        slurm: Result<SlurmView, SlurmUnknown>,
        now: i64,
    ) -> Self {
        Observation {
            sets,
            templates: BTreeMap::new(),
            nodes: Ok(Vec::new()),
            slurm,
            blocks: Ok(BTreeMap::new()),
            reservations: Ok(Reservations::default()),
            now,
            slurm_time: std::time::Duration::ZERO,
            nodes_listing: false,
            pods: Vec::new(),
            health: Ok(BTreeMap::new()),
            requeue: Default::default(),
        }
    }
}
