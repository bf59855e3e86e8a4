//! One autoscale pass over every autoscaled NodeSet: observe (StatefulSet, pods, Slurm nodes and
//! jobs), decide, act. Scale-out sets replicas; scale-in drains the leaving workers first and
//! lowers replicas only over the ones Slurm reports drained. Every change is recorded on the
//! StatefulSet (annotation and Event).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplate};
use kube::api::{Api, ListParams};
use serde_json::json;

use super::{Capacity, Decision, Observation, WorkerState, decide, demand};
use crate::apply::AUTOSCALE_MANAGER;
use crate::controller::Fence;
use crate::controller::decide::SetView;
use crate::controller::observe::Scope;
use crate::controller::per_node::managed_replicas;
use crate::k8s::Connection;
use crate::render::names::ANNOTATION_REPLICAS as REPLICAS;
use crate::render::names::LABEL_NODESET;
use crate::rollout::pod_ready as ready;
use crate::slurm::{Client, Drain, Node, SlurmError, SlurmNodes, our_reason};
use crate::spec::types::{ClusterFile, NodeSet};
use crate::status::{self, Note};

/// Annotation on the StatefulSet: the last autoscale change and why.
pub use crate::vocab::ANNOTATION_AUTOSCALE as ANNOTATION;
/// Drain reason of autoscale scale-in (prefixed `slurmops: `).
pub use crate::vocab::REASON_AUTOSCALE as REASON;

#[derive(Debug, thiserror::Error)]
pub enum AutoscaleError {
    #[error("autoscale: Slurm state unknown, nothing changed: {0}")]
    Slurm(#[from] SlurmError),
    /// The leader's lease moved during the pass: stopped before its next write.
    #[error("autoscale: the lease moved, stopped before the next write (the new leader goes on)")]
    Fenced,
    #[error("autoscale: NodeSet {node_set}: {what}: {source}")]
    Kube {
        node_set: String,
        what: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// What one pass did for one NodeSet.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub node_set: String,
    pub from: u32,
    pub to: u32,
    pub decision: Decision,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.decision {
            Decision::Hold { why } => write!(
                f,
                "{}: {} worker(s), holding: {why}",
                self.node_set, self.from
            ),
            Decision::ScaleOut { why, .. } | Decision::ScaleIn { why, .. }
                if self.to != self.from =>
            {
                write!(
                    f,
                    "{}: scaled {} -> {}: {why}",
                    self.node_set, self.from, self.to
                )
            }
            Decision::ScaleIn { leaving, .. } => write!(
                f,
                "{}: {} worker(s), waiting for {} to drain before scaling in",
                self.node_set,
                self.from,
                leaving.join(", ")
            ),
            Decision::ScaleOut { .. } => write!(f, "{}: {} worker(s)", self.node_set, self.from),
        }
    }
}

/// One pass over the autoscaled NodeSets of C.
pub async fn tick(
    cluster: &Connection,
    slurm: &Client,
    c: &ClusterFile,
    fence: &Fence<'_>,
) -> Result<Vec<Outcome>, AutoscaleError> {
    let sets: Vec<&NodeSet> = c
        .spec
        .node_sets
        .iter()
        .filter(|n| n.autoscale.is_some())
        .collect();
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    let jobs = slurm.jobs().await?;
    let nodes = slurm.nodes().await?;
    tick_with(cluster, slurm, c, &jobs, &nodes, None, fence).await
}

/// One pass with Slurm's JOBS and NODES as read by the caller (the daemon reads Slurm once per
/// pass) and, when given, the workers as the controller observed them (SETS: no request per
/// NodeSet); otherwise each autoscaled NodeSet's StatefulSet and pods are read.
pub async fn tick_with(
    cluster: &Connection,
    slurm: &Client,
    c: &ClusterFile,
    jobs: &[std::sync::Arc<crate::slurm::Job>],
    nodes: &BTreeMap<String, Node>,
    observed: Option<&BTreeMap<String, SetView>>,
    fence: &Fence<'_>,
) -> Result<Vec<Outcome>, AutoscaleError> {
    let sets = c.spec.node_sets.iter().filter(|n| n.autoscale.is_some());
    // Every autoscaled NodeSet first: a pending job's workers are split among them once.
    let mut seen_sets = Vec::new();
    for ns in sets {
        let seen = match observed {
            Some(v) => v.get(&ns.name).map(|s| seen_of(ns, s, nodes)),
            None => observe(cluster, c, ns, nodes).await?,
        };
        if let Some(o) = seen {
            seen_sets.push((ns, o));
        }
    }
    let mut out = Vec::new();
    for (ns, o, decision) in decisions(c, jobs, seen_sets) {
        let to = act(cluster, slurm, c, ns, &o, &decision, fence).await?;
        out.push(Outcome {
            node_set: ns.name.clone(),
            from: o.replicas,
            to,
            decision,
        });
    }
    Ok(out)
}

/// NodeSet NS's workers as the controller observed them (SET), with Slurm's NODES.
fn seen_of(ns: &NodeSet, s: &SetView, nodes: &BTreeMap<String, Node>) -> Observation {
    let ready = s
        .workers
        .iter()
        .filter(|w| !w.deleting)
        .map(|w| (w.name.clone(), w.ready))
        .collect();
    observation(&ns.name, s.replicas, &ready, nodes, s.managed)
}

/// Each autoscaled NodeSet's decision, pure: the queue's pending JOBS split among the NodeSets
/// SEEN (a pending job's workers asked of one NodeSet only), then each one's rule.
fn decisions<'a>(
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

/// What autoscale would do now, for `plan --cluster`: each autoscaled NodeSet's change (none
/// while it holds), from the controller's observation of the workers (SETS) and Slurm's JOBS
/// and NODES, as the daemon's pass decides it.
pub fn planned(
    c: &ClusterFile,
    jobs: &[std::sync::Arc<crate::slurm::Job>],
    nodes: &BTreeMap<String, Node>,
    sets: &BTreeMap<String, SetView>,
) -> Vec<crate::plan::Step> {
    let seen = c
        .spec
        .node_sets
        .iter()
        .filter(|n| n.autoscale.is_some())
        .filter_map(|ns| Some((ns, seen_of(ns, sets.get(&ns.name)?, nodes))))
        .collect();
    let step = |ns: &NodeSet, action, target: String, detail: String| crate::plan::Step {
        node_set: ns.name.clone(),
        by: crate::plan::StepBy::Autoscale,
        action,
        target,
        detail: format!("autoscale: {detail}"),
    };
    let mut out = Vec::new();
    for (ns, o, d) in decisions(c, jobs, seen) {
        match d {
            Decision::Hold { .. } => {}
            Decision::ScaleOut { to, why } => out.push(step(
                ns,
                "scale",
                ns.name.clone(),
                format!("{} -> {to} workers: {why}", o.replicas),
            )),
            Decision::ScaleIn { to, leaving, why } => {
                for n in leaving {
                    out.push(step(ns, "drain", n, format!("{REASON}: leaving, {why}")));
                }
                out.push(step(
                    ns,
                    "scale",
                    ns.name.clone(),
                    format!("{} -> {to} workers once drained: {why}", o.replicas),
                ));
            }
        }
    }
    out
}

fn kube_err(node_set: &str, what: &'static str) -> impl Fn(kube::Error) -> AutoscaleError {
    let node_set = node_set.to_string();
    move |source| AutoscaleError::Kube {
        node_set: node_set.clone(),
        what,
        source,
    }
}

/// The NodeSet's workers as the autoscaler sees them; None when its StatefulSet does not exist.
async fn observe(
    cluster: &Connection,
    c: &ClusterFile,
    ns: &NodeSet,
    nodes: &BTreeMap<String, Node>,
) -> Result<Option<Observation>, AutoscaleError> {
    let namespace = &c.metadata.namespace;
    let replicas = if ns.managed() {
        let templates: Api<PodTemplate> = Api::namespaced(cluster.client.clone(), namespace);
        let Some(t) = templates
            .get_opt(&ns.name)
            .await
            .map_err(kube_err(&ns.name, "read PodTemplate"))?
        else {
            return Ok(None);
        };
        managed_replicas(&t).unwrap_or(ns.replicas.count())
    } else {
        let sts: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), namespace);
        let Some(s) = sts
            .get_opt(&ns.name)
            .await
            .map_err(kube_err(&ns.name, "read StatefulSet"))?
        else {
            return Ok(None);
        };
        s.spec.and_then(|s| s.replicas).unwrap_or(0).max(0) as u32
    };
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), namespace);
    // This cluster's workers of NS only (another cluster may have a NodeSet of the same name).
    let scope = Scope::cluster(namespace, &c.metadata.name);
    let lp =
        ListParams::default().labels(&format!("{},{LABEL_NODESET}={}", scope.selector, ns.name));
    let ready_pods: BTreeMap<String, bool> = pods
        .list(&lp)
        .await
        .map_err(kube_err(&ns.name, "list pods"))?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| Some((p.metadata.name.clone()?, ready(&p))))
        .collect();
    Ok(Some(observation(
        &ns.name,
        replicas,
        &ready_pods,
        nodes,
        ns.managed(),
    )))
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
) -> Observation {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
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
        return if n.reason.starts_with(&our_reason(REASON)) {
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

/// Carries DECISION out behind FENCE (checked before each write); returns the replicas now set.
async fn act(
    cluster: &Connection,
    slurm: &Client,
    c: &ClusterFile,
    ns: &NodeSet,
    o: &Observation,
    decision: &Decision,
    fence: &Fence<'_>,
) -> Result<u32, AutoscaleError> {
    let fenced = || match fence() {
        true => Ok(()),
        false => Err(AutoscaleError::Fenced),
    };
    match decision {
        Decision::Hold { .. } => Ok(o.replicas),
        Decision::ScaleOut { to, why } => {
            fenced()?;
            set_replicas(cluster, c, ns, o.replicas, *to, why).await?;
            Ok(*to)
        }
        Decision::ScaleIn {
            to: wanted,
            leaving,
            why,
        } => {
            let above_max = o.replicas > ns.autoscale.as_ref().map_or(u32::MAX, |a| a.max);
            let drained = drain_top(slurm, leaving, !above_max, o.any_order, fence).await?;
            // Each one of LEAVING not drained (a job reached it) stays counted.
            let kept = (leaving.len() as u32).saturating_sub(drained);
            let to = (wanted + kept).min(o.replicas);
            if to < o.replicas {
                fenced()?;
                set_replicas(cluster, c, ns, o.replicas, to, why).await?;
            }
            Ok(to)
        }
    }
}

/// Drains LEAVING (highest ordinal last in the list) and waits briefly; returns how many of the
/// highest ordinals are drained (ANY: how many of LEAVING, whatever their place). With GIVE_BACK,
/// the ones a job reached in the meantime are resumed (the scale-in is retried later); otherwise
/// they stay draining until their jobs end.
async fn drain_top(
    slurm: &Client,
    leaving: &[String],
    give_back: bool,
    any: bool,
    fence: &Fence<'_>,
) -> Result<u32, AutoscaleError> {
    let mut held = Vec::new();
    for n in leaving {
        if !fence() {
            return Err(AutoscaleError::Fenced);
        }
        match slurm.drain(n, REASON).await {
            Ok(Drain::Requested | Drain::AlreadyOurs) | Err(SlurmError::UnknownNode(_)) => {}
            // Someone else drained it since we looked: theirs, so it is not removed.
            Ok(Drain::HeldByOther { .. }) => held.push(n.as_str()),
            Err(e) => return Err(e.into()),
        }
    }
    // Idle nodes drain at once; give a job that just started there a moment to show.
    let deadline = Instant::now() + Duration::from_secs(if give_back { 10 } else { 0 });
    let mut done: Vec<&String>;
    loop {
        done = Vec::new();
        for n in leaving.iter().rev() {
            let drained = !held.contains(&n.as_str())
                && match slurm.is_drained(n).await {
                    Ok(true) | Err(SlurmError::UnknownNode(_)) => true,
                    Ok(false) => false,
                    Err(e) => return Err(e.into()),
                };
            if drained {
                done.push(n);
            } else if !any {
                // A StatefulSet removes its highest ordinals only: stop at the first that stays.
                break;
            }
        }
        if done.len() == leaving.len() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    if give_back {
        for n in leaving.iter().filter(|n| !done.contains(n)) {
            if !fence() {
                return Err(AutoscaleError::Fenced);
            }
            match slurm.resume(n).await {
                Ok(_) | Err(SlurmError::UnknownNode(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(done.len() as u32)
}

/// Sets `spec.replicas` as the autoscale field manager, with the reason in an annotation and an
/// Event on the StatefulSet.
async fn set_replicas(
    cluster: &Connection,
    c: &ClusterFile,
    ns: &NodeSet,
    from: u32,
    to: u32,
    why: &str,
) -> Result<(), AutoscaleError> {
    let namespace = &c.metadata.namespace;
    let message = format!("scaled {from} -> {to}: {why}");
    // slurmops makes the pods: the count is an annotation of their PodTemplate.
    let (api_version, kind) = match ns.managed() {
        true => ("v1", "PodTemplate"),
        false => ("apps/v1", "StatefulSet"),
    };
    let body = match ns.managed() {
        true => json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": ns.name, "namespace": namespace,
                         "annotations": {ANNOTATION: message, REPLICAS: to.to_string()}}}),
        false => json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": ns.name, "namespace": namespace,
                         "annotations": {ANNOTATION: message}},
            "spec": {"replicas": to}}),
    };
    let live = cluster
        .apply(&body, AUTOSCALE_MANAGER, true, false)
        .await
        .map_err(kube_err(&ns.name, "set replicas"))?;
    let note = Note {
        involved: ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            name: Some(ns.name.clone()),
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
    let _ = status::record(&cluster.client, note).await;
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
    fn the_plan_shows_the_scale_out_the_queue_asks_for_and_nothing_while_it_holds() {
        let c = crate::spec::load(
            "c.yaml",
            r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {name: c, namespace: slurm}
spec:
  slurmVersion: "24.11"
  auth:
    slurmKey: {name: k, key: slurm.key}
    jwtKey: {name: j, key: jwt_hs256.key}
  nodeSets:
    - {name: a, replicas: 1, cpu: "1", memory: 1Gi, autoscale: {min: 1, max: 4}}
  partitions:
    - {name: p, nodeSets: [a], default: true}
"#,
        )
        .unwrap();
        let worker = crate::controller::decide::Worker {
            name: "a-0".into(),
            uid: "u".into(),
            ordinal: Some(0),
            revision: "r".into(),
            ready: true,
            deleting: false,
            created: Some(0),
            host: None,
            checks: Default::default(),
        };
        let sets = BTreeMap::from([(
            "a".to_string(),
            SetView {
                name: "a".into(),
                replicas: 1,
                update_revision: Some("r".into()),
                workers: vec![worker],
                managed: false,
                canary: None,
                current_revision: Some("r".into()),
            },
        )]);
        let nodes: BTreeMap<String, Node> =
            [("a-0".to_string(), node("a-0", &["ALLOCATED"], "", None))].into();
        let pending = |id| {
            std::sync::Arc::new(crate::slurm::Job {
                id,
                name: "j".into(),
                state: vec!["PENDING".into()],
                partition: "p".into(),
                state_reason: "Resources".into(),
                node_count: 1,
                ..Default::default()
            })
        };
        let steps = planned(&c, &[pending(1), pending(2)], &nodes, &sets);
        let shown: Vec<String> = steps
            .iter()
            .map(|s| format!("{} {} ({}): {}", s.action, s.target, s.node_set, s.detail))
            .collect();
        assert_eq!(shown.len(), 1, "{shown:?}");
        assert!(
            shown[0].starts_with("scale a (a): autoscale: 1 -> 3 workers"),
            "{shown:?}"
        );
        // Nothing pending, the one worker busy: autoscale holds, the plan says nothing.
        assert!(planned(&c, &[], &nodes, &sets).is_empty());
    }

    #[test]
    fn the_workers_come_from_pod_readiness_and_slurm_whoever_observed_them() {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
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
        let o = observation("s", 5, &ready, &nodes, false);
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
