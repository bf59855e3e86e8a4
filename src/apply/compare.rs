//! Deciding, without writing, whether an object already holds what slurmops wants.
//!
//! A no-op apply must cost nothing: slurmops lists each kind once, and skips an object when the
//! hash of what it last applied (an annotation it owns) matches the desired object and every field
//! it sets has the same value live. Only when that is not certain does it ask the server (a
//! server-side dry run) and write if the answer differs from what is stored.

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

/// Annotation holding the hash of the object slurmops applied (before this annotation).
pub use crate::vocab::ANNOTATION_APPLIED_HASH as HASH_ANNOTATION;

/// sha256 of the object's canonical JSON, hex, first 32 characters.
pub fn hash(body: &Json) -> String {
    let digest = Sha256::digest(body.to_string().as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Every field of DESIRED is present in LIVE with the same value (arrays element by element).
/// Empty maps/lists/nulls and zero values (`false`, `0`, `""`) in DESIRED match absent fields:
/// the server omits them when it stores the object (Go's omitempty).
pub fn contains(desired: &Json, live: &Json) -> bool {
    match (desired, live) {
        (Json::Object(d), Json::Object(l)) => d.iter().all(|(k, v)| match l.get(k) {
            Some(lv) => contains(v, lv),
            None => is_empty(v),
        }),
        (Json::Object(d), Json::Null) => d.values().all(is_empty),
        (Json::Array(d), Json::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(a, b)| contains(a, b))
        }
        (Json::Array(d), Json::Null) => d.is_empty(),
        (d, l) => d == l,
    }
}

fn is_empty(v: &Json) -> bool {
    match v {
        Json::Null | Json::Bool(false) => true,
        Json::Number(n) => n.as_f64() == Some(0.0),
        Json::String(s) => s.is_empty(),
        Json::Object(m) => m.values().all(is_empty),
        Json::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The object as a person compares it: without server bookkeeping and status.
pub fn comparable(obj: &Json) -> Json {
    let mut o = obj.clone();
    if let Some(Json::Object(meta)) = o.get_mut("metadata") {
        for k in [
            "managedFields",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "uid",
            "selfLink",
        ] {
            meta.remove(k);
        }
        if let Some(Json::Object(a)) = meta.get_mut("annotations") {
            a.remove("deprecated.daemonset.template.generation");
        }
    }
    if let Json::Object(m) = &mut o {
        // List items carry no type fields; single objects do.
        for k in ["status", "apiVersion", "kind"] {
            m.remove(k);
        }
    }
    o
}

/// Removes the field at JSON pointer PTR, if present.
pub fn remove_pointer(obj: &mut Json, ptr: &str) {
    let Some((parent, last)) = ptr.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    let target = if parent.is_empty() {
        Some(obj)
    } else {
        obj.pointer_mut(parent)
    };
    match target {
        Some(Json::Object(m)) => {
            m.remove(&last);
        }
        Some(Json::Array(a)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        _ => {}
    }
}

/// Maps whose every key slurmops owns: each key of a ConfigMap slurmops renders becomes a file
/// in a Slurm daemon's config directory, so a key added by hand is drift, not someone else's
/// field.
const OWNED_MAPS: &[(&str, &str)] = &[("ConfigMap", "data"), ("ConfigMap", "binaryData")];

/// Keys of LIVE (an object of KIND) that slurmops owns the map of but DESIRED lacks: `data/KEY`
/// paths. Server-side apply leaves them (another manager owns them); slurmops takes them back.
pub fn foreign_keys(kind: &str, desired: &Json, live: &Json) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (_, map) in OWNED_MAPS.iter().filter(|(k, _)| *k == kind) {
        let Some(Json::Object(l)) = live.get(map) else {
            continue;
        };
        let d = desired.get(map).and_then(Json::as_object);
        for key in l.keys() {
            if !d.is_some_and(|d| d.contains_key(key)) {
                out.push((map.to_string(), key.clone()));
            }
        }
    }
    out
}

/// V without the (map, key) entries KEYS: what the object is once they are taken back.
pub fn without(v: &Json, keys: &[(String, String)]) -> Json {
    let mut v = v.clone();
    for (map, key) in keys {
        if let Some(Json::Object(m)) = v.get_mut(map) {
            m.remove(key);
        }
    }
    v
}

/// V with the keys of every mapping in the order TEMPLATE has them (the rest after, as they
/// were), so that a diff against TEMPLATE shows changed values, not moved blocks.
pub fn order_like(v: &Json, template: &Json) -> Json {
    match (v, template) {
        (Json::Object(m), Json::Object(t)) => {
            let mut out = serde_json::Map::new();
            for (k, tv) in t {
                if let Some(x) = m.get(k) {
                    out.insert(k.clone(), order_like(x, tv));
                }
            }
            for (k, x) in m {
                if !out.contains_key(k) {
                    out.insert(k.clone(), x.clone());
                }
            }
            Json::Object(out)
        }
        (Json::Array(a), Json::Array(t)) => Json::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| t.get(i).map_or_else(|| x.clone(), |tv| order_like(x, tv)))
                .collect(),
        ),
        _ => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn contains_ignores_server_defaults_but_not_changed_values() {
        let desired = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "a", "args": []}]}}}});
        let live = json!({"spec": {"replicas": 2, "revisionHistoryLimit": 10,
            "template": {"spec": {"containers": [{"name": "a", "imagePullPolicy": "Always"}], "dnsPolicy": "ClusterFirst"}}}});
        assert!(contains(&desired, &live));
        let omitted = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "readOnly": false}]}}}});
        assert!(contains(&omitted, &live));
        let changed = json!({"spec": {"replicas": 3}});
        assert!(!contains(&changed, &live));
        let more =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}});
        assert!(!contains(&more, &live));
    }

    #[test]
    fn hash_changes_with_content_and_pointer_removal_works() {
        let mut a = json!({"spec": {"replicas": 2, "x": {"a/b": 1}}});
        let h = hash(&a);
        remove_pointer(&mut a, "/spec/replicas");
        remove_pointer(&mut a, "/spec/x/a~1b");
        assert_eq!(a, json!({"spec": {"x": {}}}));
        assert_ne!(hash(&a), h);
    }

    #[test]
    fn keys_added_by_hand_to_an_owned_config_map_are_found_and_order_follows_the_template() {
        let desired = json!({"metadata": {"name": "c"}, "data": {"slurm.conf": "a"}});
        let live = json!({"data": {"plugstack.conf": "x", "slurm.conf": "a"}, "metadata": {"name": "c", "uid": "1"}});
        let keys = foreign_keys("ConfigMap", &desired, &live);
        assert_eq!(keys, [("data".to_string(), "plugstack.conf".to_string())]);
        assert!(foreign_keys("Secret", &desired, &live).is_empty());
        let back = without(&live, &keys);
        assert_eq!(back["data"], json!({"slurm.conf": "a"}));
        let ordered = order_like(&back, &desired);
        let order: Vec<&String> = ordered.as_object().unwrap().keys().collect();
        assert_eq!(order, ["metadata", "data"]);
        let meta: Vec<&String> = ordered["metadata"].as_object().unwrap().keys().collect();
        assert_eq!(meta, ["name", "uid"]);
    }
}
