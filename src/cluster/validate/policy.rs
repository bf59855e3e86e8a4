//! Checks of `spec.policy`'s own fields: ignore rules (kinds slurmops renders, JSON pointers
//! that do not identify the object), node health conditions and taints, and maxPrune.

use super::super::diag::{Path, did_you_mean};
use super::super::types::*;
use super::super::values::IntOrPercent;
use super::Validator;

/// Kinds slurmops renders, hence the kinds an ignore rule can name.
pub const RENDERED_KINDS: &[&str] = &[
    "ConfigMap",
    "Secret",
    "Service",
    "StatefulSet",
    "Deployment",
    "PodDisruptionBudget",
];

impl Validator {
    pub(super) fn policy(&mut self, policy: &Policy, p: &Path) {
        self.windows(policy, p);
        for (i, rule) in policy.ignore_differences.iter().enumerate() {
            let rp = p.key("ignoreDifferences").index(i);
            if !RENDERED_KINDS.contains(&rule.kind.as_str()) {
                self.err(
                    rp.key("kind"),
                    format!("slurmops renders no {:?} objects", rule.kind),
                    format!(
                        "use one of {}{}",
                        RENDERED_KINDS.join(", "),
                        did_you_mean(&rule.kind, RENDERED_KINDS.iter().copied())
                            .map(|d| format!(" (did you mean {d:?}?)"))
                            .unwrap_or_default()
                    ),
                );
            }
            for (j, ptr) in rule.json_pointers.iter().enumerate() {
                let jp = rp.key("jsonPointers").index(j);
                if !ptr.starts_with('/') || ptr.len() < 2 {
                    self.err(
                        jp,
                        format!("{ptr:?} is not a JSON pointer"),
                        "write it like /spec/replicas",
                    );
                } else if ptr.starts_with("/metadata") || ptr == "/apiVersion" || ptr == "/kind" {
                    self.err(
                        jp,
                        format!("{ptr:?} identifies the object; it cannot be ignored"),
                        "ignore fields under /spec or /data",
                    );
                }
            }
        }
        if let Some(h) = &policy.node_health {
            self.node_health(h, &p.key("nodeHealth"));
        }
        if let Some(IntOrPercent::Percent(pct)) = &policy.max_prune
            && *pct > 100
        {
            self.err(
                p.key("maxPrune"),
                format!("{pct}% is more than everything"),
                "use at most 100%",
            );
        }
    }

    fn node_health(&mut self, h: &NodeHealth, p: &Path) {
        for (i, c) in h.conditions.iter().enumerate() {
            let cp = p.key("conditions").index(i);
            if c.type_.is_empty() || c.type_.len() > 316 || c.type_.contains(char::is_whitespace) {
                self.err(
                    cp.key("type"),
                    format!("{:?} is not a node condition type", c.type_),
                    "e.g. GpuUnhealthy, as `kubectl describe node` lists it",
                );
            }
            if !matches!(c.status.as_str(), "True" | "False" | "Unknown") {
                self.err(
                    cp.key("status"),
                    format!("{:?} is not a condition status", c.status),
                    "use \"True\", \"False\" or \"Unknown\" (quoted)",
                );
            }
        }
        for (i, t) in h.taints.iter().enumerate() {
            let tp = p.key("taints").index(i);
            if t.key.is_empty() || t.key.len() > 316 || t.key.contains(char::is_whitespace) {
                self.err(
                    tp.key("key"),
                    format!("{:?} is not a taint key", t.key),
                    "e.g. nvidia.com/gpu-unhealthy",
                );
            }
            if let Some(e) = &t.effect
                && !matches!(e.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute")
            {
                self.err(
                    tp.key("effect"),
                    format!("{e:?} is not a taint effect"),
                    "use NoSchedule, PreferNoSchedule or NoExecute, or leave it out for any",
                );
            }
        }
    }
}
