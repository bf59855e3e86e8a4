//! The daemon against a growing queue (the jobs axis of issue 32): NodeSets whose rollout has a
//! canary, so that every pass needs the queue, over the scale Slurm instance holding 1,000,
//! 10,000, 50,000 and 100,000 held jobs in turn. At each length a daemon starts afresh (a restart
//! at that length): how long until its passes know the queue — read job by job, a slice per
//! pass, while passes go on with the jobs read so far — then its passes for a window under job churn
//! (wall time, phases, slurmrestd bytes) and its resident memory.

use std::time::{Duration, Instant, SystemTime};

use super::at_scale::{self, Pass, Sizes, churn, passes};
use super::daemon::Repo;
use super::fleet::Fleet;
use super::scale::Scale;
use super::{bed, client, eventually, unique_suffix};
use slurmops::slurm::client::{MAX_JOBS_ENV, max_jobs_from};

/// One length of the queue.
#[derive(Debug)]
pub struct Point {
    pub jobs: usize,
    /// Daemon started → the first pass that knew every job or, past the job cap, the
    /// first status that said why it is not read.
    pub known_after: Duration,
    /// The queue is past the job cap (`SLURMOPS_SLURM_MAX_JOBS`): the jobs past it not read.
    pub refused: bool,
    /// Passes before that, which went on without the jobs.
    pub blind_passes: usize,
    /// The passes of the churn window.
    pub passes: Vec<Pass>,
    pub churned: usize,
    /// Resident memory at the window's end, and the peak since the start (MiB).
    pub rss_mib: f64,
    pub peak_rss_mib: f64,
}

fn cluster_text(ns: &str, sets: usize, per: usize) -> String {
    let mut s = format!(
        "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: scale, namespace: {ns}}}\nspec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {{name: slurm-auth, key: slurm.key}}\n    jwtKey: {{name: slurm-jwt, key: jwt_hs256.key}}\n  nodeSets:\n"
    );
    for i in 0..sets {
        s.push_str(&format!(
            "    - {{name: s{i:03}, replicas: {per}, cpu: \"120\", memory: 1500Gi, image: img:1, update: {{maxUnavailable: 2, canary: {{replicas: 1, validate: {{builtin: hostname}}}}}}}}\n"
        ));
    }
    s.push_str("  partitions:\n    - {name: all, nodeSets: [ALL], default: true}\n");
    s
}

/// Runs the axis on SCALE (records `sets` x `per`, no job queued yet) for each length of STEPS.
pub async fn run(
    scale: &Scale,
    sets: usize,
    per: usize,
    steps: &[usize],
    window: Duration,
) -> Result<Vec<Point>, String> {
    let client = client(&bed().kubeconfig_admin).await;
    let ns = format!("t-jobs-{}", unique_suffix());
    let fleet = Fleet::start(client.clone(), &ns, sets * per, per).await?;
    let result = measure(scale, sets, per, steps, window, &fleet).await;
    fleet.cleanup().await;
    result
}

async fn measure(
    scale: &Scale,
    sets: usize,
    per: usize,
    steps: &[usize],
    window: Duration,
    fleet: &Fleet,
) -> Result<Vec<Point>, String> {
    let ns = &fleet.ns;
    let repo = Repo::new(&format!("{ns}-repo"));
    let url = format!("{}/{ns}-repo.git", bed().git.http_url);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let commit = repo.push(&cluster_text(ns, sets, per), "first");
    let start = || at_scale::daemon(ns, dir.path(), &url, "jobs", "10s", scale);
    // The workers up once, before any job.
    {
        let _daemon = start();
        eventually(
            "every worker Ready and applied",
            Duration::from_secs(300),
            async || {
                let s = slurmops::status::configmap::read(&fleet.client, ns, None)
                    .await
                    .ok()??;
                let ready = fleet.readied.load(std::sync::atomic::Ordering::Relaxed);
                (s.last_applied_commit == commit && ready >= sets * per).then_some(())
            },
        )
        .await;
    }
    let sizes = Sizes {
        sets,
        per,
        jobs: 0,
        submit: false,
        interval: Duration::from_secs(10),
        window,
        churn_per_second: 5,
    };
    let cap = max_jobs_from(std::env::var(MAX_JOBS_ENV).ok().as_deref());
    let mut held = 0;
    let mut out = Vec::new();
    for &step in steps {
        println!("jobs axis: {step} held jobs");
        scale.hold(step - held, "axis").await?;
        held = step;
        let daemon = start();
        let started = Instant::now();
        let knows = |log: &str| {
            passes(log, SystemTime::UNIX_EPOCH)
                .iter()
                .any(|p| p.jobs >= step as i64)
        };
        let refused = step > cap;
        if refused {
            // Past the cap the jobs past it are not read (jobs/state/ counts them): the status says
            // so and names the setting, and passes go on without the jobs.
            eventually(
                &format!("the status says the {step} jobs are past the cap"),
                Duration::from_secs(300),
                async || {
                    let s = slurmops::status::configmap::read(&fleet.client, ns, None)
                        .await
                        .ok()??;
                    s.slurm.contains(MAX_JOBS_ENV).then_some(())
                },
            )
            .await;
        } else {
            eventually(
                &format!("the daemon's passes know the {step} jobs"),
                Duration::from_secs(120 + step as u64 / 200),
                async || knows(&daemon.output()).then_some(()),
            )
            .await;
        }
        let known_after = started.elapsed();
        let blind_passes = passes(&daemon.output(), SystemTime::UNIX_EPOCH)
            .iter()
            .filter(|p| p.jobs < 0)
            .count();
        let since = SystemTime::now();
        let churned = churn(scale, &sizes).await?;
        let pid = daemon.child.id();
        let point = Point {
            jobs: step,
            known_after,
            refused,
            blind_passes,
            passes: passes(&daemon.output(), since),
            churned,
            rss_mib: slurmops::bench::rss_mib(pid),
            peak_rss_mib: slurmops::bench::peak_rss_mib_of(pid),
        };
        println!(
            "  {} after {:.0} s ({} passes without the jobs meanwhile); {} passes under churn; RSS {:.0} MiB, peak {:.0} MiB",
            if refused {
                "refused (past the cap)"
            } else {
                "known"
            },
            point.known_after.as_secs_f64(),
            point.blind_passes,
            point.passes.len(),
            point.rss_mib,
            point.peak_rss_mib
        );
        out.push(point);
    }
    Ok(out)
}
