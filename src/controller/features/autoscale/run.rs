//! Autoscale on the controller pass's observation: each autoscaled NodeSet's workers as the
//! autoscaler sees them (`seen_of`), the decisions with the queue's demand split among them
//! (`decisions`, pure), and the one write of its own, the replicas (`set_replicas`, recorded on
//! the workload as an annotation and an Event). The pass carries the decisions out
//! (`controller::upkeep`): a scale-out sets the replicas; a scale-in drains the leaving workers
//! first and lowers the replicas only over the ones Slurm reports drained.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use serde_json::json;

use super::{Capacity, Decision, Observation, WorkerState, decide, demand};
use crate::apply::AUTOSCALE_MANAGER;
use crate::cluster::types::{ClusterFile, NodeSet};
use crate::controller::decide::SetView;
use crate::events::{self, Note};
use crate::k8s::Connection;
use crate::render::names::ANNOTATION_REPLICAS as REPLICAS;
use crate::slurm::Node;

/// Annotation on the StatefulSet: the last autoscale change and why.
pub use crate::vocab::ANNOTATION_AUTOSCALE as ANNOTATION;
/// Drain reason of autoscale scale-in (prefixed `slurmops: `).
use crate::vocab::DrainReason;

#[derive(Debug, thiserror::Error)]
#[error("autoscale: NodeSet {node_set}: {what}: {source}")]
pub struct ScaleError {
    node_set: String,
    what: &'static str,
    #[source]
    source: kube::Error,
}

/// NodeSet NS's workers as the controller observed them (SET), with Slurm's NODES, at NOW (UNIX
/// seconds).
pub fn seen_of(ns: &NodeSet, s: &SetView, nodes: &BTreeMap<String, Node>, now: i64) -> Observation {
    let ready = s
        .workers
        .iter()
        .filter(|w| !w.deleting)
        .map(|w| (w.name.clone(), w.ready))
        .collect();
    observation(&ns.name, s.replicas, &ready, nodes, s.managed, now)
}

/// NodeSet NODE_SET's REPLICAS workers (`NODE_SET-0..REPLICAS`) seen through Slurm's NODES
/// alone, before any pod is known (`controller::early`): each worker Slurm knows counts as if its
/// pod were Ready, so that Slurm's state (busy, drained, idle) is what it is; one Slurm does not
/// know is starting.
pub fn seen_through_slurm(
    node_set: &str,
    replicas: u32,
    nodes: &BTreeMap<String, Node>,
    now: i64,
) -> Observation {
    let known = (0..replicas)
        .map(|i| format!("{node_set}-{i}"))
        .map(|n| {
            let known = nodes.contains_key(&n);
            (n, known)
        })
        .collect();
    observation(node_set, replicas, &known, nodes, false, now)
}

/// Each autoscaled NodeSet's decision, pure: the queue's pending JOBS split among the NodeSets
/// SEEN (a pending job's workers asked of one NodeSet only), then each one's rule.
pub fn decisions<'a>(
    c: &ClusterFile,
    jobs: &[std::sync::Arc<crate::slurm::Job>],
    seen: Vec<(&'a NodeSet, Observation)>,
) -> Vec<(&'a NodeSet, Observation, Decision)> {
    let capacity: BTreeMap<String, Capacity> = seen
        .iter()
        .filter_map(|(ns, o)| {
            let rule = ns.autoscale.as_ref()?;
            let busy = o
                .workers
                .iter()
                .filter(|(_, s)| *s == WorkerState::Busy)
                .count() as u32;
            Some((
                ns.name.clone(),
                Capacity {
                    replicas: o.replicas,
                    busy,
                    max: rule.max,
                    weight: ns.weight.unwrap_or(1),
                    per_replica: rule.pending_jobs_per_replica,
                },
            ))
        })
        .collect();
    let asked = demand(c, jobs, &capacity);
    seen.into_iter()
        .filter_map(|(ns, mut o)| {
            let rule = ns.autoscale.as_ref()?;
            o.pending = asked.get(&ns.name).copied().unwrap_or(0);
            let decision = decide(rule, &o);
            Some((ns, o, decision))
        })
        .collect()
}

/// The autoscaler's view of NODE_SET: REPLICAS workers, their pods' readiness (READY_PODS by
/// name) and their Slurm NODES. MANAGED (slurmops makes the pods): the workers are its pods,
/// whatever their ordinals.
fn observation(
    node_set: &str,
    replicas: u32,
    ready_pods: &BTreeMap<String, bool>,
    nodes: &BTreeMap<String, Node>,
    managed: bool,
    now: i64,
) -> Observation {
    let names: Vec<String> = if managed {
        let mut names: Vec<(Option<u32>, &String)> = ready_pods
            .keys()
            .map(|n| (n.rsplit_once('-').and_then(|(_, i)| i.parse().ok()), n))
            .collect();
        names.sort();
        names.into_iter().map(|(_, n)| n.clone()).collect()
    } else {
        (0..replicas).map(|i| format!("{node_set}-{i}")).collect()
    };
    let workers = names
        .into_iter()
        .map(|name| {
            let state = worker_state(ready_pods.get(&name).copied(), nodes.get(&name), now);
            (name, state)
        })
        .collect();
    Observation {
        replicas,
        pending: 0,
        workers,
        any_order: managed,
    }
}

fn worker_state(pod_ready: Option<bool>, node: Option<&Node>, now: i64) -> WorkerState {
    let Some(n) = node.filter(|_| pod_ready == Some(true)) else {
        return WorkerState::Starting;
    };
    if n.state.is_busy() {
        return WorkerState::Busy;
    }
    if n.state.has("DRAIN") {
        return if DrainReason::parse(&n.reason) == Some(DrainReason::Autoscale) {
            WorkerState::DrainedByUs
        } else {
            WorkerState::HeldByOther {
                reason: n.reason.clone(),
            }
        };
    }
    if n.state.has("NOT_RESPONDING") {
        return WorkerState::Starting;
    }
    let idle = n.last_busy.map_or(0, |t| (now - t).max(0)) as u64;
    WorkerState::Idle {
        for_: Duration::from_secs(idle),
    }
}

/// Sets `spec.replicas` as the autoscale field manager, with the reason in an annotation and an
/// Event on the StatefulSet.
pub async fn set_replicas(
    cluster: &Connection,
    c: &ClusterFile,
    name: &str,
    managed: bool,
    from: u32,
    to: u32,
    why: &str,
) -> Result<(), ScaleError> {
    let namespace = &c.metadata.namespace;
    let message = format!("scaled {from} -> {to}: {why}");
    // slurmops makes the pods: the count is an annotation of their PodTemplate.
    let (api_version, kind) = match managed {
        true => ("v1", "PodTemplate"),
        false => ("apps/v1", "StatefulSet"),
    };
    let body = match managed {
        true => json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {ANNOTATION: message, REPLICAS: to.to_string()}}}),
        false => json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {ANNOTATION: message}},
            "spec": {"replicas": to}}),
    };
    let live = cluster
        .apply(&body, AUTOSCALE_MANAGER, true, false)
        .await
        .map_err(|source| ScaleError {
            node_set: name.to_string(),
            what: "set replicas",
            source,
        })?;
    let note = Note {
        involved: ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            name: Some(name.to_string()),
            namespace: Some(namespace.clone()),
            uid: live.metadata.uid,
            ..ObjectReference::default()
        },
        reason: if to > from {
            crate::vocab::EVENT_SCALED_OUT
        } else {
            crate::vocab::EVENT_SCALED_IN
        },
        message,
        warning: false,
    };
    // The Event is for people; failing to record it does not undo the scale.
    let _ = events::record(&cluster.client, note).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::NodeState;

    fn node(name: &str, flags: &[&str], reason: &str, last_busy: Option<i64>) -> Node {
        Node {
            name: name.into(),
            state: NodeState(flags.iter().map(|f| f.to_string()).collect()),
            reason: reason.into(),
            last_busy,
            ..Node::default()
        }
    }

    #[test]
    fn the_workers_come_from_pod_readiness_and_slurm_whoever_observed_them() {
        let now = 1_800_000_000;
        let ready = BTreeMap::from([
            ("s-0".to_string(), true),
            ("s-1".to_string(), false),
            ("s-2".to_string(), true),
            ("s-3".to_string(), true),
        ]);
        let nodes: BTreeMap<String, Node> = [
            node("s-0", &["IDLE"], "", Some(now - 100)),
            node("s-1", &["IDLE"], "", Some(now)),
            node("s-2", &["IDLE", "DRAIN"], "slurmops: autoscale", None),
            node("s-3", &["MIXED"], "", None),
        ]
        .into_iter()
        .map(|n| (n.name.clone(), n))
        .collect();
        let o = observation("s", 5, &ready, &nodes, false, now);
        assert_eq!(o.replicas, 5);
        let states: Vec<&WorkerState> = o.workers.iter().map(|(_, s)| s).collect();
        assert!(
            matches!(states[0], WorkerState::Idle { for_ } if for_.as_secs() >= 100),
            "{states:?}"
        );
        assert_eq!(states[1], &WorkerState::Starting, "pod not Ready");
        assert_eq!(states[2], &WorkerState::DrainedByUs);
        assert_eq!(states[3], &WorkerState::Busy);
        assert_eq!(states[4], &WorkerState::Starting, "no pod yet");
    }
}
