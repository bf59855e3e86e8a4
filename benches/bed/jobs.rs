//! The daemon against a growing queue (`tests/bench.sh jobs`): SLURMOPS_BENCH_WORKERS workers
//! (default 100, NodeSets of 20, each with a canary so that every pass needs the queue) and
//! 1,000, 10,000 and 50,000 held jobs in turn (up to SLURMOPS_BENCH_JOBS; past the job cap,
//! `slurm::client::MAX_JOBS`, the jobs past it stay unread), a daemon
//! started afresh at each length. One line per figure: how long until its passes know the queue,
//! its passes under job churn, its memory, and the fitted exponents over the lengths
//! (`tests/e2e/support/jobs_axis.rs` measures).

use std::time::Duration;

use slurmops::bench::Figure;

use crate::{env, figure};

use crate::support::at_scale::quantile;
use crate::support::jobs_axis;
use crate::support::scale::Scale;

pub async fn figures() -> Result<Vec<Figure>, String> {
    let workers = env("SLURMOPS_BENCH_WORKERS", 100);
    let most = env("SLURMOPS_BENCH_JOBS", 50_000);
    let mut steps: Vec<usize> = [1_000, 10_000, 50_000, 100_000]
        .into_iter()
        .filter(|s| *s < most)
        .collect();
    steps.push(most);
    let scale = Scale::from_env()?;
    let points = jobs_axis::run(&scale, workers / 20, 20, &steps, Duration::from_secs(60)).await?;
    let mut out = Vec::new();
    let mut fits: [Vec<(f64, f64)>; 3] = Default::default();
    for p in &points {
        let k = format!("{}k", p.jobs / 1000);
        let at = format!("{workers} workers, {} jobs", p.jobs);
        let ms: Vec<f64> = p.passes.iter().map(|x| x.ms).collect();
        let slurm: Vec<f64> = p.passes.iter().map(|x| x.phases[1].1).collect();
        let bytes = p.passes.iter().map(|x| x.slurm_bytes).sum::<u64>() as f64
            / p.passes.len().max(1) as f64;
        let (p50, p99) = (quantile(&ms, 0.5), quantile(&ms, 0.99));
        out.push(match p.refused {
            false => figure(
                &format!("jobs_axis.{k}.known_after"),
                p.known_after.as_secs_f64(),
                "s",
                format!(
                    "{at}: daemon started → its first pass knowing every job ({} passes went on without the jobs meanwhile)",
                    p.blind_passes
                ),
            ),
            true => figure(
                &format!("jobs_axis.{k}.refused_after"),
                p.known_after.as_secs_f64(),
                "s",
                format!(
                    "{at}: past the job cap: daemon started → the status naming the cap and its setting; the queue is not read and passes go on without the jobs ({} such passes meanwhile)",
                    p.blind_passes
                ),
            ),
        });
        out.push(figure(
            &format!("jobs_axis.{k}.pass.p50"),
            p50,
            "ms",
            format!(
                "{at}, {} passes under churn ({} jobs came and went), every pass needing the queue",
                p.passes.len(),
                p.churned
            ),
        ));
        out.push(figure(
            &format!("jobs_axis.{k}.pass.p99"),
            p99,
            "ms",
            at.clone(),
        ));
        out.push(figure(
            &format!("jobs_axis.{k}.observe_slurm.p99"),
            quantile(&slurm, 0.99),
            "ms",
            at.clone(),
        ));
        out.push(figure(
            &format!("jobs_axis.{k}.slurm_bytes_per_pass"),
            bytes / 1e6,
            "MB",
            format!("{at}: mean over the churn window (jobs/state/ and the jobs that changed)"),
        ));
        out.push(figure(
            &format!("jobs_axis.{k}.rss"),
            p.rss_mib,
            "MiB",
            format!(
                "{at}: resident at the window's end (peak {:.0} MiB)",
                p.peak_rss_mib
            ),
        ));
        let x = (p.jobs as f64).ln();
        fits[0].push((x, p50.max(1e-3).ln()));
        fits[1].push((x, p.rss_mib.max(1e-3).ln()));
        fits[2].push((x, p.peak_rss_mib.max(1e-3).ln()));
    }
    if points.len() >= 2 {
        for (what, f) in ["pass_p50", "rss", "peak_rss"].iter().zip(&fits) {
            out.push(figure(
                &format!("jobs_axis.exponent.{what}"),
                slurmops::bench::slope(f),
                "",
                "least-squares slope of log(cost) over log(jobs); goal <= 1.1",
            ));
        }
    }
    Ok(out)
}
