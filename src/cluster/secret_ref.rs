//! A reference to one key of a Kubernetes Secret: how the spec names every key and password.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A reference to one key of a Kubernetes Secret in the cluster's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-slurmops-secret-ref" = true))]
pub struct SecretRef {
    /// Name of the Secret.
    pub name: String,
    /// Key inside the Secret.
    pub key: String,
}
