//! `slurmops autoscale`: runs the autoscaler over a cluster.yaml, once or every interval.

use super::watch::{self, every};
use super::{Outcome, Success};
use crate::controller::upkeep::Keep;
use crate::rollout::Observer;

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
    let keep = Keep {
        sync: false,
        autoscale: true,
    };
    let grace = crate::controller::decide::REGISTRATION_GRACE;
    let observer = Observer::new(|set, e| {
        if matches!(e, crate::rollout::Event::Scaled { .. }) {
            println!("{set}: {e}");
        }
    });
    let mut last: Vec<String> = Vec::new();
    every(&a.watch, async |cluster| {
        let out = watch::upkeep(cluster, &slurm, &c, keep, grace, &observer).await?;
        // What each NodeSet waits for, when that changed (not the same line every round).
        let lines: Vec<String> = out.upkeep.scale.iter().map(waiting).collect();
        for l in lines.iter().filter(|l| !l.is_empty() && !last.contains(l)) {
            println!("{l}");
        }
        last = lines;
        Ok(())
    })
}

/// What NodeSet S waits for, in a line; empty when it changes now (the change is printed).
fn waiting(s: &crate::controller::upkeep::Scale) -> String {
    use crate::controller::autoscale::Decision;
    match &s.decision {
        Decision::Hold { why } => format!("{}: {} worker(s), holding: {why}", s.node_set, s.from),
        Decision::ScaleIn { leaving, .. } if s.to.is_none() => format!(
            "{}: {} worker(s), waiting for {} to drain before scaling in",
            s.node_set,
            s.from,
            leaving.join(", ")
        ),
        _ => String::new(),
    }
}
