//! `ops`: what each command does, as library calls (cargo's `ops` under its `commands`). A
//! command parses its flags, calls one function here and prints what it returns; every write to
//! the cluster or to Slurm a command makes goes through `controller::pass` (apply, rollout,
//! sync, autoscale) — the operator's own Slurm tool (`slurm drain|resume|accounting`) aside,
//! which acts as the person running it.

pub mod apply;
pub mod import;
pub mod plan;
pub mod plan_live;
pub mod render;
pub mod rollout;
pub mod slurm;
pub mod status;
pub mod upkeep;
pub mod validate;

use std::path::Path;

use crate::cluster::{self, ClusterFile};
use crate::source::{self, GitCli, Loaded};

/// Why a command failed, typed from where it happened up to the command line, which prints it
/// once.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What is wrong with a file, a line each (positions first), the last one a summary.
    #[error("{}", .lines.join("\n"))]
    Problems { lines: Vec<String> },
    /// Already told (a JSON document on stdout says why).
    #[error("the problems above")]
    Reported,
    #[error(transparent)]
    Apply(#[from] crate::apply::ApplyError),
    #[error(transparent)]
    Connect(#[from] crate::k8s::ConnectError),
    #[error(transparent)]
    Slurm(#[from] crate::slurm::SlurmError),
    #[error(transparent)]
    Pass(#[from] crate::controller::PassError),
    #[error(transparent)]
    Rollout(#[from] crate::controller::drive::RolloutError),
    /// Anything else, in words (a file that cannot be written, a refused accounting change).
    #[error("{0}")]
    Other(String),
}

/// A runtime for one command: one thread, as a command needs no more.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// cluster.yaml at PATH (a file, or a directory holding one).
pub fn read(path: &Path) -> Result<Loaded, Error> {
    source::read_file(&source::cluster_file(path)).map_err(|e| Error::Other(e.to_string()))
}

/// cluster.yaml at revision REV of the repository holding FILE; None when it has none there.
pub fn read_revision(rev: &str, file: &Path) -> Result<Option<Loaded>, Error> {
    source::read_revision(&GitCli, rev, file).map_err(|e| Error::Other(e.to_string()))
}

/// LOADED typed and validated, or its problems each at its position.
pub fn load(loaded: &Loaded) -> Result<ClusterFile, Error> {
    cluster::load(&loaded.name, &loaded.text).map_err(|diags| {
        let mut lines: Vec<String> = diags.iter().map(ToString::to_string).collect();
        lines.push(format!(
            "{}: {} error(s); nothing was changed",
            loaded.name,
            diags.len()
        ));
        Error::Problems { lines }
    })
}

/// The cluster.yaml at PATH, read and loaded.
pub fn cluster_at(path: &Path) -> Result<(Loaded, ClusterFile), Error> {
    let l = read(path)?;
    let c = load(&l)?;
    Ok((l, c))
}

/// A slurmrestd client authenticating with the JWT TOKEN.
pub fn token_client(
    url: &str,
    token: &str,
) -> Result<crate::slurm::Client, crate::slurm::SlurmError> {
    let creds = crate::slurm::auth::Credentials::Token {
        token: crate::slurm::auth::Secret::new(token.to_string()),
        user: None,
    };
    let mut config = crate::slurm::Config::new(url.to_string(), creds);
    config.allow_http = allow_http();
    crate::slurm::Client::new(config)
}

/// `SLURMOPS_ALLOW_HTTP=true`: tokens may go over plain http:// to any host (see
/// `slurm::client::plain_http_ok` for what is allowed without it).
pub fn allow_http() -> bool {
    std::env::var("SLURMOPS_ALLOW_HTTP").is_ok_and(|v| matches!(v.as_str(), "true" | "1"))
}

/// Connects to the cluster of KUBECONFIG (default: KUBECONFIG, ~/.kube/config, or in-cluster).
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<crate::k8s::Connection, Error> {
    Ok(crate::k8s::Connection::connect(kubeconfig, context).await?)
}
