//! `slurmops rollout`: outdated workers replaced, each drained in Slurm first (`ops::rollout`).

use crate::cli::prelude::*;
use crate::controller::Decrees;
use crate::rollout::Observer;

#[derive(clap::Args)]
pub struct Args {
    #[arg(default_value = ".")]
    path: PathBuf,
    /// The NodeSet whose workers to replace (default: every NodeSet, all at once).
    #[arg(long)]
    node_set: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
    /// slurmrestd (required: no worker is replaced without Slurm's word).
    #[command(flatten)]
    slurm: SlurmArgs,
    /// Proceed past this NodeSet's failed canary on purpose (recorded as an Event), then roll it.
    #[arg(long, value_name = "NODESET")]
    resume: Option<String>,
    /// Drain workers of NodeSets with `update.window` outside their maintenance windows, on
    /// purpose (recorded as an Event on each such NodeSet). Without it, they wait for a window.
    #[arg(long)]
    ignore_window: bool,
}

pub fn exec(a: Args) -> Outcome {
    let request = ops::rollout::Request {
        path: &a.path,
        kubeconfig: a.kube.kubeconfig.as_deref(),
        context: a.kube.context.as_deref(),
        node_set: a.node_set.clone(),
        decrees: Decrees {
            resume: a.resume.clone(),
            ignore_window: a.ignore_window,
        },
    };
    let slurm = || a.slurm.client("no worker is replaced without Slurm's word");
    let observer = Observer::new(|set, e| println!("{set}: {e}"));
    let rolled = ops::rollout::rollout(&request, slurm, &observer)?;
    print!("{}", rolled.text());
    Ok(Success::Done)
}
