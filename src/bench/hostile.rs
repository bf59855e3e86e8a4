//! A corpus of hostile cluster.yaml inputs, each at most 4 MiB (the size cluster.yaml may have):
//! what an attacker with push access to the repository, or a broken generator, could commit. The
//! test `tests/offline/hostile.rs` runs `slurmops validate` on each and bounds its time and memory; the
//! bench reports the worst case.

/// Largest input in the corpus: just under the accepted cluster.yaml size.
const BUDGET: usize = crate::spec::yaml::MAX_BYTES - 4096;

const HEAD: &str = "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata:\n  name: evil\n  namespace: slurm\n";
const SPEC: &str = "spec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {name: k, key: k}\n    jwtKey: {name: j, key: j}\n  nodeSets:\n    - name: cpu\n      replicas: 1\n  partitions:\n    - name: p\n      nodeSets: [ALL]\n";

/// Appends LINE(0), LINE(1), ... until the budget is reached.
fn fill(s: String, tail: &str, line: impl FnMut(usize) -> String) -> String {
    fill_n(s, tail, usize::MAX, line)
}

/// Appends at most N lines, within the budget (N keeps the node count under the parser's limit,
/// so that the later stages get the input too).
fn fill_n(mut s: String, tail: &str, n: usize, mut line: impl FnMut(usize) -> String) -> String {
    for i in 0..n {
        let l = line(i);
        if s.len() + l.len() + tail.len() > BUDGET {
            break;
        }
        s.push_str(&l);
    }
    s.push_str(tail);
    s
}

/// (name, cluster.yaml) for every hostile shape.
pub fn corpus() -> Vec<(&'static str, String)> {
    let mib = "x".repeat(1 << 20);
    vec![
        // 150,000 keys under one mapping (a quadratic duplicate-key check takes minutes).
        (
            "many-keys-in-one-mapping",
            fill_n(format!("{HEAD}  labels:\n"), SPEC, 150_000, |i| {
                format!("    k{i}: v\n")
            }),
        ),
        // The same as unknown fields: every one is an error with a "did you mean".
        (
            "many-unknown-fields",
            fill_n(format!("{HEAD}{SPEC}"), "", 150_000, |i| {
                format!("f{i}: v\n")
            }),
        ),
        // One anchored 1 MiB string and thousands of aliases to it (an alias bomb by bytes).
        (
            "long-scalar-times-aliases",
            fill(format!("{HEAD}  labels:\n    a: &s {mib}\n"), SPEC, |i| {
                format!("    b{i}: *s\n")
            }),
        ),
        // A mapping of 1,000 entries anchored, and aliased everywhere (an alias bomb by nodes).
        (
            "tree-times-aliases",
            fill(
                format!(
                    "{HEAD}  annotations: &t {{{}}}\n  labels:\n",
                    (0..1000)
                        .map(|i| format!("k{i}: v"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                SPEC,
                |i| format!("    b{i}: *t\n"),
            ),
        ),
        // Nested aliases: each level a list of ten of the previous (billion laughs).
        ("nested-aliases", {
            let mut s = format!("{HEAD}  labels:\n    l0: &l0 [{mib}]\n");
            for i in 1..12 {
                let p = format!("*l{}", i - 1);
                s.push_str(&format!("    l{i}: &l{i} [{}]\n", vec![p; 10].join(", ")));
            }
            s + SPEC
        }),
        // Deep flow nesting, and unclosed.
        ("deep-flow-nesting", "[".repeat(BUDGET)),
        ("deep-flow-mappings", "{a: ".repeat(BUDGET / 4)),
        // Deep block nesting (as deep as the bytes allow).
        ("deep-block-nesting", {
            let mut s = String::new();
            let mut depth = 0;
            while s.len() + depth + 4 < BUDGET.min(1 << 20) {
                s.push_str(&" ".repeat(depth));
                s.push_str("a:\n");
                depth += 1;
            }
            s
        }),
        // One line of 4 MiB: a plain scalar, a quoted one, a key.
        (
            "long-plain-line",
            format!(
                "{HEAD}  labels: {{a: {}}}\n{SPEC}",
                "y".repeat(BUDGET - 500)
            ),
        ),
        (
            "long-quoted-line",
            format!(
                "{HEAD}  labels: {{a: \"{}\"}}\n{SPEC}",
                "\\u0041".repeat((BUDGET - 500) / 6)
            ),
        ),
        ("long-key", format!("{}: 1\n", "k".repeat(BUDGET - 10))),
        // A million list items, and a million tiny flow mappings.
        (
            "many-items",
            fill(format!("{HEAD}  labels:\n"), "", |_| "  - x\n".into()),
        ),
        (
            "many-flow-maps",
            fill("a: [".into(), "]\n", |_| "{a: b},".into()),
        ),
        // Many distinct anchors, each on a growing list.
        (
            "many-anchors",
            fill("a:\n".into(), "", |i| format!("  - &a{i} [x]\n")),
        ),
        // Many NodeSets with errors, each reported with its position.
        (
            "many-invalid-node-sets",
            fill_n(
                format!("{HEAD}spec:\n  slurmVersion: \"24.11\"\n  nodeSets:\n"),
                "",
                60_000,
                |i| format!("    - {{name: Bad_{i}, replicas: -1, cpuz: 1}}\n"),
            ),
        ),
        // Many merge keys pulling in an anchored mapping.
        (
            "many-merges",
            fill(
                format!(
                    "{HEAD}  annotations: &m {{{}}}\n  x:\n",
                    (0..200)
                        .map(|i| format!("k{i}: v"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "",
                |i| format!("    - {{<<: *m, z{i}: 1}}\n"),
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_input_fits_the_accepted_size() {
        for (name, text) in super::corpus() {
            assert!(
                text.len() <= crate::spec::yaml::MAX_BYTES,
                "{name}: {}",
                text.len()
            );
            assert!(text.len() > 4096, "{name} is too small to be hostile");
        }
    }
}
