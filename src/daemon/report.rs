//! What the daemon tells people: the status ConfigMap (written when something changed, or once a
//! minute so its age shows the daemon is alive), Events on result changes, and reconcile counts.

use std::time::{Duration, Instant};

use super::http::Shared;
use super::{Config, State};
use crate::k8s::Connection;
use crate::status::configmap::{self, Status};
use crate::status::verdict::Verdict;
use crate::vocab;

pub(super) fn count(shared: &Shared, result: Verdict, started: Instant) {
    shared
        .metrics
        .lock()
        .expect("metrics")
        .reconciled(result, started.elapsed().as_secs_f64());
}

pub(super) async fn write_status(cluster: &Connection, cfg: &Config, state: &mut State) {
    // lastAttempt and lastFetch change every pass: write when anything else changed, or once a
    // minute so that their age tells how fresh the daemon's view is.
    let facts = |s: &Status| Status {
        last_attempt: String::new(),
        last_fetch: String::new(),
        ..s.clone()
    };
    let fresh = state.written.as_ref().is_some_and(|(w, at)| {
        facts(w) == facts(&state.status) && at.elapsed() < Duration::from_secs(60)
    });
    if fresh {
        return;
    }
    let transition = state.written.as_ref().is_none_or(|(w, _)| {
        w.result != state.status.result || w.result_commit != state.status.result_commit
    });
    if transition && !state.status.result.is_empty() {
        record_result(cluster, cfg, &state.status).await;
    }
    let who = cfg.cluster.as_deref();
    match configmap::write(&cluster.client, &cfg.namespace, who, &state.status).await {
        Ok(()) => state.written = Some((state.status.clone(), Instant::now())),
        Err(e) => tracing::error!("writing the status ConfigMap: {e}"),
    }
}

/// An Event on the status ConfigMap when the result changes (for `kubectl get events`).
async fn record_result(cluster: &Connection, cfg: &Config, s: &Status) {
    let short = s.result_commit.get(..12).unwrap_or(&s.result_commit);
    let v = Verdict::parse(&s.result);
    let Some((reason, warning)) = v.event() else {
        return;
    };
    let message = match v {
        Verdict::Applied => format!("commit {short} applied: {}", s.summary),
        Verdict::FetchFailed => format!("cannot fetch {}: {}", s.repository, s.errors),
        _ => format!(
            "commit {short}: {}",
            s.errors.lines().next().unwrap_or(&s.result)
        ),
    };
    let note = crate::status::Note {
        involved: k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            name: Some(configmap::name_for(cfg.cluster.as_deref())),
            namespace: Some(cfg.namespace.clone()),
            ..Default::default()
        },
        reason,
        message,
        warning,
    };
    if let Err(e) = crate::status::record(&cluster.client, note).await {
        tracing::warn!("recording an Event: {e}");
    }
}

/// Events on each NodeSet's StatefulSet (or PodTemplate) for what the pass did to its workers,
/// and when a worker starts waiting for jobs (once per worker and set of jobs; SEEN remembers
/// which were told).
pub(super) async fn rollout_events(
    cluster: &Connection,
    namespace: &str,
    out: &crate::controller::Outcome,
    seen: &mut std::collections::BTreeSet<String>,
) {
    use crate::rollout::Event as E;
    let mut notes: Vec<(String, &'static str, String)> = out
        .events
        .iter()
        .filter_map(|(set, e)| {
            let reason = match e {
                E::Drain { .. } => vocab::EVENT_DRAINING,
                E::Delete { .. } => vocab::EVENT_WORKER_REPLACED,
                E::Resume { .. } => vocab::EVENT_RESUMED,
                E::CanaryVerdict { reason, .. } => reason,
                E::Reserved { .. } => vocab::EVENT_MAINTENANCE_RESERVED,
                _ => return None,
            };
            Some((set.clone(), reason, e.to_string()))
        })
        .collect();
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let mut waiting_now = std::collections::BTreeSet::new();
    for p in &out.progress {
        for w in &p.waiting {
            let jobs: Vec<String> = w.jobs.iter().map(|j| j.id.to_string()).collect();
            let key = format!("{}/{}/{}", p.node_set, w.node, jobs.join(","));
            if !seen.contains(&key) {
                let told = crate::status::show::waiting(w, now);
                notes.push((p.node_set.clone(), vocab::EVENT_WAITING_FOR_JOBS, told));
            }
            waiting_now.insert(key);
        }
    }
    *seen = waiting_now;
    for (set, reason, message) in notes {
        let managed = out.sets.get(&set).is_some_and(|s| s.managed);
        let note = crate::status::Note {
            involved: crate::status::node_set_ref(namespace, &set, managed),
            reason,
            message,
            warning: reason == vocab::EVENT_CANARY_FAILED,
        };
        if let Err(e) = crate::status::record(&cluster.client, note).await {
            tracing::warn!("recording an Event: {e}");
        }
    }
}
