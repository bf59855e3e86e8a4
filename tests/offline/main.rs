//! The offline suite: everything that needs no test bed — validation, render, plan (golden
//! files), property and hostile input, Pod Security, commit signatures, the git client against
//! hostile servers on loopback, the vocabulary, the documentation's test list and links, the
//! live view in Debian's Chromium (`chromium` installed: tests/bed/packages.sh). Runs without root in seconds:
//! `cargo test --test offline`.

mod cli;
mod closed;
mod dashboard;
mod generated;
mod git_remote;
mod guarded;
mod hostile;
mod page;
mod pod_security;
mod property;
mod readme;
mod release;
mod render_plan;
mod resources;
mod signatures;
mod slurm_faults;
mod structure;
mod validation;
mod vocabulary;

use std::path::{Path, PathBuf};

/// Every `.rs` file under DIR (the structure and vocabulary scans read the sources).
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
