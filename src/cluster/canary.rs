//! The canary of a NodeSet's rollout (`update.canary`): replace a few workers first, prove with a
//! real Slurm job that they run jobs, and only then roll the rest. Its own file because it is the
//! one part of the update policy with a script in it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::values::Duration;

/// The line that ends the script inside the job's wrapper: a script may not contain it.
pub const SCRIPT_END: &str = "SLURMOPS_SCRIPT_END";

/// Replace REPLICAS workers first and validate them with a Slurm job before the others roll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Canary {
    /// Workers replaced and validated before any other worker is drained (1 or more).
    pub replicas: u32,
    pub validate: Validate,
    /// How long a replaced canary may take, from its pod's creation, to be Ready and registered
    /// in Slurm (image pull, slurmd start); a canary not up by then fails the canary, as a
    /// failed validation does (a bad image never starts).
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout: Duration,
}

fn default_ready_timeout() -> Duration {
    Duration::from_secs(1800)
}

/// The validation job: one script, run by slurmrestd on exactly the canaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validate {
    /// A check slurmops ships: `hostname` (the worker runs jobs), `gpu` (nvidia-smi sees the
    /// GPUs), `nccl` (all_reduce_perf across the canaries' GPUs, when the image has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<Builtin>,
    /// The script itself (a `#!` line picks its interpreter; bash without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// A script in a ConfigMap of the cluster's namespace, read when the job is submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ScriptRef>,
    /// An active check of `policy.activeChecks`, by name: the canaries must pass it (its
    /// script or built-in, judged against its `minValue`), as every worker does later. A check
    /// across nodes runs as one job on all the canaries (`nodes: allCanaries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// The job's time limit; a job not done by then (pending included) fails the canary.
    #[serde(default = "default_timeout")]
    pub timeout: Duration,
    /// `perNode`: one job on each canary; `allCanaries`: one job on all of them (for checks
    /// across nodes, such as nccl).
    #[serde(default)]
    pub nodes: ValidateNodes,
}

fn default_timeout() -> Duration {
    Duration::from_secs(600)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Builtin {
    Hostname,
    Gpu,
    Nccl,
}

impl Builtin {
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Hostname => "hostname",
            Builtin::Gpu => "gpu",
            Builtin::Nccl => "nccl",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptRef {
    pub name: String,
    pub key: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ValidateNodes {
    #[default]
    PerNode,
    AllCanaries,
}

/// Where the validation script comes from, once cluster.yaml is valid (exactly one source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptSource {
    Builtin(Builtin),
    Inline(String),
    ConfigMap(ScriptRef),
    /// An active check, by name.
    Check(String),
}

impl Validate {
    /// The one source set (validation refuses none or several).
    pub fn source(&self) -> Option<ScriptSource> {
        match (
            &self.builtin,
            &self.script,
            &self.config_map_ref,
            &self.check,
        ) {
            (Some(b), None, None, None) => Some(ScriptSource::Builtin(*b)),
            (None, Some(s), None, None) => Some(ScriptSource::Inline(s.clone())),
            (None, None, Some(r), None) => Some(ScriptSource::ConfigMap(r.clone())),
            (None, None, None, Some(c)) => Some(ScriptSource::Check(c.clone())),
            _ => None,
        }
    }

    /// How plans and status name the script.
    pub fn describe(&self) -> String {
        match self.source() {
            Some(ScriptSource::Builtin(b)) => format!("the built-in {} check", b.name()),
            Some(ScriptSource::Inline(_)) => "its inline script".into(),
            Some(ScriptSource::ConfigMap(r)) => {
                format!("the script in ConfigMap {} key {}", r.name, r.key)
            }
            Some(ScriptSource::Check(c)) => format!("active check {c}"),
            None => "no script".into(),
        }
    }
}
