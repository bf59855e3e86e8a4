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

pub(super) async fn write_status(
    cluster: &Connection,
    cfg: &Config,
    shared: &Shared,
    state: &mut State,
) {
    shared
        .metrics
        .lock()
        .expect("metrics")
        .result(Verdict::parse(&state.status.result));
    shared.view.publish(
        &state.status,
        &super::view::Facts {
            cluster: cfg.cluster.as_deref(),
            namespace: &cfg.namespace,
            events: &state.events,
        },
    );
    // lastAttempt and lastFetch change every pass, jobsListedTo with every job queued: write
    // when anything else changed (jobsListedTo first known too), or once a minute so that their
    // age tells how fresh the daemon's view is.
    let facts = |s: &Status| Status {
        last_attempt: String::new(),
        last_fetch: String::new(),
        jobs_listed_to: (!s.jobs_listed_to.is_empty()).to_string(),
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
        record_result(cluster, cfg, &state.events, &state.status).await;
    }
    let who = cfg.cluster.as_deref();
    match configmap::write(&cluster.client, &cfg.namespace, who, &state.status).await {
        Ok(()) => state.written = Some((state.status.clone(), Instant::now())),
        Err(e) => tracing::error!("writing the status ConfigMap: {e}"),
    }
}

/// An Event on the status ConfigMap when the result changes (for `kubectl get events`).
async fn record_result(
    cluster: &Connection,
    cfg: &Config,
    events: &crate::status::Recorder,
    s: &Status,
) {
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
        involved: status_reference(cfg),
        reason,
        message,
        warning,
    };
    if let Err(e) = events.record(&cluster.client, note).await {
        tracing::warn!("recording an Event: {e}");
    }
}

/// A Warning Event on the status ConfigMap, REASON saying what (a force-push taken with
/// `--allow-force-push`; the copy before a Slurm upgrade failed, and the upgrade stops).
pub(super) async fn warn(
    cluster: &Connection,
    cfg: &Config,
    events: &crate::status::Recorder,
    reason: &'static str,
    message: String,
) {
    let note = crate::status::Note {
        involved: status_reference(cfg),
        reason,
        message,
        warning: true,
    };
    if let Err(e) = events.record(&cluster.client, note).await {
        tracing::warn!("recording an Event: {e}");
    }
}

fn status_reference(cfg: &Config) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some(configmap::name_for(cfg.cluster.as_deref())),
        namespace: Some(cfg.namespace.clone()),
        ..Default::default()
    }
}

/// Events on each NodeSet's StatefulSet (or PodTemplate) for what the pass did to its workers,
/// and when a worker starts waiting for jobs (once per worker and set of jobs; SEEN remembers
/// which were told). Repeats within a few minutes count on the Event posted before.
pub(super) async fn rollout_events(
    cluster: &Connection,
    namespace: &str,
    out: &crate::controller::Outcome,
    events: &crate::status::Recorder,
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
                E::Requeued { .. } => vocab::EVENT_JOBS_REQUEUED,
                E::CanaryVerdict { reason, .. } => reason,
                E::Reserved { .. } => vocab::EVENT_MAINTENANCE_RESERVED,
                E::Checked { passed: true, .. } => vocab::EVENT_CHECK_PASSED,
                E::Checked { passed: false, .. } => vocab::EVENT_CHECK_FAILED,
                E::CheckDeferred { .. } => vocab::EVENT_CHECK_DEFERRED,
                E::DrainedFor { .. } | E::Rechecked { .. } => vocab::EVENT_DRAINING,
                E::ResumedFor { .. } => vocab::EVENT_RESUMED,
                E::Unregistered { .. } | E::Remediated { .. } => vocab::EVENT_WORKER_REPLACED,
                E::ControllerReplaced { .. } => vocab::EVENT_CONTROLLER_REPLACED,
                // Scaled is recorded on the workload with the replicas it set.
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
    // A pass in which Slurm could not be read saw no waiting worker: keep what was told, so the
    // next pass does not announce every waiting worker again.
    if out.slurm_error.is_none() {
        *seen = waiting_now;
    }
    // A wave over 500 NodeSets is a few Events each: written EVENT_WRITES at a time.
    let notes = aggregate(notes).into_iter().map(|(set, reason, message)| {
        let managed = out.sets.get(&set).is_some_and(|s| s.managed);
        crate::status::Note {
            involved: crate::status::node_set_ref(namespace, &set, managed),
            reason,
            message,
            warning: reason == vocab::EVENT_CANARY_FAILED || reason == vocab::EVENT_CHECK_FAILED,
        }
    });
    futures::StreamExt::for_each_concurrent(
        futures::stream::iter(notes),
        EVENT_WRITES,
        |note| async move {
            if let Err(e) = events.record(&cluster.client, note).await {
                tracing::warn!("recording an Event: {e}");
            }
        },
    )
    .await;
}

/// Event writes of one pass in flight at once (as apply's and sync's writes).
const EVENT_WRITES: usize = 16;

/// Longest Event message slurmops writes (the events.k8s.io API's limit for a note).
const EVENT_MESSAGE_BYTES: usize = 1024;

/// NOTES with one Event per NodeSet and reason: the messages joined, as many as fit in
/// [`EVENT_MESSAGE_BYTES`], then how many more. A rollout of 1,000 workers posts a few Events
/// per pass, not thousands.
fn aggregate(notes: Vec<(String, &'static str, String)>) -> Vec<(String, &'static str, String)> {
    let mut groups: Vec<((String, &'static str), Vec<String>)> = Vec::new();
    for (set, reason, message) in notes {
        match groups.iter_mut().find(|(k, _)| k.0 == set && k.1 == reason) {
            Some((_, v)) => v.push(message),
            None => groups.push(((set, reason), vec![message])),
        }
    }
    groups
        .into_iter()
        .map(|((set, reason), messages)| {
            let total = messages.len();
            let mut text = String::new();
            let mut told = 0;
            for m in &messages {
                let more = format!(" (+{} more)", total - told);
                let sep = if told == 0 { "" } else { "; " };
                if text.len() + sep.len() + m.len() + more.len() > EVENT_MESSAGE_BYTES && told > 0 {
                    break;
                }
                text.push_str(sep);
                text.push_str(m);
                told += 1;
            }
            if told < total {
                text.push_str(&format!(" (+{} more)", total - told));
            }
            if text.len() > EVENT_MESSAGE_BYTES {
                let mut end = EVENT_MESSAGE_BYTES;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
            }
            (set, reason, text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thousand_drains_make_one_event_per_node_set_and_reason_with_a_count() {
        let mut notes = Vec::new();
        for i in 0..1000 {
            notes.push((
                "gpu".to_string(),
                vocab::EVENT_DRAINING,
                format!("draining gpu-{i}"),
            ));
            notes.push((
                "gpu".to_string(),
                vocab::EVENT_WORKER_REPLACED,
                format!("replaced gpu-{i}"),
            ));
        }
        notes.push((
            "cpu".to_string(),
            vocab::EVENT_DRAINING,
            "draining cpu-0".to_string(),
        ));
        let events = aggregate(notes);
        assert_eq!(events.len(), 3, "{events:?}");
        let (set, reason, text) = &events[0];
        assert_eq!((set.as_str(), *reason), ("gpu", vocab::EVENT_DRAINING));
        assert!(text.starts_with("draining gpu-0; draining gpu-1"), "{text}");
        assert!(text.len() <= EVENT_MESSAGE_BYTES);
        let told = text.matches("draining gpu-").count();
        assert!(
            text.ends_with(&format!(" (+{} more)", 1000 - told)),
            "{text}"
        );
        assert_eq!(events[2].2, "draining cpu-0", "one note stays as it is");
    }
}
