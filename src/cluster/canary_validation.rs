//! A NodeSet's canary as its validation job needs it: the canary with the partition, the GPUs
//! per worker and the active check it runs, from the rest of cluster.yaml.

use super::active_checks::ActiveCheck;
use super::canary::Canary;
use super::types::{ClusterSpec, NodeSet};

/// A NodeSet's canary with what its validation job needs from the rest of cluster.yaml.
#[derive(Debug, Clone, PartialEq)]
pub struct Validation {
    pub canary: Canary,
    /// The partition the validation jobs run in (the first that holds the NodeSet).
    pub partition: String,
    /// GPUs per worker (the gpu and nccl checks compare with it).
    pub gpus: u32,
    /// The active check the validation runs (`validate.check`), once cluster.yaml is valid.
    pub check: Option<ActiveCheck>,
}

impl Validation {
    /// The canary of NODE_SET in SPEC, when it has one.
    pub fn of(spec: &ClusterSpec, node_set: &NodeSet) -> Option<Self> {
        let canary = node_set.update.canary.clone()?;
        let partition = spec.partition_of(&node_set.name)?.name.clone();
        let check = canary.validate.check.as_ref().and_then(|name| {
            spec.policy
                .active_checks
                .iter()
                .find(|c| &c.name == name)
                .cloned()
        });
        Some(Validation {
            canary,
            partition,
            gpus: node_set.gpus.as_ref().map_or(0, |g| g.count),
            check,
        })
    }
}
