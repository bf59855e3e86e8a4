//! Checks of `spec.nodeSets`: unique names that leave room for the objects slurmops renders,
//! update and autoscale bounds, resources, GPUs and IMEX, features, volumes and security
//! contexts; each NodeSet's canary, window and requeue settings are checked in files of their own.

use std::collections::BTreeSet;

use super::super::diag::{Path, clip};
use super::super::types::*;
use super::super::values::parse_quantity;
use super::Validator;
use super::kubernetes_names::is_dns_label;
use super::pods::WORKER_VOLUMES;

/// Names of objects slurmops renders besides the NodeSets' StatefulSets.
pub fn reserved_suffixes() -> &'static [&'static str] {
    &[
        "config",
        "scripts",
        "controller",
        "controller-headless",
        "accounting",
        "restapi",
        "workers",
        "slurmdbd",
        "applyset",
        "metrics",
        "mariadb",
    ]
}

impl Validator {
    pub(super) fn node_sets(&mut self, s: &ClusterSpec, meta: &Metadata, p: &Path) {
        if s.node_sets.is_empty() {
            self.err(
                p.clone(),
                "a cluster needs at least one NodeSet",
                "add an entry to spec.nodeSets",
            );
        }
        let names: BTreeSet<&str> = s.node_sets.iter().map(|n| n.name.as_str()).collect();
        let mut seen = BTreeSet::new();
        for (i, n) in s.node_sets.iter().enumerate() {
            let np = p.index(i);
            // Pod names add `-ORDINAL`, and the StatefulSet's revision label must stay within 63.
            self.dns_label(np.key("name"), "NodeSet name", &n.name, 52);
            if !seen.insert(n.name.as_str()) {
                self.err(
                    np.key("name"),
                    format!("NodeSet {:?} is defined twice", n.name),
                    "names must be unique",
                );
            }
            if let Some(suffix) = n.name.strip_prefix(&format!("{}-", meta.name))
                && reserved_suffixes().contains(&suffix)
            {
                self.err(
                    np.key("name"),
                    format!("{:?} is the name of an object slurmops renders", n.name),
                    "choose another NodeSet name",
                );
            }
            self.node_set(n, &names, &np);
            self.canary(n, s, &np);
            self.window_mode(n, s, &np);
            self.requeue(n, &np);
        }
    }

    fn node_set(&mut self, n: &NodeSet, all: &BTreeSet<&str>, p: &Path) {
        self.pod(&n.pod, p);
        if n.update.max_unavailable.is_zero() {
            self.err(
                p.key("update").key("maxUnavailable"),
                "maxUnavailable must be more than 0, or a rollout could never start",
                "use 1 or a percentage such as 25%",
            );
        }
        if n.managed() && !n.volume_claim_templates.is_empty() {
            self.err(
                p.key("volumeClaimTemplates"),
                "a NodeSet whose pods slurmops makes (perNode or podManagement: slurmops) has no StatefulSet to make per-worker volumes",
                "use the node's own storage (a hostPath or local volume in volumes), or give replicas a number",
            );
        }
        if let Some(a) = &n.autoscale {
            let ap = p.key("autoscale");
            if a.min > a.max {
                self.err(
                    ap.key("min"),
                    format!("min {} is more than max {}", a.min, a.max),
                    "lower min or raise max",
                );
            } else if n.replicas.per_node() {
                self.err(
                    p.key("autoscale"),
                    "a perNode NodeSet follows its Kubernetes nodes and cannot autoscale",
                    "remove autoscale, or give replicas a number",
                );
            } else if n.replicas.count() < a.min || n.replicas.count() > a.max {
                self.err(
                    p.key("replicas"),
                    format!(
                        "replicas {} is outside autoscale bounds {}..{}",
                        n.replicas, a.min, a.max
                    ),
                    "set replicas between autoscale.min and autoscale.max",
                );
            }
            if a.pending_jobs_per_replica == 0 {
                self.err(
                    ap.key("pendingJobsPerReplica"),
                    "must be 1 or more",
                    "one worker per N pending jobs needs N > 0",
                );
            }
        }
        for (field, q) in [("cpu", &n.cpu), ("memory", &n.memory)] {
            if let Some(q) = q
                && parse_quantity(q).is_none_or(|v| v <= 0.0)
            {
                self.err(
                    p.key(field),
                    format!("{q:?} is not a Kubernetes quantity"),
                    if field == "cpu" {
                        "e.g. \"96\" or 500m"
                    } else {
                        "e.g. 64Gi"
                    },
                );
            }
        }
        if let Some(g) = &n.gpus {
            let gp = p.key("gpus");
            if g.count == 0 {
                self.err(
                    gp.key("count"),
                    "a GPU NodeSet needs at least one GPU per worker",
                    "remove `gpus` for a CPU NodeSet",
                );
            }
            if g.type_.is_empty()
                || !g
                    .type_
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                self.err(
                    gp.key("type"),
                    format!("{:?} is not a usable GRES type", g.type_),
                    "use a short word such as h100",
                );
            }
            if !g.resource_name.contains('/') {
                self.err(
                    gp.key("resourceName"),
                    format!("{:?} is not an extended resource name", g.resource_name),
                    "extended resources are DOMAIN/NAME, e.g. nvidia.com/gpu",
                );
            }
        }
        if let Some(x) = &n.imex
            && x.enabled
        {
            if n.gpus.is_none() {
                self.err(
                    p.key("imex"),
                    "IMEX needs GPUs on the NodeSet",
                    "add `gpus` or turn imex off",
                );
            }
            self.dns_label(
                p.key("imex").key("computeDomain"),
                "ComputeDomain",
                &x.compute_domain,
                63,
            );
        }
        for (i, f) in n.features.iter().enumerate() {
            let fp = p.key("features").index(i);
            if f.is_empty()
                || !f.bytes().all(|b| b.is_ascii_graphic())
                || f.contains([',', '&', '|', '=', '#', '"', '\'', '\\'])
            {
                self.err(
                    fp,
                    format!("feature {:?} cannot be used in Slurm", clip(f)),
                    "a feature is one word of printable characters without , & | = # \\ quotes or spaces",
                );
            } else if all.contains(f.as_str()) && f != &n.name {
                self.err(fp, format!("feature {f:?} is the name of another NodeSet, whose membership it would change"), "rename the feature");
            }
        }
        let claims: Vec<&str> = n
            .volume_claim_templates
            .iter()
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        self.volumes(&n.volumes, &claims, &n.volume_mounts, WORKER_VOLUMES, p);
        if !n.privileged
            && n.container_security_context
                .as_ref()
                .and_then(|sc| sc.privileged)
                == Some(true)
        {
            self.err(
                p.key("containerSecurityContext").key("privileged"),
                "privileged: false and containerSecurityContext.privileged: true contradict each other",
                "keep one of them",
            );
        }
        for (i, c) in n.volume_claim_templates.iter().enumerate() {
            if c.metadata.name.as_deref().is_none_or(|s| !is_dns_label(s)) {
                self.err(
                    p.key("volumeClaimTemplates")
                        .index(i)
                        .key("metadata")
                        .key("name"),
                    "a volume claim template needs a name",
                    "set metadata.name",
                );
            }
        }
    }
}
