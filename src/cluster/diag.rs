//! Diagnostics: what is wrong in cluster.yaml, where, and how to fix it.
//! Printed as `FILE:LINE:COL: error: PATH: message (hint)`, the format editors and CI annotate.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    Key(String),
    Index(usize),
}

/// A path into the document, printed as `spec.nodeSets[0].gpus.count`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path(Vec<PathSeg>);

impl Path {
    pub fn root() -> Self {
        Path(Vec::new())
    }
    pub fn key(&self, k: &str) -> Path {
        let mut p = self.clone();
        p.0.push(PathSeg::Key(k.to_string()));
        p
    }
    pub fn index(&self, i: usize) -> Path {
        let mut p = self.clone();
        p.0.push(PathSeg::Index(i));
        p
    }
    /// The path one level up (the root stays the root).
    pub fn parent(&self) -> Path {
        let mut p = self.clone();
        p.0.pop();
        p
    }
    pub fn segments(&self) -> &[PathSeg] {
        &self.0
    }
    /// Parses `a.b[2].c` (keys must not contain `.` or `[`).
    pub fn parse(text: &str) -> Path {
        let mut p = Path::root();
        for part in text.split('.').filter(|s| !s.is_empty()) {
            let mut rest = part;
            if let Some(i) = rest.find('[') {
                p = p.key(&rest[..i]);
                rest = &rest[i..];
                while let Some(end) = rest.find(']') {
                    if let Ok(n) = rest[1..end].parse() {
                        p = p.index(n);
                    }
                    rest = &rest[end + 1..];
                }
            } else {
                p = p.key(rest);
            }
        }
        p
    }
}

/// A path being walked, made into a [`Path`] only when something is found there: a walk over
/// every value of a file would otherwise copy its path once per value (most of a validation's
/// allocations, when each value had a path of its own).
pub enum Trail<'a> {
    At(&'a Path),
    Key(&'a Trail<'a>, &'a str),
    Index(&'a Trail<'a>, usize),
}

impl Trail<'_> {
    pub fn path(&self) -> Path {
        let mut segments = Vec::new();
        let mut t = self;
        let base = loop {
            match t {
                Trail::At(p) => break *p,
                Trail::Key(up, k) => {
                    segments.push(PathSeg::Key((*k).to_string()));
                    t = up;
                }
                Trail::Index(up, i) => {
                    segments.push(PathSeg::Index(*i));
                    t = up;
                }
            }
        };
        let mut p = base.clone();
        p.0.extend(segments.into_iter().rev());
        p
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(document)");
        }
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                PathSeg::Key(k) if i == 0 => f.write_str(k)?,
                PathSeg::Key(k) => write!(f, ".{k}")?,
                PathSeg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub path: String,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Paths and messages quote cluster.yaml's keys and values: escaped for terminals.
        use crate::text::escaped;
        write!(
            f,
            "{}:{}:{}: error: {}: {}",
            escaped(&self.file),
            self.line,
            self.col,
            escaped(&self.path),
            escaped(&self.message)
        )?;
        if let Some(h) = &self.hint {
            write!(f, " ({})", escaped(h))?;
        }
        Ok(())
    }
}

/// A problem before positions are known: where (as a path) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: Path,
    /// Point at the key rather than the value (unknown fields).
    pub at_key: Option<String>,
    pub message: String,
    pub hint: Option<String>,
}

impl Finding {
    pub fn new(path: Path, message: impl Into<String>) -> Self {
        Finding {
            path,
            at_key: None,
            message: message.into(),
            hint: None,
        }
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// Longest word, and longest candidate, a suggestion is looked for (every name slurmops takes
/// is at most 64 characters; a longer one is no typo of a name).
const SUGGEST_MAX_LEN: usize = 64;
/// Most candidates a word is compared with: a hint costs the same for any list.
const SUGGEST_MAX_CANDIDATES: usize = 1_000;

/// The closest candidate to `word`, if it is close enough to be a likely typo. Bounded: words
/// and candidates longer than 64 characters are left out, and only the first 1,000 candidates
/// are compared.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    if word.len() > SUGGEST_MAX_LEN {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .take(SUGGEST_MAX_CANDIDATES)
        .filter(|c| c.len() <= SUGGEST_MAX_LEN)
        .filter_map(|c| {
            let max = (c.len() / 3).max(2);
            let d = edit_distance(&lower, &c.to_ascii_lowercase(), max)?;
            Some((d, c))
        })
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

/// The edit distance of A and B when it is at most MAX (None past it: a row whose every cell
/// is past MAX ends the comparison).
fn edit_distance(a: &str, b: &str, max: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        if cur.iter().all(|d| *d > max) {
            return None;
        }
        prev = cur;
    }
    Some(prev[b.len()]).filter(|d| *d <= max)
}

/// Most names a hint lists.
const LISTED: usize = 10;

/// NAMES for a hint: at most ten, each clipped, and how many there are in all past ten
/// (`a, b, c`; `a, b, …, j, and 40 more`).
pub fn listed<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut shown = Vec::new();
    let mut more = 0usize;
    for n in names {
        if shown.len() < LISTED {
            shown.push(clip(n));
        } else {
            more += 1;
        }
    }
    match more {
        0 => shown.join(", "),
        _ => format!("{}, and {more} more", shown.join(", ")),
    }
}

/// Longest value a message quotes whole.
const CLIP: usize = 64;

/// S for a message: whole when short, else its start and its length (`"xxxx…" (1048576 bytes)`
/// reads as the start of the value).
pub fn clip(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= CLIP {
        return s.into();
    }
    format!("{}… ({} bytes)", start(s, CLIP), s.len()).into()
}

/// The longest start of S of at most MAX bytes that ends at a character.
pub fn start(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_round_trip() {
        let p = Path::parse("spec.nodeSets[3].gpus.count");
        assert_eq!(p.to_string(), "spec.nodeSets[3].gpus.count");
        assert_eq!(
            p,
            Path::root()
                .key("spec")
                .key("nodeSets")
                .index(3)
                .key("gpus")
                .key("count")
        );
    }

    #[test]
    fn suggestions_catch_typos_and_case() {
        assert_eq!(
            did_you_mean("nodesets", ["nodeSets", "partitions"]),
            Some("nodeSets")
        );
        assert_eq!(
            did_you_mean("replcas", ["replicas", "image"]),
            Some("replicas")
        );
        assert_eq!(did_you_mean("zzzzzz", ["replicas", "image"]), None);
    }

    #[test]
    fn suggestions_and_lists_stay_bounded() {
        // A word no name can be, and candidates past the first thousand: no comparison.
        let long = "x".repeat(1 << 20);
        assert_eq!(did_you_mean(&long, ["x"]), None);
        let many: Vec<String> = (0..5_000).map(|i| format!("set-{i}")).collect();
        assert_eq!(
            did_you_mean("set-12", many.iter().map(|s| s.as_str())),
            Some("set-12")
        );
        assert_eq!(
            did_you_mean("set-4999", many.iter().map(|s| s.as_str())),
            Some("set-499")
        );
        assert_eq!(
            listed(many.iter().map(|s| s.as_str())),
            "set-0, set-1, set-2, set-3, set-4, set-5, set-6, set-7, set-8, set-9, and 4990 more"
        );
        assert_eq!(listed(["a", "b"]), "a, b");
        assert_eq!(clip(&long), format!("{}… (1048576 bytes)", "x".repeat(64)));
        assert_eq!(
            clip("é".repeat(40).as_str()).chars().count(),
            32 + 1 + " (80 bytes)".len()
        );
        // The distance is exact within its bound.
        assert_eq!(edit_distance("kitten", "sitting", 3), Some(3));
        assert_eq!(edit_distance("kitten", "sitting", 2), None);
    }
}
