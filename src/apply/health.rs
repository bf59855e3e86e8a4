//! Waiting until what was applied is available, with progress on the terminal: each condition is
//! a small function of the live object, like kube-runtime's `wait` conditions.

use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::{ApplyError, Connection, api_err, key};
use crate::render::Object;

fn int(o: &Json, ptr: &str) -> i64 {
    o.pointer(ptr).and_then(Json::as_i64).unwrap_or(0)
}

fn observed(o: &Json) -> bool {
    int(o, "/status/observedGeneration") >= int(o, "/metadata/generation")
}

/// StatefulSet: the controller saw this generation and every replica is ready (or as many as
/// its `slurmops.dev/ready-replicas` says: behind one address, the controller in control).
pub fn statefulset_ready(o: &Json) -> bool {
    let want = o
        .pointer("/spec/replicas")
        .and_then(Json::as_i64)
        .unwrap_or(1);
    observed(o)
        && int(o, "/status/readyReplicas") >= ready_wanted(o, want)
        && int(o, "/status/replicas") == want
}

/// How many Ready replicas of WANT make workload O available: its
/// `slurmops.dev/ready-replicas` when it has one (never more than WANT), else all of them.
pub fn ready_wanted(o: &Json, want: i64) -> i64 {
    o.pointer("/metadata/annotations")
        .and_then(|a| a.get(crate::vocab::ANNOTATION_READY_REPLICAS))
        .and_then(Json::as_str)
        .and_then(|n| n.parse::<i64>().ok())
        .map_or(want, |n| n.min(want))
}

/// Deployment: this generation rolled out and every replica is available.
pub fn deployment_available(o: &Json) -> bool {
    let want = o
        .pointer("/spec/replicas")
        .and_then(Json::as_i64)
        .unwrap_or(1);
    observed(o)
        && int(o, "/status/updatedReplicas") >= want
        && int(o, "/status/availableReplicas") >= want
        && int(o, "/status/replicas") == want
}

/// PodDisruptionBudget: the disruption controller processed it.
pub fn pdb_observed(o: &Json) -> bool {
    o.pointer("/status/observedGeneration").is_some() && observed(o)
}

fn ready(kind: &str, o: &Json) -> bool {
    match kind {
        "StatefulSet" => statefulset_ready(o),
        "Deployment" => deployment_available(o),
        "PodDisruptionBudget" => pdb_observed(o),
        _ => true,
    }
}

/// Polls every object with a readiness notion until all hold, or TIMEOUT.
pub async fn wait(
    cluster: &Connection,
    objects: &[Object],
    timeout: Duration,
) -> Result<(), ApplyError> {
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let mut pending = Vec::new();
        let watched = ["StatefulSet", "Deployment", "PodDisruptionBudget"];
        for o in objects
            .iter()
            .filter(|o| watched.contains(&o.kind.as_str()))
        {
            let id = key(&o.kind, &o.name);
            let live = cluster
                .get(&o.api_version, &o.kind, &o.namespace, &o.name)
                .await
                .map_err(|e| api_err(&id, e))?;
            let json = live.map(|l| serde_json::to_value(l).unwrap_or_default());
            if !json.as_ref().is_some_and(|j| ready(&o.kind, j)) {
                pending.push(id);
            }
        }
        if pending.is_empty() {
            eprintln!(
                "all applied objects are available ({:.1}s)",
                start.elapsed().as_secs_f32()
            );
            return Ok(());
        }
        let line = format!("waiting for {}", pending.join(", "));
        if line != last {
            eprintln!("{line}");
            last = line;
        }
        if start.elapsed() > timeout {
            return Err(ApplyError::Timeout {
                after: timeout,
                pending: pending.join(", "),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_need_the_current_generation_and_all_replicas() {
        let sts = json!({"metadata": {"generation": 2}, "spec": {"replicas": 3},
                         "status": {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3}});
        assert!(statefulset_ready(&sts));
        let stale = json!({"metadata": {"generation": 3}, "spec": {"replicas": 3},
                           "status": {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3}});
        assert!(!statefulset_ready(&stale));
        let dep = json!({"metadata": {"generation": 1}, "spec": {"replicas": 2},
                         "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1}});
        assert!(!deployment_available(&dep));
        assert!(!pdb_observed(&json!({"metadata": {"generation": 1}})));
    }

    #[test]
    fn controllers_behind_one_address_are_ready_with_the_one_in_control() {
        let sts = |ready: i64, note: bool| {
            let mut o = json!({"metadata": {"generation": 1}, "spec": {"replicas": 2},
                "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": ready}});
            if note {
                o["metadata"]["annotations"] =
                    json!({crate::vocab::ANNOTATION_READY_REPLICAS: "1"});
            }
            o
        };
        assert!(statefulset_ready(&sts(1, true)));
        assert!(!statefulset_ready(&sts(0, true)));
        // Without the annotation, a standby not Ready is a StatefulSet not ready.
        assert!(!statefulset_ready(&sts(1, false)));
    }
}
