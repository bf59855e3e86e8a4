//! The controller's figures on the bed:
//! - concurrency: four NodeSets of 4 workers changed in one commit roll in about the time of one
//!   (ratio of the two wall times; the controller's pass moves every NodeSet at once);
//! - reaction of the daemon (`slurmops run`, the way it is installed but with the bed's token):
//!   a commit pushed → applied while another NodeSet waits on a job (against the poll interval),
//!   and a worker replaced → the next wave's drain (its overhead: watch event → pass → drain);
//! - requests of an idle pass at 200 NodeSets: Kubernetes reads (LIST per kind without the watch
//!   cache, none with it) and Slurm requests.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use slurmops::bench::{Figure, fig};
use slurmops::controller::drive::{Until, drive};
use slurmops::controller::watch::Cache;
use slurmops::controller::{Env, Target, observe::Scope};
use slurmops::rollout::Observer;
use slurmops::slurm::SlurmNodes;

use crate::support::daemon::{Daemon, Repo, status};
use crate::support::{TestEnv, bed, eventually};

/// cluster.yaml of SETS NodeSets `PREFIX-i` of WORKERS workers running IMAGE.
fn cluster(ns: &str, names: &[String], workers: u32, image: &str) -> String {
    let mut s = crate::support::cluster_head("c", ns) + "  nodeSets:\n";
    for n in names {
        s += &format!(
            "    - {{name: {n}, replicas: {workers}, cpu: \"1\", memory: 256Mi, image: {image}, update: {{maxUnavailable: 1}}}}\n"
        );
    }
    s + "  partitions:\n    - {name: all, nodeSets: [ALL], default: true}\n"
}

async fn idle(names: &[String], workers: u32) {
    let s = crate::support::slurm::client();
    for set in names {
        for i in 0..workers {
            let n = format!("{set}-{i}");
            eventually(&format!("{n} idle"), Duration::from_secs(90), async || {
                let x = s.get(&n).await.ok()?;
                (x.state.has("IDLE") && !x.state.has("NOT_RESPONDING")).then_some(())
            })
            .await;
        }
    }
}

/// (when, NodeSet, pod) of every pod deletion a drive made.
type Deletions = Arc<std::sync::Mutex<Vec<(Instant, String, String)>>>;

/// Applies TEXT and loops the controller's pass until done; the wall time. Pod deletions are
/// recorded in DELETED.
async fn reconcile(
    cluster: &slurmops::k8s::Connection,
    text: &str,
    deleted: &Deletions,
) -> Result<Duration, String> {
    let c = slurmops::cluster::load("cluster.yaml", text).map_err(|d| format!("{d:?}"))?;
    let r = slurmops::render::render(&c);
    let slurm = crate::support::slurm::client();
    let observer = {
        let deleted = deleted.clone();
        Observer::new(move |set, e| {
            if let slurmops::rollout::Event::Delete { pod, .. } = e {
                deleted
                    .lock()
                    .unwrap()
                    .push((Instant::now(), set.to_string(), pod.clone()));
            }
        })
    };
    let always = || true;
    let env = Env {
        cluster,
        slurm: Some(&slurm),
        cache: None,
        fence: &always,
        observer: &observer,
        registration_grace: 300,
    };
    let opts = slurmops::apply::Options::default();
    // As `slurmops apply` runs it: watched workers wake the next pass.
    let wake = Arc::new(tokio::sync::Notify::new());
    let cache = Cache::start(
        &cluster.client,
        Scope::cluster(&c.metadata.namespace, &c.metadata.name),
        wake.clone(),
    );
    let env = Env {
        cache: Some(&cache),
        ..env
    };
    let until = Until {
        poll: Duration::from_millis(500),
        wake: Some(wake),
        max_passes: None,
        progress_timeout: Duration::from_secs(120),
        slurm_outage_timeout: Duration::from_secs(30),
    };
    let (env, c, r, opts) = (&env, &c, &r, &opts);
    let t = Instant::now();
    drive(
        |s: slurmops::controller::drive::Step| async move {
            let target = Target {
                c,
                text,
                rendered: r,
                apply: Some(opts),
                scope: Default::default(),
                fresh: s.fresh,
                decrees: None,
            };
            slurmops::controller::pass(env, &target).await
        },
        &until,
        &observer,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(t.elapsed())
}

/// A rollout of several NodeSets: its wall time, and the part of it that is Kubernetes' and
/// slurmd's (the NodeSet whose pod replacements — deleted → new pod Ready — add up the longest:
/// its workers are replaced one after another).
struct Rolled {
    wall: Duration,
    pods: Duration,
}

/// Rolls SETS NodeSets of 4 idle workers, from the commit's apply to done.
async fn roll_sets(sets: usize) -> Result<Rolled, String> {
    let env = TestEnv::new(&format!("bench-conc{sets}")).await;
    let result = async {
        let names: Vec<String> = (0..sets).map(|i| env.name(&format!("q{i}"))).collect();
        let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_admin), None)
            .await
            .map_err(|e| e.to_string())?;
        let deleted = Deletions::default();
        reconcile(&cluster, &cluster_text(&env, &names, "img:1"), &deleted).await?;
        idle(&names, 4).await;
        deleted.lock().unwrap().clear();
        let wall = reconcile(&cluster, &cluster_text(&env, &names, "img:2"), &deleted).await?;
        let readied = env.kubelet.readied();
        let mut per_set: std::collections::BTreeMap<String, Duration> = Default::default();
        for (at, set, pod) in deleted.lock().unwrap().iter() {
            let ready = readied
                .iter()
                .filter(|r| r.pod == *pod && r.at > *at)
                .map(|r| r.at)
                .min()
                .ok_or(format!("{pod}: the new pod was never marked Ready"))?;
            *per_set.entry(set.clone()).or_default() += ready - *at;
        }
        let pods = per_set.values().max().copied().unwrap_or_default();
        Ok(Rolled { wall, pods })
    }
    .await;
    env.cleanup().await;
    result
}

fn cluster_text(env: &TestEnv, names: &[String], image: &str) -> String {
    cluster(&env.ns, names, 4, image)
}

pub async fn concurrency() -> Result<Vec<Figure>, String> {
    let one = roll_sets(1).await?;
    let four = roll_sets(4).await?;
    let ratio = four.wall.as_secs_f64() / one.wall.as_secs_f64();
    let own = |r: &Rolled| r.wall.saturating_sub(r.pods).as_secs_f64();
    Ok(vec![
        fig(
            "controller.rollout.one_node_set",
            one.wall.as_secs_f64(),
            "s",
            "one NodeSet of 4 idle workers (maxUnavailable 1), commit applied → every worker replaced, Ready and registered",
        ),
        fig(
            "controller.rollout.four_node_sets",
            four.wall.as_secs_f64(),
            "s",
            "four NodeSets of 4 idle workers changed in one commit, same policy",
        ),
        fig(
            "controller.rollout.pod_replacement",
            four.pods.as_secs_f64(),
            "s",
            format!(
                "of the four NodeSets' rollout, the time Kubernetes and slurmd took to replace the pods of the slowest NodeSet (deleted → new pod Ready, 4 in a row); {:.1} s for one NodeSet alone: 16 real slurmds share 2 cores",
                one.pods.as_secs_f64()
            ),
        ),
        fig(
            "controller.rollout.own_time",
            own(&four),
            "s",
            format!(
                "slurmops' own share of the four NodeSets' rollout (wall minus that pod time; {:.2} s for one NodeSet): drains, passes, the watch",
                own(&one)
            ),
        ),
        fig(
            "controller.rollout.concurrency_ratio",
            ratio,
            "x",
            "four NodeSets / one NodeSet (goal <= 1.5: NodeSets roll concurrently)",
        ),
    ])
}

/// (time, message) of the daemon's JSON log lines.
fn log_lines(text: &str) -> Vec<(SystemTime, String)> {
    text.lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            let at: k8s_openapi::jiff::Timestamp = v["timestamp"].as_str()?.parse().ok()?;
            let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(at.as_nanosecond() as u64);
            Some((t, v["message"].as_str()?.to_string()))
        })
        .collect()
}

pub async fn reaction() -> Result<Vec<Figure>, String> {
    let env = TestEnv::new("bench-react").await;
    let result = react(&env).await;
    env.cleanup().await;
    result
}

async fn react(env: &TestEnv) -> Result<Vec<Figure>, String> {
    let (x, y) = (env.name("x"), env.name("y"));
    let text = |ix: &str, iy: &str| {
        crate::support::cluster_head("c", &env.ns)
            + &format!(
                "  nodeSets:\n    - {{name: {x}, replicas: 2, cpu: \"1\", memory: 256Mi, image: {ix}}}\n    - {{name: {y}, replicas: 4, cpu: \"1\", memory: 256Mi, image: {iy}, update: {{maxUnavailable: 1}}}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n"
            )
    };
    let name = env.name("repo");
    let repo = Repo::new(&name);
    let url = format!("{}/{name}.git", bed().git.http_url);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let interval = Duration::from_secs(2);
    let c1 = repo.push(&text("img:1", "img:1"), "first");
    let daemon = Daemon::start_as(
        env,
        dir.path(),
        &url,
        "bench",
        &[
            "--interval",
            "2s",
            "--log-format",
            "json",
            "--slurmrestd-url",
            &bed().slurmrestd_url,
            "--slurm-jwt",
            &bed().slurm_jwt,
        ],
        &bed().kubeconfig_admin,
    );
    applied(env, &c1, Duration::from_secs(90)).await;
    idle(std::slice::from_ref(&x), 2).await;
    idle(std::slice::from_ref(&y), 4).await;
    let x0 = format!("{x}-0");
    let job = crate::support::slurm::submit_sleep(&x0, 600).await;
    let c2 = repo.push(&text("img:2", "img:1"), "x: new image");
    applied(env, &c2, Duration::from_secs(30)).await;
    let s = crate::support::slurm::client();
    eventually("x-0 draining", Duration::from_secs(90), async || {
        let n = s.get(&x0).await.ok()?;
        n.state.has("DRAIN").then_some(())
    })
    .await;
    // A commit for y while x-0 waits on its job.
    let wall = SystemTime::now();
    let c3 = repo.push(&text("img:2", "img:2"), "y: new image");
    let pushed = Instant::now();
    applied(env, &c3, Duration::from_secs(30)).await;
    let to_applied = pushed.elapsed();
    // y rolls in four waves; each next drain follows the previous new pod's Ready.
    eventually("y rolled", Duration::from_secs(120), async || {
        let p = status(env).await?.progress();
        p.iter().find(|p| p.node_set == y && p.done).map(|_| ())
    })
    .await;
    crate::support::slurm::sh(&[
        "exec",
        crate::support::slurm_instance(),
        "scancel",
        &job.to_string(),
    ]);
    let log = daemon.output();
    drop(daemon);
    let overhead = wave_overhead(&log_lines(&log), &env.kubelet.readied(), &y, wall)?;
    let max = overhead.iter().cloned().fold(0.0, f64::max);
    let mean = overhead.iter().sum::<f64>() / overhead.len().max(1) as f64;
    Ok(vec![
        fig(
            "daemon.commit_to_applied",
            to_applied.as_secs_f64() * 1000.0,
            "ms",
            format!(
                "push → status says applied, while another NodeSet's worker waits on a job (goal: poll interval {} ms + < 1 s)",
                interval.as_millis()
            ),
        ),
        fig(
            "daemon.next_wave.overhead",
            mean,
            "ms",
            format!(
                "mean over {} waves, new pod marked Ready → the daemon drains the next worker (max {max:.0} ms; goal < 100 ms, by watch, not the {} ms poll)",
                overhead.len(),
                interval.as_millis()
            ),
        ),
    ])
}

async fn applied(env: &TestEnv, commit: &str, within: Duration) {
    eventually(&format!("commit {commit} applied"), within, async || {
        (status(env).await?.last_applied_commit == commit).then_some(())
    })
    .await;
}

/// For each drain of a y worker after the first: drain time − Ready time of the pod replaced in
/// the wave before (ms). The kubelet's times are `Instant`s, mapped to wall time through SINCE.
fn wave_overhead(
    log: &[(SystemTime, String)],
    readied: &[crate::support::kubelet::Readied],
    set: &str,
    since: SystemTime,
) -> Result<Vec<f64>, String> {
    let now_i = Instant::now();
    let now_s = SystemTime::now();
    let wall = |i: Instant| now_s - (now_i - i);
    let prefix = format!("{set}: draining ");
    let drains: Vec<(SystemTime, String)> = log
        .iter()
        .filter(|(t, _)| *t >= since)
        .filter_map(|(t, m)| Some((*t, m.strip_prefix(&prefix)?.to_string())))
        .collect();
    if drains.len() < 2 {
        return Err(format!(
            "{} drains of {set} in the daemon's log",
            drains.len()
        ));
    }
    let mut out = Vec::new();
    for pair in drains.windows(2) {
        let (prev, (next_at, _)) = (&pair[0].1, (&pair[1].0, &pair[1].1));
        let ready = readied
            .iter()
            .filter(|r| r.pod == *prev && wall(r.at) >= pair[0].0)
            .map(|r| wall(r.at))
            .min()
            .ok_or(format!("{prev}: the new pod was never marked Ready"))?;
        let d = next_at
            .duration_since(ready)
            .map_err(|_| format!("{prev}: next drain before the new pod was Ready"))?;
        out.push(d.as_secs_f64() * 1000.0);
    }
    Ok(out)
}

pub async fn idle_pass() -> Result<Vec<Figure>, String> {
    let env = TestEnv::new("bench-idle").await;
    let result = idle_requests(&env).await;
    env.cleanup().await;
    result
}

async fn idle_requests(env: &TestEnv) -> Result<Vec<Figure>, String> {
    let text = slurmops::bench::generate(200, 0, 10, 0)
        .replace("namespace: slurm", &format!("namespace: {}", env.ns));
    let c = slurmops::cluster::load("cluster.yaml", &text).map_err(|d| format!("{d:?}"))?;
    let r = slurmops::render::render(&c);
    let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_admin), None)
        .await
        .map_err(|e| e.to_string())?;
    slurmops::apply::apply(
        &cluster,
        &c,
        &text,
        &r,
        &Default::default(),
        &slurmops::apply::NoSlurm,
    )
    .await
    .map_err(|e| e.to_string())?;
    let slurm = crate::support::slurm::client();
    let observer = Observer::default();
    let always = || true;
    let trigger = Arc::new(tokio::sync::Notify::new());
    let scope = Scope::cluster(&c.metadata.namespace, &c.metadata.name);
    let cache = Cache::start(&cluster.client, scope.clone(), trigger);
    eventually("watch cache filled", Duration::from_secs(30), async || {
        cache.serves(&scope).then_some(())
    })
    .await;
    let mut counts = Vec::new();
    for cached in [false, true] {
        let env = Env {
            cluster: &cluster,
            slurm: Some(&slurm),
            cache: cached.then_some(&cache),
            fence: &always,
            observer: &observer,
            registration_grace: 300,
        };
        let target = Target {
            c: &c,
            text: &text,
            rendered: &r,
            apply: None,
            scope: Default::default(),
            fresh: false,
            decrees: None,
        };
        let (k, s) = (cluster.log.summary(), slurm.requests());
        let out = slurmops::controller::pass(&env, &target)
            .await
            .map_err(|e| e.to_string())?;
        if out.progress.len() != 200 {
            return Err(format!("{} NodeSets observed", out.progress.len()));
        }
        counts.push((cluster.log.summary().total - k.total, slurm.requests() - s));
    }
    let (k_list, s_list) = counts[0];
    let (k_cache, s_cache) = counts[1];
    Ok(vec![
        fig(
            "controller.idle_pass.kube_requests.watch",
            k_cache as f64,
            "requests",
            format!(
                "idle pass over 200 NodeSets with the watch cache (the daemon); {s_cache} Slurm requests (all nodes, all jobs); goal: no LIST per NodeSet"
            ),
        ),
        fig(
            "controller.idle_pass.kube_requests.list",
            k_list as f64,
            "requests",
            format!(
                "the same pass without the cache (slurmops apply): one LIST per kind; {s_list} Slurm requests"
            ),
        ),
    ])
}
