//! `slurmops bench`: prints one line per figure (`name value unit (how it is judged)`) and writes
//! them as JSON with `--json FILE`.

use crate::cli::prelude::*;

#[derive(clap::Args)]
pub struct Args {
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// A cluster to measure against (the test bed's kubeconfig): no-op reconcile cost and the
    /// daemon's idle memory. Without it those figures are skipped, and say so.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The binary whose size, cold start and daemon memory are measured (e.g. the static build
    /// that ships); default: this one.
    #[arg(long)]
    binary: Option<PathBuf>,
    /// slurmrestd of the measured cluster: the idle daemon then runs as installed, with Slurm and
    /// its worker watches (the token from SLURM_JWT, never on a command line).
    #[arg(long, env = "SLURMRESTD_URL", requires = "kubeconfig")]
    slurmrestd_url: Option<String>,
}

pub fn exec(a: Args) -> Outcome {
    let exe = a
        .binary
        .clone()
        .map_or_else(std::env::current_exe, Ok)
        .map_err(|e| CliError::Other(format!("cannot find the binary to measure: {e}")))?;
    if !exe.is_file() {
        return Err(CliError::Other(format!(
            "--binary {}: no such file",
            exe.display()
        )));
    }
    let mut figures = crate::bench::offline(&exe);
    for f in &figures {
        println!("{f}");
    }
    match &a.kubeconfig {
        Some(kc) => {
            let live = ops::runtime().block_on(async {
                let cluster = crate::k8s::Connection::connect(Some(kc), None)
                    .await
                    .map_err(|e| e.to_string())?;
                let mut out = crate::bench::live::noop_reconcile(&cluster).await?;
                out.extend(
                    crate::bench::live::daemon_idle_rss(&exe, kc, a.slurmrestd_url.as_deref())
                        .await?,
                );
                out.extend(
                    crate::bench::live::daemon_soak(&exe, kc, a.slurmrestd_url.as_deref()).await?,
                );
                Ok::<_, String>(out)
            });
            let more = live.map_err(|e| CliError::Other(format!("live figures: {e}")))?;
            for f in &more {
                println!("{f}");
            }
            figures.extend(more);
        }
        None => println!(
            "noop.* and daemon.idle_rss skipped: pass --kubeconfig (e.g. the test bed's) to measure them"
        ),
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&figures).expect("figures serialize");
        std::fs::write(path, text)
            .map_err(|e| CliError::Other(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(Success::Done)
}
