//! The least privilege slurmops needs in its cluster's namespace, as a Role. `apply`, `plan
//! --cluster` and rollouts work with exactly these rules; the tests bind them to a restricted
//! identity to prove it.

use serde_json::{Value as Json, json};

/// (apiGroups, resources, verbs) slurmops uses.
pub const RULES: &[(&[&str], &[&str], &[&str])] = &[
    (
        &[""],
        &["configmaps", "services"],
        &[
            "get", "list", "watch", "create", "patch", "update", "delete",
        ],
    ),
    // Secrets only as the rendered objects need (slurmops never reads their values into plans).
    (
        &[""],
        &["secrets"],
        &["get", "list", "create", "patch", "delete"],
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
    // Rollouts delete drained workers; prune checks a NodeSet's pods first.
    (
        &[""],
        &["pods"],
        &["get", "list", "watch", "delete", "patch"],
    ),
    // sync: Slurm's view of each worker as a pod condition.
    (&[""], &["pods/status"], &["patch"]),
    (&[""], &["events"], &["create", "patch"]),
];

/// Cluster-wide read of Nodes, so that `sync` follows cordons (optional: without it, sync skips
/// cordons and says so).
pub const NODE_RULES: &[(&[&str], &[&str], &[&str])] =
    &[(&[""], &["nodes"], &["get", "list", "watch"])];

fn rules(of: &[(&[&str], &[&str], &[&str])]) -> Vec<Json> {
    of.iter()
        .map(|(groups, resources, verbs)| {
            json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
        })
        .collect()
}

/// The ClusterRole NAME that lets slurmops read Nodes (for cordons).
pub fn node_reader(name: &str) -> Json {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "slurmops"}},
        "rules": rules(NODE_RULES),
    })
}

/// The Role, as an object to apply in NAMESPACE.
pub fn role(name: &str, namespace: &str) -> Json {
    let rules = rules(RULES);
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "slurmops"}},
        "rules": rules,
    })
}
