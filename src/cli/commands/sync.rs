//! `slurmops sync`: Slurm node state onto worker pods, cordons and drain requests into drains,
//! unregistered workers replaced; once or every interval (`ops::upkeep::sync`).

use crate::cli::prelude::*;
use crate::cluster::values::Duration;
use crate::rollout::Observer;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    watch: WatchArgs,
    /// A worker Ready this long and still unknown to Slurm is replaced.
    #[arg(long, default_value = "5m", value_parser = Duration::parse)]
    registration_grace: Duration,
}

pub fn exec(a: Args) -> Outcome {
    let (c, slurm) = a.watch.prepare()?;
    let grace = a.registration_grace.as_secs() as i64;
    // Each write as it is made: "POD: Slurm condition updated", "POD: drained: REASON", ...
    let observer = Observer::new(|_, e| println!("{e}"));
    let warn = |line: &str| eprintln!("{line}");
    ops::upkeep::sync(&c, &slurm, &a.watch.every(), grace, &observer, warn)?;
    Ok(Success::Done)
}
