//! `validate`: a cluster.yaml admitted as the daemon admits a commit — validated, then under the
//! install's guardrails when given, then rendered.

use std::path::Path;

use super::{Error, read};
use crate::cluster::{self, ClusterFile, Guardrails};
use crate::source::Loaded;
use crate::source::admit::{Admitted, Candidate, Refusal, Rules, admit};

/// A file that was admitted.
pub struct Valid {
    pub file: String,
    pub node_sets: usize,
    pub partitions: usize,
    /// Said when its Slurm release is accepted but not proven on real daemons by the tests.
    pub note: Option<String>,
}

impl std::fmt::Display for Valid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: valid ({} NodeSets, {} partitions)",
            self.file, self.node_sets, self.partitions
        )
    }
}

/// Why a file was not admitted: the lines that say it, and whether the guardrails (not the
/// validation) refused it.
pub struct Refused {
    pub guardrails: bool,
    pub lines: Vec<String>,
}

impl From<Refused> for Error {
    fn from(r: Refused) -> Error {
        Error::Problems { lines: r.lines }
    }
}

/// The file at PATH admitted (under G when given).
pub fn validate(path: &Path, g: Option<&Guardrails>) -> Result<Valid, Error> {
    let l = read(path)?;
    let c = admitted(&l, g)?;
    let note = cluster::release::find(&c.spec.slurm_version)
        .filter(|r| !r.proven)
        .map(|r| {
            let proven: Vec<&str> = cluster::release::SUPPORTED
                .iter()
                .filter(|r| r.proven)
                .map(|r| r.version)
                .collect();
            format!(
                "note: Slurm {} is accepted on its version gates and data parsers alone; slurmops' tests run {} on real daemons",
                r.version,
                proven.join(", ")
            )
        });
    Ok(Valid {
        file: l.name,
        node_sets: c.spec.node_sets.len(),
        partitions: c.spec.partitions.len(),
        note,
    })
}

/// File L admitted as the daemon admits a commit (validated, then under the guardrails G when
/// given): its cluster, or each error or refusal at its position and a summary.
pub fn admitted(l: &Loaded, g: Option<&Guardrails>) -> Result<ClusterFile, Refused> {
    let refusal = match admit_file(l, g) {
        Ok(a) => return Ok(a.c),
        Err(r) => r,
    };
    let mut lines = refusal.lines();
    let guardrails = match refusal {
        Refusal::Invalid(d) => {
            lines.push(format!(
                "{}: {} error(s); nothing was changed",
                l.name,
                d.len()
            ));
            false
        }
        Refusal::Guardrails { refused, .. } => {
            lines.push(format!(
                "{}: {} refused by the guardrails (the daemon would refuse this commit)",
                l.name,
                refused.len()
            ));
            true
        }
        // A file without a commit or `--cluster` has no other refusal (said above if it had).
        _ => true,
    };
    Err(Refused { guardrails, lines })
}

/// File L through the daemon's admission, as a file without a commit (under G when given).
fn admit_file(l: &Loaded, g: Option<&Guardrails>) -> Result<Admitted, Refusal> {
    let candidate = Candidate {
        name: &l.name,
        text: &l.text,
        commit: None,
    };
    let rules = Rules {
        guard: g,
        ..Rules::default()
    };
    admit(&candidate, &rules)
}

/// `validate --output json`'s document: whatever the verdict, what was found.
pub struct Report {
    pub valid: bool,
    pub json: serde_json::Value,
}

/// The file at PATH admitted (under G when given), as one document; only a file that cannot be
/// read is an error.
pub fn report(path: &Path, g: Option<&Guardrails>) -> Result<Report, Error> {
    let l = read(path)?;
    let (c, errors, refused) = match admit_file(&l, g) {
        Ok(a) => (Some(a.c), Vec::new(), Vec::new()),
        Err(Refusal::Invalid(errors)) => (None, errors, Vec::new()),
        Err(Refusal::Guardrails { refused, cluster }) => (Some(*cluster), Vec::new(), refused),
        // A file without a commit or `--cluster` has no other refusal; none is valid.
        Err(_) => (None, Vec::new(), Vec::new()),
    };
    let valid = c.is_some() && refused.is_empty();
    let json = serde_json::json!({
        "version": 1,
        "file": l.name,
        "valid": valid,
        "nodeSets": c.as_ref().map(|c| c.spec.node_sets.len()),
        "partitions": c.as_ref().map(|c| c.spec.partitions.len()),
        "errors": errors,
        "refused": refused,
    });
    Ok(Report { valid, json })
}
