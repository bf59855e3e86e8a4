//! `slurmops import`: another tool's cluster description in, a cluster.yaml on stdout and the
//! report of every setting on stderr (exit 2 when something needs a person). Thin: the work is
//! `crate::import`'s.

use clap::{Args as ClapArgs, Subcommand};

use crate::cli::prelude::*;
use crate::import::slinky;

#[derive(Subcommand)]
pub enum From {
    /// A Slinky `slurm` Helm chart's values (chart 1.1 and later), several merged in order as
    /// `helm -f a.yaml -f b.yaml` merges them: pass the chart's own values first
    /// (`helm show values oci://ghcr.io/slinkyproject/charts/slurm --version V`), then yours.
    #[command(
        after_help = "Examples:\n  helm show values oci://ghcr.io/slinkyproject/charts/slurm --version 1.2.1 > chart.yaml\n  slurmops import slinky chart.yaml my-values.yaml --name research --namespace slurm > cluster.yaml\n  slurmops import slinky my-values.yaml 2> report.txt > cluster.yaml; echo $?   # 2: read the NEEDS lines"
    )]
    Slinky(SlinkyArgs),
}

#[derive(ClapArgs)]
pub struct SlinkyArgs {
    /// Values files, merged in order (later ones win).
    #[arg(required = true)]
    values: Vec<PathBuf>,
    /// metadata.name of the cluster (every object slurmops makes is named after it).
    #[arg(long, default_value = "slurm")]
    name: String,
    /// metadata.namespace of the cluster (the Slinky release's namespace, usually).
    #[arg(long, default_value = "slurm")]
    namespace: String,
    /// The Slurm release (`25.11`) when no image tag in the values names one.
    #[arg(long)]
    slurm_version: Option<String>,
}

pub fn exec(from: From) -> Outcome {
    let From::Slinky(a) = from;
    let o = slinky::Options {
        name: a.name,
        namespace: a.namespace,
        slurm_version: a.slurm_version,
    };
    let imported = ops::import::slinky(&a.values, &o)?;
    eprint!("{}", imported.report_text());
    print!("{}", imported.yaml);
    Ok(match imported.needs_person() {
        true => Success::Changes,
        false => Success::Done,
    })
}
