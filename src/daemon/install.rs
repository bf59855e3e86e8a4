//! `slurmops install --print`: the daemon's own objects — ServiceAccount, the least-privilege Role
//! and RoleBinding (the same rules the tests run every command under), the ClusterRole that lets
//! it read Nodes (to follow cordons), a Deployment of non-root, read-only replicas with leader
//! election, and a Service for webhooks and metrics.
//!
//! As installed, the daemon talks to Slurm: it reaches the slurmrestd Service each cluster.yaml
//! renders and mints short-lived tokens from that cluster's JWT key Secret (the one Secret the
//! Role lets it `get`, by name); no token is ever put on its command line. Commit signatures are
//! verified when allowed keys are given (ConfigMaps); without them the output says loudly that
//! any commit pushed to the branch is applied.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, HTTPGetAction, KeyToPath, ObjectFieldSelector, PodSecurityContext,
    PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile, SecretVolumeSource,
    SecurityContext, Service, ServiceAccount, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
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
    /// The one cluster (metadata.name) this daemon manages, when several share a namespace.
    pub cluster: Option<String>,
    pub image: String,
    pub repo: String,
    pub branch: String,
    pub path: String,
    pub replicas: i32,
    /// Secret with `token`, or `ssh-privatekey` and `known_hosts`.
    pub git_secret: Option<String>,
    /// Secret with the webhook HMAC key under `secret`.
    pub webhook_secret: Option<String>,
    /// Secret with the live view's bearer token under `token`.
    pub ui_token_secret: Option<String>,
    /// The ClusterRole (and binding) to read Nodes, so that cordons drain workers.
    pub node_reader: bool,
    /// The JWT key Secrets (`spec.auth.jwtKey.name`) the daemon may read; empty: no Slurm.
    pub jwt_secrets: Vec<String>,
    /// The Slurm user its jobs run as, when not the default (`daemon`).
    pub job_user: Option<String>,
    /// ConfigMap with `allowed_signers` (SSH keys allowed to sign commits).
    pub allowed_signers: Option<String>,
    /// ConfigMap with `allowed_gpg_keys` (armored OpenPGP keys allowed to sign commits).
    pub allowed_gpg_keys: Option<String>,
    /// Guardrails widened at install (the daemon's `--allow-*` flags).
    pub guard: Widened,
    /// Workers the daemon's clusters have at most: its memory limit follows (`memory_limit_mib`).
    pub workers: u32,
    /// Jobs their queues hold at most: the daemon keeps them when a decision needs the queue.
    pub jobs: u32,
}

/// The daemon's peak memory measured by the scale bench (`tests/bench.sh scale`, release build,
/// 50,000 jobs in the queue, a rollout's first wave included): MiB at no workers, and per 1,000
/// workers (each with its GPU-sized Kubernetes node watched).
pub const PEAK_BASE_MIB: u32 = 56;
pub const PEAK_PER_THOUSAND_MIB: u32 = 43;
/// MiB per 10,000 jobs kept, when every pass needs the queue (autoscale, canaries; the jobs
/// bench, `tests/bench.sh jobs`: 1,000 to 100,000 held jobs).
pub const PEAK_PER_TEN_THOUSAND_JOBS_MIB: u32 = 11;

/// The memory limit for WORKERS and JOBS: the measured peak and half again, in steps of 64 MiB,
/// at least 256 MiB.
pub fn memory_limit_mib(workers: u32, jobs: u32) -> u32 {
    let peak = PEAK_BASE_MIB
        + PEAK_PER_THOUSAND_MIB * workers.div_ceil(1000)
        + PEAK_PER_TEN_THOUSAND_JOBS_MIB * jobs.div_ceil(10_000);
    (peak * 3 / 2).div_ceil(64).max(4) * 64
}

impl Install {
    /// The daemon's objects' name: `slurmops`, or `slurmops-CLUSTER` for a daemon per cluster.
    pub fn name(&self) -> String {
        match &self.cluster {
            Some(c) => format!("{NAME}-{c}"),
            None => NAME.to_string(),
        }
    }

    /// Whether the daemon verifies commit signatures.
    pub fn verifies_signatures(&self) -> bool {
        self.allowed_signers.is_some() || self.allowed_gpg_keys.is_some()
    }
}

/// What `install --print` says first when signatures are not verified.
pub const UNSIGNED_WARNING: &str = "WARNING: commit signature verification is OFF: every commit pushed to the branch is applied to the cluster. Turn it on with --allowed-signers CONFIGMAP and/or --allowed-gpg-keys CONFIGMAP.";

/// Name of the cluster-scoped node reader of daemon NAME installed in NAMESPACE (one per
/// install, so several installs do not share a binding).
pub fn node_reader_name(name: &str, namespace: &str) -> String {
    format!("{name}-{namespace}-node-reader")
}

/// What the install lets a commit ask for beyond the daemon's safe defaults.
#[derive(Debug, Clone, Default)]
pub struct Widened {
    /// ConfigMap with `policy.yaml` (the daemon's `--policy`), read-only to the daemon.
    pub policy: Option<String>,
    pub host_paths: Vec<String>,
    pub privileged: bool,
    pub service_accounts: Vec<String>,
    pub control_plane: bool,
    pub secrets: Vec<String>,
    pub database_hosts: Vec<String>,
    /// `guarded` or `trusted` (None: the daemon's default, guarded).
    pub trust: Option<String>,
    pub images: Vec<String>,
    pub require_digests: bool,
    pub programs: Vec<String>,
    pub slurm_keys: Vec<String>,
    pub volume_claims: Vec<String>,
    pub config_maps: Vec<String>,
    pub cluster_secrets: Vec<String>,
    pub env: Vec<String>,
    pub volume_types: Vec<String>,
    pub slurm_admins: Vec<String>,
    pub annotations: Vec<String>,
    pub runtime_classes: Vec<String>,
}

impl Install {
    /// The namespaces its clusters live in: those given, else its own.
    pub fn cluster_namespaces(&self) -> Vec<String> {
        match self.cluster_namespaces.is_empty() {
            true => vec![self.namespace.clone()],
            false => self.cluster_namespaces.clone(),
        }
    }
}

pub(super) fn meta(i: &Install, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(i.name()),
        namespace: Some(namespace.into()),
        labels: Some(labels(i)),
        ..ObjectMeta::default()
    }
}

/// The labels of the daemon's objects, also its pods' selector: a daemon per cluster adds the
/// cluster, so that two in one namespace select only their own pods.
pub(super) fn labels(i: &Install) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([
        (crate::vocab::LABEL_NAME.to_string(), NAME.to_string()),
        (crate::vocab::LABEL_MANAGED_BY.to_string(), NAME.to_string()),
    ]);
    if let Some(c) = &i.cluster {
        l.insert(
            crate::status::configmap::LABEL_CLUSTER.to_string(),
            c.clone(),
        );
    }
    l
}

fn to_json<T: serde::Serialize>(o: &T) -> Json {
    serde_json::to_value(o).expect("typed objects serialize")
}

/// The objects, in apply order.
pub fn objects(i: &Install) -> Vec<Json> {
    let mut out = vec![to_json(&ServiceAccount {
        metadata: meta(i, &i.namespace),
        automount_service_account_token: Some(true),
        ..ServiceAccount::default()
    })];
    let clusters = i.cluster_namespaces();
    let mut namespaces = clusters.clone();
    namespaces.push(i.namespace.clone());
    namespaces.sort();
    namespaces.dedup();
    let lease = rbac::lease_for(i.cluster.as_deref());
    for ns in &namespaces {
        // Its own namespace, when no cluster lives there: its Lease, its status and Events, no
        // workload (a pod there could mount its git token and ServiceAccount token).
        let role = match clusters.contains(ns) {
            true => rbac::role(&i.name(), ns, std::slice::from_ref(&lease), &i.jwt_secrets),
            false => rbac::home_role(
                &i.name(),
                ns,
                &lease,
                &crate::status::configmap::name_for(i.cluster.as_deref()),
            ),
        };
        out.push(to_json(&role));
        out.push(to_json(&RoleBinding {
            metadata: meta(i, ns),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: i.name(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: i.name(),
                namespace: Some(i.namespace.clone()),
                ..Subject::default()
            }]),
        }));
    }
    if i.node_reader {
        let name = node_reader_name(&i.name(), &i.namespace);
        let mut role = rbac::node_reader(&name);
        role.metadata.labels = Some(labels(i));
        out.push(to_json(&role));
        out.push(to_json(&ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels(i)),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name,
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: i.name(),
                namespace: Some(i.namespace.clone()),
                ..Subject::default()
            }]),
        }));
    }
    out.push(to_json(&deployment(i)));
    // At most one replica out at a time (a node drain never takes them all).
    out.push(to_json(&PodDisruptionBudget {
        metadata: meta(i, &i.namespace),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(labels(i)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }));
    // The leader alone: a webhook, the view and metrics never reach a standby.
    let mut leader = labels(i);
    leader.insert(crate::vocab::LABEL_LEADER.into(), "true".into());
    out.push(to_json(&Service {
        metadata: meta(i, &i.namespace),
        spec: Some(ServiceSpec {
            selector: Some(leader),
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) fn install() -> Install {
        Install {
            namespace: "slurmops".into(),
            cluster_namespaces: vec!["slurm".into()],
            cluster: None,
            image: "img".into(),
            repo: "https://git.example/infra.git".into(),
            branch: "main".into(),
            path: String::new(),
            replicas: 2,
            git_secret: None,
            webhook_secret: None,
            ui_token_secret: None,
            node_reader: true,
            jwt_secrets: vec!["slurm-jwt".into()],
            job_user: None,
            allowed_signers: None,
            allowed_gpg_keys: None,
            guard: Widened::default(),
            workers: 1000,
            jobs: 50_000,
        }
    }

    #[test]
    fn the_memory_limit_follows_the_workers_as_measured() {
        assert_eq!(memory_limit_mib(0, 0), 256);
        let small = memory_limit_mib(1000, 50_000);
        let large = memory_limit_mib(10_000, 50_000);
        assert!(memory_limit_mib(1000, 100_000) > small);
        // Half again over the measured peak, at every size.
        for (w, limit) in [(1000, small), (10_000, large)] {
            let peak = PEAK_BASE_MIB
                + PEAK_PER_THOUSAND_MIB * w / 1000
                + 5 * PEAK_PER_TEN_THOUSAND_JOBS_MIB;
            assert!(
                limit * 2 >= peak * 3 && limit % 64 == 0,
                "{w}: {limit} for {peak}"
            );
        }
        let objs = objects(&Install {
            workers: 10_000,
            ..install()
        });
        let dep = &find(&objs, "Deployment")[0];
        let limit =
            &dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"];
        assert_eq!(limit, &serde_json::json!(format!("{large}Mi")));
    }

    fn find<'a>(objs: &'a [Json], kind: &str) -> Vec<&'a Json> {
        objs.iter().filter(|o| o["kind"] == kind).collect()
    }

    #[test]
    fn the_role_reads_one_secret_and_one_lease_by_name_and_writes_no_secret() {
        let objs = objects(&install());
        let in_clusters = find(&objs, "Role")
            .into_iter()
            .filter(|r| r["metadata"]["namespace"] == "slurm");
        for role in in_clusters {
            let rules = role["rules"].as_array().unwrap();
            let on = |res: &str| -> Vec<&Json> {
                rules
                    .iter()
                    .filter(|r| r["resources"].as_array().unwrap().iter().any(|x| x == res))
                    .collect()
            };
            let secrets = on("secrets");
            assert_eq!(secrets.len(), 1);
            assert_eq!(secrets[0]["verbs"], serde_json::json!(["get"]));
            assert_eq!(
                secrets[0]["resourceNames"],
                serde_json::json!(["slurm-jwt"])
            );
            for lease in on("leases") {
                let verbs = lease["verbs"].as_array().unwrap();
                assert!(
                    verbs == &[serde_json::json!("create")]
                        || lease["resourceNames"] == serde_json::json!([rbac::LEASE]),
                    "{lease}"
                );
            }
        }
        let mut no_slurm = install();
        no_slurm.jwt_secrets.clear();
        let objs = objects(&no_slurm);
        assert!(objs.iter().all(|o| !o.to_string().contains("\"secrets\"")));
        let args =
            &find(&objs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"];
        assert!(args.as_array().unwrap().iter().any(|a| a == "--no-slurm"));
    }

    #[test]
    fn where_no_cluster_lives_the_daemon_holds_its_lease_status_and_events_and_makes_no_pod() {
        let objs = objects(&install());
        let home: Vec<&Json> = find(&objs, "Role")
            .into_iter()
            .filter(|r| r["metadata"]["namespace"] == "slurmops")
            .collect();
        assert_eq!(home.len(), 1);
        for rule in home[0]["rules"].as_array().unwrap() {
            let resources = rule["resources"].to_string();
            let verbs = rule["verbs"].to_string();
            let named = !rule["resourceNames"].is_null();
            let ok = match resources.as_str() {
                r#"["leases"]"# | r#"["configmaps"]"# => verbs == r#"["create"]"# || named,
                r#"["events"]"# => true,
                // The leader's label on its own pod: no pod is made, read or deleted there.
                r#"["pods"]"# => verbs == r#"["patch"]"#,
                _ => false,
            };
            assert!(ok, "{rule}");
        }
        // The Service selects the leader's label: a request never reaches a standby.
        let service = &find(&objs, "Service")[0]["spec"]["selector"];
        assert_eq!(service[crate::vocab::LABEL_LEADER], "true");
        assert_eq!(service["app.kubernetes.io/name"], "slurmops");
        let env = find(&objs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
            .to_string();
        assert!(env.contains(r#""fieldPath":"metadata.name""#), "{env}");
        let args =
            find(&objs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
                .to_string();
        assert!(
            args.contains("--cluster-namespace=slurm")
                && !args.contains("--cluster-namespace=slurmops"),
            "{args}"
        );
        // Installed for its own namespace (the default): the workload Role there, told to apply there.
        let own = objects(&Install {
            cluster_namespaces: Vec::new(),
            ..install()
        });
        let roles = find(&own, "Role");
        assert_eq!(roles.len(), 1);
        assert!(roles[0].to_string().contains("\"pods\""));
        let args = find(&own, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
            .to_string();
        assert!(args.contains("--cluster-namespace=slurmops"), "{args}");
    }

    #[test]
    fn replicas_spread_and_a_pdb_keeps_one_up_and_signers_come_from_config_maps() {
        let i = install();
        assert!(!i.verifies_signatures());
        let objs = objects(&i);
        let pdb = find(&objs, "PodDisruptionBudget");
        assert_eq!(pdb[0]["spec"]["maxUnavailable"], 1);
        let pod = &find(&objs, "Deployment")[0]["spec"]["template"]["spec"];
        assert_eq!(
            pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
                [0]["podAffinityTerm"]["topologyKey"],
            "kubernetes.io/hostname"
        );

        let signed = Install {
            allowed_signers: Some("signers".into()),
            allowed_gpg_keys: Some("gpg-keys".into()),
            guard: Widened {
                policy: Some("guardrails".into()),
                ..Widened::default()
            },
            ..install()
        };
        assert!(signed.verifies_signatures());
        let objs = objects(&signed);
        let pod = &find(&objs, "Deployment")[0]["spec"]["template"]["spec"];
        let args = pod["containers"][0]["args"].to_string();
        assert!(args.contains("--allowed-signers=/etc/slurmops/signers/allowed_signers"));
        assert!(args.contains("--allowed-gpg-keys=/etc/slurmops/gpg/allowed_gpg_keys"));
        assert!(args.contains("--policy=/etc/slurmops/policy/policy.yaml"));
        let volumes = pod["volumes"].to_string();
        assert!(volumes.contains("\"name\":\"signers\"") && volumes.contains("\"gpg-keys\""));
        assert!(volumes.contains("\"guardrails\""), "{volumes}");
    }

    #[test]
    fn a_daemon_per_cluster_gets_its_own_names_lease_and_pods() {
        let a = Install {
            cluster: Some("a".into()),
            ..install()
        };
        let objs = objects(&a);
        for o in &objs {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            assert!(name.starts_with("slurmops-a"), "{name}");
        }
        let dep = &find(&objs, "Deployment")[0];
        assert_eq!(
            dep["spec"]["selector"]["matchLabels"][crate::vocab::LABEL_CLUSTER],
            "a"
        );
        assert!(
            dep["spec"]["template"]["spec"]["containers"][0]["args"]
                .to_string()
                .contains("--cluster=a")
        );
        let roles = find(&objs, "Role");
        let leases: Vec<&Json> = roles[0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                r["resources"] == serde_json::json!(["leases"]) && r.get("resourceNames").is_some()
            })
            .collect();
        assert_eq!(
            leases[0]["resourceNames"],
            serde_json::json!(["slurmops-leader-a"])
        );
        // The one-per-namespace install keeps its names and selector.
        let one = objects(&install());
        assert_eq!(find(&one, "Deployment")[0]["metadata"]["name"], "slurmops");
        assert!(
            find(&one, "Deployment")[0]["spec"]["selector"]["matchLabels"]
                .get(crate::vocab::LABEL_CLUSTER)
                .is_none()
        );
    }
}
