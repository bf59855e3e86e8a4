//! `slurmops schema`: the JSON Schema of cluster.yaml, or every field as a Markdown table.

use crate::cli::prelude::*;
use crate::cluster;

#[derive(clap::Args)]
pub struct Args {
    /// Print every field as a Markdown table instead (docs/reference/cluster-yaml-fields.md).
    #[arg(long)]
    markdown: bool,
}

pub fn exec(a: Args) -> Outcome {
    match a.markdown {
        true => print!("{}", cluster::reference::markdown()),
        false => println!("{}", schema_text().trim_end()),
    }
    Ok(Success::Done)
}

/// The committed schema file's content.
pub fn schema_text() -> String {
    serde_json::to_string_pretty(&cluster::json_schema()).expect("schema serializes") + "\n"
}
