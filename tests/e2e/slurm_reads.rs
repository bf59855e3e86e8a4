//! A pass costs what changed, not what exists. Slurm's job queue is the one heavy read
//! (about 7 KB of JSON per job through slurmrestd, hundreds of MB on a busy cluster), so an idle
//! daemon never reads it, and reads the node list conditionally (`update_time`: slurmrestd
//! answers "no change" without a body). When a job makes a moving worker wait, the pass reads
//! the queue and names the job. And an idle daemon sends the Kubernetes API no LIST: workers,
//! PodTemplates and nodes come from its watch caches. Measured through the daemon's own
//! `/metrics`, against the bed's real slurmctld, slurmrestd and kube-apiserver.

use std::time::Duration;

use crate::support;
use crate::support::daemon::status;
use crate::support::gitops::{Bed, running, scancel};
use crate::support::slurm::{sh, submit_job, submit_sleep};
use crate::support::{bed, eventually, slurm_instance};

fn cluster(ns: &str, set: &str, image: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            "  nodeSets:\n    - {{name: {set}, replicas: 1, cpu: \"1\", memory: 256Mi, image: {image}}}\n"
        )
        + "  partitions:\n    - {name: all, nodeSets: [ALL], default: true}\n"
}

/// Bytes of one read of the whole queue, as slurmrestd answers it to a client that asks.
async fn queue_bytes() -> usize {
    let b = bed();
    reqwest::Client::new()
        .get(format!("{}/slurm/v0.0.42/jobs/", b.slurmrestd_url))
        .header("X-SLURM-USER-TOKEN", &b.slurm_jwt)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len()
}

/// (passes, slurmrestd bytes read by them) from the daemon's pass histogram.
fn passes_and_bytes(d: &support::daemon::Daemon) -> (f64, f64) {
    (
        d.metric("slurmops_pass_slurmrestd_bytes_count")
            .unwrap_or(0.0),
        d.metric("slurmops_pass_slurmrestd_bytes_sum")
            .unwrap_or(0.0),
    )
}

on_each_slurm! {
async fn an_idle_pass_reads_no_job_queue_and_lists_nothing_and_a_waiting_worker_still_names_its_job() {
    let t = Bed::new("reads").await;
    let a = t.env.name("q");
    let daemon = t.deployed(&cluster(&t.env.ns, &a, "img:1"), "d", &[(&a, 1)]).await;
    // A queue of held jobs (other tests share the partition: held jobs never run, and their
    // one-minute limit holds nothing back from a maintenance window).
    let name = format!("held-{}", t.env.ns);
    for _ in 0..300 {
        let job = serde_json::json!({"partition": "all", "hold": true, "name": name,
            "time_limit": {"set": true, "infinite": false, "number": 1}});
        submit_job(job, 1).await;
    }
    let queue = queue_bytes().await;
    assert!(queue > 1_000_000, "the queue is {queue} bytes: too small to tell");

    // Idle passes (the daemon passes every few seconds with nothing to do).
    let lists = || daemon.metric("slurmops_kube_requests_total{kind=\"list\"").unwrap_or(-1.0);
    let (lists0, (n0, b0)) = (lists(), passes_and_bytes(&daemon));
    let (n1, b1) = eventually("five more passes", Duration::from_secs(60), async || {
        let (n, b) = passes_and_bytes(&daemon);
        (n >= n0 + 5.0).then_some((n, b))
    })
    .await;
    let per_pass = (b1 - b0) / (n1 - n0);
    assert_eq!(lists(), lists0, "idle passes listed from the Kubernetes API");
    assert!(lists0 >= 0.0, "no list count on /metrics");
    assert!(
        per_pass < queue as f64 / 20.0,
        "an idle pass read {per_pass:.0} bytes from slurmrestd; one read of the queue is {queue}"
    );

    // A job on the worker, and a new image: the worker waits, and the status names its job.
    let node = format!("{a}-0");
    let job = submit_sleep(&node, 900).await;
    running(job).await;
    t.repo.push(&cluster(&t.env.ns, &a, "img:2"), "new image");
    eventually("the waiting worker names its job", Duration::from_secs(60), async || {
        let s = status(&t.env).await?;
        s.progress()
            .iter()
            .flat_map(|p| &p.waiting)
            .any(|w| w.node == node && w.jobs.iter().any(|j| j.id == job))
            .then_some(())
    })
    .await;
    scancel(job);
    sh(&["exec", slurm_instance(), "scancel", "--name", &name]);
    drop(daemon);
    t.env.cleanup().await;
}
}
