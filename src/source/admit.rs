//! Admission: the one road from a cluster.yaml to something slurmops may apply — lineage (a
//! force-push), signature, the cluster this install manages, validation, the install's
//! guardrails, then render. The daemon admits every commit it fetched through it, `validate` and
//! `plan` the file they read, so a file one refuses the others refuse, for the same reason. A
//! refusal is typed: what the daemon records (`invalid` or `refused`) and says follows from it.

use std::fmt;

use super::history::Lineage;
use super::signature::AllowedSigners;
use crate::cluster::{self, ClusterFile, Guardrails, diag::Diagnostic};
use crate::render::{self, Rendered};

/// A cluster.yaml asking to be admitted.
pub struct Candidate<'a> {
    /// Its name in diagnostics (`URL@SHORT:PATH/cluster.yaml`, or a path).
    pub name: &'a str,
    pub text: &'a str,
    /// The commit it comes from, with its signature and lineage (None: a file in a work tree).
    pub commit: Option<Commit<'a>>,
}

/// The commit a candidate comes from.
pub struct Commit<'a> {
    pub id: &'a str,
    /// The raw signature and the signed data, if it is signed.
    pub signature: Option<&'a (Vec<u8>, Vec<u8>)>,
    pub lineage: &'a Lineage,
}

/// What the install admits.
#[derive(Default)]
pub struct Rules<'a> {
    /// Only commits signed by these keys (`--allowed-signers`).
    pub signers: Option<&'a AllowedSigners>,
    /// A commit not descending from the last applied one is taken (`--allow-force-push`).
    pub allow_force_push: bool,
    /// The cluster this install manages (`--cluster`): a file naming another is refused.
    pub cluster: Option<&'a str>,
    /// The install's guardrails; None: not checked (`validate` without a policy).
    pub guard: Option<&'a Guardrails>,
}

/// Why a candidate is not admitted.
#[derive(Debug)]
pub enum Refusal {
    /// Its commit does not descend from the LAST applied one, and force-pushes are not followed.
    ForcePush { commit: String, last: String },
    /// Not signed by an allowed key: why.
    Signature(String),
    /// It describes cluster THEIRS, and this install manages OURS.
    OtherCluster {
        file: String,
        ours: String,
        theirs: String,
    },
    /// It does not validate: every error, at its position.
    Invalid(Vec<Diagnostic>),
    /// The guardrails refuse it: every refusal, at its position (and the cluster it describes).
    Guardrails {
        refused: Vec<Diagnostic>,
        cluster: Box<ClusterFile>,
    },
    /// Its admission ran past the deadline (`admit_within`).
    Deadline(std::time::Duration),
    /// Its admission failed: slurmops's defect (`admit_within`).
    Failed,
}

/// A commit, owned: its id, its raw signature and signed data, and its lineage.
pub type OwnedCommit = (String, Option<(Vec<u8>, Vec<u8>)>, Lineage);

/// A candidate and the install's rules, owned: what [`admit_within`] hands to its thread.
pub struct Owned {
    pub name: String,
    pub text: String,
    pub commit: Option<OwnedCommit>,
    pub signers: Option<AllowedSigners>,
    pub allow_force_push: bool,
    pub cluster: Option<String>,
    pub guard: Option<Guardrails>,
}

impl Owned {
    fn admit(&self) -> Result<Admitted, Refusal> {
        let candidate = Candidate {
            name: &self.name,
            text: &self.text,
            commit: self.commit.as_ref().map(|(id, signature, lineage)| Commit {
                id,
                signature: signature.as_ref(),
                lineage,
            }),
        };
        let rules = Rules {
            signers: self.signers.as_ref(),
            allow_force_push: self.allow_force_push,
            cluster: self.cluster.as_deref(),
            guard: self.guard.as_ref(),
        };
        admit(&candidate, &rules)
    }
}

/// [`admit`] with a deadline: a commit whose admission (validation, the policy, rendering) runs
/// past DEADLINE is refused, and the caller goes on; the admission's thread finishes and its
/// result is dropped. Inputs are bounded so that none takes long (`cluster::budget`): the
/// deadline is the backstop that keeps a daemon's pass from waiting on one commit.
pub fn admit_within(o: Owned, deadline: std::time::Duration) -> Result<Admitted, Refusal> {
    let o = std::sync::Arc::new(o);
    let theirs = o.clone();
    match within(move || theirs.admit(), deadline) {
        Within::Done(r) => r,
        // No thread to be had (a pids limit): admitted inline, bounded by the input's bounds.
        Within::NoThread => o.admit(),
        Within::Late => Err(Refusal::Deadline(deadline)),
        Within::Failed => Err(Refusal::Failed),
    }
}

/// What [`within`] got of its work.
enum Within<T> {
    Done(T),
    Late,
    /// The work panicked.
    Failed,
    NoThread,
}

/// WORK on a thread of its own, waited for at most DEADLINE.
fn within<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
    deadline: std::time::Duration,
) -> Within<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("admission".into())
        .spawn(move || {
            let _ = tx.send(work());
        });
    if spawned.is_err() {
        return Within::NoThread;
    }
    match rx.recv_timeout(deadline) {
        Ok(t) => Within::Done(t),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Within::Late,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Within::Failed,
    }
}

/// An admitted cluster.yaml, parsed and rendered.
#[derive(Debug)]
pub struct Admitted {
    pub c: ClusterFile,
    pub rendered: Rendered,
    /// It does not descend from the last applied commit, and was taken (`--allow-force-push`):
    /// what to tell.
    pub force_pushed: Option<String>,
}

/// Admits CANDIDATE under RULES, or says why not: the first check it fails, in the order above.
pub fn admit(candidate: &Candidate<'_>, rules: &Rules<'_>) -> Result<Admitted, Refusal> {
    let mut force_pushed = None;
    if let Some(commit) = &candidate.commit {
        if let Lineage::Rewritten { last } = commit.lineage {
            let (commit, last) = (commit.id.to_string(), last.clone());
            if !rules.allow_force_push {
                return Err(Refusal::ForcePush { commit, last });
            }
            force_pushed = Some(format!(
                "{}; taken (--allow-force-push)",
                rewritten(&commit, &last)
            ));
        }
        if let Some(signers) = rules.signers {
            signers
                .verify(commit.id, commit.signature)
                .map_err(Refusal::Signature)?;
        }
    }
    let c = cluster::load(candidate.name, candidate.text).map_err(Refusal::Invalid)?;
    if let Some(ours) = rules.cluster.filter(|n| *n != c.metadata.name) {
        return Err(Refusal::OtherCluster {
            file: candidate.name.to_string(),
            ours: ours.to_string(),
            theirs: c.metadata.name.clone(),
        });
    }
    if let Some(guard) = rules.guard {
        let refused = cluster::refusals(candidate.name, candidate.text, &c, guard);
        if !refused.is_empty() {
            let cluster = Box::new(c);
            return Err(Refusal::Guardrails { refused, cluster });
        }
    }
    let rendered = render::render(&c);
    // The closed policy, on what will run: the rendered objects and Slurm files.
    if let Some(guard) = rules.guard {
        let breaches = crate::guarded::check(&c, &rendered, guard);
        if !breaches.is_empty() {
            let findings = crate::guarded::findings(&c, &breaches);
            let refused = cluster::placed_findings(candidate.name, candidate.text, findings);
            let cluster = Box::new(c);
            return Err(Refusal::Guardrails { refused, cluster });
        }
    }
    Ok(Admitted {
        c,
        rendered,
        force_pushed,
    })
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

fn rewritten(commit: &str, last: &str) -> String {
    format!(
        "commit {} does not descend from the last applied commit {}: the branch was moved back or its history rewritten (a force-push)",
        short(commit),
        short(last)
    )
}

impl Refusal {
    /// Whether the file itself is invalid (the daemon's `invalid`; every other refusal is
    /// `refused`).
    pub fn invalid(&self) -> bool {
        matches!(self, Refusal::Invalid(_))
    }

    /// Each line of what is wrong (a diagnostic per line), as the status ConfigMap's `errors`
    /// and a command's stderr carry them.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Refusal::Invalid(d) | Refusal::Guardrails { refused: d, .. } => {
                d.iter().map(ToString::to_string).collect()
            }
            other => vec![other.to_string()],
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::ForcePush { commit, last } => write!(
                f,
                "{}. Not applied; the cluster stays at {}. To go back to an older state, push a commit that reverts to it on top of {}; to follow force-pushes, run the daemon with --allow-force-push",
                rewritten(commit, last),
                short(last),
                short(last)
            ),
            Refusal::Signature(why) => f.write_str(why),
            Refusal::OtherCluster { file, ours, theirs } => write!(
                f,
                "{file}: this daemon manages cluster {ours} (--cluster), but cluster.yaml describes cluster {theirs}: point it at the right repository or path"
            ),
            Refusal::Invalid(d) => write!(f, "cluster.yaml invalid ({} error(s))", d.len()),
            Refusal::Guardrails { refused: d, .. } => {
                let lines: Vec<String> = d.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "the install's guardrails refuse it: {}",
                    lines.join("; ")
                )
            }
            Refusal::Deadline(d) => write!(
                f,
                "admitting it (validation, the install's policy, rendering) took longer than {} s: refused, nothing applied, until a new commit or a restart of the daemon; a commit should take well under a second, so make it smaller or report it",
                d.as_secs()
            ),
            Refusal::Failed => f.write_str(
                "admitting it failed (slurmops's defect: report it, with the commit): refused, nothing applied",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = include_str!("../../examples/minimal/cluster.yaml");

    fn file(text: &str) -> Candidate<'_> {
        Candidate {
            name: "cluster.yaml",
            text,
            commit: None,
        }
    }

    #[test]
    fn a_valid_file_is_admitted_rendered_and_an_invalid_one_is_invalid_with_positions() {
        let a = admit(&file(VALID), &Rules::default()).expect("admitted");
        assert!(!a.rendered.objects.is_empty());
        assert!(a.force_pushed.is_none());
        let broken = VALID.replacen("kind: SlurmCluster", "kind: SlurmClustre", 1);
        assert_ne!(broken, VALID);
        let r = admit(&file(&broken), &Rules::default()).unwrap_err();
        assert!(r.invalid(), "{r}");
        assert!(r.lines()[0].starts_with("cluster.yaml:"), "{:?}", r.lines());
    }

    #[test]
    fn another_cluster_s_file_and_a_force_push_are_refused_unless_allowed() {
        let name = admit(&file(VALID), &Rules::default())
            .unwrap()
            .c
            .metadata
            .name;
        let rules = Rules {
            cluster: Some("another"),
            ..Rules::default()
        };
        let r = admit(&file(VALID), &rules).unwrap_err();
        assert!(!r.invalid());
        assert!(
            r.to_string().contains(&format!("describes cluster {name}")),
            "{r}"
        );

        let lineage = Lineage::Rewritten {
            last: "b".repeat(40),
        };
        let pushed = Candidate {
            commit: Some(Commit {
                id: &"a".repeat(40),
                signature: None,
                lineage: &lineage,
            }),
            ..file(VALID)
        };
        let r = admit(&pushed, &Rules::default()).unwrap_err();
        assert!(matches!(r, Refusal::ForcePush { .. }), "{r}");
        assert!(r.to_string().contains("--allow-force-push"), "{r}");
        let rules = Rules {
            allow_force_push: true,
            ..Rules::default()
        };
        let a = admit(&pushed, &rules).expect("taken");
        assert!(
            a.force_pushed
                .unwrap()
                .contains("taken (--allow-force-push)")
        );
    }

    #[test]
    fn an_admission_past_its_deadline_is_refused_and_one_within_it_is_admitted() {
        let owned = || Owned {
            name: "cluster.yaml".into(),
            text: VALID.into(),
            commit: None,
            signers: None,
            allow_force_push: false,
            cluster: None,
            guard: Some(Guardrails::safe(vec!["slurm".into()])),
        };
        let slow = || std::thread::sleep(std::time::Duration::from_secs(2));
        let ms = std::time::Duration::from_millis;
        assert!(matches!(within(slow, ms(10)), Within::Late));
        assert!(matches!(within(|| 1, ms(60_000)), Within::Done(1)));
        assert!(matches!(
            within(|| panic!("a defect"), ms(60_000)),
            Within::<()>::Failed
        ));
        assert!(!Refusal::Deadline(ms(20_000)).invalid());
        assert!(
            Refusal::Deadline(ms(20_000))
                .to_string()
                .contains("took longer than 20 s")
        );
        admit_within(owned(), std::time::Duration::from_secs(60)).expect("admitted");
    }
}
