//! `slurmops apply` and `slurmops plan --cluster`: the live side of the pipeline.

use std::path::{Path, PathBuf};

use super::{CliError, Format, Outcome, Success, load, read};
use crate::apply::{self, NoSlurm, Options};
use crate::cluster::window::WindowMode;
use crate::cluster::{self, values::Duration};
use crate::controller::drive::{Driven, RolloutError, drive};
use crate::controller::{Env, Target};
use crate::k8s::Connection;
use crate::render;
use crate::rollout::Observer;

#[derive(clap::Args)]
pub struct KubeArgs {
    /// kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context.
    #[arg(long)]
    pub context: Option<String>,
}

#[derive(clap::Args)]
pub struct ApplyArgs {
    #[arg(default_value = ".")]
    path: PathBuf,
    #[command(flatten)]
    kube: KubeArgs,
    /// Take over fields other field managers own.
    #[arg(long)]
    force_conflicts: bool,
    /// Allow pruning more than spec.policy.maxPrune (or everything).
    #[arg(long)]
    allow_mass_prune: bool,
    /// Report hand edits (drift) without correcting them; changes from cluster.yaml still apply.
    #[arg(long)]
    detect_only: bool,
    /// Wait this long for what was applied to become available (e.g. 5m); 0s: do not wait.
    #[arg(long, default_value = "5m", value_parser = Duration::parse)]
    wait: Duration,
    /// slurmrestd: the controller's pass drains leaving workers and rolls outdated ones. Without
    /// it, only NodeSets without pods are pruned and no scale-in over workers is applied.
    #[command(flatten)]
    slurm: super::SlurmArgs,
    /// With Slurm: do not roll outdated workers after applying (`slurmops rollout` does it later).
    #[arg(long)]
    no_rollout: bool,
    /// With Slurm: one pass — apply what is safe now, take the steps that are safe now — then
    /// print what waits (and for which jobs) and return; the daemon, or another apply, goes on.
    #[arg(long)]
    no_wait: bool,
}

pub(super) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

pub fn apply_cmd(a: ApplyArgs) -> Outcome {
    let loaded = read(&a.path)?;
    let c = load(&loaded)?;
    if c.spec.policy.suspend {
        println!(
            "{}: spec.policy.suspend is set; nothing applied",
            loaded.name
        );
        return Ok(Success::Done);
    }
    let r = render::render(&c);
    let opts = Options {
        force_conflicts: a.force_conflicts,
        allow_mass_prune: a.allow_mass_prune,
        detect_only: a.detect_only,
        wait: (a.wait.as_secs() > 0).then(|| std::time::Duration::from_secs(a.wait.as_secs())),
        ..Options::default()
    };
    let rep = runtime().block_on(async {
        let cluster =
            Connection::connect(a.kube.kubeconfig.as_deref(), a.kube.context.as_deref()).await?;
        match a.slurm.given() {
            Some((url, token)) => {
                let slurm = super::token_client(url, token)?;
                let how = How {
                    roll: !a.no_rollout,
                    one_pass: a.no_wait,
                };
                let done = with_slurm(&cluster, &slurm, &c, &loaded.text, &r, &opts, how).await?;
                for (set, nodes) in &done.drained_leaving {
                    println!("{set}: drained before removal: {}", nodes.join(", "));
                }
                for (set, r) in &done.rollouts {
                    if !r.replaced.is_empty() {
                        println!("{set}: replaced {}", r.replaced.join(", "));
                    }
                }
                if !done.done {
                    let now = k8s_openapi::jiff::Timestamp::now().as_second();
                    let windowed =
                        crate::controller::drive::windowed(done.applied.as_ref(), &done.progress);
                    let why = match windowed {
                        true => {
                            "waits for a maintenance window: the daemon, or apply then, goes on"
                        }
                        false => "--no-wait",
                    };
                    print!(
                        "not finished ({why}); where the NodeSets stand:\n{}",
                        crate::status::show::node_sets(&done.progress, now)
                    );
                }
                Ok::<_, CliError>(done.applied.unwrap_or_default())
            }
            None => Ok(apply::apply(&cluster, &c, &loaded.text, &r, &opts, &NoSlurm).await?),
        }
    })?;
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
            println!("{what}: {id}");
        }
    }
    for line in &rep.accounting {
        println!("accounting: {line}");
    }
    println!("{}: {}", loaded.name, rep.counts());
    if let Some(held) = rep.held_line() {
        println!("held: {held}");
    }
    if let Some(e) = &rep.accounting_error {
        return Err(CliError::Other(format!("accounting: {e}")));
    }
    Ok(Success::Done)
}

/// `apply` with Slurm: the controller's pass, looped until nothing is left to do. The first pass
/// applies and waits for availability; later ones apply again (without waiting) only to lower the
/// replicas of scale-ins and prune removed NodeSets once their workers are drained.
/// What `apply` with Slurm drives.
struct How {
    /// Replace outdated workers too (not only leaving ones).
    roll: bool,
    /// One pass, then return (`--no-wait`).
    one_pass: bool,
}

async fn with_slurm(
    cluster: &Connection,
    slurm: &crate::slurm::Client,
    c: &cluster::ClusterFile,
    text: &str,
    r: &render::Rendered,
    opts: &Options,
    how: How,
) -> Result<Driven, RolloutError> {
    let roll = how.roll;
    let observer = Observer::new(|set, e| println!("{set}: {e}"));
    let always = || true;
    // Watched workers wake the next pass: a new pod Ready starts the next wave at once.
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    let scope = crate::controller::observe::Scope::cluster(&c.metadata.namespace, &c.metadata.name);
    let mut cache = crate::controller::watch::Cache::start(&cluster.client, scope, wake.clone());
    if c.spec.node_sets.iter().any(|n| n.replicas.per_node()) {
        cache.follow_nodes(&cluster.client);
    }
    let env = Env {
        cluster,
        slurm: Some(slurm),
        cache: Some(&cache),
        fence: &always,
        observer: &observer,
        registration_grace: crate::controller::decide::REGISTRATION_GRACE,
    };
    let later = Options {
        wait: None,
        ..opts.clone()
    };
    let until = crate::controller::drive::Until {
        wake: Some(wake),
        max_passes: how.one_pass.then_some(1),
        ..crate::controller::drive::Until::for_people()
    };
    let (env, later) = (&env, &later);
    drive(
        |s: crate::controller::drive::Step| async move {
            let t = Target {
                c,
                text,
                rendered: r,
                apply: Some(if s.n == 0 { opts } else { later }),
                scope: crate::controller::PassScope {
                    moves: match roll {
                        true => crate::controller::Moves::All,
                        false => crate::controller::Moves::Leaving,
                    },
                    // Worker sync and autoscale are the daemon's (and their commands').
                    keep: crate::controller::upkeep::Keep::NONE,
                    ..Default::default()
                },
                fresh: s.fresh,
            };
            crate::controller::pass(env, &t).await
        },
        &until,
        &observer,
    )
    .await
}

/// `plan --cluster`: desired (the work tree) against the live cluster. With Slurm, the
/// controller's own pass, dry-run: what it observes and decides now, the objects it would apply
/// (scale-ins not yet safe held, as the pass holds them), and its worker steps.
pub fn plan_cluster(
    path: &Path,
    kube: &KubeArgs,
    slurm: Option<(String, String)>,
    fmt: Format,
) -> Outcome {
    let loaded = read(path)?;
    let c = load(&loaded)?;
    let r = render::render(&c);
    let p = runtime().block_on(async {
        let cluster =
            Connection::connect(kube.kubeconfig.as_deref(), kube.context.as_deref()).await?;
        let last = apply::applyset::last_applied(&cluster, &c).await?;
        let base = last.as_ref().map(|b| (b, render::render(b)));
        let base = base.as_ref().map(|(b, br)| (*b, br));
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let Some((url, token)) = slurm else {
            let mut p = apply::drift(&cluster, &c, &r, &r, base).await?;
            crate::plan::at(&mut p, &c, now);
            return Ok::<_, CliError>(p);
        };
        let client = super::token_client(&url, &token)?;
        let observer = Observer::default();
        let env = Env {
            cluster: &cluster,
            slurm: Some(&client),
            cache: None,
            fence: &|| false,
            observer: &observer,
            registration_grace: crate::controller::decide::REGISTRATION_GRACE,
        };
        let opts = Options::default();
        let t = Target {
            c: &c,
            text: &loaded.text,
            rendered: &r,
            apply: Some(&opts),
            scope: Default::default(),
            fresh: true,
        };
        let mut preview = crate::controller::preview(&env, &t).await?;
        if let Err(e) = &preview.observation.slurm {
            return Err(CliError::Other(format!(
                "Slurm's state is unknown, so the controller would do nothing destructive: {e}"
            )));
        }
        let mut p = apply::drift(&cluster, &c, &r, &preview.rendered(&r), base).await?;
        crate::plan::at(&mut p, &c, now);
        let changed: Vec<String> = p
            .changes
            .iter()
            .filter(|ch| ch.action != crate::plan::Action::Delete)
            .map(|ch| format!("{}/{}", ch.kind, ch.name))
            .collect();
        preview.settle(&changed);
        p.slurm.next_pass = preview.steps();
        p.slurm.drains = preview.drains(&p);
        preview.name_canaries(&mut p);
        preview.pending_held_back(&c, &mut p);
        // Live: slurmdbd's objects, not the last applied revision's.
        p.slurm.accounting = crate::accounting::observe(&client, &c, last.as_ref()).await?;
        Ok(p)
    })?;
    let target = format!(
        "cluster {} (live, namespace {})",
        c.metadata.name, c.metadata.namespace
    );
    print!("{}", super::formatted(&p, &target, fmt));
    Ok(super::changes(&p))
}

#[derive(clap::Args)]
pub struct RolloutArgs {
    #[arg(default_value = ".")]
    path: PathBuf,
    /// The NodeSet whose workers to replace (default: every NodeSet, all at once).
    #[arg(long)]
    node_set: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
    /// slurmrestd (required: no worker is replaced without Slurm's word).
    #[command(flatten)]
    slurm: super::SlurmArgs,
    /// Proceed past this NodeSet's failed canary on purpose (recorded as an Event), then roll it.
    #[arg(long, value_name = "NODESET")]
    resume: Option<String>,
    /// Drain workers of NodeSets with `update.window` outside their maintenance windows, on
    /// purpose (recorded as an Event on each such NodeSet). Without it, they wait for a window.
    #[arg(long)]
    ignore_window: bool,
}

/// `slurmops rollout`: the controller's pass over the NodeSets of cluster.yaml (or one), looped
/// until every worker runs its workload's revision, each drained through Slurm first.
pub fn rollout_cmd(mut a: RolloutArgs) -> Outcome {
    if a.resume.is_some() {
        a.node_set = a.resume.clone();
    }
    let loaded = read(&a.path)?;
    let c = load(&loaded)?;
    if c.spec.policy.suspend {
        println!(
            "{}: spec.policy.suspend is set; no worker is replaced",
            loaded.name
        );
        return Ok(Success::Done);
    }
    let sets: Vec<&crate::cluster::types::NodeSet> = c
        .spec
        .node_sets
        .iter()
        .filter(|n| a.node_set.as_ref().is_none_or(|x| *x == n.name))
        .collect();
    if sets.is_empty() {
        return Err(CliError::Other(format!(
            "{}: no NodeSet {:?}",
            loaded.name,
            a.node_set.unwrap_or_default()
        )));
    }
    let slurm = a
        .slurm
        .client("no worker is replaced without Slurm's word")
        .map_err(CliError::Other)?;
    let r = render::render(&c);
    let observer = Observer::new(|set, e| println!("{set}: {e}"));
    let ns = &c.metadata.namespace;
    runtime().block_on(async {
        let cluster =
            Connection::connect(a.kube.kubeconfig.as_deref(), a.kube.context.as_deref()).await?;
        if let Some(set) = &a.resume {
            let e = crate::controller::act::resume_canary(&cluster.client, ns, set).await?;
            println!("{set}: {e}");
            if let crate::rollout::Event::CanaryVerdict {
                reason, message, ..
            } = e
            {
                note(&cluster, &c, set, reason, message).await;
            }
        }
        if a.ignore_window {
            for n in sets.iter().filter(|n| n.update.window != WindowMode::None) {
                let message = format!(
                    "slurmops rollout --ignore-window: workers of NodeSet {} drain outside its maintenance windows (update.window: {})",
                    n.name,
                    n.update.window.as_str()
                );
                println!("{}: {message}", n.name);
                note(&cluster, &c, &n.name, crate::vocab::EVENT_WINDOW_IGNORED, message).await;
            }
        }
        let rollout = crate::controller::drive::Rollout {
            c: &c,
            text: &loaded.text,
            rendered: &r,
            node_set: a.node_set.clone(),
            ignore_window: a.ignore_window,
            until: crate::controller::drive::Until::for_people(),
            observer: observer.clone(),
            watch: true,
        };
        let done = crate::controller::drive::roll(&cluster, &slurm, &rollout).await?;
        for n in &sets {
            let replaced = done.rollouts.get(&n.name).map_or(0, |r| r.replaced.len());
            println!("{}: {replaced} worker(s) replaced", n.name);
        }
        if !done.done {
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            print!(
                "not finished (waits for a maintenance window: the daemon, or rollout then, goes on; --ignore-window rolls now); where the NodeSets stand:\n{}",
                crate::status::show::node_sets(&done.progress, now)
            );
        }
        Ok(Success::Done)
    })
}

/// Records an operator's decision about NodeSet SET as a Warning Event on its workload. The
/// Event is for people: failing to record it does not undo the decision.
async fn note(
    cluster: &Connection,
    c: &cluster::ClusterFile,
    set: &str,
    reason: &'static str,
    message: String,
) {
    let managed = c
        .spec
        .node_sets
        .iter()
        .any(|n| n.name == *set && n.managed());
    let note = crate::status::Note {
        involved: crate::status::node_set_ref(&c.metadata.namespace, set, managed),
        reason,
        message,
        warning: true,
    };
    let _ = crate::status::record(&cluster.client, note).await;
}
