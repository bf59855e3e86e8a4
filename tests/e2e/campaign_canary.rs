//! The fault campaign over a canary rollout: tests/e2e/campaign.rs's faults (the leading daemon
//! SIGKILLed and restarted at once or after the standby took over, slurmrestd killed or silent,
//! git silent, the status ConfigMap deleted), drawn from a seed, land within 90 s of a push that
//! rolls 3 workers under a canary of one validated by a real Slurm job (canary.rs's cluster), with
//! a 40 s job running on each of the two other workers.
//!
//! Invariants: both jobs COMPLETED and never requeued; a validation job COMPLETED on the canary
//! and none FAILED; every worker replaced, IDLE and undrained; the status naming the commit
//! applied with the NodeSet rolled, within 240 s of the last fault; `CanaryPassed` and
//! `WorkerReplaced` Events. The seed is printed; `SLURMOPS_CAMPAIGN_SEED=N` runs it again,
//! `SLURMOPS_CAMPAIGN_RUNS=N` runs N (tests/bench.sh campaign).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use slurmops::slurm::SlurmNodes;

use crate::campaign::{Daemons, Faults, Seen, job, schedule, seeded};
use crate::canary::cluster;
use crate::support::daemon::{applied, status};
use crate::support::eventually;
use crate::support::gitops::{Bed, running};
use crate::support::slurm::submit_sleep;

/// The validation job's name starts so (`slurmops-canary:SET:...`).
fn validations(set: &str, jobs: &[std::sync::Arc<slurmops::slurm::Job>]) -> Vec<(u64, String)> {
    let prefix = format!("slurmops-canary:{set}:");
    jobs.iter()
        .filter(|j| j.name.starts_with(&prefix))
        .map(|j| (j.id, j.state.to_string()))
        .collect()
}

async fn run(seed: u64, n: usize) -> Duration {
    let plan = schedule(seed, n);
    eprintln!("canary campaign seed {seed} (again: SLURMOPS_CAMPAIGN_SEED={seed}): {plan:?}");
    let t = Bed::new("cmpcanary").await;
    let set = t.env.name("k");
    let ns = t.env.ns.clone();
    let validate = "{builtin: hostname, timeout: 2m}";
    let (f, git) = Faults::start(&t.url);
    let mut d = Daemons {
        t: &t,
        git,
        restd: f.restd_url(),
        running: BTreeMap::new(),
        started: 0,
    };
    let c1 = t.repo.push(&cluster(&ns, &set, "img:a", validate), "img:a");
    d.start("a");
    d.start("b");
    applied(&t.env, &c1, Duration::from_secs(120)).await;
    t.idle(&[(set.as_str(), 3)]).await;
    let before: BTreeMap<String, String> = t
        .pods(&set)
        .await
        .into_iter()
        .map(|(n, (uid, _))| (n, uid))
        .collect();
    // Jobs on two workers: the canary is the idle one; these wait for their jobs.
    let jobs = [
        submit_sleep(&format!("{set}-0"), 40).await,
        submit_sleep(&format!("{set}-2"), 40).await,
    ];
    for j in jobs {
        running(j).await;
    }
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

    let t0 = Instant::now();
    let c2 = t.repo.push(&cluster(&ns, &set, "img:b", validate), "img:b");
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
        f.inject(&mut d, p).await;
    }
    let calm = Instant::now();
    let bound = Duration::from_secs(240);
    let slurm = crate::support::slurm::client();
    eventually("the canary's rollout done", bound, async || {
        let st = status(&t.env).await?;
        let p = st.progress().into_iter().find(|p| p.node_set == set)?;
        let mut done =
            st.result == "applied" && st.last_applied_commit == c2 && p.done && p.updated == 3;
        let pods = t.pods(&set).await;
        done &= pods.len() == 3 && pods.iter().all(|(n, (uid, _))| before.get(n) != Some(uid));
        for i in 0..3 {
            let x = slurm.get(&format!("{set}-{i}")).await.ok()?;
            done &= x.state.has("IDLE") && !x.state.has("DRAIN") && !x.state.has("NOT_RESPONDING");
        }
        if !done {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        done.then_some(())
    })
    .await;
    let convergence = calm.elapsed();
    sampling.store(false, std::sync::atomic::Ordering::SeqCst);
    sampler.await.unwrap();
    for j in jobs {
        let (state, restarts) = seen.lock().unwrap().get(&j).cloned().unwrap_or_default();
        assert_eq!(state, ["COMPLETED"], "job {j} ran to its end (seed {seed})");
        assert_eq!(restarts, 0, "job {j} was not requeued (seed {seed})");
    }
    let v = validations(&set, &slurm.jobs().await.unwrap_or_default());
    assert!(
        v.iter().any(|(_, s)| s.contains("COMPLETED")),
        "a validation job COMPLETED on the canary (seed {seed}): {v:?}"
    );
    assert!(
        !v.iter().any(|(_, s)| s.contains("FAILED")),
        "no validation job FAILED (seed {seed}): {v:?}"
    );
    let reasons: Vec<String> = Api::<Event>::namespaced(t.env.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    for r in [slurmops::vocab::EVENT_CANARY_PASSED, "WorkerReplaced"] {
        assert!(
            reasons.iter().any(|x| x == r),
            "an Event {r} (seed {seed}): {reasons:?}"
        );
    }
    eprintln!(
        "canary campaign seed {seed}: {} faults, survived; converged {:.1} s after the last, {:.1} s after the change; validations {v:?}",
        plan.len(),
        convergence.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    drop(d);
    f.stop();
    t.env.cleanup().await;
    convergence
}

#[tokio::test(flavor = "multi_thread")]
async fn a_canary_rollout_under_random_faults_kills_no_job_and_converges() {
    seeded("canary campaign", 4, async |seed, n| {
        (n, run(seed, n).await)
    })
    .await;
}
