//! `slurmops validate`: cluster.yaml admitted as the daemon admits a commit.

use crate::cli::prelude::*;

#[derive(clap::Args)]
pub struct Args {
    /// cluster.yaml, or a directory holding one.
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Check what the daemon checks too: its guardrails (safe by default), widened by the
    /// same flags as the install's, so a pull request's CI refuses what the daemon will.
    #[arg(long)]
    guardrails: bool,
    #[command(flatten)]
    guard: GuardArgs,
    /// text, or json for scripts (`version`, `file`, `valid`, `nodeSets`, `partitions`,
    /// `errors` and `refused`, each problem with file, line, col, path, message, hint).
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    output: Output,
}

pub fn exec(a: Args) -> Outcome {
    let g = a.guardrails.then(|| a.guard.checked()).transpose()?;
    match a.output {
        Output::Text => {
            let v = ops::validate::validate(&a.path, g.as_ref())?;
            println!("{v}");
            if let Some(note) = &v.note {
                eprintln!("{note}");
            }
            Ok(Success::Done)
        }
        // One document on stdout whatever the verdict (exit 1 when invalid or refused).
        Output::Json => {
            let r = ops::validate::report(&a.path, g.as_ref())?;
            println!(
                "{}",
                serde_json::to_string_pretty(&r.json).expect("JSON values serialize")
            );
            match r.valid {
                true => Ok(Success::Done),
                false => Err(CliError::Reported),
            }
        }
    }
}
