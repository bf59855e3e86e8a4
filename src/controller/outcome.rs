//! What a pass returns: what it saw and did, where its time went, and what it asks of whoever
//! drives it next.

use std::collections::BTreeMap;

use super::decide::{Progress, SetView, SlurmView};
use super::observation::SlurmUnknown;
use super::upkeep;
use crate::apply::Report;
use crate::rollout::Event;

/// What one pass saw and did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub applied: Option<Report>,
    pub events: Vec<(String, Event)>,
    pub progress: Vec<Progress>,
    /// Slurm could not be read, or failed a step: destructive steps wait for a later pass.
    pub slurm_error: Option<SlurmUnknown>,
    /// What the driver does next.
    pub next: Next,
    /// The workers as observed at the start of the pass.
    pub sets: BTreeMap<String, SetView>,
    pub slurm: Option<SlurmView>,
    /// Where the pass's time went, and what it cost slurmrestd.
    pub phases: Phases,
    pub slurm_traffic: crate::slurm::Traffic,
    /// Worker sync or autoscale failed a write (the pass's other steps are done; the next pass
    /// decides again).
    pub upkeep_error: Option<String>,
    /// What worker sync and autoscale decided this pass (what they wrote is in `events`).
    pub upkeep: upkeep::Upkeep,
    /// Why worker sync could not read the Kubernetes nodes (cordons and node health wait).
    pub health_error: Option<String>,
    /// Controllers behind one address: their roll's step this pass (what it deleted is in
    /// `events`).
    pub controllers: Option<super::features::controllers_roll::Roll>,
}

/// Wall time of each phase of a pass (`/metrics`: `slurmops_pass_phase_seconds`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    /// Workers, PodTemplates, Kubernetes nodes, block labels (watch caches or reads).
    pub observe_kubernetes: std::time::Duration,
    /// Slurm's nodes, jobs when needed, reservations.
    pub observe_slurm: std::time::Duration,
    /// The pure decisions.
    pub decide: std::time::Duration,
    /// Server-side apply, prune and accounting.
    pub apply: std::time::Duration,
    /// Drains, deletions, resumes, submissions, pod creation.
    pub act: std::time::Duration,
}

impl Phases {
    /// Each phase with its metric label.
    pub fn labelled(&self) -> [(&'static str, std::time::Duration); 5] {
        [
            ("observe_kubernetes", self.observe_kubernetes),
            ("observe_slurm", self.observe_slurm),
            ("decide", self.decide),
            ("apply", self.apply),
            ("act", self.act),
        ]
    }
}

/// What a pass asks of whoever drives it next (kube-runtime's `Action`, for a whole cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing left to do: every NodeSet settled on its revision, nothing held or waiting.
    Done,
    /// Work is left: pass again when a watched worker changes or the poll interval passes (at
    /// once when this pass acted), at the latest AT (UNIX seconds: a maintenance window opens, a
    /// canary's time runs out). REAPPLY: that pass applies the objects again (a scale-in or a
    /// removal waits for drains, an upgrade is staged, a control-plane change waits for a window).
    Requeue { reapply: bool, at: Option<i64> },
}

impl Default for Next {
    fn default() -> Next {
        Next::Requeue {
            reapply: false,
            at: None,
        }
    }
}

impl Next {
    pub fn done(self) -> bool {
        self == Next::Done
    }
    pub fn reapply(self) -> bool {
        matches!(self, Next::Requeue { reapply: true, .. })
    }
    pub fn at(self) -> Option<i64> {
        match self {
            Next::Requeue { at, .. } => at,
            Next::Done => None,
        }
    }
}

/// Builds a pass's `Next`.
#[derive(Debug, Default)]
pub(super) struct NextBuilder {
    pub(super) reapply: bool,
    at: Option<i64>,
}

impl NextBuilder {
    pub(super) fn at(&mut self, t: i64) {
        self.at = Some(self.at.map_or(t, |w| w.min(t)));
    }
    pub(super) fn finish(self, done: bool) -> Next {
        match done {
            true => Next::Done,
            false => Next::Requeue {
                reapply: self.reapply,
                at: self.at,
            },
        }
    }
}
