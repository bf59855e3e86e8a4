//! `spec.images`: the registry, flavor, pull policy and per-component overrides of the
//! container images.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Container images. A component's image defaults to
/// `REGISTRY/COMPONENT:SLURMVERSION-FLAVOR` (the layout of the Slinky images).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Images {
    #[serde(default = "default_registry")]
    pub registry: String,
    #[serde(default = "default_flavor")]
    pub flavor: String,
    #[serde(default = "default_pull_policy")]
    pub pull_policy: PullPolicy,
    /// Where the images keep Slurm's daemons (slurmctld, slurmd, slurmdbd, slurmrestd): each runs
    /// by this absolute path, never found through a search path. `/usr/sbin` in Slinky's images
    /// and Debian's packages; e.g. `/usr/local/sbin` for a plain `./configure` build.
    #[serde(default = "default_sbin")]
    pub sbin: String,
    /// Full image reference overriding the default for one component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmctld: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmrestd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmdbd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<String>,
}

impl Default for Images {
    fn default() -> Self {
        Images {
            registry: default_registry(),
            flavor: default_flavor(),
            pull_policy: default_pull_policy(),
            sbin: default_sbin(),
            slurmctld: None,
            slurmd: None,
            slurmrestd: None,
            slurmdbd: None,
            login: None,
        }
    }
}

fn default_registry() -> String {
    "ghcr.io/slinkyproject".into()
}
fn default_flavor() -> String {
    "ubuntu24.04".into()
}
fn default_sbin() -> String {
    "/usr/sbin".into()
}
fn default_pull_policy() -> PullPolicy {
    PullPolicy::IfNotPresent
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}
