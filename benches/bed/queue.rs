//! A cluster the size slurmops is sold for, on the Slurm side: the real slurmctld and slurmrestd
//! that `tests/bed/scale.sh` starts (Slurm 24.11, 1,000 node records by default) with a queue of
//! individual held jobs (a job array would be one record), submitted here. Measured: what one read
//! of the whole queue costs (what every pass used to do), what a pass costs now that it reads the
//! queue only when a decision needs it and asks for the node list again with `update_time`, and
//! `slurm drain NODE` with the queue full. `-- --only queue` (`tests/bench.sh queue`), with
//! SCALE_RESTD_URL and SCALE_JWT from `scale.sh up`; `SLURMOPS_BENCH_JOBS` sets the queue's length
//! (default 50,000).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use slurmops::bench::Figure;

use crate::figure;
use slurmops::controller::observe::{JobsNeed, Needs, jobs_needed, read_slurm};
use slurmops::slurm::SlurmNodes;

use crate::support::scale::Scale;

/// One GET of PATH: (bytes, seconds).
async fn read(b: &Scale, path: &str) -> Result<(usize, f64), String> {
    let started = Instant::now();
    let body = reqwest::Client::builder()
        .timeout(Duration::from_secs(900))
        .build()
        .map_err(|e| e.to_string())?
        .get(format!("{}/slurm/v0.0.42/{path}", b.url))
        .header("X-SLURM-USER-TOKEN", &b.jwt)
        .send()
        .await
        .map_err(|e| e.to_string())?
        .bytes()
        .await
        .map_err(|e| e.to_string())?;
    Ok((body.len(), started.elapsed().as_secs_f64()))
}

pub async fn figures() -> Result<Vec<Figure>, String> {
    let n: usize = std::env::var("SLURMOPS_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let b = Scale::from_env()?;
    // The whole queue is read once below with its own deadline; the client's reads are the
    // pass's and the drain's.
    let c = b.client(Duration::from_secs(10), None);
    let nodes = c.all_nodes().await.map_err(|e| e.to_string())?.len();
    println!("queue: {nodes} Slurm node records; submitting {n} held jobs");
    let name = format!("bench-queue-{}", std::process::id());
    // The jobs axis: the queue grown in steps, the client's costs measured at each.
    let mut steps: Vec<usize> = [1_000, 10_000, 50_000, 100_000]
        .into_iter()
        .filter(|s| *s < n)
        .collect();
    steps.push(n);
    let (mut held, mut took) = (0, Duration::ZERO);
    let mut axis = Vec::new();
    for step in steps {
        took += b.hold(step - held, &name).await?;
        held = step;
        axis.push(client_costs(&b, step).await?);
    }
    let mut out = measure(&b, n, nodes, took).await?;
    out.extend(axis.iter().flat_map(|a| a.figures.clone()));
    if axis.len() >= 2 {
        for (what, pick) in [
            ("whole_read_seconds", 0usize),
            ("follow_pass_ms", 1),
            ("whole_read_memory", 2),
        ] {
            let points: Vec<(f64, f64)> = axis
                .iter()
                .map(|a| ((a.jobs as f64).ln(), a.values[pick].max(1e-3).ln()))
                .collect();
            out.push(figure(
                &format!("queue_jobs_exponent.{what}"),
                slurmops::bench::slope(&points),
                "",
                "least-squares slope of log(cost) over log(jobs); goal <= 1.1",
            ));
        }
    }
    Ok(out)
}

/// What the client's job reads cost at one queue length.
struct Costs {
    jobs: usize,
    /// Whole read (s), a following pass (ms), the whole read's memory (MiB).
    values: [f64; 3],
    figures: Vec<Figure>,
}

/// A fresh client at N jobs: its first (whole) read of the queue, parsed as it arrives, and its
/// memory; then ten jobs submitted and ten cancelled, and the pass after that, which follows.
async fn client_costs(b: &Scale, n: usize) -> Result<Costs, String> {
    let c = b.client(Duration::from_secs(10), None);
    c.parser().await.map_err(|e| e.to_string())?;
    let needs = Needs {
        jobs: JobsNeed::Always,
        ..Needs::default()
    };
    let sets = BTreeMap::new();
    // Peak resident memory from here (Linux: 5 resets VmHWM to the current RSS).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let base = slurmops::bench::peak_rss_mib();
    let before = c.traffic();
    let started = Instant::now();
    let view = read_slurm(&c, |nodes| jobs_needed(&needs, &sets, nodes))
        .await
        .map_err(|e| e.to_string())?;
    let whole = started.elapsed().as_secs_f64();
    let whole_bytes = (c.traffic() - before).bytes;
    let memory = slurmops::bench::peak_rss_mib() - base;
    if view.jobs().len() < n {
        return Err(format!(
            "{n} jobs queued, the client read {} ({:?})",
            view.jobs().len(),
            view.jobs_error
        ));
    }
    let http = reqwest::Client::new();
    let body = serde_json::json!({
        "script": "#!/bin/sh\nsleep 1\n",
        "job": {"name": "follow", "partition": "all", "hold": true, "tasks": 1,
            "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"]},
    });
    for j in view.jobs().iter().take(10) {
        b.submit(&http, &body).await?;
        b.cancel(&http, j.id).await?;
    }
    // Past the reuse of the kept answer (ten times what its last check cost).
    tokio::time::sleep(Duration::from_secs(5) + Duration::from_secs_f64(whole / 100.0)).await;
    let before = c.traffic();
    let started = Instant::now();
    let view = read_slurm(&c, |nodes| jobs_needed(&needs, &sets, nodes))
        .await
        .map_err(|e| e.to_string())?;
    let follow = started.elapsed().as_secs_f64() * 1e3;
    let cost = c.traffic() - before;
    if view.jobs().len() < n + 10 {
        return Err(format!(
            "after 10 more, the client read {}",
            view.jobs().len()
        ));
    }
    let k = format!("{}k", n / 1000);
    Ok(Costs {
        jobs: n,
        values: [whole, follow, memory],
        figures: vec![
            figure(
                &format!("queue_whole_read.{k}.seconds"),
                whole,
                "s",
                format!(
                    "{n} jobs, {:.0} MB parsed as it arrived (in the background in the daemon)",
                    whole_bytes as f64 / 1e6
                ),
            ),
            figure(
                &format!("queue_whole_read.{k}.memory"),
                memory,
                "MiB",
                "peak resident memory the read added: the jobs kept, not the answer",
            ),
            figure(
                &format!("queue_follow_pass.{k}.ms"),
                follow,
                "ms",
                format!(
                    "after 10 jobs came and 10 went: {} requests, {:.2} MB (jobs/state/ and the changed jobs)",
                    cost.requests,
                    cost.bytes as f64 / 1e6
                ),
            ),
        ],
    })
}

async fn measure(b: &Scale, n: usize, nodes: usize, took: Duration) -> Result<Vec<Figure>, String> {
    let mut out = vec![figure(
        "queue_submit_rate",
        n as f64 / took.as_secs_f64(),
        "jobs/s",
        "16 submissions in flight",
    )];
    let (bytes, secs) = read(b, "jobs/").await?;
    out.push(figure(
        "queue_full_read_bytes",
        bytes as f64 / 1e6,
        "MB",
        format!("{n} held jobs: what every pass read before (flags=ALL is no smaller for them)"),
    ));
    out.push(figure(
        "queue_full_read_seconds",
        secs,
        "s",
        "slurmrestd's time to build it",
    ));
    // A pass with nothing moving, twice: the first reads the node list, the second asks again
    // with update_time; neither reads the queue.
    // A client of its own: the one above read the node list already.
    let c = &b.client(Duration::from_secs(10), None);
    let needs = Needs {
        jobs: JobsNeed::WhenMoving,
        ..Needs::default()
    };
    let sets = BTreeMap::new();
    for what in ["first", "next"] {
        let before = c.traffic();
        let started = Instant::now();
        read_slurm(c, |nodes| jobs_needed(&needs, &sets, nodes))
            .await
            .map_err(|e| e.to_string())?;
        let cost = c.traffic() - before;
        out.push(figure(
            &format!("idle_pass_slurm_bytes_{what}"),
            cost.bytes as f64 / 1e3,
            "kB",
            format!(
                "{} request(s), {:.0} ms, {nodes} nodes and {n} jobs; goal <= 5 MB",
                cost.requests,
                started.elapsed().as_secs_f64() * 1e3
            ),
        ));
    }

    // `slurm drain NODE` with the queue full, as the CLI reads: the node, then the queue only
    // when the node holds jobs (these records have no slurmd: DOWN, holding none).
    let node = "s000-0";
    let started = Instant::now();
    c.drain(node, "bench").await.map_err(|e| e.to_string())?;
    c.node(node).await.map_err(|e| e.to_string())?;
    c.jobs_on(node).await.map_err(|e| e.to_string())?;
    let secs = started.elapsed().as_secs_f64();
    c.resume(node).await.map_err(|e| e.to_string())?;
    out.push(figure(
        "slurm_drain_seconds",
        secs,
        "s",
        format!("{n} jobs queued; goal < 2 s"),
    ));
    Ok(out)
}
