//! Structural check of a YAML tree against the JSON Schema generated from the types.
//!
//! serde stops at the first problem and forgets where it was; this walks the whole tree instead,
//! so that every unknown field (with a "did you mean"), wrong type or missing field is reported at
//! once with its position. Along the way it builds the JSON value serde then reads, resolving
//! plain scalars by what the schema expects there (`slurmVersion: 24.11` is the string "24.11").
//!
//! The tree is used up as the JSON is built (each scalar's text moves into the JSON, each subtree
//! is freed once its JSON is made), so that the two are never both whole in memory.

use serde_json::{Map, Number, Value as Json};

use super::diag::{Finding, Path, Trail, did_you_mean};
use super::values::{Duration, IntOrPercent};
use super::yaml::{Node, Value};

const DURATION_PATTERN: &str = "^([0-9]+[dhms])+$";
const PERCENT_PATTERN: &str = "^[0-9]+%$";

/// Checks `node` against `root` schema, using it up; returns the JSON value, the first LIMIT
/// findings in document order and how many there were in all.
pub fn check(mut node: Node, root: &Json, limit: usize) -> (Json, Vec<Finding>, usize) {
    let mut c = Checker {
        root,
        findings: Vec::new(),
        limit,
        total: 0,
    };
    let top = Path::root();
    let value = c.walk(&mut node, root, &Trail::At(&top));
    (value, c.findings, c.total)
}

/// What is left of a subtree whose JSON is made: nothing (an empty list allocates nothing).
fn spent() -> Node {
    Node {
        value: Value::Seq(Box::default()),
        pos: Default::default(),
    }
}

/// Whether SCHEMA (resolved) cannot take NODE by its shape alone: a mapping where no mapping
/// goes, a list where no list goes. Scalars are left to the branch (their type depends on it).
fn shape_excludes(schema: &Json, node: &Node) -> bool {
    let types = types_of(schema);
    if types.is_empty() || schema.get("anyOf").is_some() || schema.get("oneOf").is_some() {
        return false;
    }
    match &node.value {
        Value::Map(_) => !types.contains(&"object"),
        Value::Seq(_) => !types.contains(&"array"),
        Value::Scalar { .. } => false,
    }
}

struct Checker<'s> {
    root: &'s Json,
    findings: Vec<Finding>,
    /// Findings kept (a hostile file can have millions; the rest are only counted).
    limit: usize,
    total: usize,
}

/// What a schema (after `$ref`/`allOf` resolution) says about one node.
fn types_of(schema: &Json) -> Vec<&str> {
    match schema.get("type") {
        Some(Json::String(t)) => vec![t.as_str()],
        Some(Json::Array(ts)) => ts.iter().filter_map(Json::as_str).collect(),
        _ => Vec::new(),
    }
}

fn kind_name(node: &Node) -> &'static str {
    match &node.value {
        Value::Map(_) => "a mapping",
        Value::Seq(_) => "a list",
        Value::Scalar { plain: false, .. } => "a quoted string",
        Value::Scalar { .. } if node.is_null() => "nothing (null)",
        Value::Scalar { .. } => "a scalar",
    }
}

impl<'s> Checker<'s> {
    fn resolve(&self, mut schema: &'s Json) -> &'s Json {
        for _ in 0..32 {
            if let Some(r) = schema.get("$ref").and_then(Json::as_str) {
                let name = r
                    .trim_start_matches("#/definitions/")
                    .trim_start_matches("#/$defs/");
                let defs = self
                    .root
                    .get("definitions")
                    .or_else(|| self.root.get("$defs"));
                match defs.and_then(|d| d.get(name)) {
                    Some(s) => schema = s,
                    None => return &Json::Bool(true),
                }
            } else if let Some(Json::Array(all)) = schema.get("allOf")
                && all.len() == 1
                && schema.get("properties").is_none()
            {
                schema = &all[0];
            } else {
                break;
            }
        }
        schema
    }

    fn report(&mut self, f: Finding) {
        self.total += 1;
        if self.findings.len() < self.limit {
            self.findings.push(f);
        }
    }

    fn walk(&mut self, node: &mut Node, schema: &'s Json, path: &Trail<'_>) -> Json {
        let is_quantity = schema
            .get("$ref")
            .and_then(Json::as_str)
            .is_some_and(|r| r.ends_with("resource.Quantity"));
        let schema = self.resolve(schema);
        if is_quantity {
            return self.scalar_as(node, &["string"], schema, path);
        }
        if let Some(Json::Array(branches)) = schema.get("anyOf").or_else(|| schema.get("oneOf")) {
            return self.any_of(node, branches, schema, path);
        }
        if schema.get("x-slurmops-secret-ref").is_some()
            && !matches!(node.value, Value::Map(_))
            && !node.is_null()
        {
            self.report(
                Finding::new(path.path(), "inline secret material is not allowed here").hint(
                    "store it in a Kubernetes Secret and reference it as {name: SECRET, key: KEY}",
                ),
            );
            return Json::Null;
        }
        let types = types_of(schema);
        let kind = kind_name(node);
        match &mut node.value {
            Value::Map(entries) => {
                if !types.is_empty() && !types.contains(&"object") {
                    return self.mismatch(kind, &types, path);
                }
                self.object(entries, schema, path)
            }
            Value::Seq(items) => {
                if !types.is_empty() && !types.contains(&"array") {
                    return self.mismatch(kind, &types, path);
                }
                let item_schema = schema.get("items").unwrap_or(&Json::Bool(true));
                let out = Json::Array(
                    items
                        .iter_mut()
                        .enumerate()
                        .map(|(i, n)| {
                            let v = self.walk(n, item_schema, &Trail::Index(path, i));
                            *n = spent();
                            v
                        })
                        .collect(),
                );
                *items = Box::default();
                out
            }
            Value::Scalar { .. } => {
                if schema.get("x-kubernetes-int-or-string").is_some() {
                    return plain_json(node);
                }
                self.scalar_as(node, &types, schema, path)
            }
        }
    }

    fn any_of(
        &mut self,
        node: &mut Node,
        branches: &'s [Json],
        schema: &'s Json,
        path: &Trail<'_>,
    ) -> Json {
        // The first branch that fits without findings wins; otherwise report the findings of the
        // branch whose shape matches the node (a mapping for a mapping, and so on). Branches the
        // node's shape rules out are not walked; when one is left, it uses the node up, else
        // each walks a copy (`Option<Accounting>` is one branch for a mapping: no copy of it).
        let kind = kind_name(node);
        let open: Vec<&'s Json> = branches
            .iter()
            .filter(|b| !shape_excludes(self.resolve(b), node))
            .collect();
        let alone = open.len() == 1;
        let mut best: Option<(Json, Vec<Finding>, usize)> = None;
        // The path of the node, made once a branch has findings (most nodes fit the first).
        let mut here: Option<Path> = None;
        for branch in open {
            let mut sub = Checker {
                root: self.root,
                findings: Vec::new(),
                limit: self.limit,
                total: 0,
            };
            let value = match alone {
                true => sub.walk(node, branch, path),
                false => sub.walk(&mut node.clone(), branch, path),
            };
            if sub.findings.is_empty() {
                return value;
            }
            let here = &*here.get_or_insert_with(|| path.path());
            let shape_fits = !sub
                .findings
                .iter()
                .any(|f| f.path == *here && f.message.starts_with("expected "));
            if best.is_none() || shape_fits {
                let replace = best
                    .as_ref()
                    .is_none_or(|(_, f, _)| f.iter().any(|f| f.path == *here));
                if replace {
                    best = Some((value, sub.findings, sub.total));
                }
            }
        }
        let secret = branches
            .iter()
            .any(|b| self.resolve(b).get("x-slurmops-secret-ref").is_some());
        match best {
            // The branch of the node's shape: its own findings (a field missing) say more than
            // "expected X, found a mapping".
            Some((value, findings, total))
                if secret
                    || findings.iter().all(|f| {
                        Some(&f.path) != here.as_ref()
                            || f.message.starts_with("missing required field")
                    }) =>
            {
                let dropped = total - findings.len();
                for f in findings {
                    self.report(f);
                }
                self.total += dropped;
                value
            }
            _ => {
                let expected = describe(schema, self);
                self.report(Finding::new(
                    path.path(),
                    format!("expected {expected}, found {kind}"),
                ));
                Json::Null
            }
        }
    }

    fn object(
        &mut self,
        entries: &mut [(super::yaml::Key, Node)],
        schema: &'s Json,
        path: &Trail<'_>,
    ) -> Json {
        let props = schema.get("properties").and_then(Json::as_object);
        let extra = schema.get("additionalProperties");
        let mut out = Map::with_capacity(entries.len());
        for (key, value) in entries.iter_mut() {
            let child = Trail::Key(path, &key.text);
            let sub = props.and_then(|p| p.get(&*key.text));
            let sub = match (sub, extra) {
                (Some(s), _) => s,
                (None, Some(Json::Bool(false))) | (None, None) if props.is_some() => {
                    let mut f = Finding::new(child.path(), format!("unknown field `{}`", key.text));
                    f.at_key = Some(key.text.to_string());
                    if let Some(p) = props {
                        f = match did_you_mean(&key.text, p.keys().map(String::as_str)) {
                            Some(s) => f.hint(format!("did you mean `{s}`?")),
                            None => f.hint(format!(
                                "allowed here: {}",
                                p.keys().cloned().collect::<Vec<_>>().join(", ")
                            )),
                        };
                    }
                    self.report(f);
                    continue;
                }
                (None, Some(s)) => s,
                (None, None) => &Json::Bool(true),
            };
            if value.is_null() && !accepts_null(self.resolve(sub), self) {
                // `field:` with nothing after it means "not set", as Kubernetes reads it; a
                // required field cannot be unset, and is reported where it stands.
                if is_required(schema, &key.text) {
                    let expected = value_kind(self.resolve(sub), self);
                    let mut f = Finding::new(
                        child.path(),
                        format!("`{}` is required but has no value (null)", key.text),
                    )
                    .hint(format!("give it {expected}"));
                    f.at_key = Some(key.text.to_string());
                    self.report(f);
                }
                continue;
            }
            let v = self.walk(value, sub, &child);
            *value = spent();
            out.insert(key.text.to_string(), v);
        }
        if let Some(Json::Array(required)) = schema.get("required") {
            for r in required.iter().filter_map(Json::as_str) {
                if !entries.iter().any(|(k, _)| &*k.text == r) {
                    self.report(Finding::new(
                        path.path(),
                        format!("missing required field `{r}`"),
                    ));
                }
            }
        }
        Json::Object(out)
    }

    fn scalar_as(
        &mut self,
        node: &mut Node,
        types: &[&str],
        schema: &Json,
        path: &Trail<'_>,
    ) -> Json {
        let null = node.is_null();
        let kind = kind_name(node);
        if types.is_empty() && matches!(node.value, Value::Scalar { .. }) {
            return plain_json(node);
        }
        let Value::Scalar { text, plain } = &mut node.value else {
            return self.mismatch(kind, types, path);
        };
        let plain = *plain;
        if null && types.contains(&"null") {
            return Json::Null;
        }
        let value = if types.contains(&"string") && (!plain || !null) {
            // The text moves into the JSON (the tree is used up as it is checked).
            Some(Json::String(std::mem::take(text).into()))
        } else if !plain {
            None
        } else if types.contains(&"boolean") {
            match &**text {
                "true" | "True" | "TRUE" => Some(Json::Bool(true)),
                "false" | "False" | "FALSE" => Some(Json::Bool(false)),
                _ => None,
            }
            .or_else(|| self.number(text, types))
        } else {
            self.number(text, types)
        };
        let Some(value) = value else {
            let mut f = Finding::new(
                path.path(),
                format!("expected {}, found {:?}", types.join(" or "), text),
            );
            if !plain {
                f = f.hint("remove the quotes");
            }
            self.report(f);
            return Json::Null;
        };
        self.constraints(&value, schema, path);
        value
    }

    fn number(&self, text: &str, types: &[&str]) -> Option<Json> {
        if types.contains(&"integer")
            && let Ok(i) = text.parse::<i64>()
        {
            return Some(Json::Number(i.into()));
        }
        if types.contains(&"number") {
            return text
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Json::Number);
        }
        None
    }

    fn constraints(&mut self, value: &Json, schema: &Json, path: &Trail<'_>) {
        if let (Some(Json::Array(allowed)), Some(s)) = (schema.get("enum"), value.as_str()) {
            let words: Vec<&str> = allowed.iter().filter_map(Json::as_str).collect();
            if !words.contains(&s) {
                let mut f = Finding::new(
                    path.path(),
                    format!("{s:?} is not one of: {}", words.join(", ")),
                );
                if let Some(m) = did_you_mean(s, words.iter().copied()) {
                    f = f.hint(format!("did you mean `{m}`?"));
                }
                self.report(f);
            }
        }
        if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Json::as_f64), value.as_f64())
            && n < min
        {
            self.report(Finding::new(
                path.path(),
                format!("{n} is less than the minimum {min}"),
            ));
        }
        if let (Some(max), Some(n)) = (max_of(schema), value.as_f64())
            && n > max
        {
            self.report(Finding::new(
                path.path(),
                format!("{n} is more than the maximum {max}"),
            ));
        }
        let pattern_error = match (schema.get("pattern").and_then(Json::as_str), value.as_str()) {
            (Some(DURATION_PATTERN), Some(s)) => Duration::parse(s).err(),
            (Some(PERCENT_PATTERN), Some(s)) => {
                serde_json::from_value::<IntOrPercent>(Json::String(s.into()))
                    .err()
                    .map(|e| e.to_string())
            }
            _ => None,
        };
        if let Some(e) = pattern_error {
            self.report(Finding::new(path.path(), e));
        }
    }

    fn mismatch(&mut self, kind: &str, types: &[&str], path: &Trail<'_>) -> Json {
        self.report(Finding::new(
            path.path(),
            format!("expected {}, found {kind}", types.join(" or "),),
        ));
        Json::Null
    }
}

/// The largest value an integer format allows (`uint32`, `int32`, ...), so that 5000000000
/// replicas is an error and not an overflow.
fn max_of(schema: &Json) -> Option<f64> {
    match schema.get("format").and_then(Json::as_str)? {
        "uint8" => Some(u8::MAX.into()),
        "uint16" => Some(u16::MAX.into()),
        "uint32" => Some(u32::MAX.into()),
        "int32" => Some(i32::MAX.into()),
        "uint64" | "uint" => Some(u64::MAX as f64),
        _ => None,
    }
}

/// What a value of SCHEMA is, in a user's words: "a list", "an integer", ...
fn value_kind(schema: &Json, c: &Checker) -> String {
    let words: Vec<&str> = types_of(schema)
        .into_iter()
        .filter_map(|t| match t {
            "array" => Some("a list"),
            "object" => Some("a mapping"),
            "integer" => Some("an integer"),
            "number" => Some("a number"),
            "string" => Some("a string"),
            "boolean" => Some("true or false"),
            _ => None,
        })
        .collect();
    if words.is_empty() {
        describe(schema, c)
    } else {
        words.join(" or ")
    }
}

fn is_required(schema: &Json, key: &str) -> bool {
    schema
        .get("required")
        .and_then(Json::as_array)
        .is_some_and(|r| r.iter().any(|k| k.as_str() == Some(key)))
}

fn accepts_null(schema: &Json, c: &Checker) -> bool {
    types_of(schema).contains(&"null")
        || schema
            .get("anyOf")
            .and_then(Json::as_array)
            .is_some_and(|bs| bs.iter().any(|b| types_of(c.resolve(b)).contains(&"null")))
}

fn describe(schema: &Json, c: &Checker) -> String {
    let mut parts = Vec::new();
    for b in schema
        .get("anyOf")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let r = c.resolve(b);
        let ts = types_of(r);
        if ts.is_empty() && r.get("properties").is_some() {
            parts.push("a mapping".to_string());
        }
        let words: Vec<&str> = r
            .get("enum")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .collect();
        if !words.is_empty() {
            parts.push(words.join(" or "));
            continue;
        }
        parts.extend(ts.into_iter().filter(|t| *t != "null").map(|t| {
            match t {
                "object" => "a mapping",
                "integer" => "an integer",
                "string" => "a string",
                "array" => "a list",
                "boolean" => "true or false",
                other => other,
            }
            .to_string()
        }));
    }
    parts.dedup();
    if parts.is_empty() {
        "a different value".into()
    } else {
        parts.join(" or ")
    }
}

/// A node read by the YAML 1.2 core schema, for places the schema leaves open.
fn plain_json(node: &Node) -> Json {
    match &node.value {
        Value::Scalar { text, plain: false } => Json::String(text.to_string()),
        Value::Scalar { text, plain: true } => {
            if node.is_null() {
                Json::Null
            } else if let Ok(i) = text.parse::<i64>() {
                Json::Number(i.into())
            } else if matches!(&**text, "true" | "false") {
                Json::Bool(&**text == "true")
            } else {
                Json::String(text.to_string())
            }
        }
        Value::Seq(items) => Json::Array(items.iter().map(plain_json).collect()),
        Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.text.to_string(), plain_json(v)))
                .collect(),
        ),
    }
}
