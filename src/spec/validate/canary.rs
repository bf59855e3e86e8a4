//! Checks of a NodeSet's canary (`update.canary`): one script source, a script that can be
//! wrapped into a job, and a partition for the job to run in.

use super::super::canary::{SCRIPT_END, Validate};
use super::super::diag::Path;
use super::super::types::*;
use super::{Validator, is_dns_subdomain};

/// Most bytes of an inline validation script (it travels in the job submission).
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

impl Validator {
    pub(super) fn canary(&mut self, n: &NodeSet, s: &ClusterSpec, p: &Path) {
        let Some(c) = &n.update.canary else {
            return;
        };
        let cp = p.key("update").key("canary");
        if c.replicas == 0 {
            self.err(
                cp.key("replicas"),
                "a canary of 0 workers validates nothing",
                "use 1 or more, or remove update.canary",
            );
        }
        let in_partition = s
            .partitions
            .iter()
            .any(|part| part.node_sets.iter().any(|x| x == &n.name || x == "ALL"));
        if !in_partition {
            self.err(
                cp.clone(),
                format!(
                    "NodeSet {:?} is in no partition, so no validation job can run on its canaries",
                    n.name
                ),
                "add the NodeSet to a partition in spec.partitions",
            );
        }
        if c.ready_timeout.as_secs() < 10 {
            self.err(
                cp.key("readyTimeout"),
                format!(
                    "{} fails every canary before its pod can start",
                    c.ready_timeout
                ),
                "give the time a worker takes to pull its image and register, e.g. 30m",
            );
        }
        self.validate_job(&c.validate, &cp.key("validate"));
    }

    fn validate_job(&mut self, v: &Validate, p: &Path) {
        let set = [
            v.builtin.is_some(),
            v.script.is_some(),
            v.config_map_ref.is_some(),
        ];
        if set.iter().filter(|x| **x).count() != 1 {
            self.err(
                p.clone(),
                "the validation needs exactly one of builtin, script and configMapRef",
                "e.g. builtin: hostname, or script: with the check to run",
            );
        }
        if let Some(text) = &v.script {
            if text.trim().is_empty() {
                self.err(
                    p.key("script"),
                    "the script is empty",
                    "write the check to run",
                );
            } else if text.len() > MAX_SCRIPT_BYTES {
                self.err(
                    p.key("script"),
                    format!(
                        "the script has {} bytes, more than {MAX_SCRIPT_BYTES}",
                        text.len()
                    ),
                    "keep it short, or put it in the worker image and call it",
                );
            }
            if text.lines().any(|l| l.trim() == SCRIPT_END) {
                self.err(
                    p.key("script"),
                    format!("the script contains the line {SCRIPT_END}, which ends it in the job"),
                    "rename that line",
                );
            }
        }
        if let Some(r) = &v.config_map_ref {
            if !is_dns_subdomain(&r.name) {
                self.err(
                    p.key("configMapRef").key("name"),
                    format!("{:?} is not a valid ConfigMap name", r.name),
                    "use a DNS-1123 subdomain",
                );
            }
            if r.key.is_empty() {
                self.err(
                    p.key("configMapRef").key("key"),
                    "the key is empty",
                    "name the ConfigMap key that holds the script",
                );
            }
        }
        if v.timeout.as_secs() < 60 {
            self.err(
                p.key("timeout"),
                format!("{} is shorter than Slurm's smallest time limit", v.timeout),
                "use 1m or more",
            );
        }
    }
}
