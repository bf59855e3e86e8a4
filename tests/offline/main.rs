//! The offline suite: everything that needs no test bed — validation, render, plan (golden
//! files), property and hostile input, Pod Security, commit signatures, the git client against
//! hostile servers on loopback, the vocabulary, the documentation's test list and links, the
//! live view in Debian's Chromium (`chromium` installed: tests/bed/packages.sh). Runs without root in seconds:
//! `cargo test --test offline`.

mod cli;
mod git_remote;
mod guarded;
mod hostile;
mod page;
mod pod_security;
mod property;
mod readme;
mod release;
mod render_plan;
mod signatures;
mod slurm_faults;
mod structure;
mod validation;
mod vocabulary;
