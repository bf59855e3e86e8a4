//! The flags several commands share: how to reach the cluster and slurmrestd, how often, and
//! what to print.

use std::path::PathBuf;

use clap::ValueEnum;

use crate::cluster::values::Duration;

#[derive(clap::Args)]
pub struct KubeArgs {
    /// kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context.
    #[arg(long)]
    pub context: Option<String>,
}

/// How a command reaches slurmrestd: the same two flags (or environment variables) for every
/// command that talks to Slurm (`run` adds token files and minted tokens, `slurm` its own).
#[derive(clap::Args, Clone, Default)]
pub struct SlurmArgs {
    /// slurmrestd URL (e.g. http://CLUSTER-restapi.NAMESPACE.svc:6820).
    #[arg(long, env = "SLURMRESTD_URL")]
    pub slurmrestd_url: Option<String>,
    /// JWT sent to slurmrestd (X-SLURM-USER-TOKEN); better from SLURM_JWT than the command line.
    #[arg(long, env = "SLURM_JWT", hide_env_values = true)]
    pub slurm_jwt: Option<String>,
}

impl SlurmArgs {
    /// Both flags, when both are given.
    pub fn given(&self) -> Option<(&str, &str)> {
        Some((self.slurmrestd_url.as_deref()?, self.slurm_jwt.as_deref()?))
    }

    /// A client for both flags, for a command that cannot work without Slurm (WHY says what it
    /// needs it for), or why not.
    pub fn client(&self, why: &str) -> Result<crate::slurm::Client, crate::ops::Error> {
        let (url, token) = self.given().ok_or_else(|| {
            crate::ops::Error::Other(format!(
                "--slurmrestd-url and --slurm-jwt (or SLURMRESTD_URL and SLURM_JWT) are needed: {why}"
            ))
        })?;
        crate::ops::token_client(url, token).map_err(|e| crate::ops::Error::Other(e.to_string()))
    }
}

/// What `sync` and `autoscale` share: a cluster.yaml, the cluster, slurmrestd, once or every
/// interval.
#[derive(clap::Args)]
pub struct WatchArgs {
    #[arg(default_value = ".")]
    pub path: PathBuf,
    #[command(flatten)]
    pub kube: KubeArgs,
    /// slurmrestd (node states and jobs come from Slurm).
    #[command(flatten)]
    pub slurm: SlurmArgs,
    /// One pass, then exit.
    #[arg(long)]
    pub once: bool,
    /// Time between passes.
    #[arg(long, default_value = "15s", value_parser = Duration::parse)]
    pub interval: Duration,
}

impl WatchArgs {
    /// cluster.yaml loaded, and a client for slurmrestd (node states and jobs come from Slurm).
    pub fn prepare(
        &self,
    ) -> Result<(crate::cluster::ClusterFile, crate::slurm::Client), crate::ops::Error> {
        let (_, c) = crate::ops::cluster_at(&self.path)?;
        let slurm = self.slurm.client("node states and jobs come from Slurm")?;
        Ok((c, slurm))
    }

    /// How often, against which cluster.
    pub fn every(&self) -> crate::ops::upkeep::Every<'_> {
        crate::ops::upkeep::Every {
            kubeconfig: self.kube.kubeconfig.as_deref(),
            context: self.kube.context.as_deref(),
            once: self.once,
            interval: std::time::Duration::from_secs(self.interval.as_secs()),
        }
    }
}

/// `--output` of the commands that print what a script would parse.
#[derive(Clone, Copy, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// `--output` of `plan`.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Markdown,
    Json,
}
