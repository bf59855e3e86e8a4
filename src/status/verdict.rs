//! The daemon's result (its words in `vocab::Verdict`) and the one pure
//! transition from what just happened. The status ConfigMap's `result`, the Event recorded when
//! it changes and the `result` label of `slurmops_reconciles_total` are all spelled from it.

pub use crate::vocab::Verdict;

/// The result and the commit it is about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Result {
    pub verdict: Verdict,
    pub commit: String,
}

/// What just happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happened<'a> {
    /// The fetch failed.
    FetchFailed,
    /// The fetch brought COMMIT, which was seen before; LAST_APPLIED is the commit applied.
    Fetched {
        commit: &'a str,
        last_applied: &'a str,
    },
    Refused(&'a str),
    Invalid(&'a str),
    Suspended,
    /// The pass failed on COMMIT.
    PassFailed(&'a str),
    /// COMMIT was applied; LAST_SEEN is the newest commit fetched.
    Applied {
        commit: &'a str,
        last_seen: &'a str,
    },
    /// A pass saw COMMIT's canary failed (its rollout halted).
    CanaryHalted(&'a str),
    /// A pass saw no halted canary; LAST_APPLIED is the commit applied.
    CanaryClear {
        last_applied: &'a str,
    },
}

/// The result after H, from CUR: pure.
pub fn next(cur: &Result, h: &Happened) -> Result {
    let to = |verdict, commit: &str| Result {
        verdict,
        commit: commit.to_string(),
    };
    match *h {
        // Keep the commit the result is about; git being out of reach is the news now.
        Happened::FetchFailed => to(Verdict::FetchFailed, &cur.commit),
        Happened::Fetched {
            commit,
            last_applied,
        } if cur.verdict == Verdict::FetchFailed => match last_applied == commit {
            true => to(Verdict::Applied, &cur.commit),
            false => to(Verdict::None, &cur.commit),
        },
        Happened::Fetched { .. } => cur.clone(),
        Happened::Refused(c) => to(Verdict::Refused, c),
        Happened::Invalid(c) => to(Verdict::Invalid, c),
        Happened::Suspended => to(Verdict::Suspended, &cur.commit),
        Happened::PassFailed(c) => to(Verdict::Failed, c),
        Happened::Applied { commit, last_seen } => {
            // A newer commit that was refused, or git out of reach, stays the news: the last
            // good commit applied again (drift) does not hide it.
            let newer_news = match cur.verdict {
                Verdict::Invalid | Verdict::Refused => {
                    cur.commit != commit && cur.commit == last_seen
                }
                Verdict::FetchFailed => true,
                _ => false,
            };
            match newer_news {
                true => cur.clone(),
                false => to(Verdict::Applied, commit),
            }
        }
        Happened::CanaryHalted(c) => to(Verdict::CanaryFailed, c),
        Happened::CanaryClear { last_applied } if cur.verdict == Verdict::CanaryFailed => {
            // The halted rollout moved on (a new commit, or an operator's --resume).
            to(Verdict::Applied, last_applied)
        }
        Happened::CanaryClear { .. } => cur.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(verdict: Verdict, commit: &str) -> Result {
        Result {
            verdict,
            commit: commit.into(),
        }
    }

    #[test]
    fn transitions() {
        use Happened as H;
        use Verdict as V;
        let applied_b = H::Applied {
            commit: "b",
            last_seen: "b",
        };
        let cases: Vec<(Result, Happened, Result)> = vec![
            (r(V::None, ""), applied_b.clone(), r(V::Applied, "b")),
            (r(V::Applied, "a"), H::FetchFailed, r(V::FetchFailed, "a")),
            // Git back with the applied commit: applied again; with another: not yet.
            (
                r(V::FetchFailed, "a"),
                H::Fetched {
                    commit: "a",
                    last_applied: "a",
                },
                r(V::Applied, "a"),
            ),
            (
                r(V::FetchFailed, "a"),
                H::Fetched {
                    commit: "c",
                    last_applied: "a",
                },
                r(V::None, "a"),
            ),
            (
                r(V::Invalid, "c"),
                H::Fetched {
                    commit: "c",
                    last_applied: "a",
                },
                r(V::Invalid, "c"),
            ),
            (r(V::Applied, "a"), H::Refused("c"), r(V::Refused, "c")),
            (r(V::Applied, "a"), H::Invalid("c"), r(V::Invalid, "c")),
            (r(V::Applied, "a"), H::Suspended, r(V::Suspended, "a")),
            (r(V::Applied, "a"), H::PassFailed("b"), r(V::Failed, "b")),
            (r(V::Failed, "b"), applied_b.clone(), r(V::Applied, "b")),
            // The newest commit is invalid: re-applying the last good one keeps that the news.
            (
                r(V::Invalid, "c"),
                H::Applied {
                    commit: "a",
                    last_seen: "c",
                },
                r(V::Invalid, "c"),
            ),
            // ...unless a newer commit came since.
            (
                r(V::Invalid, "c"),
                H::Applied {
                    commit: "d",
                    last_seen: "d",
                },
                r(V::Applied, "d"),
            ),
            (
                r(V::FetchFailed, "a"),
                applied_b.clone(),
                r(V::FetchFailed, "a"),
            ),
            (
                r(V::Applied, "b"),
                H::CanaryHalted("b"),
                r(V::CanaryFailed, "b"),
            ),
            (
                r(V::CanaryFailed, "b"),
                H::CanaryClear { last_applied: "c" },
                r(V::Applied, "c"),
            ),
            (
                r(V::Invalid, "c"),
                H::CanaryClear { last_applied: "a" },
                r(V::Invalid, "c"),
            ),
        ];
        for (cur, h, want) in cases {
            assert_eq!(next(&cur, &h), want, "{cur:?} after {h:?}");
        }
    }

    #[test]
    fn every_verdict_round_trips_and_a_failed_canary_has_its_own_event() {
        for v in Verdict::ALL {
            assert_eq!(Verdict::parse(v.as_str()), v);
        }
        assert_eq!(
            Verdict::CanaryFailed.event(),
            Some((crate::vocab::EVENT_CANARY_FAILED, true))
        );
        assert_eq!(
            Verdict::Failed.event(),
            Some((crate::vocab::EVENT_APPLY_FAILED, true))
        );
        assert_eq!(Verdict::None.event(), None);
    }
}
