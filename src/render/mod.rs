//! `render`: a validated spec in, every Kubernetes object and Slurm config file out.
//!
//! Pure and deterministic: no IO, no clock, no randomness; the same cluster.yaml renders to the
//! same bytes on every machine. Objects are built as typed k8s-openapi structs and only turned
//! into JSON at the end, in the order apply will send them.

pub mod backup;
pub mod backup_schedule;
pub mod components;
pub mod database;
pub mod handback;
pub mod login;
pub mod metrics;
pub mod names;
pub mod network;
pub mod objects;
pub mod pod;
pub mod reconfigure;
pub mod resources;
pub mod restapi;
pub mod slurm;
pub mod workers;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::{Metadata, Resource};
use serde::Serialize;
use serde_json::Value as Json;

use crate::cluster::types::ClusterFile;
pub use names::Names;
pub use slurm::SlurmFiles;

/// One rendered Kubernetes object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Object {
    #[serde(skip)]
    pub api_version: String,
    #[serde(skip)]
    pub kind: String,
    #[serde(skip)]
    pub namespace: String,
    #[serde(skip)]
    pub name: String,
    #[serde(flatten)]
    pub body: Json,
}

impl Object {
    fn from_typed<K>(mut obj: K, names: &Names) -> Object
    where
        K: Resource
            + Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>
            + Serialize,
    {
        let meta = obj.metadata_mut();
        if !names.extra_labels.is_empty() {
            meta.labels
                .get_or_insert_with(BTreeMap::new)
                .extend(names.extra_labels.clone());
        }
        if !names.extra_annotations.is_empty() {
            meta.annotations
                .get_or_insert_with(BTreeMap::new)
                .extend(names.extra_annotations.clone());
        }
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_default();
        let mut body = serde_json::to_value(&obj).expect("k8s-openapi objects serialize");
        if let Json::Object(map) = &mut body {
            // Type information first, as in every manifest people read.
            let mut ordered = serde_json::Map::new();
            ordered.insert("apiVersion".into(), Json::String(K::API_VERSION.into()));
            ordered.insert("kind".into(), Json::String(K::KIND.into()));
            for (k, v) in std::mem::take(map) {
                ordered.entry(k).or_insert(v);
            }
            *map = ordered;
        }
        Object {
            api_version: K::API_VERSION.into(),
            kind: K::KIND.into(),
            namespace,
            name,
            body,
        }
    }

    /// `Kind/namespace/name`, unique within a rendering.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// Everything one cluster.yaml renders to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rendered {
    /// In apply order: config, services, slurmdbd (and its scheduled copies), slurmctld, slurmrestd, login, workers, PDBs.
    pub objects: Vec<Object>,
    /// Slurm config files by name (slurmdbd.conf without its password).
    pub slurm: SlurmFiles,
    pub scripts: BTreeMap<String, String>,
}

impl Rendered {
    pub fn get(&self, kind: &str, name: &str) -> Option<&Object> {
        self.objects
            .iter()
            .find(|o| o.kind == kind && o.name == name)
    }
}

pub fn render(c: &ClusterFile) -> Rendered {
    let names = Names::new(c);
    let files = slurm::render_files(c, &names);
    let scripts = slurm::script_files(c);
    let mut config = files.clone();
    let dbd_conf = config.remove("slurmdbd.conf");
    config.extend(scripts.clone());
    if let Some(h) = &c.spec.controller.health_check {
        config.insert(slurm::HEALTH_CHECK_FILE.into(), h.program.clone());
    }

    let mut out = Vec::new();
    let mut push = |o: Object| out.push(o);
    push(Object::from_typed(
        config_map(&names, &names.config_map(), config),
        &names,
    ));
    if c.spec.reserves_through_sidecar() {
        // Its keys are the controller's (field manager slurmops-maintenance): apply sets none.
        push(Object::from_typed(
            ConfigMap {
                metadata: objects::meta(&names, &names.maintenance(), None, None),
                ..ConfigMap::default()
            },
            &names,
        ));
    }
    if let Some(conf) = dbd_conf {
        push(Object::from_typed(
            config_map(
                &names,
                &names.slurmdbd_config_map(),
                BTreeMap::from([("slurmdbd.conf".to_string(), conf)]),
            ),
            &names,
        ));
    }
    let accounting = components::accounting(c, &names, &files);
    let database = database::database(c, &names);
    let (ctl_services, ctl, ctl_pdb) = components::controller(c, &names, &files, &scripts);
    let restapi = restapi::restapi(c, &names, &files);
    let logins: Vec<_> = c
        .spec
        .login_sets
        .iter()
        .map(|l| login::login(c, &names, l))
        .collect();
    let workers: Vec<_> = c
        .spec
        .node_sets
        .iter()
        .map(|ns| workers::node_set(c, &names, ns))
        .collect();

    // Services first, so that DNS names exist before the pods that use them.
    for svc in ctl_services {
        push(Object::from_typed(svc, &names));
    }
    if let Some((cm, svc, _, _)) = &database {
        push(Object::from_typed(cm.clone(), &names));
        push(Object::from_typed(svc.clone(), &names));
    }
    if let Some((svc, _)) = &accounting {
        push(Object::from_typed(svc.clone(), &names));
    }
    if let Some((svc, _, _)) = &restapi {
        push(Object::from_typed(svc.clone(), &names));
    }
    for (svc, _) in &logins {
        push(Object::from_typed(svc.clone(), &names));
    }
    push(Object::from_typed(workers::workers_service(&names), &names));
    if let Some(svc) = metrics::metrics_service(c, &names) {
        push(Object::from_typed(svc, &names));
    }
    let mut pdbs = Vec::new();
    if let Some((_, _, sts, pdb)) = database {
        push(Object::from_typed(sts, &names));
        pdbs.push(pdb);
    }
    if let Some((_, sts)) = accounting {
        push(Object::from_typed(sts, &names));
    }
    if let Some(cron_job) = backup_schedule::cron_job(c, &names) {
        push(Object::from_typed(cron_job, &names));
    }
    push(Object::from_typed(ctl, &names));
    let restapi_pdb = restapi.map(|(_, dep, pdb)| {
        push(Object::from_typed(dep, &names));
        pdb
    });
    for (_, dep) in logins {
        push(Object::from_typed(dep, &names));
    }
    pdbs.push(ctl_pdb);
    pdbs.extend(restapi_pdb);
    for (workload, pdb) in workers {
        match workload {
            workers::Workload::StatefulSet(sts) => push(Object::from_typed(*sts, &names)),
            workers::Workload::PerNode(t) => push(Object::from_typed(*t, &names)),
        }
        pdbs.push(pdb);
    }
    for pdb in pdbs {
        push(Object::from_typed(pdb, &names));
    }
    for np in network::policies(c, &names) {
        push(Object::from_typed(np, &names));
    }
    if let Some(sm) = metrics::service_monitor(c, &names) {
        push(Object::from_typed(sm, &names));
    }
    Rendered {
        objects: out,
        slurm: files,
        scripts,
    }
}

fn config_map(names: &Names, name: &str, data: BTreeMap<String, String>) -> ConfigMap {
    ConfigMap {
        metadata: objects::meta(names, name, None, None),
        data: Some(data),
        ..ConfigMap::default()
    }
}
