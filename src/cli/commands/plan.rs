//! `slurmops plan`: what applying cluster.yaml would change — offline between two revisions or
//! files, or against the live cluster (with Slurm: the controller's pass, dry-run). Exit 0 no
//! change, 2 changes, 1 error.

use crate::cli::colour;
use crate::cli::prelude::*;
use crate::plan::{Plan, format};

#[derive(clap::Args)]
pub struct Args {
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Compare against cluster.yaml at this git revision (read from git objects).
    #[arg(long, conflicts_with = "from")]
    base: Option<String>,
    /// With --base: read the new side from this revision too, not from the work tree.
    #[arg(long, requires = "base")]
    head: Option<String>,
    /// Compare against this cluster.yaml file.
    #[arg(long)]
    from: Option<PathBuf>,
    /// Compare against the live cluster (server-side dry run of every object; drift shows).
    #[arg(long, conflicts_with_all = ["base", "from"])]
    cluster: bool,
    #[command(flatten)]
    kube: KubeArgs,
    /// With --cluster: the controller's pass, dry-run (the nodes the change drains, their
    /// jobs, the next pass's steps).
    #[command(flatten)]
    slurm: SlurmArgs,
    /// text, markdown (a pull request's comment) or json.
    #[arg(long = "output", short = 'o', visible_alias = "format", value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Refuse, as the daemon will, what its guardrails refuse (safe by default), widened by
    /// the same flags as the install's: a pull request's plan fails where the daemon would.
    #[arg(long)]
    guardrails: bool,
    #[command(flatten)]
    guard: GuardArgs,
}

pub fn exec(a: Args) -> Outcome {
    if a.guardrails {
        ops::plan::guard(&a.path, a.head.as_deref(), &a.guard.checked()?)?;
    }
    if a.cluster {
        let live = ops::plan_live::Live {
            path: &a.path,
            kubeconfig: a.kube.kubeconfig.as_deref(),
            context: a.kube.context.as_deref(),
            slurm: a.slurm.given(),
        };
        let (p, target) = ops::plan_live::plan(&live)?;
        print!("{}", formatted(&p, &target, a.format));
        return Ok(changes(&p));
    }
    if a.slurm.slurmrestd_url.is_some() {
        return Err(CliError::Other(
            "--slurmrestd-url plans against the live cluster: add --cluster".into(),
        ));
    }
    let sides = ops::plan::Sides {
        path: &a.path,
        base: a.base.as_deref(),
        head: a.head.as_deref(),
        from: a.from.as_deref(),
    };
    let (p, target) = ops::plan::plan(&sides)?;
    print!("{}", formatted(&p, &target, a.format));
    if let Some(why) = ops::plan::refused(&p) {
        return Err(CliError::Other(why.to_string()));
    }
    Ok(changes(&p))
}

/// Plan P in FMT (TARGET: what it is against), coloured for a terminal.
fn formatted(p: &Plan, target: &str, fmt: Format) -> String {
    match fmt {
        Format::Text if colour::stdout() => colour::plan(&format::text(p, target)),
        Format::Text => format::text(p, target),
        Format::Markdown => format::markdown(p, target),
        Format::Json => format::json(p),
    }
}

/// Exit 2 when plan P changes anything.
fn changes(p: &Plan) -> Success {
    match p.has_changes() {
        true => Success::Changes,
        false => Success::Done,
    }
}
