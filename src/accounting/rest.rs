//! slurmrestd's slurmdb endpoints (`openapi/slurmdbd`, data parser v0.0.42, which Slurm 24.11
//! and 26.05 serve with the same shapes): reading QOS, accounts, associations and users into
//! the Slurm-words model, and turning each change into the requests that make it. The JSON
//! paths of every setting are in the two tables below: the one place a new data parser would
//! change.

use reqwest::Method;
use serde_json::{Value, json};

use super::diff::{BusyJob, Change, Op};
use super::model::{Key, Object, Objects, Settings, normalize};
use crate::cluster::words::{
    Tres, flag_from_rest, flag_to_rest, list_text, minutes_text, parse_minutes, parse_tres,
    tres_text,
};
use crate::slurm::{Client, SlurmError};

/// The marker's prefix in QOS descriptions and association comments.
pub const MARKER: &str = "slurmops:";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    /// `{set, infinite, number}`.
    Num,
    /// The same, in minutes.
    Minutes,
    /// A plain integer.
    Int,
    Text,
    /// A list of names.
    List,
    Tres,
}

/// A QOS's settings and where v0.0.42 keeps them.
const QOS_FIELDS: &[(&str, &str, Ty)] = &[
    ("Priority", "priority", Ty::Num),
    ("Preempt", "preempt.list", Ty::List),
    ("Flags", "flags", Ty::List),
    ("MaxTRESPerUser", "limits.max.tres.per.user", Ty::Tres),
    ("MaxTRESPerAccount", "limits.max.tres.per.account", Ty::Tres),
    ("MaxTRESPerJob", "limits.max.tres.per.job", Ty::Tres),
    ("MaxTRESPerNode", "limits.max.tres.per.node", Ty::Tres),
    ("GrpTRES", "limits.max.tres.total", Ty::Tres),
    ("GrpJobs", "limits.max.active_jobs.count", Ty::Num),
    (
        "MaxJobsPerUser",
        "limits.max.jobs.active_jobs.per.user",
        Ty::Num,
    ),
    ("MaxSubmitJobsPerUser", "limits.max.jobs.per.user", Ty::Num),
    ("MaxWall", "limits.max.wall_clock.per.job", Ty::Minutes),
];

/// An association's settings (an account's or a user's in an account).
const ASSOC_FIELDS: &[(&str, &str, Ty)] = &[
    ("Parent", "parent_account", Ty::Text),
    ("Fairshare", "shares_raw", Ty::Int),
    ("DefaultQOS", "default.qos", Ty::Text),
    ("QOS", "qos", Ty::List),
    ("GrpTRES", "max.tres.total", Ty::Tres),
    ("MaxTRESPerJob", "max.tres.per.job", Ty::Tres),
    ("MaxTRESPerNode", "max.tres.per.node", Ty::Tres),
    ("GrpJobs", "max.jobs.per.count", Ty::Num),
    ("GrpSubmitJobs", "max.jobs.per.submitted", Ty::Num),
    ("MaxJobs", "max.jobs.active", Ty::Num),
    ("MaxSubmitJobs", "max.jobs.total", Ty::Num),
    ("MaxWall", "max.jobs.per.wall_clock", Ty::Minutes),
];

fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

fn read_value(v: &Value, ty: Ty) -> Option<String> {
    let number = |v: &Value| {
        let set = v.get("set").and_then(Value::as_bool).unwrap_or(false);
        let inf = v.get("infinite").and_then(Value::as_bool).unwrap_or(false);
        (set && !inf)
            .then(|| v.get("number").and_then(Value::as_u64))
            .flatten()
    };
    let text = match ty {
        Ty::Num => number(v)?.to_string(),
        Ty::Minutes => minutes_text(number(v)?),
        Ty::Int => v.as_u64()?.to_string(),
        Ty::Text => v.as_str()?.to_string(),
        Ty::List => {
            let items: Vec<String> = v
                .as_array()?
                .iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect();
            list_text(&items)
        }
        Ty::Tres => {
            let list: Vec<Tres> = v
                .as_array()?
                .iter()
                .filter_map(|t| {
                    Some(Tres {
                        kind: t.get("type")?.as_str()?.to_string(),
                        name: t.get("name").and_then(Value::as_str).unwrap_or("").into(),
                        count: t.get("count")?.as_u64()?,
                    })
                })
                .collect();
            tres_text(&list)
        }
    };
    Some(text)
}

fn read_fields(v: &Value, table: &[(&str, &str, Ty)]) -> Settings {
    let mut s = Settings::new();
    for (name, path, ty) in table {
        if let Some(val) = at(v, path).and_then(|x| read_value(x, *ty)) {
            s.insert((*name).into(), val);
        }
    }
    s
}

/// `slurmops:HASH rest` → (HASH, rest).
/// `slurmops: rest` → (true, rest): the marker slurmops writes at the front of a QOS's
/// description and an association's comment.
fn split_marker(text: &str) -> (bool, String) {
    match text.strip_prefix(MARKER) {
        Some(rest) => (true, rest.trim_start().to_string()),
        None => (false, text.to_string()),
    }
}

/// The comment of every association slurmops creates. slurmrestd sets a comment only when it
/// creates an association (POST associations/ leaves it), so the marker is written then.
const COMMENT: &str = "slurmops: managed from git";

fn parse<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, SlurmError> {
    serde_json::from_slice(body).map_err(|e| SlurmError::Parse {
        what: format!("slurmdb {what}"),
        detail: e.to_string(),
    })
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The accounting objects of CLUSTER as slurmdbd has them.
pub async fn read(s: &Client, cluster: &str) -> Result<Objects, SlurmError> {
    let mut out = Objects::new();
    let qos: Value = parse(&s.slurmdb(Method::GET, "qos/", None).await?, "qos")?;
    for q in list(&qos, "qos") {
        let Some(name) = q.get("name").and_then(Value::as_str) else {
            continue;
        };
        let mut settings = read_fields(q, QOS_FIELDS);
        if let Some(f) = settings.get_mut("Flags") {
            let flags: Vec<String> = f
                .split(',')
                .filter(|x| !x.is_empty())
                .map(flag_from_rest)
                .collect();
            *f = list_text(&flags);
        }
        let desc = q.get("description").and_then(Value::as_str).unwrap_or("");
        let (owned, desc) = split_marker(desc);
        settings.insert("Description".into(), desc);
        add(&mut out, Key::Qos { name: name.into() }, settings, owned);
    }
    let accounts: Value = parse(
        &s.slurmdb(Method::GET, "accounts/", None).await?,
        "accounts",
    )?;
    // Each association's own limits, not those it inherits from its parents. v0.0.42 names this
    // flag by its description (so does 26.05's v0.0.42).
    let path = format!(
        "associations/?cluster={}&Exclude%20limits%20from%20parents=true",
        query(cluster)?
    );
    let assocs: Value = parse(&s.slurmdb(Method::GET, &path, None).await?, "associations")?;
    for a in list(&assocs, "associations") {
        let field = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or("");
        let (account, user) = (field("account"), field("user"));
        if field("cluster") != cluster || !field("partition").is_empty() || account.is_empty() {
            continue;
        }
        let mut settings = read_fields(a, ASSOC_FIELDS);
        let (owned, _) = split_marker(field("comment"));
        let key = if user.is_empty() {
            if let Some(acc) = list(&accounts, "accounts")
                .iter()
                .find(|x| x.get("name").and_then(Value::as_str) == Some(account))
            {
                for k in ["description", "organization"] {
                    if let Some(v) = acc.get(k).and_then(Value::as_str) {
                        let name = if k == "description" {
                            "Description"
                        } else {
                            "Organization"
                        };
                        settings.insert(name.into(), v.into());
                    }
                }
            }
            Key::Account {
                name: account.into(),
            }
        } else {
            settings.remove("Parent");
            Key::Association {
                account: account.into(),
                user: user.into(),
            }
        };
        add(&mut out, key, settings, owned);
    }
    // Without associations slurmdbd leaves the default account out.
    let users: Value = parse(
        &s.slurmdb(Method::GET, "users/?with_assocs=true", None)
            .await?,
        "users",
    )?;
    for u in list(&users, "users") {
        let Some(name) = u.get("name").and_then(Value::as_str) else {
            continue;
        };
        let mine = |owned_only: bool| {
            out.iter().any(|(k, o)| {
                matches!(k, Key::Association { user, .. } if user == name)
                    && (o.owned || !owned_only)
            })
        };
        if !mine(false) {
            continue;
        }
        let owned = mine(true);
        let mut settings = Settings::new();
        let default = at(u, "default.account")
            .and_then(Value::as_str)
            .unwrap_or("");
        settings.insert("DefaultAccount".into(), default.into());
        let level = list(u, "administrator_level")
            .first()
            .and_then(Value::as_str)
            .unwrap_or("None");
        settings.insert("AdminLevel".into(), level.into());
        add(&mut out, Key::User { name: name.into() }, settings, owned);
    }
    Ok(out)
}

fn add(out: &mut Objects, key: Key, mut settings: Settings, owned: bool) {
    normalize(&mut settings);
    out.insert(key, Object { settings, owned });
}

/// A name as a query value or path segment.
fn query(name: &str) -> Result<&str, SlurmError> {
    crate::slurm::client::plain_name(name, "account, user, QOS or cluster")
}

/// Running and pending jobs, with the account and user each charges.
pub async fn busy(s: &Client) -> Result<Vec<BusyJob>, SlurmError> {
    let jobs = s.jobs().await?;
    Ok(jobs
        .iter()
        .filter(|j| {
            [
                "PENDING",
                "RUNNING",
                "SUSPENDED",
                "COMPLETING",
                "CONFIGURING",
                "REQUEUED",
            ]
            .iter()
            .any(|st| j.has_state(st))
        })
        .map(|j| BusyJob {
            id: j.id,
            account: j.account.to_string(),
            user: j.user.to_string(),
        })
        .collect())
}

/// Sets VALUE (None: clears it) at PATH in BODY, as v0.0.42 writes it.
fn write_value(body: &mut Value, path: &str, ty: Ty, value: Option<&str>, old: Option<&str>) {
    let v = match (ty, value) {
        (Ty::Num, Some(n)) => {
            json!({"set": true, "infinite": false, "number": n.parse::<u64>().unwrap_or(0)})
        }
        (Ty::Minutes, Some(t)) => {
            json!({"set": true, "infinite": false, "number": parse_minutes(t).unwrap_or(0)})
        }
        (Ty::Num | Ty::Minutes, None) => json!({"set": true, "infinite": true, "number": 0}),
        (Ty::Int, v) => json!(v.and_then(|n| n.parse::<u64>().ok()).unwrap_or(1)),
        (Ty::Text, v) => json!(v.unwrap_or("")),
        (Ty::List, v) => json!(v.map_or(vec![], |l| {
            l.split(',').filter(|x| !x.is_empty()).collect::<Vec<_>>()
        })),
        (Ty::Tres, v) => {
            let new = v.and_then(|t| parse_tres(t).ok()).unwrap_or_default();
            let mut items: Vec<Value> = new
                .iter()
                .map(|t| json!({"type": t.kind, "name": t.name, "count": t.count}))
                .collect();
            // A TRES no longer limited is cleared with count -1, as sacctmgr does.
            for t in old.and_then(|t| parse_tres(t).ok()).unwrap_or_default() {
                if !new.iter().any(|n| n.kind == t.kind && n.name == t.name) {
                    items.push(json!({"type": t.kind, "name": t.name, "count": -1}));
                }
            }
            Value::Array(items)
        }
    };
    let mut at = body;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, k) in parts.iter().enumerate() {
        if !at.is_object() {
            *at = json!({});
        }
        let Some(obj) = at.as_object_mut() else {
            return;
        };
        if i + 1 == parts.len() {
            obj.insert((*k).into(), v);
            return;
        }
        at = obj.entry((*k).to_string()).or_insert_with(|| json!({}));
    }
}

/// Every setting of TABLE as DESIRED has it, clearing what only CURRENT has: slurmrestd
/// resets a QOS's flags when a record leaves them out, so QOS records are always whole.
fn whole_into(
    body: &mut Value,
    table: &[(&str, &str, Ty)],
    desired: &Settings,
    current: &Settings,
) {
    for (name, path, ty) in table {
        let (to, from) = (desired.get(*name), current.get(*name));
        if *name == "Preempt" && to.is_none() {
            // Never an empty list entry: 24.11's slurmrestd crashes on it (see diff.rs).
            continue;
        }
        let to = to.map(|t| {
            if *name == "Flags" {
                rest_flags(t)
            } else {
                t.clone()
            }
        });
        write_value(body, path, *ty, to.as_deref(), from.map(String::as_str));
    }
}

fn rest_flags(list: &str) -> String {
    list.split(',')
        .filter_map(flag_to_rest)
        .collect::<Vec<_>>()
        .join(",")
}

/// The changed settings of CH only (associations keep what a record leaves out).
fn fields_into(body: &mut Value, table: &[(&str, &str, Ty)], ch: &Change) {
    for f in &ch.fields {
        if let Some((_, path, ty)) = table.iter().find(|(n, _, _)| *n == f.name) {
            write_value(body, path, *ty, f.to.as_deref(), f.from.as_deref());
        }
    }
}

/// Makes CH; DESIRED is what cluster.yaml asks for, CURRENT what was read. Returns the number
/// of requests sent.
pub async fn write(
    s: &Client,
    cluster: &str,
    ch: &Change,
    desired: &Objects,
    current: &Objects,
) -> Result<u32, SlurmError> {
    let settings = |o: &Objects| {
        o.get(&ch.key)
            .map(|x| x.settings.clone())
            .unwrap_or_default()
    };
    let (d, c) = (settings(desired), settings(current));
    let post = |path: &'static str, body: Value| async move {
        s.slurmdb(Method::POST, path, Some(body)).await.map(|_| 1)
    };
    match (&ch.key, ch.op) {
        (Key::Qos { name }, Op::Create | Op::Update) => {
            let text = d.get("Description").cloned().unwrap_or_default();
            let description = format!("{MARKER} {text}").trim_end().to_string();
            let mut q = json!({"name": query(name)?, "description": description});
            whole_into(&mut q, QOS_FIELDS, &d, &c);
            post("qos/", json!({"qos": [q]})).await
        }
        (Key::Qos { name }, Op::Delete) => {
            let path = format!("qos/{}", query(name)?);
            s.slurmdb(Method::DELETE, &path, None).await.map(|_| 1)
        }
        (Key::Account { name }, Op::Create) => {
            let parent = d
                .get("Parent")
                .cloned()
                .unwrap_or_else(|| super::model::ROOT.into());
            let body = json!({
                "association_condition": {
                    "accounts": [query(name)?], "clusters": [query(cluster)?],
                    "association": {"parent": parent, "comment": COMMENT},
                },
                "account": account_record(name, &d),
            });
            let mut n = post("accounts_association/", body).await?;
            n += set_association(
                s,
                cluster,
                name,
                "",
                ch,
                &["Parent", "Description", "Organization"],
            )
            .await?;
            Ok(n)
        }
        (Key::Account { name }, Op::Update) => {
            let mut n = 0;
            if ch
                .fields
                .iter()
                .any(|f| f.name == "Description" || f.name == "Organization")
            {
                let mut r = account_record(name, &d);
                r["name"] = json!(name);
                n += post("accounts/", json!({"accounts": [r]})).await?;
            }
            n +=
                set_association(s, cluster, name, "", ch, &["Description", "Organization"]).await?;
            Ok(n)
        }
        (Key::Account { name }, Op::Delete) => delete_account(s, cluster, name).await,
        (Key::Association { account, user }, Op::Create) => {
            // A new user starts with this account as its default; its own settings follow.
            let exists = current.contains_key(&Key::User { name: user.clone() });
            let u = if exists {
                json!({})
            } else {
                json!({"defaultaccount": account})
            };
            let body = json!({
                "association_condition": {
                    "accounts": [query(account)?], "users": [query(user)?], "clusters": [query(cluster)?],
                    "association": {"comment": COMMENT},
                },
                "user": u,
            });
            let n = post("users_association/", body).await?;
            Ok(n + set_association(s, cluster, account, user, ch, &[]).await?)
        }
        (Key::Association { account, user }, Op::Update) => {
            set_association(s, cluster, account, user, ch, &[]).await
        }
        (Key::Association { account, user }, Op::Delete) => {
            let path = format!(
                "association/?account={}&user={}&cluster={}",
                query(account)?,
                query(user)?,
                query(cluster)?
            );
            s.slurmdb(Method::DELETE, &path, None).await.map(|_| 1)
        }
        (Key::User { name }, Op::Create | Op::Update) => {
            let default = d.get("DefaultAccount").cloned().unwrap_or_default();
            let level = d
                .get("AdminLevel")
                .cloned()
                .unwrap_or_else(|| "None".into());
            let u = json!({"name": query(name)?, "default": {"account": default}, "administrator_level": [level]});
            post("users/", json!({"users": [u]})).await
        }
        // The user record is global (other clusters may use it): only its associations here go.
        (Key::User { .. }, Op::Delete) => Ok(0),
    }
}

fn account_record(name: &str, d: &Settings) -> Value {
    json!({
        "description": d.get("Description").cloned().unwrap_or_else(|| name.to_string()),
        "organization": d.get("Organization").cloned().unwrap_or_else(|| name.to_string()),
    })
}

/// The changed association settings of CH (but SKIP), if any: one POST associations/.
async fn set_association(
    s: &Client,
    cluster: &str,
    account: &str,
    user: &str,
    ch: &Change,
    skip: &[&str],
) -> Result<u32, SlurmError> {
    let mut only = ch.clone();
    only.fields.retain(|f| !skip.contains(&f.name.as_str()));
    if only.fields.is_empty() {
        return Ok(0);
    }
    let mut a = json!({"account": query(account)?, "cluster": query(cluster)?, "user": user, "partition": ""});
    fields_into(&mut a, ASSOC_FIELDS, &only);
    s.slurmdb(
        Method::POST,
        "associations/",
        Some(json!({"associations": [a]})),
    )
    .await?;
    Ok(1)
}

/// This cluster's associations of the account; the account itself (global) only when no other
/// cluster uses it.
async fn delete_account(s: &Client, cluster: &str, name: &str) -> Result<u32, SlurmError> {
    let path = format!(
        "associations/?account={}&cluster={}",
        query(name)?,
        query(cluster)?
    );
    s.slurmdb(Method::DELETE, &path, None).await?;
    let left: Value = parse(
        &s.slurmdb(
            Method::GET,
            &format!("associations/?account={}", query(name)?),
            None,
        )
        .await?,
        "associations",
    )?;
    if !list(&left, "associations").is_empty() {
        return Ok(1);
    }
    s.slurmdb(Method::DELETE, &format!("account/{}", query(name)?), None)
        .await?;
    Ok(2)
}
