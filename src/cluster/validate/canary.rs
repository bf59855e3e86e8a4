//! Checks of a NodeSet's canary (`update.canary`): one script source, a script that can be
//! wrapped into a job, and a partition for the job to run in.

use super::super::canary::{Validate, ValidateNodes};
use super::super::diag::{Path, clip, listed};
use super::super::types::*;
use super::Validator;
use super::kubernetes_names::is_dns_subdomain;

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
        if s.partition_of(&n.name).is_none() {
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
        self.validate_job(&c.validate, s, &cp.key("validate"));
    }

    fn validate_job(&mut self, v: &Validate, s: &ClusterSpec, p: &Path) {
        let set = [
            v.builtin.is_some(),
            v.script.is_some(),
            v.config_map_ref.is_some(),
            v.check.is_some(),
        ];
        if set.iter().filter(|x| **x).count() != 1 {
            self.err(
                p.clone(),
                "the validation needs exactly one of builtin, script, configMapRef and check",
                "e.g. builtin: hostname, script: with the check to run, or check: NAME of policy.activeChecks",
            );
        }
        if let Some(text) = &v.script {
            self.check_script(text, &p.key("script"));
        }
        if let Some(name) = &v.check {
            self.canary_check(name, v, s, p);
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

    /// `validate.check`: an active check that exists, run as the canaries take it (one job per
    /// canary for a check of one node, one across them all for a check across nodes).
    fn canary_check(&mut self, name: &str, v: &Validate, s: &ClusterSpec, p: &Path) {
        let Some(c) = s.policy.active_checks.iter().find(|c| c.name == name) else {
            let known = &s.policy.active_checks;
            self.err(
                p.key("check"),
                format!("no active check is named {:?}", clip(name)),
                match known.is_empty() {
                    true => "declare it in spec.policy.activeChecks".to_string(),
                    false => format!(
                        "name one of spec.policy.activeChecks: {}",
                        listed(known.iter().map(|c| c.name.as_str()))
                    ),
                },
            );
            return;
        };
        let all = v.nodes == ValidateNodes::AllCanaries;
        if c.across_nodes() != all {
            let (want, why) = match c.across_nodes() {
                true => ("allCanaries", "it runs across nodes"),
                false => ("perNode", "it checks one node"),
            };
            self.err(
                p.key("nodes"),
                format!(
                    "check {name:?} runs as the canaries' validation with nodes: {want}: {why}"
                ),
                format!("set nodes: {want}"),
            );
        }
    }
}
