//! `sync` and `autoscale`: the controller's pass with worker sync or autoscale alone, moving no
//! worker, once or every interval — the daemon's pass and its writes, with no Lease to hold. In
//! a loop, Slurm or the API being away is a pass skipped (and said), not the end; once, it is
//! the command's error.

use std::path::Path;

use super::{Error, connect, runtime};
use crate::cluster::ClusterFile;
use crate::controller::upkeep::Keep;
use crate::k8s::Connection;
use crate::rollout::{Event, Observer};
use crate::slurm::Client;

/// How often, against which cluster.
pub struct Every<'a> {
    pub kubeconfig: Option<&'a Path>,
    pub context: Option<&'a str>,
    /// One pass, then return.
    pub once: bool,
    pub interval: std::time::Duration,
}

/// Worker sync over C every E (GRACE: seconds a Ready worker may stay unknown to Slurm).
/// OBSERVER hears each write; SAY is told, once, when the Kubernetes nodes cannot be read (and
/// cordons and node health are not followed), not every pass.
pub fn sync(
    c: &ClusterFile,
    slurm: &Client,
    e: &Every<'_>,
    grace: i64,
    observer: &Observer,
    mut say: impl FnMut(&str),
) -> Result<(), Error> {
    let keep = Keep {
        sync: true,
        autoscale: false,
    };
    let mut warned = None;
    every(e, async |cluster| {
        let out = upkeep(cluster, slurm, c, keep, grace, observer).await?;
        let warning = out.health_error.clone();
        if let Some(w) = warning.as_ref().filter(|w| warned.as_ref() != Some(*w)) {
            say(&format!(
                "warning: cordons and node health are not followed: {w}"
            ));
        }
        warned = warning;
        Ok(())
    })
}

/// Autoscale over C every E. OBSERVER hears each scaling; SAY is told what each NodeSet waits
/// for when that changed (not the same line every pass).
pub fn autoscale(
    c: &ClusterFile,
    slurm: &Client,
    e: &Every<'_>,
    observer: &Observer,
    mut say: impl FnMut(&str),
) -> Result<(), Error> {
    let keep = Keep {
        sync: false,
        autoscale: true,
    };
    let grace = crate::controller::decide::REGISTRATION_GRACE;
    let mut last: Vec<String> = Vec::new();
    every(e, async |cluster| {
        let out = upkeep(cluster, slurm, c, keep, grace, observer).await?;
        let lines: Vec<String> = out.upkeep.scale.iter().map(waiting).collect();
        for l in lines.iter().filter(|l| !l.is_empty() && !last.contains(l)) {
            say(l);
        }
        last = lines;
        Ok(())
    })
}

/// Whether C has a NodeSet to autoscale.
pub fn autoscales(c: &ClusterFile) -> bool {
    c.spec.node_sets.iter().any(|n| n.autoscale.is_some())
}

/// Whether E is a scaling (what `autoscale` prints as it happens).
pub fn is_scaling(e: &Event) -> bool {
    matches!(e, Event::Scaled { .. })
}

/// What NodeSet S waits for, in a line; empty when it changes now (the change is told).
fn waiting(s: &crate::controller::upkeep::Scale) -> String {
    use crate::controller::features::autoscale::Decision;
    match &s.decision {
        Decision::Hold { why } => format!("{}: {} worker(s), holding: {why}", s.node_set, s.from),
        Decision::ScaleIn { leaving, .. } if s.to.is_none() => format!(
            "{}: {} worker(s), waiting for {} to drain before scaling in",
            s.node_set,
            s.from,
            leaving.join(", ")
        ),
        _ => String::new(),
    }
}

/// One controller pass over C that moves no worker and keeps KEEP (worker sync, autoscale).
async fn upkeep(
    cluster: &Connection,
    slurm: &Client,
    c: &ClusterFile,
    keep: Keep,
    grace: i64,
    observer: &Observer,
) -> Result<crate::controller::Outcome, String> {
    let env = crate::controller::Env {
        cluster,
        slurm: Some(slurm),
        cache: None,
        fence: &|| true,
        observer,
        registration_grace: grace,
    };
    let rendered = crate::render::Rendered::default();
    let t = crate::controller::Target {
        c,
        text: "",
        rendered: &rendered,
        apply: None,
        scope: crate::controller::PassScope {
            moves: crate::controller::Moves::Nothing,
            keep,
            ..Default::default()
        },
        fresh: true,
        decrees: None,
    };
    let out = crate::controller::pass(&env, &t)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(e) = &out.slurm_error {
        return Err(format!("Slurm state unknown, nothing changed: {e}"));
    }
    match &out.upkeep_error {
        Some(e) => Err(e.clone()),
        None => Ok(out),
    }
}

/// Runs PASS once (`once`) or every interval; PASS says what it did. In a loop a failed pass is
/// printed on stderr and the next one follows.
fn every(
    e: &Every<'_>,
    mut pass: impl AsyncFnMut(&Connection) -> Result<(), String>,
) -> Result<(), Error> {
    let interval = e.interval.max(std::time::Duration::from_secs(1));
    runtime().block_on(async {
        let cluster = connect(e.kubeconfig, e.context).await?;
        loop {
            match pass(&cluster).await {
                Ok(()) if e.once => return Ok(()),
                Ok(()) => {}
                Err(why) if e.once => return Err(Error::Other(why)),
                Err(why) => eprintln!("error: {why}"),
            }
            tokio::time::sleep(interval).await;
        }
    })
}
