//! The README claims only what the tests prove: every test file and script it names exists, and
//! every test file is named in it (its "What the tests prove" says what each one shows).

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn readme() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap()
}

/// Every `tests/...` path in TEXT ending in a file extension.
fn named_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("tests/") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_-./".contains(c)))
            .unwrap_or(tail.len());
        let path = tail[..end].trim_end_matches('.');
        if Path::new(path).extension().is_some() {
            out.push(path.to_string());
        }
        rest = &tail[end..];
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn every_test_file_the_readme_names_exists() {
    let paths = named_paths(&readme());
    assert!(paths.len() > 20, "{paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !Path::new(ROOT).join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "README names files that do not exist: {missing:?}"
    );
}

#[test]
fn every_test_file_is_named_in_the_readme() {
    let text = readme();
    let mut unnamed = Vec::new();
    for dir in ["tests/e2e", "tests/offline"] {
        for e in std::fs::read_dir(Path::new(ROOT).join(dir)).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            let path = format!("{dir}/{name}");
            if name.ends_with(".rs") && name != "main.rs" && !text.contains(&path) {
                unnamed.push(path);
            }
        }
    }
    unnamed.sort();
    assert!(
        unnamed.is_empty(),
        "test files the README's \"What the tests prove\" does not name: {unnamed:?}"
    );
}

#[test]
fn named_paths_are_cut_where_the_path_ends() {
    assert_eq!(
        named_paths("see `tests/e2e/apply.rs` and tests/bench.sh. Also tests/bed/ and tests/x.rs:"),
        ["tests/bench.sh", "tests/e2e/apply.rs", "tests/x.rs"]
    );
}
