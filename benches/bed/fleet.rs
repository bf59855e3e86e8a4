//! The daemon at the scale slurmops is sold for (`tests/bench.sh scale`): SLURMOPS_BENCH_WORKERS
//! workers (default 1,000, NodeSets of 20) as GPU-sized Nodes and pods on the real kube-apiserver
//! and controller-manager, the same number of node records in the scale Slurm instance with
//! SLURMOPS_BENCH_JOBS held jobs (default 50,000), and `slurmops run` following a repository.
//! One line per figure: passes idle and under job churn (wall time and its phases, requests and
//! bytes), commit → first drain, a rollout of every NodeSet (its first wave and its end, each
//! replaced worker's real slurmd registering), status bytes, Events, peak RSS
//! (`tests/e2e/support/at_scale.rs` measures).

use std::time::Duration;

use slurmops::bench::Figure;

use crate::{env, figure};

use crate::support::at_scale::{self, PHASES, Pass, Sizes, quantile};
use crate::support::scale::Scale;

pub async fn figures() -> Result<Vec<Figure>, String> {
    let workers = env("SLURMOPS_BENCH_WORKERS", 1000);
    let sizes = Sizes {
        sets: workers / 20,
        per: 20,
        jobs: env("SLURMOPS_BENCH_JOBS", 50_000),
        submit: true,
        interval: Duration::from_secs(10),
        window: Duration::from_secs(60),
        churn_per_second: 5,
    };
    let scale = Scale::from_env()?;
    let m = at_scale::run(&scale, &sizes).await?;
    let at = format!(
        "{} workers, {} NodeSets, {} jobs",
        m.workers, m.sets, m.jobs
    );
    let mut out = vec![figure(
        "scale.up",
        m.up_took.as_secs_f64(),
        "s",
        format!(
            "{at}: first commit → every pod made by kube-controller-manager Ready and the commit applied ({} Nodes of ~30 KB created in {:.0} s; jobs queued in {:.0} s)",
            m.workers,
            m.nodes_took.as_secs_f64(),
            m.jobs_took.as_secs_f64()
        ),
    )];
    for (name, passes, goal) in [
        (
            "idle",
            &m.idle,
            "goal p99 <= 1 s at 1,000 workers, 5 s at 10,000",
        ),
        (
            "churn",
            &m.churn,
            "5 job submissions and 5 cancellations a second",
        ),
    ] {
        out.extend(pass_figures(name, passes, m.per_minute(passes), goal, &at));
    }
    if m.rolled {
        out.push(figure(
            "scale.commit_to_first_drain",
            m.commit_to_drain.as_secs_f64(),
            "s",
            format!(
                "{at}: image of every NodeSet changed, push → the daemon's first drain (poll interval {} s; goal <= interval + 5 s)",
                m.interval.as_secs()
            ),
        ));
        out.push(figure(
            "scale.first_wave",
            m.wave_took.as_secs_f64(),
            "s",
            format!(
                "{at}: first drain → {} workers (2 per NodeSet) replaced and Ready",
                m.wave_replaced
            ),
        ));
        out.push(figure(
            "scale.rollout",
            m.rollout_took.as_secs_f64(),
            "s",
            format!(
                "{at}: image of every NodeSet changed (maxUnavailable 2), push → every worker replaced, its slurmd registered and resumed (at most {} slurmd at once: at_scale::SLURMD_AT_ONCE); nodes left drained by slurmops: {} (goal 0)",
                at_scale::SLURMD_AT_ONCE,
                m.left_drained
            ),
        ));
        let span = "whole rollout";
        out.push(figure(
            "scale.rollout_events",
            m.events as f64,
            "Events",
            format!(
                "{at}: Event objects slurmops posted during the {span} (their count {}: repeats count on one Event)",
                m.events_count
            ),
        ));
        let wave_ms: Vec<f64> = m.rollout.iter().map(|p| p.ms).collect();
        let lists = m.rollout_lists();
        out.push(figure(
            "scale.rollout_pass.p99",
            quantile(&wave_ms, 0.99),
            "ms",
            format!(
                "{at}: {} passes from the push to the end of the rollout (p50 {:.0} ms); LISTs per pass at most {lists} besides the apply's prune (goal 0)",
                m.rollout.len(),
                quantile(&wave_ms, 0.5)
            ),
        ));
    }
    out.push(figure(
        "scale.status_bytes",
        m.status_bytes_idle.max(m.status_bytes_rollout) as f64 / 1024.0,
        "KiB",
        format!(
            "{at}: largest status ConfigMap seen (idle {} KiB, rollout {} KiB; cap 256 KiB)",
            m.status_bytes_idle / 1024,
            m.status_bytes_rollout / 1024
        ),
    ));
    out.push(figure(
        "scale.peak_rss",
        m.peak_rss_mib,
        "MiB",
        format!(
            "{at}: the daemon's VmHWM over the whole run (release build; goal <= 150 MiB at 1,000 workers, 250 MiB at 10,000)"
        ),
    ));
    out.push(figure(
        "scale.restart",
        m.restart_took.as_secs_f64(),
        "s",
        format!(
            "{at}: the daemon restarted with every worker there → its first pass that decides ({} passes until 2 s after it; peak RSS {:.0} MiB). LISTs of every pod or Node in one answer over both runs: {} (goal 0: watches list in pages)",
            m.restart.len(),
            m.restart_peak_rss_mib,
            m.fleet_lists
        ),
    ));
    out.push(figure(
        "scale.restart_scale_out",
        m.restart_scaled.as_secs_f64(),
        "s",
        format!(
            "{at}: the daemon restarted → an autoscaled NodeSet at 0 workers scaled out for a job pending since before the restart (goal <= 5 s at 10,000 workers); → the first full pass, every worker listed: {:.1} s",
            m.restart_full.as_secs_f64()
        ),
    ));
    Ok(out)
}

fn pass_figures(name: &str, passes: &[Pass], per_minute: f64, goal: &str, at: &str) -> Vec<Figure> {
    let q =
        |f: &dyn Fn(&Pass) -> f64, q: f64| quantile(&passes.iter().map(f).collect::<Vec<_>>(), q);
    let phases: Vec<String> = PHASES
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{p} {:.0}", q(&|x: &Pass| x.phases[i].1, 0.99)))
        .collect();
    let max = |f: &dyn Fn(&Pass) -> u64| passes.iter().map(f).max().unwrap_or(0);
    let mean = |f: &dyn Fn(&Pass) -> u64| {
        passes.iter().map(f).sum::<u64>() as f64 / passes.len().max(1) as f64
    };
    vec![
        figure(
            &format!("scale.{name}_pass.p50"),
            q(&|p| p.ms, 0.5),
            "ms",
            format!("{at}: {} passes; {goal}", passes.len()),
        ),
        figure(
            &format!("scale.{name}_pass.p99"),
            q(&|p| p.ms, 0.99),
            "ms",
            format!("p99 by phase (ms): {}", phases.join(", ")),
        ),
        figure(
            &format!("scale.{name}_pass.kube_requests"),
            mean(&|p| p.kube_requests),
            "requests",
            format!(
                "mean per pass to the apiserver (status write included); LISTs per pass at most {} (goal 0)",
                max(&|p| p.kube_lists)
            ),
        ),
        figure(
            &format!("scale.{name}_pass.slurm_bytes"),
            max(&|p| p.slurm_bytes) as f64 / 1e3,
            "kB",
            format!(
                "most read from slurmrestd by one pass ({:.1} requests per pass; goal <= 5 MB)",
                mean(&|p| p.slurm_requests)
            ),
        ),
        figure(
            &format!("scale.{name}_passes_per_minute"),
            per_minute,
            "passes/min",
            "goal <= 60 (at most one a second unless the last one acted)",
        ),
    ]
}
