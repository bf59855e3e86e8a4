//! The fault campaign over a Slurm upgrade: a cluster of the test's own on Slurm 24.11 (the test
//! kubelet runs each pod's daemon from the chroot of its pod's release: slurmctld with its state
//! kept across pods, slurmrestd, 4 workers' slurmd) gets the commit to 26.05 while a 45 s job runs
//! on a worker, and two daemons (one leads, one stands by) carry the upgrade out — slurmctld
//! first, then the workers one at a time, the busy one only after its job ended — while faults
//! from a seeded schedule (tests/e2e/campaign.rs's draw) land within its first 90 s: the leading
//! daemon SIGKILLed (restarted at once, or after the standby took over), the daemons' slurmrestd
//! and apiserver connections cut a while, git silent, the status ConfigMap deleted.
//!
//! Invariants: the job COMPLETED, never requeued (`Restarts=0`); every worker IDLE on a 26.05
//! slurmd and slurmctld on 26.05; no worker left drained by slurmops; the status naming the commit
//! applied within 300 s of the last fault; `WorkerReplaced` and `Applied` Events. The seed is
//! printed; `SLURMOPS_CAMPAIGN_SEED=N` runs it again.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, DeleteParams, ListParams};
use slurmops::cluster::load;
use slurmops::render::render;

use crate::campaign::{Rng, seeded};
use crate::campaign_controllers::Cut;
use crate::support::daemon::{Daemon, Tarpit, applied, status};
use crate::support::gitops::Bed;
use crate::support::slurm::{sh, slurmd_port, test_host_overlay};
use crate::support::{OwnSlurm, TestEnv, bed, eventually, unique_suffix};
use crate::upgrade::cluster_yaml;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    LeaderKilled,
    StandbyTakesOver,
    /// The daemons' slurmrestd connections cut, new ones closed, for a while.
    RestdGone,
    /// The daemons' apiserver connections cut, new ones closed, for a while.
    ApiserverGone,
    /// The git server accepts and never answers.
    GitGone,
    StatusDeleted,
}

const FAULTS: [Fault; 6] = [
    Fault::LeaderKilled,
    Fault::StandbyTakesOver,
    Fault::RestdGone,
    Fault::ApiserverGone,
    Fault::GitGone,
    Fault::StatusDeleted,
];

#[derive(Debug, Clone, Copy)]
struct Planned {
    at: Duration,
    fault: Fault,
    lasts: Duration,
}

fn schedule(seed: u64, n: usize) -> Vec<Planned> {
    let mut r = Rng(seed);
    let mut out: Vec<Planned> = (0..n)
        .map(|_| Planned {
            at: Duration::from_secs(r.below(90)),
            fault: FAULTS[r.below(FAULTS.len() as u64) as usize],
            lasts: Duration::from_secs(3 + r.below(23)),
        })
        .collect();
    out.sort_by_key(|p| p.at);
    out
}

/// `KEY=value` fields of `scontrol -o show KIND ID` on INSTANCE (empty when it did not answer).
fn show(instance: &str, kind: &str, id: &str) -> BTreeMap<String, String> {
    let out = std::process::Command::new("bash")
        .args([
            "tests/bed/slurm.sh",
            "exec",
            instance,
            "scontrol",
            "-o",
            "show",
            kind,
            id,
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    out.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn run(seed: u64, n: usize) -> Duration {
    let plan = schedule(seed, n);
    eprintln!("upgrade campaign seed {seed} (again: SLURMOPS_CAMPAIGN_SEED={seed}): {plan:?}");
    let instance = format!("cu{}", &unique_suffix()[..4]);
    let (ctld_port, restd_port) = (slurmd_port(), slurmd_port());
    let w = format!("g{}", &unique_suffix()[..4]);
    let confs_dir = tempfile::tempdir().unwrap();
    let env = TestEnv::with_own_slurm("cmpup", |ns: &str| {
        let mut confs = BTreeMap::new();
        for release in ["24.11", "26.05"] {
            let c = load("cluster.yaml", &cluster_yaml(ns, &w, release)).unwrap();
            let dir = confs_dir.path().join(release);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, content) in test_host_overlay(&c, &render(&c), &instance, ctld_port) {
                std::fs::write(dir.join(name), content).unwrap();
            }
            confs.insert(release.to_string(), dir);
        }
        OwnSlurm {
            instance: instance.clone(),
            ctld_port,
            restd_port,
            confs,
            controllers: Vec::new(),
            pull: Duration::ZERO,
        }
    })
    .await;
    let ns = env.ns.clone();
    let t = Bed::with(env).await;
    let kube_text = std::fs::read_to_string(&t.kubeconfig).unwrap();
    let server = kube_text
        .split("https://")
        .nth(1)
        .and_then(|s| s.split(['"', '\n', ' ']).next())
        .expect("the kubeconfig's server")
        .to_string();
    let api = Cut::start(&server);
    let kubeconfig = t.dir.path().join("through-relay.kubeconfig");
    std::fs::File::create(&kubeconfig)
        .unwrap()
        .write_all(kube_text.replace(&server, &api.addr.to_string()).as_bytes())
        .unwrap();
    let restd = Cut::start(&format!("127.0.0.1:{restd_port}"));
    let git_upstream = bed().git.http_url.trim_start_matches("http://").to_string();
    let git_upstream = git_upstream.split('/').next().unwrap().to_string();
    let git = Tarpit::start(&git_upstream);
    let url = t.url.replacen(&git_upstream, &git.addr.to_string(), 1);
    let restd_url = format!("http://{}", restd.addr);
    let mut running: BTreeMap<String, Daemon> = BTreeMap::new();
    let mut starts = 0;
    let mut start = |running: &mut BTreeMap<String, Daemon>, identity: &str| {
        starts += 1;
        let log_dir = t.dir.path().join(format!("start-{starts}"));
        std::fs::create_dir_all(&log_dir).unwrap();
        let d = Daemon::start_as(
            &t.env,
            &log_dir,
            &url,
            identity,
            &[
                "--interval",
                "2s",
                "--git-timeout",
                "5s",
                "--slurmrestd-url",
                &restd_url,
            ],
            &kubeconfig,
        );
        running.insert(identity.to_string(), d);
    };
    let leases: Api<Lease> = Api::namespaced(t.env.client.clone(), &ns);
    let kill_leader = async |running: &mut BTreeMap<String, Daemon>| -> Option<String> {
        let leader = leases
            .get_opt("slurmops-leader")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity);
        let who = match leader {
            Some(l) if running.contains_key(&l) => l,
            _ => running.keys().next()?.clone(),
        };
        drop(running.remove(&who));
        Some(who)
    };

    let c1 = t.repo.push(&cluster_yaml(&ns, &w, "24.11"), "Slurm 24.11");
    start(&mut running, "a");
    start(&mut running, "b");
    applied(&t.env, &c1, Duration::from_secs(180)).await;
    let names: Vec<String> = (0..4).map(|i| format!("{w}-{i}")).collect();
    for n in &names {
        eventually(
            &format!("{n} idle on 24.11"),
            Duration::from_secs(120),
            async || {
                let s = show(&instance, "node", n);
                let state = s.get("State")?;
                (state.starts_with("IDLE") && !state.contains("NOT_RESPONDING")).then_some(())
            },
        )
        .await;
    }
    let job = sh(&[
        "exec",
        &instance,
        "sbatch",
        "--parsable",
        "-w",
        &names[2],
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 45",
    ])
    .trim()
    .to_string();
    eventually("the job running", Duration::from_secs(60), async || {
        (show(&instance, "job", &job).get("JobState")? == "RUNNING").then_some(())
    })
    .await;
    let seen: Arc<Mutex<(String, u64)>> = Arc::default();
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (seen, sampling, instance, job) = (
            seen.clone(),
            sampling.clone(),
            instance.clone(),
            job.clone(),
        );
        std::thread::spawn(move || {
            while sampling.load(std::sync::atomic::Ordering::SeqCst) {
                let s = show(&instance, "job", &job);
                if let Some(state) = s.get("JobState") {
                    let restarts = s.get("Restarts").and_then(|r| r.parse().ok()).unwrap_or(0);
                    let mut x = seen.lock().unwrap();
                    x.0 = state.clone();
                    x.1 = x.1.max(restarts);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    let t0 = Instant::now();
    let c2 = t.repo.push(&cluster_yaml(&ns, &w, "26.05"), "Slurm 26.05");
    for p in &plan {
        if let Some(wait) = p.at.checked_sub(t0.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        eprintln!(
            "[{:>5.1}s] {:?} for {:?}",
            t0.elapsed().as_secs_f64(),
            p.fault,
            p.lasts
        );
        match p.fault {
            Fault::LeaderKilled => {
                if let Some(who) = kill_leader(&mut running).await {
                    start(&mut running, &who);
                }
            }
            Fault::StandbyTakesOver => {
                let who = kill_leader(&mut running).await;
                tokio::time::sleep(p.lasts).await;
                if let Some(who) = who {
                    start(&mut running, &who);
                }
            }
            Fault::RestdGone => {
                restd.set(true);
                tokio::time::sleep(p.lasts).await;
                restd.set(false);
            }
            Fault::ApiserverGone => {
                api.set(true);
                tokio::time::sleep(p.lasts).await;
                api.set(false);
            }
            Fault::GitGone => {
                git.set(true);
                tokio::time::sleep(p.lasts).await;
                git.set(false);
            }
            Fault::StatusDeleted => {
                let cms: Api<ConfigMap> = Api::namespaced(t.env.client.clone(), &ns);
                let _ = cms
                    .delete("slurmops-status", &DeleteParams::default())
                    .await;
            }
        }
    }
    let calm = Instant::now();
    let bound = Duration::from_secs(300);
    eventually("the upgrade carried out", bound, async || {
        let ctld = sh(&["exec", &instance, "scontrol", "version"]);
        let mut done = ctld.contains("26.05");
        for n in &names {
            let s = show(&instance, "node", n);
            done &= s.get("Version").is_some_and(|v| v.starts_with("26.05"))
                && s.get("State").is_some_and(|st| {
                    st.starts_with("IDLE")
                        && !st.contains("DRAIN")
                        && !st.contains("NOT_RESPONDING")
                });
        }
        let st = status(&t.env).await;
        done &= st.is_some_and(|st| st.result == "applied" && st.last_applied_commit == c2);
        if !done {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        done.then_some(())
    })
    .await;
    let convergence = calm.elapsed();
    sampling.store(false, std::sync::atomic::Ordering::SeqCst);
    sampler.join().unwrap();
    let (state, restarts) = seen.lock().unwrap().clone();
    assert_eq!(state, "COMPLETED", "job {job} ran to its end (seed {seed})");
    assert_eq!(restarts, 0, "job {job} was not requeued (seed {seed})");
    let reasons: Vec<String> = Api::<Event>::namespaced(t.env.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    for r in ["WorkerReplaced", "Applied"] {
        assert!(
            reasons.iter().any(|x| x == r),
            "an Event {r} (seed {seed}): {reasons:?}"
        );
    }
    eprintln!(
        "upgrade campaign seed {seed}: {} faults, survived; converged {:.1} s after the last, {:.1} s after the commit",
        plan.len(),
        convergence.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    drop(running);
    sh(&["stop", &instance]);
    t.env.cleanup().await;
    convergence
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slurm_upgrade_under_random_faults_kills_no_job_and_converges() {
    seeded("upgrade campaign", 4, async |seed, n| {
        (n, run(seed, n).await)
    })
    .await;
}
