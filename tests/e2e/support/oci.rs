//! A rendered pod's container as containerd's CRI plugin hands it to runc: an OCI runtime spec
//! (`config.json`), for the cgroup v2 guest, where containerd and runc run the worker image with
//! no kubelet (tests/e2e/cgroup_v2.rs). What the rendered container sets is translated as the CRI
//! plugin of containerd 1.7 translates it (its `containerSpecOpts`, privileged and cgroup v2 as a
//! kubelet's node runs them); a field that is not translated here fails the test, naming it,
//! rather than being dropped: a new setting in the rendered pod is run, or seen not to be.
//!
//! What is the kubelet's and not the runtime's (probes, lifecycle hooks, ports, the pull policy)
//! is listed and left out.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// A file of a volume, written on the node before the container starts (as the kubelet writes a
/// projected volume): its path under the pod's volume directory, its content, its mode.
#[derive(Debug, Clone)]
pub struct VolumeFile {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: u32,
}

/// The pod as the node runs it.
pub struct Pod<'a> {
    /// The pod's `spec` as rendered.
    pub spec: &'a Value,
    pub name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
    /// Where the node keeps the pod's volumes (a directory per volume).
    pub volumes_dir: &'a str,
    /// The Secrets and ConfigMaps its volumes project: name → key → bytes.
    pub sources: &'a BTreeMap<String, BTreeMap<String, Vec<u8>>>,
}

/// A device node of the host (a privileged container gets every one, as the CRI plugin adds
/// them).
#[derive(Debug, Clone)]
pub struct Device {
    pub path: String,
    pub kind: char,
    pub major: i64,
    pub minor: i64,
}

/// The runtime spec of container NAME of POD, ID to the runtime, its root file system at ROOTFS,
/// the image's environment IMAGE_ENV first; and the files its volumes hold.
pub fn runtime_spec(
    pod: &Pod,
    name: &str,
    id: &str,
    rootfs: &str,
    image_env: &[String],
    host_devices: &[Device],
) -> Result<(Value, Vec<VolumeFile>), String> {
    let spec = pod.spec;
    let fields = |v: &Value, what: &str, known: &[&str]| -> Result<(), String> {
        for k in v.as_object().into_iter().flatten().map(|(k, _)| k) {
            if !known.contains(&k.as_str()) {
                return Err(format!("{what}.{k} is not translated to the runtime spec"));
            }
        }
        Ok(())
    };
    fields(
        spec,
        "spec",
        &[
            // The kubelet's and the scheduler's, not the runtime's.
            "affinity",
            "nodeSelector",
            "tolerations",
            "terminationGracePeriodSeconds",
            "automountServiceAccountToken",
            "serviceAccountName",
            "priorityClassName",
            "enableServiceLinks",
            "dnsPolicy",
            "subdomain",
            // Translated.
            "hostname",
            "containers",
            "volumes",
            "securityContext",
        ],
    )?;
    let pod_security = spec.get("securityContext").cloned().unwrap_or(json!({}));
    fields(
        &pod_security,
        "spec.securityContext",
        &["runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup"],
    )?;
    let c = spec["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .ok_or_else(|| format!("no container {name}"))?;
    fields(
        c,
        &format!("container {name}"),
        &[
            "name",
            "image",
            // The kubelet's: it pulls, probes and runs hooks; ports are informational.
            "imagePullPolicy",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
            "lifecycle",
            "ports",
            // Translated.
            "command",
            "args",
            "env",
            "resources",
            "securityContext",
            "volumeMounts",
        ],
    )?;
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let mut args = strings(&c["command"]);
    if args.is_empty() {
        return Err(format!(
            "container {name} sets no command (the image's would run)"
        ));
    }
    args.extend(strings(&c["args"]));

    let mut env: Vec<String> = image_env.to_vec();
    for e in c["env"].as_array().into_iter().flatten() {
        let var = e["name"].as_str().unwrap_or_default();
        let value = match (&e["value"], e.pointer("/valueFrom/fieldRef/fieldPath")) {
            (Value::String(v), _) => v.clone(),
            (_, Some(Value::String(p))) if p == "metadata.name" => pod.name.to_string(),
            (_, Some(Value::String(p))) if p == "metadata.namespace" => pod.namespace.to_string(),
            _ => {
                return Err(format!(
                    "env {var} of container {name} is not translated: {e}"
                ));
            }
        };
        env.retain(|x| !x.starts_with(&format!("{var}=")));
        env.push(format!("{var}={value}"));
    }
    if !env.iter().any(|e| e.starts_with("PATH=")) {
        env.push("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    }
    env.push(format!("HOSTNAME={}", pod_hostname(pod)));

    // The security context: the container's over the pod's.
    let sc = c.get("securityContext").cloned().unwrap_or(json!({}));
    fields(
        &sc,
        &format!("container {name}.securityContext"),
        &[
            "privileged",
            "allowPrivilegeEscalation",
            "capabilities",
            "runAsUser",
            "runAsGroup",
            "runAsNonRoot",
            "readOnlyRootFilesystem",
        ],
    )?;
    let privileged = sc["privileged"] == json!(true);
    let ids = |k: &str| {
        sc[k]
            .as_i64()
            .or_else(|| pod_security[k].as_i64())
            .unwrap_or(0)
    };
    let (uid, gid) = (ids("runAsUser"), ids("runAsGroup"));
    let non_root = sc["runAsNonRoot"] == json!(true) || pod_security["runAsNonRoot"] == json!(true);
    if non_root && uid == 0 {
        return Err(format!(
            "container {name} must run as non-root and runs as root"
        ));
    }
    let mut groups: Vec<i64> = vec![];
    if let Some(g) = pod_security["fsGroup"].as_i64() {
        groups.push(g);
    }
    let caps: Vec<String> = if privileged {
        ALL_CAPABILITIES.iter().map(|c| c.to_string()).collect()
    } else {
        let drop = strings(&sc["capabilities"]["drop"]);
        let add: Vec<String> = strings(&sc["capabilities"]["add"])
            .iter()
            .map(|c| format!("CAP_{c}"))
            .collect();
        let base: Vec<String> = if drop.iter().any(|d| d == "ALL") {
            vec![]
        } else {
            DEFAULT_CAPABILITIES
                .iter()
                .filter(|c| {
                    !drop
                        .iter()
                        .any(|d| c.strip_prefix("CAP_") == Some(d.as_str()))
                })
                .map(|c| c.to_string())
                .collect()
        };
        base.into_iter().chain(add).collect()
    };
    let no_new_privileges = !privileged && sc["allowPrivilegeEscalation"] == json!(false);

    // Volumes: each mounted one written under the pod's volume directory (projected Secrets and
    // ConfigMaps, their items' modes), bound where the container mounts it.
    let mut files = Vec::new();
    let volumes: BTreeMap<&str, &Value> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v["name"].as_str()?, v)))
        .collect();
    let mut mounts = default_mounts(privileged);
    for m in c["volumeMounts"].as_array().into_iter().flatten() {
        fields(
            m,
            "volumeMount",
            &["name", "mountPath", "readOnly", "subPath"],
        )?;
        let vname = m["name"].as_str().unwrap_or_default();
        let v = volumes
            .get(vname)
            .ok_or_else(|| format!("volumeMount {vname}: no such volume"))?;
        let dir = format!("{}/{vname}", pod.volumes_dir);
        if let Some(p) = v.get("projected") {
            let default_mode = p["defaultMode"].as_u64().unwrap_or(0o644) as u32;
            for s in p["sources"].as_array().into_iter().flatten() {
                let (kind, src) = match (s.get("secret"), s.get("configMap")) {
                    (Some(x), None) => ("Secret", x),
                    (None, Some(x)) => ("ConfigMap", x),
                    _ => return Err(format!("volume {vname}: a source not translated: {s}")),
                };
                let sname = src["name"].as_str().unwrap_or_default();
                let data = pod
                    .sources
                    .get(sname)
                    .ok_or_else(|| format!("volume {vname}: the {kind} {sname} is missing"))?;
                for item in src["items"].as_array().into_iter().flatten() {
                    let key = item["key"].as_str().unwrap_or_default();
                    let content = data
                        .get(key)
                        .ok_or_else(|| format!("volume {vname}: {kind} {sname} has no {key}"))?;
                    files.push(VolumeFile {
                        path: format!("{vname}/{}", item["path"].as_str().unwrap_or(key)),
                        content: content.clone(),
                        mode: item["mode"].as_u64().map_or(default_mode, |m| m as u32),
                    });
                }
            }
        } else if v.get("emptyDir").is_none() {
            return Err(format!("volume {vname} is not translated: {v}"));
        }
        let source = match m["subPath"].as_str() {
            Some(sub) => format!("{dir}/{sub}"),
            None => dir,
        };
        let ro = m["readOnly"] == json!(true);
        mounts.push(json!({
            "destination": m["mountPath"],
            "type": "bind",
            "source": source,
            "options": ["rbind", "rprivate", if ro { "ro" } else { "rw" }],
        }));
    }

    // Resources: the limits as the CRI plugin sets them (CFS quota over a 100 ms period, shares
    // from the request, the memory limit); the devices of a privileged container all allowed.
    let res = &c["resources"];
    fields(res, "resources", &["limits", "requests"])?;
    for part in ["limits", "requests"] {
        fields(
            &res[part],
            &format!("resources.{part}"),
            &["cpu", "memory", "nvidia.com/gpu"],
        )?;
    }
    let mut resources = json!({
        "devices": [{"allow": false, "access": "rwm"}],
    });
    if let Some(cpu) = res["limits"]["cpu"].as_str() {
        resources["cpu"]["quota"] = json!(quantity("cpu", cpu, 1000.0)? * 100);
        resources["cpu"]["period"] = json!(100_000);
    }
    if let Some(cpu) = res["requests"]["cpu"].as_str() {
        resources["cpu"]["shares"] = json!((quantity("cpu", cpu, 1000.0)? * 1024 / 1000).max(2));
    }
    if let Some(mem) = res["limits"]["memory"].as_str() {
        resources["memory"]["limit"] = json!(quantity("memory", mem, 1.0)?);
    }
    // NVIDIA's device plugin allocates the GPUs: their device nodes and the control device in
    // the container, allowed (a privileged container has every device anyway).
    let gpus = res["limits"]["nvidia.com/gpu"]
        .as_str()
        .map(|n| {
            n.parse::<usize>()
                .map_err(|e| format!("nvidia.com/gpu {n}: {e}"))
        })
        .transpose()?
        .unwrap_or(0);
    let gpu_nodes: Vec<&Device> = host_devices
        .iter()
        .filter(|d| {
            d.path == "/dev/nvidiactl" || (0..gpus).any(|i| d.path == format!("/dev/nvidia{i}"))
        })
        .collect();
    if gpus > 0 && gpu_nodes.len() != gpus + 1 {
        return Err(format!("{gpus} GPUs asked for; the node has {gpu_nodes:?}"));
    }
    let device = |d: &Device| {
        json!({"path": d.path, "type": d.kind.to_string(), "major": d.major,
               "minor": d.minor, "fileMode": 0o660, "uid": 0, "gid": 0})
    };
    let mut devices: Vec<Value> = gpu_nodes.iter().map(|d| device(d)).collect();
    for d in &gpu_nodes {
        resources["devices"].as_array_mut().unwrap().push(json!(
            {"allow": true, "type": "c", "major": d.major, "minor": d.minor, "access": "rwm"}
        ));
    }
    if privileged {
        resources["devices"] = json!([{"allow": true, "access": "rwm"}]);
        devices = host_devices.iter().map(device).collect();
    }

    let config = json!({
        "ociVersion": "1.0.2",
        "process": {
            "user": {"uid": uid, "gid": gid, "additionalGids": groups},
            "args": args,
            "env": env,
            "cwd": "/",
            "capabilities": {
                "bounding": caps, "effective": caps, "permitted": caps,
            },
            "noNewPrivileges": no_new_privileges,
            "oomScoreAdj": -997,
        },
        "root": {"path": rootfs, "readonly": sc["readOnlyRootFilesystem"] == json!(true)},
        "hostname": pod_hostname(pod),
        "mounts": mounts,
        "linux": {
            // The pod's slice, as a kubelet with the systemd cgroup driver makes it for a
            // Guaranteed pod; the container's scope in it (`slice:prefix:name`).
            "cgroupsPath": format!(
                "kubepods-pod{}.slice:cri-containerd:{id}",
                pod.uid.replace('-', "_"),
            ),
            "resources": resources,
            "devices": devices,
            // The pod's own namespaces; the network is the node's here (no CNI in the guest),
            // and on cgroup v2 the CRI plugin gives each container a cgroup namespace.
            "namespaces": [
                {"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
                {"type": "cgroup"},
            ],
            "maskedPaths": if privileged { json!([]) } else { json!(MASKED) },
            "readonlyPaths": if privileged { json!([]) } else { json!(READONLY) },
        },
    });
    Ok((config, files))
}

fn pod_hostname(pod: &Pod) -> String {
    pod.spec["hostname"]
        .as_str()
        .unwrap_or(pod.name)
        .to_string()
}

/// A Kubernetes quantity of RESOURCE in units of SCALE (`500m` cpu at 1000: 500 millicores;
/// `1Gi` memory at 1: bytes), through slurmops' own quantity parser.
fn quantity(resource: &str, q: &str, scale: f64) -> Result<i64, String> {
    slurmops::cluster::values::parse_quantity(q)
        .map(|v| (v * scale).round() as i64)
        .ok_or_else(|| format!("{resource} {q}: not a quantity"))
}

/// The mounts every container gets (containerd's defaults); /sys and the cgroup file system
/// writable for a privileged one.
fn default_mounts(privileged: bool) -> Vec<Value> {
    let rw = if privileged { "rw" } else { "ro" };
    vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
        json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", rw]}),
        json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", rw]}),
        json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}),
    ]
}

const MASKED: [&str; 8] = [
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/sys/firmware",
];
const READONLY: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// containerd's default capabilities (a container that drops none).
const DEFAULT_CAPABILITIES: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// Every capability of Linux 6.12 (a privileged container's).
const ALL_CAPABILITIES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];
