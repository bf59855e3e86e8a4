//! The cluster's own Secrets stay where slurmops puts them. `spec.auth`'s keys (with the JWT key
//! anyone mints a token for any Slurm user, root included; with `slurm.key` anyone speaks for
//! slurmctld) and the database password are mounted by slurmops into the daemons that need them.
//! Named anywhere else in cluster.yaml they reach pods Slurm users run in (worker and login pods,
//! their sidecars) or every node (configless serves `controller.configFiles`), where any user
//! can read them. The walk covers every reference form a pod or a config file can take, so a
//! new field that takes a Secret is covered without a rule of its own.

use serde_json::Value;

use super::super::diag::{Path, Trail};
use super::super::types::{Accounting, ClusterFile, ClusterSpec};
use super::Validator;

impl Validator {
    pub(super) fn own_secrets(&mut self, c: &ClusterFile) {
        let auth = Path::root().key("spec").key("auth");
        let mut own: Vec<(String, &str, Path)> = vec![
            (
                c.spec.auth.jwt_key.name.clone(),
                "JWT signing key",
                auth.key("jwtKey").key("name"),
            ),
            (
                c.spec.auth.slurm_key.name.clone(),
                "slurm.key",
                auth.key("slurmKey").key("name"),
            ),
        ];
        if let Some(db) = &c.spec.accounting.database {
            own.push((
                db.password.name.clone(),
                "database password",
                Path::root()
                    .key("spec")
                    .key("accounting")
                    .key("database")
                    .key("password")
                    .key("name"),
            ));
        }
        let mut found = Vec::new();
        scan(c, &mut found);
        for (name, at) in found {
            let Some((_, what, _)) = own.iter().find(|(n, _, home)| *n == name && *home != at)
            else {
                continue;
            };
            self.err(
                at,
                format!(
                    "Secret {name} holds the cluster's {what}: named here it reaches pods Slurm users run in, or every node, where any user can read it"
                ),
                "slurmops mounts it where it is needed; refer to another Secret here",
            );
        }
    }
}

/// Every Secret reference of C (see `references`), read piece by piece: each field of the spec
/// and each item of its lists as JSON of its own, dropped once read, so that a cluster.yaml of
/// 20,000 NodeSets or 40,000 users is never held as JSON whole a second time. The fields are
/// named exhaustively: a field added to the spec does not compile until it is read here too.
fn scan(c: &ClusterFile, found: &mut Vec<(String, Path)>) {
    fn one<T: serde::Serialize>(v: &T, at: Path, key: &str, found: &mut Vec<(String, Path)>) {
        if let Ok(v) = serde_json::to_value(v) {
            references(&v, &at, Some(key), found);
        }
    }
    fn each<T: serde::Serialize>(v: &[T], at: Path, key: &str, found: &mut Vec<(String, Path)>) {
        for (i, item) in v.iter().enumerate() {
            one(item, at.index(i), key, found);
        }
    }
    one(&c.metadata, Path::root().key("metadata"), "metadata", found);
    let spec = Path::root().key("spec");
    let ClusterSpec {
        cluster_name: _,
        slurm_version: _,
        images,
        image_pull_secrets,
        priority_class_name: _,
        auth,
        controller,
        accounting,
        restapi,
        login_sets,
        node_sets,
        partitions,
        topology,
        network_policy,
        policy,
        backup: _,
    } = &c.spec;
    let field = |k: &str| spec.key(k);
    one(images, field("images"), "images", found);
    let pulls = field("imagePullSecrets");
    for (i, n) in image_pull_secrets.iter().enumerate() {
        found.push((n.clone(), pulls.index(i)));
    }
    one(auth, field("auth"), "auth", found);
    one(controller, field("controller"), "controller", found);
    one(restapi, field("restapi"), "restapi", found);
    each(login_sets, field("loginSets"), "loginSets", found);
    each(node_sets, field("nodeSets"), "nodeSets", found);
    each(partitions, field("partitions"), "partitions", found);
    one(topology, field("topology"), "topology", found);
    one(
        network_policy,
        field("networkPolicy"),
        "networkPolicy",
        found,
    );
    one(policy, field("policy"), "policy", found);
    let Accounting {
        enabled: _,
        pod,
        database,
        slurmdbd_conf,
        qos,
        accounts,
        users,
    } = accounting;
    let at = field("accounting");
    // The pod settings are flattened into `accounting`: their fields are its own.
    one(pod, at.clone(), "accounting", found);
    one(database, at.key("database"), "database", found);
    one(slurmdbd_conf, at.key("slurmdbdConf"), "slurmdbdConf", found);
    each(qos, at.key("qos"), "qos", found);
    each(accounts, at.key("accounts"), "accounts", found);
    each(users, at.key("users"), "users", found);
}

/// Every Secret name V refers to, with its path (AT: V's; KEY: the key V is under): a
/// `secretName`, the `name` of a `secret` (projected volumes), of a `secretRef`, `secretKeyRef`
/// or any `...SecretRef`, of the SecretRef fields of cluster.yaml, and of `imagePullSecrets`.
pub(crate) fn references(v: &Value, at: &Path, key: Option<&str>, out: &mut Vec<(String, Path)>) {
    walk(v, &Trail::At(at), key, out);
}

/// Whether K names a ConfigMap, in any case (`configMapRef`, `ConfigMap`).
fn names_config_map(k: &str) -> bool {
    k.as_bytes()
        .windows(b"configmap".len())
        .any(|w| w.eq_ignore_ascii_case(b"configmap"))
}

fn walk(v: &Value, at: &Trail<'_>, key: Option<&str>, out: &mut Vec<(String, Path)>) {
    match v {
        Value::Object(m) => {
            let refers = key.is_some_and(|k| {
                k == "secret"
                    || k == "secretKeyRef"
                    || k.ends_with("SecretRef")
                    || k == "secretRef"
                    || k.ends_with("Secrets")
            });
            // cluster.yaml's own SecretRef: exactly a name and a key (a ConfigMapRef has the
            // same shape).
            let config_map = key.is_some_and(names_config_map);
            let own_ref = m.len() == 2 && m.get("key").is_some_and(Value::is_string) && !config_map;
            if (refers || own_ref)
                && let Some(Value::String(n)) = m.get("name")
            {
                out.push((n.clone(), at.path().key("name")));
            }
            for (k, child) in m {
                let here = Trail::Key(at, k);
                if k == "secretName"
                    && let Value::String(n) = child
                {
                    out.push((n.clone(), here.path()));
                }
                walk(child, &here, Some(k), out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let here = Trail::Index(at, i);
                if let (Some(k), Value::String(n)) = (key, item)
                    && k.ends_with("Secrets")
                {
                    out.push((n.clone(), here.path()));
                }
                walk(item, &here, key, out);
            }
        }
        _ => {}
    }
}
