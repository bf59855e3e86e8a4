//! The command line. Each command wires stages together; none holds logic of its own.
//! Exit codes follow terraform's -detailed-exitcode: 0 no change, 2 changes, 1 error.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

mod apply;
mod autoscale;
mod bench;
mod colour;
mod daemon;
mod guard;
mod import;
pub mod reference;
mod slurm;
mod sync;
mod watch;

use crate::cluster::{self, ClusterFile};
use crate::plan::{self, Side, format};
use crate::render::{self, Rendered};
use crate::source::admit::{Candidate, Refusal, Rules, admit};
use crate::source::{self, GitCli, Loaded};

pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_CHANGES: i32 = 2;

/// How a command ended well: exit 0, or 2 when it found changes to make (`plan`, `slurm
/// accounting` without `--apply`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Success {
    Done,
    Changes,
}

/// Why a command failed, kept typed from where it happened up to here, where it is printed
/// once; the exit code is 1 whatever the kind.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Already told on stderr (cluster.yaml's problems, each with its position).
    #[error("the problems above")]
    Reported,
    #[error(transparent)]
    Apply(#[from] crate::apply::ApplyError),
    #[error(transparent)]
    Connect(#[from] crate::k8s::ConnectError),
    #[error(transparent)]
    Slurm(#[from] crate::slurm::SlurmError),
    #[error(transparent)]
    Pass(#[from] crate::controller::PassError),
    #[error(transparent)]
    Rollout(#[from] crate::controller::drive::RolloutError),
    /// Anything else, in words (a file that cannot be written, a refused accounting change).
    #[error("{0}")]
    Other(String),
}

impl From<Reported> for CliError {
    fn from(_: Reported) -> CliError {
        CliError::Reported
    }
}

/// What every command returns.
pub type Outcome = Result<Success, CliError>;

/// The exit code of O, after printing its error (once).
fn exit(o: Outcome) -> i32 {
    match o {
        Ok(Success::Done) => EXIT_OK,
        Ok(Success::Changes) => EXIT_CHANGES,
        Err(CliError::Reported) => EXIT_ERROR,
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
    Validate {
        /// cluster.yaml, or a directory holding one.
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Check what the daemon checks too: its guardrails (safe by default), widened by the
        /// same flags as the install's, so a pull request's CI refuses what the daemon will.
        #[arg(long)]
        guardrails: bool,
        #[command(flatten)]
        guard: guard::GuardArgs,
        /// text, or json for scripts (`version`, `file`, `valid`, `nodeSets`, `partitions`,
        /// `errors` and `refused`, each problem with file, line, col, path, message, hint).
        #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Print the Kubernetes objects cluster.yaml renders to (multi-document YAML).
    #[command(
        after_help = "Examples:\n  slurmops render examples/repo | kubectl apply --dry-run=server -f -\n  slurmops render --output-dir rendered/ examples/repo"
    )]
    Render {
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Write one file per object (and the Slurm config files under slurm/) instead.
        #[arg(long)]
        output_dir: Option<PathBuf>,
    },
    /// Show what applying cluster.yaml would change. Exit 0: no change, 2: changes, 1: error.
    #[command(
        after_help = "Examples:\n  slurmops plan --base origin/main --head HEAD -o markdown > plan.md\n  slurmops plan --cluster --slurmrestd-url http://slurm-restapi.slurm:6820 examples/repo"
    )]
    Plan {
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Compare against cluster.yaml at this git revision (read from git objects).
        #[arg(long, conflicts_with = "from")]
        base: Option<String>,
        /// With --base: read the new side from this revision too, not from the work tree.
        #[arg(long, requires = "base")]
        head: Option<String>,
        /// Compare against this cluster.yaml file.
        #[arg(long)]
        from: Option<PathBuf>,
        /// Compare against the live cluster (server-side dry run of every object; drift shows).
        #[arg(long, conflicts_with_all = ["base", "from"])]
        cluster: bool,
        #[command(flatten)]
        kube: apply::KubeArgs,
        /// With --cluster: the controller's pass, dry-run (the nodes the change drains, their
        /// jobs, the next pass's steps).
        #[command(flatten)]
        slurm: SlurmArgs,
        /// text, markdown (a pull request's comment) or json.
        #[arg(long = "output", short = 'o', visible_alias = "format", value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Refuse, as the daemon will, what its guardrails refuse (safe by default), widened by
        /// the same flags as the install's: a pull request's plan fails where the daemon would.
        #[arg(long)]
        guardrails: bool,
        #[command(flatten)]
        guard: guard::GuardArgs,
    },
    /// Apply cluster.yaml to the cluster: server-side apply, prune what left it, wait until available.
    #[command(
        after_help = "Examples:\n  slurmops apply examples/repo\n  SLURM_JWT=$(cat token) slurmops apply --slurmrestd-url http://slurm-restapi.slurm:6820 --wait 30m ."
    )]
    Apply(apply::ApplyArgs),
    /// Replace outdated workers of NodeSets, each drained in Slurm before its pod is deleted.
    #[command(
        after_help = "Examples:\n  SLURM_JWT=$(cat token) slurmops rollout --slurmrestd-url http://slurm-restapi.slurm:6820 .\n  slurmops rollout --node-set gpu --ignore-window --slurmrestd-url http://slurm-restapi.slurm:6820 ."
    )]
    Rollout(apply::RolloutArgs),
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
    Run(Box<daemon::RunArgs>),
    /// What the daemon last did (its status ConfigMap).
    #[command(
        after_help = "Examples:\n  slurmops status --namespace slurmops\n  slurmops status --namespace slurmops --watch\n  slurmops status -o json | jq -r '.statuses[].result'"
    )]
    Status(daemon::StatusArgs),
    /// The daemon's own objects (Deployment, ServiceAccount, Role, RoleBinding, Service).
    #[command(
        after_help = "Example:\n  slurmops install --print --repo https://git.example.com/hpc/cluster.git --namespace slurmops > slurmops.yaml"
    )]
    Install(daemon::InstallArgs),
    /// Measure: offline plan at scale, render scaling, parser throughput, footprint.
    #[command(
        after_help = "Examples:\n  slurmops bench\n  slurmops bench --json bench.json --kubeconfig bed.kubeconfig"
    )]
    Bench(bench::Args),
    /// Print the JSON Schema of cluster.yaml.
    #[command(
        after_help = "Example:\n  slurmops schema > cluster.schema.json   # then: # yaml-language-server: $schema=cluster.schema.json"
    )]
    Schema {
        /// Print every field as a Markdown table instead (docs/reference/cluster-yaml-fields.md).
        #[arg(long)]
        markdown: bool,
    },
    /// Look at and drain Slurm nodes through slurmrestd (like a kubectl plugin).
    #[command(
        after_help = "Examples:\n  slurmops slurm nodes --slurmrestd-url http://slurm-restapi.slurm:6820 --slurm-jwt-file token\n  slurmops slurm drain gpu-3 --reason 'bad HBM' --slurmrestd-url http://slurm-restapi.slurm:6820 --slurm-jwt-file token"
    )]
    Slurm(slurm::Args),
    /// Print the shell completion script for SHELL.
    #[command(
        after_help = "Examples:\n  slurmops completion bash > /etc/bash_completion.d/slurmops\n  slurmops completion zsh > \"${fpath[1]}/_slurmops\"\n  slurmops completion fish > ~/.config/fish/completions/slurmops.fish"
    )]
    Completion { shell: clap_complete::Shell },
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
    Man {
        /// Where to write them.
        #[arg(long, default_value = ".")]
        output_dir: PathBuf,
        /// Print the whole reference as one Markdown page instead (docs/reference/commands.md).
        #[arg(long, conflicts_with = "output_dir")]
        markdown: bool,
    },
}

/// `--output` of the commands that print what a script would parse.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Output {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Markdown,
    Json,
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let args = match daemon::expand_config(std::env::args().collect()) {
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
    exit(run(cli.command))
}

/// Runs one command.
fn run(command: Cmd) -> Outcome {
    match command {
        Cmd::Validate {
            path,
            guardrails,
            guard,
            output: Output::Text,
        } => validate(&path, guardrails.then_some(&guard)),
        Cmd::Validate {
            path,
            guardrails,
            guard,
            output: Output::Json,
        } => validate_json(&path, guardrails.then_some(&guard)),
        Cmd::Render { path, output_dir } => render_cmd(&path, output_dir.as_deref()),
        Cmd::Plan {
            ref path,
            ref head,
            guardrails: true,
            ref guard,
            ..
        } if plan_refused(path, head.as_deref(), guard) => Err(Reported.into()),
        Cmd::Plan {
            path,
            base,
            head,
            from,
            format,
            cluster: true,
            kube,
            slurm,
            ..
        } => {
            let _ = (base, head, from);
            let slurm = slurm.given().map(|(u, t)| (u.to_string(), t.to_string()));
            apply::plan_cluster(&path, &kube, slurm, format)
        }
        Cmd::Plan { slurm, .. } if slurm.slurmrestd_url.is_some() => Err(CliError::Other(
            "--slurmrestd-url plans against the live cluster: add --cluster".into(),
        )),
        Cmd::Plan {
            path,
            base,
            head,
            from,
            format,
            ..
        } => plan_cmd(
            &path,
            base.as_deref(),
            head.as_deref(),
            from.as_deref(),
            format,
        ),
        Cmd::Schema { markdown: true } => {
            print!("{}", cluster::reference::markdown());
            Ok(Success::Done)
        }
        Cmd::Schema { markdown: false } => {
            println!("{}", schema_text().trim_end());
            Ok(Success::Done)
        }
        Cmd::Slurm(args) => slurm::run(args),
        Cmd::Completion { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "slurmops", &mut std::io::stdout());
            Ok(Success::Done)
        }
        Cmd::Man { markdown: true, .. } => {
            print!("{}", reference::markdown(&self::command()));
            Ok(Success::Done)
        }
        Cmd::Man { output_dir, .. } => man_pages(&output_dir),
        Cmd::Import(from) => import::run(from),
        Cmd::Apply(args) => apply::apply_cmd(args),
        Cmd::Rollout(args) => apply::rollout_cmd(args),
        Cmd::Autoscale(args) => autoscale::run(args),
        Cmd::Sync(args) => sync::run(args),
        Cmd::Run(args) => daemon::run(*args),
        Cmd::Status(args) => daemon::status(args),
        Cmd::Install(args) => daemon::install(args),
        Cmd::Bench(args) => bench::run(args),
    }
}

/// Writes a man page for slurmops and one for each of its commands, nested ones included
/// (`slurmops-slurm-drain.1`), into DIR.
/// The command line's definition, built: what `--help`, the man pages and the reference show.
pub fn command() -> clap::Command {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    cmd
}

fn man_pages(dir: &Path) -> Outcome {
    fn write(
        cmd: &clap::Command,
        name: String,
        dir: &Path,
        count: &mut usize,
    ) -> std::io::Result<()> {
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
    let cmd = command();
    let mut count = 0;
    std::fs::create_dir_all(dir)
        .and_then(|()| write(&cmd, "slurmops".into(), dir, &mut count))
        .map_err(|e| CliError::Other(format!("writing man pages to {}: {e}", dir.display())))?;
    eprintln!("{count} man pages written to {}", dir.display());
    Ok(Success::Done)
}

/// How a command reaches slurmrestd: the same two flags (or environment variables) for every
/// command that talks to Slurm (`run` adds token files and minted tokens, `slurm` its own).
#[derive(clap::Args, Clone, Default)]
pub struct SlurmArgs {
    /// slurmrestd URL (e.g. http://CLUSTER-restapi.NAMESPACE.svc:6820).
    #[arg(long, env = "SLURMRESTD_URL")]
    pub slurmrestd_url: Option<String>,
    /// JWT sent to slurmrestd (X-SLURM-USER-TOKEN); better from SLURM_JWT than the command line.
    #[arg(long, env = "SLURM_JWT", hide_env_values = true)]
    pub slurm_jwt: Option<String>,
}

impl SlurmArgs {
    /// Both flags, when both are given.
    pub fn given(&self) -> Option<(&str, &str)> {
        Some((self.slurmrestd_url.as_deref()?, self.slurm_jwt.as_deref()?))
    }

    /// Both flags, for a command that cannot work without Slurm (WHY says what it needs it for).
    pub fn required(&self, why: &str) -> Result<(&str, &str), String> {
        self.given().ok_or_else(|| {
            format!(
                "--slurmrestd-url and --slurm-jwt (or SLURMRESTD_URL and SLURM_JWT) are needed: {why}"
            )
        })
    }

    /// A client for both flags, or why not.
    pub fn client(&self, why: &str) -> Result<crate::slurm::Client, String> {
        let (url, token) = self.required(why)?;
        token_client(url, token).map_err(|e| e.to_string())
    }
}

/// A slurmrestd client authenticating with a JWT (SLURM_JWT).
fn token_client(url: &str, token: &str) -> Result<crate::slurm::Client, crate::slurm::SlurmError> {
    let creds = crate::slurm::auth::Credentials::Token {
        token: crate::slurm::auth::Secret::new(token.to_string()),
        user: None,
    };
    let mut config = crate::slurm::Config::new(url.to_string(), creds);
    config.allow_http = allow_http();
    crate::slurm::Client::new(config)
}

/// `SLURMOPS_ALLOW_HTTP=true`: tokens may go over plain http:// to any host (see
/// `slurm::client::plain_http_ok` for what is allowed without it).
fn allow_http() -> bool {
    std::env::var("SLURMOPS_ALLOW_HTTP").is_ok_and(|v| matches!(v.as_str(), "true" | "1"))
}

/// The committed schema file's content.
pub fn schema_text() -> String {
    serde_json::to_string_pretty(&cluster::json_schema()).expect("schema serializes") + "\n"
}

/// A failure already explained to the user on stderr.
struct Reported;

fn load(loaded: &Loaded) -> Result<ClusterFile, Reported> {
    cluster::load(&loaded.name, &loaded.text).map_err(|diags| {
        for d in &diags {
            eprintln!("{d}");
        }
        eprintln!(
            "{}: {} error(s); nothing was changed",
            loaded.name,
            diags.len()
        );
        Reported
    })
}

fn read(path: &Path) -> Result<Loaded, Reported> {
    source::read_file(&source::cluster_file(path)).map_err(|e| {
        eprintln!("error: {e}");
        Reported
    })
}

/// Why a file was not admitted, already said on stderr.
enum Refused {
    Invalid,
    Guardrails,
}

impl From<Refused> for Reported {
    fn from(_: Refused) -> Reported {
        Reported
    }
}

/// File L admitted as the daemon admits a commit (validated, then under the guardrails G when
/// given): its cluster, or each error or refusal printed at its position.
fn admitted(l: &Loaded, g: Option<&cluster::Guardrails>) -> Result<ClusterFile, Refused> {
    let candidate = Candidate {
        name: &l.name,
        text: &l.text,
        commit: None,
    };
    let rules = Rules {
        guard: g,
        ..Rules::default()
    };
    let refusal = match admit(&candidate, &rules) {
        Ok(a) => return Ok(a.c),
        Err(r) => r,
    };
    for line in refusal.lines() {
        eprintln!("{line}");
    }
    match refusal {
        Refusal::Invalid(d) => {
            eprintln!("{}: {} error(s); nothing was changed", l.name, d.len());
            Err(Refused::Invalid)
        }
        Refusal::Guardrails { refused, .. } => {
            eprintln!(
                "{}: {} refused by the guardrails (the daemon would refuse this commit)",
                l.name,
                refused.len()
            );
            Err(Refused::Guardrails)
        }
        // A file without a commit or `--cluster` has no other refusal (said above if it had).
        _ => Err(Refused::Guardrails),
    }
}

/// The guardrails of GUARD's flags and policy file; the policy file's problems printed.
fn guardrails(guard: &guard::GuardArgs) -> Result<cluster::Guardrails, Reported> {
    guard.guardrails(None).map_err(|e| {
        eprintln!("{e}");
        Reported
    })
}

/// Whether the guardrails G refuse the cluster.yaml a plan would apply (at PATH, or at revision
/// HEAD), or its policy file does not read; a cluster.yaml that does not load is the plan's to
/// report.
fn plan_refused(path: &Path, head: Option<&str>, guard: &guard::GuardArgs) -> bool {
    let Ok(g) = guardrails(guard) else {
        return true;
    };
    let file = source::cluster_file(path);
    let l = match head {
        Some(rev) => git_read(rev, &file).ok().flatten(),
        None => read(path).ok(),
    };
    let Some(l) = l else { return false };
    // A cluster.yaml that does not load is the plan's to report.
    matches!(admitted(&l, Some(&g)), Err(Refused::Guardrails))
}

fn validate(path: &Path, guard: Option<&guard::GuardArgs>) -> Outcome {
    let g = guard.map(guardrails).transpose()?;
    let l = read(path)?;
    let c = admitted(&l, g.as_ref()).map_err(Reported::from)?;
    println!(
        "{}: valid ({} NodeSets, {} partitions)",
        l.name,
        c.spec.node_sets.len(),
        c.spec.partitions.len()
    );
    if let Some(r) = cluster::release::find(&c.spec.slurm_version).filter(|r| !r.proven) {
        let proven: Vec<&str> = cluster::release::SUPPORTED
            .iter()
            .filter(|r| r.proven)
            .map(|r| r.version)
            .collect();
        eprintln!(
            "note: Slurm {} is accepted on its version gates and data parsers alone; slurmops' tests run {} on real daemons",
            r.version,
            proven.join(", ")
        );
    }
    Ok(Success::Done)
}

/// `validate --output json`: one document on stdout whatever the verdict (exit 1 when invalid
/// or refused); only a file that cannot be read, or a policy file that does not, is an error on
/// stderr.
fn validate_json(path: &Path, guard: Option<&guard::GuardArgs>) -> Outcome {
    let g = guard.map(guardrails).transpose()?;
    let l = read(path)?;
    let candidate = Candidate {
        name: &l.name,
        text: &l.text,
        commit: None,
    };
    let rules = Rules {
        guard: g.as_ref(),
        ..Rules::default()
    };
    let (c, errors, refused) = match admit(&candidate, &rules) {
        Ok(a) => (Some(a.c), Vec::new(), Vec::new()),
        Err(Refusal::Invalid(errors)) => (None, errors, Vec::new()),
        Err(Refusal::Guardrails { refused, cluster }) => (Some(*cluster), Vec::new(), refused),
        // A file without a commit or `--cluster` has no other refusal; none is valid.
        Err(_) => (None, Vec::new(), Vec::new()),
    };
    let valid = c.is_some() && refused.is_empty();
    let doc = serde_json::json!({
        "version": 1,
        "file": l.name,
        "valid": valid,
        "nodeSets": c.as_ref().map(|c| c.spec.node_sets.len()),
        "partitions": c.as_ref().map(|c| c.spec.partitions.len()),
        "errors": errors,
        "refused": refused,
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).expect("JSON values serialize")
    );
    if valid {
        Ok(Success::Done)
    } else {
        Err(Reported.into())
    }
}

/// Multi-document YAML of every rendered object, in apply order.
pub fn objects_yaml(r: &Rendered) -> String {
    r.objects
        .iter()
        .map(|o| {
            format!(
                "---\n{}",
                serde_saphyr::to_string(&o.body).expect("objects serialize")
            )
        })
        .collect()
}

fn render_cmd(path: &Path, out: Option<&Path>) -> Outcome {
    let cluster = load(&read(path)?)?;
    let r = render::render(&cluster);
    let Some(dir) = out else {
        print!("{}", objects_yaml(&r));
        return Ok(Success::Done);
    };
    let n = write_dir(dir, &r)
        .map_err(|e| CliError::Other(format!("writing {}: {e}", dir.display())))?;
    eprintln!("wrote {n} files to {}", dir.display());
    Ok(Success::Done)
}

fn write_dir(dir: &Path, r: &Rendered) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir.join("slurm"))?;
    let mut n = 0;
    for (i, o) in r.objects.iter().enumerate() {
        let file = dir.join(format!(
            "{:02}-{}-{}.yaml",
            i,
            o.kind.to_ascii_lowercase(),
            o.name
        ));
        std::fs::write(
            file,
            serde_saphyr::to_string(&o.body).expect("objects serialize"),
        )?;
        n += 1;
    }
    for (name, content) in r.slurm.iter().chain(r.scripts.iter()) {
        std::fs::write(dir.join("slurm").join(name), content)?;
        n += 1;
    }
    Ok(n)
}

fn plan_cmd(
    path: &Path,
    base: Option<&str>,
    head: Option<&str>,
    from: Option<&Path>,
    fmt: Format,
) -> Outcome {
    let (p, target) = plan_inner(path, base, head, from)?;
    print!("{}", formatted(&p, &target, fmt));
    if let Some(why) = p.slurm.upgrade.as_ref().and_then(|u| u.refused.as_ref()) {
        return Err(CliError::Other(why.clone()));
    }
    Ok(changes(&p))
}

/// Plan P in FMT (TARGET: what it is against).
fn formatted(p: &plan::Plan, target: &str, fmt: Format) -> String {
    match fmt {
        Format::Text if colour::stdout() => colour::plan(&format::text(p, target)),
        Format::Text => format::text(p, target),
        Format::Markdown => format::markdown(p, target),
        Format::Json => format::json(p),
    }
}

/// Exit 2 when plan P changes anything.
fn changes(p: &plan::Plan) -> Success {
    match p.has_changes() {
        true => Success::Changes,
        false => Success::Done,
    }
}

fn git_read(rev: &str, file: &Path) -> Result<Option<Loaded>, Reported> {
    source::read_revision(&GitCli, rev, file).map_err(|e| {
        eprintln!("error: {e}");
        Reported
    })
}

fn plan_inner(
    path: &Path,
    base: Option<&str>,
    head: Option<&str>,
    from: Option<&Path>,
) -> Result<(plan::Plan, String), Reported> {
    let file = source::cluster_file(path);
    let new = match head {
        Some(rev) => git_read(rev, &file)?.ok_or_else(|| {
            eprintln!("error: revision {rev} has no {}", file.display());
            Reported
        })?,
        None => read(path)?,
    };
    let old = match (base, from) {
        (Some(rev), _) => git_read(rev, &file)?,
        (None, Some(f)) => Some(read(f)?),
        (None, None) => None,
    };
    let new_c = load(&new)?;
    let old_c = old.as_ref().map(load).transpose()?;
    let new_r = render::render(&new_c);
    let old_r = old_c.as_ref().map(render::render);
    let target = match (&old, base) {
        (Some(_), Some(rev)) => format!("cluster {} (from {rev})", new_c.metadata.name),
        (Some(o), None) => format!("cluster {} (from {})", new_c.metadata.name, o.name),
        (None, Some(rev)) => format!(
            "cluster {} (new: {rev} has no cluster.yaml)",
            new_c.metadata.name
        ),
        (None, None) => format!("cluster {} (against an empty cluster)", new_c.metadata.name),
    };
    let base_side = old_c
        .as_ref()
        .zip(old_r.as_ref())
        .map(|(cluster, rendered)| Side { cluster, rendered });
    let mut p = plan::plan(
        base_side,
        Side {
            cluster: &new_c,
            rendered: &new_r,
        },
    );
    plan::at(
        &mut p,
        &new_c,
        k8s_openapi::jiff::Timestamp::now().as_second(),
    );
    Ok((p, target))
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
