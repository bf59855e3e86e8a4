//! `slurmops status`: what the daemon last did (its status ConfigMap), once, as JSON, or redrawn
//! every 2 seconds.

use crate::cli::prelude::*;
use crate::ops::status::{Where, follow};

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Namespace the daemon runs in.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    /// Only the daemon of this cluster (default: every daemon of the namespace).
    #[arg(long)]
    cluster: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
    /// Redraw every 2 seconds (a table to follow a long rollout).
    #[arg(long, conflicts_with = "output")]
    watch: bool,
    /// text, or json for scripts (one document: `version`, `statuses`).
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    output: Output,
}

/// `slurmops status`: the daemon's status ConfigMap, readable; `--watch` redraws it.
pub fn exec(a: StatusArgs) -> Outcome {
    let w = Where {
        kubeconfig: a.kube.kubeconfig.as_deref(),
        context: a.kube.context.as_deref(),
        namespace: &a.namespace,
        cluster: a.cluster.as_deref(),
    };
    follow(&w, |all| {
        if matches!(a.output, Output::Json) {
            print!("{}", crate::status::show::json(all));
            return None;
        }
        let now = k8s_openapi::jiff::Timestamp::now();
        let text = crate::status::show::all(all, now.as_second());
        if !a.watch {
            print!("{text}");
            return None;
        }
        // Clear the screen and draw again, like watch(1).
        print!("\x1b[2J\x1b[H{now}  (every 2s, Ctrl-C to stop)\n\n{text}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        Some(std::time::Duration::from_secs(2))
    })?;
    Ok(Success::Done)
}
