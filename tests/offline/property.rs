//! A property test over a time budget, run in CI in place of the cargo-fuzz target (`fuzz/`:
//! libFuzzer needs a nightly toolchain, which this machine cannot download). For
//! `PROPERTY_SECONDS` (default 20) it loads mutants of the examples — bytes flipped, lines
//! duplicated, cut or swapped, YAML syntax (anchors, aliases, merge keys, flow brackets, tags,
//! quotes, deep nesting) spliced in at random places — and holds three properties for every one:
//! `cluster::load` returns (never panics), a failure is a list of diagnostics that each have a
//! position, and what loads also renders and plans without a panic. A failing input is written to
//! `target/property-failure.yaml` with the seed that made it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// xorshift64*: deterministic from a seed, so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const SPLICES: &[&str] = &[
    "&a ",
    "*a",
    "<<: *a\n",
    "[",
    "]",
    "{",
    "}",
    "- ",
    ": ",
    "\"",
    "'",
    "!!binary ",
    "!!map ",
    "? ",
    "|\n",
    ">-\n",
    "#",
    "\n",
    "\t",
    "---\n",
    "...\n",
    "~",
    "null",
    "-1",
    "1e309",
    "99999999999999999999",
    "0x1F",
    ".inf",
    "true",
    "\u{feff}",
    "\u{0}",
    "é",
    "%YAML 1.2\n",
    "&b [*a, *a, *a, *a]",
    "{<<: [*a, *b]}",
    "        ",
    "replicas: ",
    "nodeSets: ",
    "name: ",
];

fn mutate(rng: &mut Rng, base: &str) -> String {
    let mut s = base.to_string();
    for _ in 0..1 + rng.below(8) {
        let at = {
            let mut i = rng.below(s.len() + 1);
            while !s.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        match rng.below(6) {
            0 => s.insert_str(at, SPLICES[rng.below(SPLICES.len())]),
            1 => {
                let end = (at + rng.below(64)).min(s.len());
                if s.is_char_boundary(end) {
                    s.replace_range(at..end, "");
                }
            }
            2 => {
                let lines: Vec<&str> = s.lines().collect();
                let i = rng.below(lines.len());
                let mut out: Vec<&str> = lines.clone();
                for _ in 0..rng.below(50) {
                    out.insert(i, lines[i.min(lines.len().saturating_sub(1))]);
                }
                s = out.join("\n");
            }
            3 => {
                let mut lines: Vec<&str> = s.lines().collect();
                if lines.len() > 1 {
                    let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                    lines.swap(a, b);
                }
                s = lines.join("\n");
            }
            4 => {
                let depth = rng.below(200);
                let open = if rng.below(2) == 0 { "[" } else { "{a: " };
                s.insert_str(at, &open.repeat(depth));
            }
            _ => {
                let mut bytes = s.into_bytes();
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
                s = String::from_utf8_lossy(&bytes).into_owned();
            }
        }
    }
    s
}

#[test]
fn any_mutant_of_the_examples_loads_or_fails_with_positions_never_panics() {
    let budget = std::env::var("PROPERTY_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(20), Duration::from_secs);
    let seed = std::env::var("PROPERTY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    let bases: Vec<String> = [
        "examples/repo/cluster.yaml",
        "examples/minimal/cluster.yaml",
    ]
    .iter()
    .map(|p| std::fs::read_to_string(p).unwrap())
    .collect();
    let base_cluster = slurmops::cluster::load("base", &bases[1]).unwrap();
    let base_rendered = slurmops::render::render(&base_cluster);
    let mut rng = Rng(seed);
    let (mut tried, mut loaded) = (0u64, 0u64);
    let started = Instant::now();
    while started.elapsed() < budget {
        let base = &bases[rng.below(bases.len())];
        let text = mutate(&mut rng, base);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            match slurmops::cluster::load("m.yaml", &text) {
                Ok(c) => {
                    let r = slurmops::render::render(&c);
                    let _ = slurmops::plan::plan(
                        Some(slurmops::plan::Side {
                            cluster: &base_cluster,
                            rendered: &base_rendered,
                        }),
                        slurmops::plan::Side {
                            cluster: &c,
                            rendered: &r,
                        },
                    );
                    Ok(())
                }
                Err(diags) if diags.is_empty() => Err("an error without a diagnostic".to_string()),
                Err(diags) => match diags.iter().find(|d| d.line == 0 || d.col == 0) {
                    Some(d) => Err(format!("a diagnostic without a position: {d}")),
                    None => Err(String::new()),
                },
            }
        }));
        tried += 1;
        let problem = match outcome {
            Err(_) => Some("panicked".to_string()),
            Ok(Err(p)) if !p.is_empty() => Some(p),
            Ok(Ok(())) => {
                loaded += 1;
                None
            }
            Ok(Err(_)) => None,
        };
        if let Some(p) = problem {
            let out =
                std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("property-failure.yaml");
            std::fs::write(&out, &text).unwrap();
            panic!(
                "seed {seed}, input {tried}: {p}; the input is in {}",
                out.display()
            );
        }
    }
    eprintln!(
        "{tried} mutants in {budget:?} (seed {seed}): {loaded} loaded and rendered, the rest refused with positions"
    );
    assert!(tried > 100, "only {tried} inputs tried");
}
