//! `spec.backup`: the copies slurmops takes before what cannot be undone. A Slurm upgrade to
//! another major release converts slurmdbd's database and slurmctld's state in place (SchedMD's
//! upgrade guide: back up both first); with a claim named here, each component's pod copies its
//! data there before the new release starts on it, and the upgrade goes no further until the
//! copy is made.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Copies of the accounting database and slurmctld's state, taken before a Slurm upgrade
/// converts them. Either `claim` or `ownCopies`: an upgrade to another major release is refused
/// with neither.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Backup {
    /// An existing PersistentVolumeClaim in the cluster's namespace the copies are written to:
    /// `CLUSTER/accounting/FROM-to-TO-TIME.sql` (mariadb-dump of the accounting database, taken
    /// by the new slurmdbd pod before slurmdbd starts) and `CLUSTER/slurmctld/FROM-to-TO-TIME-POD/`
    /// (StateSaveLocation, taken by the new controller pod before slurmctld starts). slurmdbd's
    /// and slurmctld's pods both mount it: ReadWriteMany, or ReadWriteOnce where they share a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// Upgrades go on without slurmops's copies: you keep your own (a managed database's
    /// snapshots, volume snapshots) and take them before you push a `slurmVersion` change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_copies: bool,
    /// The image whose `mariadb-dump` copies the database; default: the in-cluster MariaDB's
    /// image (`accounting.database.inCluster.image`), else `docker.io/library/mariadb:11.8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

impl Backup {
    /// The claim copies go to, when slurmops takes them.
    pub fn claim(&self) -> Option<&str> {
        self.claim.as_deref()
    }
}

/// What an upgrade to another major release converts in place, in the spec S: the accounting
/// database (accounting on) and slurmctld's state (on a volume: without one it does not outlive
/// a restart anyway).
pub fn converted(s: &super::types::ClusterSpec) -> Vec<&'static str> {
    let mut out = Vec::new();
    if s.accounting.enabled && s.accounting.database.is_some() {
        out.push("slurmdbd's database");
    }
    if s.controller.persistence.enabled {
        out.push("slurmctld's state");
    }
    out
}

/// Why S may not move from release FROM to TO (another major release) as it stands: it converts
/// data in place and names no volume for the copies.
pub fn refusal(s: &super::types::ClusterSpec, from: &str, to: &str) -> Option<String> {
    if !super::release::converts(from, to) {
        return None;
    }
    let data = converted(s);
    let covered = s
        .backup
        .as_ref()
        .is_some_and(|b| b.claim.is_some() || b.own_copies);
    (!covered && !data.is_empty()).then(|| {
        format!(
            "Slurm {from} → {to} converts {} in place, which cannot be undone, and spec.backup names no volume for copies: set spec.backup.claim to a PersistentVolumeClaim (slurmops copies them there before each converts), or spec.backup.ownCopies: true if you take your own",
            data.join(" and ")
        )
    })
}
