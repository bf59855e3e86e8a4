//! What `slurmops autoscale` and `slurmops sync` share: a cluster.yaml, a slurmrestd connection,
//! the cluster, and a pass run once or every interval. In a loop, Slurm or the API being away is a
//! pass skipped (and said), not the end; with `--once` it is exit code 1.

use std::path::PathBuf;

use super::apply::{KubeArgs, runtime};
use super::{CliError, Outcome, Success, load, read};
use crate::cluster::ClusterFile;
use crate::cluster::values::Duration;
use crate::k8s::Connection;
use crate::slurm::Client;

#[derive(clap::Args)]
pub struct WatchArgs {
    #[arg(default_value = ".")]
    pub path: PathBuf,
    #[command(flatten)]
    pub kube: KubeArgs,
    /// slurmrestd (node states and jobs come from Slurm).
    #[command(flatten)]
    pub slurm: super::SlurmArgs,
    /// One pass, then exit.
    #[arg(long)]
    pub once: bool,
    /// Time between passes.
    #[arg(long, default_value = "15s", value_parser = Duration::parse)]
    pub interval: Duration,
}

/// Loads cluster.yaml and connects to Slurm.
pub fn prepare(a: &WatchArgs) -> Result<(ClusterFile, Client), CliError> {
    let c = load(&read(&a.path)?)?;
    let s = a
        .slurm
        .client("node states and jobs come from Slurm")
        .map_err(CliError::Other)?;
    Ok((c, s))
}

/// One controller pass over C that moves no worker and keeps KEEP (worker sync, autoscale): the
/// daemon's pass, its writes behind the same code, with no Lease to hold. GRACE: seconds a
/// Ready worker may stay unknown to Slurm.
pub async fn upkeep(
    cluster: &Connection,
    slurm: &Client,
    c: &ClusterFile,
    keep: crate::controller::upkeep::Keep,
    grace: i64,
    observer: &crate::rollout::Observer,
) -> Result<crate::controller::Outcome, String> {
    let env = crate::controller::Env {
        cluster,
        slurm: Some(slurm),
        cache: None,
        fence: &|| true,
        observer,
        registration_grace: grace,
    };
    let rendered = crate::render::Rendered::default();
    let t = crate::controller::Target {
        c,
        text: "",
        rendered: &rendered,
        apply: None,
        scope: crate::controller::PassScope {
            moves: crate::controller::Moves::Nothing,
            keep,
            ..Default::default()
        },
        fresh: true,
    };
    let out = crate::controller::pass(&env, &t)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(e) = &out.slurm_error {
        return Err(format!("Slurm state unknown, nothing changed: {e}"));
    }
    match &out.upkeep_error {
        Some(e) => Err(e.clone()),
        None => Ok(out),
    }
}

/// Runs PASS once (`--once`) or every interval; PASS prints what it did.
pub fn every(
    a: &WatchArgs,
    mut pass: impl AsyncFnMut(&Connection) -> Result<(), String>,
) -> Outcome {
    let interval = std::time::Duration::from_secs(a.interval.as_secs().max(1));
    runtime().block_on(async {
        let cluster =
            Connection::connect(a.kube.kubeconfig.as_deref(), a.kube.context.as_deref()).await?;
        loop {
            match pass(&cluster).await {
                Ok(()) if a.once => return Ok(Success::Done),
                Ok(()) => {}
                Err(e) if a.once => return Err(CliError::Other(e)),
                Err(e) => eprintln!("error: {e}"),
            }
            tokio::time::sleep(interval).await;
        }
    })
}
