//! `slurmops install --print`: the daemon's own objects — ServiceAccount, the least-privilege Role
//! and RoleBinding (the same rules the tests run every command under), the ClusterRole that lets
//! it read Nodes (to follow cordons), a Deployment of non-root, read-only replicas with leader
//! election, and a Service for webhooks and metrics.
//!
//! As installed, the daemon talks to Slurm: it reaches the slurmrestd Service each cluster.yaml
//! renders and mints short-lived tokens from that cluster's JWT key Secret (read with the Role's
//! `get` on Secrets of the cluster namespace); no token is ever put on its command line.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SeccompProfile, SecretVolumeSource, SecurityContext, Service,
    ServiceAccount, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value as Json;

use crate::apply::rbac;

pub const NAME: &str = "slurmops";
const PORT: i32 = 8080;

/// What to install.
#[derive(Debug, Clone)]
pub struct Install {
    /// Where the daemon runs (its status ConfigMap and Lease live here).
    pub namespace: String,
    /// Namespaces of the clusters it manages (cluster.yaml's metadata.namespace).
    pub cluster_namespaces: Vec<String>,
    pub image: String,
    pub repo: String,
    pub branch: String,
    pub path: String,
    pub replicas: i32,
    /// Secret with `token`, or `ssh-privatekey` and `known_hosts`.
    pub git_secret: Option<String>,
    /// Secret with the webhook HMAC key under `secret`.
    pub webhook_secret: Option<String>,
    /// The ClusterRole (and binding) to read Nodes, so that cordons drain workers.
    pub node_reader: bool,
}

/// Name of the cluster-scoped node reader of the daemon installed in NAMESPACE (one per install,
/// so several installs do not share a binding).
pub fn node_reader_name(namespace: &str) -> String {
    format!("{NAME}-{namespace}-node-reader")
}

fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        labels: Some(labels()),
        ..ObjectMeta::default()
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), NAME.to_string()),
        ("app.kubernetes.io/managed-by".to_string(), NAME.to_string()),
    ])
}

fn to_json<T: serde::Serialize>(o: &T) -> Json {
    serde_json::to_value(o).expect("typed objects serialize")
}

/// The objects, in apply order.
pub fn objects(i: &Install) -> Vec<Json> {
    let mut out = vec![to_json(&ServiceAccount {
        metadata: meta(NAME, &i.namespace),
        automount_service_account_token: Some(true),
        ..ServiceAccount::default()
    })];
    let mut namespaces = vec![i.namespace.clone()];
    namespaces.extend(i.cluster_namespaces.iter().cloned());
    namespaces.sort();
    namespaces.dedup();
    for ns in &namespaces {
        out.push(to_json(&rbac::role(NAME, ns)));
        out.push(to_json(&RoleBinding {
            metadata: meta(NAME, ns),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: NAME.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: NAME.into(),
                namespace: Some(i.namespace.clone()),
                ..Subject::default()
            }]),
        }));
    }
    if i.node_reader {
        let name = node_reader_name(&i.namespace);
        let mut role = rbac::node_reader(&name);
        role.metadata.labels = Some(labels());
        out.push(to_json(&role));
        out.push(to_json(&ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels()),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name,
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: NAME.into(),
                namespace: Some(i.namespace.clone()),
                ..Subject::default()
            }]),
        }));
    }
    out.push(to_json(&deployment(i)));
    out.push(to_json(&Service {
        metadata: meta(NAME, &i.namespace),
        spec: Some(ServiceSpec {
            selector: Some(labels()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: PORT,
                // Explicit: server-side apply needs the list key on Kubernetes < 1.26.
                protocol: Some("TCP".into()),
                target_port: Some(IntOrString::String("http".into())),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }));
    out
}

fn args(i: &Install) -> Vec<String> {
    let mut a = vec![
        "run".to_string(),
        format!("--repo={}", i.repo),
        format!("--branch={}", i.branch),
        format!("--listen=0.0.0.0:{PORT}"),
        "--mirror=/var/lib/slurmops/mirror".into(),
    ];
    if !i.path.is_empty() {
        a.push(format!("--path={}", i.path));
    }
    if i.git_secret.is_some() {
        if i.repo.starts_with("ssh://") || i.repo.contains('@') && !i.repo.contains("://") {
            a.push("--ssh-key=/etc/slurmops/git/ssh-privatekey".into());
            a.push("--known-hosts=/etc/slurmops/git/known_hosts".into());
        } else {
            a.push("--token-file=/etc/slurmops/git/token".into());
        }
    }
    if i.webhook_secret.is_some() {
        a.push("--webhook-secret-file=/etc/slurmops/webhook/secret".into());
    }
    a
}

fn probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("http".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(10),
        ..Probe::default()
    }
}

fn secret_volume(name: &str, secret: &str, mount: &str) -> (Volume, VolumeMount) {
    (
        Volume {
            name: name.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.into()),
                default_mode: Some(0o400),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        VolumeMount {
            name: name.into(),
            mount_path: mount.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    )
}

fn deployment(i: &Install) -> Deployment {
    let mut volumes = vec![Volume {
        name: "state".into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }];
    let mut mounts = vec![VolumeMount {
        name: "state".into(),
        mount_path: "/var/lib/slurmops".into(),
        ..VolumeMount::default()
    }];
    for (name, secret, mount) in [
        ("git", &i.git_secret, "/etc/slurmops/git"),
        ("webhook", &i.webhook_secret, "/etc/slurmops/webhook"),
    ] {
        if let Some(s) = secret {
            let (v, m) = secret_volume(name, s, mount);
            volumes.push(v);
            mounts.push(m);
        }
    }
    let container = Container {
        name: NAME.into(),
        image: Some(i.image.clone()),
        args: Some(args(i)),
        env: Some(vec![EnvVar {
            name: "POD_NAMESPACE".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.namespace".into(),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        }]),
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        liveness_probe: Some(probe("/healthz")),
        readiness_probe: Some(probe("/readyz")),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("50m".into())),
                ("memory".to_string(), Quantity("64Mi".into())),
            ])),
            limits: Some(BTreeMap::from([(
                "memory".to_string(),
                Quantity("256Mi".into()),
            )])),
            ..ResourceRequirements::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    Deployment {
        metadata: meta(NAME, &i.namespace),
        spec: Some(DeploymentSpec {
            replicas: Some(i.replicas),
            selector: LabelSelector {
                match_labels: Some(labels()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(NAME.into()),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(65532),
                        run_as_group: Some(65532),
                        fs_group: Some(65532),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..SeccompProfile::default()
                        }),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![container],
                    volumes: Some(volumes),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}
