//! Hostile cluster.yaml inputs (the corpus of `slurmops::bench::hostile`, each ≤ 4 MiB): `slurmops
//! validate` answers every one, plain and under the install's default guardrails (`--guardrails`,
//! the daemon's road: validated, guarded, rendered) — valid, or errors with a position, exit 1 —
//! without a panic, within
//! a hang guard, and with a peak RSS under 100 MiB (measured by GNU time, on the tests' debug build,
//! whole process included). How fast each is answered on a release build is the bench's figure
//! (`hostile input worst case`), not a timed test.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Peak resident memory any input may cost (the largest took 184 MiB before the YAML tree was
/// laid out small and used up as its JSON is made, and the secret scan read the spec piecewise).
const MAX_RSS_KIB: u64 = 100 * 1024;
/// Far above the 2 s a release build takes for the worst input: only catches a hang or a
/// quadratic blow-up (150,000 keys took minutes before duplicate keys were found in O(n)).
const HANG_GUARD: Duration = Duration::from_secs(60);

struct Answer {
    code: Option<i32>,
    stderr: String,
    rss_kib: u64,
    took: Duration,
}

/// `slurmops validate FILE`, with the install's default (guarded) guardrails when GUARDED: the
/// road a commit takes in the daemon (validated, guarded, rendered).
fn validate(file: &std::path::Path, guarded: bool) -> Answer {
    let report = file.with_extension("time");
    let started = Instant::now();
    let mut child = Command::new("/usr/bin/time")
        .arg("-o")
        .arg(&report)
        .args(["-f", "%M"])
        .arg(env!("CARGO_BIN_EXE_slurmops"))
        .arg("validate")
        .args(guarded.then_some("--guardrails"))
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("GNU time (/usr/bin/time, Debian package time) runs");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).ok();
        s
    });
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > HANG_GUARD {
            child.kill().ok();
            child.wait().ok();
            panic!("{}: no answer within {HANG_GUARD:?}", file.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let stderr = reader.join().unwrap();
    let time = std::fs::read_to_string(&report).unwrap_or_default();
    // GNU time reports "Command exited with non-zero status 1" before the figure.
    let rss_kib = time
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
        .unwrap_or_else(|| panic!("no RSS from GNU time: {time:?}"));
    Answer {
        code,
        stderr,
        rss_kib,
        took,
    }
}

#[test]
fn hostile_inputs_are_answered_in_bounded_memory_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let mut worst = (String::new(), 0u64, Duration::ZERO);
    for (name, text) in slurmops::bench::hostile::corpus() {
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, &text).unwrap();
        for guarded in [false, true] {
            let a = validate(&file, guarded);
            let name = if guarded {
                format!("{name} (--guardrails)")
            } else {
                name.to_string()
            };
            eprintln!(
                "{name}: {} bytes, exit {:?}, {:.2} s, {} MiB",
                text.len(),
                a.code,
                a.took.as_secs_f64(),
                a.rss_kib / 1024
            );
            assert!(
                matches!(a.code, Some(0 | 1)),
                "{name}: exit {:?} (a panic or a signal): {}",
                a.code,
                a.stderr.chars().take(2000).collect::<String>()
            );
            if a.code == Some(1) {
                // Every error names the file and a position.
                let first = a.stderr.lines().next().unwrap_or_default();
                assert!(
                    first.starts_with(&format!("{}:", file.display())) && first.contains("error"),
                    "{name}: first error line {first:?}"
                );
            }
            assert!(
                a.rss_kib < MAX_RSS_KIB,
                "{name}: peak RSS {} MiB (limit {} MiB)",
                a.rss_kib / 1024,
                MAX_RSS_KIB / 1024
            );
            if a.rss_kib > worst.1 {
                worst = (name.to_string(), a.rss_kib, a.took);
            }
        }
    }
    eprintln!("worst RSS: {} ({} MiB)", worst.0, worst.1 / 1024);
}
