//! What the policy's rules are checked with: the object at hand and the install's settings
//! (`Cx`), where a container sits in its pod (`Place`), and the refusals they share.

use std::collections::BTreeSet;

use super::Breach;
use crate::cluster::Guardrails;
use crate::cluster::diag::Path;

/// What one object's pods are checked with.
pub struct Cx<'a> {
    pub g: &'a Guardrails,
    /// `Kind/name`.
    pub object: String,
    /// The component's section of cluster.yaml.
    pub scope: Path,
    /// ConfigMaps this rendering makes (the cluster's own).
    pub own_config_maps: &'a BTreeSet<String>,
    pub out: &'a mut Vec<Breach>,
}

impl Cx<'_> {
    /// A breach at FIELD, found in cluster.yaml as NEEDLE.
    pub fn refuse(
        &mut self,
        field: impl Into<String>,
        needle: Option<&str>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.out.push(Breach {
            object: self.object.clone(),
            field: field.into(),
            needle: needle.map(str::to_string),
            scope: self.scope.clone(),
            message: message.into(),
            hint: hint.into(),
        });
    }
}

impl Cx<'_> {
    /// ConfigMap NAME, used at AT as WHAT ("a value", "a volume"): one the install names or the
    /// cluster's own (Slurm's files, no key).
    pub fn config_map(&mut self, at: &str, name: &str, what: &str) {
        if !self.g.config_maps.iter().any(|c| c == name) && !self.own_config_maps.contains(name) {
            self.refuse(
                at,
                Some(name),
                format!("ConfigMap {name} as {what}: only the ConfigMaps this install names (one could hold root's authorized_keys or another cluster's files)"),
                "the install allows it with the daemon's --allow-config-map NAME (policy allowConfigMaps)",
            );
        }
    }

    /// Secret NAME, used at AT as WHAT: one the install lists.
    pub fn secret(&mut self, at: &str, name: &str, what: &str) {
        if !self.g.secrets.iter().any(|s| s == name) {
            self.refuse(
                at,
                Some(name),
                format!("Secret {name} as {what}: no Secret but those this install lists"),
                "the install allows it with the daemon's --allow-secret NAME (policy allowSecrets)",
            );
        }
    }
}

pub const PRIVILEGED: &str =
    "the install allows it with the daemon's --allow-privileged (policy allowPrivileged)";

/// Where a container sits.
pub struct Place<'a> {
    /// Its path in the object, e.g. `spec.template.spec.containers[slurmd]`.
    pub at: String,
    /// The volumes slurmops renders in its pod.
    pub own_volumes: &'a BTreeSet<&'a str>,
    /// Paths no mount the push adds may cover, be covered by or shadow.
    pub protected: &'a [String],
    /// slurmd's own container in a worker pod: privileged, or with the capabilities the NodeSet
    /// gives it, as Slurm needs for cgroup containment; the rest of its context is checked.
    pub slurmd: bool,
}
