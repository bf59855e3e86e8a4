//! A corpus of hostile cluster.yaml inputs, each at most 4 MiB (the size cluster.yaml may have):
//! what an attacker with push access to the repository, or a broken generator, could commit. The
//! test `tests/offline/hostile.rs` runs `slurmops validate` on each and bounds its time and memory; the
//! bench reports the worst case.

/// Largest input in the corpus: just under the accepted cluster.yaml size.
const BUDGET: usize = crate::cluster::yaml::MAX_BYTES - 4096;

const HEAD: &str = "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata:\n  name: evil\n  namespace: slurm\n";
const SPEC: &str = "spec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {name: k, key: k}\n    jwtKey: {name: j, key: j}\n  nodeSets:\n    - name: cpu\n      replicas: 1\n  partitions:\n    - name: p\n      nodeSets: [ALL]\n";

/// A cluster's head, valid up to its NodeSets (`spec.nodeSets` follows).
const CLUSTER: &str = "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata:\n  name: evil\n  namespace: slurm\nspec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {name: k, key: k}\n    jwtKey: {name: j, key: j}\n";

/// A cluster's head the install's default guardrails take (its Secrets are the ones the install
/// assigns), valid up to its NodeSets: what passes validation is rendered.
const GUARDED: &str = "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata:\n  name: evil\n  namespace: slurm\nspec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {name: slurm-auth, key: k}\n    jwtKey: {name: slurm-jwt, key: j}\n";
/// One partition of every NodeSet.
const PARTITION: &str = "  partitions:\n    - name: p\n      nodeSets: [ALL]\n";

/// `nodeSets:` with N NodeSets `set-I` of one replica, each with EXTRA fields (`, features: [f]`).
fn node_sets(n: usize, extra: &str) -> String {
    let mut s = String::from("  nodeSets:\n");
    for i in 0..n {
        s.push_str(&format!("    - {{name: set-{i}, replicas: 1{extra}}}\n"));
    }
    s
}

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
        // What validation makes of a file the parser accepts (each within its node limit, and
        // valid in structure, so that the semantic checks run). Many NodeSets and many
        // references to none of them: a hint per reference named every NodeSet (a 2.3 MB file
        // of this shape took validation past 3.4 GB in 10 minutes).
        (
            "node-sets-times-bad-references",
            fill(
                format!(
                    "{CLUSTER}{}  partitions:\n    - name: p\n      nodeSets:\n",
                    node_sets(20_000, "")
                ),
                "",
                |i| format!("        - nosuch-{i}\n"),
            ),
        ),
        // The same within the NodeSets slurmops takes: every reference looked up, every hint
        // a comparison with each NodeSet.
        (
            "bad-references-to-a-thousand-node-sets",
            fill(
                format!(
                    "{CLUSTER}{}  partitions:\n    - name: p\n      nodeSets:\n",
                    node_sets(1_000, "")
                ),
                "",
                |i| format!("        - set-{i}x\n"),
            ),
        ),
        // One cycle through every account: each account's walk up named the whole cycle.
        ("an-account-cycle-through-every-account", {
            let n = 60_000;
            fill_n(
                format!(
                    "{CLUSTER}{}  partitions: [{{name: p, nodeSets: [ALL]}}]\n  accounting:\n    enabled: true\n    accounts:\n",
                    node_sets(1, "")
                ),
                "",
                n,
                |i| format!("      - {{name: a{i}, parent: a{}}}\n", (i + 1) % n),
            )
        }),
        // Users charging accounts that do not exist, among many that do.
        ("users-of-unknown-accounts", {
            let mut s = format!(
                "{CLUSTER}{}  partitions: [{{name: p, nodeSets: [ALL]}}]\n  accounting:\n    enabled: true\n    accounts:\n",
                node_sets(1, "")
            );
            for i in 0..20_000 {
                s.push_str(&format!("      - {{name: acct-{i}}}\n"));
            }
            s.push_str("    users:\n");
            fill_n(s, "", 40_000, |i| {
                format!("      - {{name: u{i}, accounts: [{{name: acct-{i}x}}]}}\n")
            })
        }),
        // Every check against every NodeSet, none in a partition: a finding per pair.
        ("checks-times-node-sets", {
            let mut s = format!("{CLUSTER}{}", node_sets(1_000, ", features: [f]"));
            s.push_str("  partitions:\n    - {name: p, nodeSets: [nosuch]}\n  policy:\n    activeChecks:\n");
            for i in 0..100 {
                s.push_str(&format!(
                    "      - {{name: c{i}, script: 'true', onRegister: true, features: [f]}}\n"
                ));
            }
            s
        }),
        // What validation and render make of a file (issue 76): within the parser's limits,
        // each was past 100 MiB or quadratic before the cost was bounded before typing and
        // rendering. 250 KiB of annotations put on each of the 2,032 objects of 1,000
        // NodeSets (550 MB).
        (
            "metadata-on-every-object",
            format!(
                "{HEAD}  annotations:\n    a: {}\n{}{}{PARTITION}",
                "x".repeat(250 << 10),
                &GUARDED[HEAD.len()..],
                node_sets(1_000, "")
            ),
        ),
        // Volumes of a name alone: a few bytes of text, kilobytes each typed (1.1 GB).
        (
            "bare-volumes",
            // 40,000 (a megabyte; 270 MB typed before the budget): the parser's tree of the
            // 4 MiB version alone took 89 of the test's 100 MiB.
            fill_n(
                format!(
                    "{GUARDED}{PARTITION}  nodeSets:\n    - name: cpu\n      replicas: 1\n      volumes:\n"
                ),
                "",
                40_000,
                |i| format!("        - {{name: v{i}}}\n"),
            ),
        ),
        // A sidecar mounting each of the NodeSet's volumes: each mount was looked for among
        // the volumes (15 s and 370 MB).
        ("sidecar-mounts-times-volumes", {
            let n = 45_000;
            let mut s = format!(
                "{GUARDED}{PARTITION}  nodeSets:\n    - name: cpu\n      replicas: 1\n      volumes:\n"
            );
            for i in 0..n {
                s.push_str(&format!("        - {{name: v{i}, emptyDir: {{}}}}\n"));
            }
            s.push_str("      podTemplate:\n        extraContainers:\n          - name: side\n            image: ghcr.io/slinkyproject/side:1\n            volumeMounts:\n");
            fill_n(s, "", n, |i| {
                format!("              - {{name: v{}, mountPath: /m}}\n", n - 1 - i)
            })
        }),
        // Two long lists of NodeSets, one per topology: each of the tree's was looked for among
        // the block's (past a minute).
        ("block-times-tree-node-sets", {
            let n = 110_000;
            let mut s = format!(
                "{}{}{PARTITION}  topology:\n    block:\n      nodeLabel: nvidia.com/gpu.clique\n      blockSize: 18\n      blocks: [b1]\n      nodeSets:\n",
                GUARDED.replace("24.11", "25.11"),
                node_sets(1, "")
            );
            for i in 0..n {
                s.push_str(&format!("        - b{i}\n"));
            }
            s.push_str("    tree:\n      nodeLabel: rack\n      switches: [s1]\n      nodeSets:\n");
            fill_n(s, "", n, |i| format!("        - t{i}\n"))
        }),
        // slurm.conf settings, each merged into the generated ones by comparison (minutes).
        (
            "slurm-conf-many-keys",
            fill_n(
                format!(
                    "{GUARDED}{}{PARTITION}  controller:\n    slurmConf:\n",
                    node_sets(1, "")
                ),
                "",
                150_000,
                |i| format!("      K{i}: v\n"),
            ),
        ),
        // A list setting of many items, each merged into the generated items (45 s).
        (
            "slurm-conf-long-list",
            fill(
                format!(
                    "{GUARDED}{}{PARTITION}  controller:\n    slurmConf:\n      SlurmctldParameters:\n",
                    node_sets(1, "")
                ),
                "",
                |i| format!("        - a{i}\n"),
            ),
        ),
        // A TRES list of many items, each compared with those before it (minutes).
        (
            "tres-many-items",
            fill(
                format!(
                    "{GUARDED}{}{PARTITION}  accounting:\n    enabled: true\n    database: {{host: db, user: u, password: {{name: p, key: p}}}}\n    qos:\n      - name: q\n        limits:\n          maxTRESPerUser: \"cpu=1",
                    node_sets(1, "")
                ),
                "\"\n",
                |i| format!(",gres/g{i}=1"),
            ),
        ),
        // Config files and scripts: each file was looked for among the scripts (30 s).
        ("config-files-times-scripts", {
            let n = 45_000;
            let mut s = format!(
                "{GUARDED}{}{PARTITION}  controller:\n    configFiles:\n",
                node_sets(1, "")
            );
            for i in 0..n {
                s.push_str(&format!("      f{i}.conf: {{content: x}}\n"));
            }
            s.push_str("    scripts:\n      prolog:\n");
            fill_n(s, "", n, |i| {
                format!("        - {{name: s{i}, content: \"#!\"}}\n")
            })
        }),
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
                text.len() <= crate::cluster::yaml::MAX_BYTES,
                "{name}: {}",
                text.len()
            );
            assert!(text.len() > 4096, "{name} is too small to be hostile");
        }
    }
}
