//! The code's shape, held by tests: the controller in files of at most 600 lines and functions
//! of at most 80 (a reader sees a stage in a screenful), and the modules importing downwards only.

use std::path::Path;

use crate::rust_files;

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 80;

/// The functions of TEXT's code (not its tests: `tests.rs` files and what follows
/// `#[cfg(test)]`) longer than MAX lines, from the `fn` line to its closing brace, as
/// (line, lines, name). The code is rustfmt's: a body ends at a `}` indented as its `fn` is.
fn long_functions(text: &str, max: usize) -> Vec<(usize, usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.trim_start().starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let head = ["pub ", "pub(crate) ", "pub(super) ", "async ", "const "]
            .iter()
            .fold(code, |c, p| c.strip_prefix(p).unwrap_or(c));
        let head = head.strip_prefix("async ").unwrap_or(head);
        let Some(rest) = head.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(j) = lines[i + 1..end].iter().position(|l| *l == close) {
            let n = j + 2;
            if n > max {
                let name = rest.split(['(', '<']).next().unwrap_or(rest);
                out.push((i + 1, n, name.to_string()));
            }
        }
    }
    out
}

#[test]
fn the_controller_s_files_and_functions_stay_a_screenful() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/controller"), &mut files);
    files.sort();
    assert!(files.len() > 20, "{files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let shown = f.strip_prefix(root).unwrap().display();
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            found.push(format!("{shown}: {n} lines (at most {MAX_FILE_LINES})"));
        }
        if f.ends_with("tests.rs") {
            continue;
        }
        for (line, n, name) in long_functions(&text, MAX_FN_LINES) {
            found.push(format!(
                "{shown}:{line}: fn {name} is {n} lines (at most {MAX_FN_LINES})"
            ));
        }
    }
    assert!(
        found.is_empty(),
        "the controller holds one concept per file and functions a reader sees whole; split by what the code does:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_length_scan_counts_a_body_to_its_closing_brace_and_skips_tests() {
    let body = |n: usize| "    x();\n".repeat(n);
    let text = format!(
        "pub async fn long(a: u8) -> u8 {{\n{}}}\n\nfn short() {{\n{}}}\n\nimpl A {{\n    pub(super) fn inner<T>(&self) {{\n{}    }}\n    fn decl();\n}}\n#[cfg(test)]\nfn in_tests() {{\n{}}}\n",
        body(79),
        body(78),
        body(80),
        body(200),
    );
    assert_eq!(
        long_functions(&text, 80),
        [(1, 81, "long".to_string()), (165, 82, "inner".to_string())]
    );
}

/// TEXT's code without its tests: up to the `#[cfg(test)]` that opens its `mod tests`, and
/// without a `#[cfg(test)] use` (a `#[cfg(test)]` helper function does not end the code).
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            let next = lines.get(i + 1).map_or("", |l| l.trim_start());
            if next.starts_with("mod ") || next.starts_with("pub mod ") {
                break;
            }
            if next.starts_with("use ") {
                i += 2;
                continue;
            }
        }
        out.push(lines[i]);
        i += 1;
    }
    out.join("\n")
}

/// The top-level modules, lowest first: each imports only from those before it (the pipeline
/// `cluster` → `render` → `plan` → `apply` → `controller` → `status`, with its edges below).
const LAYERS: [&str; 21] = [
    "vocab",
    "text",
    "net",
    "k8s",
    "events",
    "cluster",
    "render",
    "guarded",
    "source",
    "slurm",
    "accounting",
    "plan",
    "apply",
    "rollout",
    "controller",
    "status",
    "daemon",
    "import",
    "bench",
    "ops",
    "cli",
];

/// The top-level modules TEXT's code (its tests aside) names as `crate::NAME`.
fn imported_modules(text: &str) -> std::collections::BTreeSet<String> {
    let code = code_of(text);
    let code = code.as_str();
    let mut out = std::collections::BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
        rest = after;
    }
    // `use crate::{a, b::c}`: every name of the group.
    for group in code.split("crate::{").skip(1) {
        let inner = group.split('}').next().unwrap_or("");
        for item in inner.split(',') {
            let name = item.trim().split("::").next().unwrap_or("").trim();
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.insert(name.to_string());
            }
        }
    }
    out
}

#[test]
fn every_module_imports_only_from_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut found = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if ["lib", "main"].contains(&name.as_str()) {
            continue;
        }
        let Some(own) = layer(&name) else {
            found.push(format!("src/{name}: not in LAYERS (place it there)"));
            continue;
        };
        let mut files = Vec::new();
        match p.is_dir() {
            true => rust_files(&p, &mut files),
            false => files.push(p.clone()),
        }
        for f in files.iter().filter(|f| !f.ends_with("tests.rs")) {
            let text = std::fs::read_to_string(f).unwrap();
            for m in imported_modules(&text) {
                if m != name && layer(&m).is_some_and(|l| l > own) {
                    let shown = f.strip_prefix(&src).unwrap().display();
                    found.push(format!(
                        "src/{shown} imports crate::{m}, a layer above {name}"
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "modules import downwards only (LAYERS, lowest first):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_import_scan_reads_paths_and_groups_and_skips_tests() {
    let text = "use crate::render::names;\nuse crate::{plan, slurm::Node};\nfn f() { crate::status::record(); }\n#[cfg(test)]\nmod tests { use crate::cli; }";
    let found: Vec<String> = imported_modules(text).into_iter().collect();
    assert_eq!(found, ["plan", "render", "slurm", "status"]);
}

/// The modules directly inside DIR (`NAME.rs` or `NAME/`), module MODULE (`controller` or
/// `controller::features`), and, for each, those of them its code (tests aside) names:
/// `super::NAME` from `DIR/X.rs` or `DIR/X/mod.rs`, `super::super::NAME` from `DIR/X/Y.rs`, or
/// `crate::MODULE::NAME`.
fn sibling_imports(
    dir: &Path,
    module: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let children: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .filter(|n| n != "mod" && n != "tests")
        .collect();
    let mut graph = std::collections::BTreeMap::new();
    for child in &children {
        let mut files = Vec::new();
        let file = dir.join(format!("{child}.rs"));
        if file.exists() {
            files.push(file);
        }
        if dir.join(child).is_dir() {
            rust_files(&dir.join(child), &mut files);
        }
        let mut named = std::collections::BTreeSet::new();
        for f in files.iter().filter(|f| !f.ends_with("tests.rs")) {
            let text = std::fs::read_to_string(f).unwrap();
            let code = code_of(&text);
            // A comment's link (`[`super::x`]`) imports nothing.
            let code: String = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            let code = code.as_str();
            let depth = f.strip_prefix(dir).unwrap().components().count()
                - usize::from(f.ends_with("mod.rs"));
            let up = "super::".repeat(depth);
            for other in children.iter().filter(|o| *o != child) {
                let paths = [format!("{up}{other}"), format!("crate::{module}::{other}")];
                let grouped = code.split(&format!("{up}{{")).skip(1).any(|g| {
                    g.split('}').next().unwrap_or("").split(',').any(|i| {
                        let i = i.trim();
                        i == other
                            || i.starts_with(&format!("{other}::"))
                            || i.starts_with(&format!("self::{other}"))
                    })
                });
                let direct = paths.iter().any(|p| {
                    code.match_indices(p.as_str()).any(|(i, _)| {
                        // `super::x` inside `super::super::x` names another x.
                        !code[..i].ends_with("::")
                            && !code[i + p.len()..]
                                .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                    })
                });
                if grouped || direct {
                    named.insert(other.clone());
                }
            }
        }
        graph.insert(child.clone(), named);
    }
    graph
}

/// A circle in GRAPH, if there is one (its modules in order).
fn circle(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for next in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_circle_of_imports_inside_the_controller_its_features_the_daemon_or_the_cli() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for dir in ["controller", "controller/features", "daemon", "cli", "ops"] {
        let graph = sibling_imports(&src.join(dir), &dir.replace('/', "::"));
        assert!(graph.len() > 5, "{dir}: {graph:?}");
        if let Some(c) = circle(&graph) {
            panic!(
                "src/{dir}: its modules import one another in a circle: {}",
                c.join(" → ")
            );
        }
    }
}

/// Every folder under src/ (its path from src/), deepest last.
fn folders(dir: &Path, rel: &str, out: &mut Vec<String>) {
    let mut subs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    subs.sort();
    for d in subs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let rel = match rel {
            "" => name,
            _ => format!("{rel}/{name}"),
        };
        if std::fs::read_dir(&d)
            .unwrap()
            .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "rs"))
        {
            out.push(rel.clone());
        }
        folders(&d, &rel, out);
    }
}

/// Issue 80's measure of the whole source: no file of src/ over 600 lines (tests' files too), and
/// in no folder do its modules import one another in a circle (each folder's graph as
/// `sibling_imports` reads it: `super::` paths, groups, and `crate::` paths to a sibling).
#[test]
fn every_file_of_src_holds_at_most_600_lines_and_no_folder_has_a_circle_of_imports() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 200, "{}", files.len());
    let mut found = Vec::new();
    for f in &files {
        let n = std::fs::read_to_string(f).unwrap().lines().count();
        if n > MAX_FILE_LINES {
            let shown = f.strip_prefix(&src).unwrap().display();
            found.push(format!("src/{shown}: {n} lines (at most {MAX_FILE_LINES})"));
        }
    }
    let mut dirs = Vec::new();
    folders(&src, "", &mut dirs);
    assert!(dirs.len() > 20, "{dirs:?}");
    for dir in &dirs {
        if let Some(c) = circle(&sibling_imports(&src.join(dir), &dir.replace('/', "::"))) {
            found.push(format!("src/{dir}: a circle of imports: {}", c.join(" → ")));
        }
    }
    assert!(
        found.is_empty(),
        "one concept a file, at most {MAX_FILE_LINES} lines, and imports that run one way:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_circle_scan_finds_a_circle_through_groups_and_paths() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m");
    std::fs::create_dir_all(m.join("c")).unwrap();
    std::fs::write(m.join("a.rs"), "use super::{b::X, d};\n").unwrap();
    std::fs::write(m.join("b.rs"), "fn f() { crate::m::c::g(); }\n").unwrap();
    std::fs::write(m.join("c.rs"), "mod inner;\n").unwrap();
    std::fs::write(
        m.join("c/inner.rs"),
        "use super::super::a;\n#[cfg(test)]\nuse super::super::d;\n",
    )
    .unwrap();
    std::fs::write(m.join("d.rs"), "//! Beside [`super::a`].\nuse super::dd;\n").unwrap();
    // A test helper first, the code after it; `super::super::b` is not a sibling's path.
    std::fs::write(
        m.join("dd.rs"),
        "#[cfg(test)]\nfn helper() {}\nuse super::e;\nfn g() { super::super::b::f(); }\n#[cfg(test)]\nmod tests { use super::super::a; }\n",
    )
    .unwrap();
    std::fs::write(m.join("e.rs"), "").unwrap();
    let graph = sibling_imports(&m, "m");
    // `super::dd` names dd, not d; what a test imports counts for nothing.
    assert_eq!(graph["d"], ["dd".to_string()].into(), "{graph:?}");
    assert_eq!(graph["c"], ["a".to_string()].into(), "{graph:?}");
    assert_eq!(graph["dd"], ["e".to_string()].into(), "{graph:?}");
    assert_eq!(circle(&graph).unwrap(), ["a", "b", "c", "a"]);
}

/// Writes to Kubernetes or to Slurm, as code spells them.
const WRITES: [&str; 17] = [
    "Api::",
    "Patch::",
    "PostParams",
    "DeleteParams",
    "apply::apply(",
    "events::record",
    "status::record",
    "::act::",
    ".drain(",
    ".resume(",
    ".cancel(",
    ".submit(",
    ".reserve(",
    ".unreserve(",
    ".update_node(",
    ".set_topology(",
    "accounting::reconcile(",
];

/// Where the command line and the library calls under it (`src/cli`, `src/ops`) spell a write of
/// their own, as `FILE: WRITE`; `ops/slurm.rs`'s drains, resumes and accounting are the
/// operator's own Slurm tool (as `scontrol` and `sacctmgr` would make them).
fn command_writes(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&src.join("cli"), &mut files);
    rust_files(&src.join("ops"), &mut files);
    let operator = [".drain(", ".resume(", "accounting::reconcile("];
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let code = &text[..text.find("#[cfg(test)]").unwrap_or(text.len())];
        let shown = f.strip_prefix(src).unwrap().display().to_string();
        // `ops::apply::apply` is the library call of `slurmops apply`, through the pass.
        let code = code.replace("ops::apply::apply(", "ops::apply::run(");
        for w in WRITES {
            if code.contains(w) && !(shown == "ops/slurm.rs" && operator.contains(&w)) {
                found.push(format!("src/{shown}: {w}"));
            }
        }
    }
    found
}

/// Every write of every command goes through `controller::pass` (apply, rollout and its
/// decrees, sync, autoscale), behind the same fence as the daemon's: no command file or library
/// call under it writes on its own (seen failing on the `apply` without Slurm and the
/// `rollout --resume` of cli/apply.rs before the commands went through the pass).
#[test]
fn commands_write_only_through_the_controllers_pass() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = command_writes(&src);
    assert!(
        found.is_empty(),
        "commands write through controller::pass only:\n{}",
        found.join("\n")
    );
}
