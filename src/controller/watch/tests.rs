//! What wakes a pass, what the stores keep, and deletions shown before the watch brings them.

use super::*;
use serde_json::json;

fn pod(labels: serde_json::Value, conditions: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "gpu-0", "uid": "u", "labels": labels},
        "spec": {"containers": [], "nodeName": "n0"},
        "status": {"conditions": conditions},
    }))
    .unwrap()
}

#[test]
fn the_daemons_own_pod_writes_do_not_wake_a_pass_and_what_decide_reads_does() {
    let ready = json!([{"type": "Ready", "status": "True"}]);
    let base = pod(
        json!({LABEL_NODESET: "gpu", "controller-revision-hash": "r1"}),
        ready.clone(),
    );
    let d = worker_inputs(&base);
    // sync's writes: the busy label and the Slurm condition.
    let synced = pod(
        json!({LABEL_NODESET: "gpu", "controller-revision-hash": "r1", crate::vocab::LABEL_BUSY: "true"}),
        json!([{"type": "Ready", "status": "True"},
               {"type": crate::vocab::CONDITION_SLURM_NODE, "status": "True", "reason": "Allocated"}]),
    );
    assert_eq!(worker_inputs(&synced), d);
    // What decide reads: readiness and the revision.
    let not_ready = pod(
        json!({LABEL_NODESET: "gpu", "controller-revision-hash": "r1"}),
        json!([{"type": "Ready", "status": "False"}]),
    );
    assert_ne!(worker_inputs(&not_ready), d);
    let new_rev = pod(
        json!({LABEL_NODESET: "gpu", "controller-revision-hash": "r2"}),
        ready,
    );
    assert_ne!(worker_inputs(&new_rev), d);
}

#[test]
fn a_pod_this_process_deleted_shows_deleting_until_the_watch_brings_it() {
    let ready = json!([{"type": "Ready", "status": "True"}]);
    let live = Arc::new(pod(json!({LABEL_NODESET: "gpu"}), ready.clone()));
    let mut deleted = std::collections::HashMap::new();
    // Nothing deleted: shown as the store has it.
    let shown = with_deletions(vec![live.clone()], &mut deleted);
    assert!(shown[0].metadata.deletion_timestamp.is_none());
    // Deleted by this process, the watch not there yet: deleting, and remembered.
    deleted.insert("u".to_string(), std::time::Instant::now());
    let shown = with_deletions(vec![live.clone()], &mut deleted);
    assert!(shown[0].metadata.deletion_timestamp.is_some());
    assert!(deleted.contains_key("u"));
    // The watch brought the deletion: shown as such, forgotten.
    let mut gone = (*live).clone();
    gone.metadata.deletion_timestamp = shown[0].metadata.deletion_timestamp.clone();
    let shown = with_deletions(vec![Arc::new(gone)], &mut deleted);
    assert!(shown[0].metadata.deletion_timestamp.is_some());
    assert!(deleted.is_empty());
    // A new pod under the same name (another uid) is not taken for the deleted one.
    deleted.insert("u".to_string(), std::time::Instant::now());
    let mut new = (*live).clone();
    new.metadata.uid = Some("v".into());
    let shown = with_deletions(vec![Arc::new(new)], &mut deleted);
    assert!(shown[0].metadata.deletion_timestamp.is_none());
    assert!(deleted.is_empty());
}

#[test]
fn a_slimmed_node_keeps_the_labels_of_its_keys_its_drain_request_taints_and_conditions() {
    let mut n: Node = serde_json::from_value(json!({
        "metadata": {"name": "k0",
            "labels": {"pool": "gpu", "nvidia.com/gpu.product": "H100",
                       "feature.node.kubernetes.io/cpu-cpuid.AVX512F": "true"},
            "annotations": {crate::vocab::ANNOTATION_DRAIN: "xid 79", "nfd.node.kubernetes.io/feature-labels": "x",
                            crate::vocab::ANNOTATION_SLINKY_CORDON_REASON: "[NVSentinel] XID 79"},
            "managedFields": [{"manager": "kubelet"}]},
        "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24",
                 "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
        "status": {"images": [{"names": ["big"], "sizeBytes": 1}],
                   "capacity": {"cpu": "128"},
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastHeartbeatTime": "2026-12-02T00:00:00Z"}]},
    }))
    .unwrap();
    slim_node(&mut n, &LabelKeys::from(["pool".to_string()]));
    assert_eq!(
        serde_json::to_value(&n).unwrap(),
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "k0", "labels": {"pool": "gpu"},
                         "annotations": {crate::vocab::ANNOTATION_DRAIN: "xid 79",
                                         crate::vocab::ANNOTATION_SLINKY_CORDON_REASON: "[NVSentinel] XID 79"}},
            "spec": {"unschedulable": true, "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        })
    );
}
