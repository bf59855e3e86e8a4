//! The daemon as a level-triggered controller, end to end with Slurm: `slurmops run` follows a
//! repository on the bed's git server, with the rights `slurmops install --print` gives it, and
//! talks to the bed's real slurmctld/slurmrestd with tokens it mints from the JWT key Secret of
//! the test namespace (only the URL is overridden: the bed's slurmrestd is not a Service). Workers
//! are pods whose real slurmd the test kubelet runs.
//!
//! What a user must be able to rely on: a job that runs for hours on one NodeSet never holds back
//! GitOps for the others; a reverted change resumes the worker it drained; a daemon killed in the
//! middle of a rollout, or replaced by its standby, finishes it without killing a job or leaving
//! a node drained.

use crate::support;

use std::time::{Duration, Instant};

use kube::api::{Api, ListParams};
use slurmops::slurm::SlurmNodes;

use crate::support::daemon::{applied, status};
use crate::support::gitops::{Bed, drained_by_us, running, scancel};
use crate::support::slurm::{job_state, submit_sleep};
use crate::support::{TestEnv, eventually};

/// cluster.yaml with one worker NodeSet per (name, replicas, image).
fn cluster(ns: &str, sets: &[(&str, u32, &str)]) -> String {
    let mut s = support::cluster_head("c", ns) + "  nodeSets:\n";
    for (name, replicas, image) in sets {
        s += &format!(
            "    - {{name: {name}, replicas: {replicas}, cpu: \"1\", memory: 256Mi, image: {image}, update: {{maxUnavailable: 1}}}}\n"
        );
    }
    s + "  partitions:\n    - {name: all, nodeSets: [ALL], default: true}\n"
}

on_each_slurm! {
async fn a_job_waiting_on_one_node_set_never_holds_back_a_commit_for_another() {
    let t = Bed::new("ctl-ab").await;
    let (a, b) = (t.env.name("a"), t.env.name("b"));
    let yaml = |ia: &str, ib: &str| cluster(&t.env.ns, &[(&a, 2, ia), (&b, 2, ib)]);
    let daemon = t
        .deployed(&yaml("img:1", "img:1"), "d", &[(&a, 2), (&b, 2)])
        .await;
    let a0 = format!("{a}-0");
    let job = submit_sleep(&a0, 900).await;
    running(job).await;
    let a_before = t.pods(&a).await;
    let b_before = t.pods(&b).await;

    // a's image changes: a-1 (idle) is replaced, then a-0 drains and waits for its job.
    let c2 = t.repo.push(&yaml("img:2", "img:1"), "a: new image");
    applied(&t.env, &c2, Duration::from_secs(30)).await;
    drained_by_us(&a0, Duration::from_secs(90)).await;

    // b's image changes while a-0 waits: applied and rolled within a minute.
    let c3 = t.repo.push(&yaml("img:2", "img:2"), "b: new image");
    let t0 = Instant::now();
    eventually(
        "b rolled and commit 3 applied",
        Duration::from_secs(60),
        async || {
            let s = status(&t.env).await?;
            let now = t.pods(&b).await;
            let replaced = now.len() == 2
                && now.iter().all(|(n, (uid, ready))| {
                    *ready && b_before.get(n).is_some_and(|(u, _)| u != uid)
                });
            (replaced && s.last_applied_commit == c3).then_some(())
        },
    )
    .await;
    let took = t0.elapsed();
    println!("commit 3 applied and b rolled {took:?} after the push");
    assert_eq!(
        job_state(job).await,
        ["RUNNING"],
        "the job on {a0} was touched"
    );
    assert_eq!(
        t.pods(&a).await.get(&a0).map(|p| &p.0),
        a_before.get(&a0).map(|p| &p.0),
        "{a0} was replaced while its job ran"
    );

    // Status names what a-0 waits for, in the ConfigMap and in `slurmops status`.
    let s = status(&t.env).await.unwrap();
    let pa = s.progress().into_iter().find(|p| p.node_set == a).unwrap();
    let w = pa
        .waiting
        .iter()
        .find(|w| w.node == a0)
        .expect("a-0 waiting");
    assert_eq!(w.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [job]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["status", "--namespace", &t.env.ns])
        .env("KUBECONFIG", &t.kubeconfig)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{a0} waits for job {job} (root")),
        "{text}"
    );
    // And an Event on a's StatefulSet says the same.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(t.env.client.clone(), &t.env.ns);
    let told = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={a}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WaitingForJobs"))
        .filter_map(|e| e.message)
        .collect::<Vec<_>>();
    assert!(
        told.iter()
            .any(|m| m.starts_with(&format!("{a0} waits for job {job} (root"))),
        "{told:?}"
    );

    // The job ends: a finishes, and no node stays drained by slurmops.
    scancel(job);
    eventually("a-0 replaced", Duration::from_secs(90), async || {
        let now = t.pods(&a).await;
        let p = now.get(&a0)?;
        (p.1 && Some(&p.0) != a_before.get(&a0).map(|x| &x.0)).then_some(())
    })
    .await;
    t.none_drained_by_us(&[(&a, 2), (&b, 2)], Duration::from_secs(60))
        .await;
    eventually("every NodeSet done", Duration::from_secs(30), async || {
        let s = status(&t.env).await?;
        let p = s.progress();
        (p.len() == 2 && p.iter().all(|x| x.done)).then_some(())
    })
    .await;
    drop(daemon);
    t.env.cleanup().await;
}
}

on_each_slurm! {
async fn a_reverted_change_resumes_the_drained_worker_without_replacing_it() {
    let t = Bed::new("ctl-revert").await;
    let a = t.env.name("r");
    let yaml = |image: &str| cluster(&t.env.ns, &[(&a, 2, image)]);
    let daemon = t.deployed(&yaml("img:1"), "d", &[(&a, 2)]).await;
    let a1 = format!("{a}-1");
    let job = submit_sleep(&a1, 900).await;
    running(job).await;
    let uid = t.pods(&a).await[&a1].0.clone();

    t.repo.push(&yaml("img:2"), "new image");
    drained_by_us(&a1, Duration::from_secs(90)).await;
    let reverted = t.repo.push(&yaml("img:1"), "revert");
    applied(&t.env, &reverted, Duration::from_secs(30)).await;
    let s = support::slurm::client();
    eventually(
        &format!("{a1} resumed"),
        Duration::from_secs(30),
        async || {
            let n = s.get(&a1).await.ok()?;
            (!n.state.has("DRAIN")).then_some(())
        },
    )
    .await;
    assert_eq!(t.pods(&a).await[&a1].0, uid, "{a1} was replaced");
    assert_eq!(job_state(job).await, ["RUNNING"]);
    // The NodeSet settles on the reverted revision without touching a-1.
    eventually("rollout done", Duration::from_secs(60), async || {
        let s = status(&t.env).await?;
        s.progress().iter().all(|p| p.done).then_some(())
    })
    .await;
    assert_eq!(t.pods(&a).await[&a1].0, uid, "{a1} was replaced");
    assert_eq!(job_state(job).await, ["RUNNING"]);
    scancel(job);
    drop(daemon);
    t.env.cleanup().await;
}
}

on_oldest_and_newest_slurm! {
async fn a_killed_daemon_and_a_standby_taking_over_finish_the_rollout_safely() {
    let t = Bed::new("ctl-kill").await;
    let a = t.env.name("k");
    let yaml = |image: &str| cluster(&t.env.ns, &[(&a, 3, image)]);
    let first = t.deployed(&yaml("img:1"), "d1", &[(&a, 3)]).await;
    let busy = format!("{a}-2");
    let job = submit_sleep(&busy, 50).await;
    running(job).await;
    let before = t.pods(&a).await;

    t.repo.push(&yaml("img:2"), "new image");
    // SIGKILL as soon as the first worker was deleted: mid-rollout.
    eventually("a worker replaced", Duration::from_secs(60), async || {
        let now = t.pods(&a).await;
        before
            .iter()
            .any(|(n, (uid, _))| now.get(n).is_none_or(|p| p.0 != *uid))
            .then_some(())
    })
    .await;
    first.kill();
    // Started again (same identity: it still holds the lease) with a standby beside it.
    let again = t.daemon("d1");
    let standby = t.daemon("d2");
    drained_by_us(&busy, Duration::from_secs(90)).await;
    again.kill();
    // The standby takes over once the lease expires and finishes the rollout after the job.
    eventually(
        "every worker replaced",
        Duration::from_secs(150),
        async || {
            let now = t.pods(&a).await;
            (now.len() == 3
                && now
                    .iter()
                    .all(|(n, (uid, ready))| *ready && before.get(n).is_some_and(|p| p.0 != *uid)))
            .then_some(())
        },
    )
    .await;
    assert!(
        standby.output().contains("became the leader"),
        "{}",
        standby.output()
    );
    assert_eq!(job_state(job).await, ["COMPLETED"], "the job was killed");
    t.none_drained_by_us(&[(&a, 3)], Duration::from_secs(60))
        .await;
    drop(standby);
    t.env.cleanup().await;
}
}

on_each_slurm! {
async fn a_node_joining_a_per_node_pool_gets_its_worker_without_waiting_for_the_poll() {
    let t = Bed::with(TestEnv::on_nodes("ctl-pernode", &[&[], &[]]).await).await;
    let nodes = t.env.kubelet.nodes();
    let pool = t.env.suffix.clone();
    support::label_node(&t.env, &nodes[0], "slurmops.test/pool", Some(&pool)).await;
    let set = t.env.name("pn");
    let yaml = support::cluster_head("c", &t.env.ns)
        + &format!(
            "  nodeSets:\n    - {{name: {set}, replicas: perNode, cpu: \"1\", memory: 256Mi, nodeSelector: {{slurmops.test/pool: \"{pool}\"}}}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n"
        );
    let commit = t.repo.push(&yaml, "a perNode pool");
    // Git is polled every 10 minutes: only the Node watch can wake the pass below.
    let daemon = t.daemon_polling("d", "10m");
    applied(&t.env, &commit, Duration::from_secs(60)).await;
    t.idle(&[(&set, 1)]).await;
    // The passes that followed the first worker settle: from here only a watch starts one (this
    // test fails with the Node watch removed).
    tokio::time::sleep(Duration::from_secs(8)).await;
    support::label_node(&t.env, &nodes[1], "slurmops.test/pool", Some(&pool)).await;
    let s = support::slurm::client();
    let second = format!("{set}-1");
    eventually(
        "a worker on the node that joined",
        Duration::from_secs(45),
        async || {
            let n = s.get(&second).await.ok()?;
            (n.state.has("IDLE") && !n.state.has("NOT_RESPONDING")).then_some(())
        },
    )
    .await;
    let host = t.pods(&set).await.contains_key(&second);
    assert!(host, "{second} has no pod");
    drop(daemon);
    t.env.cleanup().await;
}
}
