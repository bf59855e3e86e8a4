//! The daemon at the scale slurmops is sold for, on real parts: the scale Slurm instance
//! (`scale.rs`: SETS x PER node records, a queue of held jobs), a fleet of GPU-sized Nodes on the
//! real kube-apiserver whose worker pods kube-controller-manager makes from the rendered
//! StatefulSets (`fleet.rs`), and `slurmops run` following a repository on the bed's git server,
//! with one debug line per pass (`--log-level debug`). Measured from its log, its /proc and the
//! apiserver: passes idle and under job churn, commit → first drain, a rollout of every NodeSet
//! (its first wave, then its end: each replaced worker's pod starts its record's real slurmd,
//! which registers, and the daemon resumes it), status bytes, Events, peak RSS. Shared by the
//! scale test and the benchmark.

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ListParams};
use serde_json::Value;

use super::daemon::{Daemon, Repo};
use super::fleet::Fleet;
use super::scale::Scale;
use super::{bed, client, eventually, unique_suffix};

/// What to run.
pub struct Sizes {
    pub sets: usize,
    pub per: usize,
    /// Jobs in the queue; `submit`: queued by the run (otherwise already there).
    pub jobs: usize,
    pub submit: bool,
    /// The daemon's poll interval.
    pub interval: Duration,
    /// How long passes are watched idle, and again under job churn.
    pub window: Duration,
    /// Job submissions (and as many cancellations) per second during churn.
    pub churn_per_second: u32,
}

/// One pass, from the daemon's debug line.
#[derive(Debug, Clone)]
pub struct Pass {
    pub at: SystemTime,
    pub ms: f64,
    /// (phase, ms): observe_kubernetes, observe_slurm, decide, apply, act.
    pub phases: Vec<(&'static str, f64)>,
    pub kube_lists: u64,
    /// LISTs of pods or Nodes in one answer (the size of the cluster).
    pub fleet_lists: u64,
    pub kube_requests: u64,
    pub slurm_requests: u64,
    pub slurm_bytes: u64,
    /// Jobs the pass saw: -1 when it needed the queue and did not know it, 0 when not read.
    pub jobs: i64,
    /// It read Slurm's state (what a decision on workers needs).
    pub slurm_known: bool,
    pub acted: bool,
}

pub const PHASES: [&str; 5] = [
    "observe_kubernetes",
    "observe_slurm",
    "decide",
    "apply",
    "act",
];

/// What one run measured.
#[derive(Debug)]
pub struct Measured {
    pub workers: usize,
    pub sets: usize,
    pub jobs: usize,
    pub interval: Duration,
    pub window: Duration,
    /// Nodes created, jobs queued: how long each took.
    pub nodes_took: Duration,
    pub jobs_took: Duration,
    /// First commit pushed → every worker Ready and the status applied.
    pub up_took: Duration,
    pub idle: Vec<Pass>,
    pub churn: Vec<Pass>,
    /// Jobs submitted and cancelled during the churn window.
    pub churned: usize,
    /// Image change of every NodeSet pushed → the daemon's first drain (its log).
    pub commit_to_drain: Duration,
    /// The rollout's first wave: workers replaced (deleted and Ready again) and how long it took.
    pub wave_replaced: usize,
    pub wave_took: Duration,
    /// Push → every worker replaced, its slurmd registered, resumed and counted updated.
    pub rollout_took: Duration,
    /// Nodes still drained by slurmops once the rollout ended (goal 0).
    pub left_drained: usize,
    /// The passes from the push to the end of the rollout.
    pub rollout: Vec<Pass>,
    /// Events slurmops posted in the namespace during the rollout, and their total count
    /// (aggregated ones count more than once).
    pub events: usize,
    pub events_count: u64,
    /// Largest status ConfigMap seen (bytes of its data), idle and during the rollout.
    pub status_bytes_idle: usize,
    pub status_bytes_rollout: usize,
    /// The daemon's peak resident memory (VmHWM), MiB.
    pub peak_rss_mib: f64,
    /// The daemon restarted with every worker there: its first passes, its peak resident memory
    /// until then (MiB), how long until its first pass decided.
    pub restart: Vec<Pass>,
    pub restart_peak_rss_mib: f64,
    pub restart_took: Duration,
    /// The restart → the autoscaled NodeSet scaled out for a job pending since before it; → the
    /// first full pass (every worker listed by the watches).
    pub restart_scaled: Duration,
    pub restart_full: Duration,
    /// The rollout ran (SLURMOPS_SCALE_ROLLOUT is not 0).
    pub rolled: bool,
    /// LISTs of pods or Nodes in one answer, over every pass of both daemons.
    pub fleet_lists: u64,
}

fn say(what: &str, t: Instant, pid: u32) {
    println!(
        "  {what} ({:.0} s; the daemon's peak RSS so far {:.0} MiB)",
        t.elapsed().as_secs_f64(),
        slurmops::bench::peak_rss_mib_of(pid)
    );
}

/// The autoscaled NodeSet of the restart (0 workers, at most 1), added before it.
const AUTO: &str = "auto";

fn cluster_text(ns: &str, sets: usize, per: usize, image: &str, auto: bool) -> String {
    let mut s = format!(
        "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: scale, namespace: {ns}}}\nspec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {{name: slurm-auth, key: slurm.key}}\n    jwtKey: {{name: slurm-jwt, key: jwt_hs256.key}}\n  nodeSets:\n"
    );
    for i in 0..sets {
        s.push_str(&format!(
            "    - {{name: s{i:03}, replicas: {per}, cpu: \"120\", memory: 1500Gi, image: {image}, gpus: {{count: 8, type: h100}}, update: {{maxUnavailable: 2}}}}\n"
        ));
    }
    if auto {
        s.push_str(&format!("    - {{name: {AUTO}, replicas: 0, cpu: \"120\", memory: 1500Gi, image: {image}, autoscale: {{min: 0, max: 1, scaleDownDelay: 1h}}}}\n"));
    }
    s.push_str("  partitions:\n    - {name: all, nodeSets: [ALL], default: true}\n");
    s
}

/// `slurmops run` for the cluster of namespace NS against the scale Slurm instance, polling
/// every INTERVAL, one JSON line per pass with its phases and requests (debug).
pub fn daemon(
    ns: &str,
    dir: &std::path::Path,
    url: &str,
    identity: &str,
    interval: &str,
    scale: &Scale,
) -> Daemon {
    Daemon::start_in(
        ns,
        dir,
        url,
        identity,
        &[
            "--interval",
            interval,
            "--log-format",
            "json",
            "--log-level",
            "debug",
            "--slurmrestd-url",
            &scale.url,
            "--slurm-jwt",
            &scale.jwt,
        ],
        &bed().kubeconfig_admin,
    )
}

/// The daemon's pass lines (JSON log) since SINCE.
pub fn passes(log: &str, since: SystemTime) -> Vec<Pass> {
    log.lines()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            v.get("pass_ms")?;
            let at: k8s_openapi::jiff::Timestamp = v["timestamp"].as_str()?.parse().ok()?;
            let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(at.as_nanosecond() as u64);
            let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
            let n = |k: &str| v[k].as_u64().unwrap_or(0);
            Some(Pass {
                at,
                ms: f("pass_ms"),
                phases: PHASES.iter().map(|p| (*p, f(&format!("{p}_ms")))).collect(),
                kube_lists: n("kube_lists"),
                fleet_lists: n("kube_fleet_lists"),
                kube_requests: n("kube_reads") + n("kube_writes"),
                slurm_requests: n("slurm_requests"),
                slurm_bytes: n("slurm_bytes"),
                jobs: v["slurm_jobs"].as_i64().unwrap_or(0),
                slurm_known: v["slurm_known"].as_bool().unwrap_or(false),
                acted: v["acted"].as_bool().unwrap_or(false),
            })
        })
        .filter(|p| p.at >= since)
        .collect()
}

/// Time of the first log line at or after SINCE whose message contains WHAT.
fn first_line(log: &str, since: SystemTime, what: &str) -> Option<SystemTime> {
    log.lines().find_map(|l| {
        let v: Value = serde_json::from_str(l).ok()?;
        if !v["message"].as_str()?.contains(what) {
            return None;
        }
        let at: k8s_openapi::jiff::Timestamp = v["timestamp"].as_str()?.parse().ok()?;
        let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(at.as_nanosecond() as u64);
        (at >= since).then_some(at)
    })
}

/// Events from slurmops in NS: how many objects, and their total count.
async fn events_from_us(client: &kube::Client, ns: &str) -> Result<(usize, u64), String> {
    let events = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    let ours = |e: &&Event| {
        let source = e.source.as_ref().and_then(|s| s.component.as_deref());
        [source, e.reporting_component.as_deref()]
            .iter()
            .any(|c| c.is_some_and(|c| c.contains("slurmops")))
    };
    let from_us: Vec<&Event> = events.items.iter().filter(ours).collect();
    let count = from_us
        .iter()
        .map(|e| e.count.unwrap_or(1).max(1) as u64)
        .sum();
    Ok((from_us.len(), count))
}

/// The most slurmd of replaced workers running at once. Each reads every node record: with
/// 10,000 records one keeps about 20 MB, and a wave of 1,000 (two per NodeSet) did not fit this
/// machine's 24 GiB beside the apiserver, etcd and the controller-manager holding 10,000 Nodes
/// (seen: 918 slurmd, 20 GB, before the run was stopped). 300 hold about 6 GB at 10,000.
pub const SLURMD_AT_ONCE: usize = 300;

/// Starts the slurmd of every worker FLEET returns from now on (a replaced worker's new pod), at
/// most AT_ONCE running, until aborted; the others wait their turn (their pods Ready, their nodes
/// still drained and not answering: the rollout counts them in flight, so that each NodeSet's
/// next wave waits as it would for a slow slurmd). Each slurmd runs from its start until Slurm
/// shows its node drained and then no longer (the daemon resumed it after it registered), then
/// it is stopped: its record reads DOWN again a moment later, as every record without a slurmd.
/// So a rollout of 10,000 workers runs to its end with a few hundred slurmd, each a real
/// registration that the daemon sees and resumes through slurmrestd.
fn start_returned_slurmd(fleet: &Fleet, at_once: usize) -> tokio::task::JoinHandle<()> {
    let returned = fleet.returned.clone();
    let mut done = returned.lock().unwrap().len();
    tokio::spawn(async move {
        let mut waiting = std::collections::VecDeque::new();
        // Running: name → seen drained since it started.
        let mut running: std::collections::BTreeMap<String, bool> = Default::default();
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let names: Vec<String> = returned.lock().unwrap()[done..].to_vec();
            done += names.len();
            waiting.extend(names);
            if !running.is_empty() {
                let drained = match tokio::task::spawn_blocking(Scale::drained).await {
                    Ok(Ok(d)) => d,
                    Ok(Err(e)) => {
                        println!("  {e}");
                        continue;
                    }
                    Err(_) => continue,
                };
                let mut resumed = Vec::new();
                for (name, seen) in running.iter_mut() {
                    match drained.contains(name) {
                        true => *seen = true,
                        false if *seen => resumed.push(name.clone()),
                        false => {}
                    }
                }
                for name in &resumed {
                    running.remove(name);
                }
                if !resumed.is_empty() {
                    let stopped =
                        tokio::task::spawn_blocking(move || Scale::stop_slurmd(&resumed)).await;
                    if let Ok(Err(e)) = stopped {
                        println!("  {e}");
                    }
                }
            }
            let room = at_once.saturating_sub(running.len()).min(waiting.len());
            let start: Vec<String> = waiting.drain(..room).collect();
            if start.is_empty() {
                continue;
            }
            running.extend(start.iter().map(|n| (n.clone(), false)));
            let started = tokio::task::spawn_blocking(move || Scale::start_slurmd(&start)).await;
            if let Ok(Err(e)) = started {
                println!("  {e}");
            }
        }
    })
}

async fn status_bytes(client: &kube::Client, ns: &str) -> usize {
    let name = slurmops::status::configmap::name_for(None);
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(&name)
        .await
        .ok()
        .flatten()
        .and_then(|c| c.data)
        .map_or(0, |d| d.iter().map(|(k, v)| k.len() + v.len()).sum())
}

/// Runs it all on SCALE (its records must be `sizes.sets` x `sizes.per`).
pub async fn run(scale: &Scale, sizes: &Sizes) -> Result<Measured, String> {
    let workers = sizes.sets * sizes.per;
    let client = client(&bed().kubeconfig_admin).await;
    let ns = format!("t-scale-{}", unique_suffix());
    let t = Instant::now();
    println!("scale: {workers} Nodes of ~30 KB in {ns}");
    let fleet = Fleet::start(client.clone(), &ns, workers, sizes.per).await?;
    let nodes_took = t.elapsed();
    let result = measure(scale, sizes, &fleet, nodes_took).await;
    fleet.cleanup().await;
    result
}

async fn measure(
    scale: &Scale,
    sizes: &Sizes,
    fleet: &Fleet,
    nodes_took: Duration,
) -> Result<Measured, String> {
    let (ns, client) = (&fleet.ns, &fleet.client);
    let workers = fleet.nodes;
    let mut jobs_took = Duration::ZERO;
    if sizes.submit {
        println!("scale: {} held jobs", sizes.jobs);
        jobs_took = scale.hold(sizes.jobs, "scale").await?;
    }

    let repo = Repo::new(&format!("{ns}-repo"));
    let url = format!("{}/{ns}-repo.git", bed().git.http_url);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let t = Instant::now();
    let c1 = repo.push(
        &cluster_text(ns, sizes.sets, sizes.per, "img:1", false),
        "first",
    );
    let interval = format!("{}s", sizes.interval.as_secs());
    let start = || daemon(ns, dir.path(), &url, "scale", &interval, scale);
    let daemon = start();
    let status = async || {
        slurmops::status::configmap::read(client, ns, None)
            .await
            .ok()?
    };
    let up_within = Duration::from_secs(120 + workers as u64 / 4);
    eventually("every worker Ready and applied", up_within, async || {
        let s = status().await?;
        let done = s.last_applied_commit == c1
            && s.progress().len() == sizes.sets
            && s.progress().iter().all(|p| p.updated == p.replicas);
        (done && fleet.readied.load(std::sync::atomic::Ordering::Relaxed) >= workers).then_some(())
    })
    .await;
    let up_took = t.elapsed();
    say(
        &format!("{workers} workers Ready, commit applied"),
        t,
        daemon.child.id(),
    );

    // Idle: nothing moves.
    let since = SystemTime::now();
    tokio::time::sleep(sizes.window).await;
    let idle = passes(&daemon.output(), since);
    let status_bytes_idle = status_bytes(client, ns).await;
    say(
        &format!("idle: {} passes", idle.len()),
        t,
        daemon.child.id(),
    );

    // Job churn: submissions and cancellations in the queue (held jobs: these records have no
    // slurmd to run them).
    let since = SystemTime::now();
    let churned = churn(scale, sizes).await?;
    let churn = passes(&daemon.output(), since);
    say(
        &format!("churn: {} passes, {churned} jobs", churn.len()),
        t,
        daemon.child.id(),
    );

    // A new image for every NodeSet: the first drain, the first wave, the end (unless
    // SLURMOPS_SCALE_ROLLOUT=0: the start, idle, churn and restart alone).
    let pushed = SystemTime::now();
    let events_before = events_from_us(client, ns).await?;
    let mut status_bytes_rollout = 0;
    let rolled = std::env::var("SLURMOPS_SCALE_ROLLOUT").as_deref() != Ok("0");
    let image = if rolled { "img:2" } else { "img:1" };
    let (commit_to_drain, replaced, wave_took, rollout_took, left_drained) = if rolled {
        let deleted_before = fleet.deleted.lock().unwrap().len();
        let ready_before = fleet.readied.load(std::sync::atomic::Ordering::Relaxed);
        let slurmd = start_returned_slurmd(fleet, SLURMD_AT_ONCE);
        let c2 = repo.push(
            &cluster_text(ns, sizes.sets, sizes.per, "img:2", false),
            "new image",
        );
        let wave = Instant::now();
        let drained = eventually(
            "the first drain",
            sizes.interval + Duration::from_secs(60),
            async || first_line(&daemon.output(), pushed, ": draining "),
        )
        .await;
        let commit_to_drain = drained.duration_since(pushed).unwrap_or_default();
        say("first drain", t, daemon.child.id());
        // maxUnavailable 2 per NodeSet: the first wave replaces two workers of each.
        let wave_size = sizes.sets * 2.min(sizes.per);
        let replaced = eventually(
            "the first wave replaced",
            Duration::from_secs(120 + workers as u64 / 10),
            async || {
                status_bytes_rollout = status_bytes_rollout.max(status_bytes(client, ns).await);
                let deleted = fleet.deleted.lock().unwrap().len() - deleted_before;
                let ready = fleet.readied.load(std::sync::atomic::Ordering::Relaxed) - ready_before;
                (deleted >= wave_size && ready >= wave_size).then_some(deleted)
            },
        )
        .await;
        let wave_took = wave.elapsed();
        say("first wave", t, daemon.child.id());
        // Then every worker: each new pod's slurmd registers, the daemon resumes its node and drains
        // the next ones.
        eventually(
            "the rollout's end",
            Duration::from_secs(300 + workers as u64 / 2),
            async || {
                status_bytes_rollout = status_bytes_rollout.max(status_bytes(client, ns).await);
                let deleted = fleet.deleted.lock().unwrap().len() - deleted_before;
                let s = status().await?;
                let p = s.progress();
                let done = s.last_applied_commit == c2
                    && p.len() == sizes.sets
                    && p.iter()
                        .all(|p| p.updated == p.replicas && p.in_flight.is_empty());
                (done && deleted >= workers).then_some(())
            },
        )
        .await;
        let rollout_took = pushed.elapsed().unwrap_or_default();
        slurmd.abort();
        // Two more passes see the rollout settle.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let left_drained = scale
            .client(Duration::from_secs(60), None)
            .nodes()
            .await
            .map_err(|e| e.to_string())?
            .iter()
            .filter(|(_, n)| slurmops::controller::decide::controller_drain(n))
            .count();
        (
            commit_to_drain,
            replaced,
            wave_took,
            rollout_took,
            left_drained,
        )
    } else {
        Default::default()
    };
    status_bytes_rollout = status_bytes_rollout.max(status_bytes(client, ns).await);
    let events_after = events_from_us(client, ns).await?;
    let peak_rss_mib = slurmops::bench::peak_rss_mib_of(daemon.child.id());
    let rollout_passes = passes(&daemon.output(), pushed);
    if rolled {
        say("rollout ended", t, daemon.child.id());
    }
    // The daemon's own log (a line per pass with its phases), to read what a figure hides.
    if let Ok(path) = std::env::var("SLURMOPS_SCALE_LOG") {
        let _ = std::fs::write(&path, daemon.output());
    }
    let mut fleet_lists: u64 = passes(&daemon.output(), SystemTime::UNIX_EPOCH)
        .iter()
        .map(|p| p.fleet_lists)
        .sum();
    // An autoscaled NodeSet at 0 workers, for the restart; the daemon now reads the queue every
    // pass: the restart waits until it listed it and kept the highest job id in its status.
    let c3 = repo.push(
        &cluster_text(ns, sizes.sets, sizes.per, image, true),
        "an autoscaled NodeSet",
    );
    eventually(
        "the autoscaled NodeSet applied and the queue listed",
        Duration::from_secs(600),
        async || {
            let s = status().await?;
            (s.last_applied_commit == c3 && !s.jobs_listed_to.is_empty()).then_some(())
        },
    )
    .await;
    fleet_lists += passes(&daemon.output(), SystemTime::UNIX_EPOCH)
        .iter()
        .map(|p| p.fleet_lists)
        .sum::<u64>();
    drop(daemon);
    // A job that asks for every record: pending whatever runs (records without a slurmd are
    // DOWN), the autoscaled NodeSet's demand.
    let http = reqwest::Client::new();
    let body = serde_json::json!({
        "script": "#!/bin/sh\nsleep 1\n",
        "job": {"name": "wants-workers", "partition": "all", "tasks": workers,
            "minimum_nodes": workers, "current_working_directory": "/tmp",
            "environment": ["PATH=/usr/bin:/bin"],
            "time_limit": {"set": true, "infinite": false, "number": 1}},
    });
    let wanting = scale.submit(&http, &body).await?;
    let sts = kube::Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(client.clone(), ns);

    // A restart (an upgrade, a new leader) with every worker there: its watches list them in
    // pages; no pass lists them all in one answer. Meanwhile a pass decides what needs no pod
    // (autoscale's scale-out).
    let (restarted, restarted_at) = (Instant::now(), SystemTime::now());
    let daemon = start();
    // A pass decides once it read Slurm's state (one whose read failed decides nothing that
    // needs it: counted as deciding, it hid two minutes of failed reads at 10,000 workers).
    let decided = |log: &str| {
        passes(log, SystemTime::UNIX_EPOCH)
            .iter()
            .any(|p| p.slurm_known)
    };
    eventually(
        "the restarted daemon's first pass that decides",
        Duration::from_secs(60 + workers as u64 / 10),
        async || decided(&daemon.output()).then_some(()),
    )
    .await;
    let restart_took = restarted.elapsed();
    eventually(
        "the autoscaled NodeSet scaled out after the restart",
        Duration::from_secs(60 + workers as u64 / 10),
        async || {
            let set = sts.get_opt(AUTO).await.ok().flatten()?;
            (set.spec?.replicas == Some(1)).then_some(())
        },
    )
    .await;
    let restart_scaled = restarted.elapsed();
    // The first full pass: the watches listed every worker.
    let full_at = eventually(
        "the restarted daemon's first full pass",
        Duration::from_secs(60 + workers as u64 / 10),
        async || {
            passes(&daemon.output(), SystemTime::UNIX_EPOCH)
                .iter()
                .find(|p| p.phases[0].1 > 0.0)
                .map(|p| p.at)
        },
    )
    .await;
    let restart_full = full_at.duration_since(restarted_at).unwrap_or_default();
    println!(
        "  restart: first deciding pass {:.1} s, scaled out for job {wanting} {:.1} s, first full pass {:.1} s after the start",
        restart_took.as_secs_f64(),
        restart_scaled.as_secs_f64(),
        restart_full.as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let restart = passes(&daemon.output(), SystemTime::UNIX_EPOCH);
    let restart_peak_rss_mib = slurmops::bench::peak_rss_mib_of(daemon.child.id());
    if let Ok(path) = std::env::var("SLURMOPS_SCALE_LOG") {
        let _ = std::fs::write(format!("{path}.restart"), daemon.output());
    }
    fleet_lists += restart.iter().map(|p| p.fleet_lists).sum::<u64>();
    let _ = scale.cancel(&http, wanting).await;
    say("restarted", t, daemon.child.id());
    drop(daemon);
    Ok(Measured {
        workers,
        sets: sizes.sets,
        jobs: sizes.jobs,
        interval: sizes.interval,
        window: sizes.window,
        nodes_took,
        jobs_took,
        up_took,
        idle,
        churn,
        churned,
        commit_to_drain,
        wave_replaced: replaced,
        wave_took,
        rollout_took,
        left_drained,
        rollout: rollout_passes,
        events: events_after.0.saturating_sub(events_before.0),
        events_count: events_after.1.saturating_sub(events_before.1),
        status_bytes_idle,
        status_bytes_rollout,
        peak_rss_mib,
        restart,
        restart_peak_rss_mib,
        restart_took,
        restart_scaled,
        restart_full,
        rolled,
        fleet_lists,
    })
}

/// For the window: each 1/RATE s, a held job submitted and the oldest churned one cancelled.
pub async fn churn(scale: &Scale, sizes: &Sizes) -> Result<usize, String> {
    let http = reqwest::Client::new();
    let body = serde_json::json!({
        "script": "#!/bin/sh\nsleep 1\n",
        "job": {"name": "churn", "partition": "all", "hold": true, "tasks": 1,
            "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"],
            "time_limit": {"set": true, "infinite": false, "number": 1}},
    });
    let every = Duration::from_secs(1) / sizes.churn_per_second.max(1);
    let mut tick = tokio::time::interval(every);
    let started = Instant::now();
    let mut live = std::collections::VecDeque::new();
    let mut n = 0;
    while started.elapsed() < sizes.window {
        tick.tick().await;
        live.push_back(scale.submit(&http, &body).await?);
        if live.len() > 5
            && let Some(id) = live.pop_front()
        {
            scale.cancel(&http, id).await?;
        }
        n += 1;
    }
    for id in live {
        scale.cancel(&http, id).await?;
    }
    Ok(n)
}

/// Q-quantile (0..=1) of VALUES.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

impl Measured {
    /// The most LISTs one rollout pass sent, the pass applying the commit aside (its prune
    /// lists each kind once): 0 when acting passes read the caches.
    pub fn rollout_lists(&self) -> u64 {
        self.rollout
            .iter()
            .filter(|p| p.phases[3].1 < 1.0)
            .map(|p| p.kube_lists)
            .max()
            .unwrap_or(0)
    }

    /// Passes per minute in PASSES over the window.
    pub fn per_minute(&self, passes: &[Pass]) -> f64 {
        passes.len() as f64 * 60.0 / self.window.as_secs_f64()
    }
}
