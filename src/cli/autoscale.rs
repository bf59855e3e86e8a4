//! `slurmops autoscale`: runs the autoscaler over a cluster.yaml, once or every interval.

use super::watch::{self, every};
use super::{Outcome, Success};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    watch: watch::WatchArgs,
}

pub fn run(a: Args) -> Outcome {
    let (c, slurm) = watch::prepare(&a.watch)?;
    if !c.spec.node_sets.iter().any(|n| n.autoscale.is_some()) {
        println!("{}: no NodeSet has autoscale rules", c.metadata.name);
        return Ok(Success::Done);
    }
    let mut last: Vec<String> = Vec::new();
    every(&a.watch, async |cluster| {
        let outcomes = crate::autoscale::run::tick(cluster, &slurm, &c, &|| true)
            .await
            .map_err(|e| e.to_string())?;
        // Print what changed, not the same holding line every pass.
        let lines: Vec<String> = outcomes.iter().map(ToString::to_string).collect();
        for l in lines.iter().filter(|l| !last.contains(l)) {
            println!("{l}");
        }
        last = lines;
        Ok(())
    })
}
