//! Conditions that persist across passes (Slurm unreachable, the job queue unknown) are told
//! once when they start, again only when what they say changes, and once when they end with how
//! long they held: a daemon waiting minutes for a 50,000-job queue writes three lines, not two a
//! second. A message's figures (seconds waited, counts) do not make it a new condition.

use std::time::{Duration, Instant};

/// One condition's telling.
#[derive(Debug, Default)]
pub struct Persisting {
    now: Option<Held>,
}

#[derive(Debug)]
struct Held {
    key: String,
    message: String,
    passes: u64,
    since: Instant,
}

/// What to tell about a condition after a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    Started(String),
    /// Still there, saying something else.
    Changed(String),
    /// Gone, after PASSES passes over FOR; LAST: what it said last.
    Ended {
        passes: u64,
        after: Duration,
        last: String,
    },
}

impl Persisting {
    /// The condition as this pass, at NOW, saw it (None: not there): what to tell, if anything.
    pub fn see(&mut self, message: Option<&str>, now: Instant) -> Option<Told> {
        match (message, &mut self.now) {
            (None, None) => None,
            (None, Some(_)) => {
                let h = self.now.take()?;
                Some(Told::Ended {
                    passes: h.passes,
                    after: now.saturating_duration_since(h.since),
                    last: h.message,
                })
            }
            (Some(m), None) => {
                self.now = Some(Held {
                    key: key(m),
                    message: m.to_string(),
                    passes: 1,
                    since: now,
                });
                Some(Told::Started(m.to_string()))
            }
            (Some(m), Some(h)) => {
                h.passes += 1;
                h.message = m.to_string();
                let k = key(m);
                if k == h.key {
                    return None;
                }
                h.key = k;
                Some(Told::Changed(m.to_string()))
            }
        }
    }
}

/// M with its figures taken out: "has run for 12 s" and "has run for 13 s" are one condition.
fn key(m: &str) -> String {
    let mut out = String::with_capacity(m.len());
    let mut in_number = false;
    for c in m.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

impl std::fmt::Display for Told {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Told::Started(m) => write!(f, "{m}"),
            Told::Changed(m) => write!(f, "now: {m}"),
            Told::Ended {
                passes,
                after,
                last,
            } => write!(
                f,
                "over after {passes} pass(es) in {} s (last: {last})",
                after.as_secs()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persisting_condition_is_told_when_it_starts_changes_and_ends_not_every_pass() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut p = Persisting::default();
        let passes = [
            (0, None),
            (
                1,
                Some("a read of the whole queue has run for 1 s in the background"),
            ),
            (
                2,
                Some("a read of the whole queue has run for 2 s in the background"),
            ),
            (
                3,
                Some("a read of the whole queue has run for 63 s in the background"),
            ),
            (
                4,
                Some("the last read of the whole queue failed 1 s ago (HTTP 500)"),
            ),
            (
                5,
                Some("the last read of the whole queue failed 2 s ago (HTTP 500)"),
            ),
            (9, None),
            (10, None),
        ];
        let told: Vec<Told> = passes
            .iter()
            .filter_map(|(s, m)| p.see(*m, at(*s)))
            .collect();
        assert_eq!(
            told,
            [
                Told::Started("a read of the whole queue has run for 1 s in the background".into()),
                Told::Changed("the last read of the whole queue failed 1 s ago (HTTP 500)".into()),
                Told::Ended {
                    passes: 5,
                    after: Duration::from_secs(8),
                    last: "the last read of the whole queue failed 2 s ago (HTTP 500)".into()
                },
            ]
        );
        // It can start again.
        assert!(matches!(p.see(Some("x"), at(11)), Some(Told::Started(_))));
    }
}
