//! The JSON Schema walker: `schema/cluster.schema.json` (draft-07: `definitions`, `$ref`,
//! `allOf`/`anyOf`/`oneOf`, `["T", "null"]` types, `additionalProperties` maps, `enum`, `const`,
//! `x-kubernetes-int-or-string`) and random instances of its sub-schemas: objects get their
//! required properties and a random few others, arrays and maps 0 to 3 entries, strings come from
//! the pools, recursion is cut at a depth.

use std::collections::BTreeSet;

use serde_json::{Map, Value as Json, json};

use super::paths::Seg;
use super::pools::{GENERAL, LABEL_VALUES, key_pool, string_pool};
use super::rng::Rng;

/// Deepest object nesting the generator builds below a mutation point.
const MAX_DEPTH: usize = 7;

pub(super) struct Schema {
    pub(super) root: Json,
}

impl Schema {
    pub(super) fn load() -> Schema {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/cluster.schema.json"),
        )
        .expect("schema/cluster.schema.json");
        let root: Json = serde_json::from_str(&text).expect("the schema is JSON");
        assert!(
            root.get("definitions").is_some() || root.get("$defs").is_some(),
            "the schema keeps its definitions under `definitions` or `$defs`"
        );
        Schema { root }
    }

    fn lookup(&self, r: &str) -> &Json {
        let name = r
            .strip_prefix("#/definitions/")
            .or_else(|| r.strip_prefix("#/$defs/"))
            .unwrap_or_else(|| panic!("unsupported $ref {r}"));
        self.root
            .get("definitions")
            .or_else(|| self.root.get("$defs"))
            .and_then(|d| d.get(name))
            .unwrap_or_else(|| panic!("$ref {r} names no definition"))
    }

    /// S with its `$ref`s followed and one-element `allOf`s opened.
    fn deref<'a>(&'a self, mut s: &'a Json) -> &'a Json {
        loop {
            if let Some(r) = s.get("$ref").and_then(Json::as_str) {
                s = self.lookup(r);
            } else if let Some([one]) = s.get("allOf").and_then(Json::as_array).map(Vec::as_slice) {
                s = one;
            } else {
                return s;
            }
        }
    }

    /// S as an object or array schema where it is one of several (`anyOf` with null): the
    /// schema to descend through.
    pub(super) fn structural<'a>(&'a self, s: &'a Json) -> &'a Json {
        let mut s = self.deref(s);
        for _ in 0..8 {
            let Some(branches) = s
                .get("anyOf")
                .or_else(|| s.get("oneOf"))
                .and_then(Json::as_array)
            else {
                break;
            };
            let next = branches
                .iter()
                .map(|b| self.deref(b))
                .find(|b| b.get("properties").is_some() || b.get("items").is_some())
                .or_else(|| branches.iter().map(|b| self.deref(b)).find(|b| !is_null(b)));
            match next {
                Some(n) => s = n,
                None => break,
            }
        }
        s
    }

    /// The sub-schema at PATH from the root.
    pub(super) fn at(&self, path: &[Seg]) -> Option<&Json> {
        let mut s = &self.root;
        for seg in path {
            let st = self.structural(s);
            s = match seg {
                Seg::Key(k) => st
                    .get("properties")
                    .and_then(|p| p.get(k.as_str()))
                    .or_else(|| st.get("additionalProperties").filter(|a| a.is_object()))?,
                Seg::Index(_) => st.get("items")?,
            };
        }
        Some(s)
    }

    /// A random instance of S; HINT is the property (or map) it sits under.
    pub(super) fn generate(&self, rng: &mut Rng, s: &Json, hint: &str, depth: usize) -> Json {
        let s = self.deref(s);
        if let Some(c) = s.get("const") {
            return c.clone();
        }
        if let Some(e) = s
            .get("enum")
            .and_then(Json::as_array)
            .filter(|e| !e.is_empty())
        {
            return rng.pick(e).clone();
        }
        if let Some(branches) = s
            .get("anyOf")
            .or_else(|| s.get("oneOf"))
            .and_then(Json::as_array)
        {
            let some: Vec<&Json> = branches.iter().filter(|b| !is_null(b)).collect();
            if some.is_empty() || (some.len() < branches.len() && rng.chance(0.1)) {
                return Json::Null;
            }
            let branch = some[rng.below(some.len())];
            return self.generate(rng, branch, hint, depth);
        }
        if let Some(all) = s.get("allOf").and_then(Json::as_array) {
            // Not produced by the schema generator today; the first part is the shape.
            if let Some(first) = all.first() {
                return self.generate(rng, first, hint, depth);
            }
        }
        if s.get("x-kubernetes-int-or-string").is_some() {
            return if rng.chance(0.4) {
                json!(rng.below(4))
            } else {
                json!(gen_string(rng, s, hint))
            };
        }
        match pick_type(rng, s) {
            "null" => Json::Null,
            "boolean" => json!(rng.chance(0.5)),
            "integer" | "number" => gen_number(rng, s),
            "string" => json!(gen_string(rng, s, hint)),
            "array" => self.generate_array(rng, s, hint, depth),
            _ => self.generate_object(rng, s, hint, depth),
        }
    }

    fn generate_array(&self, rng: &mut Rng, s: &Json, hint: &str, depth: usize) -> Json {
        let n = if depth >= MAX_DEPTH {
            0
        } else {
            *rng.pick(&[0usize, 1, 1, 1, 2, 2, 3])
        };
        let items = s.get("items").cloned().unwrap_or(json!({"type": "string"}));
        Json::Array(
            (0..n)
                .map(|_| self.generate(rng, &items, hint, depth + 1))
                .collect(),
        )
    }

    fn generate_object(&self, rng: &mut Rng, s: &Json, hint: &str, depth: usize) -> Json {
        let mut out = Map::new();
        if let Some(props) = s.get("properties").and_then(Json::as_object) {
            self.generate_properties(rng, s, props, depth, &mut out);
        } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
            self.generate_map(rng, ap, hint, depth, &mut out);
        }
        Json::Object(out)
    }

    /// The required properties of object schema S (PROPS) and a random few others, into OUT.
    fn generate_properties(
        &self,
        rng: &mut Rng,
        s: &Json,
        props: &Map<String, Json>,
        depth: usize,
        out: &mut Map<String, Json>,
    ) {
        let required: BTreeSet<&str> = s
            .get("required")
            .and_then(Json::as_array)
            .map(|r| r.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        // Fewer optional properties the deeper it goes: k8s types nest deep.
        let p = if depth >= MAX_DEPTH {
            0.0
        } else {
            0.45 / (1.0 + depth as f64 * 0.6)
        };
        let few = props.len() > 12;
        for (k, sub) in props {
            // A container without an image is invalid: it has one nearly always.
            let image = k == "image" && required.contains("name") && rng.chance(0.9);
            let take =
                required.contains(k.as_str()) || image || rng.chance(if few { p * 0.5 } else { p });
            if take && !is_read_only(sub) {
                // An EnvVar's name (the object that has `valueFrom`) is a variable's.
                let hint = if k == "name" && props.contains_key("valueFrom") {
                    "envName"
                } else {
                    k.as_str()
                };
                out.insert(k.clone(), self.generate(rng, sub, hint, depth + 1));
            }
        }
    }

    /// 0 to 3 entries of a map whose values are AP, keyed from the pool for HINT, into OUT.
    fn generate_map(
        &self,
        rng: &mut Rng,
        ap: &Json,
        hint: &str,
        depth: usize,
        out: &mut Map<String, Json>,
    ) {
        let n = if depth >= MAX_DEPTH {
            0
        } else {
            *rng.pick(&[0usize, 1, 1, 2, 3])
        };
        let keys = key_pool(hint);
        for _ in 0..n {
            let k = if rng.chance(0.85) {
                rng.pick(keys).to_string()
            } else {
                rng.pick(GENERAL).to_string()
            };
            let v = if ap.get("type").and_then(Json::as_str) == Some("string")
                && matches!(hint, "labels" | "annotations" | "nodeSelector")
                && rng.chance(0.7)
            {
                json!(rng.pick(LABEL_VALUES))
            } else {
                self.generate(rng, ap, &k, depth + 1)
            };
            out.insert(k, v);
        }
    }
}

fn is_null(s: &Json) -> bool {
    s.get("type").and_then(Json::as_str) == Some("null")
}

fn is_read_only(s: &Json) -> bool {
    s.get("readOnly").and_then(Json::as_bool) == Some(true)
}

/// The type to generate for S: one of its types (seldom null where another is allowed), or
/// object or string for a schema without one.
fn pick_type<'a>(rng: &mut Rng, s: &'a Json) -> &'a str {
    let types: Vec<&str> = match s.get("type") {
        Some(Json::String(t)) => vec![t.as_str()],
        Some(Json::Array(ts)) => ts.iter().filter_map(Json::as_str).collect(),
        _ => vec![],
    };
    let non_null: Vec<&str> = types.iter().copied().filter(|t| *t != "null").collect();
    if types.contains(&"null") && (non_null.is_empty() || rng.chance(0.08)) {
        "null"
    } else if non_null.is_empty() {
        if s.get("properties").is_some() {
            "object"
        } else {
            "string"
        }
    } else {
        rng.pick::<&str>(&non_null)
    }
}

/// A number for S: a small, a port-like or a negative one, mostly within S's bounds.
fn gen_number(rng: &mut Rng, s: &Json) -> Json {
    let min = s.get("minimum").and_then(Json::as_f64);
    let max = s.get("maximum").and_then(Json::as_f64);
    let mut n = *rng.pick(&[0i64, 1, 1, 2, 3, 5, 10, 22, 6817, 65535, 65536, -1]);
    if rng.chance(0.9) {
        if let Some(min) = min {
            n = n.max(min as i64);
        }
        if let Some(max) = max {
            n = n.min(max as i64);
        }
    }
    json!(n)
}

fn gen_string(rng: &mut Rng, s: &Json, hint: &str) -> String {
    if let Some(p) = s.get("pattern").and_then(Json::as_str)
        && rng.chance(0.85)
    {
        if p.contains("dhms") {
            return rng.pick(&["5m", "1d", "30s", "1h30m", "0s"]).to_string();
        }
        if p.contains('%') {
            return rng.pick(&["10%", "100%", "0%"]).to_string();
        }
    }
    if s.get("format").and_then(Json::as_str) == Some("date-time") && rng.chance(0.85) {
        return "2025-01-01T00:00:00Z".into();
    }
    match string_pool(hint) {
        Some(pool) if rng.chance(0.75) => rng.pick(pool).to_string(),
        _ => rng.pick(GENERAL).to_string(),
    }
}
