//! Drain-before-replace end to end on the test bed: real apiserver + controller-manager, the test
//! kubelet running a real slurmd per worker pod, real slurmctld and slurmrestd.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use slurmops::slurm::auth::{Credentials, Secret};
use slurmops::slurm::{Client, Config, SlurmNodes};

use crate::support::slurm::client as slurm;
use crate::support::slurm::{job_state, submit_sleep};
use crate::support::{TestEnv, bed, eventually};

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn uids(pods: &Api<Pod>, node_set: &str) -> BTreeMap<String, (String, bool, bool)> {
    let lp = ListParams::default().labels(&format!("slurmops.dev/nodeset={node_set}"));
    pods.list(&lp)
        .await
        .map(|l| {
            l.items
                .into_iter()
                .map(|p| {
                    let r = ready(&p);
                    let deleting = p.metadata.deletion_timestamp.is_some();
                    (
                        p.metadata.name.unwrap(),
                        (p.metadata.uid.unwrap(), r, deleting),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

on_each_slurm! {
async fn image_change_rolls_every_worker_without_killing_the_running_job() {
    let env = TestEnv::new("roll").await;
    let w = env.name("r");
    let dir = tempfile::tempdir().unwrap();
    let write = |image: &str| {
        std::fs::write(
            dir.path().join("cluster.yaml"),
            support::four_workers(&env.ns, &w, image),
        )
        .unwrap()
    };
    write("registry.example/slurmd:24.11-a");
    let c = slurmops::cluster::load(
        "cluster.yaml",
        &support::four_workers(&env.ns, &w, "registry.example/slurmd:24.11-a"),
    )
    .unwrap();
    let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_admin), None)
        .await
        .unwrap();
    let opts = slurmops::apply::Options {
        wait: Some(Duration::from_secs(90)),
        ..Default::default()
    };
    let text = std::fs::read_to_string(dir.path().join("cluster.yaml")).unwrap();
    slurmops::apply::apply(
        &cluster,
        &c,
        &text,
        &slurmops::render::render(&c),
        &opts,
        &slurmops::apply::NoSlurm,
    )
    .await
    .unwrap();
    let s = slurm();
    let names: Vec<String> = (0..4).map(|i| format!("{w}-{i}")).collect();
    for n in &names {
        eventually(&format!("{n} idle"), Duration::from_secs(30), async || {
            let node = s.get(n).await.ok()?;
            (node.state.has("IDLE") && !node.state.has("NOT_RESPONDING")).then_some(())
        })
        .await;
    }
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let before = uids(&pods, &w).await;
    let busy = names[1].clone();
    let job = submit_sleep(&busy, 25).await;
    eventually("job running", Duration::from_secs(20), async || {
        job_state(job)
            .await
            .iter()
            .any(|x| x == "RUNNING")
            .then_some(())
    })
    .await;

    // The plan against the live cluster names every node the change drains, and the job.
    write("registry.example/slurmd:24.11-b");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["plan", dir.path().to_str().unwrap(), "--cluster"])
        .args([
            "--slurmrestd-url",
            &bed().slurmrestd_url,
            "--slurm-jwt",
            &bed().slurm_jwt,
        ])
        .env("KUBECONFIG", &bed().kubeconfig_admin)
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{plan}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        plan.contains(&format!(
            "node {busy} (NodeSet {w}) drains: waits for job {job} (root, expected end "
        )),
        "{plan}"
    );
    for n in names.iter().filter(|n| **n != busy) {
        assert!(
            plan.contains(&format!(
                "node {n} (NodeSet {w}) drains: idle, no job affected"
            )),
            "{plan}"
        );
    }

    // The image changes in git; apply updates the StatefulSet; pods stay until rolled.
    let c2 = slurmops::cluster::load(
        "cluster.yaml",
        &support::four_workers(&env.ns, &w, "registry.example/slurmd:24.11-b"),
    )
    .unwrap();
    let text2 = support::four_workers(&env.ns, &w, "registry.example/slurmd:24.11-b");
    let opts0 = slurmops::apply::Options::default();
    slurmops::apply::apply(
        &cluster,
        &c2,
        &text2,
        &slurmops::render::render(&c2),
        &opts0,
        &slurmops::apply::NoSlurm,
    )
    .await
    .unwrap();
    assert_eq!(
        uids(&pods, &w).await,
        before,
        "OnDelete: nothing replaced by apply alone"
    );

    // Sample, while rolling: workers out (pod missing, not Ready, terminating, or node DRAIN),
    // and whether the busy worker's pod went away while its job ran.
    let done = Arc::new(AtomicBool::new(false));
    let max_out = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (done, max_out, killed) = (done.clone(), max_out.clone(), killed.clone());
        let (pods, w, names, busy) = (pods.clone(), w.clone(), names.clone(), busy.clone());
        let busy_uid = before[&busy].0.clone();
        tokio::spawn(async move {
            let s = slurm();
            while !done.load(Ordering::SeqCst) {
                let now = uids(&pods, &w).await;
                let mut out = 0;
                for n in &names {
                    let pod_out = now.get(n).is_none_or(|(_, r, d)| !r || *d);
                    let drained = s
                        .get(n)
                        .await
                        .map(|x| x.state.has("DRAIN"))
                        .unwrap_or(false);
                    if pod_out || drained {
                        out += 1;
                    }
                }
                max_out.fetch_max(out, Ordering::SeqCst);
                let running = job_state(job).await.iter().any(|x| x == "RUNNING");
                let busy_gone = now.get(&busy).is_none_or(|(u, _, d)| *u != busy_uid || *d);
                if running && busy_gone {
                    killed.store(true, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    // `slurmops apply` with Slurm: nothing left to apply, so it goes straight to the rollout.
    let apply = {
        let dir = dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
                .arg("apply")
                .arg(&dir)
                .args(["--wait", "0s", "--slurmrestd-url", &bed().slurmrestd_url])
                .args(["--slurm-jwt", &bed().slurm_jwt])
                .env("KUBECONFIG", &bed().kubeconfig_admin)
                .output()
                .unwrap()
        })
    };
    let out = apply.await.unwrap();
    done.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let after = uids(&pods, &w).await;
    assert_eq!(after.len(), 4);
    for n in &names {
        assert_ne!(after[n].0, before[n].0, "{n} was not replaced");
        assert!(after[n].1, "{n} not Ready at the end");
    }
    assert_eq!(
        printed.matches("replaced, Ready and registered").count(),
        4,
        "{printed}"
    );
    assert_eq!(
        job_state(job).await,
        vec!["COMPLETED".to_string()],
        "the job was killed"
    );
    assert!(
        !killed.load(Ordering::SeqCst),
        "the busy worker was deleted while its job ran"
    );
    assert!(
        max_out.load(Ordering::SeqCst) <= 1,
        "{} workers out at once",
        max_out.load(Ordering::SeqCst)
    );
    // The busy worker went last: idle ones first; none forced.
    assert!(!printed.contains("deleted anyway"), "{printed}");
    let deletes: Vec<&str> = printed
        .lines()
        .filter_map(|l| l.strip_suffix(" drained, pod deleted"))
        .filter_map(|l| l.split(": ").nth(1))
        .collect();
    assert_eq!(deletes.len(), 4, "{printed}");
    assert_eq!(deletes.last(), Some(&busy.as_str()), "{printed}");
    for n in &names {
        let node = s.get(n).await.unwrap();
        assert!(!node.state.has("DRAIN"), "{n} left drained: {}", node.state);
    }
    env.cleanup().await;
}
}

/// Applies image a (waiting for Ready workers, idle in Slurm), then image b: the StatefulSet is
/// updated, every worker is outdated and nothing replaced yet.
/// Applies W's NodeSet of REPLICAS workers, then a new image without rolling; returns the new
/// cluster.yaml.
async fn deployed_then_changed(env: &TestEnv, w: &str, replicas: u32) -> String {
    let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_admin), None)
        .await
        .unwrap();
    for (image, wait) in [
        ("registry.example/slurmd:a", Some(Duration::from_secs(90))),
        ("registry.example/slurmd:b", None),
    ] {
        let text = support::four_workers(&env.ns, w, image)
            .replace("replicas: 4", &format!("replicas: {replicas}"));
        let c = slurmops::cluster::load("cluster.yaml", &text).unwrap();
        let opts = slurmops::apply::Options {
            wait,
            ..Default::default()
        };
        slurmops::apply::apply(
            &cluster,
            &c,
            &text,
            &slurmops::render::render(&c),
            &opts,
            &slurmops::apply::NoSlurm,
        )
        .await
        .unwrap();
    }
    support::four_workers(&env.ns, w, "registry.example/slurmd:b")
        .replace("replicas: 4", &format!("replicas: {replicas}"))
}

/// `slurmops rollout` as the library runs it: the controller's pass over TEXT's NodeSets, looped.
async fn roll(
    text: &str,
    slurm: &Client,
    until: slurmops::controller::drive::Until,
    observer: slurmops::rollout::Observer,
) -> Result<slurmops::controller::drive::Driven, slurmops::controller::drive::RolloutError> {
    let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_admin), None)
        .await
        .unwrap();
    let c = slurmops::cluster::load("cluster.yaml", text).unwrap();
    let r = slurmops::render::render(&c);
    let rollout = slurmops::controller::drive::Rollout {
        c: &c,
        text,
        rendered: &r,
        node_set: None,
        decrees: Default::default(),
        until,
        observer,
        watch: true,
    };
    slurmops::controller::drive::roll(&cluster, slurm, &rollout).await
}

on_each_slurm! {
async fn slurm_unreachable_past_the_outage_timeout_stops_the_rollout_with_nothing_deleted() {
    let env = TestEnv::new("rollfc").await;
    env.grant_slurmops_role().await;
    let w = env.name("f");
    let text = deployed_then_changed(&env, &w, 4).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let before = uids(&pods, &w).await;
    assert_eq!(before.len(), 4);
    let mut cfg = Config::new(
        "http://127.0.0.1:9",
        Credentials::Token {
            token: Secret::new("x"),
            user: None,
        },
    );
    cfg.attempts = 2;
    let dead = Client::new(cfg).unwrap();
    let until = slurmops::controller::drive::Until {
        poll: Duration::from_millis(200),
        slurm_outage_timeout: Duration::from_secs(3),
        ..slurmops::controller::drive::Until::for_people()
    };
    let err = roll(&text, &dead, until, Default::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Slurm state unknown, so nothing was deleted"),
        "{err}"
    );
    assert_eq!(
        uids(&pods, &w).await,
        before,
        "a pod was deleted while Slurm was unreachable"
    );
    env.cleanup().await;
}
}

on_each_slurm! {
/// slurmrestd stops in the middle of a rollout: the rollout pauses (no pod is deleted while it is
/// down) and finishes once it is back. A node an administrator drained before the rollout is
/// replaced like the others but stays drained, with the administrator's reason.
async fn slurm_outage_pauses_the_rollout_and_an_admin_drain_survives_it() {
    use slurmops::rollout::Event;
    let env = TestEnv::new("rollout-outage").await;
    let w = env.name("o");
    let text = deployed_then_changed(&env, &w, 3).await;
    let names: Vec<String> = (0..3).map(|i| format!("{w}-{i}")).collect();
    let shared = slurm();
    for n in &names {
        eventually(&format!("{n} idle"), Duration::from_secs(30), async || {
            let node = shared.get(n).await.ok()?;
            (node.state.has("IDLE") && !node.state.has("NOT_RESPONDING")).then_some(())
        })
        .await;
    }
    let admin = names[2].clone();
    support::slurm::sh(&[
        "exec",
        support::slurm_instance(),
        "scontrol",
        "update",
        &format!("nodename={admin}"),
        "state=drain",
        "reason=disk check by admin",
    ]);

    // This rollout talks to its own slurmrestd, which the test stops and starts again.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let restd = format!("restd-{}", support::unique_suffix());
    let inst = support::slurm_instance();
    support::slurm::sh(&["start-restd", inst, &port.to_string(), &restd]);
    let mut cfg = Config::new(
        format!("http://127.0.0.1:{port}"),
        Credentials::Token {
            token: Secret::new(bed().slurm_jwt.clone()),
            user: None,
        },
    );
    cfg.attempts = 2;
    let own = Client::new(cfg).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let until = slurmops::controller::drive::Until {
        poll: Duration::from_millis(300),
        progress_timeout: Duration::from_secs(60),
        ..slurmops::controller::drive::Until::for_people()
    };
    let observer = slurmops::rollout::Observer::new(move |_, e| {
        let _ = tx.send(e.clone());
    });
    let rolling = {
        let w = w.clone();
        tokio::spawn(async move {
            roll(&text, &own, until, observer)
                .await
                .map(|d| d.rollouts.get(&w).cloned().unwrap_or_default())
        })
    };
    let next = async |rx: &mut tokio::sync::mpsc::UnboundedReceiver<Event>, what: &str| {
        tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no event while waiting for {what}"))
            .expect("rollout ended early")
    };
    // Stop slurmrestd once the first worker is back.
    while !matches!(next(&mut rx, "a Ready worker").await, Event::Ready { .. }) {}
    support::slurm::sh(&["stop-restd", inst, &restd]);
    while !matches!(
        next(&mut rx, "the outage").await,
        Event::SlurmUnreachable { .. }
    ) {}
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let during = uids(&pods, &w).await;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = uids(&pods, &w).await;
        // A pod whose deletion was issued before the outage (drained while Slurm answered)
        // finishes terminating; every other pod must stay exactly as it is.
        for (n, (uid, _, _)) in during.iter().filter(|(_, (_, _, deleting))| !deleting) {
            let (now_uid, _, now_deleting) = now.get(n).expect("pod gone while Slurm was down");
            assert!(
                now_uid == uid && !now_deleting,
                "{n} deleted while slurmrestd was down"
            );
        }
    }
    assert!(!rolling.is_finished(), "the rollout did not wait for Slurm");
    support::slurm::sh(&["start-restd", inst, &port.to_string(), &restd]);
    let report = tokio::time::timeout(Duration::from_secs(120), rolling)
        .await
        .expect("rollout finished after Slurm came back")
        .unwrap()
        .unwrap();
    support::slurm::sh(&["stop-restd", inst, &restd]);
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    assert!(events.contains(&Event::SlurmBack), "{events:?}");
    let mut replaced = report.replaced.clone();
    replaced.sort();
    assert_eq!(replaced, names, "{report:?}");

    // The administrator's drain: left to them, kept through the replacement, never resumed.
    assert!(
        report.events.contains(&Event::Drain {
            node: admin.clone(),
            ours: false
        }),
        "{report:?}"
    );
    assert!(!report.events.contains(&Event::Resume {
        node: admin.clone()
    }));
    eventually(
        "admin node registered again",
        Duration::from_secs(30),
        async || {
            let n = shared.get(&admin).await.ok()?;
            (!n.state.has("NOT_RESPONDING")).then_some(n)
        },
    )
    .await;
    let n = shared.get(&admin).await.unwrap();
    assert!(n.state.has("DRAIN"), "{admin}: {}", n.state);
    assert_eq!(n.reason, "disk check by admin");
    for other in names.iter().filter(|n| **n != admin) {
        let n = shared.get(other).await.unwrap();
        assert!(!n.state.has("DRAIN"), "{other} left drained: {}", n.state);
    }
    env.cleanup().await;
}
}

on_each_slurm! {
async fn scale_in_removes_workers_only_after_they_are_drained_and_their_job_completed() {
    let env = TestEnv::new("scalein").await;
    env.grant_slurmops_role().await;
    let w = env.name("s");
    let dir = tempfile::tempdir().unwrap();
    let yaml = |replicas: u32| {
        support::four_workers(&env.ns, &w, "registry.example/slurmd:a")
            .replace("replicas: 4", &format!("replicas: {replicas}"))
    };
    let run_with = |args: &[&str], with_slurm: bool| {
        let b = bed();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"));
        cmd.args(args).arg(dir.path());
        if with_slurm {
            cmd.args([
                "--slurmrestd-url",
                &b.slurmrestd_url,
                "--slurm-jwt",
                &b.slurm_jwt,
            ]);
        }
        let out = cmd
            .env("KUBECONFIG", &b.kubeconfig_restricted)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let run = |args: &[&str]| run_with(args, true);
    std::fs::write(dir.path().join("cluster.yaml"), yaml(4)).unwrap();
    let (code, out, err) = run(&["apply", "--wait", "90s"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let s = slurm();
    let top = format!("{w}-3");
    eventually("worker idle", Duration::from_secs(30), async || {
        let n = s.get(&top).await.ok()?;
        (n.state.has("IDLE") && !n.state.has("NOT_RESPONDING")).then_some(())
    })
    .await;
    let job = submit_sleep(&top, 8).await;
    eventually("job running", Duration::from_secs(20), async || {
        job_state(job)
            .await
            .iter()
            .any(|x| x == "RUNNING")
            .then_some(())
    })
    .await;

    std::fs::write(dir.path().join("cluster.yaml"), yaml(2)).unwrap();
    // Without Slurm to confirm the drains, apply refuses and changes nothing.
    let (code, _, err) = run_with(&["apply", "--wait", "0s"], false);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!("refusing to scale NodeSet {w} from 4 to 2")) && err.contains(&top),
        "{err}"
    );
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let before = uids(&pods, &w).await;
    assert_eq!(before.len(), 4, "apply removed workers anyway");

    // With Slurm, one pass (--no-wait): the two leaving workers are drained, the StatefulSet
    // keeps its 4 replicas while the job runs, and apply says what waits for which job.
    let (code, out, err) = run(&["apply", "--wait", "0s", "--no-wait"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("{w}: drained before removal: {w}-3, {w}-2")),
        "{out}"
    );
    assert!(out.contains("not finished (--no-wait)"), "{out}");
    assert!(
        out.contains(&format!("{top} waits for job {job} (root")),
        "{out}"
    );
    assert_eq!(
        uids(&pods, &w).await.len(),
        4,
        "a worker left while its job ran"
    );
    // Looping the pass: apply waits for the job, then scales in.
    let (code, out, err) = run(&["apply", "--wait", "60s"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(job_state(job).await, vec!["COMPLETED".to_string()]);
    eventually(
        "the two highest workers gone",
        Duration::from_secs(30),
        async || (uids(&pods, &w).await.len() == 2).then_some(()),
    )
    .await;
    let after = uids(&pods, &w).await;
    for i in 0..2 {
        let n = format!("{w}-{i}");
        assert_eq!(after[&n].0, before[&n].0, "{n} was replaced by a scale-in");
    }
    env.cleanup().await;
}
}
