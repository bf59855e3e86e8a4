//! `slurmops completion SHELL`: the shell completion script.

use crate::cli::prelude::*;

#[derive(clap::Args)]
pub struct Args {
    shell: clap_complete::Shell,
}

pub fn exec(a: Args) -> Outcome {
    let mut cmd = crate::cli::command();
    clap_complete::generate(a.shell, &mut cmd, "slurmops", &mut std::io::stdout());
    Ok(Success::Done)
}
