//! `slurmops sync`: Slurm node state onto worker pods, cordons into drains, unregistered workers
//! replaced; once or every interval.

use std::path::PathBuf;

use super::apply::{KubeArgs, runtime};
use super::{EXIT_ERROR, EXIT_OK, load, read};
use crate::apply::Cluster;
use crate::spec::values::Duration;
use crate::sync::Syncer;

#[derive(clap::Args)]
pub struct Args {
    #[arg(default_value = ".")]
    path: PathBuf,
    #[command(flatten)]
    kube: KubeArgs,
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
    /// A Ready worker unknown to Slurm this long is replaced.
    #[arg(long, default_value = "5m", value_parser = Duration::parse)]
    registration_grace: Duration,
}

pub fn run(a: Args) -> i32 {
    let Ok(loaded) = read(&a.path) else {
        return EXIT_ERROR;
    };
    let Ok(c) = load(&loaded) else {
        return EXIT_ERROR;
    };
    let slurm = match super::token_client(&a.slurmrestd_url, &a.slurm_jwt) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_ERROR;
        }
    };
    let mut syncer = Syncer::new(std::time::Duration::from_secs(
        a.registration_grace.as_secs(),
    ));
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
        let mut warned = Vec::new();
        loop {
            match syncer.tick(&cluster, &slurm, &c).await {
                Ok(r) => {
                    for (what, list) in [
                        ("Slurm condition updated", &r.conditions),
                        (
                            "drained: its Kubernetes node is cordoned",
                            &r.drained_for_cordon,
                        ),
                        (
                            "resumed: its Kubernetes node is uncordoned",
                            &r.resumed_after_uncordon,
                        ),
                        (
                            "replaced: Ready but never registered in Slurm",
                            &r.replaced_unregistered,
                        ),
                    ] {
                        for n in list {
                            println!("{n}: {what}");
                        }
                    }
                    for w in r.warnings.iter().filter(|w| !warned.contains(*w)) {
                        eprintln!("warning: {w}");
                    }
                    warned = r.warnings;
                }
                Err(e) if a.once => {
                    eprintln!("error: {e}");
                    return EXIT_ERROR;
                }
                Err(e) => eprintln!("error: {e}"),
            }
            if a.once {
                return EXIT_OK;
            }
            tokio::time::sleep(interval).await;
        }
    })
}
