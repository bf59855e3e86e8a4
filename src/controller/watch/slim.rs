//! What the watch caches keep of each object: what passes read, not what the apiserver sends
//! (managed fields, a pod's containers and volumes, a node's images, capacity and other labels).

use k8s_openapi::api::core::v1::{Node, Pod};

use super::LabelKeys;

/// What the stores keep of an object: not `managedFields` (often half its size).
pub(super) fn slim_meta(m: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    m.managed_fields = None;
}

/// What the pod store keeps: metadata (not `managedFields`), the node it runs on, its phase and
/// conditions; not its containers, volumes or container statuses, which no pass reads (at
/// thousands of workers they are most of the cache, and a pass clones what it reads).
pub(super) fn slim_pod(p: &mut Pod) {
    slim_meta(&mut p.metadata);
    if let Some(spec) = p.spec.as_mut() {
        *spec = k8s_openapi::api::core::v1::PodSpec {
            node_name: spec.node_name.take(),
            ..Default::default()
        };
    }
    if let Some(status) = p.status.as_mut() {
        *status = k8s_openapi::api::core::v1::PodStatus {
            conditions: status.conditions.take(),
            phase: status.phase.take(),
            ..Default::default()
        };
    }
}

/// What the node store keeps: name, the labels of KEYS, taints, cordon, a drain request and
/// conditions (perNode placement, block labels, node health); not images, capacity, addresses,
/// heartbeats, other labels or other annotations. A GPU node's labels (node-feature-discovery's,
/// the GPU operator's: a hundred and more) were 85% of what the store held of it: 200 MB at
/// 10,000 nodes, of which passes read one or two keys.
pub(super) fn slim_node(n: &mut Node, keys: &LabelKeys) {
    slim_meta(&mut n.metadata);
    if let Some(labels) = n.metadata.labels.as_mut() {
        labels.retain(|k, _| keys.contains(k));
    }
    n.metadata.annotations = n.metadata.annotations.take().and_then(|mut a| {
        let kept: std::collections::BTreeMap<String, String> =
            crate::controller::features::sync::health::REQUEST_ANNOTATIONS
                .iter()
                .filter_map(|k| a.remove_entry(*k))
                .collect();
        (!kept.is_empty()).then_some(kept)
    });
    if let Some(spec) = n.spec.as_mut() {
        *spec = k8s_openapi::api::core::v1::NodeSpec {
            taints: spec.taints.take(),
            unschedulable: spec.unschedulable,
            ..Default::default()
        };
    }
    if let Some(status) = n.status.as_mut() {
        let mut conditions = status.conditions.take();
        for c in conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
        *status = k8s_openapi::api::core::v1::NodeStatus {
            conditions,
            ..Default::default()
        };
    }
}
