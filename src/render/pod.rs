//! Building blocks shared by every pod-bearing component: the pod template with the cluster-wide
//! settings (pull secrets, priority class, placement), the user's typed overrides, config
//! checksums, and the projected /etc/slurm volume.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ConfigMapProjection, Container, ContainerPort, KeyToPath, LocalObjectReference,
    PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, Probe, ProjectedVolumeSource,
    SecretProjection, TCPSocketAction, Volume, VolumeMount, VolumeProjection,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use super::names::{CHECKSUM_PREFIX, Component, Names};
use crate::cluster::types::{ClusterSpec, PodSettings, SecretRef};

/// A short, stable digest of a config file, for pod template annotations.
pub fn checksum(content: &str) -> String {
    let digest = Sha256::digest(content.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Checksum annotations for the config files a pod mounts: a change to exactly these files
/// changes the pod template, and so replaces exactly the pods that read them.
pub fn checksums<'a>(
    files: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> BTreeMap<String, String> {
    files
        .into_iter()
        .map(|(name, content)| (format!("{CHECKSUM_PREFIX}{name}"), checksum(content)))
        .collect()
}

/// The image of a component: the override if set, else `REGISTRY/PROGRAM:VERSION-FLAVOR`.
pub fn image(spec: &ClusterSpec, override_: Option<&String>, program: &str) -> String {
    override_.cloned().unwrap_or_else(|| {
        format!(
            "{}/{program}:{}-{}",
            spec.images.registry, spec.slurm_version, spec.images.flavor
        )
    })
}

pub fn tcp_probe(port: u16, initial_delay: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(port.into()),
            host: None,
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(10),
        ..Probe::default()
    }
}

/// PROGRAM (a Slurm daemon) by its absolute path in SPEC's images (`images.sbin`), so that no
/// search path decides what runs.
pub fn sbin(spec: &ClusterSpec, program: &str) -> String {
    format!("{}/{program}", spec.images.sbin.trim_end_matches('/'))
}

/// A Slurm daemon container: runs PROGRAM in the foreground, serves PORT (named after the
/// program) and is probed on it.
pub fn daemon(
    spec: &ClusterSpec,
    program: &str,
    image: String,
    args: Vec<String>,
    port_: u16,
    ready_after: i32,
) -> Container {
    Container {
        name: program.into(),
        image: Some(image),
        image_pull_policy: Some(spec.images.pull_policy.as_str().into()),
        command: Some(vec![sbin(spec, program)]),
        args: Some(args),
        ports: Some(vec![port(program, port_)]),
        readiness_probe: Some(tcp_probe(port_, ready_after)),
        liveness_probe: Some(tcp_probe(port_, 60)),
        ..Container::default()
    }
}

pub fn port(name: &str, port: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: port.into(),
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}

pub fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: Some(read_only),
        ..VolumeMount::default()
    }
}

/// Environment variable NAME from one Secret key (it must be there: the pod waits for it).
pub fn secret_env(name: &str, r: &SecretRef) -> k8s_openapi::api::core::v1::EnvVar {
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector};
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: r.name.clone(),
                key: r.key.clone(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// One Secret key projected as a file.
pub fn secret_file(r: &SecretRef, path: &str, mode: i32) -> VolumeProjection {
    VolumeProjection {
        secret: Some(SecretProjection {
            name: r.name.clone(),
            items: Some(vec![KeyToPath {
                key: r.key.clone(),
                path: path.into(),
                mode: Some(mode),
            }]),
            optional: Some(false),
        }),
        ..VolumeProjection::default()
    }
}

/// One key of the ConfigMap NAME projected as the file PATH.
pub fn config_map_file(name: &str, key: &str, path: &str, mode: i32) -> VolumeProjection {
    VolumeProjection {
        config_map: Some(ConfigMapProjection {
            name: name.into(),
            items: Some(vec![KeyToPath {
                key: key.into(),
                path: path.into(),
                mode: Some(mode),
            }]),
            optional: Some(false),
        }),
        ..VolumeProjection::default()
    }
}

/// ConfigMap keys projected as files of the same name.
pub fn config_files<'a>(
    config_map: &str,
    keys: impl IntoIterator<Item = (&'a str, i32)>,
) -> VolumeProjection {
    VolumeProjection {
        config_map: Some(ConfigMapProjection {
            name: config_map.into(),
            items: Some(
                keys.into_iter()
                    .map(|(k, mode)| KeyToPath {
                        key: k.into(),
                        path: k.into(),
                        mode: Some(mode),
                    })
                    .collect(),
            ),
            optional: Some(false),
        }),
        ..VolumeProjection::default()
    }
}

pub fn projected(name: &str, sources: Vec<VolumeProjection>) -> Volume {
    Volume {
        name: name.into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(sources),
            default_mode: Some(0o440),
        }),
        ..Volume::default()
    }
}

/// What a component contributes to its pod; [`PodParts::template`] adds the rest.
/// Pods matching SELECTOR spread over Kubernetes nodes where the nodes allow it (preferred
/// anti-affinity on the hostname).
pub fn spread_over_nodes(selector: LabelSelector) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(selector),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

/// The user's affinity added to the rendered one: the rendered anti-affinity terms (one worker
/// per node, control-plane spread) stay, the user's terms come after them; node and pod
/// affinity, which slurmops never renders, are the user's.
fn merge_affinity(rendered: Option<Affinity>, user: &Affinity) -> Affinity {
    let mut out = rendered.unwrap_or_default();
    if user.node_affinity.is_some() {
        out.node_affinity = user.node_affinity.clone();
    }
    if user.pod_affinity.is_some() {
        out.pod_affinity = user.pod_affinity.clone();
    }
    if let Some(u) = &user.pod_anti_affinity {
        let anti = out.pod_anti_affinity.get_or_insert_with(Default::default);
        if let Some(terms) = &u.required_during_scheduling_ignored_during_execution {
            anti.required_during_scheduling_ignored_during_execution
                .get_or_insert_with(Vec::new)
                .extend(terms.iter().cloned());
        }
        if let Some(terms) = &u.preferred_during_scheduling_ignored_during_execution {
            anti.preferred_during_scheduling_ignored_during_execution
                .get_or_insert_with(Vec::new)
                .extend(terms.iter().cloned());
        }
    }
    out
}

/// The container-level half of Pod Security "restricted" (the pod-level half — non-root UID,
/// RuntimeDefault seccomp — is the component's): no privilege escalation, no capability.
fn restricted(c: &mut Container) {
    let sc = c.security_context.get_or_insert_with(Default::default);
    sc.allow_privilege_escalation = Some(false);
    sc.capabilities = Some(k8s_openapi::api::core::v1::Capabilities {
        drop: Some(vec!["ALL".into()]),
        ..Default::default()
    });
}

/// The control plane's components: Pod Security "restricted", read-only roots.
fn control_plane(c: Component) -> bool {
    matches!(
        c,
        Component::Controller | Component::Accounting | Component::RestApi | Component::Database
    )
}

pub struct PodParts<'a> {
    pub names: &'a Names,
    pub spec: &'a ClusterSpec,
    pub component: Component,
    pub node_set: Option<&'a str>,
    pub settings: &'a PodSettings,
    pub main: Container,
    pub init: Vec<Container>,
    /// Containers of slurmops' own beside the main one.
    pub sidecars: Vec<Container>,
    pub volumes: Vec<Volume>,
    pub annotations: BTreeMap<String, String>,
    pub pod: PodSpec,
}

impl PodParts<'_> {
    pub fn template(self) -> PodTemplateSpec {
        let s = self.settings;
        let mut labels = self.names.labels(Some(self.component), self.node_set);
        let mut annotations = self.annotations;
        let mut main = self.main;
        let asked = main.resources.take().or_else(|| s.resources.clone());
        main.resources = Some(super::resources::over(
            super::resources::of(self.component),
            asked,
        ));
        let mut init = self.init;
        let mut extra = self.sidecars;
        // The control plane's programs and slurmops' sidecars write only to their volumes
        // (state, sockets, pid files): their root filesystems are read-only.
        if control_plane(self.component) {
            for c in std::iter::once(&mut main).chain(extra.iter_mut()) {
                let sc = c.security_context.get_or_insert_with(Default::default);
                sc.read_only_root_filesystem.get_or_insert(true);
            }
        }
        // Every other container asks a little too: no pod of the cluster is BestEffort. Ours
        // are bounded (a memory limit); a user's extra container gets no limit it did not set.
        for c in init.iter_mut().chain(extra.iter_mut()) {
            c.resources = Some(super::resources::over(
                super::resources::HELPER,
                c.resources.take(),
            ));
        }
        if let Some(o) = &s.pod_template {
            let users = super::resources::Ask {
                memory_limit: None,
                ..super::resources::HELPER
            };
            let theirs = |c: &Container| Container {
                resources: Some(super::resources::over(users, c.resources.clone())),
                ..c.clone()
            };
            init.extend(o.init_containers.iter().map(theirs));
            extra.extend(o.extra_containers.iter().map(theirs));
        }
        // Control-plane pods pass Pod Security "restricted", sidecars included.
        if control_plane(self.component) {
            for c in std::iter::once(&mut main)
                .chain(init.iter_mut())
                .chain(extra.iter_mut())
            {
                restricted(c);
            }
        }
        let mut containers = vec![main];
        containers.extend(extra);
        let mut pod = PodSpec {
            containers,
            init_containers: (!init.is_empty()).then_some(init),
            volumes: (!self.volumes.is_empty()).then_some(self.volumes),
            image_pull_secrets: (!self.spec.image_pull_secrets.is_empty()).then(|| {
                self.spec
                    .image_pull_secrets
                    .iter()
                    .map(|n| LocalObjectReference { name: n.clone() })
                    .collect()
            }),
            priority_class_name: self.spec.priority_class_name.clone(),
            service_account_name: s.service_account_name.clone(),
            node_selector: (!s.node_selector.is_empty()).then(|| s.node_selector.clone()),
            tolerations: (!s.tolerations.is_empty()).then(|| s.tolerations.clone()),
            ..self.pod
        };
        if let Some(user) = &s.affinity {
            pod.affinity = Some(merge_affinity(pod.affinity.take(), user));
        }
        if let Some(o) = &s.pod_template {
            labels.extend(o.labels.clone());
            annotations.extend(o.annotations.clone());
            if !o.env.is_empty() {
                pod.containers[0]
                    .env
                    .get_or_insert_with(Vec::new)
                    .extend(o.env.clone());
            }
            if o.security_context.is_some() {
                pod.security_context = o.security_context.clone();
            }
            pod.host_network = o.host_network.or(pod.host_network);
            pod.dns_policy = o.dns_policy.clone().or(pod.dns_policy);
            pod.runtime_class_name = o.runtime_class_name.clone().or(pod.runtime_class_name);
            pod.scheduler_name = o.scheduler_name.clone().or(pod.scheduler_name);
            pod.termination_grace_period_seconds = o
                .termination_grace_period_seconds
                .or(pod.termination_grace_period_seconds);
            if !o.topology_spread_constraints.is_empty() {
                pod.topology_spread_constraints = Some(o.topology_spread_constraints.clone());
            }
        }
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels),
                annotations: (!annotations.is_empty()).then_some(annotations),
                ..ObjectMeta::default()
            }),
            spec: Some(pod),
        }
    }
}
