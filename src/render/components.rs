//! The Slurm control plane's daemons: slurmctld (StatefulSet + Services + PDB) and slurmdbd,
//! with the pod pieces they share with slurmrestd (`restapi.rs`). Each function turns one section
//! of the spec into typed Kubernetes objects.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, ExecAction,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource,
    PodSecurityContext, Probe, Service, Volume, VolumeProjection, VolumeResourceRequirements,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::handback;
use super::names::{CHECKSUM_PREFIX, Component, Names, controller_replicas};
use super::objects::{meta, non_root, pdb, selector, service};
use super::pod::{self, PodParts};
use super::reconfigure;
use super::slurm::{
    ETC_SLURM, JWT_KEY_FILE, SLURMCTLD_PORT, SLURMDBD_PORT, STATE_SAVE, SlurmFiles,
};
use crate::cluster::types::{ClusterFile, ClusterSpec, ConfigFile};
use crate::vocab::ANNOTATION_READY_REPLICAS;

/// The volume of slurmctld's /run/slurmctld (pid file, authentication socket), shared with its
/// sidecar.
const RUN_SLURMCTLD: &str = "run-slurmctld";

/// The uid/gid of the `slurm` user in the Slinky images.
const SLURM_UID: i64 = 401;

fn slurm_security() -> PodSecurityContext {
    non_root(SLURM_UID)
}

/// The context of a pod that may copy onto the backup claim: its `fsGroup` (Slurm's user's
/// group) makes a new volume writable; the kubelet changes the claim's files to it only when its
/// top directory is not the group's yet, not on every start (a claim of copies grows large).
pub(super) fn copier_security(s: &ClusterSpec) -> PodSecurityContext {
    let mut c = slurm_security();
    if super::backup::volume(s).is_some() {
        c.fs_group_change_policy = Some("OnRootMismatch".into());
    }
    c
}

/// Spread replicas of one component over Kubernetes nodes where possible.
pub(super) fn spread(names: &Names, component: Component) -> Affinity {
    pod::spread_over_nodes(selector(names, component, None))
}

/// The digest of the slurm.conf settings a reconfigure cannot change: the pod template of a
/// daemon that reads slurm.conf changes (and the daemon restarts) only when they do.
pub(super) fn restart_annotation(files: &SlurmFiles) -> BTreeMap<String, String> {
    let conf = files.get("slurm.conf").map_or("", String::as_str);
    BTreeMap::from([(
        format!("{CHECKSUM_PREFIX}slurm.conf-restart"),
        reconfigure::restart_digest(conf),
    )])
}

/// The sidecar that runs `scontrol reconfigure` once the kubelet has updated slurmctld's files,
/// and on Slurm 24.11 makes the maintenance reservations the controller asks for.
fn reconfigure_sidecar(s: &crate::cluster::types::ClusterSpec) -> Container {
    let reserves = s.reserves_through_sidecar();
    let mut mounts = vec![pod::mount("etc-slurm", ETC_SLURM, true)];
    if reserves {
        mounts.push(pod::mount(
            "maintenance",
            reconfigure::MAINTENANCE_DIR,
            true,
        ));
    }
    let mut script = match reserves {
        true => reconfigure::reserving_script(),
        false => reconfigure::SIDECAR_SCRIPT.into(),
    };
    if controller_replicas(s) > 1 {
        // The backup in control hands it back to a returning primary (render/handback.rs).
        script = handback::sidecar(&script);
        mounts.push(pod::mount("statesave", STATE_SAVE, true));
    }
    // scontrol authenticates through slurmctld's own socket (auth/slurm's sack) in the pod's
    // shared /run/slurmctld: a container has no key of its own to sign with.
    mounts.push(pod::mount(RUN_SLURMCTLD, "/run/slurmctld", false));
    Container {
        name: "reconfigure".into(),
        image: Some(pod::image(s, s.images.slurmctld.as_ref(), "slurmctld")),
        image_pull_policy: Some(s.images.pull_policy.as_str().into()),
        command: Some(vec!["/bin/sh".into(), "-c".into(), script]),
        env: Some(vec![EnvVar {
            name: "SLURM_CONF".into(),
            value: Some(format!("{ETC_SLURM}/slurm.conf")),
            ..EnvVar::default()
        }]),
        volume_mounts: Some(mounts),
        readiness_probe: Some(reconfigure::sidecar_probe(10)),
        liveness_probe: Some(reconfigure::sidecar_probe(60)),
        ..Container::default()
    }
}

/// The ConfigMap of maintenance reservations the sidecar reads (optional: it may be applied
/// after the StatefulSet).
fn maintenance_volume(names: &Names) -> Volume {
    Volume {
        name: "maintenance".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: names.maintenance(),
            optional: Some(true),
            default_mode: Some(0o444),
            items: None,
        }),
        ..Volume::default()
    }
}

/// The config files kept in a Secret or ConfigMap: (file name, its projection into /etc/slurm,
/// what identifies its content). render cannot read the referenced object, so the reference
/// stands for the content: pointing at another Secret, ConfigMap or key restarts slurmctld.
fn referenced_files(
    files: &BTreeMap<String, ConfigFile>,
) -> Vec<(String, VolumeProjection, String)> {
    files
        .iter()
        .filter_map(|(name, f)| {
            if let Some(r) = &f.secret_ref {
                let source = pod::secret_file(r, name, 0o440);
                Some((name.clone(), source, format!("secret {}/{}", r.name, r.key)))
            } else {
                let r = f.config_map_ref.as_ref()?;
                let source = pod::config_map_file(&r.name, &r.key, name, 0o440);
                Some((
                    name.clone(),
                    source,
                    format!("configmap {}/{}", r.name, r.key),
                ))
            }
        })
        .collect()
}

/// Whether clients reach the controller in control at one address (`controller.ha.serviceAddress`).
pub fn behind_one_address(s: &ClusterSpec) -> bool {
    s.behind_one_address()
}

/// slurmctld: a StatefulSet (primary + HA backups) with its state volume, two Services and a PDB.
pub fn controller(
    c: &ClusterFile,
    names: &Names,
    files: &SlurmFiles,
    scripts: &BTreeMap<String, String>,
) -> (Vec<Service>, StatefulSet, PodDisruptionBudget) {
    let s = &c.spec;
    let ctl = &s.controller;
    let mut keys: Vec<(&str, i32)> = files
        .keys()
        .filter(|k| *k != "slurmdbd.conf")
        .map(|k| (k.as_str(), 0o440))
        .collect();
    keys.extend(scripts.keys().map(|k| (k.as_str(), 0o550)));
    let mut sources = vec![
        pod::config_files(&names.config_map(), keys),
        pod::secret_file(&s.auth.slurm_key, "slurm.key", 0o400),
        pod::secret_file(&s.auth.jwt_key, JWT_KEY_FILE, 0o400),
    ];
    let referenced = referenced_files(&ctl.config_files);
    sources.extend(referenced.iter().map(|(_, source, _)| source.clone()));
    let etc = pod::projected("etc-slurm", sources);
    let mut volumes = vec![etc];
    if s.reserves_through_sidecar() {
        volumes.push(maintenance_volume(names));
    }
    let mut claims = None;
    match (&ctl.persistence.existing_claim, ctl.persistence.enabled) {
        (Some(claim), true) => volumes.push(Volume {
            name: "statesave".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: None,
            }),
            ..Volume::default()
        }),
        (None, true) => {
            claims = Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some("statesave".into()),
                    ..ObjectMeta::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    storage_class_name: ctl.persistence.storage_class.clone(),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".into(),
                            Quantity(ctl.persistence.size.clone()),
                        )])),
                        ..Default::default()
                    }),
                    ..PersistentVolumeClaimSpec::default()
                }),
                ..PersistentVolumeClaim::default()
            }]);
        }
        (_, false) => volumes.push(Volume {
            name: "statesave".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        }),
    }
    volumes.push(Volume {
        name: RUN_SLURMCTLD.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    });
    let one_address = behind_one_address(s);
    let main = Container {
        command: Some(handback::command(
            controller_replicas(s) - 1,
            pod::sbin(s, "slurmctld"),
        )),
        volume_mounts: Some(vec![
            pod::mount("etc-slurm", ETC_SLURM, true),
            pod::mount("statesave", STATE_SAVE, false),
            pod::mount(RUN_SLURMCTLD, "/run/slurmctld", false),
        ]),
        ..pod::daemon(
            s,
            "slurmctld",
            pod::image(s, s.images.slurmctld.as_ref(), "slurmctld"),
            vec!["-D".into()],
            SLURMCTLD_PORT,
            5,
        )
    };
    let main = match one_address {
        // Ready: in control (the Service's one endpoint), or nobody is (handback::in_control).
        // Every 2 s, so a failover reaches the Service within seconds of the heartbeat.
        true => Container {
            readiness_probe: Some(Probe {
                exec: Some(ExecAction {
                    command: Some(handback::in_control()),
                }),
                period_seconds: Some(2),
                timeout_seconds: Some(2),
                // Two misses: one slow read of the shared state directory takes nobody out.
                failure_threshold: Some(2),
                ..Probe::default()
            }),
            ..main
        },
        false => main,
    };
    let ctld_image = pod::image(s, s.images.slurmctld.as_ref(), "slurmctld");
    let init: Vec<Container> =
        super::backup::state_copy(s, names, ctld_image, "statesave", STATE_SAVE)
            .into_iter()
            .collect();
    volumes.extend(super::backup::volume(s));
    let mut annotations = restart_annotation(files);
    annotations.extend(
        referenced
            .iter()
            .map(|(name, _, id)| (format!("{CHECKSUM_PREFIX}{name}"), pod::checksum(id))),
    );
    let template = PodParts {
        names,
        spec: s,
        component: Component::Controller,
        node_set: None,
        settings: &ctl.pod,
        main,
        init,
        sidecars: vec![reconfigure_sidecar(s)],
        volumes,
        annotations,
        pod: k8s_openapi::api::core::v1::PodSpec {
            security_context: Some(copier_security(s)),
            affinity: Some(spread(names, Component::Controller)),
            automount_service_account_token: Some(false),
            ..Default::default()
        },
    }
    .template();
    let mut metadata = meta(
        names,
        &names.controller(),
        Some(Component::Controller),
        None,
    );
    if one_address {
        metadata.annotations = Some(BTreeMap::from([(
            ANNOTATION_READY_REPLICAS.to_string(),
            "1".to_string(),
        )]));
    }
    let sts = StatefulSet {
        metadata,
        // The StatefulSet's defaults (OrderedReady, RollingUpdate) roll the controllers one at
        // a time from the highest ordinal: the backups first, each Ready before the next, so a
        // backup stands by while the primary is replaced (tests/e2e/ha.rs). Behind one address a
        // standby is never Ready and would stall both: the pods are made in parallel and
        // slurmops replaces them (controller::controllers), the standbys first.
        spec: Some(StatefulSetSpec {
            replicas: Some(controller_replicas(s) as i32),
            service_name: Some(names.controller_headless()),
            selector: selector(names, Component::Controller, None),
            template,
            volume_claim_templates: claims,
            // Said even when it is the default: turning `serviceAddress` off then shows as the
            // change of an immutable field (plan, allowRecreate) instead of a refused apply.
            pod_management_policy: Some(
                if one_address {
                    "Parallel"
                } else {
                    "OrderedReady"
                }
                .into(),
            ),
            update_strategy: one_address.then(|| StatefulSetUpdateStrategy {
                type_: Some("OnDelete".into()),
                rolling_update: None,
            }),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    };
    let services = vec![
        service(
            names,
            &names.controller(),
            Component::Controller,
            &[("slurmctld", SLURMCTLD_PORT)],
            false,
        ),
        service(
            names,
            &names.controller_headless(),
            Component::Controller,
            &[("slurmctld", SLURMCTLD_PORT)],
            true,
        ),
    ];
    // Behind one address only the controller in control is Ready: a budget of one unavailable
    // would never let it be evicted (its node's drain would hang). Any one controller may go
    // while one is Ready; a standby then takes control.
    let budget = pdb(
        names,
        &names.controller(),
        Component::Controller,
        None,
        names.selector(Component::Controller, None),
        match one_address {
            true => controller_replicas(s) as i32,
            false => 1,
        },
    );
    (services, sts, budget)
}

/// slurmdbd: the config template is in a ConfigMap without the password; an init container adds
/// `StoragePass` from the Secret into a memory-backed volume only the pod can read.
pub fn accounting(
    c: &ClusterFile,
    names: &Names,
    files: &SlurmFiles,
) -> Option<(Service, StatefulSet)> {
    let s = &c.spec;
    let db = s
        .accounting
        .database
        .as_ref()
        .filter(|_| s.accounting.enabled)?;
    let conf = files.get("slurmdbd.conf")?;
    let image = pod::image(s, s.images.slurmdbd.as_ref(), "slurmdbd");
    let keys = pod::projected(
        "slurm-keys",
        vec![
            pod::secret_file(&s.auth.slurm_key, "slurm.key", 0o400),
            pod::secret_file(&s.auth.jwt_key, JWT_KEY_FILE, 0o400),
        ],
    );
    let template_vol = pod::projected(
        "slurmdbd-template",
        vec![pod::config_files(
            &names.slurmdbd_config_map(),
            [("slurmdbd.conf", 0o440)],
        )],
    );
    let etc = Volume {
        name: "etc-slurm".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: None,
        }),
        ..Volume::default()
    };
    let init = Container {
        name: "slurmdbd-conf".into(),
        image: Some(image.clone()),
        image_pull_policy: Some(s.images.pull_policy.as_str().into()),
        command: Some(vec!["/bin/sh".into(), "-ec".into()]),
        args: Some(vec![
            "umask 077; cp /run/slurm-keys/* /etc/slurm/; { cat /run/slurmdbd-template/slurmdbd.conf; printf 'StoragePass=%s\\n' \"$(cat /run/storage-pass/password)\"; } > /etc/slurm/slurmdbd.conf".into(),
        ]),
        // The database password as a file (never in the environment, where `ps e`, a crash
        // dump or a child process would see it), read into slurmdbd.conf, 0600 in memory.
        volume_mounts: Some(vec![pod::mount("etc-slurm", ETC_SLURM, false), pod::mount("slurm-keys", "/run/slurm-keys", true), pod::mount("slurmdbd-template", "/run/slurmdbd-template", true), pod::mount("storage-pass", "/run/storage-pass", true)]),
        security_context: Some(k8s_openapi::api::core::v1::SecurityContext {
            read_only_root_filesystem: Some(true),
            ..Default::default()
        }),
        ..Container::default()
    };
    let main = Container {
        // Its pid file's directory (slurmdbd.conf's PidFile) and /tmp (its ArchiveDir by default,
        // which it will not start without writing; seen on the real kubelet): the root
        // filesystem is read-only.
        volume_mounts: Some(vec![
            pod::mount("etc-slurm", ETC_SLURM, true),
            pod::mount("run-slurmdbd", "/run/slurmdbd", false),
            pod::mount("tmp", "/tmp", false),
        ]),
        ..pod::daemon(s, "slurmdbd", image, vec!["-D".into()], SLURMDBD_PORT, 5)
    };
    let host = db.host.clone().unwrap_or_else(|| names.database_host());
    let mut init = vec![init];
    init.extend(super::backup::database_copy(s, names, db, &host));
    let pass = pod::projected(
        "storage-pass",
        vec![pod::secret_file(&db.password, "password", 0o400)],
    );
    let run = Volume {
        name: "run-slurmdbd".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: None,
        }),
        ..Volume::default()
    };
    let tmp = Volume {
        name: "tmp".into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let mut volumes = vec![etc, keys, template_vol, pass, run, tmp];
    volumes.extend(super::backup::volume(s));
    let template = PodParts {
        names,
        spec: s,
        component: Component::Accounting,
        node_set: None,
        settings: &s.accounting.pod,
        main,
        init,
        sidecars: Vec::new(),
        volumes,
        annotations: pod::checksums([(&"slurmdbd.conf".to_string(), conf)]),
        pod: k8s_openapi::api::core::v1::PodSpec {
            security_context: Some(copier_security(s)),
            automount_service_account_token: Some(false),
            ..Default::default()
        },
    }
    .template();
    let sts = StatefulSet {
        metadata: meta(
            names,
            &names.accounting(),
            Some(Component::Accounting),
            None,
        ),
        spec: Some(StatefulSetSpec {
            replicas: Some(1),
            service_name: Some(names.accounting()),
            selector: selector(names, Component::Accounting, None),
            template,
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    };
    Some((
        service(
            names,
            &names.accounting(),
            Component::Accounting,
            &[("slurmdbd", SLURMDBD_PORT)],
            false,
        ),
        sts,
    ))
}
