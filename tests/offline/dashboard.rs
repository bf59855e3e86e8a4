//! The Grafana dashboard (`dashboards/slurmops.json`) asks only for metrics the daemon serves:
//! every metric name in its queries is in the generated metric reference
//! (docs/reference/metrics.md, itself checked against the daemon's registry). It charts no
//! slurmctld metrics (`metrics/openmetrics`, 25.11 and later only), so that it works on every
//! release slurmops supports.

use std::collections::BTreeSet;
use std::path::Path;

/// Every `expr` of a Grafana dashboard, panels in rows included.
fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match x {
                    serde_json::Value::String(e) if k == "expr" => out.push(e.clone()),
                    _ => exprs(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| exprs(x, out)),
        _ => {}
    }
}

/// Every `expr` of dashboards/slurmops.json.
fn dashboard_exprs() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("dashboards/slurmops.json")).unwrap();
    let mut all = Vec::new();
    exprs(
        &serde_json::from_str(&text).expect("the dashboard is JSON"),
        &mut all,
    );
    all
}

/// PromQL words that are never metric names: aggregations, operators and modifiers.
const KEYWORDS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "atan2",
    "inf",
    "nan",
];

/// The metric names a PromQL expression reads: its identifiers, less what is inside label
/// matchers `{...}`, ranges `[...]` and strings, label lists after `by`, `without`, `on`,
/// `ignoring`, `group_left` and `group_right`, function names (a word before `(`), keywords and
/// numbers.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    // After a grouping keyword, the next parenthesised list is of labels.
    let mut labels_next = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' | '[' => {
                // Skip to the matching close, over quoted strings.
                let close = if c == '{' { '}' } else { ']' };
                i += 1;
                while i < chars.len() && chars[i] != close {
                    if chars[i] == '"' || chars[i] == '\'' {
                        let q = chars[i];
                        i += 1;
                        while i < chars.len() && chars[i] != q {
                            i += if chars[i] == '\\' { 2 } else { 1 };
                        }
                    }
                    i += 1;
                }
                i += 1;
            }
            '"' | '\'' | '`' => {
                i += 1;
                while i < chars.len() && chars[i] != c {
                    i += if chars[i] == '\\' && c != '`' { 2 } else { 1 };
                }
                i += 1;
            }
            '(' if labels_next => {
                while i < chars.len() && chars[i] != ')' {
                    i += 1;
                }
                labels_next = false;
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut j = i;
                while j < chars.len() && chars[j].is_whitespace() {
                    j += 1;
                }
                let call = chars.get(j) == Some(&'(');
                if matches!(
                    word.as_str(),
                    "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
                ) {
                    labels_next = call;
                } else if !call && !KEYWORDS.contains(&word.to_lowercase().as_str()) {
                    names.insert(word);
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                // A number, or a duration outside brackets (`offset 5m`): digits and letters.
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// The metrics of the generated reference: `(name, type)` from its table's rows.
fn reference() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference/metrics.md");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| {
            let mut cells = l.strip_prefix("| `")?.split('|');
            let name = cells.next()?.trim().trim_end_matches('`');
            let kind = cells.next()?.trim();
            Some((name.to_string(), kind.to_string()))
        })
        .collect()
}

/// Whether NAME is a series of a metric of the reference: the name itself, or a histogram's
/// `_bucket`, `_sum` or `_count`.
fn served(name: &str, reference: &[(String, String)]) -> bool {
    reference.iter().any(|(n, kind)| {
        n == name
            || (kind == "histogram"
                && ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| name.strip_suffix(s) == Some(n.as_str())))
    })
}

#[test]
fn the_query_scan_finds_metric_names_and_skips_functions_labels_ranges_and_strings() {
    let e = r#"histogram_quantile(0.9, sum by (le, slurm_x) (rate(a_seconds_bucket{job="slurm_y",l=~"a|b}"}[5m] offset 1h))) / on (instance) group_left (pod) max without (node) (b_total == 0 and bool c:rule) or vector(1) * 1e3 + time() - label_replace(d, "dst", "$1", "src", "(.*)")"#;
    assert_eq!(
        metric_names(e),
        ["a_seconds_bucket", "b_total", "c:rule", "d"]
            .map(String::from)
            .into(),
    );
}

#[test]
fn every_metric_the_dashboard_queries_is_one_the_daemon_serves() {
    let all = dashboard_exprs();
    let wanted: BTreeSet<String> = all.iter().flat_map(|e| metric_names(e)).collect();
    // The Slurm rows and the daemon's own: nodes, partitions, jobs, drains, rollouts, checks.
    assert!(wanted.len() >= 30, "{wanted:?}");
    let reference = reference();
    assert!(reference.len() >= 20, "{reference:?}");
    let missing: Vec<&String> = wanted.iter().filter(|n| !served(n, &reference)).collect();
    assert!(
        missing.is_empty(),
        "dashboards/slurmops.json queries metrics docs/reference/metrics.md does not list (the daemon does not serve them): {missing:?}"
    );
}

/// Every panel reads the replica that leads: a standby's gauges hold what it saw when it last
/// led, and summed with the leader's they would count workers, drifts and checks twice.
#[test]
fn every_query_of_the_dashboard_reads_the_leader_only() {
    let all = dashboard_exprs();
    let leader_only = BTreeSet::from(["slurmops_leader".to_string()]);
    let unfiltered: Vec<&String> = all
        .iter()
        .filter(|e| metric_names(e) != leader_only && !e.contains("slurmops_leader == 1"))
        .collect();
    assert!(all.len() >= 20, "{all:?}");
    assert!(
        unfiltered.is_empty(),
        "queries that read every replica, a standby's stale gauges too (add `and on (instance) slurmops_leader == 1`): {unfiltered:?}"
    );
}
