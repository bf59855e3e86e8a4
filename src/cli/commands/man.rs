//! `slurmops man`: a manual page per command (nested ones included), or the whole reference as
//! one Markdown page.

use std::path::Path;

use crate::cli::prelude::*;

#[derive(clap::Args)]
pub struct Args {
    /// Where to write them.
    #[arg(long, default_value = ".")]
    output_dir: PathBuf,
    /// Print the whole reference as one Markdown page instead (docs/reference/commands.md).
    #[arg(long, conflicts_with = "output_dir")]
    markdown: bool,
}

pub fn exec(a: Args) -> Outcome {
    let cmd = crate::cli::command();
    if a.markdown {
        print!("{}", crate::cli::reference::markdown(&cmd));
        return Ok(Success::Done);
    }
    let dir = &a.output_dir;
    let mut count = 0;
    std::fs::create_dir_all(dir)
        .and_then(|()| write(&cmd, "slurmops".into(), dir, &mut count))
        .map_err(|e| CliError::Other(format!("writing man pages to {}: {e}", dir.display())))?;
    eprintln!("{count} man pages written to {}", dir.display());
    Ok(Success::Done)
}

/// Writes CMD's page as NAME.1 into DIR, then its subcommands' (`slurmops-slurm-drain.1`).
fn write(cmd: &clap::Command, name: String, dir: &Path, count: &mut usize) -> std::io::Result<()> {
    let page = cmd.clone().name(name.clone());
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    std::fs::write(dir.join(format!("{name}.1")), out)?;
    *count += 1;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        write(sub, format!("{name}-{}", sub.get_name()), dir, count)?;
    }
    Ok(())
}
