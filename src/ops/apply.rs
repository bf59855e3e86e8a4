//! `apply`: cluster.yaml applied through the controller's pass — server-side apply and prune,
//! then (with Slurm) drain-before-replace of the workers that leave or are outdated, pass after
//! pass until nothing is left to do (or one pass with `one_pass`).

use std::path::Path;

use super::{Error, cluster_at, connect, runtime, token_client};
use crate::apply::{Options, Report};
use crate::cluster::ClusterFile;
use crate::controller::drive::{Driven, RolloutError, Step, Until, drive};
use crate::controller::features::controllers_roll::Roll;
use crate::controller::{Env, Moves, PassScope, Target};
use crate::k8s::Connection;
use crate::render::{self, Rendered};
use crate::rollout::Observer;

/// What to apply, and how.
pub struct Request<'a> {
    pub path: &'a Path,
    pub kubeconfig: Option<&'a Path>,
    pub context: Option<&'a str>,
    pub options: Options,
    /// slurmrestd's URL and a JWT. Without them only NodeSets without pods are pruned and no
    /// scale-in over workers is applied.
    pub slurm: Option<(&'a str, &'a str)>,
    /// With Slurm: replace outdated workers too (not only leaving ones).
    pub roll: bool,
    /// With Slurm: one pass, then return.
    pub one_pass: bool,
}

/// What an apply did.
pub struct Applied {
    pub file: String,
    /// `spec.policy.suspend` is set: nothing was applied.
    pub suspended: bool,
    /// What the passes' applies did.
    pub report: Report,
    /// With Slurm: what the passes did to the workers, and where the NodeSets stand if not done.
    pub driven: Option<Driven>,
    /// Not finished because NodeSets wait for a maintenance window.
    pub windowed: bool,
}

/// Applies R (OBSERVER hears each worker step as it is taken).
pub fn apply(r: &Request<'_>, observer: &Observer) -> Result<Applied, Error> {
    let (loaded, c) = cluster_at(r.path)?;
    if c.spec.policy.suspend {
        return Ok(Applied {
            file: loaded.name,
            suspended: true,
            report: Report::default(),
            driven: None,
            windowed: false,
        });
    }
    let rendered = render::render(&c);
    let started = std::time::Instant::now();
    let (report, driven) = runtime().block_on(async {
        let cluster = connect(r.kubeconfig, r.context).await?;
        match r.slurm {
            Some((url, token)) => {
                let slurm = token_client(url, token)?;
                let mut done =
                    with_slurm(&cluster, &slurm, &c, &loaded.text, &rendered, r, observer).await?;
                let report = done.applied.take().unwrap_or_default();
                Ok::<_, Error>((report, Some(done)))
            }
            None => {
                let env = Env {
                    cluster: &cluster,
                    slurm: None::<&crate::slurm::Client>,
                    cache: None,
                    fence: &|| true,
                    observer,
                    registration_grace: crate::controller::decide::REGISTRATION_GRACE,
                };
                let t = Target {
                    c: &c,
                    text: &loaded.text,
                    rendered: &rendered,
                    apply: Some(&r.options),
                    scope: PassScope::default(),
                    fresh: true,
                    decrees: None,
                };
                let mut out = crate::controller::pass(&env, &t).await?;
                let report = out.applied.take().unwrap_or_default();
                // Controllers behind one address are replaced pass by pass
                // (controller::features::controllers_roll): with --wait, passes go on until they are and one
                // of them has control, within the same --wait. Those passes apply nothing
                // again: the first applied everything.
                if let Some(limit) = r.options.wait {
                    let t = Target { apply: None, ..t };
                    roll_controllers(&cluster, &env, &t, out, started + limit, limit).await?;
                }
                Ok((report, None))
            }
        }
    })?;
    let windowed = driven
        .as_ref()
        .is_some_and(|d| crate::controller::drive::windowed(Some(&report), &d.progress));
    Ok(Applied {
        file: loaded.name,
        suspended: false,
        report,
        driven,
        windowed,
    })
}

impl Applied {
    /// What the apply did, a line each, as `slurmops apply` prints it after the passes.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if self.suspended {
            out += &format!(
                "{}: spec.policy.suspend is set; nothing applied\n",
                self.file
            );
            return out;
        }
        if let Some(done) = &self.driven {
            for (set, nodes) in &done.drained_leaving {
                out += &format!("{set}: drained before removal: {}\n", nodes.join(", "));
            }
            for (set, r) in &done.rollouts {
                if !r.replaced.is_empty() {
                    out += &format!("{set}: replaced {}\n", r.replaced.join(", "));
                }
            }
            if !done.done {
                let now = k8s_openapi::jiff::Timestamp::now().as_second();
                let why = match self.windowed {
                    true => "waits for a maintenance window: the daemon, or apply then, goes on",
                    false => "--no-wait",
                };
                out += &format!(
                    "not finished ({why}); where the NodeSets stand:\n{}",
                    crate::status::show::node_sets(&done.progress, now)
                );
            }
        }
        let rep = &self.report;
        for (what, list) in [
            ("created", &rep.created),
            ("updated", &rep.updated),
            ("recreated (pods orphaned and adopted)", &rep.recreated),
            ("pruned", &rep.pruned),
            (
                "unchanged (confirmed by a server-side dry run)",
                &rep.confirmed_by_dry_run,
            ),
            ("drift left in place (detect-only)", &rep.drifted),
        ] {
            for id in list {
                out += &format!("{what}: {id}\n");
            }
        }
        for line in &rep.accounting {
            out += &format!("accounting: {line}\n");
        }
        out += &format!("{}: {}\n", self.file, rep.counts());
        if let Some(held) = rep.held_line() {
            out += &format!("held: {held}\n");
        }
        out
    }

    /// Why the apply failed after applying the objects: slurmdbd refused or failed a change.
    pub fn error(&self) -> Option<Error> {
        let e = self.report.accounting_error.as_ref()?;
        Some(Error::Other(format!("accounting: {e}")))
    }
}

/// `apply --wait` without Slurm: passes after the first (OUT) until the controllers behind one
/// address run the new template and one has control, by DEADLINE (LIMIT after the apply began);
/// what waits is said once each time it changes.
async fn roll_controllers(
    cluster: &Connection,
    env: &Env<'_, crate::slurm::Client>,
    t: &Target<'_>,
    mut out: crate::controller::Outcome,
    deadline: std::time::Instant,
    limit: std::time::Duration,
) -> Result<(), Error> {
    let mut said = None;
    loop {
        let why = match out.controllers.as_ref() {
            None => return Ok(()),
            Some(Roll::Done) => {
                // The pod replaced last may not run yet, nor anyone have control.
                let name = crate::render::names::Names::new(t.c).controller();
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if let Some(sts) = t.rendered.get("StatefulSet", &name) {
                    crate::apply::health::wait(cluster, std::slice::from_ref(sts), left).await?;
                }
                return Ok(());
            }
            Some(Roll::Wait(why) | Roll::Replace { pod: why, .. }) => why.clone(),
        };
        if std::time::Instant::now() >= deadline {
            return Err(crate::apply::ApplyError::Timeout {
                after: limit,
                pending: format!("the controllers' roll ({why})"),
            }
            .into());
        }
        if matches!(out.controllers, Some(Roll::Wait(_))) && said.as_ref() != Some(&why) {
            eprintln!("controllers: {why}");
            said = Some(why);
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        out = crate::controller::pass(env, t).await?;
    }
}

/// `apply` with Slurm: the controller's pass, looped until nothing is left to do. The first pass
/// applies and waits for availability; later ones apply again (without waiting) only to lower the
/// replicas of scale-ins and prune removed NodeSets once their workers are drained.
async fn with_slurm(
    cluster: &Connection,
    slurm: &crate::slurm::Client,
    c: &ClusterFile,
    text: &str,
    rendered: &Rendered,
    r: &Request<'_>,
    observer: &Observer,
) -> Result<Driven, RolloutError> {
    // Watched workers wake the next pass: a new pod Ready starts the next wave at once.
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    let scope = crate::controller::observe::Scope::cluster(&c.metadata.namespace, &c.metadata.name);
    let mut cache = crate::controller::watch::Cache::start(&cluster.client, scope, wake.clone());
    if c.spec.node_sets.iter().any(|n| n.replicas.per_node()) {
        cache.follow_nodes(
            &cluster.client,
            &crate::controller::observe::node_label_keys(c),
        );
    }
    let env = Env {
        cluster,
        slurm: Some(slurm),
        cache: Some(&cache),
        fence: &|| true,
        observer,
        registration_grace: crate::controller::decide::REGISTRATION_GRACE,
    };
    let later = Options {
        wait: None,
        ..r.options.clone()
    };
    let until = Until {
        wake: Some(wake),
        max_passes: r.one_pass.then_some(1),
        ..Until::for_people()
    };
    let moves = match r.roll {
        true => Moves::All,
        false => Moves::Leaving,
    };
    let (env, later, first) = (&env, &later, &r.options);
    drive(
        |s: Step| async move {
            let t = Target {
                c,
                text,
                rendered,
                apply: Some(if s.n == 0 { first } else { later }),
                scope: PassScope {
                    moves,
                    // Worker sync and autoscale are the daemon's (and their commands').
                    keep: crate::controller::upkeep::Keep::NONE,
                    ..Default::default()
                },
                fresh: s.fresh,
                decrees: None,
            };
            crate::controller::pass(env, &t).await
        },
        &until,
        observer,
    )
    .await
}
