//! `slurmops autoscale`: autoscaled NodeSets scaled from Slurm's queue, once or every interval
//! (`ops::upkeep::autoscale`).

use crate::cli::prelude::*;
use crate::rollout::Observer;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    watch: WatchArgs,
}

pub fn exec(a: Args) -> Outcome {
    let (c, slurm) = a.watch.prepare()?;
    if !ops::upkeep::autoscales(&c) {
        println!("{}: no NodeSet has autoscale rules", c.metadata.name);
        return Ok(Success::Done);
    }
    let observer = Observer::new(|set, e| {
        if ops::upkeep::is_scaling(e) {
            println!("{set}: {e}");
        }
    });
    let say = |line: &str| println!("{line}");
    ops::upkeep::autoscale(&c, &slurm, &a.watch.every(), &observer, say)?;
    Ok(Success::Done)
}
