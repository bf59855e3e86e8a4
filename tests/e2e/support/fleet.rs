//! A fleet the size slurmops is sold for, on the real kube-apiserver: N Node objects the size of
//! an 8-GPU node's (~30 KB of labels, annotations, capacity, conditions and cached images, as
//! node-feature-discovery and the GPU operator leave them), and a light kubelet for one namespace
//! that does what N kubelets show the apiserver: binds each new pod to its Node, marks it Running
//! and Ready (no container runs), and completes a deletion at once. Pods come from the rendered
//! StatefulSets through the real kube-controller-manager. A pod Ready again after its deletion (a
//! replaced worker) is listed in `returned`, for the caller to start what its container would run.
//!
//! Worker `sNNN-I` (NodeSet `sNNN`, as `tests/bed/scale.sh` names Slurm's records) goes to node
//! `NNN * PER + I`.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use serde_json::{Value, json};

/// The label every Node of a fleet carries (its value: the fleet's namespace).
const FLEET_LABEL: &str = "slurmops.test/fleet";

pub struct Fleet {
    pub client: Client,
    pub ns: String,
    pub nodes: usize,
    /// Pods marked Ready so far (each time one is).
    pub readied: Arc<AtomicUsize>,
    /// (pod, when) of each deletion the kubelet completed.
    pub deleted: Arc<Mutex<Vec<(String, Instant)>>>,
    /// Each pod marked Ready after a pod of its name was deleted, in that order.
    pub returned: Arc<Mutex<Vec<String>>>,
    kubelet: tokio::task::JoinHandle<()>,
}

/// A Node named NAME of about 30 KB, as an 8-GPU node of a large cluster reads.
pub fn gpu_node(name: &str, fleet: &str, i: usize) -> Value {
    let mut labels = serde_json::Map::new();
    for (k, v) in [
        ("kubernetes.io/hostname", name.to_string()),
        ("kubernetes.io/arch", "amd64".into()),
        ("kubernetes.io/os", "linux".into()),
        (
            "node.kubernetes.io/instance-type",
            "gpu-h100-sxm.8gpu-128vcpu-1600gb".into(),
        ),
        ("topology.kubernetes.io/region", "eu-north1".into()),
        (
            "topology.kubernetes.io/zone",
            format!("eu-north1-{}", i % 3),
        ),
        (
            "network.topology.example/block",
            format!("block-{:03}", i / 18),
        ),
        (
            "network.topology.example/spine",
            format!("spine-{:02}", i / 288),
        ),
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3".into()),
        ("nvidia.com/gpu.count", "8".into()),
        ("nvidia.com/gpu.memory", "81559".into()),
        ("nvidia.com/gpu.family", "hopper".into()),
        ("nvidia.com/cuda.driver.major", "550".into()),
        ("nvidia.com/cuda.driver.minor", "90".into()),
        ("nvidia.com/cuda.driver.rev", "07".into()),
        ("nvidia.com/cuda.runtime.major", "12".into()),
        ("nvidia.com/cuda.runtime.minor", "4".into()),
        ("nvidia.com/mig.capable", "true".into()),
        ("nvidia.com/mig.strategy", "single".into()),
        ("nvidia.com/gpu.deploy.driver", "pre-installed".into()),
        ("nvidia.com/gpu.deploy.dcgm-exporter", "true".into()),
        ("nvidia.com/gpu.deploy.device-plugin", "true".into()),
        ("nvidia.com/gpu.deploy.gpu-feature-discovery", "true".into()),
        ("nvidia.com/gpu.present", "true".into()),
        (FLEET_LABEL, fleet.to_string()),
    ] {
        labels.insert(k.into(), Value::String(v));
    }
    for f in 0..90 {
        labels.insert(
            format!("feature.node.kubernetes.io/cpu-cpuid.FEATURE{f:03}"),
            Value::String("true".into()),
        );
    }
    let features: Vec<String> = (0..90)
        .map(|f| format!("cpu-cpuid.FEATURE{f:03}"))
        .collect();
    let images: Vec<Value> = (0..95)
        .map(|k| {
            let digest = format!("{:064x}", (k as u128 + 1) * 0x9e37_79b9_7f4a_7c15);
            json!({"names": [format!("registry.example/team-{k}/training-image@sha256:{digest}"),
                             format!("registry.example/team-{k}/training-image:v{k}.{}", i % 7)],
                   "sizeBytes": 8_000_000_000u64 + k as u64})
        })
        .collect();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let condition = |t: &str, s: &str, reason: &str| {
        json!({"type": t, "status": s, "reason": reason, "message": format!("{reason} on {name}"),
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {
            "nfd.node.kubernetes.io/feature-labels": features.join(","),
            "nfd.node.kubernetes.io/extended-resources": "",
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            "csi.volume.kubernetes.io/nodeid": format!("{{\"csi.example\":\"{name}\"}}"),
        }},
        "spec": {"podCIDR": format!("10.{}.{}.0/24", 64 + i / 256, i % 256),
                 "providerID": format!("example://eu-north1/{name}")},
        "status": {
            "capacity": {"cpu": "128", "memory": "1638400Mi", "nvidia.com/gpu": "8",
                         "rdma/ib": "8", "ephemeral-storage": "3750000Mi", "hugepages-1Gi": "0",
                         "hugepages-2Mi": "0", "pods": "110"},
            "allocatable": {"cpu": "126", "memory": "1630000Mi", "nvidia.com/gpu": "8",
                            "rdma/ib": "8", "ephemeral-storage": "3700000Mi", "hugepages-1Gi": "0",
                            "hugepages-2Mi": "0", "pods": "110"},
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("GpuHealthy", "True", "AllGpusHealthy"),
                condition("InfinibandHealthy", "True", "AllLinksActive"),
                condition("Ready", "True", "KubeletReady")],
            "addresses": [{"type": "InternalIP", "address": format!("10.1.{}.{}", i / 250, 1 + i % 250)},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": format!("{i:032x}"), "systemUUID": format!("{i:032x}"),
                         "bootID": format!("{i:032x}"), "kernelVersion": "6.8.0-49-generic",
                         "osImage": "Ubuntu 22.04.5 LTS", "containerRuntimeVersion": "containerd://1.7.23",
                         "kubeletVersion": "v1.20.2", "kubeProxyVersion": "v1.20.2",
                         "operatingSystem": "linux", "architecture": "amd64"},
            "images": images,
        }
    })
}

impl Fleet {
    /// Creates namespace NS, NODES Nodes of a GPU node's size (sixteen at a time, saying every
    /// 1,000), and starts the kubelet for the pods of NS; workers of a NodeSet are PER apart.
    pub async fn start(
        client: Client,
        ns: &str,
        nodes: usize,
        per: usize,
    ) -> Result<Fleet, String> {
        let body: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).map_err(|e| e.to_string())?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &body)
            .await
            .map_err(|e| format!("create namespace {ns}: {e}"))?;
        let api = Api::<Node>::all(client.clone());
        let started = Instant::now();
        let made = AtomicUsize::new(0);
        futures::stream::iter(0..nodes)
            .map(|i| {
                let (api, made) = (&api, &made);
                async move {
                    let node: Node = serde_json::from_value(gpu_node(&node_name(ns, i), ns, i))
                        .map_err(|e| e.to_string())?;
                    api.create(&PostParams::default(), &node)
                        .await
                        .map_err(|e| format!("create node {i}: {e}"))?;
                    let k = made.fetch_add(1, Ordering::Relaxed) + 1;
                    if k % 1000 == 0 {
                        println!(
                            "  {k} of {nodes} Nodes created ({:.0} s)",
                            started.elapsed().as_secs_f64()
                        );
                    }
                    Ok::<(), String>(())
                }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<()>>()
            .await?;
        let readied = Arc::new(AtomicUsize::new(0));
        let deleted = Arc::new(Mutex::new(Vec::new()));
        let returned = Arc::new(Mutex::new(Vec::new()));
        let kubelet = tokio::spawn(kubelet(
            Api::namespaced(client.clone(), ns),
            ns.to_string(),
            (nodes, per),
            readied.clone(),
            deleted.clone(),
            returned.clone(),
        ));
        Ok(Fleet {
            client,
            ns: ns.to_string(),
            nodes,
            readied,
            deleted,
            returned,
            kubelet,
        })
    }

    /// Stops the kubelet; removes the namespace and the Nodes.
    pub async fn cleanup(self) {
        self.kubelet.abort();
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.ns, &DeleteParams::default())
            .await;
        let _ = Api::<Node>::all(self.client.clone())
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&format!("{FLEET_LABEL}={}", self.ns)),
            )
            .await;
    }
}

/// Node I of the fleet of namespace NS.
pub fn node_name(ns: &str, i: usize) -> String {
    format!("{ns}-gpu-{i:05}")
}

/// The node index of worker `sNNN-I`.
fn index(pod: &str, per: usize) -> usize {
    let parse = |t: Option<&str>| t.and_then(|t| t.parse::<usize>().ok()).unwrap_or(0);
    let (set, i) = pod.rsplit_once('-').unwrap_or((pod, "0"));
    parse(set.strip_prefix('s')) * per + parse(Some(i))
}

/// What a pod needs from its kubelet now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Bind,
    Ready,
    Delete,
}

fn step(p: &Pod) -> Option<Step> {
    if p.metadata.deletion_timestamp.is_some() {
        return Some(Step::Delete);
    }
    let spec = p.spec.as_ref()?;
    if spec.node_name.is_none() {
        return Some(Step::Bind);
    }
    let ready = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    (!ready).then_some(Step::Ready)
}

async fn kubelet(
    pods: Api<Pod>,
    ns: String,
    (nodes, per): (usize, usize),
    readied: Arc<AtomicUsize>,
    deleted: Arc<Mutex<Vec<(String, Instant)>>>,
    returned: Arc<Mutex<Vec<String>>>,
) {
    let busy: Arc<Mutex<BTreeSet<(String, Step)>>> = Arc::default();
    // Names whose pod was deleted and has not been Ready again since.
    let gone: Arc<Mutex<HashSet<String>>> = Arc::default();
    let gate = Arc::new(tokio::sync::Semaphore::new(32));
    let mut events = std::pin::pin!(watcher(pods.clone(), watcher::Config::default()));
    while let Some(e) = events.next().await {
        let p = match e {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
            _ => continue,
        };
        let (Some(step), Some(name), Some(uid)) =
            (step(&p), p.metadata.name.clone(), p.metadata.uid.clone())
        else {
            continue;
        };
        if !busy.lock().unwrap().insert((uid.clone(), step)) {
            continue;
        }
        let permit = gate.clone().acquire_owned().await.expect("semaphore");
        let (pods, busy, readied, deleted, returned, gone) = (
            pods.clone(),
            busy.clone(),
            readied.clone(),
            deleted.clone(),
            returned.clone(),
            gone.clone(),
        );
        let node = node_name(&ns, index(&name, per) % nodes.max(1));
        tokio::spawn(async move {
            let ok = match step {
                Step::Bind => bind(&pods, &name, &node).await,
                Step::Ready => ready(&pods, &p, &name).await,
                Step::Delete => {
                    let dp = DeleteParams {
                        grace_period_seconds: Some(0),
                        preconditions: Some(Preconditions {
                            uid: Some(uid.clone()),
                            resource_version: None,
                        }),
                        ..Default::default()
                    };
                    let ok = pods.delete(&name, &dp).await.is_ok();
                    if ok {
                        gone.lock().unwrap().insert(name.clone());
                        deleted.lock().unwrap().push((name.clone(), Instant::now()));
                    }
                    ok
                }
            };
            if ok && step == Step::Ready {
                readied.fetch_add(1, Ordering::Relaxed);
                if gone.lock().unwrap().remove(&name) {
                    returned.lock().unwrap().push(name.clone());
                }
            }
            if !ok {
                // Let the next event of this pod try again.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            busy.lock().unwrap().remove(&(uid, step));
            drop(permit);
        });
    }
}

async fn bind(pods: &Api<Pod>, name: &str, node: &str) -> bool {
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    pods.create_subresource::<_, Value>("binding", name, &PostParams::default(), &binding)
        .await
        .is_ok()
}

async fn ready(pods: &Api<Pod>, p: &Pod, name: &str) -> bool {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let containers: Vec<Value> = p
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| json!({"name": c.name, "image": c.image, "imageID": "", "ready": true,
                        "restartCount": 0, "started": true, "state": {"running": {"startedAt": now}}}))
        .collect();
    let status = json!({"status": {
        "phase": "Running", "hostIP": "10.1.0.1", "podIP": "10.2.0.1",
        "podIPs": [{"ip": "10.2.0.1"}], "startTime": now,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": containers}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(status))
        .await
        .is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_gpu_node_is_about_thirty_kilobytes() {
        let n = serde_json::to_vec(&super::gpu_node("t-x-gpu-00001", "t-x", 1)).unwrap();
        assert!((25_000..40_000).contains(&n.len()), "{} bytes", n.len());
    }

    #[test]
    fn workers_go_to_their_own_node() {
        assert_eq!(super::index("s000-0", 20), 0);
        assert_eq!(super::index("s012-7", 20), 247);
    }
}
