//! Reading rendered objects: their pod specs, containers, label maps and the parts of a
//! container the oracle compares (code, env values), wherever they sit in an object's body.

use serde_json::{Map, Value as Json, json};
use slurmops::render;

pub(super) fn object_id(o: &render::Object) -> String {
    format!("{}/{}", o.kind, o.name)
}

pub(super) fn str_of<'a>(v: &'a Json, k: &str) -> &'a str {
    v.get(k).and_then(Json::as_str).unwrap_or("")
}

/// Every pod spec in BODY (an object with `containers`), with where it is.
pub(super) fn pod_specs(body: &Json) -> Vec<(String, &Json)> {
    fn walk<'a>(v: &'a Json, at: String, out: &mut Vec<(String, &'a Json)>) {
        match v {
            Json::Object(m) => {
                if m.get("containers").is_some_and(Json::is_array) {
                    out.push((at.clone(), v));
                }
                for (k, x) in m {
                    walk(x, format!("{at}.{k}"), out);
                }
            }
            Json::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, format!("{at}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, String::new(), &mut out);
    out
}

/// Every `metadata.labels` in BODY (the object's, its pod template's, its claim templates'),
/// with where it is.
pub(super) fn label_maps(body: &Json) -> Vec<(String, &Map<String, Json>)> {
    fn walk<'a>(v: &'a Json, at: String, out: &mut Vec<(String, &'a Map<String, Json>)>) {
        match v {
            Json::Object(m) => {
                if let Some(l) = m
                    .get("metadata")
                    .and_then(|md| md.get("labels"))
                    .and_then(Json::as_object)
                {
                    out.push((format!("{at}.metadata.labels"), l));
                }
                for (k, x) in m {
                    walk(x, format!("{at}.{k}"), out);
                }
            }
            Json::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, format!("{at}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, String::new(), &mut out);
    out
}

/// Every container of POD: (its field path, it).
pub(super) fn containers(pod: &Json) -> Vec<(String, &Json)> {
    let mut out = Vec::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (i, c) in pod
            .get(list)
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            out.push((format!("{list}[{i}]"), c));
        }
    }
    out
}

/// A container's code: command, args and exec handlers.
pub(super) fn code_of(c: &Json) -> Json {
    json!({
        "command": c.get("command"),
        "args": c.get("args"),
        "liveness": c.pointer("/livenessProbe/exec"),
        "readiness": c.pointer("/readinessProbe/exec"),
        "startup": c.pointer("/startupProbe/exec"),
        "postStart": c.pointer("/lifecycle/postStart/exec"),
        "preStop": c.pointer("/lifecycle/preStop/exec"),
    })
}

/// An env entry's value as the oracle compares it: `value`, or `valueFrom` as JSON.
pub(super) fn env_value(e: &Json) -> String {
    match (e.get("value"), e.get("valueFrom")) {
        (Some(v), None) => format!("{v}"),
        (None, Some(f)) => format!("valueFrom {f}"),
        (None, None) => "(no value)".into(),
        (v, f) => json!({"value": v, "valueFrom": f}).to_string(),
    }
}

/// Calls F on every object in V, with where it is.
pub(super) fn walk_objects(v: &Json, at: String, f: &mut dyn FnMut(&str, &Map<String, Json>)) {
    match v {
        Json::Object(m) => {
            f(&at, m);
            for (k, x) in m {
                walk_objects(x, format!("{at}.{k}"), f);
            }
        }
        Json::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk_objects(x, format!("{at}[{i}]"), f);
            }
        }
        _ => {}
    }
}
