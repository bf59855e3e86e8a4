//! `rollout`: replacing a NodeSet's workers without killing a job. Workers are OnDelete
//! StatefulSets, so nothing changes until slurmops deletes a pod, and slurmops deletes a pod only
//! once Slurm says its node is drained: DRAIN set and nothing allocated or completing.
//!
//! Each pass reads the StatefulSet, its pods and their Slurm nodes, then: deletes outdated pods
//! whose nodes are drained; resumes nodes slurmops drained once their new pod is Ready and
//! registered; and starts draining the next outdated workers while fewer than `maxUnavailable` are
//! out (draining, deleted, not Ready, or missing). Any doubt about Slurm stops the rollout before
//! anything is deleted (fail closed); a rollout that stops progressing halts with the reason.

pub mod select;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};

use crate::render::names::LABEL_NODESET;
use crate::slurm::{Drain, REASON_PREFIX, SlurmError, SlurmNodes};
pub use select::{Candidate, order};

#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    #[error("NodeSet {node_set}: Slurm state unknown, so nothing was deleted: {source}")]
    SlurmUnknown {
        node_set: String,
        #[source]
        source: SlurmError,
    },
    #[error("NodeSet {node_set}: {what}: {source}")]
    Kube {
        node_set: String,
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "NodeSet {node_set}: rollout halted, no progress for {after:?}: {waiting}. No further node is drained until this is resolved"
    )]
    Stalled {
        node_set: String,
        after: Duration,
        waiting: String,
    },
}

/// How a rollout behaves (from the NodeSet's `update` settings).
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_unavailable: u32,
    /// After this long draining, `force` deletes the pod anyway; otherwise slurmops keeps waiting.
    pub drain_timeout: Option<Duration>,
    pub force_after_timeout: bool,
    /// A replaced worker must be Ready and registered in Slurm within this time.
    pub progress_timeout: Duration,
    pub poll: Duration,
}

impl Settings {
    /// The NodeSet's `update` policy from cluster.yaml.
    pub fn of(ns: &crate::spec::types::NodeSet) -> Settings {
        let u = &ns.update;
        Settings {
            max_unavailable: u.max_unavailable.resolve(ns.replicas).max(1),
            drain_timeout: Some(Duration::from_secs(u.drain_timeout.as_secs())),
            force_after_timeout: matches!(u.on_timeout, crate::spec::types::OnTimeout::Force),
            ..Settings::default()
        }
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_unavailable: 1,
            drain_timeout: None,
            force_after_timeout: false,
            progress_timeout: Duration::from_secs(300),
            poll: Duration::from_millis(500),
        }
    }
}

/// What happened to one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Drain { node: String, ours: bool },
    Delete { pod: String, forced: bool },
    Ready { pod: String },
    Resume { node: String },
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    pub events: Vec<Event>,
    pub replaced: Vec<String>,
}

struct Worker {
    name: String,
    uid: String,
    ready: bool,
    updated: bool,
    deleting: bool,
}

fn workers(pods: Vec<Pod>, update_revision: &str) -> BTreeMap<String, Worker> {
    pods.into_iter()
        .filter_map(|p| {
            let name = p.metadata.name.clone()?;
            let rev = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("controller-revision-hash"))
                .cloned()
                .unwrap_or_default();
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            Some((
                name.clone(),
                Worker {
                    name,
                    uid: p.metadata.uid.clone().unwrap_or_default(),
                    ready,
                    updated: rev == update_revision,
                    deleting: p.metadata.deletion_timestamp.is_some(),
                },
            ))
        })
        .collect()
}

/// A worker slurmops is replacing: drained since, deleted at (then waiting for the new pod).
struct InFlight {
    drained_since: Instant,
    ours: bool,
    deleted_at: Option<Instant>,
}

/// Rolls NODE_SET in NAMESPACE until every worker runs the StatefulSet's update revision.
pub async fn roll(
    client: &kube::Client,
    slurm: &impl SlurmNodes,
    namespace: &str,
    node_set: &str,
    settings: &Settings,
    reason: &str,
) -> Result<Report, RolloutError> {
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let kube_err = |what: &str| {
        let what = what.to_string();
        let node_set = node_set.to_string();
        move |source| RolloutError::Kube {
            node_set: node_set.clone(),
            what: what.clone(),
            source,
        }
    };
    let slurm_err = |source| RolloutError::SlurmUnknown {
        node_set: node_set.to_string(),
        source,
    };
    let mut report = Report::default();
    let mut in_flight: BTreeMap<String, InFlight> = BTreeMap::new();
    let mut progress_at = Instant::now();
    loop {
        let sts = sts_api
            .get(node_set)
            .await
            .map_err(kube_err("read StatefulSet"))?;
        let replicas = sts
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1)
            .max(0) as usize;
        let status = sts.status.clone().unwrap_or_default();
        // The update revision is only meaningful once the controller saw this generation.
        let seen = status.observed_generation.unwrap_or(0) >= sts.metadata.generation.unwrap_or(0);
        let Some(revision) = status.update_revision.clone().filter(|_| seen) else {
            tokio::time::sleep(settings.poll).await;
            continue;
        };
        let lp = ListParams::default().labels(&format!("{LABEL_NODESET}={node_set}"));
        let pods = pods_api.list(&lp).await.map_err(kube_err("list pods"))?;
        let ws = workers(pods.items, &revision);

        // 1. Replaced workers: once the new pod is Ready and its node registered, resume our drain.
        for (name, f) in in_flight.iter_mut().filter(|(_, f)| f.deleted_at.is_some()) {
            let Some(w) = ws.get(name) else { continue };
            if !(w.ready && w.updated && !w.deleting) {
                continue;
            }
            let node = match slurm.get(name).await {
                Ok(n) => n,
                Err(SlurmError::UnknownNode(_)) => continue,
                Err(e) => return Err(slurm_err(e)),
            };
            if node.state.has("NOT_RESPONDING") || node.state.has("INVALID_REG") {
                continue;
            }
            if f.ours && node.state.has("DRAIN") && node.reason.starts_with(REASON_PREFIX) {
                slurm.resume(name).await.map_err(slurm_err)?;
                report.events.push(Event::Resume { node: name.clone() });
            }
            report.events.push(Event::Ready { pod: name.clone() });
            report.replaced.push(name.clone());
            f.deleted_at = None;
            f.drained_since = Instant::now();
            progress_at = Instant::now();
        }
        in_flight.retain(|name, f| {
            !(f.deleted_at.is_none() && ws.get(name).is_some_and(|w| w.updated && w.ready))
        });

        // 2. Draining workers: delete those Slurm reports drained (or forced after the timeout).
        for (name, f) in in_flight.iter_mut().filter(|(_, f)| f.deleted_at.is_none()) {
            let Some(w) = ws.get(name) else { continue };
            let drained = slurm.is_drained(name).await.map_err(slurm_err)?;
            let timed_out = settings
                .drain_timeout
                .is_some_and(|t| f.drained_since.elapsed() > t);
            let forced = timed_out && settings.force_after_timeout;
            if !(drained || forced) {
                continue;
            }
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(w.uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            pods_api
                .delete(name, &dp)
                .await
                .map_err(kube_err("delete pod"))?;
            report.events.push(Event::Delete {
                pod: name.clone(),
                forced: !drained,
            });
            f.deleted_at = Some(Instant::now());
            progress_at = Instant::now();
        }

        // 3. Done?
        let outdated: Vec<&Worker> = ws.values().filter(|w| !w.updated && !w.deleting).collect();
        let all_ready = ws.len() == replicas && ws.values().all(|w| w.ready && w.updated);
        if outdated.is_empty() && all_ready && in_flight.is_empty() {
            return Ok(report);
        }

        // 4. Start draining more while fewer than maxUnavailable workers are out.
        let missing = replicas.saturating_sub(ws.len());
        let out = missing
            + ws.values()
                .filter(|w| !w.ready || w.deleting || in_flight.contains_key(&w.name))
                .count();
        let room = (settings.max_unavailable as usize).saturating_sub(out);
        if room > 0 {
            let mut candidates = Vec::new();
            for w in outdated.iter().filter(|w| !in_flight.contains_key(&w.name)) {
                let jobs = match slurm.jobs_on(&w.name).await {
                    Ok(j) => j,
                    Err(SlurmError::UnknownNode(_)) => Vec::new(),
                    Err(e) => return Err(slurm_err(e)),
                };
                candidates.push(Candidate {
                    pod: w.name.clone(),
                    ready: w.ready,
                    jobs,
                });
            }
            for pod in order(&candidates).into_iter().take(room) {
                let ours = match slurm.drain(&pod, reason).await {
                    Ok(Drain::Requested | Drain::AlreadyOurs) => true,
                    Ok(Drain::HeldByOther { .. }) => false,
                    // Not registered in Slurm: nothing can run there; replace it.
                    Err(SlurmError::UnknownNode(_)) => false,
                    Err(e) => return Err(slurm_err(e)),
                };
                report.events.push(Event::Drain {
                    node: pod.clone(),
                    ours,
                });
                in_flight.insert(
                    pod,
                    InFlight {
                        drained_since: Instant::now(),
                        ours,
                        deleted_at: None,
                    },
                );
                progress_at = Instant::now();
            }
        }

        // 5. A replacement that never comes back halts the rollout.
        let stuck: Vec<String> = in_flight
            .iter()
            .filter(|(_, f)| {
                f.deleted_at
                    .is_some_and(|t| t.elapsed() > settings.progress_timeout)
            })
            .map(|(n, _)| format!("{n} (replaced, not Ready and registered)"))
            .collect();
        if !stuck.is_empty() && progress_at.elapsed() > settings.progress_timeout {
            return Err(RolloutError::Stalled {
                node_set: node_set.to_string(),
                after: settings.progress_timeout,
                waiting: stuck.join(", "),
            });
        }
        tokio::time::sleep(settings.poll).await;
    }
}

/// Scale-in preparation: drains the workers a StatefulSet will remove when its replicas go down to
/// TARGET (the highest ordinals) and waits until Slurm reports every one drained, so that the
/// apply lowering `spec.replicas` deletes no pod that runs a job.
pub async fn drain_for_scale_in(
    client: &kube::Client,
    slurm: &impl SlurmNodes,
    namespace: &str,
    node_set: &str,
    target: u32,
    settings: &Settings,
    reason: &str,
) -> Result<Vec<String>, RolloutError> {
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("{LABEL_NODESET}={node_set}"));
    let pods = pods_api
        .list(&lp)
        .await
        .map_err(|source| RolloutError::Kube {
            node_set: node_set.into(),
            what: "list pods".into(),
            source,
        })?;
    let mut leaving: Vec<(u32, String)> = pods
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .filter_map(|n| {
            let i: u32 = n.rsplit_once('-')?.1.parse().ok()?;
            (i >= target).then_some((i, n))
        })
        .collect();
    leaving.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
    let slurm_err = |source| RolloutError::SlurmUnknown {
        node_set: node_set.to_string(),
        source,
    };
    for (_, n) in &leaving {
        match slurm.drain(n, reason).await {
            Ok(_) | Err(SlurmError::UnknownNode(_)) => {}
            Err(e) => return Err(slurm_err(e)),
        }
    }
    let start = Instant::now();
    loop {
        let mut waiting = Vec::new();
        for (_, n) in &leaving {
            match slurm.is_drained(n).await {
                Ok(true) | Err(SlurmError::UnknownNode(_)) => {}
                Ok(false) => waiting.push(n.clone()),
                Err(e) => return Err(slurm_err(e)),
            }
        }
        if waiting.is_empty() {
            return Ok(leaving.into_iter().map(|(_, n)| n).collect());
        }
        if let Some(t) = settings.drain_timeout
            && start.elapsed() > t
        {
            return Err(RolloutError::Stalled {
                node_set: node_set.into(),
                after: t,
                waiting: format!("{} still running jobs", waiting.join(", ")),
            });
        }
        tokio::time::sleep(settings.poll).await;
    }
}
