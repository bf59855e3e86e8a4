//! `slurmops autoscale`: runs the autoscaler over a cluster.yaml, once or every interval.

use std::path::PathBuf;

use super::apply::{KubeArgs, runtime};
use super::{EXIT_ERROR, EXIT_OK, load, read};
use crate::apply::Cluster;
use crate::spec::values::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[arg(default_value = ".")]
    path: PathBuf,
    #[command(flatten)]
    kube: KubeArgs,
    /// slurmrestd URL (pending jobs and node states come from Slurm).
    #[arg(long, env = "SLURMRESTD_URL")]
    slurmrestd_url: String,
    #[arg(long, env = "SLURM_JWT", hide_env_values = true)]
    slurm_jwt: String,
    /// One pass, then exit.
    #[arg(long)]
    once: bool,
    /// Time between passes.
    #[arg(long, default_value = "15s", value_parser = Duration::parse)]
    interval: Duration,
}

pub fn run(a: Args) -> i32 {
    let Ok(loaded) = read(&a.path) else {
        return EXIT_ERROR;
    };
    let Ok(c) = load(&loaded) else {
        return EXIT_ERROR;
    };
    if !c.spec.node_sets.iter().any(|n| n.autoscale.is_some()) {
        println!("{}: no NodeSet has autoscale rules", loaded.name);
        return EXIT_OK;
    }
    let slurm = match super::token_client(&a.slurmrestd_url, &a.slurm_jwt) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_ERROR;
        }
    };
    let interval = std::time::Duration::from_secs(a.interval.as_secs().max(1));
    runtime().block_on(async {
        let cluster =
            match Cluster::connect(a.kube.kubeconfig.as_deref(), a.kube.context.as_deref()).await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return EXIT_ERROR;
                }
            };
        let mut last: Vec<String> = Vec::new();
        loop {
            match crate::autoscale::run::tick(&cluster, &slurm, &c).await {
                Ok(outcomes) => {
                    // Print what changed, not the same holding line every pass.
                    let lines: Vec<String> = outcomes.iter().map(ToString::to_string).collect();
                    for l in lines.iter().filter(|l| !last.contains(l)) {
                        println!("{l}");
                    }
                    last = lines;
                }
                Err(e) if a.once => {
                    eprintln!("error: {e}");
                    return EXIT_ERROR;
                }
                // In a loop, Slurm or the API being away is a pass skipped, not the end.
                Err(e) => eprintln!("error: {e}"),
            }
            if a.once {
                return EXIT_OK;
            }
            tokio::time::sleep(interval).await;
        }
    })
}
