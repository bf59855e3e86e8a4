//! What it takes to bring slurmdbd to what cluster.yaml says, in Slurm's words, ordered so that
//! Slurm accepts each step (QOS → accounts, parents first → user associations → user settings;
//! removals the other way round). Pure: the plan shows exactly what apply will do.
//!
//! Ownership follows the drain-reason rule: slurmops removes only objects that carry its marker.
//! Objects made by hand are reported and left alone unless `policy.accounting.prune` says
//! otherwise. A managed object that differs from what the last applied revision asked for was
//! edited by hand (drift): corrected, or only reported in detect-only mode.

use std::collections::BTreeSet;

use super::model::{INHERITED, Key, Object, Objects, ROOT, Settings};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Op {
    Create,
    Update,
    Delete,
}

/// One setting that changes: `MaxTRESPerUser gres/gpu=8 → gres/gpu=16`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Field {
    pub name: String,
    pub from: Option<String>,
    pub to: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    pub key: Key,
    pub op: Op,
    pub fields: Vec<Field>,
    /// The object exists but was not made by slurmops: this change takes it over.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub adopt: bool,
    /// Someone changed the object by hand since slurmops wrote it; this change undoes that.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hand_edit: bool,
    /// Why this change will not be made (e.g. an account with running jobs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// How to treat objects slurmops did not make and hand edits of those it did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mode {
    /// Remove objects that are not in cluster.yaml even when made by hand.
    pub prune: bool,
    /// Report hand edits without undoing them (changes from cluster.yaml still apply).
    pub detect_only: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    /// What apply does, in order.
    pub changes: Vec<Change>,
    /// Hand edits reported and left alone (detect-only mode).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<Change>,
    /// Objects made by hand that are not in cluster.yaml: left alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmanaged: Vec<Key>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.drift.is_empty()
    }

    /// Nothing to show at all.
    pub fn is_quiet(&self) -> bool {
        self.is_empty() && self.unmanaged.is_empty()
    }

    /// One line per change, in Slurm's words and in the order apply makes them.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.changes.iter().map(line).collect();
        for d in &self.drift {
            let fields: Vec<String> = d
                .fields
                .iter()
                .map(|f| {
                    format!(
                        "{} is {} in Slurm, {} in cluster.yaml",
                        f.name,
                        shown(&f.from),
                        shown(&f.to)
                    )
                })
                .collect();
            out.push(format!(
                "drift (hand edit, reported only: policy.detectDriftOnly): {}: {}",
                d.key,
                fields.join("; ")
            ));
        }
        for k in &self.unmanaged {
            out.push(format!(
                "{k} exists in Slurm but not in cluster.yaml (made by hand): left alone (policy.accounting.prune: true removes it)"
            ));
        }
        out
    }

    /// Changes apply will make (the refused ones are not made).
    pub fn to_make(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.refused.is_none())
    }
}

/// A running or pending job: what keeps its account and association from being removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusyJob {
    pub id: u64,
    pub account: String,
    pub user: String,
}

/// What is compared: DESIRED (cluster.yaml), CURRENT (slurmdbd, or the older revision offline),
/// LAST (what the last applied revision asked for, when known: tells hand edits from changes in
/// git) and BUSY (running and pending jobs, known against a live cluster).
pub struct Inputs<'a> {
    /// Slurm's ClusterName (the associations are this cluster's).
    pub cluster: &'a str,
    pub desired: &'a Objects,
    pub current: &'a Objects,
    pub last: Option<&'a Objects>,
    pub busy: &'a [BusyJob],
}

pub fn diff(i: &Inputs<'_>, mode: Mode) -> Diff {
    let (desired, current) = (i.desired, i.current);
    let mut out = Diff::default();
    let keys: BTreeSet<&Key> = desired.keys().chain(current.keys()).collect();
    let mut deletes = Vec::new();
    for key in keys {
        match (desired.get(key), current.get(key)) {
            (Some(d), None) => {
                out.changes
                    .push(change(key, Op::Create, fields(d, &Object::default())))
            }
            (Some(d), Some(c)) => {
                let last = i.last.map(|l| l.get(key));
                update(&mut out, key, (d, c), last, i.cluster, mode);
            }
            (None, Some(c)) if key.is_built_in() => {
                let _ = c;
            }
            // A user leaves this cluster with its associations; the user record is global.
            (None, Some(_)) if matches!(key, Key::User { .. }) => {}
            (None, Some(c)) if c.owned || mode.prune => {
                deletes.push(change(key, Op::Delete, fields(&Object::default(), c)));
            }
            (None, Some(_)) => out.unmanaged.push(key.clone()),
            (None, None) => {}
        }
    }
    order_accounts(&mut out.changes, desired, false);
    order_accounts(&mut deletes, current, true);
    deletes.reverse();
    refuse_busy(&mut deletes, current, i.busy);
    out.changes.extend(deletes);
    out
}

fn shown(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("unset")
}

fn line(c: &Change) -> String {
    let settings = |c: &Change| {
        let s: Vec<String> = c
            .fields
            .iter()
            .filter_map(|f| f.to.as_ref().map(|t| format!("{}={t}", f.name)))
            .collect();
        if s.is_empty() {
            String::new()
        } else {
            format!(" ({})", s.join(", "))
        }
    };
    let mut text = match (&c.key, c.op) {
        (Key::Association { account, user }, Op::Create) => {
            format!("account {account}: +user {user}{}", settings(c))
        }
        (Key::Association { account, user }, Op::Delete) => {
            format!("account {account}: -user {user}")
        }
        (k, Op::Create) => format!("{k} added{}", settings(c)),
        (k, Op::Delete) => format!("{k} removed"),
        (k, Op::Update) => {
            let f: Vec<String> = c
                .fields
                .iter()
                .map(|f| format!("{} {} → {}", f.name, shown(&f.from), shown(&f.to)))
                .collect();
            format!("{k}: {}", f.join("; "))
        }
    };
    if c.adopt {
        text.push_str(" (taken over: it was made outside slurmops)");
    }
    if c.hand_edit {
        text.push_str(" (undoes a hand edit)");
    }
    if let Some(why) = &c.refused {
        text = format!("REFUSED: {text}: {why}");
    }
    text
}

fn change(key: &Key, op: Op, fields: Vec<Field>) -> Change {
    Change {
        key: key.clone(),
        op,
        fields,
        adopt: false,
        hand_edit: false,
        refused: None,
    }
}

/// LAST: None when no revision was applied before (or offline), Some(None) when the last one
/// did not have KEY.
fn update(
    out: &mut Diff,
    key: &Key,
    (d, c): (&Object, &Object),
    last: Option<Option<&Object>>,
    cluster: &str,
    mode: Mode,
) {
    let diffs = fields(d, c);
    if diffs.is_empty() {
        return;
    }
    let was = last.flatten();
    let from_git = was.is_none_or(|w| w.settings != d.settings);
    let hand_edit =
        c.owned && was.is_some_and(|w| compared(&c.settings, &w.settings) != w.settings);
    let mut ch = change(key, Op::Update, diffs);
    ch.adopt = !c.owned;
    ch.hand_edit = hand_edit;
    refuse_unsupported(&mut ch, cluster);
    if mode.detect_only && ch.hand_edit && !from_git {
        out.drift.push(ch);
    } else {
        out.changes.push(ch);
    }
}

/// What slurmrestd cannot do, refused with the way to do it by hand.
fn refuse_unsupported(ch: &mut Change, cluster: &str) {
    if let Key::Account { name } = &ch.key
        && let Some(f) = ch.fields.iter().find(|f| f.name == "Parent")
    {
        let to = f.to.as_deref().unwrap_or(ROOT);
        ch.refused = Some(format!(
            "slurmrestd cannot move an account to another parent: run `sacctmgr modify account {name} where cluster={cluster} set parent={to}` once"
        ));
        return;
    }
    let clears_preempt = matches!(ch.key, Key::Qos { .. })
        && ch
            .fields
            .iter()
            .any(|f| f.name == "Preempt" && f.to.is_none());
    if clears_preempt {
        ch.refused = Some(format!(
            "slurmrestd cannot empty a QOS's Preempt list (Slurm 24.11's slurmrestd crashes on an empty entry): run `sacctmgr modify qos {} set preempt=''` once, or keep one QOS in preempt",
            match &ch.key {
                Key::Qos { name } => name.as_str(),
                _ => "",
            }
        ));
    }
}

/// CURRENT restricted to what slurmops compares: inherited settings only where DESIRED sets
/// them.
fn compared(current: &Settings, desired: &Settings) -> Settings {
    current
        .iter()
        .filter(|(k, _)| !INHERITED.contains(&k.as_str()) || desired.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Settings of TO that differ from FROM (a desired object against a current one).
fn fields(to: &Object, from: &Object) -> Vec<Field> {
    let from_s = compared(&from.settings, &to.settings);
    let names: BTreeSet<&String> = to.settings.keys().chain(from_s.keys()).collect();
    names
        .into_iter()
        .filter_map(|n| {
            let (f, t) = (from_s.get(n), to.settings.get(n));
            (f != t).then(|| Field {
                name: n.clone(),
                from: f.cloned(),
                to: t.cloned(),
            })
        })
        .collect()
}

/// Accounts parent first (or, for removals before reversing, parent first too so that the
/// reversed list removes children first).
fn order_accounts(changes: &mut [Change], tree: &Objects, _removal: bool) {
    let depth = |name: &str| {
        let mut d = 0;
        let mut at = name.to_string();
        while d < 64 {
            let parent = tree
                .get(&Key::Account { name: at.clone() })
                .and_then(|o| o.settings.get("Parent").cloned())
                .unwrap_or_else(|| ROOT.into());
            if parent == ROOT {
                break;
            }
            at = parent;
            d += 1;
        }
        d
    };
    changes.sort_by_key(|c| {
        let rank = match &c.key {
            Key::Qos { .. } => 0,
            Key::Account { .. } => 1,
            Key::Association { .. } => 2,
            Key::User { .. } => 3,
        };
        let d = match &c.key {
            Key::Account { name } => depth(name),
            _ => 0,
        };
        (rank, d, c.key.clone())
    });
}

/// An account is not removed while jobs use it, or while it holds users slurmops keeps.
fn refuse_busy(deletes: &mut [Change], current: &Objects, busy: &[BusyJob]) {
    let leaving: BTreeSet<Key> = deletes.iter().map(|c| c.key.clone()).collect();
    for ch in deletes.iter_mut() {
        let (account, user) = match &ch.key {
            Key::Account { name } => (name, None),
            Key::Association { account, user } => (account, Some(user)),
            _ => continue,
        };
        let ids: Vec<String> = busy
            .iter()
            .filter(|j| j.account == *account && user.is_none_or(|u| *u == j.user))
            .map(|j| j.id.to_string())
            .collect();
        if !ids.is_empty() {
            ch.refused = Some(format!(
                "{} has running or pending jobs {}: remove it once they end (or scancel them)",
                ch.key,
                ids.join(", ")
            ));
            continue;
        }
        if let Key::Account { name } = &ch.key {
            let staying: Vec<&str> = current
                .keys()
                .filter_map(|k| match k {
                    Key::Association { account, user } if account == name => {
                        (!leaving.contains(k)).then_some(user.as_str())
                    }
                    _ => None,
                })
                .collect();
            if !staying.is_empty() {
                ch.refused = Some(format!(
                    "account {name} still has users slurmops does not manage ({}): move or remove them first, or set policy.accounting.prune: true",
                    staying.join(", ")
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::model::Settings;

    fn obj(owned: bool, kv: &[(&str, &str)]) -> Object {
        let settings: Settings = kv
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Object { settings, owned }
    }
    fn qos(n: &str) -> Key {
        Key::Qos { name: n.into() }
    }
    fn acc(n: &str) -> Key {
        Key::Account { name: n.into() }
    }
    fn member(a: &str, u: &str) -> Key {
        Key::Association {
            account: a.into(),
            user: u.into(),
        }
    }
    fn run(
        desired: &Objects,
        current: &Objects,
        last: Option<&Objects>,
        busy: &[BusyJob],
        mode: Mode,
    ) -> Diff {
        diff(
            &Inputs {
                cluster: "c",
                desired,
                current,
                last,
                busy,
            },
            mode,
        )
    }

    #[test]
    fn creations_go_parents_first_and_removals_children_first() {
        let desired: Objects = [
            (acc("b"), obj(true, &[("Parent", "a")])),
            (acc("a"), obj(true, &[])),
            (member("b", "u"), obj(true, &[])),
            (qos("q"), obj(true, &[("Priority", "5")])),
        ]
        .into();
        let d = run(&desired, &Objects::new(), None, &[], Mode::default());
        let keys: Vec<String> = d.changes.iter().map(|c| c.key.to_string()).collect();
        assert_eq!(
            keys,
            ["QOS q", "account a", "account b", "account b: user u"]
        );
        // Everything leaves again: the other way round.
        let current: Objects = desired
            .iter()
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        let d = run(&Objects::new(), &current, None, &[], Mode::default());
        let keys: Vec<String> = d.changes.iter().map(|c| c.key.to_string()).collect();
        assert_eq!(
            keys,
            ["account b: user u", "account b", "account a", "QOS q"]
        );
        assert!(d.changes.iter().all(|c| c.op == Op::Delete));
    }

    #[test]
    fn objects_made_by_hand_are_left_alone_unless_prune_and_built_ins_always() {
        let current: Objects = [
            (acc("manual"), obj(false, &[])),
            (acc("root"), obj(false, &[])),
            (qos("normal"), obj(false, &[])),
        ]
        .into();
        let d = run(&Objects::new(), &current, None, &[], Mode::default());
        assert!(d.changes.is_empty());
        assert_eq!(d.unmanaged, [acc("manual")]);
        let d = run(
            &Objects::new(),
            &current,
            None,
            &[],
            Mode {
                prune: true,
                detect_only: false,
            },
        );
        assert_eq!(d.changes.len(), 1, "{:?}", d.changes);
        assert_eq!(
            (d.changes[0].key.clone(), d.changes[0].op),
            (acc("manual"), Op::Delete)
        );
    }

    #[test]
    fn a_busy_account_and_one_holding_unmanaged_users_are_refused() {
        let current: Objects = [
            (acc("busy"), obj(true, &[])),
            (member("busy", "alice"), obj(true, &[])),
            (acc("shared"), obj(true, &[])),
            (member("shared", "bob"), obj(false, &[])),
        ]
        .into();
        let busy = [BusyJob {
            id: 42,
            account: "busy".into(),
            user: "alice".into(),
        }];
        let d = run(&Objects::new(), &current, None, &busy, Mode::default());
        let refused: Vec<(String, String)> = d
            .changes
            .iter()
            .map(|c| (c.key.to_string(), c.refused.clone().unwrap_or_default()))
            .collect();
        assert!(
            refused
                .iter()
                .any(|(k, r)| k == "account busy" && r.contains("jobs 42")),
            "{refused:?}"
        );
        assert!(
            refused
                .iter()
                .any(|(k, r)| k == "account busy: user alice" && r.contains("jobs 42"))
        );
        assert!(
            refused
                .iter()
                .any(|(k, r)| k == "account shared" && r.contains("(bob)"))
        );
        assert_eq!(d.to_make().count(), 0, "nothing refused is made");
    }

    #[test]
    fn hand_edits_are_told_from_git_changes_by_the_last_applied_revision() {
        let last: Objects = [(qos("q"), obj(true, &[("Priority", "10")]))].into();
        let edited: Objects = [(qos("q"), obj(true, &[("Priority", "5")]))].into();
        let detect = Mode {
            prune: false,
            detect_only: true,
        };
        // Same git, edited by hand: drift, reported only in detect-only mode.
        let d = run(&last, &edited, Some(&last), &[], detect);
        assert!(d.changes.is_empty());
        assert_eq!(d.drift.len(), 1);
        assert!(
            d.lines()[0].contains("Priority is 5 in Slurm, 10 in cluster.yaml"),
            "{:?}",
            d.lines()
        );
        // Corrected otherwise, and said so.
        let d = run(&last, &edited, Some(&last), &[], Mode::default());
        assert_eq!(d.lines(), ["QOS q: Priority 5 → 10 (undoes a hand edit)"]);
        // Git changed too: applied even in detect-only mode.
        let new: Objects = [(qos("q"), obj(true, &[("Priority", "20")]))].into();
        let d = run(&new, &edited, Some(&last), &[], detect);
        assert_eq!(d.changes.len(), 1);
        assert!(d.changes[0].hand_edit);
    }

    #[test]
    fn inherited_settings_are_compared_only_when_git_sets_them() {
        let desired: Objects = [(member("a", "u"), obj(true, &[]))].into();
        let current: Objects = [(member("a", "u"), obj(true, &[("QOS", "normal")]))].into();
        assert!(run(&desired, &current, None, &[], Mode::default()).is_empty());
        let desired: Objects = [(member("a", "u"), obj(true, &[("QOS", "gpu")]))].into();
        let d = run(&desired, &current, None, &[], Mode::default());
        assert_eq!(d.lines(), ["account a: user u: QOS normal → gpu"]);
    }

    #[test]
    fn moving_an_account_is_refused_with_the_sacctmgr_command_for_this_cluster() {
        let desired: Objects = [(acc("a"), obj(true, &[("Parent", "x")]))].into();
        let current: Objects = [(acc("a"), obj(true, &[]))].into();
        let d = run(&desired, &current, None, &[], Mode::default());
        let why = d.changes[0].refused.clone().unwrap_or_default();
        assert!(
            why.contains("sacctmgr modify account a where cluster=c set parent=x"),
            "{why}"
        );
        assert_eq!(d.to_make().count(), 0);
    }

    #[test]
    fn emptying_a_preempt_list_is_refused_with_the_way_to_do_it() {
        let desired: Objects = [(qos("q"), obj(true, &[]))].into();
        let current: Objects = [(qos("q"), obj(true, &[("Preempt", "low")]))].into();
        let d = run(&desired, &current, None, &[], Mode::default());
        assert!(
            d.changes[0]
                .refused
                .as_deref()
                .is_some_and(|r| r.contains("sacctmgr modify qos q set preempt=''"))
        );
    }
}
