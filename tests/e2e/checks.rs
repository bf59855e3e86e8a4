//! Active checks end to end (`policy.activeChecks`): the daemon follows a repository on the
//! bed's git server against the bed's real slurmctld and slurmrestd, with a real slurmd per
//! worker pod (the test kubelet). The checks are stand-in scripts — one slow that passes with
//! a figure, one whose figure is too low on one worker, one that hangs on another — run as real
//! Slurm jobs on the workers.
//!
//! What a user relies on: a new worker takes no user's job before its checks passed; never more
//! than `maxConcurrent` jobs of a check run at once; a failing check drains its worker with the
//! check's name, the job and the figure, a hanging one is cancelled at its timeout and counts as
//! failed; the results are on the pods, in status and in Events; a scheduled run never lands on
//! a worker that runs a user's job, which keeps running; a check across nodes runs one job over
//! its workers and a failure drains them all.

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use slurmops::slurm::SlurmNodes;

use crate::support::daemon::{applied, status};
use crate::support::eventually;
use crate::support::gitops::Bed;
use crate::support::slurm::submit_sleep;

/// One NodeSet SET of REPLICAS small workers in partition `all`, checked by CHECKS (YAML list
/// items under `activeChecks:`).
fn cluster(ns: &str, set: &str, replicas: u32, checks: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  policy:
    activeChecks:
{checks}  nodeSets:
    - name: {set}
      replicas: {replicas}
      cpu: "1"
      memory: 256Mi
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
        )
}

/// Three checks on every new worker: `slow` passes in 4 s with figure 42 (at most 2 at once)
/// after trying to drain its own worker (a check job holds no administrator's rights), `figure`
/// prints 5 on worker 1 (10 needed), `hang` sleeps past its 15 s timeout on worker 3.
const REGISTER_CHECKS: &str = r#"      - name: slow
        script: |
          scontrol update NodeName="$SLURMD_NODENAME" State=DRAIN Reason=drained-by-its-check >/dev/null 2>&1
          sleep 4; echo slurmops-value: 42
        minValue: 10
        unit: GB/s
        maxConcurrent: 2
      - name: figure
        script: |
          case "$SLURMD_NODENAME" in *-1) echo "slurmops-value: 5" ;; *) echo "slurmops-value: 50" ;; esac
        minValue: 10
        unit: GB/s
        maxConcurrent: 5
      - name: hang
        script: |
          case "$SLURMD_NODENAME" in *-3) sleep 600 ;; esac
        timeout: 15s
        maxConcurrent: 5
"#;

/// The check condition CHECK of pod POD: (status, message).
async fn condition(env: &support::TestEnv, pod: &str, check: &str) -> Option<(String, String)> {
    let p = Api::<Pod>::namespaced(env.client.clone(), &env.ns)
        .get(pod)
        .await
        .ok()?;
    let ty = format!("{}{check}", slurmops::vocab::CONDITION_CHECK_PREFIX);
    p.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == ty)
        .map(|c| (c.status, c.message.unwrap_or_default()))
}

on_each_slurm! {
async fn a_new_worker_takes_no_users_job_until_its_checks_pass_and_a_failing_one_is_drained_with_the_figure() {
    let t = Bed::new("checks").await;
    let set = t.env.name("ck");
    let text = cluster(&t.env.ns, &set, 5, REGISTER_CHECKS);
    let commit = t.repo.push(&text, "checks");
    let _daemon = t.daemon("d");
    applied(&t.env, &commit, Duration::from_secs(60)).await;
    let s = support::slurm::client();
    let names: Vec<String> = (0..5).map(|i| format!("{set}-{i}")).collect();

    // Each worker registers drained by slurmops; a user's job is pinned to each at once.
    let mut user_jobs = Cancelled(BTreeMap::new());
    let started = Instant::now();
    let mut seen_held = 0;
    while user_jobs.0.len() < names.len() {
        assert!(started.elapsed() < Duration::from_secs(90), "workers never registered");
        for n in &names {
            if user_jobs.0.contains_key(n) {
                continue;
            }
            if let Ok(node) = s.get(n).await {
                if node.reason == "slurmops: checks pending" {
                    seen_held += 1;
                }
                user_jobs.0.insert(n.clone(), submit_sleep(n, 300).await);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(seen_held > 0, "no worker was seen held by `checks pending`");

    // Until the checks have their results (a worker drained for a failure has the jobs it did
    // not start cancelled).
    let deadline = Instant::now() + Duration::from_secs(150);
    let expected = |i: usize| match i {
        1 => &["figure"][..],
        3 => &["hang"][..],
        _ => &["slow", "figure", "hang"][..],
    };
    loop {
        let mut all = true;
        for (i, n) in names.iter().enumerate() {
            for c in expected(i) {
                all &= condition(&t.env, n, c).await.is_some();
            }
        }
        if all {
            break;
        }
        assert!(Instant::now() < deadline, "the checks did not all report within 150 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Never more than 2 `slow` jobs at once, from Slurm's own record of when each ran (a
    // sampler polling the queue missed every one of them in CI under load).
    let slow_jobs: Vec<_> = s
        .jobs()
        .await
        .unwrap()
        .iter()
        .filter(|j| j.name.starts_with(&format!("slurmops-check:slow:{set}-")))
        .map(|j| slurmops::slurm::Job::clone(j))
        .collect();
    let max_slow = most_at_once(&slow_jobs);
    eprintln!("[checks] at most {max_slow} `slow` jobs ran at once (maxConcurrent 2)");
    assert!(max_slow <= 2, "{max_slow} `slow` check jobs ran at once; the cap is 2: {slow_jobs:#?}");
    assert!(max_slow >= 1, "no `slow` check job ran: {slow_jobs:#?}");
    // slurmctld enforces the cap too: each job takes one of the check's 2 licenses.
    let license = support::slurm::scontrol(&["show", "license", "slurmops-check-slow", "-o"]);
    assert!(license.contains("Total=2"), "{license}");

    // Worker 1 failed its figure, worker 3 hung: drained with the check, the job and why.
    let jobs = s.jobs().await.unwrap();
    let check_job = |check: &str, node: &str| {
        let prefix = format!("slurmops-check:{check}:{node}:");
        jobs.iter()
            .filter(|j| j.name.starts_with(&prefix))
            .max_by_key(|j| j.id)
            .cloned()
            .unwrap_or_else(|| panic!("no {check} job on {node}"))
    };
    let slow = check_job("slow", &names[0]);
    // Jobs slurmops submits run as the install's unprivileged job user, not as Slurm's
    // administrator: the `slow` check's attempt to drain its worker changed nothing (below,
    // the workers it passed on run their user's job).
    assert_eq!(slow.user, "daemon", "{slow:?}");
    let shown = support::slurm::scontrol(&["show", "job", &slow.id.to_string(), "-o"]);
    assert!(shown.contains("Licenses=slurmops-check-slow"), "{shown}");
    let figure = check_job("figure", &names[1]);
    let n1 = eventually("worker 1 drained for its figure", Duration::from_secs(30), async || {
        let n = s.get(&names[1]).await.ok()?;
        n.state.has("DRAIN").then_some(n)
    })
    .await;
    assert_eq!(
        n1.reason,
        format!("slurmops: check figure failed: job {}: figure 5 GB/s below 10 GB/s", figure.id)
    );
    let hang = check_job("hang", &names[3]);
    // The daemon reports the hang and cancels its job in one pass; the cancel may land after
    // the report is read (seen in CI under load: still RUNNING).
    eventually("the hung check job cancelled", Duration::from_secs(30), async || {
        let j = s.jobs().await.ok()?.iter().find(|j| j.id == hang.id).cloned()?;
        j.has_state("CANCELLED").then_some(())
    })
    .await;
    let n3 = eventually("worker 3 drained for its hang", Duration::from_secs(30), async || {
        let n = s.get(&names[3]).await.ok()?;
        n.state.has("DRAIN").then_some(n)
    })
    .await;
    assert_eq!(
        n3.reason,
        format!("slurmops: check hang failed: job {}: ran past its timeout 15s, cancelled", hang.id)
    );
    let (st, msg) = condition(&t.env, &names[1], "figure").await.unwrap();
    assert_eq!((st.as_str(), msg.as_str()), ("False", &*format!("job={} value=5 : figure 5 GB/s below 10 GB/s", figure.id)));

    // The others passed, and each one's user job started only after its last check ended.
    for i in [0, 2, 4] {
        let n = &names[i];
        let (st, msg) = condition(&t.env, n, "slow").await.unwrap();
        assert_eq!(st, "True", "{n}: {msg}");
        assert!(msg.contains("value=42 "), "{n}: {msg}");
        let id = user_jobs.0[n];
        let job = eventually(&format!("user job {id} runs on {n}"), Duration::from_secs(60), async || {
            let j = s.jobs().await.ok()?.iter().find(|j| j.id == id).cloned()?;
            j.has_state("RUNNING").then_some(j)
        })
        .await;
        let last_check = ["slow", "figure", "hang"]
            .iter()
            .map(|c| check_job(c, n).end_time.unwrap_or(i64::MAX))
            .max()
            .unwrap();
        let start = job.start_time.unwrap();
        eprintln!("[checks] {n}: checks ended at {last_check}, user job {id} started at {start}");
        assert!(start >= last_check, "{n}: user job {id} started at {start}, before its checks ended at {last_check}");
    }
    // The failed workers run no user's job.
    for i in [1, 3] {
        let id = user_jobs.0[&names[i]];
        let j = s.jobs().await.unwrap().iter().find(|j| j.id == id).cloned().unwrap();
        assert!(j.has_state("PENDING"), "{}: user job {id} is {:?}", names[i], j.state);
    }

    // Status and Events tell the failures, naming the jobs.
    let st = eventually("status names the failures", Duration::from_secs(30), async || {
        let st = status(&t.env).await?;
        (st.checks.contains("check figure: ") && st.checks.contains("1 failed")).then_some(st)
    })
    .await;
    eprintln!("[checks] status:\n{}", st.checks);
    assert!(st.checks.contains(&format!("{}: job {}: figure 5 GB/s below 10 GB/s", names[1], figure.id)), "{}", st.checks);
    assert!(st.checks.contains(&format!("{}: job {}: ran past its timeout 15s, cancelled", names[3], hang.id)), "{}", st.checks);
    // One Event per NodeSet and reason; a repeat within minutes counts on it.
    eventually("a CheckFailed Event naming the job", Duration::from_secs(30), async || {
        let events = Api::<Event>::namespaced(t.env.client.clone(), &t.env.ns).list(&Default::default()).await.ok()?;
        events.items.iter().find(|e| {
            e.reason.as_deref() == Some(slurmops::vocab::EVENT_CHECK_FAILED)
                && e.message.as_deref().is_some_and(|m| {
                    m.contains(&format!("job={}", figure.id)) || m.contains(&format!("job={}", hang.id))
                })
        }).map(|_| ())
    })
    .await;
}
}

/// The user's jobs of a test, cancelled when it ends, passed or not (a pending job left behind
/// could start on a later test's worker).
struct Cancelled(BTreeMap<String, u64>);

impl Drop for Cancelled {
    fn drop(&mut self) {
        for id in self.0.values() {
            support::gitops::scancel(*id);
        }
    }
}

/// Jobs of check `slow` on SET's workers running now.
/// The most JOBS that ran at once, from their start and end times (seconds; each ran from its
/// start up to, not including, its end: truncated to seconds, a job that ended before another
/// started never seems to overlap it).
fn most_at_once(jobs: &[slurmops::slurm::Job]) -> usize {
    let mut edges: Vec<(i64, i32)> = jobs
        .iter()
        .filter_map(|j| Some((j.start_time.filter(|t| *t > 0)?, j.end_time?)))
        .flat_map(|(start, end)| [(start, 1), (end, -1)])
        .collect();
    // At the same second an end comes before a start.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

on_each_slurm! {
async fn a_scheduled_check_runs_on_idle_workers_and_never_beside_a_users_job() {
    let t = Bed::new("checks-cron").await;
    let set = t.env.name("cc");
    let every_minute = r#"      - name: tick
        script: "echo slurmops-value: 1"
        onRegister: false
        schedule: "* * * * *"
        maxConcurrent: 2
"#;
    let text = cluster(&t.env.ns, &set, 2, every_minute);
    let _daemon = t.deployed(&text, "d", &[(&set, 2)]).await;
    let s = support::slurm::client();
    let (busy, idle) = (format!("{set}-0"), format!("{set}-1"));
    let job = submit_sleep(&busy, 600).await;
    let _cancel = Cancelled(BTreeMap::from([(busy.clone(), job)]));
    let started = eventually("the user's job runs", Duration::from_secs(30), async || {
        let j = s.jobs().await.ok()?.iter().find(|j| j.id == job).cloned()?;
        j.has_state("RUNNING").then_some(j.start_time?)
    })
    .await;
    // (A tick before the job started may have checked both.) The first tick after: the idle
    // worker is checked again, the busy one is not.
    let (busy_before, idle_before) = (
        condition(&t.env, &busy, "tick").await,
        condition(&t.env, &idle, "tick").await,
    );
    let (st, msg) = eventually("the idle worker checked on schedule", Duration::from_secs(130), async || {
        condition(&t.env, &idle, "tick").await.filter(|c| Some(c) != idle_before.as_ref())
    })
    .await;
    assert_eq!(st, "True", "{msg}");
    assert!(msg.contains("value=1 "), "{msg}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(condition(&t.env, &busy, "tick").await, busy_before, "a check ran beside the user's job");
    let jobs = s.jobs().await.unwrap();
    let on_busy = jobs
        .iter()
        .filter(|j| j.name.starts_with(&format!("slurmops-check:tick:{busy}:")))
        .filter(|j| j.submit_time.is_some_and(|t| t >= started))
        .count();
    assert_eq!(on_busy, 0, "a check job was submitted on the busy worker while its job ran");
    assert!(support::slurm::job_state(job).await.contains(&"RUNNING".to_string()), "the user's job was touched");
    // The status follows within a pass or two.
    eventually("the status counts 1 passed, 1 waiting", Duration::from_secs(20), async || {
        let st = status(&t.env).await?;
        st.checks.contains("check tick: 1 passed, 0 failed, 0 running, 1 waiting").then_some(())
    })
    .await;
}
}

on_each_slurm! {
async fn a_worker_drained_for_its_node_s_problem_is_checked_again_before_it_is_resumed() {
    let t = Bed::new("checks-health").await;
    t.env.grant_node_reader().await;
    let set = t.env.name("ch");
    let check = r#"      - name: quick
        script: "echo slurmops-value: 7"
"#;
    let text = cluster(&t.env.ns, &set, 1, check);
    let commit = t.repo.push(&text, "checks");
    let _daemon = t.daemon("d");
    applied(&t.env, &commit, Duration::from_secs(60)).await;
    let s = support::slurm::client();
    let w = format!("{set}-0");
    let in_service = async |what: &str| {
        eventually(what, Duration::from_secs(60), async || {
            let n = s.get(&w).await.ok()?;
            (n.state.has("IDLE") && !n.state.has("DRAIN")).then_some(())
        })
        .await
    };
    let (_, first) = eventually("the new worker's check passed", Duration::from_secs(60), async || {
        condition(&t.env, &w, "quick").await.filter(|c| c.0 == "True")
    })
    .await;
    in_service("the new worker in service").await;

    // Its Kubernetes node is cordoned: sync drains it; uncordoned: held for its checks, which
    // run again (a new job) before it is resumed.
    crate::sync::cordon(&t.env, true).await;
    eventually("drained for the cordon", Duration::from_secs(30), async || {
        let n = s.get(&w).await.ok()?;
        n.reason.contains("cordoned").then_some(())
    })
    .await;
    crate::sync::cordon(&t.env, false).await;
    let (st, again) = eventually("the check passed again", Duration::from_secs(60), async || {
        condition(&t.env, &w, "quick").await.filter(|c| c.1 != first)
    })
    .await;
    in_service("back in service").await;
    eprintln!("[checks] {w}: first {first:?}, after the cordon {again:?}");
    assert_eq!(st, "True");
    assert_ne!(first, again, "the check did not run again");
    let jobs = s.jobs().await.unwrap();
    let runs = jobs
        .iter()
        .filter(|j| j.name.starts_with(&format!("slurmops-check:quick:{w}:")))
        .count();
    assert_eq!(runs, 2, "one check job at registration, one after the cordon");
}
}

on_each_slurm! {
async fn a_pair_check_runs_one_job_across_its_workers_and_a_failing_one_drains_them_all() {
    let t = Bed::new("checks-pair").await;
    let set = t.env.name("cp");
    // 5 workers: pairs (0,1) and (2,3,4) (the odd last worker joins the last pair). The job
    // prints 10 per node it spans; a pair holding worker 3 prints 5 (10 needed).
    let pairs = r#"      - name: pair
        span: pair
        onRegister: false
        schedule: "* * * * *"
        minValue: 10
        unit: Gb/s
        maxConcurrent: 1
        script: |
          nodes=" $(scontrol show hostnames "$SLURM_JOB_NODELIST" | tr '\n' ' ')"
          case "$nodes" in *-3\ *) echo "slurmops-value: 5" ;; *) echo "slurmops-value: $((SLURM_JOB_NUM_NODES * 10))" ;; esac
"#;
    let text = cluster(&t.env.ns, &set, 5, pairs);
    let _daemon = t.deployed(&text, "d", &[(&set, 5)]).await;
    let s = support::slurm::client();
    let w = |i: usize| format!("{set}-{i}");
    let (_, msg) = eventually("worker 0's pair passed", Duration::from_secs(150), async || {
        condition(&t.env, &w(0), "pair").await.filter(|c| c.0 == "True")
    })
    .await;
    assert!(msg.contains("value=20 "), "one job across the two workers: {msg}");
    let job_of = |msg: &str| msg.strip_prefix("job=").and_then(|m| m.split(' ').next()).unwrap_or_default().to_string();
    let jobs = s.jobs().await.unwrap();
    let first = jobs.iter().find(|j| j.id.to_string() == job_of(&msg)).expect("its job");
    let sorted = |v: Vec<slurmops::slurm::model::Word>| {
        let mut v: Vec<String> = v.into_iter().map(String::from).collect();
        v.sort();
        v
    };
    assert_eq!(sorted(first.nodes.clone()), [w(0), w(1)], "{first:?}");
    assert_eq!(condition(&t.env, &w(1), "pair").await.map(|c| c.1), Some(msg.clone()), "one result for both");
    // The group holding worker 3 failed: its three workers drained, naming the job and figure.
    for i in [2, 3, 4] {
        let n = eventually(&format!("worker {i} drained for its pair"), Duration::from_secs(150), async || {
            let n = s.get(&w(i)).await.ok()?;
            (n.state.has("DRAIN") && n.reason.contains("check pair failed")).then_some(n)
        })
        .await;
        assert!(n.reason.ends_with("figure 5 Gb/s below 10 Gb/s"), "{}", n.reason);
    }
    let all = s.jobs().await.unwrap();
    let bad = all
        .iter()
        .filter(|j| j.name.starts_with(&format!("slurmops-check:pair:@{}:", w(2))))
        .max_by_key(|j| j.id)
        .expect("the failing group's job");
    assert_eq!(sorted(bad.nodes.clone()), [w(2), w(3), w(4)]);
    // Workers 0 and 1 stay in service; the status counts workers.
    for i in [0, 1] {
        let n = s.get(&w(i)).await.unwrap();
        assert!(!n.state.has("DRAIN"), "worker {i}: {:?} {}", n.state, n.reason);
    }
    eventually("the status counts the pair check", Duration::from_secs(60), async || {
        let st = status(&t.env).await?;
        st.checks.contains("check pair: 2 passed, 3 failed").then_some(())
    })
    .await;
}
}

on_each_slurm! {
async fn a_check_whose_license_slurmctld_does_not_know_yet_waits_and_its_worker_stays_held() {
    let t = Bed::new("checks-license").await;
    let set = t.env.name("cl");
    // The bed's slurmctld declares no license for `unlicensed`, as slurmctld before the
    // reconfigure that brings it a check just added.
    let check = "      - name: unlicensed\n        script: \"true\"\n";
    let text = cluster(&t.env.ns, &set, 1, check);
    let commit = t.repo.push(&text, "checks");
    let _daemon = t.daemon("d");
    applied(&t.env, &commit, Duration::from_secs(60)).await;
    let w = format!("{set}-0");
    let s = support::slurm::client();
    let deferred = async || {
        let events = Api::<Event>::namespaced(t.env.client.clone(), &t.env.ns).list(&Default::default()).await.ok()?;
        events.items.into_iter().find(|e| e.reason.as_deref() == Some(slurmops::vocab::EVENT_CHECK_DEFERRED))
    };
    let first = eventually("a CheckDeferred Event", Duration::from_secs(90), deferred).await;
    let message = first.message.clone().unwrap_or_default();
    eprintln!("[checks] {message}");
    assert!(message.contains("license slurmops-check-unlicensed"), "{message}");
    // No job, no error: the worker stays held for its check, and the pass goes on. A refused
    // submission is no action: passes keep their pace rather than follow each other at once.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let tries = deferred().await.and_then(|e| e.count).unwrap_or(0) - first.count.unwrap_or(0);
    eprintln!("[checks] {tries} more deferred submissions in 5 s");
    assert!(tries <= 6, "{tries} submissions refused in 5 s: the daemon retries in a loop");
    let n = s.get(&w).await.unwrap();
    assert!(n.state.has("DRAIN") && n.reason == "slurmops: checks pending", "{:?} {}", n.state, n.reason);
    let jobs = s.jobs().await.unwrap();
    assert!(!jobs.iter().any(|j| j.name.starts_with("slurmops-check:unlicensed:")), "a job ran without its license");
    let st = status(&t.env).await.unwrap();
    assert!(st.errors.is_empty(), "{}", st.errors);
    assert!(st.checks.contains("check unlicensed: 0 passed, 0 failed, 0 running, 1 waiting") || st.checks.contains("check unlicensed: 0 passed, 0 failed, 1 running"), "{}", st.checks);
}
}

/// Block topology is Slurm 26.05's (validation refuses it before): a check across a block runs
/// there. Workers w-0 and w-2 run on rack-a's Kubernetes node, w-1 and w-3 on rack-b's.
#[tokio::test(flavor = "multi_thread")]
async fn a_block_check_runs_one_job_across_the_workers_of_each_block() {
    use crate::support::bed::{BLOCK_LABEL, BLOCKS};
    support::select_slurm("26.05");
    let (a, b) = (BLOCKS[0], BLOCKS[1]);
    let env =
        support::TestEnv::on_nodes("checks-block", &[&[(BLOCK_LABEL, a)], &[(BLOCK_LABEL, b)]])
            .await;
    env.grant_node_reader().await;
    let t = Bed::with(env).await;
    let set = t.env.name("cb");
    let check = r#"      - name: block
        span: block
        onRegister: false
        schedule: "* * * * *"
        maxConcurrent: 2
        script: "echo slurmops-value: $SLURM_JOB_NUM_NODES"
"#;
    let text = cluster(&t.env.ns, &set, 4, check)
        + &format!(
            "  topology:\n    block:\n      nodeLabel: {BLOCK_LABEL}\n      blocks: [{}]\n      nodeSets: [{set}]\n      blockSize: 2\n",
            BLOCKS.join(", ")
        );
    let _daemon = t.deployed(&text, "d", &[(&set, 4)]).await;
    let w = |i: usize| format!("{set}-{i}");
    for i in 0..4 {
        let (st, msg) = eventually(
            &format!("worker {i}'s block checked"),
            Duration::from_secs(150),
            async || condition(&t.env, &w(i), "block").await,
        )
        .await;
        assert_eq!(st, "True", "{msg}");
        assert!(
            msg.contains("value=2 "),
            "one job across the block's two workers: {msg}"
        );
    }
    let jobs = support::slurm::client().jobs().await.unwrap();
    for (block, members) in [(a, [w(0), w(2)]), (b, [w(1), w(3)])] {
        let job = jobs
            .iter()
            .filter(|j| {
                j.name
                    .starts_with(&format!("slurmops-check:block:@{block}:"))
            })
            .max_by_key(|j| j.id)
            .unwrap_or_else(|| panic!("no job for block {block}"));
        let mut nodes = job.nodes.clone();
        nodes.sort();
        assert_eq!(nodes, members, "block {block}: {job:?}");
    }
}
