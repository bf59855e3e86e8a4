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
    (&[""], &["events"], &["create", "patch"]),
];

/// The Role, as an object to apply in NAMESPACE.
pub fn role(name: &str, namespace: &str) -> Json {
    let rules: Vec<Json> = RULES
        .iter()
        .map(|(groups, resources, verbs)| {
            json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
        })
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "slurmops"}},
        "rules": rules,
    })
}
