//! The vocabulary is the API of a tool without CRDs: every label, annotation, field manager,
//! drain and Event reason, condition type and status key lives in `src/vocab/`, and the
//! table of them in docs/vocabulary.md is generated from it.

use std::path::Path;

use crate::rust_files;

/// Places in TEXT where a string literal spells a name of the vocabulary's domains:
/// `slurmops.dev/KEY` (not the cluster.yaml apiVersion) or `applyset.kubernetes.io/KEY`.
fn literal_names(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        // Only inside string literals: between quotes on the line (comments name them freely).
        let code = line.split("//").next().unwrap_or("");
        let quoted: Vec<&str> = code.split('"').skip(1).step_by(2).collect();
        for q in quoted {
            for domain in ["slurmops.dev/", "applyset.kubernetes.io/"] {
                let mut rest = q;
                while let Some(i) = rest.find(domain) {
                    let after = &rest[i + domain.len()..];
                    if !after.starts_with("v1alpha1") {
                        out.push((n + 1, q.to_string()));
                    }
                    rest = after;
                }
            }
        }
    }
    out
}

#[test]
fn every_label_and_annotation_is_spelled_in_the_vocabulary_module_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found = Vec::new();
    let vocab = root.join("vocab");
    for f in files.iter().filter(|f| !f.starts_with(&vocab)) {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, lit) in literal_names(&text) {
            found.push(format!("{}:{line}: \"{lit}\"", f.display()));
        }
    }
    assert!(
        found.is_empty(),
        "names of slurmops' API spelled outside src/vocab/ (add a constant there, with a doc line, and use it):\n{}",
        found.join("\n")
    );
}

/// The words of slurmops' state, each spelled by its type in `src/vocab/`: the daemon's
/// verdicts and a canary's stages, and the drain reasons.
fn state_words() -> (Vec<&'static str>, Vec<&'static str>) {
    use slurmops::vocab::{ALL, CanaryStage, Kind, Verdict};
    let verdicts = Verdict::ALL.iter().map(|v| v.as_str());
    let stages = CanaryStage::ALL.iter().map(|s| s.as_str());
    let drains = ALL
        .iter()
        .filter(|t| t.kind == Kind::DrainReason && t.name != "REASON_PREFIX")
        .map(|t| t.value);
    let states = verdicts.chain(stages).filter(|w| !w.is_empty()).collect();
    (states, drains.collect())
}

/// Places in TEXT's code (not its tests, not comments) where a string literal spells a state
/// word: a verdict or stage whole (not as a JSON key), a drain reason whole or as the start of
/// one (`WORD: ...`), or a drain reason with its prefix (`slurmops: {...}`, `slurmops: WORD`).
/// Words that are also everyday field and step names (`passed`, `failed`, `rollout`,
/// `autoscale`, `check`) count only with the prefix.
fn literal_state_words(text: &str, words: &(Vec<&str>, Vec<&str>)) -> Vec<(usize, String)> {
    const EVERYDAY: [&str; 5] = ["passed", "failed", "rollout", "autoscale", "check"];
    let (states, drains) = words;
    let bare = |w: &&&str| !EVERYDAY.contains(*w);
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        let pieces: Vec<&str> = code.split('"').collect();
        for (i, q) in pieces.iter().enumerate().skip(1).step_by(2) {
            let key = pieces
                .get(i + 1)
                .is_some_and(|after| after.starts_with(':'));
            let state = !key && states.iter().filter(bare).any(|w| q == w);
            let drain = drains
                .iter()
                .filter(bare)
                .any(|w| q == w || q.starts_with(&format!("{w}: ")));
            let prefixed = q.contains("slurmops: {")
                || states
                    .iter()
                    .chain(drains)
                    .any(|w| q.contains(&format!("slurmops: {w}")));
            if state || drain || prefixed {
                out.push((n + 1, q.to_string()));
            }
        }
    }
    out
}

#[test]
fn every_verdict_stage_and_drain_reason_is_spelled_by_its_type_only() {
    let words = state_words();
    assert!(words.0.len() >= 10 && words.1.len() >= 9, "{words:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found = Vec::new();
    for f in &files {
        let test_file = f.ends_with("tests.rs") || f.components().any(|c| c.as_os_str() == "tests");
        if f.starts_with(root.join("vocab")) || test_file {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (line, lit) in literal_state_words(&text, &words) {
            found.push(format!("{}:{line}: \"{lit}\"", f.display()));
        }
    }
    assert!(
        found.is_empty(),
        "verdicts, canary stages or drain reasons spelled outside src/vocab/ (spell them through vocab::Verdict, CanaryStage, DrainReason):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_state_scan_finds_a_spelled_verdict_and_drain_reason_and_skips_tests() {
    let words = state_words();
    let text = "let v = \"canary-failed\";\nlet r = format!(\"scale-in: {n}\");\nlet s = format!(\"slurmops: {why}\");\nlet m = \"the rollout waits\"; // \"rollout\"\nlet j = json!({\"refused\": 1, \"x\": \"refused\"});\n#[cfg(test)]\nlet t = \"canary-failed\";";
    assert_eq!(
        literal_state_words(text, &words),
        [
            (1, "canary-failed".to_string()),
            (2, "scale-in: {n}".to_string()),
            (3, "slurmops: {why}".to_string()),
            (5, "refused".to_string())
        ]
    );
}

#[test]
fn the_scan_finds_a_literal_label_and_skips_comments_and_the_api_version() {
    let added = "let l = \"slurmops.dev/new-label\";\n// slurmops.dev/in-a-comment\nlet v = \"apiVersion: slurmops.dev/v1alpha1\";\nlet a = format!(\"applyset.kubernetes.io/x={}\", 1);";
    let found = literal_names(added);
    assert_eq!(
        found,
        [
            (1, "slurmops.dev/new-label".to_string()),
            (4, "applyset.kubernetes.io/x={}".to_string())
        ]
    );
}

#[test]
fn every_term_has_a_doc_line_and_a_unique_value() {
    let mut seen = std::collections::BTreeSet::new();
    for t in slurmops::vocab::ALL {
        assert!(!t.doc.is_empty(), "{} has no doc line", t.name);
        assert!(
            seen.insert((t.kind.as_str(), t.value)),
            "{} = {:?} twice",
            t.name,
            t.value
        );
    }
}

/// The table between the markers `<!-- NAME:start -->` and `<!-- NAME:end -->` of PAGE reads
/// WANT (`UPDATE_GOLDEN=1` writes it there instead).
fn generated_table(page: &str, name: &str, want: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    let (start, end) = (
        format!("<!-- {name}:start -->\n"),
        format!("<!-- {name}:end -->"),
    );
    let (head, rest) = text
        .split_once(&start)
        .unwrap_or_else(|| panic!("{page} has no {start:?} marker"));
    let (table, tail) = rest
        .split_once(&end)
        .unwrap_or_else(|| panic!("{page} has no {end:?} marker"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, format!("{head}{start}{want}{end}{tail}")).unwrap();
        return;
    }
    assert!(
        table == want,
        "{page}'s table is stale (UPDATE_GOLDEN=1 rewrites it); between its markers it should read:\n{want}"
    );
}

#[test]
fn the_documented_vocabulary_table_is_generated_from_the_module() {
    generated_table(
        "docs/vocabulary.md",
        "vocabulary",
        &slurmops::vocab::markdown(),
    );
}

#[test]
fn the_metrics_reference_is_generated_from_what_the_daemon_exposes() {
    let want = slurmops::daemon::metrics::markdown();
    for name in ["slurmops_pass_phase_seconds", "slurmops_rollout_workers"] {
        assert!(want.contains(name), "{name} missing from\n{want}");
    }
    generated_table("docs/reference/metrics.md", "metrics", &want);
}

#[test]
fn every_metric_the_alert_rules_read_is_one_the_daemon_serves() {
    let served = slurmops::daemon::metrics::sampled().render();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rules = std::fs::read_to_string(root.join("alerts/slurmops.rules.yaml")).unwrap();
    let tests = std::fs::read_to_string(root.join("alerts/slurmops.rules.test.yaml")).unwrap();
    // The names in the rules' expressions and in their tests' input series.
    let names = |text: &str| -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        let mut rest = text;
        while let Some(i) = rest.find("slurmops_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[i + name.len()..];
            out.insert(name);
        }
        out
    };
    let wanted: std::collections::BTreeSet<String> =
        names(&rules).into_iter().chain(names(&tests)).collect();
    assert!(wanted.len() >= 8, "{wanted:?}");
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|n| {
            !served.lines().any(|l| {
                l.strip_prefix(n.as_str())
                    .is_some_and(|r| r.starts_with(['{', ' ']))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "alerts/ reads metrics the daemon does not serve: {missing:?}"
    );
}
