//! `slurm nodes|drain|resume|accounting`: the drain primitives and the accounting step as an
//! admin tool, on the same code the rollouts use, so what an operator sees here is what slurmops
//! sees. Its writes are the operator's own (as `scontrol` would make them), not the controller's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Error, allow_http, cluster_at, load, read};
use crate::slurm::auth::{Credentials, KeyBytes, Secret};
use crate::slurm::{Client, Config, DataParser, Drain, Node, Resume, SlurmError, SlurmNodes};

/// How to reach slurmrestd, as the command line says it.
pub struct Connect {
    pub url: Option<String>,
    pub token: Option<String>,
    pub token_file: Option<PathBuf>,
    /// Mint short-lived JWTs from this HS256 key file.
    pub jwt_key_file: Option<PathBuf>,
    /// Slurm user of minted tokens.
    pub user: String,
    pub ca_file: Option<PathBuf>,
    pub data_parser: Option<String>,
    /// Connect as slurmops does, from this cluster.yaml's JWT key Secret and Service.
    pub cluster_file: Option<PathBuf>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// A client for C.
pub async fn client(c: &Connect) -> Result<Client, SlurmError> {
    match &c.cluster_file {
        Some(f) => from_cluster(c, f).await,
        None => from_flags(c),
    }
}

fn from_flags(c: &Connect) -> Result<Client, SlurmError> {
    let read = |p: &PathBuf, what: &str| {
        std::fs::read(p)
            .map_err(|e| SlurmError::Config(format!("cannot read {what} {}: {e}", p.display())))
    };
    let url = c.url.clone().ok_or_else(|| {
        SlurmError::Config("no slurmrestd URL: pass --slurmrestd-url or set SLURMRESTD_URL".into())
    })?;
    let credentials = if let Some(key) = &c.jwt_key_file {
        Credentials::Key {
            key: KeyBytes(read(key, "JWT key file")?),
            user: c.user.clone(),
            lifetime: Duration::from_secs(600),
        }
    } else if let Some(f) = &c.token_file {
        let token = String::from_utf8_lossy(&read(f, "token file")?).into_owned();
        Credentials::Token {
            token: Secret::new(token),
            user: None,
        }
    } else if let Some(t) = &c.token {
        Credentials::Token {
            token: Secret::new(t.clone()),
            user: None,
        }
    } else {
        return Err(SlurmError::Config(
            "no credentials: pass --token (or SLURM_JWT), --token-file, or --jwt-key-file".into(),
        ));
    };
    let mut config = Config::new(url, credentials);
    config.allow_http = allow_http();
    config.parser = c.data_parser.as_deref().and_then(DataParser::parse);
    if let Some(ca) = &c.ca_file {
        config.ca_pem = Some(read(ca, "CA bundle")?);
    }
    Client::new(config)
}

/// Credentials and URL from cluster.yaml: the JWT key from its Secret, tokens minted per use.
async fn from_cluster(c: &Connect, path: &Path) -> Result<Client, SlurmError> {
    let file = crate::source::cluster_file(path);
    let loaded = crate::source::read_file(&file).map_err(|e| SlurmError::Config(e.to_string()))?;
    let cluster = crate::cluster::load(&loaded.name, &loaded.text).map_err(|d| {
        let lines: Vec<String> = d.iter().map(ToString::to_string).collect();
        SlurmError::Config(lines.join("\n"))
    })?;
    let kube = crate::k8s::Connection::connect(c.kubeconfig.as_deref(), c.context.as_deref())
        .await
        .map_err(|e| SlurmError::Config(e.to_string()))?;
    let mut client = crate::slurm::connect::from_secret(
        &kube.client,
        &cluster,
        c.url.clone(),
        &c.user,
        allow_http(),
    )
    .await?;
    if let Some(p) = c.data_parser.as_deref().and_then(DataParser::parse) {
        client.set_parser(p);
    }
    Ok(client)
}

/// The NodeSet of a worker node: its name is `NODESET-ORDINAL` and it carries the NodeSet's
/// feature (as slurmops renders slurmd's --conf).
pub fn node_set_of(n: &Node) -> Option<&str> {
    let (prefix, ordinal) = n.name.rsplit_once('-')?;
    let is_ordinal = !ordinal.is_empty() && ordinal.chars().all(|c| c.is_ascii_digit());
    (is_ordinal && n.features.iter().any(|f| f == prefix)).then_some(prefix)
}

/// One node as `slurm nodes` shows it.
pub struct Row {
    pub name: String,
    pub state: String,
    pub reason: String,
    pub jobs: Vec<u64>,
    pub node_set: Option<String>,
}

/// Every node, with the jobs on it.
pub async fn nodes(client: &Client) -> Result<Vec<Row>, SlurmError> {
    let nodes = client.nodes().await?;
    // The queue only when some node holds jobs (see `SlurmNodes::jobs_on`).
    let jobs = match nodes.values().any(|n| n.state.is_busy()) {
        true => client.jobs().await?,
        false => Vec::new().into(),
    };
    // Indexed by node once: 10,000 nodes and 50,000 jobs are not compared pair by pair.
    let mut on: std::collections::HashMap<&str, Vec<u64>> = Default::default();
    for j in jobs.iter().filter(|j| j.holds_nodes()) {
        for n in &j.nodes {
            let ids = on.entry(n.as_str()).or_default();
            if !ids.contains(&j.id) {
                ids.push(j.id);
            }
        }
    }
    Ok(nodes
        .values()
        .map(|n| Row {
            name: n.name.clone(),
            state: n.state.to_string(),
            reason: n.reason.clone(),
            jobs: on.get(n.name.as_str()).cloned().unwrap_or_default(),
            node_set: node_set_of(n).map(str::to_string),
        })
        .collect())
}

/// ROWS as `slurm nodes -o json` prints them.
pub fn nodes_json(rows: &[Row]) -> String {
    let list: Vec<serde_json::Value> = rows
        .iter()
        .map(|n| {
            serde_json::json!({"name": n.name, "state": n.state,
                "reason": n.reason, "jobs": n.jobs, "nodeSet": n.node_set})
        })
        .collect();
    let doc = serde_json::json!({"version": 1, "nodes": list});
    serde_json::to_string_pretty(&doc).expect("JSON values serialize") + "\n"
}

/// ROWS as a table, columns aligned.
pub fn nodes_table(rows: &[Row]) -> String {
    let dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
    let mut cells = vec![[
        "NODE".to_string(),
        "STATE".into(),
        "REASON".into(),
        "JOBS".into(),
        "NODESET".into(),
    ]];
    for n in rows {
        let jobs: Vec<String> = n.jobs.iter().map(u64::to_string).collect();
        cells.push([
            n.name.clone(),
            n.state.clone(),
            dash(n.reason.clone()),
            dash(jobs.join(",")),
            dash(n.node_set.clone().unwrap_or_default()),
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &cells {
        let line: Vec<String> = (0..5)
            .map(|i| format!("{:w$}", r[i], w = widths[i]))
            .collect();
        out += line.join("  ").trim_end();
        out.push('\n');
    }
    out
}

/// Drains NODE with REASON (a drain someone else set is left as it is); what happened, in lines.
pub async fn drain(client: &Client, node: &str, reason: &str) -> Result<String, SlurmError> {
    let mut out = match client.drain(node, reason).await? {
        Drain::Requested => format!("{node}: drain requested\n"),
        Drain::AlreadyOurs => format!("{node}: already drained by slurmops (reason refreshed)\n"),
        Drain::HeldByOther { reason, by } => {
            format!("{node}: already drained by {by} ({reason:?}); left as it is\n")
        }
    };
    let n = client.node(node).await?;
    let jobs = client.jobs_on(node).await?;
    let state = if n.state.is_drained() {
        "drained"
    } else {
        "draining"
    };
    out += &format!(
        "{node}: {state} ({}), {} job(s) still on it\n",
        n.state,
        jobs.len()
    );
    Ok(out)
}

/// Resumes NODE if slurmops drained it; refuses someone else's drain.
pub async fn resume(client: &Client, node: &str) -> Result<String, Error> {
    match client.resume(node).await? {
        Resume::Resumed => Ok(format!("{node}: resumed\n")),
        Resume::NotDrained => Ok(format!("{node}: not drained; nothing to do\n")),
        Resume::HeldByOther { reason, by } => Err(Error::Other(format!(
            "{node} was drained by {by} ({reason:?}), not by slurmops; refusing to resume it (if that drain is over: scontrol update nodename={node} state=resume)"
        ))),
    }
}

/// What `slurm accounting` found or did.
pub struct Accounting {
    pub lines: Vec<String>,
    /// Without `apply`: slurmdbd differs from cluster.yaml.
    pub changes: bool,
    /// With `apply`: a change slurmdbd failed, or changes refused (after the lines).
    pub failed: Option<String>,
}

/// slurmdbd's QOS, accounts and users against FILE's `spec.accounting` (LAST: the file applied
/// last, to tell hand edits); reconciled when APPLY.
pub async fn accounting(
    client: &Client,
    file: &Path,
    last: Option<&Path>,
    apply: bool,
) -> Result<Accounting, Error> {
    let (_, c) = cluster_at(file)?;
    let last = last.map(|f| read(f).and_then(|l| load(&l))).transpose()?;
    let last = last.as_ref();
    if !apply {
        let d = crate::accounting::observe(client, &c, last).await?;
        return Ok(Accounting {
            lines: d.lines(),
            changes: !d.is_empty(),
            failed: None,
        });
    }
    let o = crate::accounting::reconcile(client, &c, last).await?;
    let mut lines = o.lines();
    lines.push(format!("{} slurmdbd writes", o.writes));
    let refused: Vec<&str> = o
        .diff
        .changes
        .iter()
        .filter_map(|ch| ch.refused.as_deref())
        .collect();
    let failed = match &o.failed {
        Some((ch, e)) => Some(format!("accounting: {}: {e}", ch.key)),
        None if !refused.is_empty() => Some(format!("accounting: refused: {}", refused.join("; "))),
        None => None,
    };
    Ok(Accounting {
        lines,
        changes: false,
        failed,
    })
}
