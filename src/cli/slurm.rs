//! `slurmops slurm nodes|drain|resume`: the drain primitives as an admin tool, on the same code
//! the rollouts use, so what an operator sees here is what slurmops sees.

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;

use super::{CliError, Outcome, Success};
use crate::slurm::auth::{Credentials, KeyBytes, Secret};
use crate::slurm::{Client, Config, DataParser, Drain, Node, Resume, SlurmError, SlurmNodes};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Subcommand)]
enum Cmd {
    /// Table of nodes: state, reason, jobs, NodeSet.
    #[command(
        after_help = "Examples:\n  slurmops slurm nodes --slurmrestd-url http://slurm-restapi:6820 --slurm-jwt-file token\n  slurmops slurm nodes -o json | jq -r '.nodes[] | select(.jobs == []) | .name'"
    )]
    Nodes {
        /// text, or json for scripts (`version`, `nodes`: name, state, reason, jobs, nodeSet).
        #[arg(long, short = 'o', value_enum, default_value_t = super::Output::Text)]
        output: super::Output,
    },
    /// Drain NODE (reason prefixed "slurmops:"); a drain someone else set is left untouched.
    #[command(
        after_help = "Example:\n  slurmops slurm drain gpu-3 --reason 'bad HBM' --slurmrestd-url http://slurm-restapi.slurm:6820 --slurm-jwt-file token"
    )]
    Drain {
        node: String,
        #[arg(long)]
        reason: String,
    },
    /// Resume NODE, only if slurmops drained it.
    #[command(
        after_help = "Example:\n  slurmops slurm resume gpu-3 --slurmrestd-url http://slurm-restapi.slurm:6820 --slurm-jwt-file token"
    )]
    Resume { node: String },
    /// Compare slurmdbd's QOS, accounts and users with cluster.yaml's `spec.accounting`, in
    /// Slurm's words; with --apply, reconcile them (the accounting step of `apply`, without
    /// Kubernetes). Exit 0 nothing to do, 2 changes (without --apply), 1 error.
    #[command(
        after_help = "Examples:\n  slurmops slurm accounting cluster.yaml --slurmrestd-url http://slurm-restapi.slurm:6820 --slurm-jwt-file token\n  slurmops slurm accounting cluster.yaml --apply --slurmrestd-url http://slurm-restapi.slurm:6820 --slurm-jwt-file token"
    )]
    Accounting {
        /// cluster.yaml (file or directory).
        file: PathBuf,
        #[arg(long)]
        apply: bool,
        /// The cluster.yaml applied last: what differs from it in slurmdbd is a hand edit
        /// (reported only with `policy.detectDriftOnly`), not a change in git.
        #[arg(long)]
        last_applied: Option<PathBuf>,
    },
}

/// The Slurm connection, in the spelling every command shares (`--slurmrestd-url`,
/// `--slurm-jwt`, `--slurm-jwt-file`, `--slurm-jwt-key-file`, `--slurm-user`, as `run`); the
/// earlier `--url`, `--token`, `--token-file`, `--jwt-key-file`, `--user` and `--cluster` stay as
/// hidden aliases for a release.
#[derive(clap::Args)]
struct Connection {
    /// slurmrestd base URL.
    #[arg(
        long = "slurmrestd-url",
        alias = "url",
        env = "SLURMRESTD_URL",
        global = true
    )]
    url: Option<String>,
    /// JWT to send (X-SLURM-USER-TOKEN).
    #[arg(
        long = "slurm-jwt",
        alias = "token",
        env = "SLURM_JWT",
        hide_env_values = true,
        global = true
    )]
    token: Option<String>,
    /// Read the JWT from this file.
    #[arg(
        long = "slurm-jwt-file",
        alias = "token-file",
        global = true,
        conflicts_with = "token"
    )]
    token_file: Option<PathBuf>,
    /// Mint short-lived JWTs from the cluster's HS256 key file (jwt_hs256.key).
    #[arg(long = "slurm-jwt-key-file", alias = "jwt-key-file", global = true, conflicts_with_all = ["token", "token_file"])]
    jwt_key_file: Option<PathBuf>,
    /// Slurm user of minted tokens (a Slurm admin: SlurmUser or root); sent as X-SLURM-USER-NAME.
    #[arg(
        long = "slurm-user",
        alias = "user",
        global = true,
        default_value = "slurm"
    )]
    user: String,
    /// PEM CA bundle for an https slurmrestd.
    #[arg(long, global = true)]
    ca_file: Option<PathBuf>,
    /// Data parser to speak (default: the newest slurmrestd serves).
    #[arg(long, global = true, value_parser = DataParser::names())]
    data_parser: Option<String>,
    /// Connect as slurmops does: cluster.yaml (file or directory) names the JWT key Secret (read
    /// with the kubeconfig) to mint tokens from, and the slurmrestd Service (the default URL,
    /// reachable in the cluster; elsewhere pass --slurmrestd-url, e.g. after kubectl port-forward).
    #[arg(long = "cluster-file", alias = "cluster", global = true, conflicts_with_all = ["token", "token_file", "jwt_key_file"])]
    cluster_file: Option<PathBuf>,
    /// kubeconfig for --cluster-file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// kubeconfig context for --cluster-file.
    #[arg(long, global = true)]
    context: Option<String>,
}

pub fn run(args: Args) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let connected = match &args.conn.cluster_file {
        Some(f) => rt.block_on(from_cluster(&args.conn, f)),
        None => connect(&args.conn),
    };
    let client = connected?;
    rt.block_on(async {
        match &args.cmd {
            Cmd::Nodes { output } => nodes(&client, *output).await,
            Cmd::Drain { node, reason } => drain(&client, node, reason).await,
            Cmd::Resume { node } => resume(&client, node).await,
            Cmd::Accounting {
                file,
                apply,
                last_applied,
            } => accounting(&client, file, last_applied.as_deref(), *apply).await,
        }
    })
}

async fn accounting(
    client: &Client,
    file: &std::path::Path,
    last: Option<&std::path::Path>,
    apply: bool,
) -> Outcome {
    let load = |f: &std::path::Path| super::read(f).and_then(|l| super::load(&l));
    let c = load(file)?;
    let last = last.map(load).transpose()?;
    let last = last.as_ref();
    if !apply {
        let d = crate::accounting::observe(client, &c, last).await?;
        for line in d.lines() {
            println!("{line}");
        }
        return Ok(if d.is_empty() {
            Success::Done
        } else {
            Success::Changes
        });
    }
    let o = crate::accounting::reconcile(client, &c, last).await?;
    for line in o.lines() {
        println!("{line}");
    }
    println!("{} slurmdbd writes", o.writes);
    let refused: Vec<&str> = o
        .diff
        .changes
        .iter()
        .filter_map(|ch| ch.refused.as_deref())
        .collect();
    if let Some((ch, e)) = &o.failed {
        return Err(CliError::Other(format!("accounting: {}: {e}", ch.key)));
    }
    if !refused.is_empty() {
        return Err(CliError::Other(format!(
            "accounting: refused: {}",
            refused.join("; ")
        )));
    }
    Ok(Success::Done)
}

fn connect(c: &Connection) -> Result<Client, SlurmError> {
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
    config.allow_http = super::allow_http();
    config.parser = c.data_parser.as_deref().and_then(DataParser::parse);
    if let Some(ca) = &c.ca_file {
        config.ca_pem = Some(read(ca, "CA bundle")?);
    }
    Client::new(config)
}

/// Credentials and URL from cluster.yaml: the JWT key from its Secret, tokens minted per use.
async fn from_cluster(c: &Connection, path: &std::path::Path) -> Result<Client, SlurmError> {
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
        super::allow_http(),
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

async fn nodes(client: &Client, output: super::Output) -> Outcome {
    let nodes = client.nodes().await?;
    // The queue only when some node holds jobs (see `SlurmNodes::jobs_on`).
    let jobs = match nodes.values().any(|n| n.state.is_busy()) {
        true => client.jobs().await?,
        false => Vec::new().into(),
    };
    // Indexed by node once: 10,000 nodes and 50,000 jobs are not compared pair by pair.
    let mut on: std::collections::HashMap<&str, Vec<String>> = Default::default();
    for j in jobs.iter().filter(|j| j.holds_nodes()) {
        for n in &j.nodes {
            let ids = on.entry(n.as_str()).or_default();
            let id = j.id.to_string();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    if matches!(output, super::Output::Json) {
        let list: Vec<serde_json::Value> = nodes
            .values()
            .map(|n| {
                let jobs: Vec<u64> = on
                    .get(n.name.as_str())
                    .into_iter()
                    .flatten()
                    .filter_map(|id| id.parse().ok())
                    .collect();
                serde_json::json!({"name": n.name, "state": n.state.to_string(),
                    "reason": n.reason, "jobs": jobs, "nodeSet": node_set_of(n)})
            })
            .collect();
        let doc = serde_json::json!({"version": 1, "nodes": list});
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("JSON values serialize")
        );
        return Ok(Success::Done);
    }
    let mut rows = vec![[
        "NODE".to_string(),
        "STATE".into(),
        "REASON".into(),
        "JOBS".into(),
        "NODESET".into(),
    ]];
    for n in nodes.values() {
        let ids = on
            .get(n.name.as_str())
            .map(Vec::as_slice)
            .unwrap_or_default();
        rows.push([
            n.name.clone(),
            n.state.to_string(),
            if n.reason.is_empty() {
                "-".into()
            } else {
                n.reason.clone()
            },
            if ids.is_empty() {
                "-".into()
            } else {
                ids.join(",")
            },
            node_set_of(n).unwrap_or("-").to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let cells: Vec<String> = (0..5)
            .map(|i| format!("{:w$}", r[i], w = widths[i]))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    Ok(Success::Done)
}

async fn drain(client: &Client, node: &str, reason: &str) -> Outcome {
    match client.drain(node, reason).await? {
        Drain::Requested => println!("{node}: drain requested"),
        Drain::AlreadyOurs => println!("{node}: already drained by slurmops (reason refreshed)"),
        Drain::HeldByOther { reason, by } => {
            println!("{node}: already drained by {by} ({reason:?}); left as it is")
        }
    }
    let n = client.node(node).await?;
    let jobs = client.jobs_on(node).await?;
    let state = if n.state.is_drained() {
        "drained"
    } else {
        "draining"
    };
    println!(
        "{node}: {state} ({}), {} job(s) still on it",
        n.state,
        jobs.len()
    );
    Ok(Success::Done)
}

async fn resume(client: &Client, node: &str) -> Outcome {
    match client.resume(node).await? {
        Resume::Resumed => {
            println!("{node}: resumed");
            Ok(Success::Done)
        }
        Resume::NotDrained => {
            println!("{node}: not drained; nothing to do");
            Ok(Success::Done)
        }
        Resume::HeldByOther { reason, by } => Err(CliError::Other(format!(
            "{node} was drained by {by} ({reason:?}), not by slurmops; refusing to resume it (if that drain is over: scontrol update nodename={node} state=resume)"
        ))),
    }
}
