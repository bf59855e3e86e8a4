//! `plan`: what applying cluster.yaml would change, offline — between two revisions, two files,
//! or against an empty cluster.

use std::path::Path;

use super::{Error, load, read, read_revision};
use crate::cluster::Guardrails;
use crate::plan::sides::{self, Prepared};
use crate::plan::{self, Plan};
use crate::source;

/// Which two sides a plan compares.
pub struct Sides<'a> {
    /// cluster.yaml (file or directory) of the new side, unless `head`.
    pub path: &'a Path,
    /// The old side at this git revision.
    pub base: Option<&'a str>,
    /// The new side at this git revision (with `base`), not the work tree.
    pub head: Option<&'a str>,
    /// The old side from this file.
    pub from: Option<&'a Path>,
}

/// The plan between S's two sides, and what it is against in words.
pub fn plan(s: &Sides<'_>) -> Result<(Plan, String), Error> {
    let file = source::cluster_file(s.path);
    let new = match s.head {
        Some(rev) => read_revision(rev, &file)?
            .ok_or_else(|| Error::Other(format!("revision {rev} has no {}", file.display())))?,
        None => read(s.path)?,
    };
    let old = match (s.base, s.from) {
        (Some(rev), _) => read_revision(rev, &file)?,
        (None, Some(f)) => Some(read(f)?),
        (None, None) => None,
    };
    let (new_side, old_side) = sides::prepare(&new, old.as_ref(), load)?;
    let name = &new_side.cluster.metadata.name;
    let target = match (&old, s.base) {
        (Some(_), Some(rev)) => format!("cluster {name} (from {rev})"),
        (Some(o), None) => format!("cluster {name} (from {})", o.name),
        (None, Some(rev)) => format!("cluster {name} (new: {rev} has no cluster.yaml)"),
        (None, None) => format!("cluster {name} (against an empty cluster)"),
    };
    let mut p = plan::plan(old_side.as_ref().map(Prepared::side), new_side.side());
    plan::at(
        &mut p,
        &new_side.cluster,
        k8s_openapi::jiff::Timestamp::now().as_second(),
    );
    sides::discard(new_side, old_side);
    Ok((p, target))
}

/// Why the plan P cannot be applied as it is (a Slurm upgrade that skips releases), if so.
pub fn refused(p: &Plan) -> Option<&str> {
    p.slurm.upgrade.as_ref()?.refused.as_deref()
}

/// Refuses, as the daemon would, the cluster.yaml a plan would apply (at PATH, or at revision
/// HEAD) when the guardrails G refuse it; one that does not load is the plan's to report.
pub fn guard(path: &Path, head: Option<&str>, g: &Guardrails) -> Result<(), Error> {
    let file = source::cluster_file(path);
    let l = match head {
        Some(rev) => read_revision(rev, &file).ok().flatten(),
        None => read(path).ok(),
    };
    let Some(l) = l else { return Ok(()) };
    match super::validate::admitted(&l, Some(g)) {
        Err(r) if r.guardrails => Err(r.into()),
        _ => Ok(()),
    }
}
