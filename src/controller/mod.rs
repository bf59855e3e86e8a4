//! `controller`: one level-triggered reconcile pass — observe, decide, act, return.
//!
//! A pass never waits for the world: it reads the workers (watch cache or one LIST per kind) and
//! Slurm (its nodes, and its jobs when a decision needs them) once, applies what is safe now (a scale-in whose leaving workers
//! still run jobs keeps its replicas; a removed NodeSet's StatefulSet stays until its workers are
//! drained), then moves every NodeSet on by the steps that are safe now — drain the next worker,
//! delete drained pods, resume drains that are no longer needed — each within its own
//! `maxUnavailable`. Whatever must wait (a draining worker with a job) is looked at again by the
//! next pass, which a watch event or the poll interval brings. Progress is read from the cluster
//! and from Slurm's drain reasons, so a restarted daemon or a new leader carries on.
//!
//! One entrance: the daemon (a pass per trigger, forever), `slurmops apply` and `slurmops rollout`
//! (passes until nothing is left to do) all drive `pass`; what a command changes is its `Target`
//! (apply or not, which NodeSets, which moves). `preview` is the same observe and decide with
//! acting turned off: what `plan --cluster` shows the next pass would do.
//!
//! The pass's steps, in order, are `steps.rs`; the rest of this folder is the pass's core, and
//! `features/` holds one folder per feature, each its pure decide and its act.

// The pass's core: its steps in order (`steps.rs`), what it reads, decides and writes.
pub mod act;
mod applying;
mod carry;
pub mod decide;
mod decisions;
pub mod drive;
pub mod early;
pub mod gate;
pub mod kube_only;
pub mod mark;
pub mod observation;
pub mod observe;
mod outcome;
mod pods;
mod preview;
mod steps;
pub mod upkeep;
pub mod watch;
mod written;
// One folder per feature: its pure decide and its act, called from the pass's steps.
pub mod features;

pub use self::observation::SlurmUnknown;
pub use self::outcome::{Next, Outcome, Phases};
pub use self::steps::{accounting_again, pass, preview};
use self::watch::Cache;
use crate::apply::{ApplyError, Options};
use crate::cluster::ClusterFile;
use crate::k8s::Connection;
use crate::render::Rendered;
use crate::rollout::Observer;
pub use decisions::{Moves, Scope as PassScope, decide_pass, policy};
pub use features::decrees::Decrees;
pub use preview::Preview;

/// After a pass acted, passes read the workers with a LIST for this long instead of trusting the
/// watch cache, which may lag behind those writes (read-after-write; watch lag is milliseconds).
pub const FRESH_AFTER_WRITE: std::time::Duration = std::time::Duration::from_secs(2);

/// May this process still write? Checked before every write of a pass.
pub type Fence<'a> = dyn Fn() -> bool + Send + Sync + 'a;

#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("this replica lost the Lease: the pass stopped before its next write")]
    Fenced,
    /// A write to Slurm failed (worker sync, autoscale).
    #[error("Slurm: {0}")]
    Slurm(#[from] crate::slurm::SlurmError),
    #[error(transparent)]
    Scale(#[from] crate::controller::features::autoscale::run::ScaleError),
    #[error("{0}")]
    Missing(String),
}

/// What a pass works towards.
pub struct Target<'a> {
    pub c: &'a ClusterFile,
    pub text: &'a str,
    pub rendered: &'a Rendered,
    /// Server-side apply and prune with these options first; None: only move workers.
    pub apply: Option<&'a Options>,
    /// Which NodeSets, which moves, windows ignored or not.
    pub scope: PassScope,
    /// Read the workers with a LIST, not from the watch cache: the previous pass acted, and the
    /// cache may not have seen its writes yet.
    pub fresh: bool,
    /// An operator's decisions, carried out by this pass before it decides (a command's first).
    pub decrees: Option<&'a Decrees>,
}

/// What a pass runs with.
pub struct Env<'a, S> {
    pub cluster: &'a Connection,
    /// None: no Slurm configured; apply refuses what could kill a job and nothing rolls.
    pub slurm: Option<&'a S>,
    pub cache: Option<&'a Cache>,
    pub fence: &'a Fence<'a>,
    pub observer: &'a Observer,
    /// Seconds a Ready worker may stay unknown to Slurm before it is replaced.
    pub registration_grace: i64,
}

pub(super) fn kube_err(what: &str) -> impl FnOnce(kube::Error) -> PassError + '_ {
    move |source| PassError::Kube {
        what: what.to_string(),
        source,
    }
}

pub(super) fn fenced<S>(env: &Env<'_, S>) -> Result<(), PassError> {
    if (env.fence)() {
        Ok(())
    } else {
        Err(PassError::Fenced)
    }
}
