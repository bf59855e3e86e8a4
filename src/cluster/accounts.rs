//! The accounting objects people manage in git instead of with `sacctmgr` by hand: QOS,
//! accounts (a tree under Slurm's `root`) and users with their account memberships. Names and
//! settings follow Slurm's own words so that a reviewer who knows `sacctmgr` reads them as is.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The built-in objects every slurmdbd has; slurmops never removes or redefines them (a QOS
/// named `normal` may be declared: its settings are then managed).
pub const BUILT_IN_QOS: &str = "normal";
pub const ROOT: &str = "root";

/// A Slurm QOS (`sacctmgr add qos`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Qos {
    /// QOS name, e.g. `gpu-high`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Priority (added to the job's priority with PriorityWeightQOS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// QOS this one may preempt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preempt: Vec<String>,
    /// Slurm QOS flags, e.g. `DenyOnLimit`, `NoReserve`, `OverPartQOS`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    #[serde(default, skip_serializing_if = "QosLimits::is_empty")]
    pub limits: QosLimits,
}

/// A QOS's limits. TRES are written as Slurm writes them: `cpu=16,mem=64G,gres/gpu=8`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QosLimits {
    /// MaxTRESPerUser.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "maxTRESPerUser"
    )]
    pub max_tres_per_user: Option<String>,
    /// MaxTRESPerAccount.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "maxTRESPerAccount"
    )]
    pub max_tres_per_account: Option<String>,
    /// MaxTRESPerJob.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "maxTRESPerJob"
    )]
    pub max_tres_per_job: Option<String>,
    /// MaxTRESPerNode.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "maxTRESPerNode"
    )]
    pub max_tres_per_node: Option<String>,
    /// GrpTRES: all running jobs of the QOS together.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "grpTRES")]
    pub grp_tres: Option<String>,
    /// GrpJobs: running jobs of the QOS together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grp_jobs: Option<u32>,
    /// MaxJobsPerUser: running jobs per user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_jobs_per_user: Option<u32>,
    /// MaxSubmitJobsPerUser: pending and running jobs per user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_submit_jobs_per_user: Option<u32>,
    /// MaxWall: a job's time limit, as Slurm writes times (`90`, `4:00:00`, `2-00:00:00`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall: Option<String>,
}

impl QosLimits {
    pub fn is_empty(&self) -> bool {
        *self == QosLimits::default()
    }
}

/// A Slurm account on this cluster (`sacctmgr add account`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    /// Account name, e.g. `team-a`.
    pub name: String,
    /// Parent account (default: `root`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    #[serde(flatten)]
    pub association: Association,
}

/// Settings of an association (an account, or a user in an account).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Association {
    /// Fairshare (raw shares).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairshare: Option<u32>,
    /// DefaultQOS; must be one of `qos` when that is set.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "defaultQOS"
    )]
    pub default_qos: Option<String>,
    /// QOS this association may use (Slurm's `QOS=`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qos: Vec<String>,
    #[serde(default, skip_serializing_if = "AssociationLimits::is_empty")]
    pub limits: AssociationLimits,
}

/// An association's limits (TRES as `cpu=16,gres/gpu=8`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssociationLimits {
    /// GrpTRES: all running jobs of the association and its children.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "grpTRES")]
    pub grp_tres: Option<String>,
    /// MaxTRESPerJob.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "maxTRESPerJob"
    )]
    pub max_tres_per_job: Option<String>,
    /// MaxTRESPerNode.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "maxTRESPerNode"
    )]
    pub max_tres_per_node: Option<String>,
    /// GrpJobs: running jobs of the association and its children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grp_jobs: Option<u32>,
    /// GrpSubmitJobs: pending and running jobs of the association and its children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grp_submit_jobs: Option<u32>,
    /// MaxJobs: running jobs of the association.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_jobs: Option<u32>,
    /// MaxSubmitJobs: pending and running jobs of the association.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_submit_jobs: Option<u32>,
    /// MaxWall: a job's time limit (`90`, `4:00:00`, `2-00:00:00`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall: Option<String>,
}

impl AssociationLimits {
    pub fn is_empty(&self) -> bool {
        *self == AssociationLimits::default()
    }
}

/// A Slurm user (`sacctmgr add user`) and the accounts it may charge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct User {
    /// The user's login name.
    pub name: String,
    /// DefaultAccount; must be one of `accounts` (default: the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_account: Option<String>,
    /// AdminLevel.
    #[serde(default, skip_serializing_if = "AdminLevel::is_none")]
    pub admin_level: AdminLevel,
    /// The accounts the user may charge, each an association with its own settings.
    pub accounts: Vec<Membership>,
}

/// A user's association with one account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Membership {
    /// The account.
    pub name: String,
    #[serde(flatten)]
    pub association: Association,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AdminLevel {
    #[default]
    None,
    Operator,
    Administrator,
}

impl AdminLevel {
    pub fn is_none(&self) -> bool {
        *self == AdminLevel::None
    }
    pub fn as_str(self) -> &'static str {
        match self {
            AdminLevel::None => "None",
            AdminLevel::Operator => "Operator",
            AdminLevel::Administrator => "Administrator",
        }
    }
}

/// How slurmops treats accounting objects it did not create.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccountingPolicy {
    /// Delete QOS, accounts and user associations that exist in Slurm but not in cluster.yaml,
    /// even those created by hand (default false: they are reported and left alone).
    #[serde(default)]
    pub prune: bool,
}
