//! The fault campaign on high-availability controllers: `examples/ha/cluster.yaml` (a primary
//! slurmctld and one backup sharing their state) in Slurm of the test's own, its workers rolled
//! drain-before-replace and then scaled in by two daemons (one leads, one stands by), while faults
//! from a seeded schedule land (tests/e2e/campaign.rs draws the schedules and runs the shared
//! Slurm's campaign; here the faults that need controllers of the test's own):
//! - slurmctld in control hung (SIGSTOP) for 3–25 s and then goes on (SIGCONT), within
//!   SlurmctldTimeout (30 s): clients and the daemons wait, nothing moves to the backup;
//! - slurmctld in control hung and then killed (SIGKILL), no sooner than 6 s after it last went
//!   on (what it acknowledged is in its state directory by then): the backup takes control after
//!   SlurmctldTimeout; the dead controller's pod starts again 35–57 s after (a kubelet's restart)
//!   and takes control back through the hand-back;
//! - etcd and the apiserver crashed (SIGKILL) and started again 3–25 s later on etcd's data: the
//!   test runs on a control plane of its own (tests/bed/kube.sh), the daemons, the test kubelet
//!   and the StatefulSet controller all its clients;
//! - the leading daemon SIGKILLed, restarted at once or after the standby took over; slurmrestd
//!   killed; the status ConfigMap deleted.
//!
//! The invariants are campaign.rs's: every job that ran on the workers COMPLETED, none requeued;
//! no worker left drained by slurmops; the administrator's drain kept; the last commit applied
//! (3 workers, each on its revision and IDLE; the status says so) within 240 s of the last fault;
//! Events naming the drains and replacements. The seed is printed, `SLURMOPS_CAMPAIGN_SEED=N`
//! runs it again, `SLURMOPS_CAMPAIGN_RUNS=N` runs N (tests/bench.sh campaign).

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, DeleteParams, ListParams};
use slurmops::cluster::load;
use slurmops::render::render;
use slurmops::slurm::SlurmNodes;

use crate::campaign::{Rng, converged, seeded};
use crate::ha::ha_overlay;
use crate::support::control_plane::ControlPlane;
use crate::support::daemon::{Daemon, applied, status};
use crate::support::gitops::Bed;
use crate::support::slurm::{sh, slurmd_port, start_ctld, start_ctld_pod, start_restd};
use crate::support::{OwnSlurm, TestEnv, bed, eventually, eventually_explained, slurm_release};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// slurmctld in control stopped (SIGSTOP) and continued (SIGCONT) within SlurmctldTimeout.
    CtldHung,
    /// slurmctld in control stopped, then killed: the backup takes control; its pod comes back.
    CtldDies,
    /// etcd and the apiserver killed, started again when the fault ends.
    ApiserverRestarted,
    /// The leading daemon SIGKILLed and started again at once.
    LeaderKilled,
    /// The leading daemon SIGKILLed, started again when the fault ends: the standby leads.
    StandbyTakesOver,
    /// slurmrestd killed, started again when the fault ends.
    RestdKilled,
    /// The status ConfigMap deleted.
    StatusDeleted,
}

const FAULTS: [Fault; 7] = [
    Fault::CtldHung,
    Fault::CtldDies,
    Fault::ApiserverRestarted,
    Fault::LeaderKilled,
    Fault::StandbyTakesOver,
    Fault::RestdKilled,
    Fault::StatusDeleted,
];

#[derive(Debug, Clone, Copy)]
struct Planned {
    at: Duration,
    fault: Fault,
    lasts: Duration,
}

/// The schedule of SEED: N faults within the first 90 s, in time order; each of the first two
/// faults a controller fault, so that every run hangs or kills slurmctld at least once.
fn schedule(seed: u64, n: usize) -> Vec<Planned> {
    let mut r = Rng(seed);
    let mut out: Vec<Planned> = (0..n)
        .map(|i| Planned {
            at: Duration::from_secs(r.below(90)),
            fault: match i {
                0 | 1 => FAULTS[r.below(2) as usize],
                _ => FAULTS[r.below(FAULTS.len() as u64) as usize],
            },
            lasts: Duration::from_secs(3 + r.below(23)),
        })
        .collect();
    out.sort_by_key(|p| p.at);
    out
}

/// A TCP relay that can be cut: every connection through it closed at once and new ones closed
/// as they come, until it is joined again (a restarting server, seen from its clients).
pub(crate) struct Cut {
    pub(crate) addr: SocketAddr,
    state: Arc<Mutex<(bool, Vec<TcpStream>)>>,
}

impl Cut {
    pub(crate) fn start(upstream: &str) -> Cut {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state: Arc<Mutex<(bool, Vec<TcpStream>)>> = Arc::default();
        let (shared, upstream) = (state.clone(), upstream.to_string());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if shared.lock().unwrap().0 {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                {
                    let mut s = shared.lock().unwrap();
                    s.1.retain(|c| c.peer_addr().is_ok());
                    s.1.push(client.try_clone().unwrap());
                    s.1.push(server.try_clone().unwrap());
                }
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Cut { addr, state }
    }

    pub(crate) fn set(&self, cut: bool) {
        let mut s = self.state.lock().unwrap();
        s.0 = cut;
        if cut {
            for c in s.1.drain(..) {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// The two daemons of the install.
struct Daemons<'a> {
    t: &'a Bed,
    kubeconfig: std::path::PathBuf,
    restd: String,
    running: BTreeMap<String, Daemon>,
    started: usize,
    /// Each running daemon's log directory (a failing run shows the others' logs).
    current: BTreeMap<String, std::path::PathBuf>,
}

/// A failing run shows the end of the log of every daemon that was killed in it (a running one
/// shows its own): which of them acted on what, and what the survivor found.
impl Drop for Daemons<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for n in 1..=self.started {
            let dir = self.t.dir.path().join(format!("start-{n}"));
            if self.current.values().any(|d| *d == dir) {
                continue;
            }
            for f in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let log = std::fs::read_to_string(f.path()).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                let tail = &lines[lines.len().saturating_sub(40)..];
                eprintln!(
                    "--- a killed daemon's last log lines ({}):\n{}",
                    f.path().display(),
                    tail.join("\n")
                );
            }
        }
    }
}

impl Daemons<'_> {
    fn start(&mut self, identity: &str) {
        self.started += 1;
        let log_dir = self.t.dir.path().join(format!("start-{}", self.started));
        std::fs::create_dir_all(&log_dir).unwrap();
        let d = Daemon::start_as(
            &self.t.env,
            &log_dir,
            &self.t.url,
            identity,
            &["--interval", "2s", "--slurmrestd-url", &self.restd],
            &self.kubeconfig,
        );
        self.running.insert(identity.to_string(), d);
        self.current.insert(identity.to_string(), log_dir);
    }

    async fn kill_leader(&mut self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.t.env.client.clone(), &self.t.env.ns);
        let leader = leases
            .get_opt("slurmops-leader")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity);
        let who = match leader {
            Some(l) if self.running.contains_key(&l) => l,
            _ => self.running.keys().next()?.clone(),
        };
        drop(self.running.remove(&who));
        self.current.remove(&who);
        Some(who)
    }
}

/// What slurmctld of INSTANCE says of its nodes and of JOBS, for a failing wait: each node's
/// state, address and port (where its pings go), each job's state and nodes.
fn slurm_view(instance: &str, jobs: &[String]) -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("bash")
            .args(["tests/bed/slurm.sh", "exec", instance])
            .args(args)
            .output()
            .map(|o| {
                let mut out = String::from_utf8_lossy(&o.stdout).into_owned();
                out.push_str(&String::from_utf8_lossy(&o.stderr));
                out
            })
            .unwrap_or_else(|e| e.to_string())
    };
    let keep = |line: &str, keys: &[&str]| {
        line.split_whitespace()
            .filter(|w| keys.iter().any(|k| w.starts_with(k)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = String::from("slurmctld's view:\n");
    for l in run(&["scontrol", "-o", "show", "node"]).lines() {
        out += &keep(
            l,
            &[
                "NodeName=",
                "NodeAddr=",
                "Port=",
                "State=",
                "Reason=",
                "SlurmdStartTime=",
                "LastBusyTime=",
            ],
        );
        out.push('\n');
    }
    for j in jobs {
        for l in run(&["scontrol", "-o", "show", "job", j]).lines() {
            out += &keep(
                l,
                &[
                    "JobId=",
                    "JobState=",
                    "Reason=",
                    "NodeList=",
                    "EndTime=",
                    "Restarts=",
                ],
            );
            out.push('\n');
        }
    }
    out += &run(&["scontrol", "ping"]);
    out
}

/// Job ID's state and restart count, from `scontrol` of INSTANCE: `VANISHED` when slurmctld
/// answers that it knows no such job, empty when it did not answer.
fn job(instance: &str, id: &str) -> (String, u64) {
    let Ok(o) = std::process::Command::new("bash")
        .args([
            "tests/bed/slurm.sh",
            "exec",
            instance,
            "scontrol",
            "-o",
            "show",
            "job",
            id,
        ])
        .output()
    else {
        return Default::default();
    };
    if String::from_utf8_lossy(&o.stderr).contains("Invalid job id") {
        return ("VANISHED".into(), 0);
    }
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let field = |k: &str| {
        out.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k))
            .unwrap_or_default()
            .to_string()
    };
    (field("JobState="), field("Restarts=").parse().unwrap_or(0))
}

/// The HA example on RELEASE in NS with four workers of IMAGE rolled one at a time.
fn cluster(release: &str, ns: &str, image: &str, replicas: u32) -> String {
    let text = std::fs::read_to_string("examples/ha/cluster.yaml")
        .unwrap()
        .replace(
            "slurmVersion: \"24.11\"",
            &format!("slurmVersion: \"{release}\""),
        )
        .replace("namespace: slurm\n", &format!("namespace: {ns}\n"));
    let workers = "    - name: cpu\n      replicas: 2\n      cpu: \"2\"\n      memory: 1Gi\n";
    assert!(text.contains(workers), "the HA example's workers");
    text.replace(
        workers,
        &format!(
            "    - name: cpu\n      replicas: {replicas}\n      cpu: \"1\"\n      memory: 256Mi\n      image: {image}\n      update: {{maxUnavailable: 1}}\n"
        ),
    )
}

struct Outcome {
    faults: usize,
    convergence: Duration,
}

async fn run(seed: u64, n: usize) -> Outcome {
    let plan = schedule(seed, n);
    eprintln!("controllers campaign seed {seed} (again: SLURMOPS_CAMPAIGN_SEED={seed}): {plan:?}");
    let release = slurm_release();
    let instance = format!("cc{}", &crate::support::unique_suffix()[..4]);
    let (ctld_port, restd_port) = (slurmd_port(), slurmd_port());
    let confs = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    let cp = ControlPlane::start();
    let env = TestEnv::with_own_slurm_on(&cp, "cmpctld", |ns| {
        let c = load(
            "cluster.yaml",
            &cluster(release, ns, "registry.example/slurmd:a", 4),
        )
        .unwrap_or_else(|d| panic!("{d:?}"));
        let (files, controllers) = ha_overlay(&c, &render(&c), &instance, ctld_port, 7);
        let dir = confs.path().join(release);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, content) in &files {
            std::fs::write(dir.join(name), content).unwrap();
        }
        start_ctld(&instance, release, &dir);
        names = controllers.iter().map(|(n, _)| n.clone()).collect();
        OwnSlurm {
            instance: instance.clone(),
            ctld_port,
            restd_port,
            confs: BTreeMap::from([(release.to_string(), dir)]),
            controllers,
            pull: Duration::from_secs(2),
        }
    })
    .await;
    let (primary, backup) = (names[0].clone(), names[1].clone());
    env.state_claim("slurmctld-state-rwx", "ReadWriteMany")
        .await;
    let ns = env.ns.clone();
    let t = Bed::with(env).await;
    // The daemons reach slurmrestd through a relay.
    let kubeconfig = t.kubeconfig.clone();
    let restd_relay = Cut::start(&format!("127.0.0.1:{restd_port}"));
    let mut d = Daemons {
        t: &t,
        kubeconfig,
        restd: format!("http://{}", restd_relay.addr),
        running: BTreeMap::new(),
        started: 0,
        current: BTreeMap::new(),
    };
    let slurm = slurmops::slurm::Client::new(slurmops::slurm::Config::new(
        format!("http://127.0.0.1:{restd_port}"),
        slurmops::slurm::auth::Credentials::Token {
            token: slurmops::slurm::auth::Secret::new(bed().slurm_jwt.clone()),
            user: None,
        },
    ))
    .unwrap();

    let c1 = t.repo.push(
        &cluster(release, &ns, "registry.example/slurmd:a", 4),
        "four workers",
    );
    d.start("a");
    d.start("b");
    applied(&t.env, &c1, Duration::from_secs(180)).await;
    // Each controller pod's reconfigure sidecar, as rendered (the hand-back's other half).
    for name in [&primary, &backup] {
        sh(&["start-ctld-sidecar", &instance, name]);
    }
    let workers = ["cpu-0", "cpu-1", "cpu-2", "cpu-3"];
    for w in workers {
        eventually(&format!("{w} idle"), Duration::from_secs(120), async || {
            let x = slurm.get(w).await.ok()?;
            (x.state.has("IDLE") && !x.state.has("NOT_RESPONDING")).then_some(())
        })
        .await;
    }
    // An administrator's drain, which nothing may undo; two jobs that must run to their end.
    sh(&[
        "exec",
        &instance,
        "scontrol",
        "update",
        "nodename=cpu-1",
        "state=drain",
        "reason=disk check by admin",
    ]);
    let sbatch = |node: &str| {
        sh(&[
            "exec",
            &instance,
            "sbatch",
            "--parsable",
            "-p",
            "debug",
            "-w",
            node,
            "-n1",
            "-c1",
            "--mem=100M",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 40",
        ])
        .trim()
        .to_string()
    };
    // No job can end before 40 s after this (its sleep starts after its submission).
    let submitted = Instant::now();
    let jobs = [sbatch("cpu-0"), sbatch("cpu-2")];
    for j in &jobs {
        eventually(
            &format!("job {j} running"),
            Duration::from_secs(60),
            async || (job(&instance, j).0 == "RUNNING").then_some(()),
        )
        .await;
    }
    // slurmctld writes what changed to its state directory within 5 s (SAVE_MAX_WAIT): a job a
    // controller that dies sooner started is lost with it, with or without slurmops (seen here:
    // the backup found no job state). The faults begin once the jobs are saved.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let seen: Arc<Mutex<BTreeMap<String, (String, u64)>>> = Arc::default();
    // When the sampler first saw each job no longer running.
    let ended: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (seen, ended, sampling, jobs, instance) = (
            seen.clone(),
            ended.clone(),
            sampling.clone(),
            jobs.clone(),
            instance.clone(),
        );
        std::thread::spawn(move || {
            while sampling.load(std::sync::atomic::Ordering::SeqCst) {
                for j in &jobs {
                    let (state, restarts) = job(&instance, j);
                    if !state.is_empty() {
                        let mut s = seen.lock().unwrap();
                        let e = s.entry(j.clone()).or_default();
                        // A finished job leaves slurmctld's memory after MinJobAge.
                        if state == "VANISHED" && e.0 == "COMPLETED" {
                            continue;
                        }
                        e.1 = e.1.max(restarts);
                        if !matches!(state.as_str(), "RUNNING" | "PENDING") {
                            ended
                                .lock()
                                .unwrap()
                                .entry(j.clone())
                                .or_insert_with(Instant::now);
                        }
                        e.0 = state;
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    // The change: a new image (drain-before-replace), then the scale-in to 3, while faults land.
    let t0 = Instant::now();
    t.repo.push(
        &cluster(release, &ns, "registry.example/slurmd:b", 4),
        "new image",
    );
    let v3 = cluster(release, &ns, "registry.example/slurmd:b", 3);
    let mut c3 = None;
    let mut injected = 0;
    // When the controller in control last went on (continued, or started and took control).
    // slurmctld writes what it acknowledged to its state directory within 5 s (SAVE_MAX_WAIT),
    // as for the jobs above: one that dies sooner loses it, with or without slurmops — seen
    // here: a job's completion, acknowledged in the 0.2 s between a hang's end and the next
    // fault's stop, was gone from the state the backup took over, and the job stayed RUNNING
    // on a node whose slurmd had finished it (until Slurm asks the node to register again,
    // every 20 pings: 33 minutes). So a controller is killed no sooner than 6 s after it went on.
    let mut went_on: Option<Instant> = None;
    for p in &plan {
        if let Some(wait) = p.at.checked_sub(t0.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        if c3.is_none() && t0.elapsed() >= Duration::from_secs(20) {
            c3 = Some(t.repo.push(&v3, "three workers"));
        }
        eprintln!(
            "[{:>5.1}s] {:?} for {:?}",
            t0.elapsed().as_secs_f64(),
            p.fault,
            p.lasts
        );
        match p.fault {
            Fault::CtldHung => {
                sh(&["pause-ctld", &instance, &primary]);
                tokio::time::sleep(p.lasts).await;
                sh(&["resume-ctld", &instance, &primary]);
                went_on = Some(Instant::now());
            }
            Fault::CtldDies => {
                if let Some(at) = went_on {
                    let saved = at + Duration::from_secs(6);
                    tokio::time::sleep(saved.saturating_duration_since(Instant::now())).await;
                }
                // A job's end is a change too: seen in CI, a job that ended 1 s before its
                // controller stopped stayed RUNNING in the backup's state. So no controller dies
                // from 2 s before a job can end until 6 s after its end was seen (bounded: a
                // job already lost is the failure the assertions below report).
                let quiet_by = Instant::now() + Duration::from_secs(90);
                while Instant::now() < quiet_by {
                    let now = Instant::now();
                    let ended = ended.lock().unwrap().clone();
                    let saving = jobs.iter().any(|j| match ended.get(j) {
                        Some(at) => now < *at + Duration::from_secs(6),
                        None => now + Duration::from_secs(2) >= submitted + Duration::from_secs(40),
                    });
                    if !saving {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                sh(&["pause-ctld", &instance, &primary]);
                tokio::time::sleep(Duration::from_secs(3)).await;
                sh(&["crash-ctld", &instance, &primary]);
                // The backup takes control after SlurmctldTimeout (30 s); the pod comes back later.
                tokio::time::sleep(Duration::from_secs(32) + p.lasts).await;
                // The backup's sidecar runs (a pod's container kept running by its kubelet).
                sh(&["stop-sidecar", &instance, &format!("reconfigure-{backup}")]);
                sh(&["start-ctld-sidecar", &instance, &backup]);
                let (i, pr) = (instance.clone(), primary.clone());
                let back = tokio::task::spawn_blocking(move || start_ctld_pod(&i, release, &pr))
                    .await
                    .unwrap();
                assert!(
                    back,
                    "seed {seed}: the primary's pod started again and answers"
                );
                // The hand-back had the backup save and stop; its pod starts it again once it
                // has exited (a kubelet restarting the container), the standby again.
                eventually(
                    &format!("seed {seed}: the backup started again, in standby"),
                    Duration::from_secs(90),
                    async || {
                        let (i, b) = (instance.clone(), backup.clone());
                        let up =
                            tokio::task::spawn_blocking(move || start_ctld_pod(&i, release, &b))
                                .await
                                .unwrap();
                        if !up {
                            tokio::time::sleep(Duration::from_secs(2)).await;
                        }
                        up.then_some(())
                    },
                )
                .await;
                went_on = Some(Instant::now());
            }
            Fault::ApiserverRestarted => {
                let cp = &cp;
                tokio::task::block_in_place(|| cp.restart(p.lasts));
            }
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
                sh(&["stop-restd", &instance, "slurmrestd"]);
                tokio::time::sleep(p.lasts).await;
                let i = instance.clone();
                let up = tokio::task::spawn_blocking(move || start_restd(&i, release, restd_port))
                    .await
                    .unwrap();
                assert!(up, "seed {seed}: slurmrestd started again");
            }
            Fault::StatusDeleted => {
                let cms: Api<ConfigMap> = Api::namespaced(t.env.client.clone(), &ns);
                let _ = cms
                    .delete("slurmops-status", &DeleteParams::default())
                    .await;
            }
        }
        injected += 1;
    }
    if c3.is_none() {
        tokio::time::sleep(Duration::from_secs(20).saturating_sub(t0.elapsed())).await;
        c3 = Some(t.repo.push(&v3, "three workers"));
    }
    let c3 = c3.unwrap();
    let calm = Instant::now();

    let bound = Duration::from_secs(240);
    applied(&t.env, &c3, bound).await;
    eventually_explained(
        "the workers converged on the last commit",
        bound,
        async || {
            converged(&t, "cpu", &slurm).await.map_err(|seen| {
                let i = instance.clone();
                format!("{seen}\n{}", slurm_view(&i, &jobs))
            })
        },
    )
    .await;
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
    sampler.join().unwrap();
    for j in &jobs {
        let (state, restarts) = seen.lock().unwrap().get(j).cloned().unwrap_or_default();
        assert_eq!(state, "COMPLETED", "job {j} ran to its end (seed {seed})");
        assert_eq!(restarts, 0, "job {j} was not requeued (seed {seed})");
    }
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
        "controllers campaign seed {seed}: {injected} faults, survived; converged {:.1} s after the last, {:.1} s after the change",
        convergence.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    drop(d);
    sh(&["stop", &instance]);
    t.env.cleanup().await;
    Outcome {
        faults: injected,
        convergence,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hung_and_dying_controllers_and_a_restarted_apiserver_during_a_rollout_kill_no_job_and_converge()
 {
    seeded("controllers campaign", 4, async |seed, n| {
        let o = run(seed, n).await;
        (o.faults, o.convergence)
    })
    .await;
}

#[test]
fn every_schedule_hangs_or_kills_the_controller() {
    for seed in 0..50 {
        let s = schedule(seed, 4);
        assert!(
            s.iter()
                .filter(|p| matches!(p.fault, Fault::CtldHung | Fault::CtldDies))
                .count()
                >= 2,
            "{s:?}"
        );
    }
}
