//! The daemon's Deployment: non-root, read-only replicas spread over nodes, their command line
//! from the install's settings, the Secrets and ConfigMaps they mount, probes and resources.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, HTTPGetAction, KeyToPath, ObjectFieldSelector, PodSecurityContext,
    PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile, SecretVolumeSource,
    SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::settings::{Install, NAME, PORT, labels, memory_limit_mib, meta};

pub(super) fn args(i: &Install) -> Vec<String> {
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
    if i.ui_token_secret.is_some() {
        a.push("--ui-token-file=/etc/slurmops/ui/token".into());
    }
    if i.allowed_signers.is_some() {
        a.push("--allowed-signers=/etc/slurmops/signers/allowed_signers".into());
    }
    if i.allowed_gpg_keys.is_some() {
        a.push("--allowed-gpg-keys=/etc/slurmops/gpg/allowed_gpg_keys".into());
    }
    if i.jwt_secrets.is_empty() {
        a.push("--no-slurm".into());
    } else if let Some(u) = &i.job_user {
        a.push(format!("--job-user={u}"));
    }
    if let Some(c) = &i.cluster {
        a.push(format!("--cluster={c}"));
    }
    for ns in i.cluster_namespaces() {
        a.push(format!("--cluster-namespace={ns}"));
    }
    let g = &i.guard;
    if g.policy.is_some() {
        a.push("--policy=/etc/slurmops/policy/policy.yaml".into());
    }
    a.extend(
        g.host_paths
            .iter()
            .map(|p| format!("--allow-host-path={p}")),
    );
    a.extend(
        g.service_accounts
            .iter()
            .map(|s| format!("--allow-service-account={s}")),
    );
    if g.privileged {
        a.push("--allow-privileged".into());
    }
    if g.control_plane {
        a.push("--allow-control-plane".into());
    }
    a.extend(g.secrets.iter().map(|n| format!("--allow-secret={n}")));
    a.extend(
        g.database_hosts
            .iter()
            .map(|h| format!("--allow-database-host={h}")),
    );
    if let Some(t) = &g.trust {
        a.push(format!("--trust={t}"));
    }
    if g.require_digests {
        a.push("--require-digests".into());
    }
    for (flag, values) in [
        ("allow-image", &g.images),
        ("allow-program", &g.programs),
        ("allow-slurm-key", &g.slurm_keys),
        ("allow-volume-claim", &g.volume_claims),
        ("allow-config-map", &g.config_maps),
        ("cluster-secret", &g.cluster_secrets),
        ("allow-env", &g.env),
        ("allow-volume-type", &g.volume_types),
        ("allow-slurm-admin", &g.slurm_admins),
        ("allow-annotation", &g.annotations),
        ("allow-runtime-class", &g.runtime_classes),
    ] {
        a.extend(values.iter().map(|v| format!("--{flag}={v}")));
    }
    a
}

fn config_map_volume(
    name: &str,
    config_map: &str,
    key: &str,
    mount: &str,
) -> (Volume, VolumeMount) {
    let volume = Volume {
        name: name.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.into(),
            items: Some(vec![KeyToPath {
                key: key.into(),
                path: key.into(),
                ..KeyToPath::default()
            }]),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    };
    mounted(volume, mount)
}

/// VOLUME and its read-only mount at MOUNT.
fn mounted(volume: Volume, mount: &str) -> (Volume, VolumeMount) {
    let m = VolumeMount {
        name: volume.name.clone(),
        mount_path: mount.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    };
    (volume, m)
}

/// Replicas spread over nodes when the nodes allow it.
fn spread(i: &Install) -> Affinity {
    crate::render::pod::spread_over_nodes(LabelSelector {
        match_labels: Some(labels(i)),
        ..LabelSelector::default()
    })
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
    let volume = Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            default_mode: Some(0o400),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    };
    mounted(volume, mount)
}

/// The environment variable NAME holding the pod's field PATH (the downward API).
fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

pub(super) fn deployment(i: &Install) -> Deployment {
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
        ("ui", &i.ui_token_secret, "/etc/slurmops/ui"),
    ] {
        if let Some(s) = secret {
            let (v, m) = secret_volume(name, s, mount);
            volumes.push(v);
            mounts.push(m);
        }
    }
    for (name, cm, key, mount) in [
        (
            "signers",
            &i.allowed_signers,
            "allowed_signers",
            "/etc/slurmops/signers",
        ),
        (
            "gpg",
            &i.allowed_gpg_keys,
            "allowed_gpg_keys",
            "/etc/slurmops/gpg",
        ),
        (
            "policy",
            &i.guard.policy,
            "policy.yaml",
            "/etc/slurmops/policy",
        ),
    ] {
        if let Some(cm) = cm {
            let (v, m) = config_map_volume(name, cm, key, mount);
            volumes.push(v);
            mounts.push(m);
        }
    }
    let container = Container {
        name: NAME.into(),
        image: Some(i.image.clone()),
        args: Some(args(i)),
        env: Some(vec![
            field_env("POD_NAMESPACE", "metadata.namespace"),
            field_env("POD_NAME", "metadata.name"),
        ]),
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
                Quantity(format!("{}Mi", memory_limit_mib(i.workers, i.jobs))),
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
        metadata: meta(i, &i.namespace),
        spec: Some(DeploymentSpec {
            replicas: Some(i.replicas),
            selector: LabelSelector {
                match_labels: Some(labels(i)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(i)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(i.name()),
                    affinity: Some(spread(i)),
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
