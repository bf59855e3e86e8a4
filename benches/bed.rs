//! The whole benchmark in one run, against the test bed (tests/bench.sh runs it as
//! `cargo bench --bench bed`). The offline figures, the no-op reconcile cost and the footprint come
//! from `slurmops bench --kubeconfig` run as a process of its own (so its peak RSS is its own);
//! the rollout figures need pods that run, so this process drives the test kubelet (a real slurmd
//! per worker pod) and measures:
//! - the rollout's own overhead per wave: a wave (drain → new pod Ready and its node registered)
//!   minus the time Kubernetes and slurmd took to replace the pod (pod deleted → marked Ready);
//! - drain-to-drained latency of an idle node through slurmrestd;
//! - the controller's figures (`controller.rs`): NodeSets rolling concurrently, the daemon's
//!   reaction to a commit and to a replaced worker, requests of an idle pass at 200 NodeSets.
//!
//! `-- --json FILE` writes every figure as JSON too; `-- --binary PATH` measures the footprint
//! (size, cold start, daemon memory) of PATH instead of the bench's own build; `-- --only
//! controller` runs the controller's figures alone, `-- --only queue` those of a large Slurm
//! queue (`queue.rs`), `-- --only scale` the daemon's with thousands of workers (`fleet.rs`), `-- --only jobs`
//! the daemon's against a growing queue (`jobs.rs`).

#[path = "../tests/e2e/support/mod.rs"]
mod support;

#[path = "bed/controller.rs"]
mod controller;

#[path = "bed/jobs.rs"]
mod jobs;
#[path = "bed/queue.rs"]
mod queue;

#[path = "bed/fleet.rs"]
mod fleet;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slurmops::bench::Figure;
use slurmops::rollout::{Event, Observer};
use slurmops::slurm::SlurmNodes;

use support::{TestEnv, bed, eventually};

/// Figure NAME, printed as soon as it is taken: a long run shows what it measured so far.
fn figure(name: &str, value: f64, unit: &str, judged: impl Into<String>) -> Figure {
    let f = slurmops::bench::fig(name, value, unit, judged);
    println!("{f}");
    f
}

/// A size from the environment variable KEY, else DEFAULT.
fn env(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Workers of `support::four_workers`.
const WORKERS: usize = 4;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let json = value("--json");
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let only = value("--only");
    let result = match only.as_deref() {
        Some("queue") => rt.block_on(queue::figures()),
        Some("scale") => rt.block_on(fleet::figures()),
        Some("jobs") => rt.block_on(jobs::figures()),
        only => rt.block_on(run(value("--binary"), only == Some("controller"))),
    };
    match result {
        Ok(figures) => {
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&figures).expect("figures serialize");
                std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {path}: {e}"));
                println!("figures written to {path}");
            }
        }
        Err(e) => {
            eprintln!("bench failed: {e}");
            std::process::exit(1);
        }
    }
}

/// Every figure; with ONLY_CONTROLLER (`-- --only controller`) the controller's alone.
async fn run(binary: Option<String>, only_controller: bool) -> Result<Vec<Figure>, String> {
    let mut figures = Vec::new();
    if !only_controller {
        figures = binary_figures(binary)?;
        let rollout = rollout_figures().await?;
        for f in &rollout {
            println!("{f}");
        }
        figures.extend(rollout);
    }
    for part in [
        controller::idle_pass().await?,
        controller::concurrency().await?,
        controller::reaction().await?,
    ] {
        for f in &part {
            println!("{f}");
        }
        figures.extend(part);
    }
    Ok(figures)
}

/// `slurmops bench --kubeconfig` against the bed; its lines are printed as they come. BINARY
/// (the static build that ships) is the one whose footprint is measured.
fn binary_figures(binary: Option<String>) -> Result<Vec<Figure>, String> {
    let out = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"));
    cmd.arg("bench");
    if let Some(b) = binary {
        cmd.args(["--binary", &b]);
    }
    let status = cmd
        .arg("--kubeconfig")
        .arg(&bed().kubeconfig_admin)
        .args(["--slurmrestd-url", &bed().slurmrestd_url])
        .env("SLURM_JWT", &bed().slurm_jwt)
        .arg("--json")
        .arg(out.path())
        .status()
        .map_err(|e| format!("run slurmops bench: {e}"))?;
    if !status.success() {
        return Err(format!("slurmops bench exited with {status}"));
    }
    let text = std::fs::read_to_string(out.path()).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("slurmops bench --json: {e}"))
}

async fn apply(cluster: &slurmops::k8s::Connection, text: &str, wait: bool) -> Result<(), String> {
    let c = slurmops::cluster::load("cluster.yaml", text).map_err(|d| format!("{d:?}"))?;
    let opts = slurmops::apply::Options {
        wait: wait.then_some(Duration::from_secs(120)),
        ..Default::default()
    };
    let rendered = slurmops::render::render(&c);
    slurmops::apply::apply(
        cluster,
        &c,
        text,
        &rendered,
        &opts,
        &slurmops::apply::NoSlurm,
    )
    .await
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// Rollout overhead per wave and drain latency, on a NodeSet of idle workers.
async fn rollout_figures() -> Result<Vec<Figure>, String> {
    let env = TestEnv::new("bench").await;
    let result = measure(&env).await;
    env.cleanup().await;
    result
}

async fn measure(env: &TestEnv) -> Result<Vec<Figure>, String> {
    let w = env.name("bench");
    let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_admin), None)
        .await
        .map_err(|e| e.to_string())?;
    let before = support::four_workers(&env.ns, &w, "registry.example/slurmd:24.11-a");
    apply(&cluster, &before, true).await?;
    let s = support::slurm::client();
    let names: Vec<String> = (0..WORKERS).map(|i| format!("{w}-{i}")).collect();
    for n in &names {
        eventually(&format!("{n} idle"), Duration::from_secs(60), async || {
            let node = s.get(n).await.ok()?;
            (node.state.has("IDLE") && !node.state.has("NOT_RESPONDING")).then_some(())
        })
        .await;
    }
    let mut out = drain_latency(&s, &names).await?;

    let after = support::four_workers(&env.ns, &w, "registry.example/slurmd:24.11-b");
    apply(&cluster, &after, false).await?;
    let c = slurmops::cluster::load("cluster.yaml", &after).map_err(|d| format!("{d:?}"))?;
    let log: Arc<Mutex<Vec<(Instant, Event)>>> = Arc::default();
    let observer = {
        let log = log.clone();
        Observer::new(move |_, e| log.lock().unwrap().push((Instant::now(), e.clone())))
    };
    let rendered = slurmops::render::render(&c);
    let until = slurmops::controller::drive::Until::for_people();
    let poll = until.poll;
    let rollout = slurmops::controller::drive::Rollout {
        c: &c,
        text: &after,
        rendered: &rendered,
        node_set: None,
        decrees: Default::default(),
        until,
        observer,
        watch: true,
    };
    let t = Instant::now();
    slurmops::controller::drive::roll(&cluster, &s, &rollout)
        .await
        .map_err(|e| e.to_string())?;
    let total = t.elapsed();
    let waves = waves(&log.lock().unwrap(), &env.kubelet.readied())?;
    out.extend(wave_figures(&waves, total, poll));
    Ok(out)
}

/// Drains each idle node and polls (every 10 ms) until Slurm reports it drained; resumes it.
async fn drain_latency(
    s: &slurmops::slurm::Client,
    names: &[String],
) -> Result<Vec<Figure>, String> {
    let mut took = Vec::new();
    for n in names {
        let t = Instant::now();
        s.drain(n, "bench drain latency")
            .await
            .map_err(|e| e.to_string())?;
        while !s.is_drained(n).await.map_err(|e| e.to_string())? {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        took.push(t.elapsed());
        s.resume(n).await.map_err(|e| e.to_string())?;
    }
    took.sort();
    Ok(vec![Figure {
        name: "drain.idle_node.latency".into(),
        value: ms(took[took.len() / 2]),
        unit: "ms".into(),
        judged: format!(
            "median of {} idle nodes, drain request to Slurm reporting DRAINED (max {:.1} ms)",
            took.len(),
            ms(*took.last().expect("nodes"))
        ),
    }])
}

/// One wave of a rollout with maxUnavailable 1.
#[derive(Debug)]
struct Wave {
    /// Drain requested → the rollout sees the new pod Ready and its node registered.
    total: Duration,
    /// Pod deleted → the kubelet marked the new pod Ready: Kubernetes' and slurmd's time.
    pod: Duration,
}

fn waves(
    log: &[(Instant, Event)],
    readied: &[support::kubelet::Readied],
) -> Result<Vec<Wave>, String> {
    let at = |want: &dyn Fn(&Event) -> bool| log.iter().find(|(_, e)| want(e)).map(|(t, _)| *t);
    let mut out = Vec::new();
    for (start, e) in log {
        let Event::Drain { node, ours: true } = e else {
            continue;
        };
        let deleted = at(&|e| matches!(e, Event::Delete { pod, .. } if pod == node))
            .ok_or(format!("{node}: no delete recorded"))?;
        // Ready: the new pod is Ready and its node registered (and resumed, when the drain
        // outlived the pod: a dynamic node that re-registers comes back without it).
        let done = at(&|e| matches!(e, Event::Ready { pod } if pod == node))
            .ok_or(format!("{node}: the rollout never saw its new pod Ready"))?;
        let ready = readied
            .iter()
            .find(|r| r.pod == *node && r.at > deleted)
            .map(|r| r.at)
            .ok_or(format!("{node}: the new pod was never marked Ready"))?;
        out.push(Wave {
            total: done - *start,
            pod: ready - deleted,
        });
    }
    if out.len() != WORKERS {
        return Err(format!(
            "{} waves for {WORKERS} workers: {log:?}",
            out.len()
        ));
    }
    Ok(out)
}

fn wave_figures(waves: &[Wave], total: Duration, poll: Duration) -> Vec<Figure> {
    let n = waves.len() as f64;
    let mean = |f: &dyn Fn(&Wave) -> Duration| waves.iter().map(|w| ms(f(w))).sum::<f64>() / n;
    let overhead: Vec<f64> = waves
        .iter()
        .map(|w| ms(w.total.saturating_sub(w.pod)))
        .collect();
    let max = overhead.iter().cloned().fold(0.0, f64::max);
    let fig = |name: &str, value: f64, judged: String| Figure {
        name: name.into(),
        value,
        unit: "ms".into(),
        judged,
    };
    vec![
        fig(
            "rollout.wave.wall",
            mean(&|w| w.total),
            format!(
                "mean of {} waves (maxUnavailable 1, idle workers): drain requested → new pod Ready and registered; whole rollout {:.1} s",
                waves.len(),
                total.as_secs_f64()
            ),
        ),
        fig(
            "rollout.wave.pod_ready",
            mean(&|w| w.pod),
            "mean, pod deleted → new pod Ready (controller-manager, kubelet, slurmd)".into(),
        ),
        fig(
            "rollout.wave.overhead",
            overhead.iter().sum::<f64>() / n,
            format!(
                "mean wave minus pod time: slurmops' own cost per wave (max {max:.0} ms; poll interval {} ms)",
                poll.as_millis()
            ),
        ),
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
