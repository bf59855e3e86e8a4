//! `spec.accounting`: slurmdbd, its database (external or in-cluster MariaDB) and the Slurm
//! accounting objects slurmops manages.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::accounts::*;
use super::pod_settings::PodSettings;
use super::secret_ref::SecretRef;
use super::values::SlurmValue;

/// slurmdbd with an external MySQL/MariaDB.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accounting {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, flatten)]
    pub pod: PodSettings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<Database>,
    /// Extra slurmdbd.conf settings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slurmdbd_conf: BTreeMap<String, SlurmValue>,
    /// QOS slurmops creates and keeps as written here (through slurmrestd's slurmdb endpoints).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qos: Vec<Qos>,
    /// Accounts of this cluster, a tree under Slurm's `root` account.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<Account>,
    /// Users and the accounts each may charge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<User>,
}

impl Accounting {
    /// Declares accounting objects for slurmops to manage.
    pub fn manages_objects(&self) -> bool {
        self.enabled && !(self.qos.is_empty() && self.accounts.is_empty() && self.users.is_empty())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Database {
    /// The MySQL/MariaDB host (an external or operator-managed database, the production path);
    /// leave it out with `inCluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default = "default_db_port")]
    pub port: u16,
    /// Database name (StorageLoc).
    #[serde(default = "default_db_name")]
    pub name: String,
    pub user: String,
    /// The database password, by reference; it never appears in rendered objects.
    pub password: SecretRef,
    /// A MariaDB slurmops renders in the cluster (StatefulSet on a PVC, Service, PDB), with
    /// this database and user made at its first start: the quickstart path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_cluster: Option<InClusterDatabase>,
}

/// The in-cluster MariaDB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InClusterDatabase {
    /// Size of its volume, e.g. `20Gi`.
    pub storage: String,
    /// StorageClass of the volume (default: the cluster's default class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// Container image (default `docker.io/library/mariadb:11.8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// CPU and memory; half the memory limit (or request) becomes InnoDB's buffer pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

fn default_db_port() -> u16 {
    3306
}
fn default_db_name() -> String {
    "slurm_acct_db".into()
}
