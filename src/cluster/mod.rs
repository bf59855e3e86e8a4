//! `spec`: read cluster.yaml, check it against the format, and hand back a validated
//! [`ClusterFile`] — or every problem at once, each with its position and a fix.

pub mod accounting_settings;
pub mod accounts;
pub mod active_checks;
pub mod backup;
pub mod backup_settings;
pub mod budget;
pub mod canary;
pub mod canary_validation;
pub mod check;
pub mod controller_settings;
pub mod diag;
pub mod guard;
pub mod guard_code;
pub mod guard_file;
pub mod guard_images;
pub mod guardrails;
pub mod images;
pub mod login_sets;
pub mod nodeset;
pub mod pod_settings;
pub mod policy;
pub mod reference;
pub mod release;
pub mod secret_ref;
pub mod serde_defaults;
pub mod topology;
pub mod types;
pub mod validate;
pub mod values;
pub mod window;
pub mod words;
pub mod yaml;

pub use diag::{Diagnostic, Path};
pub use guardrails::Guardrails;
pub use types::*;

/// The JSON Schema of cluster.yaml, generated from the types.
pub fn json_schema() -> serde_json::Value {
    schema().clone()
}

/// The schema every `load` checks against, generated once per process: generating it costs more
/// than checking a small cluster.yaml (it was 90% of a 5-NodeSet load).
fn schema() -> &'static serde_json::Value {
    static SCHEMA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let settings = schemars::generate::SchemaSettings::draft07();
        let schema = settings
            .into_generator()
            .into_root_schema_for::<ClusterFile>();
        serde_json::to_value(schema).expect("a generated schema is valid JSON")
    })
}

/// Most problems reported for one file (the first ones in the document); the rest are counted.
pub const MAX_DIAGNOSTICS: usize = 200;

/// Reads cluster.yaml text. `file` is the name used in diagnostics.
/// On failure returns every problem found, sorted by position.
///
/// Memory: the YAML tree (positions), the JSON value built from it and the typed cluster are
/// never all held at once. The tree is used up as the JSON is built, and the JSON as the typed
/// cluster is read from it; when there is something to report, the text is parsed again for
/// the positions (the same tree: parsing is deterministic). The largest file the parser takes
/// is validated in under 100 MiB this way (`tests/offline/hostile.rs`).
pub fn load(file: &str, text: &str) -> Result<ClusterFile, Vec<Diagnostic>> {
    let tree = yaml::parse(text).map_err(|e| {
        vec![Diagnostic {
            file: file.to_string(),
            line: e.pos.line(),
            col: e.pos.col(),
            path: "(yaml)".into(),
            message: e.message,
            hint: Some("fix the YAML syntax".into()),
        }]
    })?;
    let (value, findings, total) = check::check(tree, schema(), MAX_DIAGNOSTICS);
    let at = |findings: Vec<diag::Finding>, total: usize| diagnostics(file, text, findings, total);
    let over = validate::oversized(&value);
    if !over.is_empty() {
        // Its positions come from parsing the text again: the JSON goes first.
        drop(value);
        let total = total + over.len();
        return Err(at(findings.into_iter().chain(over).collect(), total));
    }
    // Structural findings drop the offending values; when what is left still reads as a cluster,
    // the semantic checks run too, so that one run reports as much as it can.
    let cluster: Result<ClusterFile, _> = serde_json::from_value(value);
    match cluster {
        Ok(cluster) => {
            let mut all = findings;
            let (semantic, counted) = validate::validate(&cluster);
            let total = total + counted;
            all.extend(semantic);
            if all.is_empty() {
                Ok(cluster)
            } else {
                drop(cluster);
                Err(at(all, total))
            }
        }
        Err(_) if !findings.is_empty() => Err(at(findings, total)),
        Err(e) => Err(at(vec![diag::Finding::new(Path::root(), e.to_string())], 1)),
    }
}

/// FINDINGS (of TOTAL) in FILE, whose TEXT parsed before, at their positions, sorted; past
/// MAX_DIAGNOSTICS, one more line counts the rest.
fn diagnostics(
    file: &str,
    text: &str,
    findings: Vec<diag::Finding>,
    total: usize,
) -> Vec<Diagnostic> {
    // It parsed before, so it parses again (were it not to: at 1:1, never without them).
    match yaml::parse(text) {
        Ok(tree) => placed(file, &tree, findings, total),
        Err(_) => findings
            .into_iter()
            .map(|f| Diagnostic {
                file: file.to_string(),
                line: 1,
                col: 1,
                path: f.path.to_string(),
                message: f.message,
                hint: f.hint,
            })
            .collect(),
    }
}

/// FINDINGS (of TOTAL) in FILE, whose YAML is TREE, at their positions, sorted; past
/// MAX_DIAGNOSTICS, one more line counts the rest.
fn placed(
    file: &str,
    tree: &yaml::Node,
    findings: Vec<diag::Finding>,
    total: usize,
) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = findings
        .into_iter()
        .take(MAX_DIAGNOSTICS)
        .map(|f| {
            let pos = match &f.at_key {
                Some(k) => {
                    let owner = f.path.parent();
                    locate_node(tree, &owner)
                        .and_then(|n| n.key_pos(k))
                        .unwrap_or_else(|| tree.locate(&owner))
                }
                None => tree.locate(&f.path),
            };
            Diagnostic {
                file: file.to_string(),
                line: pos.line(),
                col: pos.col(),
                path: f.path.to_string(),
                message: f.message,
                hint: f.hint,
            }
        })
        .collect();
    out.sort_by(|a, b| (a.line, a.col, &a.message).cmp(&(b.line, b.col, &b.message)));
    out.dedup();
    if total > MAX_DIAGNOSTICS {
        out.push(Diagnostic {
            file: file.to_string(),
            line: out.last().map_or(1, |d| d.line),
            col: out.last().map_or(1, |d| d.col),
            path: "(more)".into(),
            message: format!("{} more problems not shown", total - MAX_DIAGNOSTICS),
            hint: Some("fix the ones above and validate again".into()),
        });
    }
    out
}

/// What GUARD refuses of C, loaded from TEXT (FILE), at its positions: empty when the install
/// allows all of it.
pub fn refusals(file: &str, text: &str, c: &ClusterFile, guard: &Guardrails) -> Vec<Diagnostic> {
    let findings = guard.check(c);
    if findings.is_empty() {
        return Vec::new();
    }
    let total = findings.len();
    // TEXT loaded into C: it parses.
    diagnostics(file, text, findings, total)
}

/// FINDINGS of C's TEXT (FILE) at their positions (the rendered policy's, `guarded`).
pub fn placed_findings(file: &str, text: &str, findings: Vec<diag::Finding>) -> Vec<Diagnostic> {
    let total = findings.len();
    diagnostics(file, text, findings, total)
}

fn locate_node<'a>(tree: &'a yaml::Node, path: &Path) -> Option<&'a yaml::Node> {
    let mut node = tree;
    for seg in path.segments() {
        node = match (seg, &node.value) {
            (diag::PathSeg::Key(k), yaml::Value::Map(_)) => node.get(k)?,
            (diag::PathSeg::Index(i), yaml::Value::Seq(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(node)
}
