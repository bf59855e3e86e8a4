//! Semantic checks a schema cannot express: names, references between sections, limits that
//! depend on each other, and settings slurmops must own. Each check returns findings with the
//! path of the offending value, so the caller can point at it.

use std::collections::HashSet;

mod accounting;
mod active_checks;
mod canary;
mod controller;
pub use controller::RENDERED_FILES;
mod grammar;
mod kubernetes_names;
mod login_sets;
mod node_sets;
pub use node_sets::reserved_suffixes;
mod partitions;
mod pods;
mod policy;
pub use policy::RENDERED_KINDS;
pub(crate) mod secrets;
mod sizes;
pub use sizes::oversized;
mod slurm_conf;
pub use slurm_conf::OWNED_SLURM_CONF;
mod spec;
mod topology;
mod window;

use kubernetes_names::{is_dns_label, is_dns_subdomain};

use super::diag::{Finding, Path, clip, did_you_mean, listed};
use super::types::*;

/// Most findings kept (the rest are counted): as many as a file's diagnostics show.
const MAX_FINDINGS: usize = super::MAX_DIAGNOSTICS;
/// Longest message or hint a finding keeps.
const MAX_TEXT: usize = 1024;

/// The semantic findings of C: the first ones made (at most as many as diagnostics show), and
/// how many there are in all. Bounded in time and memory for any file the parser accepts.
pub fn validate(c: &ClusterFile) -> (Vec<Finding>, usize) {
    let mut v = Validator::default();
    v.header(c);
    let spec = Path::root().key("spec");
    if v.sizes(&c.spec, &spec) {
        v.spec(&c.spec, &c.metadata, &spec);
    }
    v.own_secrets(c);
    (v.out, v.total)
}

#[derive(Default)]
struct Validator {
    out: Vec<Finding>,
    /// Every finding made, kept or not.
    total: usize,
}

/// Names a reference may name: found at once, and named in a hint by the closest or a few.
pub(super) struct Known<'a> {
    list: Vec<&'a str>,
    set: HashSet<&'a str>,
}

impl<'a> Known<'a> {
    pub(super) fn new(names: impl IntoIterator<Item = &'a str>) -> Self {
        let list: Vec<&str> = names.into_iter().collect();
        let set = list.iter().copied().collect();
        Known { list, set }
    }

    pub(super) fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }
}

/// S cut to MAX_TEXT bytes (at a character), marked when cut.
fn bounded(mut s: String) -> String {
    if s.len() > MAX_TEXT {
        s.truncate(super::diag::start(&s, MAX_TEXT).len());
        s.push('…');
    }
    s
}

impl Validator {
    /// Keeps F while fewer than MAX_FINDINGS are kept (its texts bounded); counts it always.
    fn push(&mut self, mut f: Finding) {
        self.total += 1;
        if self.full() {
            return;
        }
        f.message = bounded(f.message);
        f.hint = f.hint.map(bounded);
        self.out.push(f);
    }

    /// Whether a finding made now would only be counted (a costly hint is not worth making).
    fn full(&self) -> bool {
        self.out.len() >= MAX_FINDINGS
    }

    /// When no finding more is kept, counts one without making it: true then.
    fn counted_only(&mut self) -> bool {
        let full = self.full();
        self.total += usize::from(full);
        full
    }

    fn err(&mut self, path: Path, msg: impl Into<String>, hint: impl Into<String>) {
        self.push(Finding::new(path, msg).hint(hint));
    }

    /// A finding about the map key KEY at PATH (a name), pointed at the key, not its value.
    fn err_at_key(
        &mut self,
        path: Path,
        key: &str,
        msg: impl Into<String>,
        hint: impl Into<String>,
    ) {
        let mut f = Finding::new(path, msg).hint(hint);
        f.at_key = Some(key.to_string());
        self.push(f);
    }

    fn dns_label(&mut self, path: Path, what: &str, value: &str, max: usize) {
        if !is_dns_label(value) || value.len() > max {
            self.err(
                path,
                format!("{what} {value:?} is not a valid name"),
                format!("use at most {max} lowercase letters, digits and '-', starting and ending with a letter or digit"),
            );
        }
    }

    fn secret_ref(&mut self, r: &SecretRef, p: &Path) {
        if !is_dns_subdomain(&r.name) {
            self.err(
                p.key("name"),
                format!("{:?} is not a valid Secret name", r.name),
                "use a DNS-1123 subdomain",
            );
        }
        let key_ok = !r.key.is_empty()
            && r.key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !key_ok {
            self.err(
                p.key("key"),
                "a Secret key may hold only letters, digits, '-', '_' and '.'",
                "check the key name in the Secret",
            );
        }
    }

    fn unknown_ref(&mut self, path: Path, what: &str, name: &str, known: &Known) {
        if self.counted_only() {
            return;
        }
        let f = Finding::new(path, format!("no {what} named {:?}", clip(name)));
        let hint = match did_you_mean(name, known.list.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("known: {}", listed(known.list.iter().copied())),
        };
        self.push(f.hint(hint));
    }
}
