//! Generated cluster.yaml files against the install's default policy (`guarded`:
//! `Guardrails::safe(["slurm"])`), with an oracle of this test's own.
//!
//! Generator: a seeded PRNG (splitmix64) walks `schema/cluster.schema.json` (draft-07:
//! `definitions`, `$ref`, `allOf`/`anyOf`/`oneOf`, `["T", "null"]` types, `additionalProperties`
//! maps, `enum`, `const`, `x-kubernetes-int-or-string`) and generates instances of a sub-schema:
//! objects get their required properties and a random few others, arrays and maps 0 to 3
//! entries, strings come from pools that mix plausible values with hostile ones (PATH,
//! LD_PRELOAD, /etc/slurm, "a\nb", "x=y", images outside the allowed repositories, ...),
//! recursion is cut at a depth. Each case starts from examples/minimal or examples/quickstart and
//! replaces or inserts 1 to 4 subtrees, at hand-picked positions (pod templates, volumes and
//! their mounts, slurmConf, configFiles, partitions' options, topology, labels, ...) or at a
//! position reached by a random walk down the schema; the document goes to `admit` as JSON text
//! (YAML is a superset).
//!
//! Admission: `admit(file, Rules { guard: Some(Guardrails::safe(["slurm"])) })`. Each case is
//! admitted, refused (the guardrails or another check) or invalid; a panic anywhere is a failure,
//! and at least 10% must be admitted (so that the oracle sees something).
//!
//! Oracle (no slurmops policy code): every admitted rendering is held to Kubernetes' Pod Security
//! "baseline" and to what the default policy allows — no hostPath and no volume type but
//! emptyDir, configMap, secret, persistentVolumeClaim and projected (configMap and secret
//! sources); no dataSource, dataSourceRef or volumeName in volumeClaimTemplates; no host
//! namespaces or hostPort; privileged and capabilities beyond baseline only for a worker's
//! `slurmd` container; no Unconfined seccomp or AppArmor, procMount, unsafe sysctl, SELinux type
//! or hostProcess; no serviceAccountName; env names that are identifiers and not loader, shell,
//! Slurm, MPI or GPU runtime variables; no envFrom; secret and ConfigMap keys only from those
//! slurmops uses; no mount over system or Slurm directories, no subPathExpr or escaping subPath;
//! `command[0]` absolute, and no command, args or exec handler on a container slurmops does not
//! render; images only under ghcr.io/slinkyproject/ or docker.io/library/mariadb; slurmops'
//! own labels unchanged; in the Slurm files, no program, address, user, plugin or include key,
//! no SPANK plugin line, no line that is not `Key=Value`, and topology.yaml only in the shapes
//! its template writes.
//!
//! What slurmops renders on its own is allowed where it is the same: the baseline is the
//! rendering of the ADMITTED file with its free-form parts removed (pod templates, volumes,
//! volume mounts and claim templates, container security contexts, service accounts, slurmConf,
//! slurmdbdConf, partitions' options, configFiles, scripts, the health check, metadata's labels
//! and annotations). Rendering the example the case started from instead is wrong as soon as a
//! case turns on something the example lacks (accounting, login sets, a second NodeSet): their
//! containers, env and mounts would all be reported.
//!
//! Reproduce a case: `SLURMOPS_GEN_SEED=<seed> cargo test --test offline generated --
//! --nocapture` (the seed is printed with every finding; that one case runs). More cases:
//! `SLURMOPS_GEN_CASES=100000 cargo test --release --test offline generated`. With
//! `SLURMOPS_GEN_DEBUG=1` every refusal's first lines, every violation and the changed paths of
//! every admitted case are printed (to see what the generator reaches).
//!
//! Layout: `schema.rs` walks the schema and generates values from `pools.rs` (with `rng.rs`);
//! `cases.rs` makes one case (bases, targets, repair) with `paths.rs`; `baseline.rs` is the
//! stripped file's rendering; `oracle.rs` judges an admitted rendering, with `oracle_pods.rs`,
//! `oracle_containers.rs`, `oracle_files.rs`, the policy as it knows it (`oracle_rules.rs`) and
//! `rendered.rs` to read objects; this file runs the cases, counts and reports them.

mod baseline;
mod cases;
mod oracle;
mod oracle_containers;
mod oracle_files;
mod oracle_pods;
mod oracle_rules;
mod paths;
mod pools;
mod rendered;
mod rng;
mod schema;

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use serde_json::Value as Json;
use slurmops::cluster::{self, Guardrails};
use slurmops::render;
use slurmops::source::admit::{Candidate, Rules, admit};

use baseline::{Baseline, strip};
use cases::{Case, generate_case};
use oracle::{Violation, oracle};
use schema::Schema;

/// Cases run by default (about 20-40 s of a debug build on a loaded 2-core machine).
const DEFAULT_CASES: u64 = 4000;
/// The first seed of the default sequence (case i runs seed DEFAULT_SEED + i).
const DEFAULT_SEED: u64 = 0x5EED_0000;
/// The namespace the install applies into.
const NAMESPACE: &str = "slurm";

enum Outcome {
    Admitted(Vec<Violation>),
    Refused,
    Invalid,
    /// The baseline did not load: the case is counted, not judged.
    NoBaseline(String),
    Panic(String),
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(a panic without a message)".into())
}

fn run_case(text: &str, doc: &Json, guard: &Guardrails) -> Outcome {
    let rules = Rules {
        guard: Some(guard),
        ..Rules::default()
    };
    let candidate = Candidate {
        name: "cluster.yaml",
        text,
        commit: None,
    };
    let admitted = match catch_unwind(AssertUnwindSafe(|| admit(&candidate, &rules))) {
        Err(p) => return Outcome::Panic(format!("admit panicked: {}", panic_text(p))),
        Ok(Err(r)) => {
            if std::env::var_os("SLURMOPS_GEN_DEBUG").is_some() {
                for l in r.lines().iter().take(3) {
                    eprintln!("{} {l}", if r.invalid() { "INVALID" } else { "REFUSED" });
                }
            }
            return if r.invalid() {
                Outcome::Invalid
            } else {
                Outcome::Refused
            };
        }
        Ok(Ok(a)) => a,
    };
    let stripped = serde_json::to_string_pretty(&strip(doc)).unwrap();
    let baseline = match catch_unwind(|| {
        cluster::load("baseline.yaml", &stripped).map(|c| render::render(&c))
    }) {
        Err(p) => {
            return Outcome::Panic(format!(
                "rendering the baseline panicked: {}",
                panic_text(p)
            ));
        }
        Ok(Err(d)) => {
            let lines: Vec<String> = d.iter().take(3).map(ToString::to_string).collect();
            return Outcome::NoBaseline(lines.join("; "));
        }
        Ok(Ok(r)) => Baseline::of(&r),
    };
    Outcome::Admitted(oracle(&admitted.rendered, &baseline))
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => v.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

#[test]
fn no_admitted_generated_file_renders_beyond_the_default_policy() {
    let schema = Schema::load();
    let bases = cases::bases();
    for (name, doc) in &bases {
        assert_eq!(
            doc.pointer("/metadata/namespace").and_then(Json::as_str),
            Some(NAMESPACE),
            "{name} is in namespace {NAMESPACE}"
        );
    }
    let guard = Guardrails::safe(vec![NAMESPACE.to_string()]);
    let one = env_u64("SLURMOPS_GEN_SEED");
    let cases =
        env_u64("SLURMOPS_GEN_CASES").unwrap_or(if one.is_some() { 1 } else { DEFAULT_CASES });
    let first = one.unwrap_or(DEFAULT_SEED);

    let started = Instant::now();
    let mut tally = Tally {
        debug: std::env::var_os("SLURMOPS_GEN_DEBUG").is_some(),
        ..Tally::default()
    };
    for i in 0..cases {
        let seed = first.wrapping_add(i);
        let case = generate_case(&schema, &bases, seed);
        let text = serde_json::to_string_pretty(&case.doc).unwrap();
        let outcome = run_case(&text, &case.doc, &guard);
        tally.count(seed, &case, &text, outcome);
    }
    tally.report(cases, first, started.elapsed().as_secs_f64());
}

/// The cases' outcomes counted, and the failures to show.
#[derive(Default)]
struct Tally {
    debug: bool,
    admitted: u64,
    refused: u64,
    invalid: u64,
    no_baseline: u64,
    /// Admitted cases beyond the policy, and panics.
    failing: u64,
    /// The cases shown in full: the first of each class, 12 at most.
    failures: Vec<String>,
    shown_classes: BTreeSet<&'static str>,
    /// class -> (count, first example)
    classes: BTreeMap<&'static str, (u64, String)>,
    no_baseline_example: Option<String>,
}

/// A case in full: its seed, its base, what changed, the document.
fn shown(seed: u64, case: &Case, text: &str) -> String {
    format!(
        "seed {seed:#x} (SLURMOPS_GEN_SEED={seed:#x}), from {}, changed:\n  {}\ncluster.yaml:\n{text}",
        case.base,
        case.changes.join("\n  ")
    )
}

impl Tally {
    /// Counts the OUTCOME of the case of SEED (document TEXT).
    fn count(&mut self, seed: u64, case: &Case, text: &str, outcome: Outcome) {
        match outcome {
            Outcome::Refused => self.refused += 1,
            Outcome::Invalid => self.invalid += 1,
            Outcome::NoBaseline(why) => {
                self.no_baseline += 1;
                self.no_baseline_example
                    .get_or_insert_with(|| format!("seed {seed:#x}: {why}"));
            }
            Outcome::Panic(why) => {
                self.failing += 1;
                self.failures
                    .push(format!("PANIC: {why}\n{}", shown(seed, case, text)));
            }
            Outcome::Admitted(vs) => {
                self.admitted += 1;
                if self.debug {
                    for c in &case.changes {
                        eprintln!("ADMITTED-CHANGE {}", c.split(" = ").next().unwrap_or(""));
                    }
                }
                if !vs.is_empty() {
                    self.violations(seed, case, text, &vs);
                }
            }
        }
    }

    /// Counts the violations VS of an admitted case, and keeps it to show if it has a class not
    /// seen before.
    fn violations(&mut self, seed: u64, case: &Case, text: &str, vs: &[Violation]) {
        self.failing += 1;
        let new_class = vs.iter().any(|x| !self.shown_classes.contains(x.class));
        for x in vs {
            if self.debug {
                eprintln!(
                    "VIOLATION [{}] seed {seed:#x}: {} {} = {}",
                    x.class, x.object, x.field, x.value
                );
            }
            self.shown_classes.insert(x.class);
            let e = self.classes.entry(x.class).or_insert((0, String::new()));
            e.0 += 1;
            if e.1.is_empty() {
                e.1 = format!("seed {seed:#x}: {} {} = {}", x.object, x.field, x.value);
            }
        }
        if new_class && self.failures.len() < 12 {
            let lines: Vec<String> = vs
                .iter()
                .take(20)
                .map(|x| {
                    format!(
                        "  [{}] seed {seed:#x}: {} {} = {}",
                        x.class, x.object, x.field, x.value
                    )
                })
                .collect();
            self.failures.push(format!(
                "ADMITTED with {} violation(s):\n{}\n{}",
                vs.len(),
                lines.join("\n"),
                shown(seed, case, text)
            ));
        }
    }

    /// Prints the counts (on success too: seen with --nocapture) and the failures, and fails
    /// the test on any, or when too few of CASES were admitted.
    fn report(&self, cases: u64, first: u64, secs: f64) {
        let pct = |n: u64| 100.0 * n as f64 / cases.max(1) as f64;
        let mut summary = format!(
            "{cases} generated case(s) from seed {first:#x} in {secs:.1}s: admitted {} ({:.1}%), refused {} ({:.1}%), invalid {} ({:.1}%), baseline not loadable {}; {} admitted case(s) beyond the default policy or panicking",
            self.admitted,
            pct(self.admitted),
            self.refused,
            pct(self.refused),
            self.invalid,
            pct(self.invalid),
            self.no_baseline,
            self.failing,
        );
        if let Some(e) = &self.no_baseline_example {
            summary.push_str(&format!("\nfirst case whose baseline did not load: {e}"));
        }
        for (class, (n, example)) in &self.classes {
            summary.push_str(&format!("\n  {class}: {n}, e.g. {example}"));
        }
        eprintln!("{summary}");
        for f in &self.failures {
            eprintln!("\n{f}");
        }
        assert!(
            self.failures.is_empty(),
            "{summary}\n\n(first failing cases above; reproduce one with SLURMOPS_GEN_SEED)"
        );
        if cases >= 100 {
            assert!(
                pct(self.admitted) >= 10.0,
                "only {} of {cases} generated files were admitted: the generator tests too little\n{summary}",
                self.admitted
            );
        }
    }
}
