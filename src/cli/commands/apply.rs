//! `slurmops apply`: cluster.yaml applied through the controller's pass (`ops::apply`).

use crate::apply::Options;
use crate::cli::prelude::*;
use crate::cluster::values::Duration;
use crate::rollout::Observer;

#[derive(clap::Args)]
pub struct Args {
    #[arg(default_value = ".")]
    path: PathBuf,
    #[command(flatten)]
    kube: KubeArgs,
    /// Take over fields other field managers own.
    #[arg(long)]
    force_conflicts: bool,
    /// Allow pruning more than spec.policy.maxPrune (or everything).
    #[arg(long)]
    allow_mass_prune: bool,
    /// Report hand edits (drift) without correcting them; changes from cluster.yaml still apply.
    #[arg(long)]
    detect_only: bool,
    /// Wait this long for what was applied to become available (e.g. 5m); 0s: do not wait.
    #[arg(long, default_value = "5m", value_parser = Duration::parse)]
    wait: Duration,
    /// slurmrestd: the controller's pass drains leaving workers and rolls outdated ones. Without
    /// it, only NodeSets without pods are pruned and no scale-in over workers is applied.
    #[command(flatten)]
    slurm: SlurmArgs,
    /// With Slurm: do not roll outdated workers after applying (`slurmops rollout` does it later).
    #[arg(long)]
    no_rollout: bool,
    /// With Slurm: one pass — apply what is safe now, take the steps that are safe now — then
    /// print what waits (and for which jobs) and return; the daemon, or another apply, goes on.
    #[arg(long)]
    no_wait: bool,
    /// Refuse, as the daemon does, what its guardrails refuse (safe by default), widened by the
    /// same flags as the install's: checked before anything is written.
    #[arg(long)]
    guardrails: bool,
    #[command(flatten)]
    guard: GuardArgs,
}

pub fn exec(a: Args) -> Outcome {
    if a.guardrails {
        ops::plan::guard(&a.path, None, &a.guard.checked()?)?;
    }
    let wait = a.wait.as_secs();
    let request = ops::apply::Request {
        path: &a.path,
        kubeconfig: a.kube.kubeconfig.as_deref(),
        context: a.kube.context.as_deref(),
        options: Options {
            force_conflicts: a.force_conflicts,
            allow_mass_prune: a.allow_mass_prune,
            detect_only: a.detect_only,
            wait: (wait > 0).then(|| std::time::Duration::from_secs(wait)),
            ..Options::default()
        },
        slurm: a.slurm.given(),
        roll: !a.no_rollout,
        one_pass: a.no_wait,
    };
    // Each worker step as it is taken: "NODESET: draining NODE", ...
    let observer = Observer::new(|set, e| println!("{set}: {e}"));
    let applied = ops::apply::apply(&request, &observer)?;
    print!("{}", applied.text());
    match applied.error() {
        Some(e) => Err(e),
        None => Ok(Success::Done),
    }
}
