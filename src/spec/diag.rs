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

/// The closest candidate to `word`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(2))
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
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
}
