//! The Slurm side at the scale slurmops is sold for, budgeted in bytes and requests (not timed):
//! a slurmctld and slurmrestd of their own (tests/bed/scale.sh, Slurm 24.11) holding 1,000 node
//! records and 20,000 individual held jobs, about 150 MB of JSON for one read of the queue.
//! A pass with nothing moving reads the node list (a few MB) and not the queue, and the next one
//! a "no change"; `slurm drain` of a node holding no job reads no queue; a pass that needs the
//! queue reads it once and reuses it; a queue past the answer cap leaves the nodes known and says
//! which setting to raise. The goals of issue 32 at 1,000 workers, doubled: ≤ 10 MB per pass.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use slurmops::controller::observe::{JobsNeed, Needs, jobs_needed, read_slurm};
use slurmops::slurm::{Client, SlurmNodes};

const JOBS: usize = 20_000;

/// The scale instance, stopped when dropped.
struct Scale {
    url: String,
    jwt: String,
}

impl Scale {
    fn up() -> Scale {
        let out = std::process::Command::new("bash")
            .args(["tests/bed/scale.sh", "up", "50", "20"])
            .output()
            .expect("tests/bed/scale.sh");
        assert!(
            out.status.success(),
            "scale.sh up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("scale.sh printed no {k}"))
                .to_string()
        };
        Scale {
            url: get("SCALE_RESTD_URL"),
            jwt: get("SCALE_JWT"),
        }
    }

    fn client(&self, max_answer_mib: Option<usize>) -> Client {
        let mut config = slurmops::slurm::Config::new(
            self.url.clone(),
            slurmops::slurm::auth::Credentials::Token {
                token: slurmops::slurm::auth::Secret::new(self.jwt.clone()),
                user: None,
            },
        );
        config.timeout = Duration::from_secs(120);
        if let Some(m) = max_answer_mib {
            config.max_answer = m << 20;
        }
        Client::new(config).unwrap()
    }

    async fn hold(&self, n: usize) {
        let http = reqwest::Client::new();
        let body = serde_json::json!({
            "script": "#!/bin/sh\nsleep 1\n",
            "job": {"name": "held", "partition": "all", "hold": true, "tasks": 1,
                "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"],
                "time_limit": {"set": true, "infinite": false, "number": 1}},
        });
        let failed = futures::stream::iter(0..n)
            .map(|_| {
                let req = http
                    .post(format!("{}/slurm/v0.0.42/job/submit", self.url))
                    .header("X-SLURM-USER-TOKEN", &self.jwt)
                    .json(&body);
                async move {
                    req.send()
                        .await
                        .map(|r| r.status().is_success())
                        .unwrap_or(false)
                }
            })
            .buffer_unordered(16)
            .filter(|ok| std::future::ready(!*ok))
            .count()
            .await;
        assert_eq!(failed, 0, "{failed} of {n} submissions failed");
    }
}

impl Drop for Scale {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .args(["tests/bed/scale.sh", "down"])
            .output();
    }
}

/// One observe of Slurm as a pass does it, with nothing moving (NEED: the queue's rule): what it
/// cost slurmrestd, and the view.
async fn pass(
    c: &Client,
    need: JobsNeed,
) -> (
    slurmops::slurm::Traffic,
    slurmops::controller::decide::SlurmView,
) {
    let needs = Needs {
        jobs: need,
        ..Needs::default()
    };
    let before = c.traffic();
    let view = read_slurm(c, |nodes| jobs_needed(&needs, &BTreeMap::new(), nodes))
        .await
        .expect("Slurm read");
    (c.traffic() - before, view)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_nodes_and_twenty_thousand_jobs_cost_a_pass_megabytes_not_the_queue() {
    let scale = Scale::up();
    // First: building it installs the process's TLS provider, which reqwest needs.
    let c = scale.client(None);
    scale.hold(JOBS).await;

    // Nothing moving: the node list, then "no change"; the queue is not read. (The data
    // parser is probed first, once per client.)
    c.parser().await.unwrap();
    let (first, view) = pass(&c, JobsNeed::WhenMoving).await;
    assert_eq!(view.nodes.len(), 1000);
    assert_eq!(first.requests, 1, "{first:?}");
    assert!(
        first.bytes <= 10_000_000,
        "an idle pass read {} bytes",
        first.bytes
    );
    // Records without a slurmd turn from UNKNOWN to DOWN within SlurmdTimeout (30 s), which
    // changes the list: once it stops changing, a pass costs a "no change".
    let mut next = pass(&c, JobsNeed::WhenMoving).await.0;
    let settled = std::time::Instant::now();
    while next.bytes >= 64 * 1024 && settled.elapsed() < Duration::from_secs(90) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        next = pass(&c, JobsNeed::WhenMoving).await.0;
    }
    assert!(
        next.bytes < 64 * 1024,
        "an unchanged node list cost {} bytes",
        next.bytes
    );

    // `slurm drain` of a node that holds no job: the node, not the queue.
    let before = c.traffic();
    c.drain("s000-0", "scale test").await.unwrap();
    assert!(c.jobs_on("s000-0").await.unwrap().is_empty());
    c.resume("s000-0").await.unwrap();
    let drain = c.traffic() - before;
    assert!(
        drain.bytes < 256 * 1024,
        "slurm drain read {} bytes",
        drain.bytes
    );

    // A pass that needs the queue reads it once; the next one reuses it (the cap raised: the
    // queue is past the default 128 MiB).
    let c = scale.client(Some(512));
    c.parser().await.unwrap();
    let (needed, view) = pass(&c, JobsNeed::Always).await;
    assert_eq!(view.jobs().len(), JOBS);
    assert!(
        needed.bytes > 50_000_000,
        "the queue is {} bytes",
        needed.bytes
    );
    let (again, view) = pass(&c, JobsNeed::Always).await;
    assert_eq!(view.jobs().len(), JOBS);
    // (The node list may have changed meanwhile: records without a slurmd go DOWN.)
    assert!(
        again.bytes <= 10_000_000,
        "the queue was read again: {again:?}"
    );

    // Past the answer cap, the nodes stay known and the error names the setting.
    let small = scale.client(Some(16));
    let (_, view) = pass(&small, JobsNeed::Always).await;
    assert_eq!(view.nodes.len(), 1000, "a large queue blinded the pass");
    let why = view.jobs_error.expect("the queue is past 16 MiB");
    assert!(why.contains("SLURMOPS_SLURM_MAX_ANSWER_MIB"), "{why}");
}
