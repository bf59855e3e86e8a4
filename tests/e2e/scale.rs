//! The Slurm side at the scale slurmops is sold for, budgeted in bytes and requests (not timed):
//! a slurmctld and slurmrestd of their own (tests/bed/scale.sh, Slurm 24.11) holding 1,000 node
//! records and 20,000 individual held jobs, about 150 MB of JSON for one read of the queue.
//! A pass with nothing moving reads the node list (a few MB) and not the queue, and the next one
//! a "no change"; `slurm drain` of a node holding no job reads no queue; passes that need the
//! queue read `jobs/state/` and the jobs one by one, never the whole queue, until every job is
//! read, and then follow it through `jobs/state/` and the jobs that changed; a queue past the job
//! cap leaves the nodes known and says which setting to raise. The goals of issue 32 at 1,000
//! workers, doubled: ≤ 10 MB per pass. And a daemon started against 50,000 jobs scales out for a
//! pending one within 15 s (issue 56).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::Api;
use slurmops::controller::observe::{JobsNeed, Needs, jobs_needed, read_slurm};
use slurmops::slurm::{Client, SlurmNodes};

use crate::support::at_scale::{self, Measured, Sizes, quantile};
use crate::support::daemon::Repo;
use crate::support::fleet::Fleet;
use crate::support::scale::Scale;
use crate::support::{bed, client, eventually, unique_suffix};

const JOBS: usize = 20_000;

/// One observe of Slurm as a pass does it, with nothing moving (NEED: the queue's rule): what it
/// cost slurmrestd, and the view.
async fn pass(
    c: &Client,
    need: JobsNeed,
) -> (
    slurmops::slurm::Traffic,
    slurmops::controller::decide::SlurmView,
) {
    let needs = Needs {
        jobs: need,
        ..Needs::default()
    };
    let before = c.traffic();
    let view = read_slurm(c, |nodes| jobs_needed(&needs, &BTreeMap::new(), nodes))
        .await
        .expect("Slurm read");
    (c.traffic() - before, view)
}

/// One test (the scale instance has fixed ports; CI runs it in a step of its own, after the
/// rest, so that its thousand Nodes and pods load no other test): the Slurm side, then the daemon.
#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_workers_and_twenty_thousand_jobs_meet_the_scale_goals() {
    let scale = Scale::up(50, 20);
    // First: building it installs the process's TLS provider, which reqwest needs.
    let c = scale.client(Duration::from_secs(120), None);
    scale.hold(JOBS, "held").await.unwrap();
    slurm_side(&scale, &c).await;
    daemon_side(&scale).await;
}

/// A pass with nothing moving costs the node list then "no change", not the queue.
async fn slurm_side(scale: &Scale, c: &Client) {
    // Nothing moving: the node list, then "no change"; the queue is not read. (The data
    // parser is probed first, once per client.)
    c.parser().await.unwrap();
    let (first, view) = pass(c, JobsNeed::WhenMoving).await;
    assert_eq!(view.nodes.len(), 1000);
    assert_eq!(first.requests, 1, "{first:?}");
    assert!(
        first.bytes <= 10_000_000,
        "an idle pass read {} bytes",
        first.bytes
    );
    // Records without a slurmd turn from UNKNOWN to DOWN within SlurmdTimeout (30 s), which
    // changes the list: once it stops changing, a pass costs a "no change".
    let mut next = pass(c, JobsNeed::WhenMoving).await.0;
    let settled = std::time::Instant::now();
    while next.bytes >= 64 * 1024 && settled.elapsed() < Duration::from_secs(90) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        next = pass(c, JobsNeed::WhenMoving).await.0;
    }
    assert!(
        next.bytes < 64 * 1024,
        "an unchanged node list cost {} bytes",
        next.bytes
    );

    // `slurm drain` of a node that holds no job: the node, not the queue.
    let before = c.traffic();
    c.drain("s000-0", "scale test").await.unwrap();
    assert!(c.jobs_on("s000-0").await.unwrap().is_empty());
    c.resume("s000-0").await.unwrap();
    let drain = c.traffic() - before;
    assert!(
        drain.bytes < 256 * 1024,
        "slurm drain read {} bytes",
        drain.bytes
    );

    // A pass that needs the queue reads jobs/state/ and then the jobs one by one, never the
    // whole queue: the first pass sees part of it (and says how much is left), the next ones go
    // on from there, each reading at most a slice's worth, until every job is read; then a pass
    // reads nothing of the queue but jobs/state/.
    let c = &scale.client(Duration::from_secs(120), None);
    c.parser().await.unwrap();
    let t = std::time::Instant::now();
    let (mut passes, mut most) = (0, 0);
    let view = loop {
        let (cost, view) = pass(c, JobsNeed::Always).await;
        (passes, most) = (passes + 1, most.max(cost.bytes));
        if view.jobs_error.is_none() {
            break view;
        }
        assert!(
            view.pending_unread.is_some(),
            "not a queue read in part: {:?}",
            view.jobs_error
        );
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "{JOBS} jobs not read within 300 s: {:?}",
            view.jobs_error
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(view.jobs().len(), JOBS);
    println!(
        "every one of {JOBS} jobs read in {:.0} s over {passes} passes, at most {:.0} MB a pass",
        t.elapsed().as_secs_f64(),
        most as f64 / 1e6
    );
    let (again, view) = pass(c, JobsNeed::Always).await;
    assert_eq!(view.jobs().len(), JOBS);
    // (The node list may have changed meanwhile: records without a slurmd go DOWN.)
    assert!(
        again.bytes <= 10_000_000,
        "the queue was read again: {again:?}"
    );

    // Jobs come and go: the next pass follows jobs/state/ (every job's id and state) and reads
    // only the jobs that appeared or changed, not the queue again.
    let http = reqwest::Client::new();
    let body = serde_json::json!({
        "script": "#!/bin/sh\nsleep 1\n",
        "job": {"name": "came", "partition": "all", "hold": true, "tasks": 1,
            "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"]},
    });
    let mut came = Vec::new();
    for _ in 0..3 {
        came.push(scale.submit(&http, &body).await.unwrap());
    }
    let went: Vec<u64> = view.jobs().iter().take(2).map(|j| j.id).collect();
    for id in &went {
        scale.cancel(&http, *id).await.unwrap();
    }
    // A kept queue is reused while younger than ten times what its last check cost; passes
    // after that follow the queue, reading only the jobs that came or changed.
    let t = std::time::Instant::now();
    let (followed, view) = loop {
        let (cost, view) = pass(c, JobsNeed::Always).await;
        assert!(
            cost.bytes <= 10_000_000,
            "following the queue read {cost:?}"
        );
        // The new jobs are read above the highest id known before the listing that shows the
        // cancellations lands: both, not the first alone.
        let cancelled = went.iter().all(|id| {
            view.jobs()
                .iter()
                .any(|j| j.id == *id && j.has_state("CANCELLED"))
        });
        if (view.jobs().len() == JOBS + 3 && cancelled) || t.elapsed() > Duration::from_secs(60) {
            break (cost, view);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(view.jobs().len(), JOBS + 3);
    for id in &came {
        let j = view.jobs().iter().find(|j| j.id == *id).expect("a new job");
        assert_eq!(j.name, "came");
        assert!(j.has_state("PENDING"), "{j:?}");
    }
    for id in &went {
        let j = view
            .jobs()
            .iter()
            .find(|j| j.id == *id)
            .expect("a cancelled job");
        assert!(j.has_state("CANCELLED"), "{j:?}");
    }
    assert!(
        followed.bytes <= 10_000_000,
        "following the queue read {followed:?}"
    );

    // Past the job cap, the nodes stay known and the error names the setting.
    let small = scale.client(Duration::from_secs(120), Some(1000));
    let (_, view) = pass(&small, JobsNeed::Always).await;
    assert_eq!(view.nodes.len(), 1000, "a large queue blinded the pass");
    let why = view.jobs_error.expect("the queue is past 1,000 jobs");
    assert!(why.contains("SLURMOPS_SLURM_MAX_JOBS"), "{why}");
}

/// Issue 56: a daemon restarted against 50,000 held jobs and one job pending for a NodeSet at 0
/// workers (queued while it was down) scales it out within 15 s. Its first pass decides on the
/// jobs above the last one the daemon before it listed (kept in the status), read one by one
/// while `jobs/state/` is built (at this length slurmrestd 24.11 needs about 18 s for that alone,
/// and about 90 s for the whole queue, which autoscale used to wait for after every start); then
/// the passes read the rest job by job, bounded per pass, until the daemon knows every job
/// (followed to its end with SLURMOPS_NARROW_ALL set).
#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_started_against_fifty_thousand_jobs_scales_out_for_a_pending_job_within_15_s() {
    // SLURMOPS_NARROW_JOBS: another length (the issue asks 100,000 too; Slurm 24.11's
    // slurmrestd needs about 15 s for jobs/state/ alone there).
    let held: usize = std::env::var("SLURMOPS_NARROW_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let scale = Scale::up(1, 4);
    // First: building it installs the process's TLS provider, which reqwest needs.
    let _c = scale.client(Duration::from_secs(120), None);
    let kube = client(&bed().kubeconfig_admin).await;
    let ns = format!("t-narrow-{}", unique_suffix());
    let fleet = Fleet::start(kube.clone(), &ns, 4, 4).await.unwrap();
    let text = format!(
        "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: scale, namespace: {ns}}}\nspec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {{name: slurm-auth, key: slurm.key}}\n    jwtKey: {{name: slurm-jwt, key: jwt_hs256.key}}\n  nodeSets:\n    - {{name: s000, replicas: 0, cpu: \"8\", memory: 1000Mi, image: img:1, autoscale: {{min: 0, max: 2, scaleDownDelay: 10m}}}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n"
    );
    let repo = Repo::new(&format!("{ns}-repo"));
    let url = format!("{}/{ns}-repo.git", bed().git.http_url);
    let dir = tempfile::tempdir().unwrap();
    let commit = repo.push(&text, "first");
    let sts: Api<StatefulSet> = Api::namespaced(kube.clone(), &ns);
    let replicas = async || sts.get("s000").await.ok()?.spec?.replicas;
    let queued = scale.hold(held, "held").await.unwrap();
    println!("{held} held jobs queued in {:.0} s", queued.as_secs_f64());
    // The daemon before the restart: applies the NodeSet at 0 workers (held jobs are no demand)
    // and lists the queue; its status keeps the last job id listed.
    {
        let started = std::time::Instant::now();
        let _daemon = at_scale::daemon(&ns, dir.path(), &url, "narrow", "10s", &scale);
        eventually(
            "the commit applied and the queue listed",
            Duration::from_secs(300),
            async || {
                let s = slurmops::status::configmap::read(&kube, &ns, None)
                    .await
                    .ok()??;
                let listed: usize = s.jobs_listed_to.parse().ok()?;
                (s.last_applied_commit == commit && listed >= held).then_some(())
            },
        )
        .await;
        println!(
            "the daemon before the restart: commit applied and {held} jobs listed {:.1} s after its start",
            started.elapsed().as_secs_f64()
        );
    }
    assert_eq!(replicas().await, Some(0));
    // One job that workers would start: pending (its partition's records have no slurmd).
    let http = reqwest::Client::new();
    let body = serde_json::json!({
        "script": "#!/bin/sh\nsleep 1\n",
        "job": {"name": "wants-a-worker", "partition": "all", "tasks": 1,
            "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"],
            "time_limit": {"set": true, "infinite": false, "number": 1}},
    });
    let job = scale.submit(&http, &body).await.unwrap();

    let (started, wall) = (std::time::Instant::now(), std::time::SystemTime::now());
    // The restart.
    let daemon = at_scale::daemon(&ns, dir.path(), &url, "narrow", "10s", &scale);
    let keep = std::env::var("SLURMOPS_NARROW_LOG").ok();
    eventually(
        "the NodeSet scaled out for the pending job",
        Duration::from_secs(120),
        async || {
            if let Some(path) = &keep {
                let stat = std::fs::read_to_string(format!("/proc/{}/stat", daemon.child.id()));
                let _ = std::fs::write(path, format!("{stat:?}\n{}", daemon.output()));
            }
            (replicas().await == Some(1)).then_some(())
        },
    )
    .await;
    let took = started.elapsed();
    println!(
        "daemon started -> NodeSet scaled out for job {job}: {:.1} s",
        took.as_secs_f64()
    );
    for p in at_scale::passes(&daemon.output(), wall).iter().take(4) {
        let at = p.at.duration_since(wall).unwrap_or_default();
        println!(
            "  pass ended {:.1} s after the start: {:.1} s long, acted {}, {} slurmrestd requests, {:.1} MB",
            at.as_secs_f64(),
            p.ms / 1000.0,
            p.acted,
            p.slurm_requests,
            p.slurm_bytes as f64 / 1e6
        );
    }
    // The rest is read job by job over the next passes, none reading the whole queue: about 7
    // minutes at 50,000 jobs on this machine, so only when SLURMOPS_NARROW_ALL is set (the CI
    // keeps to the start; the unit tests of `slurm::client::queue` follow a whole queue read).
    let knows = std::time::Instant::now();
    if std::env::var_os("SLURMOPS_NARROW_ALL").is_some() {
        eventually(
            "the daemon's passes know every job",
            Duration::from_secs(600),
            async || {
                at_scale::passes(&daemon.output(), std::time::SystemTime::UNIX_EPOCH)
                    .iter()
                    .any(|p| p.jobs > held as i64)
                    .then_some(())
            },
        )
        .await;
        println!(
            "every job known {:.0} s after the start",
            (took + knows.elapsed()).as_secs_f64()
        );
    }
    // What the control plane's default memory requests (render/resources.rs) are sized from:
    // slurmctld holding this queue, slurmrestd after serving it to slurmops job by job.
    use slurmops::render::resources::{self, SLURMCTLD, SLURMRESTD};
    for (program, ask) in [("slurmctld", SLURMCTLD), ("slurmrestd", SLURMRESTD)] {
        let peak = Scale::peak_rss_mib(program);
        let request = resources::memory_bytes(ask) as f64 / (1024.0 * 1024.0);
        println!(
            "{program} peak resident memory at {held} jobs: {peak:.0} MiB (default request {request:.0} MiB)"
        );
        assert!(
            peak <= request,
            "{program} held {peak:.0} MiB at {held} jobs, over its default memory request of {request:.0} MiB: raise it in render/resources.rs"
        );
    }
    drop(daemon);
    fleet.cleanup().await;
    assert!(
        took < Duration::from_secs(15),
        "the daemon took {:.1} s to scale out for a pending job among {held} held ones",
        took.as_secs_f64()
    );
}

/// `slurmops run` over 50 NodeSets of 20 workers on the real apiserver (GPU-sized Nodes, pods
/// from kube-controller-manager), against the same Slurm: the goals of issue 32 at 1,000 workers,
/// each allowed twice its value (CI machines differ; a goal missed by more fails).
async fn daemon_side(scale: &Scale) {
    let sizes = Sizes {
        sets: 50,
        per: 20,
        jobs: JOBS,
        submit: false,
        interval: Duration::from_secs(10),
        window: Duration::from_secs(30),
        churn_per_second: 5,
    };
    let m = at_scale::run(scale, &sizes).await.unwrap();
    let misses = misses(&m);
    assert!(
        misses.is_empty(),
        "goals missed by more than 2x: {misses:#?}"
    );
}

/// Each goal missed by more than twice its value.
fn misses(m: &Measured) -> Vec<String> {
    let mut out = Vec::new();
    let mut goal = |what: &str, value: f64, limit: f64| {
        println!("{what}: {value:.1} (limit {limit})");
        if value > limit {
            out.push(format!("{what}: {value:.1} > {limit}"));
        }
    };
    let ms: Vec<f64> = m.idle.iter().map(|p| p.ms).collect();
    goal("idle passes seen", -(m.idle.len() as f64), -1.0);
    goal("idle pass p99 (ms; goal 1 s)", quantile(&ms, 0.99), 2000.0);
    let lists = m.idle.iter().map(|p| p.kube_lists).max().unwrap_or(0);
    goal("LISTs per idle pass (goal 0)", lists as f64, 0.0);
    let bytes = m.idle.iter().map(|p| p.slurm_bytes).max().unwrap_or(0);
    goal(
        "slurmrestd MB per idle pass (goal 5)",
        bytes as f64 / 1e6,
        10.0,
    );
    let queue_reads = m.idle.iter().filter(|p| p.slurm_bytes > 50_000_000).count();
    goal("idle passes reading the queue", queue_reads as f64, 0.0);
    for (name, passes) in [("idle", &m.idle), ("churn", &m.churn)] {
        // At most one a second unless the last acted; the window's polls add a few.
        let calm: Vec<_> = passes.iter().filter(|p| !p.acted).collect();
        let per_min = calm.len() as f64 * 60.0 / m.window.as_secs_f64();
        goal(
            &format!("{name} passes per minute (goal <= 60)"),
            per_min,
            120.0,
        );
    }
    // Passes that act read the caches too (the pods they deleted show as deleting): only the
    // pass that applies the commit LISTs (its prune).
    goal(
        "LISTs per rollout pass (goal 0)",
        m.rollout_lists() as f64,
        0.0,
    );
    let decide: Vec<f64> = m
        .churn
        .iter()
        .chain(&m.idle)
        .map(|p| p.phases[2].1)
        .collect();
    goal("decide p99 (ms)", quantile(&decide, 0.99), 200.0);
    let limit = 2.0 * (m.interval.as_secs_f64() + 5.0);
    goal(
        "commit -> first drain (s)",
        m.commit_to_drain.as_secs_f64(),
        limit,
    );
    goal("peak RSS (MiB; goal 150)", m.peak_rss_mib, 300.0);
    // Watches list the workers and Nodes in pages, once; a pass never reads them all in one
    // answer, a restarted daemon's first passes included (they wait for the watches).
    goal(
        "LISTs of every pod or Node in one answer (goal 0)",
        m.fleet_lists as f64,
        0.0,
    );
    goal(
        "restarted daemon's peak RSS (MiB; goal 150)",
        m.restart_peak_rss_mib,
        300.0,
    );
    // Issue 56: a restart (an upgrade, a new leader) decides again within 5 s at 10,000 workers;
    // at this size, well within it.
    goal(
        "restart -> first pass that decides (s; goal 5)",
        m.restart_took.as_secs_f64(),
        10.0,
    );
    // A restarted daemon scales out for a job pending since before it, without waiting for its
    // watches to list every worker (issue 56: 5 s at 10,000 workers).
    goal(
        "restart -> autoscaled NodeSet scaled out (s; goal 5)",
        m.restart_scaled.as_secs_f64(),
        10.0,
    );
    let status = m.status_bytes_idle.max(m.status_bytes_rollout);
    goal(
        "status ConfigMap KiB (cap 256)",
        status as f64 / 1024.0,
        256.0,
    );
    // The rollout ends (every worker replaced, its slurmd registered, resumed) with no node
    // left drained by slurmops.
    goal(
        "nodes left drained by slurmops after the rollout (goal 0)",
        m.left_drained as f64,
        0.0,
    );
    // Events are aggregated per NodeSet and reason within a pass, and repeats count on the Event
    // posted before: a rollout of 1,000 workers in ten waves over 50 NodeSets is a few Events
    // per NodeSet, not thousands.
    goal(
        "Event objects in the rollout, per NodeSet (goal 4)",
        m.events as f64 / m.sets as f64,
        8.0,
    );
    out
}
