//! A fault campaign: faults at random instants while the daemon rolls a NodeSet drain-before-
//! replace and then scales it in, on the bed (the shared slurmctld, the test kubelet's slurmd per
//! pod, the real apiserver and git server). Two daemons run as an install's replicas (one leads,
//! one stands by); the test puts its own slurmrestd and a relay in front of it and of git, so its
//! faults touch nothing another test uses:
//! - the leading daemon SIGKILLed and restarted at once, or left down a while (the standby takes over);
//! - slurmrestd killed, later started again; slurmrestd answering nothing (a tarpit) a while;
//! - the git server gone (a tarpit) a while; the status ConfigMap deleted.
//!
//! A run draws its schedule from a seed (printed; `SLURMOPS_CAMPAIGN_SEED=N` runs that schedule
//! again): how many faults (`SLURMOPS_CAMPAIGN_FAULTS`, default 5), which, when (within the
//! first 90 s of the rollout) and for how long (3–25 s). After the last fault, the invariants:
//! every job that ran on the workers COMPLETED, none requeued (restart count 0); no worker left
//! drained by slurmops; the administrator's drain kept, reason and all; the cluster converged to
//! the last commit (the StatefulSet at 3 replicas, every pod on its revision and IDLE, the status
//! naming the commit applied) within 240 s; and the Events naming the drains and replacements.
//! `SLURMOPS_CAMPAIGN_RUNS=N` runs N seeds one after another (tests/bench.sh campaign); the figures
//! line is what docs/tests.md quotes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, DeleteParams, ListParams};
use slurmops::slurm::SlurmNodes;

use crate::support::daemon::{Daemon, Tarpit, applied, status};
use crate::support::gitops::Bed;
use crate::support::slurm::{sh, submit_sleep};
use crate::support::{
    bed, eventually, eventually_explained, four_workers, slurm_instance, unique_suffix,
};

/// splitmix64: the schedule a seed stands for, the same on every machine.
pub(crate) struct Rng(pub(crate) u64);
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The leading daemon SIGKILLed and started again at once.
    LeaderKilled,
    /// The leading daemon SIGKILLed and started again only when the fault ends: the standby leads.
    StandbyTakesOver,
    /// slurmrestd killed, started again when the fault ends.
    RestdKilled,
    /// slurmrestd accepts and never answers (a hung server, a black-holing network).
    RestdSilent,
    /// The git server accepts and never answers.
    GitGone,
    /// The status ConfigMap deleted (by a person, a namespace cleanup).
    StatusDeleted,
}

const FAULTS: [Fault; 6] = [
    Fault::LeaderKilled,
    Fault::StandbyTakesOver,
    Fault::RestdKilled,
    Fault::RestdSilent,
    Fault::GitGone,
    Fault::StatusDeleted,
];

#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned {
    pub(crate) at: Duration,
    pub(crate) fault: Fault,
    pub(crate) lasts: Duration,
}

/// The schedule of SEED: N faults within the first 90 s, in time order.
pub(crate) fn schedule(seed: u64, n: usize) -> Vec<Planned> {
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

pub(crate) fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The two daemons of the install, restarted under new identities' logs as the faults require.
pub(crate) struct Daemons<'a> {
    pub(crate) t: &'a Bed,
    pub(crate) git: String,
    pub(crate) restd: String,
    pub(crate) running: BTreeMap<String, Daemon>,
    pub(crate) started: usize,
}

impl Daemons<'_> {
    pub(crate) fn start(&mut self, identity: &str) {
        self.started += 1;
        // A new log per start (the identity is the Lease's; the log's name only tells starts apart).
        let log_dir = self.t.dir.path().join(format!("start-{}", self.started));
        std::fs::create_dir_all(&log_dir).unwrap();
        let d = Daemon::start_as(
            &self.t.env,
            &log_dir,
            &self.git,
            identity,
            &[
                "--interval",
                "2s",
                "--git-timeout",
                "5s",
                "--slurmrestd-url",
                &self.restd,
            ],
            &self.t.kubeconfig,
        );
        self.running.insert(identity.to_string(), d);
    }

    async fn leader(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.t.env.client.clone(), &self.t.env.ns);
        let l = leases.get_opt("slurmops-leader").await.ok()??;
        l.spec?.holder_identity
    }

    /// SIGKILLs the leader (or, with no leader known, either daemon): its identity.
    async fn kill_leader(&mut self) -> Option<String> {
        let who = match self.leader().await {
            Some(l) if self.running.contains_key(&l) => l,
            _ => self.running.keys().next()?.clone(),
        };
        drop(self.running.remove(&who));
        Some(who)
    }
}

/// What the faults act on beside the daemons: this test's own slurmrestd on the shared slurmctld,
/// its relay and git's.
pub(crate) struct Faults {
    pub(crate) restd_name: String,
    pub(crate) restd_port: u16,
    pub(crate) restd_relay: Tarpit,
    pub(crate) git_relay: Tarpit,
}

impl Faults {
    /// Starts this test's slurmrestd and the relays; the daemons' git URL for the repository URL.
    pub(crate) fn start(url: &str) -> (Faults, String) {
        let restd_name = format!("restd-{}", unique_suffix());
        let restd_port = crate::support::daemon::free_port();
        sh(&[
            "start-restd",
            slurm_instance(),
            &restd_port.to_string(),
            &restd_name,
        ]);
        let restd_relay = Tarpit::start(&format!("127.0.0.1:{restd_port}"));
        let git_upstream = bed().git.http_url.trim_start_matches("http://").to_string();
        let git_upstream = git_upstream.split('/').next().unwrap().to_string();
        let git_relay = Tarpit::start(&git_upstream);
        let git = url.replacen(&git_upstream, &git_relay.addr.to_string(), 1);
        (
            Faults {
                restd_name,
                restd_port,
                restd_relay,
                git_relay,
            },
            git,
        )
    }

    pub(crate) fn restd_url(&self) -> String {
        format!("http://{}", self.restd_relay.addr)
    }

    /// Injects P and, for one that lasts, ends it.
    pub(crate) async fn inject(&self, d: &mut Daemons<'_>, p: &Planned) {
        let inst = slurm_instance();
        let (restd_name, restd_port) = (&self.restd_name, self.restd_port);
        let (restd_relay, git_relay, t, ns) =
            (&self.restd_relay, &self.git_relay, d.t, &d.t.env.ns);
        match p.fault {
            Fault::LeaderKilled => {
                if let Some(who) = d.kill_leader().await {
                    d.start(&who);
                }
            }
            Fault::StandbyTakesOver => {
                let who = d.kill_leader().await;
                tokio::time::sleep(p.lasts).await;
                if let Some(who) = who {
                    d.start(&who);
                }
            }
            Fault::RestdKilled => {
                sh(&["stop-restd", inst, restd_name]);
                tokio::time::sleep(p.lasts).await;
                sh(&["start-restd", inst, &restd_port.to_string(), restd_name]);
            }
            Fault::RestdSilent => {
                restd_relay.set(true);
                tokio::time::sleep(p.lasts).await;
                restd_relay.set(false);
            }
            Fault::GitGone => {
                git_relay.set(true);
                tokio::time::sleep(p.lasts).await;
                git_relay.set(false);
            }
            Fault::StatusDeleted => {
                let cms: Api<ConfigMap> = Api::namespaced(t.env.client.clone(), ns);
                let _ = cms
                    .delete("slurmops-status", &DeleteParams::default())
                    .await;
            }
        }
    }

    pub(crate) fn stop(&self) {
        sh(&["stop-restd", slurm_instance(), &self.restd_name]);
    }
}

/// Job ID's state and restart count, from slurmrestd.
pub(crate) async fn job(id: u64) -> (Vec<String>, u64) {
    let b = bed();
    let resp: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/slurm/v0.0.42/job/{id}", b.slurmrestd_url))
        .header("X-SLURM-USER-TOKEN", &b.slurm_jwt)
        .send()
        .await
        .expect("get job")
        .json()
        .await
        .expect("job answer");
    let j = &resp["jobs"][0];
    (
        serde_json::from_value(j["job_state"].clone()).unwrap_or_default(),
        j["restart_cnt"].as_u64().unwrap_or(0),
    )
}

/// Each job's last state seen and its highest restart count.
pub(crate) type Seen = std::sync::Arc<std::sync::Mutex<BTreeMap<u64, (Vec<String>, u64)>>>;

/// What one run found.
pub(crate) struct Outcome {
    faults: usize,
    convergence: Duration,
}

async fn run(seed: u64, n: usize) -> Outcome {
    let plan = schedule(seed, n);
    eprintln!("campaign seed {seed} (again: SLURMOPS_CAMPAIGN_SEED={seed}): {plan:?}");
    let t = Bed::new("campaign").await;
    let w = t.env.name("f");
    let ns = t.env.ns.clone();
    let sets = [(w.as_str(), 4)];
    // This test's own slurmrestd (on the shared slurmctld), and relays that can turn into tarpits.
    let inst = slurm_instance();
    let (f, git) = Faults::start(&t.url);
    let mut d = Daemons {
        t: &t,
        git,
        restd: f.restd_url(),
        running: BTreeMap::new(),
        started: 0,
    };

    let v1 = four_workers(&ns, &w, "registry.example/slurmd:a");
    let c1 = t.repo.push(&v1, "four workers");
    d.start("a");
    d.start("b");
    applied(&t.env, &c1, Duration::from_secs(120)).await;
    t.idle(&sets).await;
    // An administrator's drain, which nothing may undo; two jobs that must run to their end.
    let admin = format!("{w}-1");
    sh(&[
        "exec",
        inst,
        "scontrol",
        "update",
        &format!("nodename={admin}"),
        "state=drain",
        "reason=disk check by admin",
    ]);
    let jobs = [
        submit_sleep(&format!("{w}-0"), 40).await,
        submit_sleep(&format!("{w}-2"), 40).await,
    ];
    for j in jobs {
        crate::support::gitops::running(j).await;
    }
    // What the jobs go through, sampled every second (a finished job leaves slurmctld's memory
    // after MinJobAge): the last state seen, and whether it was ever requeued.
    let seen: Seen = Default::default();
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (seen, sampling) = (seen.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(std::sync::atomic::Ordering::SeqCst) {
                for j in jobs {
                    let (state, restarts) = job(j).await;
                    if !state.is_empty() {
                        let mut s = seen.lock().unwrap();
                        let e = s.entry(j).or_default();
                        e.1 = e.1.max(restarts);
                        e.0 = state;
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    // The change: a new image (drain-before-replace), then a scale-in to 3, while faults land.
    let t0 = Instant::now();
    let v2 = four_workers(&ns, &w, "registry.example/slurmd:b");
    t.repo.push(&v2, "new image");
    let faults = {
        let mut done = 0;
        let mut pushed_v3 = None;
        let v3 = v2.replace("replicas: 4", "replicas: 3");
        for p in &plan {
            if pushed_v3.is_none() && t0.elapsed() >= Duration::from_secs(20) {
                pushed_v3 = Some(t.repo.push(&v3, "three workers"));
            }
            if let Some(wait) = p.at.checked_sub(t0.elapsed()) {
                tokio::time::sleep(wait).await;
            }
            if pushed_v3.is_none() && t0.elapsed() >= Duration::from_secs(20) {
                pushed_v3 = Some(t.repo.push(&v3, "three workers"));
            }
            eprintln!(
                "[{:>5.1}s] {:?} for {:?}",
                t0.elapsed().as_secs_f64(),
                p.fault,
                p.lasts
            );
            f.inject(&mut d, p).await;
            done += 1;
        }
        if pushed_v3.is_none() {
            tokio::time::sleep(Duration::from_secs(20).saturating_sub(t0.elapsed())).await;
            pushed_v3 = Some(t.repo.push(&v3, "three workers"));
        }
        (done, pushed_v3.unwrap())
    };
    let (injected, c3) = faults;
    let calm = Instant::now();

    // Converged: the last commit applied, 3 workers on the StatefulSet's revision, each IDLE (the
    // administrator's still drained, by the administrator), none drained by slurmops.
    let bound = Duration::from_secs(240);
    applied(&t.env, &c3, bound).await;
    let slurm = crate::support::slurm::client();
    eventually_explained(
        "the NodeSet converged on the last commit",
        bound,
        async || converged(&t, &w, &slurm).await,
    )
    .await;
    // The status says so too (a fetch that failed during the last fault is tried again).
    eventually(
        "the status to say the last commit is applied",
        bound,
        async || {
            let st = status(&t.env).await?;
            if st.result == "applied" && st.last_applied_commit == c3 {
                return Some(());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            None
        },
    )
    .await;
    let convergence = calm.elapsed();
    sampling.store(false, std::sync::atomic::Ordering::SeqCst);
    sampler.await.unwrap();
    for j in jobs {
        let (state, restarts) = seen.lock().unwrap().get(&j).cloned().unwrap_or_default();
        assert_eq!(state, ["COMPLETED"], "job {j} ran to its end (seed {seed})");
        assert_eq!(restarts, 0, "job {j} was not requeued (seed {seed})");
    }
    let st = status(&t.env)
        .await
        .expect("the status ConfigMap, made again");
    assert_eq!(st.last_applied_commit, c3, "seed {seed}");
    assert_eq!(st.result, "applied", "seed {seed}: {}", st.errors);
    let events: Api<Event> = Api::namespaced(t.env.client.clone(), &ns);
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    for r in ["Draining", "WorkerReplaced", "Applied"] {
        assert!(
            reasons.iter().any(|x| x == r),
            "an Event {r} (seed {seed}): {reasons:?}"
        );
    }
    eprintln!(
        "campaign seed {seed}: {injected} faults, survived; converged {:.1} s after the last, {:.1} s after the change",
        convergence.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    drop(d);
    f.stop();
    t.env.cleanup().await;
    Outcome {
        faults: injected,
        convergence,
    }
}

/// Whether NodeSet SET converged on the last commit of a campaign (4 workers rolled, then scaled in
/// to 3): the StatefulSet at 3, each pod on its update revision and Ready; SET-0 and SET-2 IDLE,
/// neither drained nor NOT_RESPONDING; SET-1 still drained by the administrator, with their reason
/// (on the bed its new slurmd serves another port than the record's — a real pod keeps 6818 and
/// slurmctld takes its new address — so it may stay NOT_RESPONDING here: its drain and reason are
/// what count); SET-3 gone or going. Err: what it saw, the daemon's status and the test kubelet's
/// last events (a CI log that tells a slow convergence from a stuck one).
pub(crate) async fn converged(
    t: &Bed,
    set: &str,
    slurm: &slurmops::slurm::Client,
) -> Result<(), String> {
    let sts: Api<StatefulSet> = Api::namespaced(t.env.client.clone(), &t.env.ns);
    let s = sts.get(set).await.map_err(|e| e.to_string())?;
    let (spec, st) = (s.spec.unwrap_or_default(), s.status.unwrap_or_default());
    let pods = t.pods(set).await;
    // Workers roll OnDelete (slurmops deletes each pod once drained): the StatefulSet never
    // moves currentRevision on; every pod on updateRevision is what counts.
    let mut settled = spec.replicas == Some(3)
        && st.replicas == 3
        && st.updated_replicas == Some(3)
        && st.ready_replicas == Some(3)
        && pods.len() == 3;
    let mut seen = format!(
        "StatefulSet {set}: spec {:?}, {} replicas, {:?} updated, {:?} ready (update revision {:?}); pods {pods:?}",
        spec.replicas, st.replicas, st.updated_replicas, st.ready_replicas, st.update_revision
    );
    for i in 0..4 {
        let w = format!("{set}-{i}");
        let x = match slurm.get(&w).await {
            Ok(x) => x,
            Err(e) => {
                seen += &format!("\n{w}: {e}");
                settled &= i == 3;
                continue;
            }
        };
        seen += &format!("\n{w}: {:?} reason {:?}", x.state, x.reason);
        settled &= match i {
            1 => x.state.has("DRAIN") && x.reason == "disk check by admin",
            3 => true,
            _ => x.state.has("IDLE") && !x.state.has("DRAIN") && !x.state.has("NOT_RESPONDING"),
        };
    }
    if settled {
        return Ok(());
    }
    let st = format!("{:?}", status(&t.env).await);
    seen += &format!("\nthe daemon's status: {}", st.get(..4000).unwrap_or(&st));
    let ev = t.env.kubelet.events();
    seen += &format!(
        "\nthe test kubelet's last events: {:?}",
        &ev[ev.len().saturating_sub(12)..]
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    Err(seen)
}

/// Runs the campaign RUN (a seed, its fault count: the faults it injected and its convergence
/// after the last) for `SLURMOPS_CAMPAIGN_RUNS` seeds (default 1), the first
/// `SLURMOPS_CAMPAIGN_SEED` or drawn from the clock, `SLURMOPS_CAMPAIGN_FAULTS` faults each
/// (default DEFAULT), and prints WHAT's figures line (what docs/benchmarks.md quotes).
pub(crate) async fn seeded(
    what: &str,
    default: u64,
    mut run: impl AsyncFnMut(u64, usize) -> (usize, Duration),
) {
    let runs = env_u64("SLURMOPS_CAMPAIGN_RUNS").unwrap_or(1);
    let n = env_u64("SLURMOPS_CAMPAIGN_FAULTS").unwrap_or(default) as usize;
    let first = env_u64("SLURMOPS_CAMPAIGN_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let mut seeds = Rng(first);
    let mut took = Vec::new();
    let mut faults = 0;
    for i in 0..runs {
        let seed = if i == 0 { first } else { seeds.next() };
        let (f, convergence) = run(seed, n).await;
        faults += f;
        took.push(convergence.as_secs_f64());
    }
    took.sort_by(f64::total_cmp);
    let at = |q: f64| took[((took.len() as f64 - 1.0) * q).round() as usize];
    eprintln!(
        "{what}: {runs} runs, faults injected {faults}, survived {faults}, jobs lost 0, convergence after the last fault p50 {:.1} s, p99 {:.1} s",
        at(0.5),
        at(0.99)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_and_a_scale_in_under_random_faults_kill_no_job_and_converge() {
    seeded("campaign", 5, async |seed, n| {
        let o = run(seed, n).await;
        (o.faults, o.convergence)
    })
    .await;
}

#[test]
fn a_seed_stands_for_one_schedule() {
    let a = schedule(42, 5);
    assert_eq!(format!("{a:?}"), format!("{:?}", schedule(42, 5)));
    assert_ne!(format!("{a:?}"), format!("{:?}", schedule(43, 5)));
    assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
    assert!(
        a.iter()
            .all(|p| p.at < Duration::from_secs(90) && (3..26).contains(&p.lasts.as_secs()))
    );
}
