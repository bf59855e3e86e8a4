//! Names, labels and ports of everything slurmops renders, in one place, so that render, plan and the
//! later apply/rollout stages agree on what an object is called and how it is selected.

use std::collections::BTreeMap;

use crate::cluster::types::{ClusterFile, ClusterSpec};

pub use crate::vocab::{
    ANNOTATION_CANARY, ANNOTATION_REPLICAS, CHECKSUM_PREFIX, LABEL_BUSY, LABEL_COMPONENT,
    LABEL_INSTANCE, LABEL_LOGIN_SET, LABEL_MANAGED_BY, LABEL_NAME, LABEL_NODESET, LABEL_REVISION,
    LABEL_SLURM_VERSION,
};

/// Where each daemon listens (the Services and `--conf-server` name them).
pub const SLURMCTLD_PORT: u16 = 6817;
pub const SLURMD_PORT: u16 = 6818;
pub const SLURMDBD_PORT: u16 = 6819;
pub const SLURMRESTD_PORT: u16 = 6820;
/// `SlurmctldTimeout` with backup controllers: a silent primary is replaced after this long.
pub const HA_TAKEOVER_SECONDS: u32 = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Controller,
    Accounting,
    RestApi,
    Login,
    Worker,
    Database,
}

impl Component {
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Controller => "controller",
            Component::Accounting => "accounting",
            Component::RestApi => "restapi",
            Component::Login => "login",
            Component::Worker => "worker",
            Component::Database => "database",
        }
    }
    /// The Slurm program the component runs (the `app.kubernetes.io/name`).
    pub fn program(self) -> &'static str {
        match self {
            Component::Controller => "slurmctld",
            Component::Accounting => "slurmdbd",
            Component::RestApi => "slurmrestd",
            Component::Login => "login",
            Component::Worker => "slurmd",
            Component::Database => "mariadb",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Names {
    pub name: String,
    pub namespace: String,
    pub cluster_name: String,
    /// `metadata.labels` / `metadata.annotations` of cluster.yaml, added to every object.
    pub extra_labels: BTreeMap<String, String>,
    pub extra_annotations: BTreeMap<String, String>,
    pub slurm_version: String,
}

impl Names {
    pub fn new(c: &ClusterFile) -> Self {
        Names {
            name: c.metadata.name.clone(),
            namespace: c.metadata.namespace.clone(),
            cluster_name: c
                .spec
                .cluster_name
                .clone()
                .unwrap_or_else(|| c.metadata.name.clone()),
            extra_labels: c.metadata.labels.clone(),
            extra_annotations: c.metadata.annotations.clone(),
            slurm_version: c.spec.slurm_version.clone(),
        }
    }

    pub fn of(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.name)
    }
    pub fn config_map(&self) -> String {
        self.of("config")
    }
    /// The maintenance reservations slurmctld's sidecar makes (`ClusterSpec::reserves_through_sidecar`).
    pub fn maintenance(&self) -> String {
        self.of("maintenance")
    }
    pub fn slurmdbd_config_map(&self) -> String {
        self.of("slurmdbd")
    }
    pub fn controller(&self) -> String {
        self.of("controller")
    }
    /// The Service Prometheus scrapes slurmctld's metrics through.
    pub fn metrics(&self) -> String {
        self.of("metrics")
    }
    pub fn controller_headless(&self) -> String {
        self.of("controller-headless")
    }
    pub fn accounting(&self) -> String {
        self.of("accounting")
    }
    pub fn restapi(&self) -> String {
        self.of("restapi")
    }
    pub fn workers_service(&self) -> String {
        self.of("workers")
    }
    pub fn login(&self, set: &str) -> String {
        self.of(&format!("login-{set}"))
    }

    fn svc_domain(&self, service: &str) -> String {
        format!("{service}.{}.svc.cluster.local", self.namespace)
    }

    /// The controller Service's name in the cluster DNS (`SlurmctldAddr` behind one address).
    pub fn controller_address(&self) -> String {
        self.svc_domain(&self.controller())
    }

    /// `SlurmctldHost` values: primary first, then the backups, as `POD(FQDN)`.
    pub fn controller_hosts(&self, spec: &ClusterSpec) -> Vec<String> {
        (0..controller_replicas(spec))
            .map(|i| {
                let pod = format!("{}-{i}", self.controller());
                format!(
                    "{pod}({pod}.{})",
                    self.svc_domain(&self.controller_headless())
                )
            })
            .collect()
    }

    /// Where slurmd/sackd fetch their configuration (`--conf-server`), all controllers in order.
    pub fn conf_servers(&self, spec: &ClusterSpec) -> String {
        (0..controller_replicas(spec))
            .map(|i| {
                format!(
                    "{}-{i}.{}:{}",
                    self.controller(),
                    self.svc_domain(&self.controller_headless()),
                    SLURMCTLD_PORT
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn accounting_pod(&self) -> String {
        format!("{}-0", self.accounting())
    }
    pub fn accounting_host(&self) -> String {
        self.svc_domain(&self.accounting())
    }
    /// The in-cluster MariaDB (StatefulSet, Service, ConfigMap, PDB).
    pub fn database(&self) -> String {
        self.of("mariadb")
    }
    pub fn database_host(&self) -> String {
        self.svc_domain(&self.database())
    }

    /// Labels selecting one component's pods (and a NodeSet's, for workers).
    pub fn selector(
        &self,
        component: Component,
        node_set: Option<&str>,
    ) -> BTreeMap<String, String> {
        let mut l = BTreeMap::from([
            (LABEL_INSTANCE.to_string(), self.name.clone()),
            (LABEL_COMPONENT.to_string(), component.as_str().to_string()),
        ]);
        if let Some(ns) = node_set {
            l.insert(LABEL_NODESET.to_string(), ns.to_string());
        }
        l
    }

    /// All labels of a component's objects and pods.
    pub fn labels(
        &self,
        component: Option<Component>,
        node_set: Option<&str>,
    ) -> BTreeMap<String, String> {
        let mut l = BTreeMap::from([
            (LABEL_INSTANCE.to_string(), self.name.clone()),
            (LABEL_MANAGED_BY.to_string(), "slurmops".to_string()),
        ]);
        if let Some(c) = component {
            l.extend(self.selector(c, node_set));
            l.insert(LABEL_NAME.to_string(), c.program().to_string());
            // The database runs no Slurm: a Slurm upgrade leaves its pods alone.
            if c != Component::Database {
                l.insert(LABEL_SLURM_VERSION.to_string(), self.slurm_version.clone());
            }
        } else {
            l.insert(LABEL_NAME.to_string(), "slurm".to_string());
        }
        l
    }
}

pub fn controller_replicas(spec: &ClusterSpec) -> u32 {
    1 + spec.controller.ha.as_ref().map_or(0, |h| h.backups)
}
