//! The least privilege slurmops needs in its cluster's namespace, as a Role. `apply`, `plan
//! --cluster`, rollouts, autoscale, sync and the daemon work with exactly these rules; the tests
//! bind them to a restricted identity to prove it.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// (apiGroups, resources, verbs) slurmops uses.
pub const RULES: &[(&[&str], &[&str], &[&str])] = &[
    // podtemplates: perNode NodeSets.
    (
        &[""],
        &["configmaps", "services", "podtemplates"],
        &[
            "get", "list", "watch", "create", "patch", "update", "delete",
        ],
    ),
    (
        &["apps"],
        &["statefulsets", "deployments"],
        &[
            "get", "list", "watch", "create", "patch", "update", "delete",
        ],
    ),
    (
        &["policy"],
        &["poddisruptionbudgets"],
        &[
            "get", "list", "watch", "create", "patch", "update", "delete",
        ],
    ),
    // spec.backup.schedule: the scheduled copies' CronJob.
    (
        &["batch"],
        &["cronjobs"],
        &[
            "get", "list", "watch", "create", "patch", "update", "delete",
        ],
    ),
    // spec.networkPolicy.
    (
        &["networking.k8s.io"],
        &["networkpolicies"],
        &[
            "get", "list", "watch", "create", "patch", "update", "delete",
        ],
    ),
    // controller.metrics.serviceMonitor (a rule for an API the cluster lacks grants nothing).
    (
        &["monitoring.coreos.com"],
        &["servicemonitors"],
        &[
            "get", "list", "watch", "create", "patch", "update", "delete",
        ],
    ),
    // Rollouts delete drained workers; prune checks a NodeSet's pods first; perNode NodeSets'
    // pods are made by slurmops.
    (
        &[""],
        &["pods"],
        &["get", "list", "watch", "create", "delete", "patch"],
    ),
    // controller.ha: the state claim must be ReadWriteMany (read once per apply).
    (&[""], &["persistentvolumeclaims"], &["get"]),
    // Several slurmrestd: the pods behind its Service (a watch of its EndpointSlices, or of its
    // one Endpoints object where no EndpointSlice is served), each addressed and named.
    (
        &["discovery.k8s.io"],
        &["endpointslices"],
        &["list", "watch"],
    ),
    (&[""], &["endpoints"], &["get", "list", "watch"]),
    // sync: Slurm's view of each worker as a pod condition.
    (&[""], &["pods/status"], &["patch"]),
    (&[""], &["events"], &["create", "patch"]),
    // The daemon's leader election: create the Lease (a create cannot be limited by name); get and
    // update only `slurmops-leader` (see `role`).
    (&["coordination.k8s.io"], &["leases"], &["create"]),
];

/// The Lease of a daemon without `--cluster`, the only one it reads or renews.
pub use crate::vocab::LEASE;

/// The Lease of the daemon for CLUSTER (`--cluster`), or the one-per-namespace name.
pub fn lease_for(cluster: Option<&str>) -> String {
    match cluster {
        Some(c) => format!("{LEASE}-{c}"),
        None => LEASE.to_string(),
    }
}

/// Cluster-wide read of Nodes, so that `sync` follows cordons and perNode NodeSets follow their
/// nodes (optional: without it, sync skips cordons and perNode NodeSets stand still, and say so).
pub const NODE_RULES: &[(&[&str], &[&str], &[&str])] =
    &[(&[""], &["nodes"], &["get", "list", "watch"])];

fn rules(of: &[(&[&str], &[&str], &[&str])]) -> Vec<PolicyRule> {
    let strings = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
    of.iter()
        .map(|(groups, resources, verbs)| PolicyRule {
            api_groups: strings(groups),
            resources: strings(resources),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            ..PolicyRule::default()
        })
        .collect()
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(str::to_string),
        labels: Some(BTreeMap::from([(
            crate::vocab::LABEL_MANAGED_BY.to_string(),
            "slurmops".to_string(),
        )])),
        ..ObjectMeta::default()
    }
}

/// The ClusterRole NAME that lets slurmops read Nodes (for cordons).
pub fn node_reader(name: &str) -> ClusterRole {
    ClusterRole {
        metadata: meta(name, None),
        rules: Some(rules(NODE_RULES)),
        ..ClusterRole::default()
    }
}

/// The Role, as an object to apply in NAMESPACE. LEASES are the Leases the daemon may renew
/// (its own: `lease_for`). JWT_SECRETS are the Secrets (cluster.yaml's `spec.auth.jwtKey`) the
/// daemon may `get`, to mint Slurm tokens: no other Secret is readable, and none is listed,
/// written or deleted (nothing slurmops renders is a Secret).
pub fn role(name: &str, namespace: &str, leases: &[String], jwt_secrets: &[String]) -> Role {
    let mut rules = rules(RULES);
    let named = |resource: &str, group: &str, verbs: &[&str], names: Vec<String>| PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(vec![resource.to_string()]),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        resource_names: Some(names),
        ..PolicyRule::default()
    };
    rules.push(named(
        "leases",
        "coordination.k8s.io",
        &["get", "update"],
        leases.to_vec(),
    ));
    if !jwt_secrets.is_empty() {
        rules.push(named("secrets", "", &["get"], jwt_secrets.to_vec()));
    }
    Role {
        metadata: meta(name, Some(namespace)),
        rules: Some(rules),
    }
}

/// The Role of the daemon in its own namespace when no cluster lives there: its Lease and
/// status ConfigMap (by name, and create: a create cannot be limited by name) and Events.
/// Nothing that makes a pod, so nothing there can mount its git token or ServiceAccount token.
pub fn home_role(name: &str, namespace: &str, lease: &str, status: &str) -> Role {
    let named =
        |group: &str, resource: &str, verbs: &[&str], names: Option<Vec<String>>| PolicyRule {
            api_groups: Some(vec![group.to_string()]),
            resources: Some(vec![resource.to_string()]),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            resource_names: names,
            ..PolicyRule::default()
        };
    Role {
        metadata: meta(name, Some(namespace)),
        rules: Some(vec![
            named("coordination.k8s.io", "leases", &["create"], None),
            named(
                "coordination.k8s.io",
                "leases",
                &["get", "update"],
                Some(vec![lease.to_string()]),
            ),
            named("", "configmaps", &["create"], None),
            named(
                "",
                "configmaps",
                &["get", "patch", "update"],
                Some(vec![status.to_string()]),
            ),
            named("", "events", &["create", "patch"], None),
            // The leader labels its own pod (`slurmops.dev/leader`), which its Service selects.
            named("", "pods", &["patch"], None),
        ]),
    }
}
