//! Guardrails owned by the install, never by git: what a commit may ask for however it is
//! written, checked after validation and reported the same way (each finding at its
//! `FILE:LINE:COL`, with the install setting that would allow it), so that a refused commit
//! changes nothing. Given by the daemon's flags; `validate` and `plan` check none unless given.
//!
//! First rule: the namespaces a cluster may live in. The daemon's own namespace holds its git
//! token, webhook secret and ServiceAccount token; a commit that names it would mount them into
//! pods that Slurm users can reach.

use super::diag::{Finding, Path};
use super::types::ClusterFile;

/// What the install allows a commit.
#[derive(Debug, Clone, Default)]
pub struct Guardrails {
    /// The namespaces cluster.yaml's `metadata.namespace` may name (None: any).
    pub namespaces: Option<Vec<String>>,
}

impl Guardrails {
    /// Every way C asks for more than the install allows.
    pub fn check(&self, c: &ClusterFile) -> Vec<Finding> {
        let mut out = Vec::new();
        if let Some(allowed) = &self.namespaces
            && !allowed.contains(&c.metadata.namespace)
        {
            out.push(
                Finding::new(
                    Path::root().key("metadata").key("namespace"),
                    format!(
                        "namespace {} is not one this install applies into ({})",
                        c.metadata.namespace,
                        allowed.join(", ")
                    ),
                )
                .hint(
                    "name one of those, or install the daemon for this namespace too (slurmops install --cluster-namespace, the daemon's --cluster-namespace)",
                ),
            );
        }
        out
    }
}
