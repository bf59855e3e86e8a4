//! Kubernetes objects compared and shown: masked Secrets, YAML, unified diffs, which pod
//! template fields changed, and the StatefulSet fields that cannot change in place.

use serde_json::Value as Json;
use similar::TextDiff;

use crate::render::Object;

/// StatefulSet fields the API server refuses to change in place.
pub const IMMUTABLE_STS_FIELDS: &[&str] = &[
    "volumeClaimTemplates",
    "selector",
    "serviceName",
    "podManagementPolicy",
];

const MASK: &str = "(sensitive value hidden)";

/// Secret values never reach a plan: each is replaced by a marker that still changes when the
/// value does (a short digest), so that a changed key shows as changed.
fn masked(o: &Object) -> Json {
    let mut body = o.body.clone();
    if o.kind == "Secret" {
        for field in ["data", "stringData"] {
            if let Some(Json::Object(map)) = body.get_mut(field) {
                for v in map.values_mut() {
                    let digest = crate::render::pod::checksum(&v.to_string());
                    *v = Json::String(format!("{MASK} #{}", &digest[..8]));
                }
            }
        }
    }
    body
}

pub(super) fn yaml(o: Option<&Object>) -> String {
    let to_yaml = |v: &Json| serde_saphyr::to_string(v).expect("JSON values serialize to YAML");
    // Only a Secret has values to mask: other objects are written as they are, not copied first.
    o.map(|o| match o.kind == "Secret" {
        true => to_yaml(&masked(o)),
        false => to_yaml(&o.body),
    })
    .unwrap_or_default()
}

pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

pub(super) fn spec_field<'a>(o: &'a Object, field: &str) -> Option<&'a Json> {
    o.body.get("spec").and_then(|s| s.get(field))
}

pub(super) fn immutable_warning(o: &Object, fields: &[&str], allow: bool) -> String {
    let what = format!(
        "StatefulSet {}/{}: {} cannot be changed in place",
        o.namespace,
        o.name,
        fields.join(", ")
    );
    if allow {
        format!(
            "{what}; apply will delete the StatefulSet with orphan propagation and create it again, so its pods keep running and are adopted (spec.policy.allowRecreate is true)"
        )
    } else {
        format!(
            "{what}; apply will refuse this change. Set spec.policy.allowRecreate: true to let apply recreate the StatefulSet (orphan propagation: pods keep running)"
        )
    }
}

pub(super) fn template_diff(old: &Object, new: &Object) -> Vec<String> {
    let (Some(a), Some(b)) = (template(old), template(new)) else {
        return if template(old) == template(new) {
            Vec::new()
        } else {
            vec!["pod template".into()]
        };
    };
    if same(a, b) {
        return Vec::new();
    }
    fn container<'a>(v: &'a Json, f: &str) -> Option<&'a Json> {
        v.pointer("/spec/containers/0").and_then(|c| c.get(f))
    }
    let mut because: Vec<String> = [
        "image",
        "args",
        "command",
        "env",
        "resources",
        "volumeMounts",
        "securityContext",
    ]
    .into_iter()
    .filter(|f| container(a, f) != container(b, f))
    .map(|f| format!("container {f}"))
    .collect();
    for f in [
        "metadata",
        "spec/volumes",
        "spec/affinity",
        "spec/tolerations",
        "spec/nodeSelector",
        "spec/resourceClaims",
    ] {
        let p = format!("/{f}");
        if a.pointer(&p) != b.pointer(&p) {
            because.push(
                f.trim_start_matches("spec/")
                    .replace("metadata", "pod labels/annotations"),
            );
        }
    }
    if because.is_empty() {
        because.push("pod template".into());
    }
    because
}

/// JSON equality with a fast path: both sides come from the same renderer, so equal objects
/// almost always have their keys in the same order, and comparing in order avoids hashing every
/// key (the order-insensitive `==` decides when the orders differ).
pub(super) fn same(a: &Json, b: &Json) -> bool {
    fn in_order(a: &Json, b: &Json) -> bool {
        match (a, b) {
            (Json::Object(x), Json::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y.iter())
                        .all(|((ka, va), (kb, vb))| ka == kb && in_order(va, vb))
            }
            (Json::Array(x), Json::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| in_order(p, q))
            }
            _ => a == b,
        }
    }
    in_order(a, b) || a == b
}

/// The pod template of a workload, or of a perNode NodeSet's PodTemplate.
pub(super) fn template(o: &Object) -> Option<&Json> {
    o.body
        .pointer("/spec/template")
        .or_else(|| o.body.pointer("/template"))
}
