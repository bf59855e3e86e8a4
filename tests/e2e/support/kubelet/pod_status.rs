//! What the test kubelet reports of a pod: its status as a kubelet's status manager writes it
//! (Ready or not, its containers running), or an image that cannot be pulled.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::State;

impl State {
    pub(super) async fn set_status(&self, pod: &Pod, name: &str, ready: bool) -> bool {
        let spec = pod.spec.clone().unwrap_or_default();
        let flag = if ready { "True" } else { "False" };
        let containers: Vec<_> = spec
            .containers
            .iter()
            .map(|c| json!({"name": c.name, "image": c.image, "imageID": "", "ready": ready,
                            "restartCount": 0, "started": true, "state": {"running": {"startedAt": now()}}}))
            .collect();
        let ip = pod_ip(pod);
        let status = json!({"status": {
            "phase": "Running", "hostIP": "127.0.0.1", "podIP": ip,
            "podIPs": [{"ip": ip}], "startTime": now(),
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now()},
                {"type": "ContainersReady", "status": flag, "lastTransitionTime": now()},
                {"type": "Ready", "status": flag, "lastTransitionTime": now()}],
            "containerStatuses": containers}});
        // Strategic merge, as the real kubelet's status manager: conditions merge by type, so
        // conditions other components own (slurmops' Slurm condition) stay.
        self.pods
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(status))
            .await
            .is_ok()
    }

    /// As a kubelet that cannot pull an image: the pod stays Pending, its containers waiting
    /// with ErrImagePull, never Ready.
    pub(super) async fn image_pull_failed(&self, pod: &Pod, name: &str) {
        let waiting = |c: &k8s_openapi::api::core::v1::ContainerStatus| {
            let w = c.state.as_ref().and_then(|s| s.waiting.as_ref());
            w.and_then(|w| w.reason.as_deref()) == Some("ErrImagePull")
        };
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        if statuses.is_some_and(|c| c.iter().any(waiting)) {
            return;
        }
        let spec = pod.spec.clone().unwrap_or_default();
        let containers: Vec<_> = spec
            .containers
            .iter()
            .map(|c| {
                json!({"name": c.name, "image": c.image, "imageID": "", "ready": false,
                            "restartCount": 0, "started": false,
                            "state": {"waiting": {"reason": "ErrImagePull"}}})
            })
            .collect();
        let status = json!({"status": {
            "phase": "Pending", "hostIP": "127.0.0.1",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
                {"type": "ContainersReady", "status": "False", "lastTransitionTime": now()},
                {"type": "Ready", "status": "False", "lastTransitionTime": now()}],
            "containerStatuses": containers}});
        let _ = self
            .pods
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(status))
            .await;
    }
}

/// A pod's IP: 127.0.0.1, but a slurmrestd pod's own address (from its namespace and name), as
/// each pod of a real cluster has its own: the restapi Service's Endpoints then name each
/// replica at an address of its own, where a test can run its slurmrestd (`slurm.sh
/// start-restd` puts the address on the loopback interface).
pub fn pod_ip(pod: &Pod) -> String {
    let restd = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == "slurmrestd"));
    if !restd {
        return "127.0.0.1".into();
    }
    let key = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    );
    // FNV-1a: stable across runs and processes.
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    // 198.18.0.0/15 is set aside for tests (RFC 2544); the apiserver refuses loopback Endpoints.
    format!("198.18.{}.{}", (h >> 8) & 0xff, 1 + (h & 0xff) % 254)
}

pub(super) fn now() -> String {
    Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .unwrap()
        .to_string()
}
