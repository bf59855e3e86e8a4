//! Helm values as Helm reads them: several files merged in order (`helm -f a.yaml -f b.yaml`:
//! mappings merge key by key, anything else is replaced, and a `null` removes the key), each
//! setting remembering the file and line it came from. Reading a setting marks it used, so that
//! what nobody read can be reported at the end.

use std::cell::RefCell;

use serde_json::Value as Json;

use super::{Entry, ImportError, Outcome};
use crate::cluster::yaml::{self, Pos};

/// One node of the merged values.
#[derive(Debug, Clone)]
pub struct V {
    /// (file index, position) of where it was written.
    at: (usize, Pos),
    kind: K,
}

#[derive(Debug, Clone)]
enum K {
    Null,
    Scalar { text: String, plain: bool },
    Seq(Vec<V>),
    Map(Vec<(String, V)>),
}

impl V {
    fn from_yaml(n: &yaml::Node, file: usize) -> V {
        let kind = if n.is_null() {
            K::Null
        } else {
            match &n.value {
                yaml::Value::Scalar { text, plain } => K::Scalar {
                    text: text.to_string(),
                    plain: *plain,
                },
                yaml::Value::Seq(items) => {
                    K::Seq(items.iter().map(|i| V::from_yaml(i, file)).collect())
                }
                yaml::Value::Map(entries) => K::Map(
                    entries
                        .iter()
                        .map(|(k, v)| (k.text.to_string(), V::from_yaml(v, file)))
                        .collect(),
                ),
            }
        };
        V {
            at: (file, n.pos),
            kind,
        }
    }

    /// Nothing set: null, an empty string, mapping or list.
    fn is_empty(&self) -> bool {
        match &self.kind {
            K::Null => true,
            K::Scalar { text, .. } => text.is_empty(),
            K::Seq(s) => s.is_empty(),
            K::Map(m) => m.is_empty(),
        }
    }

    fn get(&self, key: &str) -> Option<&V> {
        match &self.kind {
            K::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// OVER merged onto this node, as Helm merges values files.
    pub fn merge(&mut self, over: V) {
        match (&mut self.kind, over.kind) {
            (K::Map(base), K::Map(entries)) => {
                for (k, v) in entries {
                    let i = base.iter().position(|(b, _)| *b == k);
                    match (i, &v.kind) {
                        (Some(i), K::Null) => {
                            base.remove(i);
                        }
                        (None, K::Null) => {}
                        (Some(i), _) => base[i].1.merge(v),
                        (None, _) => base.push((k, v)),
                    }
                }
            }
            (_, kind) => {
                self.at = over.at;
                self.kind = kind;
            }
        }
    }

    /// As JSON, scalars typed by YAML 1.2's core schema (a quoted scalar stays a string).
    fn json(&self) -> Json {
        match &self.kind {
            K::Null => Json::Null,
            K::Scalar { text, plain: false } => Json::String(text.clone()),
            K::Scalar { text, plain: true } => match text.as_str() {
                "true" | "True" | "TRUE" => Json::Bool(true),
                "false" | "False" | "FALSE" => Json::Bool(false),
                t => t
                    .parse::<i64>()
                    .map(Json::from)
                    .or_else(|_| t.parse::<f64>().map(Json::from))
                    .unwrap_or_else(|_| Json::String(t.to_string())),
            },
            K::Seq(s) => Json::Array(s.iter().map(V::json).collect()),
            K::Map(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), v.json())).collect()),
        }
    }
}

/// The merged values, what was read of them, and the report so far.
pub struct Values {
    root: V,
    files: Vec<String>,
    used: RefCell<Vec<Vec<String>>>,
    report: RefCell<Vec<Entry>>,
}

/// A path in the values, as segments (`nodesets`, `gpu`, `slurmd`, ...).
pub type P<'a> = &'a [&'a str];

impl Values {
    /// FILES ((name, text)) merged in order.
    pub fn load(files: &[(String, String)]) -> Result<Values, ImportError> {
        let mut root = V {
            at: (0, Pos::default()),
            kind: K::Map(Vec::new()),
        };
        for (i, (name, text)) in files.iter().enumerate() {
            let tree = yaml::parse(text).map_err(|e| ImportError::Yaml {
                file: name.clone(),
                line: e.pos.line(),
                col: e.pos.col(),
                message: e.message,
            })?;
            let v = V::from_yaml(&tree, i);
            match &v.kind {
                K::Map(_) => root.merge(v),
                K::Null => {}
                other => {
                    return Err(ImportError::NotAMap {
                        file: name.clone(),
                        line: tree.pos.line(),
                        col: tree.pos.col(),
                        found: match other {
                            K::Seq(_) => "a list",
                            _ => "a scalar",
                        },
                    });
                }
            }
        }
        Ok(Values {
            root,
            files: files.iter().map(|(n, _)| n.clone()).collect(),
            used: RefCell::default(),
            report: RefCell::default(),
        })
    }

    fn node(&self, path: P) -> Option<&V> {
        path.iter()
            .try_fold(&self.root, |v, k| v.get(k))
            .filter(|v| !v.is_empty())
    }

    fn at(&self, v: &V) -> String {
        let (file, pos) = v.at;
        format!("{}:{}:{}", self.files[file], pos.line, pos.col)
    }

    /// The keys of the mapping at PATH, in order (nothing is marked read).
    pub fn keys(&self, path: P) -> Vec<String> {
        match self.node(path).map(|v| &v.kind) {
            Some(K::Map(m)) => m.iter().map(|(k, _)| k.clone()).collect(),
            _ => Vec::new(),
        }
    }

    /// Merges the mapping at FROM under each key of the mapping at INTO (a Helm chart's
    /// `nodesetDefaults` under each of `nodesets`), then drops FROM: what it set is reported as
    /// each entry's own setting, where FROM wrote it.
    pub fn spread_defaults(&mut self, from: &str, into: &str) {
        let Some(defaults) = self.root.get(from).cloned() else {
            return;
        };
        if let K::Map(root) = &mut self.root.kind {
            root.retain(|(k, _)| k != from);
            if let Some((
                _,
                V {
                    kind: K::Map(entries),
                    ..
                },
            )) = root.iter_mut().find(|(k, _)| k == into)
            {
                for (_, entry) in entries.iter_mut() {
                    let mut merged = defaults.clone();
                    merged.merge(entry.clone());
                    *entry = merged;
                }
            }
        }
    }

    fn mark(&self, path: P) {
        self.used
            .borrow_mut()
            .push(path.iter().map(|s| s.to_string()).collect());
    }

    fn entry(&self, path: P, v: Option<&V>, outcome: Outcome) {
        self.report.borrow_mut().push(Entry {
            at: v.map(|v| self.at(v)).unwrap_or_default(),
            path: show(
                path.iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .as_slice(),
            ),
            outcome,
        });
    }

    /// The setting at PATH as JSON, marked read; not reported.
    pub fn read(&self, path: P) -> Option<Json> {
        let v = self.node(path)?;
        self.mark(path);
        Some(v.json())
    }

    /// The setting at PATH as text (a scalar), marked read; not reported.
    pub fn text(&self, path: P) -> Option<String> {
        match self.read(path)? {
            Json::String(s) => Some(s),
            Json::Array(_) | Json::Object(_) | Json::Null => None,
            other => Some(other.to_string()),
        }
    }

    /// The setting at PATH, marked read and reported as mapped TO.
    pub fn map(&self, path: P, to: &str) -> Option<Json> {
        let v = self.node(path)?;
        self.mark(path);
        self.entry(path, Some(v), Outcome::Mapped(to.to_string()));
        Some(v.json())
    }

    /// As `map`, for a scalar, as text.
    pub fn map_text(&self, path: P, to: &str) -> Option<String> {
        match self.map(path, to)? {
            Json::String(s) => Some(s),
            Json::Array(_) | Json::Object(_) | Json::Null => None,
            other => Some(other.to_string()),
        }
    }

    /// Reports the setting at PATH (when set) with OUTCOME and marks it read.
    pub fn tell(&self, path: P, outcome: Outcome) {
        if let Some(v) = self.node(path) {
            self.mark(path);
            self.entry(path, Some(v), outcome);
        }
    }

    /// Reports what nobody wrote at PATH (a default) with OUTCOME.
    pub fn note(&self, path: P, outcome: Outcome) {
        self.entry(path, None, outcome);
    }

    /// Was anything set at PATH?
    pub fn has(&self, path: P) -> bool {
        self.node(path).is_some()
    }

    /// The report: what was reported, then every setting nobody read, classified by CLASSIFY
    /// (its path → ignored or needing a person).
    pub fn finish(self, classify: impl Fn(&[String]) -> Outcome) -> Vec<Entry> {
        let mut leaves = Vec::new();
        leaves_of(&self.root, &mut Vec::new(), &mut leaves);
        let used = self.used.borrow();
        let mut report = self.report.borrow().clone();
        for (path, v) in leaves {
            if used.iter().any(|u| path.starts_with(u)) {
                continue;
            }
            report.push(Entry {
                at: self.at(v),
                path: show(&path),
                outcome: classify(&path),
            });
        }
        report
    }
}

/// A path as the report shows it: keys joined by dots, a key holding a dot in brackets.
fn show(path: &[String]) -> String {
    let mut out = String::new();
    for (i, k) in path.iter().enumerate() {
        if k.contains('.') || k.contains(' ') {
            out.push_str(&format!("[{k:?}]"));
        } else {
            if i > 0 {
                out.push('.');
            }
            out.push_str(k);
        }
    }
    out
}

/// Every non-empty setting under V that is not a mapping (lists count as one setting).
fn leaves_of<'a>(v: &'a V, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, &'a V)>) {
    if v.is_empty() {
        return;
    }
    match &v.kind {
        K::Map(m) => {
            for (k, child) in m {
                path.push(k.clone());
                leaves_of(child, path, out);
                path.pop();
            }
        }
        _ => out.push((path.clone(), v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(files: &[&str]) -> Values {
        let files: Vec<(String, String)> = files
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("f{i}.yaml"), t.to_string()))
            .collect();
        Values::load(&files).unwrap()
    }

    #[test]
    fn files_merge_as_helm_merges_them() {
        let v = values(&[
            "a: {b: 1, c: [1, 2], d: x}\ne: 5\n",
            "a: {b: 2, c: [3]}\ne: null\n",
        ]);
        assert_eq!(v.read(&["a", "b"]), Some(Json::from(2)));
        assert_eq!(v.read(&["a", "c"]), Some(serde_json::json!([3])));
        assert_eq!(v.text(&["a", "d"]).as_deref(), Some("x"));
        assert_eq!(v.read(&["e"]), None, "null removes the key");
    }

    #[test]
    fn what_nobody_read_is_reported_where_it_was_written() {
        let v = values(&["a: 1\nb:\n  c: 2\n  d: {}\n", "b: {e: \"3\"}\n"]);
        v.map(&["a"], "spec.a");
        let report = v.finish(|_| Outcome::Needs("no equivalent".into()));
        let lines: Vec<(String, String)> = report
            .iter()
            .map(|e| (e.at.clone(), e.path.clone()))
            .collect();
        assert_eq!(
            lines,
            [
                ("f0.yaml:1:4".to_string(), "a".to_string()),
                ("f0.yaml:3:6".into(), "b.c".into()),
                ("f1.yaml:1:8".into(), "b.e".into()),
            ]
        );
    }

    #[test]
    fn defaults_spread_under_each_entry_and_the_entry_wins() {
        let mut v = values(&[
            "nodesetDefaults: {replicas: 1, image: x}\nnodesets: {a: {replicas: 4}, b: {}}\n",
        ]);
        v.spread_defaults("nodesetDefaults", "nodesets");
        assert_eq!(v.read(&["nodesets", "a", "replicas"]), Some(Json::from(4)));
        assert_eq!(v.read(&["nodesets", "b", "replicas"]), Some(Json::from(1)));
        assert!(!v.has(&["nodesetDefaults"]));
    }
}
