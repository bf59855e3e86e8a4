//! What each container asks of its node by default, so that no pod of the cluster is
//! BestEffort (the first the kubelet evicts under memory pressure): the control plane's
//! programs, what slurmd needs besides its jobs, and the small containers of slurmops' own.
//!
//! Requests come from what the bed measures (docs/cluster-yaml.md says where): slurmctld's and
//! slurmrestd's resident memory at 1,000 nodes and 50,000 jobs (tests/e2e/scale.rs holds the
//! requests above it). Memory limits only where an OOM kill loses nothing: slurmops' own
//! sidecar and init container, whose work is bounded. No CPU limit anywhere: a throttled
//! slurmctld schedules late and a throttled slurmd misses its pings.
//!
//! cluster.yaml overrides any of it per component (`*.pod.resources`), amount by amount: a
//! request or limit it names replaces the default, the others stay; a limit it sets on an amount
//! whose request it leaves out drops the default request too, so Kubernetes takes the limit as
//! the request and the two never contradict.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::names::Component;

/// A program's default: (CPU request, memory request, memory limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    pub cpu: &'static str,
    pub memory: &'static str,
    pub memory_limit: Option<&'static str>,
}

/// slurmctld: at 1,000 nodes and 50,000 jobs it holds about half of this (tests/e2e/scale.rs).
pub const SLURMCTLD: Ask = Ask {
    cpu: "200m",
    memory: "1Gi",
    memory_limit: None,
};
/// slurmdbd: its memory follows the queries it answers (sacct), not the cluster's size.
pub const SLURMDBD: Ask = Ask {
    cpu: "50m",
    memory: "256Mi",
    memory_limit: None,
};
/// slurmrestd: answers job by job to slurmops; a client reading the whole queue costs more
/// (tests/e2e/scale.rs holds the request above what slurmops' reads take at 50,000 jobs).
pub const SLURMRESTD: Ask = Ask {
    cpu: "50m",
    memory: "512Mi",
    memory_limit: None,
};
/// A login pod: sshd and sackd; users' sessions take what they take.
pub const LOGIN: Ask = Ask {
    cpu: "50m",
    memory: "256Mi",
    memory_limit: None,
};
/// slurmd of a NodeSet that sizes nothing (`cpu`, `memory`): slurmd itself; its jobs are
/// Slurm's to bound.
pub const SLURMD: Ask = Ask {
    cpu: "50m",
    memory: "256Mi",
    memory_limit: None,
};
/// MariaDB in the cluster, without `database.inCluster.resources`: its buffer pool is then
/// 2 GiB (render/database.rs `MIN_POOL_MB`), and connections and the log buffer on top.
pub const MARIADB: Ask = Ask {
    cpu: "250m",
    memory: "3Gi",
    memory_limit: None,
};
/// slurmops' own small containers (the reconfigure sidecar, slurmdbd's config init, a user's
/// extra container that says nothing): a shell and a few short commands.
pub const HELPER: Ask = Ask {
    cpu: "5m",
    memory: "32Mi",
    memory_limit: Some("128Mi"),
};

/// A copy taken before an upgrade or on a schedule (mysqldump, tar of slurmctld's state): its
/// memory follows the database, so no limit.
pub const COPY: Ask = Ask {
    cpu: "100m",
    memory: "256Mi",
    memory_limit: None,
};

/// The main container's default for COMPONENT.
pub fn of(component: Component) -> Ask {
    match component {
        Component::Controller => SLURMCTLD,
        Component::Accounting => SLURMDBD,
        Component::RestApi => SLURMRESTD,
        Component::Login => LOGIN,
        Component::Worker => SLURMD,
        Component::Database => MARIADB,
    }
}

/// USER's resources over DEFAULT, amount by amount (the module's doc).
pub fn over(default: Ask, user: Option<ResourceRequirements>) -> ResourceRequirements {
    let mut r = user.unwrap_or_default();
    let limits = r.limits.clone().unwrap_or_default();
    let requests = r.requests.get_or_insert_with(BTreeMap::new);
    for (k, v) in [("cpu", default.cpu), ("memory", default.memory)] {
        if !limits.contains_key(k) {
            requests
                .entry(k.to_string())
                .or_insert_with(|| Quantity(v.to_string()));
        }
    }
    if let Some(l) = default.memory_limit {
        let asked = r.requests.as_ref().and_then(|q| q.get("memory"));
        // A request above the default limit (the user's) lifts the limit with it.
        let limit = match asked {
            Some(q) if bytes(&q.0) > bytes(l) => q.clone(),
            _ => Quantity(l.to_string()),
        };
        r.limits
            .get_or_insert_with(BTreeMap::new)
            .entry("memory".to_string())
            .or_insert(limit);
    }
    r
}

/// The bytes of a memory quantity (0 when unreadable, which cluster.yaml's validation has
/// refused already).
fn bytes(q: &str) -> u128 {
    crate::cluster::values::parse_quantity(q).unwrap_or(0.0) as u128
}

/// The memory request's bytes of a default (for the bed's measurements to be held against).
pub fn memory_bytes(d: Ask) -> u128 {
    bytes(d.memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect(),
        )
    }

    #[test]
    fn a_default_fills_what_cluster_yaml_leaves_out_and_never_contradicts_it() {
        // Nothing said: the default requests, no limit.
        let r = over(SLURMCTLD, None);
        assert_eq!(r.requests, q(&[("cpu", "200m"), ("memory", "1Gi")]));
        assert_eq!(r.limits, None);
        // A request said: it stands, the other amount is the default's.
        let user = ResourceRequirements {
            requests: q(&[("cpu", "4")]),
            ..Default::default()
        };
        let r = over(SLURMCTLD, Some(user));
        assert_eq!(r.requests, q(&[("cpu", "4"), ("memory", "1Gi")]));
        // A limit said alone: no default request under it (Kubernetes takes the limit).
        let user = ResourceRequirements {
            limits: q(&[("memory", "512Mi")]),
            ..Default::default()
        };
        let r = over(SLURMCTLD, Some(user));
        assert_eq!(r.requests, q(&[("cpu", "200m")]));
        assert_eq!(r.limits, q(&[("memory", "512Mi")]));
        // A helper's limit, and a request above it lifts it.
        let r = over(HELPER, None);
        assert_eq!(r.limits, q(&[("memory", "128Mi")]));
        let user = ResourceRequirements {
            requests: q(&[("memory", "1G")]),
            ..Default::default()
        };
        assert_eq!(over(HELPER, Some(user)).limits, q(&[("memory", "1G")]));
    }

    #[test]
    fn memory_quantities_read_as_bytes() {
        assert_eq!(bytes("1Gi"), 1 << 30);
        assert_eq!(bytes("512Mi"), 512 << 20);
        assert_eq!(bytes("1.5G"), 1_500_000_000);
        assert_eq!(bytes("100"), 100);
        assert_eq!(bytes("x"), 0);
    }
}
