//! `slurmops sync`: Slurm node state onto worker pods, cordons into drains, unregistered workers
//! replaced; once or every interval.

use super::Outcome;
use super::watch::{self, every};
use crate::spec::values::Duration;
use crate::sync::Syncer;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    watch: watch::WatchArgs,
    /// A Ready worker unknown to Slurm this long is replaced.
    #[arg(long, default_value = "5m", value_parser = Duration::parse)]
    registration_grace: Duration,
}

pub fn run(a: Args) -> Outcome {
    let (c, slurm) = watch::prepare(&a.watch)?;
    let mut syncer = Syncer::new(std::time::Duration::from_secs(
        a.registration_grace.as_secs(),
    ));
    let mut warned = Vec::new();
    every(&a.watch, async |cluster| {
        let r = syncer
            .tick(cluster, &slurm, &c, &|| true)
            .await
            .map_err(|e| e.to_string())?;
        for (what, list) in [
            ("Slurm condition updated", &r.conditions),
            (
                "labelled busy: jobs run there, evictions blocked",
                &r.marked_busy,
            ),
            ("busy label removed: no job runs there", &r.marked_idle),
            (
                "resumed: the problem of its Kubernetes node cleared",
                &r.resumed_for_node,
            ),
            (
                "the problem of its Kubernetes node cleared; held until its active checks pass",
                &r.rechecked_for_node,
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
        for (n, why) in &r.drained_for_node {
            println!("{n}: drained: {why}");
        }
        for w in r.warnings.iter().filter(|w| !warned.contains(*w)) {
            eprintln!("warning: {w}");
        }
        warned = r.warnings;
        Ok(())
    })
}
