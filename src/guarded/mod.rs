//! `guarded`: the install's closed policy, checked on what a cluster.yaml renders — the
//! Kubernetes objects and the Slurm files that will run — not on the fields it was written with.
//! Under the `guarded` trust level every field a push puts into a rendered object has an allowed
//! form or the commit is refused; a field nobody thought of is refused, not passed.
//!
//! What is the push's and what is slurmops's own is decided by rendering the same cluster a
//! second time with the push's free-form additions left out ([`skeleton`]): what the full
//! rendering holds beyond that skeleton (an env var, a mount, a container, a Slurm key) is the
//! push's, and meets the closed rules; what both hold is slurmops's own code. Values a push
//! chooses through typed fields (images, ServiceAccounts, tolerations, volumes' sources, the
//! security context) are checked on every pod whoever wrote them.
//!
//! Like Pod Security Admission, the policy is evaluated on the pod; unlike it, the list of what
//! may be set is the install's (`--allow-*`, docs/trust-model.md), and everything else is refused.

mod blame;
mod containers;
mod context;
mod env;
mod key_class;
mod pods;
mod security;
pub mod skeleton;
mod slurm_conf_keys;
pub mod slurm_files;
mod slurm_key_table;
pub mod slurm_keys;
mod slurm_syntax;
mod volumes;

use serde_json::Value;

use crate::cluster::diag::{Finding, Path};
use crate::cluster::{ClusterFile, Guardrails};
use crate::render::Rendered;

/// Most breaches a commit is refused with; the rest are counted (each costs a search of the
/// file for its position).
pub const MAX_BREACHES: usize = 50;

/// One place a rendering leaves the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// `Kind/name` of the rendered object, or the Slurm file.
    pub object: String,
    /// Where in it, e.g. `spec.template.spec.containers[slurmd].env[LD_PRELOAD]`.
    pub field: String,
    /// What the push wrote that is found in cluster.yaml (a name, a path, a key), to place the
    /// refusal at its line; None: placed at the component.
    pub needle: Option<String>,
    /// The component's section of cluster.yaml (searched first, and the fallback position).
    pub scope: Path,
    pub message: String,
    /// The install setting that allows it, or how to do without.
    pub hint: String,
}

/// Every breach of the install's policy G in RENDERED, the rendering of C; empty when `trusted`
/// (the repository is the node administrator) or when all of it is allowed.
pub fn check(c: &ClusterFile, rendered: &Rendered, g: &Guardrails) -> Vec<Breach> {
    if !g.pods {
        return Vec::new();
    }
    let bare = crate::render::render(&skeleton::skeleton(c));
    let mut out = Vec::new();
    pods::check(c, rendered, &bare, g, &mut out);
    ignored(c, rendered, &mut out);
    for a in slurm_files::added(&bare.slurm, &rendered.slurm, &g.slurm_keys) {
        out.push(slurm_key(a));
    }
    out
}

/// The findings of BREACHES in C's cluster.yaml: each placed at what the push wrote, one per
/// cause (an annotation copied onto 2,000 objects is one finding that counts them).
pub fn findings(c: &ClusterFile, breaches: &[Breach]) -> Vec<Finding> {
    let Ok(tree) = serde_json::to_value(c) else {
        return Vec::new();
    };
    // Breaches of one cause, in order: the first, and how many others.
    let mut causes: Vec<(&Breach, usize)> = Vec::new();
    let mut index: std::collections::HashMap<(&Option<String>, &str, &str), usize> =
        std::collections::HashMap::new();
    for b in breaches {
        let key = (&b.needle, b.message.as_str(), b.field.as_str());
        let key = match b.needle {
            // Placed by what the push wrote: the same word and message is one cause.
            Some(_) => (key.0, key.1, ""),
            None => key,
        };
        match index.get(&key) {
            Some(&i) => causes[i].1 += 1,
            None => {
                index.insert(key, causes.len());
                causes.push((b, 0));
            }
        }
    }
    let total = causes.len();
    let mut out: Vec<Finding> = causes
        .into_iter()
        .take(MAX_BREACHES)
        .map(|(b, others)| {
            let at = b
                .needle
                .as_deref()
                .and_then(|n| blame::find(&tree, &b.scope, n))
                .unwrap_or_else(|| b.scope.clone());
            let also = match others {
                0 => String::new(),
                n => format!(" (and {n} more alike)"),
            };
            Finding::new(
                at,
                format!(
                    "{} {}{also}: {}",
                    b.object,
                    crate::cluster::diag::clip(&b.field),
                    b.message
                ),
            )
            .hint(b.hint.clone())
        })
        .collect();
    if total > MAX_BREACHES {
        out.push(
            Finding::new(
                Path::root().key("spec"),
                format!(
                    "{} more places the rendering leaves the install's policy",
                    total - MAX_BREACHES
                ),
            )
            .hint("fix the ones above and validate again"),
        );
    }
    out
}

/// `policy.ignoreDifferences` of C: apply leaves out of what it writes every field a pointer
/// names, so under `guarded` a pointer may not name a field slurmops renders (a Secret file's
/// mode, a security context, the token's automount) — only `/spec/replicas`, which another
/// controller may own, or fields slurmops does not render.
fn ignored(c: &ClusterFile, rendered: &Rendered, out: &mut Vec<Breach>) {
    for rule in &c.spec.policy.ignore_differences {
        let objects = rendered
            .objects
            .iter()
            .filter(|o| o.kind == rule.kind && rule.name.as_ref().is_none_or(|n| *n == o.name));
        for o in objects {
            for p in &rule.json_pointers {
                if p != "/spec/replicas" && o.body.pointer(p).is_some() {
                    out.push(Breach {
                        object: format!("{}/{}", o.kind, o.name),
                        field: p.clone(),
                        needle: Some(p.clone()),
                        scope: Path::root().key("spec").key("policy"),
                        message: "policy.ignoreDifferences would leave out of what slurmops applies a field it renders itself (a Secret file's mode, a security context, a mount): what runs would not be what was checked".into(),
                        hint: "name only fields slurmops does not render, or /spec/replicas; under the install's guarded trust level no setting allows more".into(),
                    });
                }
            }
        }
    }
}

fn slurm_key(a: slurm_files::Added) -> Breach {
    let (what, hint) = match a.class {
        Some(class) => (
            format!(
                "{} is {} {} key: it {}",
                a.key,
                match class.as_str().starts_with(['a', 'e']) {
                    true => "an",
                    false => "a",
                },
                class.as_str(),
                class.why()
            ),
            format!(
                "leave it to slurmops, or the install allows it with the daemon's --allow-slurm-key {} (policy allowSlurmKeys)",
                a.key
            ),
        ),
        None => (
            format!(
                "{} is not a key slurmops knows of {} (Slurm 24.11, 25.11, 26.05): an unknown key is refused, not passed to Slurm",
                a.key, a.file
            ),
            format!(
                "check its spelling in Slurm's documentation; the install allows it with the daemon's --allow-slurm-key {} (policy allowSlurmKeys)",
                a.key
            ),
        ),
    };
    Breach {
        object: a.file.clone(),
        field: format!("line {}", a.line),
        needle: Some(a.key.clone()),
        scope: Path::root().key("spec"),
        message: what,
        hint,
    }
}

/// The string at KEY of V, if any.
fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}
