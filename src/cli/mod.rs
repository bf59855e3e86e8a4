//! The command line: one file per command under `commands/` with its flags and a thin `exec`
//! over a library call in `crate::ops` (cargo's `commands` over its `ops`), the flags several
//! commands share in `args.rs`, what they all use in `prelude.rs`.
//! Exit codes follow terraform's -detailed-exitcode: 0 no change, 2 changes, 1 error.

use clap::{Parser, Subcommand};

mod args;
mod colour;
mod commands;
mod guard;
pub mod prelude;
pub mod reference;

pub use crate::ops::render::objects_yaml;
pub use commands::schema::schema_text;
use commands::*;

pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_CHANGES: i32 = 2;

/// How a command ended well: exit 0, or 2 when it found changes to make (`plan`, `slurm
/// accounting` without `--apply`, an import that needs a person).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Success {
    Done,
    Changes,
}

/// Why a command failed, kept typed from where it happened up to here, where it is printed
/// once; the exit code is 1 whatever the kind.
pub type CliError = crate::ops::Error;

/// What every command returns.
pub type Outcome = Result<Success, CliError>;

/// The exit code of O, after printing its error (once).
fn exit(o: Outcome) -> i32 {
    match o {
        Ok(Success::Done) => EXIT_OK,
        Ok(Success::Changes) => EXIT_CHANGES,
        Err(CliError::Reported) => EXIT_ERROR,
        Err(CliError::Problems { lines }) => {
            for line in &lines {
                eprintln!("{line}");
            }
            EXIT_ERROR
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_ERROR
        }
    }
}

#[derive(Parser)]
#[command(
    name = "slurmops",
    version,
    about = "GitOps for Slurm on Kubernetes: one cluster.yaml, one binary, no CRDs"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check cluster.yaml; print every problem as FILE:LINE:COL: error: PATH: message (hint).
    #[command(
        after_help = "Examples:\n  slurmops validate examples/repo\n  slurmops validate --guardrails --policy policy.yaml .\n  slurmops validate -o json . | jq '.errors'"
    )]
    Validate(validate::Args),
    /// Print the Kubernetes objects cluster.yaml renders to (multi-document YAML).
    #[command(
        after_help = "Examples:\n  slurmops render examples/repo | kubectl apply --dry-run=server -f -\n  slurmops render --output-dir rendered/ examples/repo"
    )]
    Render(render::Args),
    /// Show what applying cluster.yaml would change. Exit 0: no change, 2: changes, 1: error.
    #[command(
        after_help = "Examples:\n  slurmops plan --base origin/main --head HEAD -o markdown > plan.md\n  slurmops plan --cluster --slurmrestd-url http://slurm-restapi.slurm:6820 examples/repo"
    )]
    Plan(plan::Args),
    /// Apply cluster.yaml to the cluster: server-side apply, prune what left it, wait until available.
    #[command(
        after_help = "Examples:\n  slurmops apply examples/repo\n  SLURM_JWT=$(cat token) slurmops apply --slurmrestd-url http://slurm-restapi.slurm:6820 --wait 30m ."
    )]
    Apply(apply::Args),
    /// Replace outdated workers of NodeSets, each drained in Slurm before its pod is deleted.
    #[command(
        after_help = "Examples:\n  SLURM_JWT=$(cat token) slurmops rollout --slurmrestd-url http://slurm-restapi.slurm:6820 .\n  slurmops rollout --node-set gpu --ignore-window --slurmrestd-url http://slurm-restapi.slurm:6820 ."
    )]
    Rollout(rollout::Args),
    /// Scale autoscaled NodeSets from Slurm's queue: pending jobs add workers, idle ones are
    /// drained and removed.
    #[command(
        after_help = "Example:\n  SLURM_JWT=$(cat token) slurmops autoscale --once --slurmrestd-url http://slurm-restapi.slurm:6820 ."
    )]
    Autoscale(autoscale::Args),
    /// Slurm node state onto worker pods (a condition), cordoned nodes drained, workers that
    /// never registered replaced.
    #[command(
        after_help = "Example:\n  SLURM_JWT=$(cat token) slurmops sync --once --slurmrestd-url http://slurm-restapi.slurm:6820 ."
    )]
    Sync(sync::Args),
    /// The daemon: follow a git repository and keep the cluster at its cluster.yaml.
    #[command(
        after_help = "Examples:\n  slurmops run --repo https://git.example.com/hpc/cluster.git --once --no-slurm\n  slurmops run --config /etc/slurmops/daemon.yaml"
    )]
    Run(Box<run::RunArgs>),
    /// What the daemon last did (its status ConfigMap).
    #[command(
        after_help = "Examples:\n  slurmops status --namespace slurmops\n  slurmops status --namespace slurmops --watch\n  slurmops status -o json | jq -r '.statuses[].result'"
    )]
    Status(status::StatusArgs),
    /// The daemon's own objects (Deployment, ServiceAccount, Role, RoleBinding, Service).
    #[command(
        after_help = "Example:\n  slurmops install --print --repo https://git.example.com/hpc/cluster.git --namespace slurmops > slurmops.yaml"
    )]
    Install(install::InstallArgs),
    /// Measure: offline plan at scale, render scaling, parser throughput, footprint.
    #[command(
        after_help = "Examples:\n  slurmops bench\n  slurmops bench --json bench.json --kubeconfig bed.kubeconfig"
    )]
    Bench(bench::Args),
    /// Print the JSON Schema of cluster.yaml.
    #[command(
        after_help = "Example:\n  slurmops schema > cluster.schema.json   # then: # yaml-language-server: $schema=cluster.schema.json"
    )]
    Schema(schema::Args),
    /// Look at and drain Slurm nodes through slurmrestd (like a kubectl plugin).
    #[command(
        after_help = "Examples:\n  slurmops slurm nodes --slurmrestd-url http://slurm-restapi.slurm:6820 --slurm-jwt-file token\n  slurmops slurm drain gpu-3 --reason 'bad HBM' --slurmrestd-url http://slurm-restapi.slurm:6820 --slurm-jwt-file token"
    )]
    Slurm(slurm::Args),
    /// Print the shell completion script for SHELL.
    #[command(
        after_help = "Examples:\n  slurmops completion bash > /etc/bash_completion.d/slurmops\n  slurmops completion zsh > \"${fpath[1]}/_slurmops\"\n  slurmops completion fish > ~/.config/fish/completions/slurmops.fish"
    )]
    Completion(completion::Args),
    /// Turn another tool's cluster into a cluster.yaml (stdout) with a report of every setting
    /// (stderr); exit 2 when something needs a person.
    #[command(
        subcommand,
        after_help = "Example:\n  slurmops import slinky chart-values.yaml my-values.yaml --name slurm --namespace slurm > cluster.yaml"
    )]
    Import(import::From),
    /// Write the manual pages, one per command (slurmops.1, slurmops-plan.1, slurmops-slurm-drain.1, ...).
    #[command(
        after_help = "Example:\n  slurmops man --output-dir /usr/local/share/man/man1 && man slurmops-plan"
    )]
    Man(man::Args),
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let args = match run::expand_config(std::env::args().collect()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_ERROR;
        }
    };
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_ERROR } else { EXIT_OK };
        }
    };
    exit(exec(cli.command))
}

/// Runs one command.
fn exec(command: Cmd) -> Outcome {
    match command {
        Cmd::Validate(a) => validate::exec(a),
        Cmd::Render(a) => render::exec(a),
        Cmd::Plan(a) => plan::exec(a),
        Cmd::Apply(a) => apply::exec(a),
        Cmd::Rollout(a) => rollout::exec(a),
        Cmd::Autoscale(a) => autoscale::exec(a),
        Cmd::Sync(a) => sync::exec(a),
        Cmd::Run(a) => run::exec(*a),
        Cmd::Status(a) => status::exec(a),
        Cmd::Install(a) => install::exec(a),
        Cmd::Bench(a) => bench::exec(a),
        Cmd::Schema(a) => schema::exec(a),
        Cmd::Slurm(a) => slurm::exec(a),
        Cmd::Completion(a) => completion::exec(a),
        Cmd::Import(from) => import::exec(from),
        Cmd::Man(a) => man::exec(a),
    }
}

/// The command line's definition, built: what `--help`, the man pages and the reference show.
pub fn command() -> clap::Command {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    cmd
}

#[cfg(test)]
mod tests {
    /// clap checks the whole command tree (unique names and groups, valid defaults) here, not
    /// only when a user happens to run the broken subcommand.
    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    #[test]
    fn the_slurm_command_takes_the_shared_flags_and_its_old_spellings() {
        for args in [
            &[
                "slurmops",
                "slurm",
                "--slurmrestd-url",
                "http://x",
                "--slurm-jwt",
                "t",
                "nodes",
            ][..],
            &[
                "slurmops", "slurm", "--url", "http://x", "--token", "t", "nodes",
            ][..],
            &["slurmops", "slurm", "nodes", "--cluster-file", "c.yaml"][..],
            &["slurmops", "slurm", "nodes", "--cluster", "c.yaml"][..],
        ] {
            use clap::Parser;
            assert!(super::Cli::try_parse_from(args).is_ok(), "{args:?}");
        }
    }
}
