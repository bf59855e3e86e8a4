//! `slurmops sync`: Slurm node state onto worker pods, cordons and drain requests into drains,
//! unregistered workers replaced; once or every interval. Each round is the daemon's pass with
//! worker sync alone (`controller::upkeep`).

use super::Outcome;
use super::watch::{self, every};
use crate::cluster::values::Duration;
use crate::controller::upkeep::Keep;
use crate::rollout::Observer;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    watch: watch::WatchArgs,
    /// A worker Ready this long and still unknown to Slurm is replaced.
    #[arg(long, default_value = "5m", value_parser = Duration::parse)]
    registration_grace: Duration,
}

pub fn run(a: Args) -> Outcome {
    let (c, slurm) = watch::prepare(&a.watch)?;
    let grace = a.registration_grace.as_secs() as i64;
    let keep = Keep {
        sync: true,
        autoscale: false,
    };
    // Each write as it is made: "POD: Slurm condition updated", "POD: drained: REASON", ...
    let observer = Observer::new(|_, e| println!("{e}"));
    let mut warned = None;
    every(&a.watch, async |cluster| {
        let out = watch::upkeep(cluster, &slurm, &c, keep, grace, &observer).await?;
        // The Kubernetes nodes could not be read: said once, not every round.
        let warning = out.health_error.clone();
        if let Some(w) = warning.as_ref().filter(|w| warned.as_ref() != Some(*w)) {
            eprintln!("warning: cordons and node health are not followed: {w}");
        }
        warned = warning;
        Ok(())
    })
}
