//! One pass of a rollout: read the StatefulSet, its pods and their Slurm nodes, then take every
//! step that is safe now. The state between passes (which workers slurmops is replacing) lives in
//! `Rolling`, so a pass cut short by a Slurm outage resumes where it stopped.

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};

use super::{Candidate, Event, Report, RolloutError, Settings, order, pod_ready};
use crate::render::names::LABEL_NODESET;
use crate::slurm::{Drain, REASON_PREFIX, SlurmError, SlurmNodes};

pub(super) struct Worker {
    pub name: String,
    pub uid: String,
    pub ready: bool,
    pub updated: bool,
    pub deleting: bool,
}

pub(super) fn workers(pods: Vec<Pod>, update_revision: &str) -> BTreeMap<String, Worker> {
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
            Some((
                name.clone(),
                Worker {
                    name,
                    uid: p.metadata.uid.clone().unwrap_or_default(),
                    ready: pod_ready(&p),
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
    /// First seen unknown to Slurm (never registered).
    unknown_since: Option<Instant>,
}

pub(super) struct Rolling<'a, S> {
    sts_api: Api<StatefulSet>,
    pods_api: Api<Pod>,
    slurm: &'a S,
    node_set: &'a str,
    settings: &'a Settings,
    reason: &'a str,
    in_flight: BTreeMap<String, InFlight>,
    pub report: Report,
    pub progress_at: Instant,
}

impl<'a, S: SlurmNodes> Rolling<'a, S> {
    pub fn new(
        client: &kube::Client,
        slurm: &'a S,
        namespace: &str,
        node_set: &'a str,
        settings: &'a Settings,
        reason: &'a str,
    ) -> Self {
        Rolling {
            sts_api: Api::namespaced(client.clone(), namespace),
            pods_api: Api::namespaced(client.clone(), namespace),
            slurm,
            node_set,
            settings,
            reason,
            in_flight: BTreeMap::new(),
            report: Report::default(),
            progress_at: Instant::now(),
        }
    }

    pub fn event(&mut self, e: Event) {
        self.settings.observer.emit(self.node_set, &e);
        self.report.events.push(e);
    }

    fn kube_err(&self, what: &str) -> impl Fn(kube::Error) -> RolloutError + use<'_, S> {
        let what = what.to_string();
        move |source| RolloutError::Kube {
            node_set: self.node_set.to_string(),
            what: what.clone(),
            source,
        }
    }

    fn slurm_err(&self, source: SlurmError) -> RolloutError {
        RolloutError::SlurmUnknown {
            node_set: self.node_set.to_string(),
            source,
        }
    }

    /// One pass; true when every worker runs the update revision and nothing is in flight.
    pub async fn pass(&mut self) -> Result<bool, RolloutError> {
        let sts = self
            .sts_api
            .get(self.node_set)
            .await
            .map_err(self.kube_err("read StatefulSet"))?;
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
            return Ok(false);
        };
        let lp = ListParams::default().labels(&format!("{LABEL_NODESET}={}", self.node_set));
        let pods = self
            .pods_api
            .list(&lp)
            .await
            .map_err(self.kube_err("list pods"))?;
        let ws = workers(pods.items, &revision);

        self.finish_replaced(&ws).await?;
        self.delete_drained(&ws).await?;

        // Done when nothing is outdated or in flight. Pods that are new for another reason (a
        // scale-out) are the health check's business, not the rollout's.
        let outdated: Vec<&Worker> = ws.values().filter(|w| !w.updated && !w.deleting).collect();
        if outdated.is_empty() && self.in_flight.is_empty() {
            return Ok(true);
        }
        self.start_drains(&ws, &outdated, replicas).await?;
        self.check_stalled()?;
        Ok(false)
    }

    /// Replaced workers: once the new pod is Ready and its node registered, resume our drain.
    async fn finish_replaced(&mut self, ws: &BTreeMap<String, Worker>) -> Result<(), RolloutError> {
        // Also workers whose pod someone else replaced while slurmops was draining them.
        let replaced: Vec<String> = self.in_flight.keys().cloned().collect();
        for name in replaced {
            let Some(w) = ws.get(&name) else { continue };
            if !(w.ready && w.updated && !w.deleting) {
                continue;
            }
            let node = match self.slurm.get(&name).await {
                Ok(n) => n,
                Err(SlurmError::UnknownNode(_)) => continue,
                Err(e) => return Err(self.slurm_err(e)),
            };
            if node.state.has("NOT_RESPONDING") || node.state.has("INVALID_REG") {
                continue;
            }
            let ours = self.in_flight[&name].ours;
            if ours && node.state.has("DRAIN") && node.reason.starts_with(REASON_PREFIX) {
                self.slurm
                    .resume(&name)
                    .await
                    .map_err(|e| self.slurm_err(e))?;
                self.event(Event::Resume { node: name.clone() });
            }
            self.event(Event::Ready { pod: name.clone() });
            self.report.replaced.push(name.clone());
            self.in_flight.remove(&name);
            self.progress_at = Instant::now();
        }
        Ok(())
    }

    /// Draining workers: delete those Slurm reports drained (or forced after the timeout).
    async fn delete_drained(&mut self, ws: &BTreeMap<String, Worker>) -> Result<(), RolloutError> {
        let draining: Vec<String> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.deleted_at.is_none())
            .map(|(n, _)| n.clone())
            .collect();
        for name in draining {
            let Some(w) = ws.get(&name) else { continue };
            let Some(forced) = self.may_delete(w).await? else {
                continue;
            };
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(w.uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            self.pods_api
                .delete(&name, &dp)
                .await
                .map_err(self.kube_err("delete pod"))?;
            self.event(Event::Delete {
                pod: name.clone(),
                forced,
            });
            if let Some(f) = self.in_flight.get_mut(&name) {
                f.deleted_at = Some(Instant::now());
            }
            self.progress_at = Instant::now();
        }
        Ok(())
    }

    /// Whether the pod of a draining worker may go now: Some(forced) or None (keep waiting).
    /// Drained in Slurm → yes. Unknown to Slurm → yes when its pod is not Ready (slurmd is not up)
    /// or it stayed unknown past the registration grace; otherwise wait (fail closed).
    async fn may_delete(&mut self, w: &Worker) -> Result<Option<bool>, RolloutError> {
        let settings = self.settings;
        let f = self.in_flight.get_mut(&w.name).expect("in flight worker");
        match self.slurm.is_drained(&w.name).await {
            Ok(true) => return Ok(Some(false)),
            Ok(false) => f.unknown_since = None,
            Err(SlurmError::UnknownNode(_)) => {
                let since = *f.unknown_since.get_or_insert_with(Instant::now);
                if !w.ready || since.elapsed() > settings.registration_grace {
                    return Ok(Some(false));
                }
                return Ok(None);
            }
            Err(e) => return Err(self.slurm_err(e)),
        }
        let timed_out = settings
            .drain_timeout
            .is_some_and(|t| f.drained_since.elapsed() > t);
        Ok((timed_out && settings.force_after_timeout).then_some(true))
    }

    /// Start draining more outdated workers while fewer than `maxUnavailable` are out.
    async fn start_drains(
        &mut self,
        ws: &BTreeMap<String, Worker>,
        outdated: &[&Worker],
        replicas: usize,
    ) -> Result<(), RolloutError> {
        let missing = replicas.saturating_sub(ws.len());
        let out = missing
            + ws.values()
                .filter(|w| !w.ready || w.deleting || self.in_flight.contains_key(&w.name))
                .count();
        let room = (self.settings.max_unavailable as usize).saturating_sub(out);
        if room == 0 {
            return Ok(());
        }
        let mut candidates = Vec::new();
        for w in outdated
            .iter()
            .filter(|w| !self.in_flight.contains_key(&w.name))
        {
            let jobs = match self.slurm.jobs_on(&w.name).await {
                Ok(j) => j,
                Err(SlurmError::UnknownNode(_)) => Vec::new(),
                Err(e) => return Err(self.slurm_err(e)),
            };
            candidates.push(Candidate {
                pod: w.name.clone(),
                ready: w.ready,
                jobs,
            });
        }
        for pod in order(&candidates).into_iter().take(room) {
            let ours = match self.slurm.drain(&pod, self.reason).await {
                Ok(Drain::Requested | Drain::AlreadyOurs) => true,
                Ok(Drain::HeldByOther { .. }) => false,
                // Not registered: `may_delete` decides (pod not Ready, or past the grace).
                Err(SlurmError::UnknownNode(_)) => false,
                Err(e) => return Err(self.slurm_err(e)),
            };
            self.event(Event::Drain {
                node: pod.clone(),
                ours,
            });
            self.in_flight.insert(
                pod,
                InFlight {
                    drained_since: Instant::now(),
                    ours,
                    deleted_at: None,
                    unknown_since: None,
                },
            );
            self.progress_at = Instant::now();
        }
        Ok(())
    }

    /// A replacement that never comes back halts the rollout.
    fn check_stalled(&self) -> Result<(), RolloutError> {
        let timeout = self.settings.progress_timeout;
        let stuck: Vec<String> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.deleted_at.is_some_and(|t| t.elapsed() > timeout))
            .map(|(n, _)| format!("{n} (replaced, not Ready and registered)"))
            .collect();
        if !stuck.is_empty() && self.progress_at.elapsed() > timeout {
            return Err(RolloutError::Stalled {
                node_set: self.node_set.to_string(),
                after: timeout,
                waiting: stuck.join(", "),
            });
        }
        Ok(())
    }
}
