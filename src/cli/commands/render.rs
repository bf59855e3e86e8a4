//! `slurmops render`: the Kubernetes objects cluster.yaml renders to, on stdout or as files.

use crate::cli::prelude::*;

#[derive(clap::Args)]
pub struct Args {
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Write one file per object instead, the Slurm config files under slurm/, and under jobs/
    /// the batch jobs slurmops submits to prove workers (each active check on each NodeSet it
    /// covers, each canary's validation), as `sbatch` scripts.
    #[arg(long)]
    output_dir: Option<PathBuf>,
}

pub fn exec(a: Args) -> Outcome {
    let r = ops::render::render(&a.path)?;
    match &a.output_dir {
        None => print!("{}", ops::render::objects_yaml(&r.rendered)),
        Some(dir) => {
            let n = ops::render::write_dir(dir, &r)?;
            eprintln!("wrote {n} files to {}", dir.display());
        }
    }
    Ok(Success::Done)
}
