//! `slurmops bench`: prints one line per figure (`name value unit (how it is judged)`) and writes
//! them as JSON with `--json FILE`.

use std::path::PathBuf;

use super::{EXIT_ERROR, EXIT_OK};

#[derive(clap::Args)]
pub struct Args {
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(a: Args) -> i32 {
    let figures = crate::bench::offline();
    for f in &figures {
        println!("{f}");
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&figures).expect("figures serialize");
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return EXIT_ERROR;
        }
    }
    EXIT_OK
}
