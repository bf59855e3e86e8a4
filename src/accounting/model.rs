//! The accounting objects as Slurm names them: each QOS, account, user and user-in-account
//! association is a set of `sacctmgr` settings (`MaxTRESPerUser=gres/gpu=8`) in one canonical
//! text form. cluster.yaml and slurmdbd's answers both become this model, so the diff and the
//! plan speak Slurm's words and compare like with like.

use std::collections::BTreeMap;
use std::fmt;

use crate::cluster::types::{Accounting, Association, AssociationLimits, QosLimits};
use crate::cluster::words::{list_text, minutes_text, parse_minutes, parse_tres, tres_text};

pub use crate::cluster::accounts::{BUILT_IN_QOS, ROOT};

/// One accounting object. The order is the order of creation: QOS before the accounts that
/// allow them, accounts before their users' associations, associations before the user
/// settings that name them (DefaultAccount).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Key {
    Qos { name: String },
    Account { name: String },
    Association { account: String, user: String },
    User { name: String },
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Qos { name } => write!(f, "QOS {name}"),
            Key::Account { name } => write!(f, "account {name}"),
            Key::Association { account, user } => write!(f, "account {account}: user {user}"),
            Key::User { name } => write!(f, "user {name}"),
        }
    }
}

impl Key {
    pub fn is_built_in(&self) -> bool {
        match self {
            Key::Qos { name } => name == BUILT_IN_QOS,
            Key::Account { name } | Key::User { name } => name == ROOT,
            Key::Association { account, user } => account == ROOT && user == ROOT,
        }
    }
}

/// Settings in Slurm's words → canonical value. A setting that is absent is unset (unlimited,
/// empty, Slurm's default).
pub type Settings = BTreeMap<String, String>;

/// Settings compared only when cluster.yaml sets them: Slurm fills them in by inheritance
/// (an association without QOS uses its parent's) or from the name (Organization).
pub const INHERITED: &[&str] = &["QOS", "DefaultQOS", "Organization"];

/// Settings whose Slurm default is shown as a value; equal to it means unset.
const DEFAULTS: &[(&str, &str)] = &[("Fairshare", "1"), ("Priority", "0"), ("Parent", ROOT)];

/// An object: its settings and whether it carries slurmops' ownership marker (a `slurmops:`
/// QOS description or association comment, as drain reasons carry theirs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Object {
    pub settings: Settings,
    pub owned: bool,
}

pub type Objects = BTreeMap<Key, Object>;

/// Drops the values equal to Slurm's defaults so that unset and default compare equal.
pub fn normalize(settings: &mut Settings) {
    settings.retain(|k, v| !v.is_empty() && !DEFAULTS.iter().any(|(dk, dv)| dk == k && dv == v));
}

/// What cluster.yaml asks for. Validation has accepted it, so unparsable values cannot occur;
/// if one did, it is kept as written and shows up in the diff rather than being dropped.
pub fn desired(a: &Accounting) -> Objects {
    let mut out = Objects::new();
    for q in &a.qos {
        let mut s = Settings::new();
        put(&mut s, "Description", q.description.clone());
        put(&mut s, "Priority", q.priority.map(|p| p.to_string()));
        put(&mut s, "Preempt", Some(list_text(&q.preempt)));
        put(&mut s, "Flags", Some(list_text(&q.flags)));
        qos_limits(&mut s, &q.limits);
        add(
            &mut out,
            Key::Qos {
                name: q.name.clone(),
            },
            s,
        );
    }
    for acc in &a.accounts {
        let mut s = Settings::new();
        // Slurm describes an account by its name when nothing else is said.
        let description = acc.description.clone().unwrap_or_else(|| acc.name.clone());
        put(&mut s, "Description", Some(description));
        put(&mut s, "Organization", acc.organization.clone());
        put(&mut s, "Parent", acc.parent.clone());
        association(&mut s, &acc.association);
        add(
            &mut out,
            Key::Account {
                name: acc.name.clone(),
            },
            s,
        );
    }
    for u in &a.users {
        let default = u
            .default_account
            .clone()
            .or_else(|| u.accounts.first().map(|m| m.name.clone()));
        let mut s = Settings::new();
        put(&mut s, "DefaultAccount", default);
        put(&mut s, "AdminLevel", Some(u.admin_level.as_str().into()));
        add(
            &mut out,
            Key::User {
                name: u.name.clone(),
            },
            s,
        );
        for m in &u.accounts {
            let mut s = Settings::new();
            association(&mut s, &m.association);
            let key = Key::Association {
                account: m.name.clone(),
                user: u.name.clone(),
            };
            add(&mut out, key, s);
        }
    }
    out
}

fn add(out: &mut Objects, key: Key, mut settings: Settings) {
    normalize(&mut settings);
    out.insert(
        key,
        Object {
            settings,
            owned: true,
        },
    );
}

fn put(s: &mut Settings, k: &str, v: Option<String>) {
    if let Some(v) = v {
        s.insert(k.into(), v);
    }
}

fn tres(v: &Option<String>) -> Option<String> {
    v.as_ref().map(|t| {
        parse_tres(t)
            .map(|l| tres_text(&l))
            .unwrap_or_else(|_| t.clone())
    })
}

fn wall(v: &Option<String>) -> Option<String> {
    v.as_ref().map(|t| {
        parse_minutes(t)
            .map(minutes_text)
            .unwrap_or_else(|_| t.clone())
    })
}

fn num(v: Option<u32>) -> Option<String> {
    v.map(|n| n.to_string())
}

fn qos_limits(s: &mut Settings, l: &QosLimits) {
    put(s, "MaxTRESPerUser", tres(&l.max_tres_per_user));
    put(s, "MaxTRESPerAccount", tres(&l.max_tres_per_account));
    put(s, "MaxTRESPerJob", tres(&l.max_tres_per_job));
    put(s, "MaxTRESPerNode", tres(&l.max_tres_per_node));
    put(s, "GrpTRES", tres(&l.grp_tres));
    put(s, "GrpJobs", num(l.grp_jobs));
    put(s, "MaxJobsPerUser", num(l.max_jobs_per_user));
    put(s, "MaxSubmitJobsPerUser", num(l.max_submit_jobs_per_user));
    put(s, "MaxWall", wall(&l.max_wall));
}

fn association(s: &mut Settings, a: &Association) {
    put(s, "Fairshare", num(a.fairshare));
    put(s, "DefaultQOS", a.default_qos.clone());
    if !a.qos.is_empty() {
        put(s, "QOS", Some(list_text(&a.qos)));
    }
    association_limits(s, &a.limits);
}

fn association_limits(s: &mut Settings, l: &AssociationLimits) {
    put(s, "GrpTRES", tres(&l.grp_tres));
    put(s, "MaxTRESPerJob", tres(&l.max_tres_per_job));
    put(s, "MaxTRESPerNode", tres(&l.max_tres_per_node));
    put(s, "GrpJobs", num(l.grp_jobs));
    put(s, "GrpSubmitJobs", num(l.grp_submit_jobs));
    put(s, "MaxJobs", num(l.max_jobs));
    put(s, "MaxSubmitJobs", num(l.max_submit_jobs));
    put(s, "MaxWall", wall(&l.max_wall));
}
