//! The optional in-cluster MariaDB for slurmdbd (`accounting.database.inCluster`): the
//! quickstart path, as Slinky's chart brings one. One replica on its own volume, reachable only
//! through its Service, tuned as Slurm's accounting guide asks. The image makes the database and
//! the user at its first start from the referenced Secret (the password is never rendered), so
//! slurmdbd finds its database made, as it needs. Production clusters are better served by an
//! external or operator-managed database (backups, failover).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, EmptyDirVolumeSource, EnvVar, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, Service, Volume, VolumeResourceRequirements,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::names::{Component, Names};
use super::objects::{meta, non_root, pdb, selector, service};
use super::pod::{self, PodParts};
use crate::cluster::types::{ClusterFile, Database, InClusterDatabase, PodSettings};
use crate::cluster::values::parse_quantity;

/// The `mysql` user of the official image.
pub const MARIADB_UID: i64 = 999;
pub const DEFAULT_IMAGE: &str = "docker.io/library/mariadb:11.8";
/// The ConfigMap key, mounted in the image's `/etc/mysql/conf.d`.
pub const CNF: &str = "slurm.cnf";
/// The smallest InnoDB buffer pool slurmdbd accepts without warning, half of the 4096M Slurm's
/// accounting guide recommends (measured on the bed: 1536M warns, 2048M does not); also the
/// pool without a memory figure to take half of.
pub const MIN_POOL_MB: u64 = 2048;

/// The database settings (my.cnf) slurmdbd wants.
pub fn cnf(db: &Database, ic: &InClusterDatabase) -> String {
    let memory = ic.resources.as_ref().and_then(|r| {
        let limit = r.limits.as_ref().and_then(|l| l.get("memory"));
        let request = r.requests.as_ref().and_then(|l| l.get("memory"));
        limit.or(request).and_then(|q| parse_quantity(&q.0))
    });
    let pool_mb = memory.map_or(MIN_POOL_MB, |b| ((b / 2.0) / (1024.0 * 1024.0)) as u64);
    format!(
        "# MariaDB for slurmdbd, rendered by slurmops from Slurm's accounting guide.\n\
         [mysqld]\n\
         port={port}\n\
         bind-address=0.0.0.0\n\
         skip-name-resolve\n\
         innodb_buffer_pool_size={pool}M\n\
         innodb_log_file_size=256M\n\
         innodb_lock_wait_timeout=900\n\
         # On by default since MariaDB 11.8; slurmdbd stops on the write conflicts it reports.\n\
         innodb_snapshot_isolation=OFF\n\
         max_allowed_packet=64M\n",
        port = db.port,
        pool = pool_mb.max(MIN_POOL_MB),
    )
}

/// ConfigMap, Service, StatefulSet and PDB of the in-cluster MariaDB, when asked for.
pub fn database(
    c: &ClusterFile,
    names: &Names,
) -> Option<(ConfigMap, Service, StatefulSet, PodDisruptionBudget)> {
    let s = &c.spec;
    let db = s
        .accounting
        .database
        .as_ref()
        .filter(|_| s.accounting.enabled)?;
    let ic = db.in_cluster.as_ref()?;
    let name = names.database();
    let conf = cnf(db, ic);
    let config = ConfigMap {
        metadata: meta(names, &name, Some(Component::Database), None),
        data: Some(BTreeMap::from([(CNF.to_string(), conf.clone())])),
        ..ConfigMap::default()
    };
    let settings = PodSettings {
        resources: ic.resources.clone(),
        ..s.accounting.pod.clone()
    };
    let template = PodParts {
        names,
        spec: s,
        component: Component::Database,
        node_set: None,
        settings: &settings,
        main: container(db, ic),
        init: Vec::new(),
        sidecars: Vec::new(),
        volumes: volumes(&name, db),
        annotations: pod::checksums([(&CNF.to_string(), &conf)]),
        pod: k8s_openapi::api::core::v1::PodSpec {
            security_context: Some(non_root(MARIADB_UID)),
            automount_service_account_token: Some(false),
            ..Default::default()
        },
    }
    .template();
    let sts = StatefulSet {
        metadata: meta(names, &name, Some(Component::Database), None),
        spec: Some(StatefulSetSpec {
            replicas: Some(1),
            service_name: Some(name.clone()),
            selector: selector(names, Component::Database, None),
            template,
            volume_claim_templates: Some(vec![claim(ic)]),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    };
    let svc = service(
        names,
        &name,
        Component::Database,
        &[("mysql", db.port)],
        false,
    );
    // One replica: no voluntary eviction takes accounting's database away unannounced; moving
    // it (kubectl delete pod) is an administrator's decision.
    let budget = pdb(
        names,
        &name,
        Component::Database,
        None,
        names.selector(Component::Database, None),
        0,
    );
    Some((config, svc, sts, budget))
}

fn container(db: &Database, ic: &InClusterDatabase) -> Container {
    let plain = |k: &str, v: &str| EnvVar {
        name: k.into(),
        value: Some(v.into()),
        ..EnvVar::default()
    };
    // The password as a file the entrypoint reads (the official image's `_FILE` contract):
    // never in the environment, where `ps e` or a child process would see it.
    let password = plain("MARIADB_PASSWORD_FILE", &format!("{PASSWORD_DIR}/password"));
    Container {
        name: "mariadb".into(),
        image: Some(ic.image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into())),
        env: Some(vec![
            plain("MARIADB_DATABASE", &db.name),
            plain("MARIADB_USER", &db.user),
            password,
            // No root password anywhere: root logs in over the local socket only.
            plain("MARIADB_RANDOM_ROOT_PASSWORD", "1"),
        ]),
        ports: Some(vec![pod::port("mysql", db.port)]),
        readiness_probe: Some(pod::tcp_probe(db.port, 5)),
        liveness_probe: Some(pod::tcp_probe(db.port, 120)),
        volume_mounts: Some(vec![
            pod::mount("data", "/var/lib/mysql", false),
            pod::mount("config", "/etc/mysql/conf.d", true),
            pod::mount("run", "/run/mysqld", false),
            pod::mount("tmp", "/tmp", false),
            pod::mount("password", PASSWORD_DIR, true),
        ]),
        ..Container::default()
    }
}

/// Where the database password's Secret is mounted.
const PASSWORD_DIR: &str = "/run/secrets/mariadb";

fn volumes(name: &str, db: &Database) -> Vec<Volume> {
    let empty = |n: &str| Volume {
        name: n.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    vec![
        pod::projected("config", vec![pod::config_files(name, [(CNF, 0o444)])]),
        empty("run"),
        empty("tmp"),
        pod::projected(
            "password",
            vec![pod::secret_file(&db.password, "password", 0o440)],
        ),
    ]
}

fn claim(ic: &InClusterDatabase) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("data".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: ic.storage_class.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(ic.storage.clone()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }
}
