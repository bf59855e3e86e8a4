//! `slurmops slurm nodes|drain|resume|accounting`: the drain primitives and the accounting step
//! as an admin tool (`ops::slurm`), on the same code the rollouts use.

use clap::Subcommand;

use crate::cli::prelude::*;
use crate::slurm::DataParser;

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
        #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
        output: Output,
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

pub fn exec(args: Args) -> Outcome {
    let c = args.conn;
    let connect = ops::slurm::Connect {
        url: c.url,
        token: c.token,
        token_file: c.token_file,
        jwt_key_file: c.jwt_key_file,
        user: c.user,
        ca_file: c.ca_file,
        data_parser: c.data_parser,
        cluster_file: c.cluster_file,
        kubeconfig: c.kubeconfig,
        context: c.context,
    };
    ops::runtime().block_on(async {
        let client = ops::slurm::client(&connect).await?;
        match &args.cmd {
            Cmd::Nodes { output } => {
                let rows = ops::slurm::nodes(&client).await?;
                match output {
                    Output::Json => print!("{}", ops::slurm::nodes_json(&rows)),
                    Output::Text => print!("{}", ops::slurm::nodes_table(&rows)),
                }
                Ok(Success::Done)
            }
            Cmd::Drain { node, reason } => {
                print!("{}", ops::slurm::drain(&client, node, reason).await?);
                Ok(Success::Done)
            }
            Cmd::Resume { node } => {
                print!("{}", ops::slurm::resume(&client, node).await?);
                Ok(Success::Done)
            }
            Cmd::Accounting {
                file,
                apply,
                last_applied,
            } => {
                let a =
                    ops::slurm::accounting(&client, file, last_applied.as_deref(), *apply).await?;
                for line in &a.lines {
                    println!("{line}");
                }
                match (a.failed, a.changes) {
                    (Some(why), _) => Err(CliError::Other(why)),
                    (None, true) => Ok(Success::Changes),
                    (None, false) => Ok(Success::Done),
                }
            }
        }
    })
}
