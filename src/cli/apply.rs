//! `slurmops apply` and `slurmops plan --cluster`: the live side of the pipeline.

use std::path::{Path, PathBuf};

use super::{EXIT_CHANGES, EXIT_ERROR, EXIT_OK, Format, load, read};
use crate::apply::{self, ApplyError, Cluster, NoSlurm, Options};
use crate::controller::drive::{Driven, RolloutError, drive};
use crate::controller::{Env, PassError, Target};
use crate::plan::format;
use crate::render;
use crate::rollout::Observer;
use crate::spec::{self, values::Duration};

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
    /// slurmrestd URL: pruning a NodeSet's StatefulSet first checks its nodes are drained.
    /// Without it, only NodeSets without pods are pruned.
    #[arg(long, env = "SLURMRESTD_URL")]
    slurmrestd_url: Option<String>,
    #[arg(long, env = "SLURM_JWT", hide_env_values = true)]
    slurm_jwt: Option<String>,
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

pub fn apply_cmd(a: ApplyArgs) -> i32 {
    let Ok(loaded) = read(&a.path) else {
        return EXIT_ERROR;
    };
    let Ok(c) = load(&loaded) else {
        return EXIT_ERROR;
    };
    if c.spec.policy.suspend {
        println!(
            "{}: spec.policy.suspend is set; nothing applied",
            loaded.name
        );
        return EXIT_OK;
    }
    let r = render::render(&c);
    let opts = Options {
        force_conflicts: a.force_conflicts,
        allow_mass_prune: a.allow_mass_prune,
        detect_only: a.detect_only,
        wait: (a.wait.as_secs() > 0).then(|| std::time::Duration::from_secs(a.wait.as_secs())),
        ..Options::default()
    };
    let result = runtime().block_on(async {
        let cluster =
            Cluster::connect(a.kube.kubeconfig.as_deref(), a.kube.context.as_deref()).await?;
        match (&a.slurmrestd_url, &a.slurm_jwt) {
            (Some(url), Some(token)) => {
                let slurm = super::token_client(url, token)
                    .map_err(|e| ApplyError::Connect(e.to_string()))?;
                let how = How {
                    roll: !a.no_rollout,
                    one_pass: a.no_wait,
                };
                let done = with_slurm(&cluster, &slurm, &c, &loaded.text, &r, &opts, how)
                    .await
                    .map_err(|e| match e {
                        RolloutError::Pass(PassError::Apply(e)) => e,
                        other => ApplyError::Connect(other.to_string()),
                    })?;
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
                Ok(done.applied.unwrap_or_default())
            }
            _ => apply::apply(&cluster, &c, &loaded.text, &r, &opts, &NoSlurm).await,
        }
    });
    match result {
        Ok(rep) => {
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
                eprintln!("error: accounting: {e}");
                return EXIT_ERROR;
            }
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_ERROR
        }
    }
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
    cluster: &Cluster,
    slurm: &crate::slurm::Client,
    c: &spec::ClusterFile,
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
        registration_grace: 300,
    };
    let later = Options {
        wait: None,
        ..opts.clone()
    };
    let until = crate::controller::drive::Until {
        wake: Some(wake),
        max_passes: how.one_pass.then_some(1),
        ..crate::controller::drive::split(&crate::rollout::Settings::default()).1
    };
    let (env, later) = (&env, &later);
    drive(
        |s: crate::controller::drive::Step| async move {
            let t = Target {
                c,
                text,
                rendered: r,
                apply: Some(if s.n == 0 { opts } else { later }),
                roll,
                fresh: s.fresh,
            };
            crate::controller::pass(env, &t).await
        },
        &until,
        &observer,
    )
    .await
}

/// `plan --cluster`: desired (the work tree) against the live cluster.
pub fn plan_cluster(
    path: &Path,
    kube: &KubeArgs,
    slurm: Option<(String, String)>,
    fmt: Format,
) -> i32 {
    let Ok(loaded) = read(path) else {
        return EXIT_ERROR;
    };
    let Ok(c) = load(&loaded) else {
        return EXIT_ERROR;
    };
    let r = render::render(&c);
    let result = runtime().block_on(async {
        let cluster = Cluster::connect(kube.kubeconfig.as_deref(), kube.context.as_deref()).await?;
        let last = apply::applyset::last_applied(&cluster, &c).await?;
        let base = last.as_ref().map(|b| (b, render::render(b)));
        let base = base.as_ref().map(|(b, br)| (*b, br));
        let mut p = apply::drift(&cluster, &c, &r, base).await?;
        crate::plan::at(&mut p, &c, k8s_openapi::jiff::Timestamp::now().as_second());
        if let Some((url, token)) = slurm {
            let client = super::token_client(&url, &token)
                .map_err(|e| ApplyError::Connect(e.to_string()))?;
            // One read of the queue for the drains, the canaries and the windows.
            let jobs = client
                .jobs()
                .await
                .map_err(|e| ApplyError::Connect(e.to_string()))?;
            p.slurm.drains = drains(&cluster, &client, &jobs, &c, &p)
                .await
                .map_err(ApplyError::Connect)?;
            name_canaries(&cluster, &jobs, &c, &mut p)
                .await
                .map_err(ApplyError::Connect)?;
            pending_held_back(&c, &mut p, &jobs);
            // Live: slurmdbd's objects, not the last applied revision's.
            p.slurm.accounting = crate::accounting::observe(&client, &c, last.as_ref())
                .await
                .map_err(|e| ApplyError::Connect(format!("accounting: {e}")))?;
        }
        Ok::<_, ApplyError>(p)
    });
    let p = match result {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_ERROR;
        }
    };
    let target = format!(
        "cluster {} (live, namespace {})",
        c.metadata.name, c.metadata.namespace
    );
    let out = match fmt {
        Format::Text => format::text(&p, &target),
        Format::Markdown => format::markdown(&p, &target),
        Format::Json => format::json(&p),
    };
    print!("{out}");
    if p.has_changes() {
        EXIT_CHANGES
    } else {
        EXIT_OK
    }
}

/// The cluster.yaml recorded by the last apply (in the ApplySet parent), if any and valid.
#[derive(clap::Args)]
pub struct RolloutArgs {
    #[arg(default_value = ".")]
    path: PathBuf,
    /// The NodeSet whose workers to replace (default: every NodeSet, all at once).
    #[arg(long)]
    node_set: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
    /// slurmrestd URL (required: no worker is replaced without Slurm's word).
    #[arg(long, env = "SLURMRESTD_URL")]
    slurmrestd_url: String,
    #[arg(long, env = "SLURM_JWT", hide_env_values = true)]
    slurm_jwt: String,
    /// Proceed past this NodeSet's failed canary on purpose (recorded as an Event), then roll it.
    #[arg(long, value_name = "NODESET")]
    resume: Option<String>,
}

/// `slurmops rollout`: replaces outdated workers, draining each through Slurm first.
pub fn rollout_cmd(mut a: RolloutArgs) -> i32 {
    if a.resume.is_some() {
        a.node_set = a.resume.clone();
    }
    let Ok(loaded) = read(&a.path) else {
        return EXIT_ERROR;
    };
    let Ok(c) = load(&loaded) else {
        return EXIT_ERROR;
    };
    let sets: Vec<&crate::spec::types::NodeSet> = c
        .spec
        .node_sets
        .iter()
        .filter(|n| a.node_set.as_ref().is_none_or(|x| *x == n.name))
        .collect();
    if sets.is_empty() {
        eprintln!(
            "error: {}: no NodeSet {:?}",
            loaded.name,
            a.node_set.unwrap_or_default()
        );
        return EXIT_ERROR;
    }
    let slurm = match super::token_client(&a.slurmrestd_url, &a.slurm_jwt) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_ERROR;
        }
    };
    let observer = Observer::new(|set, e| println!("{set}: {e}"));
    let result = runtime().block_on(async {
        let cluster = Cluster::connect(a.kube.kubeconfig.as_deref(), a.kube.context.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        if let Some(set) = &a.resume {
            let e =
                crate::controller::act::resume_canary(&cluster.client, &c.metadata.namespace, set)
                    .await
                    .map_err(|e| e.to_string())?;
            println!("{set}: {e}");
            if let crate::rollout::Event::CanaryVerdict {
                reason, message, ..
            } = e
            {
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
                // The Event is for people; failing to record it does not undo the resume.
                let _ = crate::status::record(&cluster.client, note).await;
            }
        }
        // Every NodeSet at once, each within its own maxUnavailable; one NodeSet is watched, many
        // are polled (no watch streams per NodeSet).
        let watch = sets.len() == 1;
        let rolls = sets.iter().map(|ns| {
            let settings = crate::rollout::Settings {
                observer: observer.clone(),
                watch,
                canary: crate::spec::canary::Validation::of(&c.spec, ns),
                ..crate::rollout::Settings::of(ns)
            };
            let (client, slurm, namespace) = (&cluster.client, &slurm, &c.metadata.namespace);
            async move {
                crate::controller::drive::roll(client, slurm, namespace, &ns.name, &settings)
                    .await
                    .map(|r| (ns.name.clone(), r))
            }
        });
        for done in futures::future::join_all(rolls).await {
            let (name, report) = done.map_err(|e| e.to_string())?;
            println!("{name}: {} worker(s) replaced", report.replaced.len());
        }
        Ok::<(), String>(())
    });
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_ERROR
        }
    }
}

/// The nodes a plan drains (rolled NodeSets: every worker; scale-in: the leaving ordinals; removed
/// NodeSets: every worker) and the jobs running on each, from the live pods and slurmrestd.
use crate::controller::decide::SlurmView;
use crate::spec::values::Replicas;

/// The workers of a NodeSet whose pods slurmops makes that a count of COUNT gives back (as the
/// controller chooses them: idle ones, whatever their ordinals).
fn leaving_of_managed(
    set: &str,
    pods: &[kube::api::DynamicObject],
    count: u32,
    slurm: &SlurmView,
) -> Vec<String> {
    let pods: Vec<k8s_openapi::api::core::v1::Pod> = pods
        .iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    let view = crate::controller::decide::SetView {
        name: set.to_string(),
        replicas: pods.len() as u32,
        update_revision: None,
        managed: true,
        canary: None,
        current_revision: None,
        workers: pods
            .iter()
            .filter_map(crate::controller::observe::worker)
            .collect(),
    };
    let keep = crate::controller::per_node::keep_count(&view, count, slurm).keep;
    view.workers
        .into_iter()
        .filter(|w| !w.deleting && !keep.contains(&w.name))
        .map(|w| w.name)
        .collect()
}

/// For each rollout that waits for a window: the pending jobs of the partitions holding its
/// NodeSet, and those its reservation keeps off the workers now (their time limits would still
/// run when the window opens).
fn pending_held_back(c: &spec::ClusterFile, p: &mut crate::plan::Plan, jobs: &[crate::slurm::Job]) {
    for r in &mut p.slurm.node_sets_rolled {
        let Some(w) = r.window.as_mut() else {
            continue;
        };
        let partitions: Vec<String> = c
            .spec
            .partitions
            .iter()
            .filter(|x| x.node_sets.iter().any(|n| *n == r.node_set || n == "ALL"))
            .map(|x| x.name.clone())
            .collect();
        let pending: Vec<&crate::slurm::Job> = jobs
            .iter()
            .filter(|j| j.has_state("PENDING"))
            .filter(|j| {
                j.partition
                    .split(',')
                    .any(|x| partitions.iter().any(|p| p == x))
            })
            .collect();
        let held_back = match (w.now, w.next) {
            (Some(now), Some((start, _))) => pending
                .iter()
                .filter(|j| {
                    j.time_limit
                        .is_none_or(|m| now.saturating_add(m.saturating_mul(60)) > start)
                })
                .count(),
            _ => pending.len(),
        };
        w.pending = Some(crate::plan::PendingJobs {
            held_back,
            pending: pending.len(),
            partitions,
        });
    }
}

/// The canaries a rollout would take first, by name: the controller's own choice (idle workers
/// first, then by name) over the live workers and jobs.
async fn name_canaries(
    cluster: &Cluster,
    jobs: &[crate::slurm::Job],
    c: &spec::ClusterFile,
    p: &mut crate::plan::Plan,
) -> Result<(), String> {
    if !p.slurm.node_sets_rolled.iter().any(|r| r.canary.is_some()) {
        return Ok(());
    }
    for r in &mut p.slurm.node_sets_rolled {
        let Some(canary) = r.canary.as_mut() else {
            continue;
        };
        let selector = format!("{}={}", crate::render::names::LABEL_NODESET, r.node_set);
        let pods = cluster
            .list("v1", "Pod", &c.metadata.namespace, &selector)
            .await
            .map_err(|e| e.to_string())?;
        let candidates: Vec<crate::rollout::Candidate> = pods
            .iter()
            .filter_map(|p| serde_json::from_value(serde_json::to_value(p).ok()?).ok())
            .filter(|p: &k8s_openapi::api::core::v1::Pod| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| {
                let name = p.metadata.name.clone()?;
                Some(crate::rollout::Candidate {
                    ready: crate::rollout::pod_ready(&p),
                    jobs: jobs
                        .iter()
                        .filter(|j| j.holds_nodes() && j.nodes.contains(&name))
                        .cloned()
                        .collect(),
                    pod: name,
                })
            })
            .collect();
        canary.nodes = crate::rollout::order(&candidates)
            .into_iter()
            .take(canary.replicas as usize)
            .collect();
    }
    Ok(())
}

async fn drains(
    cluster: &Cluster,
    slurm: &crate::slurm::Client,
    jobs: &[crate::slurm::Job],
    c: &spec::ClusterFile,
    p: &crate::plan::Plan,
) -> Result<Vec<crate::plan::NodeDrain>, String> {
    let s = &p.slurm;
    let mut sets: Vec<(String, u32)> = s
        .node_sets_rolled
        .iter()
        .map(|r| (r.node_set.clone(), 0))
        .collect();
    sets.extend(s.scaled.iter().filter_map(|x| match (x.from, x.to) {
        (Replicas::Count(a), Replicas::Count(b)) => (b < a).then(|| (x.node_set.clone(), b)),
        // Workers follow nodes (or leave them): any may drain.
        _ => Some((x.node_set.clone(), 0)),
    }));
    sets.extend(s.node_sets_removed.iter().map(|n| (n.clone(), 0)));
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    let mut slurm_view: Option<SlurmView> = None;
    let mut out = Vec::new();
    for (set, from) in sets {
        let selector = format!("{}={set}", crate::render::names::LABEL_NODESET);
        let pods = cluster
            .list("v1", "Pod", &c.metadata.namespace, &selector)
            .await
            .map_err(|e| e.to_string())?;
        let managed = c
            .spec
            .node_sets
            .iter()
            .any(|n| n.name == set && n.managed() && !n.replicas.per_node());
        let mut names: Vec<String> = if managed {
            // slurmops chooses who leaves: the workers the controller would not keep.
            slurm_view.get_or_insert(SlurmView::new(
                slurm.nodes().await.map_err(|e| e.to_string())?,
                jobs.to_vec(),
            ));
            let view = slurm_view.as_ref().expect("set above");
            leaving_of_managed(&set, &pods, from, view)
        } else {
            pods.into_iter()
                .filter_map(|p| p.metadata.name)
                .filter(|n| {
                    n.rsplit_once('-')
                        .and_then(|(_, i)| i.parse::<u32>().ok())
                        .is_some_and(|i| i >= from)
                })
                .collect()
        };
        names.sort();
        for node in names {
            let on: Vec<crate::plan::JobOnNode> = jobs
                .iter()
                .filter(|j| j.holds_nodes() && j.nodes.contains(&node))
                .map(|j| crate::plan::JobOnNode {
                    id: j.id,
                    user: j.user.clone(),
                    end_time: j.end_time,
                })
                .collect();
            out.push(crate::plan::NodeDrain {
                node,
                node_set: set.clone(),
                jobs: on,
            });
        }
    }
    Ok(out)
}
