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
use slurmops::controller::observe::{JobsNeed, Needs, jobs_needed, read_slurm};
use slurmops::slurm::SlurmNodes;

use crate::support::scale::Scale;

fn figure(name: &str, value: f64, unit: &str, judged: &str) -> Figure {
    let f = Figure {
        name: name.into(),
        value,
        unit: unit.into(),
        judged: judged.into(),
    };
    println!("{f}");
    f
}

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
    let took = b.hold(n, &name).await?;
    measure(&b, n, nodes, took).await
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
        &format!("{n} held jobs: what every pass read before (flags=ALL is no smaller for them)"),
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
            &format!(
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
        &format!("{n} jobs queued; goal < 2 s"),
    ));
    Ok(out)
}
