//! Where in cluster.yaml a breach of the rendered output was written: the first place the
//! push's word (a name, a path, a key) appears, in the component's section first.

use serde_json::Value;

use crate::cluster::diag::{Path, PathSeg};

/// Most nodes one search visits: a breach's position costs the same for any file.
const MAX_VISITS: usize = 200_000;

/// The path of the first key or string equal to NEEDLE in TREE (cluster.yaml as JSON), under
/// SCOPE first, then anywhere.
/// Failing that, the first string holding `NEEDLE=` (a key inside a config file's text).
pub fn find(tree: &Value, scope: &Path, needle: &str) -> Option<Path> {
    let mut budget = MAX_VISITS;
    let assignment = format!("{needle}=");
    for m in [Match::Equal(needle), Match::Holds(&assignment)] {
        if let Some(sub) = at(tree, scope)
            && let Some(p) = search(sub, scope.clone(), m, &mut budget)
        {
            return Some(p);
        }
        if let Some(p) = search(tree, Path::root(), m, &mut budget) {
            return Some(p);
        }
    }
    None
}

#[derive(Clone, Copy)]
enum Match<'a> {
    /// A key or a string equal to it.
    Equal(&'a str),
    /// A string holding it.
    Holds(&'a str),
}

fn at<'a>(tree: &'a Value, path: &Path) -> Option<&'a Value> {
    let mut v = tree;
    for seg in path.segments() {
        v = match seg {
            PathSeg::Key(k) => v.get(k)?,
            PathSeg::Index(i) => v.get(*i)?,
        };
    }
    Some(v)
}

fn search(v: &Value, here: Path, m: Match<'_>, budget: &mut usize) -> Option<Path> {
    if *budget == 0 {
        return None;
    }
    *budget -= 1;
    match (v, m) {
        (Value::String(s), Match::Equal(n)) if s == n => Some(here),
        (Value::String(s), Match::Holds(n)) if s.contains(n) => Some(here),
        (Value::Object(map), _) => {
            if let Match::Equal(n) = m
                && map.contains_key(n)
            {
                return Some(here.key(n));
            }
            map.iter()
                .find_map(|(k, child)| search(child, here.key(k), m, budget))
        }
        (Value::Array(items), _) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| search(item, here.index(i), m, budget)),
        _ => None,
    }
}
