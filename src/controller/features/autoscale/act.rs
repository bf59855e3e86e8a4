//! Autoscale's act: what one autoscaled NodeSet does this pass (`Scale`, decided by the pass's
//! upkeep step) carried out behind the fence — its workers given back, the leaving ones drained,
//! its replicas set. Every write is an Event, handed to DONE as it happens.

use super::Decision;
use crate::cluster::ClusterFile;
use crate::controller::{Fence, PassError};
use crate::k8s::Connection;
use crate::rollout::Event;
use crate::slurm::{Drain, SlurmError, SlurmNodes};
use crate::vocab::DrainReason;

/// What one autoscaled NodeSet does this pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Scale {
    pub node_set: String,
    /// Pods slurmops makes: the count is an annotation of the PodTemplate.
    pub managed: bool,
    /// Replicas now.
    pub from: u32,
    pub decision: Decision,
    /// Leaving workers to drain now (not drained for autoscale yet).
    pub drain: Vec<String>,
    /// The replicas to set this pass, when they change.
    pub to: Option<u32>,
    /// Workers drained for an earlier scale-in that no longer leave: given back to Slurm.
    pub resume: Vec<String>,
}

/// NodeSet S's autoscale, each write behind FENCE: its workers given back, then the leaving ones
/// drained, then its replicas set.
pub(crate) async fn autoscale_set<S: SlurmNodes>(
    cluster: &Connection,
    c: &ClusterFile,
    slurm: &S,
    s: &Scale,
    fence: &Fence<'_>,
    done: &mut impl FnMut(&str, Event),
) -> Result<(), PassError> {
    for n in &s.resume {
        if !fence() {
            return Err(PassError::Fenced);
        }
        match slurm.resume(n).await {
            Ok(_) => done(&s.node_set, Event::Resume { node: n.clone() }),
            Err(SlurmError::UnknownNode(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    for n in &s.drain {
        if !fence() {
            return Err(PassError::Fenced);
        }
        match slurm.drain(n, &DrainReason::Autoscale.to_string()).await {
            Ok(Drain::Requested) => {
                let e = Event::Drain {
                    node: n.clone(),
                    ours: true,
                };
                done(&s.node_set, e);
            }
            // Someone else's drain since the queue was read: theirs; the next pass sees it.
            Ok(_) | Err(SlurmError::UnknownNode(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(to) = s.to {
        if !fence() {
            return Err(PassError::Fenced);
        }
        let why = match &s.decision {
            Decision::ScaleOut { why, .. } | Decision::ScaleIn { why, .. } => why.as_str(),
            Decision::Hold { why } => why.as_str(),
        };
        super::run::set_replicas(cluster, c, &s.node_set, s.managed, s.from, to, why).await?;
        let e = Event::Scaled {
            from: s.from,
            to,
            why: why.to_string(),
        };
        done(&s.node_set, e);
    }
    Ok(())
}
