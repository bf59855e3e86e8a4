//! `status`: what slurmops tells people about what it did, without CRDs. Kubernetes Events on
//! the objects it changed (recorded through `events`; repeats counted on one Event), and the
//! daemon's status ConfigMap (`slurmops-status`): commits seen and applied, result, errors,
//! rollout progress, the plan summary.

pub mod bound;
pub mod configmap;
pub mod show;
pub mod verdict;

pub use crate::events::{COMPONENT, Note, Posted, Recorder, SHOWN, node_set_ref, record};
