//! `rollout`: replacing a NodeSet's workers without killing a job. Workers are OnDelete
//! StatefulSets, so nothing changes until slurmops deletes a pod, and slurmops deletes a pod only
//! once Slurm says its node is drained: DRAIN set and nothing allocated or completing.
//!
//! Each pass reads the StatefulSet, its pods and their Slurm nodes, then: deletes outdated pods
//! whose nodes are drained; resumes nodes slurmops drained once their new pod is Ready and
//! registered; and starts draining the next outdated workers while fewer than `maxUnavailable` are
//! out (draining, deleted, not Ready, or missing). Any doubt about Slurm stops the rollout before
//! anything is deleted (fail closed); a rollout that stops progressing halts with the reason.
//!
//! slurmrestd going away mid-rollout pauses the rollout: nothing is deleted while Slurm cannot be
//! asked, and it picks up where it was once Slurm answers again (or gives up after
//! `slurm_outage_timeout`). A worker Slurm does not know is replaced only when its pod is not
//! Ready (slurmd is not up there) or after `registration_grace` (it never registered).

mod pass;
pub mod select;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use crate::render::names::LABEL_NODESET;
use crate::slurm::{SlurmError, SlurmNodes};
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
    /// How long slurmrestd may stay unreachable before the rollout gives up (nothing is deleted
    /// meanwhile).
    pub slurm_outage_timeout: Duration,
    /// A Ready worker whose Slurm node is unknown this long never registered: replaced.
    pub registration_grace: Duration,
    pub poll: Duration,
    /// Called with every event as it happens (progress on the terminal, logs).
    pub observer: Observer,
}

/// A callback for rollout events.
#[derive(Clone, Default)]
pub struct Observer(Option<std::sync::Arc<ObserverFn>>);

type ObserverFn = dyn Fn(&str, &Event) + Send + Sync;

impl Observer {
    pub fn new(f: impl Fn(&str, &Event) + Send + Sync + 'static) -> Observer {
        Observer(Some(std::sync::Arc::new(f)))
    }
    fn emit(&self, node_set: &str, e: &Event) {
        if let Some(f) = &self.0 {
            f(node_set, e)
        }
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Observer(..)"
        } else {
            "Observer(none)"
        })
    }
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
            slurm_outage_timeout: Duration::from_secs(3600),
            registration_grace: Duration::from_secs(300),
            poll: Duration::from_millis(500),
            observer: Observer::default(),
        }
    }
}

/// What happened to one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Drain {
        node: String,
        ours: bool,
    },
    Delete {
        pod: String,
        forced: bool,
    },
    Ready {
        pod: String,
    },
    Resume {
        node: String,
    },
    /// slurmrestd cannot be asked: the rollout pauses, nothing is deleted.
    SlurmUnreachable {
        error: String,
    },
    /// Slurm answers again: the rollout goes on.
    SlurmBack,
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Drain { node, ours: true } => write!(f, "draining {node}"),
            Event::Drain { node, ours: false } => {
                write!(f, "{node} already drained by someone else (left to them)")
            }
            Event::Delete { pod, forced: false } => write!(f, "{pod} drained, pod deleted"),
            Event::Delete { pod, forced: true } => {
                write!(
                    f,
                    "{pod} drain timed out, pod deleted anyway (policy force)"
                )
            }
            Event::Ready { pod } => write!(f, "{pod} replaced, Ready and registered"),
            Event::Resume { node } => write!(f, "{node} resumed"),
            Event::SlurmUnreachable { error } => write!(
                f,
                "Slurm unreachable, rollout paused, nothing is deleted until it answers: {error}"
            ),
            Event::SlurmBack => write!(f, "Slurm answers again, rollout continues"),
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    pub events: Vec<Event>,
    pub replaced: Vec<String>,
}

/// The pod's Ready condition is True.
pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
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
    let mut r = pass::Rolling::new(client, slurm, namespace, node_set, settings, reason);
    let mut outage: Option<Instant> = None;
    loop {
        let before = r.progress_at;
        match r.pass().await {
            Ok(true) => return Ok(r.report),
            Ok(false) => {
                if outage.take().is_some() {
                    r.event(Event::SlurmBack);
                    r.progress_at = Instant::now();
                } else if r.progress_at != before {
                    // The pass acted (drained, deleted, finished a worker): look again at once,
                    // since an idle node is drained within milliseconds. Bounded: every such pass
                    // moves a worker one step on.
                    continue;
                }
            }
            Err(RolloutError::SlurmUnknown { source, .. }) if source.is_transient() => {
                let since = *outage.get_or_insert_with(|| {
                    r.event(Event::SlurmUnreachable {
                        error: source.to_string(),
                    });
                    Instant::now()
                });
                if since.elapsed() > settings.slurm_outage_timeout {
                    return Err(RolloutError::SlurmUnknown {
                        node_set: node_set.to_string(),
                        source,
                    });
                }
            }
            Err(e) => return Err(e),
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
