//! Whether a fetched tip descends from the last applied commit. A branch moved back to an older
//! commit (a force-push, even to a commit that was signed once) would roll the cluster back
//! without a word: removed users and QOS, old images with their vulnerabilities. The daemon
//! refuses such a tip unless the install allows force-pushes.
//!
//! The walk reads the commit objects' own `parent` lines: in a shallow mirror libgit2 hides the
//! parents of the commits at the shallow boundary, and the mirror is fetched at depth 1. A parent
//! that the mirror lacks is reported so that the caller can fetch the history once and walk
//! again. The walk is bounded in commits.

use std::collections::{HashSet, VecDeque};

use git2::{Odb, Oid};

/// Commits a walk reads at most: a tip this far ahead of the last applied commit is taken as not
/// descending from it.
pub const MAX_COMMITS: usize = 100_000;

/// Where a fetched tip stands to the last applied commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lineage {
    /// Nothing was applied yet, or the tip is the last applied commit.
    Unchecked,
    /// The tip has the last applied commit among its ancestors.
    Descends,
    /// It has not (the branch was moved back or its history rewritten), or not within
    /// [`MAX_COMMITS`].
    Rewritten { last: String },
}

/// What a walk from a tip found.
#[derive(Debug, PartialEq, Eq)]
pub enum Walk {
    Found,
    NotFound,
    /// A parent is not in the object database (a shallow mirror): fetch the history, walk again.
    Missing,
    /// More than MAX commits, the target not among them.
    TooFar,
}

/// Walks from TIP through the parents recorded in each commit object, looking for TARGET.
pub fn walk(odb: &Odb, tip: Oid, target: Oid, max: usize) -> Result<Walk, git2::Error> {
    let mut seen = HashSet::from([tip]);
    let mut queue = VecDeque::from([tip]);
    let mut missing = false;
    while let Some(id) = queue.pop_front() {
        if id == target {
            return Ok(Walk::Found);
        }
        if seen.len() > max {
            return Ok(Walk::TooFar);
        }
        if !odb.exists(id) {
            missing = true;
            continue;
        }
        let object = odb.read(id)?;
        for parent in parents(object.data()) {
            if seen.insert(parent) {
                queue.push_back(parent);
            }
        }
    }
    Ok(if missing {
        Walk::Missing
    } else {
        Walk::NotFound
    })
}

/// The `parent` lines of a raw commit object (its header ends at the first empty line).
fn parents(data: &[u8]) -> Vec<Oid> {
    data.split(|b| *b == b'\n')
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix(b"parent "))
        .filter_map(|hex| std::str::from_utf8(hex).ok())
        .filter_map(|hex| Oid::from_str(hex.trim()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_are_read_from_the_header_and_not_from_the_message() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let c = "c".repeat(40);
        let raw = format!(
            "tree {}\nparent {a}\nparent {b}\nauthor x <x> 1 +0000\ncommitter x <x> 1 +0000\n\nparent {c}\n",
            "d".repeat(40)
        );
        let got: Vec<String> = parents(raw.as_bytes()).iter().map(Oid::to_string).collect();
        assert_eq!(got, vec![a, b]);
    }
}
