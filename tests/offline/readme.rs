//! The documentation claims only what the tests prove and can be navigated: every test file and
//! script the README and `docs/` name exists, every test file is named in `docs/tests.md` (which
//! says what each one shows), every relative link leads to a file and a heading that exist, and
//! the README stays an entry page.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// README.md and every page of docs/, with their paths.
fn pages() -> Vec<(PathBuf, String)> {
    let mut out = vec![Path::new(ROOT).join("README.md")];
    let mut docs: Vec<PathBuf> = ["docs", "docs/reference"]
        .iter()
        .flat_map(|d| std::fs::read_dir(Path::new(ROOT).join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out.into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
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

/// The targets of TEXT's Markdown links `[text](target)`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let tail = &rest[i + 2..];
        let Some(end) = tail.find(')') else { break };
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// The anchor GitHub (and mdBook) give heading H: lowercased, punctuation dropped, spaces as `-`.
fn slug(h: &str) -> String {
    h.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of TEXT's headings (outside code blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && l.starts_with('#') {
            out.push(slug(l.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_test_file_the_documentation_names_exists() {
    let all: String = pages().into_iter().map(|(_, t)| t).collect();
    let paths = named_paths(&all);
    assert!(paths.len() > 20, "{paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !Path::new(ROOT).join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "the documentation names files that do not exist: {missing:?}"
    );
}

#[test]
fn every_test_file_is_named_in_the_tests_page() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("docs/tests.md")).unwrap();
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
        "test files docs/tests.md (\"What the tests prove\") does not name: {unnamed:?}"
    );
}

#[test]
fn every_relative_link_leads_to_a_file_and_a_heading_that_exist() {
    let pages = pages();
    let mut broken = Vec::new();
    for (path, text) in &pages {
        for target in links(text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = match file {
                "" => path.clone(),
                f => path.parent().unwrap().join(f),
            };
            // Read as bytes: a link may lead to an image.
            let Ok(dest_bytes) = std::fs::read(&dest) else {
                if !dest.is_dir() {
                    broken.push(format!("{}: {target} (no such file)", path.display()));
                }
                continue;
            };
            if let Some(a) = anchor
                && !anchors(&String::from_utf8_lossy(&dest_bytes))
                    .iter()
                    .any(|x| x == a)
            {
                broken.push(format!("{}: {target} (no such heading)", path.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    // The README leads to every page of docs/, and the book's table of contents lists each.
    let readme = &pages[0].1;
    let summary = std::fs::read_to_string(Path::new(ROOT).join("docs/SUMMARY.md")).unwrap();
    for (path, _) in pages[1..]
        .iter()
        .filter(|(p, _)| !p.ends_with("SUMMARY.md"))
    {
        let in_docs = path.strip_prefix(Path::new(ROOT).join("docs")).unwrap();
        assert!(
            summary.contains(&format!("]({})", in_docs.display())),
            "docs/SUMMARY.md does not list {}",
            in_docs.display()
        );
        let name = path
            .strip_prefix(ROOT)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            readme.contains(&format!("]({name}")),
            "the README does not link {name}"
        );
    }
}

#[test]
fn the_readme_is_an_entry_page() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 200,
        "README.md has {lines} lines: reference belongs in docs/"
    );
    // It opens with the two commands: the main job on the example, and the test suite.
    let first_block = readme
        .split("```sh\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    assert!(
        first_block.contains("cargo run --release -- plan examples/repo"),
        "{first_block}"
    );
    assert!(
        first_block.contains("bash tests/run-all.sh"),
        "{first_block}"
    );
}

#[test]
fn links_and_headings_are_read_as_github_reads_them() {
    assert_eq!(
        named_paths("see `tests/e2e/apply.rs` and tests/bench.sh. Also tests/bed/ and tests/x.rs:"),
        ["tests/bench.sh", "tests/e2e/apply.rs", "tests/x.rs"]
    );
    assert_eq!(
        links("a [b](docs/x.md#y) and [c](https://e.example) (not a link)"),
        ["docs/x.md#y", "https://e.example"]
    );
    assert_eq!(slug(" Accounting as code"), "accounting-as-code");
    assert_eq!(
        slug(" Maintenance windows (`policy.maintenanceWindows`, `update.window`)"),
        "maintenance-windows-policymaintenancewindows-updatewindow"
    );
    assert_eq!(anchors("# A\n```\n# not\n```\n## B c\n"), ["a", "b-c"]);
}

/// The reference pages are generated from the definitions they describe; a stale one fails
/// here with the command that regenerates it.
#[test]
fn the_generated_reference_pages_are_current() {
    for (page, args) in [
        ("docs/reference/commands.md", ["man", "--markdown"]),
        (
            "docs/reference/cluster-yaml-fields.md",
            ["schema", "--markdown"],
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
        let want = String::from_utf8(out.stdout).unwrap();
        let have = std::fs::read_to_string(Path::new(ROOT).join(page)).unwrap_or_default();
        assert!(
            have == want,
            "{page} is stale: run `cargo run -- {} > {page}`",
            args.join(" ")
        );
    }
}
