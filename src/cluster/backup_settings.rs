//! `spec.backup`'s settings: the claim copies go to (or ownCopies), the image that copies the
//! database, and the schedule of scheduled copies.

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
    /// Copies of the accounting database on a schedule besides (a CronJob, `NAME-backup`):
    /// `CLUSTER/scheduled/accounting-TIME.sql` on `claim`, the newest `keep` kept. Needs `claim`
    /// and accounting with a database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
}

/// When scheduled copies of the accounting database are taken, and how many are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Schedule {
    /// A cron schedule of five fields (minute, hour, day of month, month, day of week) in the
    /// time zone of kube-controller-manager (UTC on most clusters), e.g. `"0 3 * * *"`: every
    /// day at 03:00.
    pub cron: String,
    /// How many scheduled copies are kept (1 to 1000): after each copy the oldest beyond this
    /// many are deleted. Only files named `accounting-TIME.sql` in `CLUSTER/scheduled/` are.
    pub keep: u32,
}

/// The most scheduled copies kept.
pub const MAX_KEEP: u32 = 1000;

impl Backup {
    /// The claim copies go to, when slurmops takes them.
    pub fn claim(&self) -> Option<&str> {
        self.claim.as_deref()
    }
}
