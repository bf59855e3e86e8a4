//! The vocabulary is the API of a tool without CRDs: every label, annotation, field manager,
//! drain and Event reason, condition type and status key lives in `src/vocab.rs`, and the
//! table of them in docs/vocabulary.md is generated from it.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

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
    for f in files.iter().filter(|f| !f.ends_with("vocab.rs")) {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, lit) in literal_names(&text) {
            found.push(format!("{}:{line}: \"{lit}\"", f.display()));
        }
    }
    assert!(
        found.is_empty(),
        "names of slurmops' API spelled outside src/vocab.rs (add a constant there, with a doc line, and use it):\n{}",
        found.join("\n")
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
