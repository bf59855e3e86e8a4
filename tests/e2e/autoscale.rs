//! Autoscale end to end on the test bed: jobs pending in a partition scale its NodeSet out, idle
//! workers are drained and removed after the delay, and apply does not fight the autoscaler.

use crate::support;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use slurmops::slurm::SlurmNodes;

use crate::support::slurm::cli as slurmops;
use crate::support::slurm::client as slurm;
use crate::support::slurm::{job_state, submit_to_partition};
use crate::support::{TestEnv, bed, eventually};

fn cluster_yaml(ns: &str, w: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - name: {w}
      replicas: 1
      cpu: "1"
      memory: 256Mi
      features: [burst]
      autoscale: {{min: 1, max: 3, scaleDownDelay: 6s}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
    - {{name: burst, nodeSets: [{w}]}}
"#
        )
}

async fn replicas(sts: &Api<StatefulSet>, name: &str) -> Option<i32> {
    sts.get(name).await.ok()?.spec?.replicas
}

on_each_slurm! {
async fn pending_jobs_scale_out_and_idle_workers_scale_in_through_drain() {
    let env = TestEnv::new("autoscale").await;
    env.grant_slurmops_role().await;
    let w = env.name("a");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), cluster_yaml(&env.ns, &w)).unwrap();
    let out = slurmops(dir.path(), &["apply", "--wait", "90s"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = slurm();
    let first = format!("{w}-0");
    eventually("first worker idle", Duration::from_secs(30), async || {
        let n = s.get(&first).await.ok()?;
        (n.state.has("IDLE") && !n.state.has("NOT_RESPONDING")).then_some(())
    })
    .await;

    // Three one-CPU jobs for a one-worker partition: one runs, two pend.
    let mut jobs = Vec::new();
    for _ in 0..3 {
        jobs.push(submit_to_partition("burst", 8).await);
    }
    eventually("one job running", Duration::from_secs(30), async || {
        (job_state(jobs[0]).await == vec!["RUNNING".to_string()]).then_some(())
    })
    .await;
    // The live plan says what autoscale is about to do, as the daemon's pass decides it.
    let out = slurmops(dir.path(), &["plan", "--cluster"]).output().unwrap();
    let plan = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        plan.contains(&format!("next pass: scale {w} (NodeSet {w}) (autoscale: 1 -> 3 workers")),
        "{plan}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = dir.path().join("autoscale.log");
    let mut autoscaler = slurmops(dir.path(), &["autoscale", "--interval", "1s"])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();

    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    eventually("scaled out to 3", Duration::from_secs(30), async || {
        (replicas(&sts, &w).await == Some(3)).then_some(())
    })
    .await;
    // apply (git unchanged, replicas: 1 there) leaves the autoscaler's replicas alone.
    let out = slurmops(dir.path(), &["apply", "--wait", "0s"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        replicas(&sts, &w).await,
        Some(3),
        "apply fought the autoscaler"
    );

    // Sample while scaling in: a worker pod going away while its node is in Slurm and not drained.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let done = Arc::new(AtomicBool::new(false));
    let undrained_removal = Arc::new(std::sync::Mutex::new(None::<String>));
    let sampler = {
        let (done, bad, pods, w) = (
            done.clone(),
            undrained_removal.clone(),
            pods.clone(),
            w.clone(),
        );
        tokio::spawn(async move {
            let s = slurm();
            while !done.load(Ordering::SeqCst) {
                let lp = ListParams::default().labels(&format!("slurmops.dev/nodeset={w}"));
                let live: BTreeMap<String, bool> = pods
                    .list(&lp)
                    .await
                    .map(|l| {
                        l.items
                            .into_iter()
                            .map(|p| {
                                (
                                    p.metadata.name.clone().unwrap(),
                                    p.metadata.deletion_timestamp.is_some(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                for i in 1..3 {
                    let name = format!("{w}-{i}");
                    let going = live.get(&name).copied().unwrap_or(true);
                    if let (true, Ok(n)) = (going, s.get(&name).await)
                        && !n.state.has("DRAIN")
                    {
                        *bad.lock().unwrap() = Some(format!("{name}: {}", n.state));
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };

    for j in &jobs {
        eventually(
            &format!("job {j} completed"),
            Duration::from_secs(90),
            async || (job_state(*j).await == vec!["COMPLETED".to_string()]).then_some(()),
        )
        .await;
    }
    eventually("scaled back in to 1", Duration::from_secs(60), async || {
        (replicas(&sts, &w).await == Some(1)).then_some(())
    })
    .await;
    eventually("leaving pods gone", Duration::from_secs(30), async || {
        let n = pods
            .list(&ListParams::default().labels(&format!("slurmops.dev/nodeset={w}")))
            .await
            .ok()?
            .items
            .len();
        (n == 1).then_some(())
    })
    .await;
    done.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    let _ = autoscaler.kill();
    let _ = autoscaler.wait();
    assert_eq!(
        *undrained_removal.lock().unwrap(),
        None,
        "a worker was removed without being drained first"
    );
    let n = s.get(&first).await.unwrap();
    assert!(!n.state.has("DRAIN"), "min worker drained: {}", n.state);

    let printed = std::fs::read_to_string(&log).unwrap();
    assert!(
        printed.contains(&format!(
            "{w}: scaled 1 -> 3: pending jobs ask for 2 worker(s), 1 worker(s) busy"
        )),
        "{printed}"
    );
    // Scale-in may take one step or two (workers go idle at slightly different times).
    let scale_in: Vec<&str> = printed
        .lines()
        .filter(|l| l.contains(": idle for 6s, no pending jobs"))
        .collect();
    assert!(
        scale_in
            .first()
            .is_some_and(|l| l.starts_with(&format!("{w}: scaled 3 -> ")))
            && scale_in.last().is_some_and(|l| l.contains(" -> 1: ")),
        "{printed}"
    );
    // Visible on the StatefulSet: its annotation and Events.
    let live = sts.get(&w).await.unwrap();
    let note = live.metadata.annotations.unwrap_or_default();
    assert!(
        note["slurmops.dev/autoscale"].ends_with("-> 1: idle for 6s, no pending jobs"),
        "{note:?}"
    );
    let events: Api<Event> =
        Api::namespaced(support::client(&bed().kubeconfig_admin).await, &env.ns);
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(w.as_str()))
        .filter_map(|e| e.reason)
        .collect();
    assert!(reasons.contains(&"ScaledOut".to_string()), "{reasons:?}");
    assert!(reasons.contains(&"ScaledIn".to_string()), "{reasons:?}");
    env.cleanup().await;
}
}

on_each_slurm! {
/// A pending 3-node job in a partition of two autoscaled NodeSets adds the workers it lacks
/// between them (idle ones first, then the lower weight), counted once, and then runs. Counting
/// jobs instead (one per NodeSet) would add one worker and leave it pending for ever. (Slurm
/// refuses a job asking more nodes than its partition has, so the partition starts with four.)
async fn a_multi_node_job_scales_the_node_sets_of_its_partition_by_its_node_count_once() {
    let env = TestEnv::new("multi").await;
    env.grant_slurmops_role().await;
    let (a, b) = (env.name("ma"), env.name("mb"));
    let yaml = support::cluster_head("c", &env.ns)
        + &format!(
            r#"  nodeSets:
    - {{name: {a}, replicas: 2, cpu: "1", memory: 256Mi, weight: 1, features: [multi], autoscale: {{min: 2, max: 4, scaleDownDelay: 600s}}}}
    - {{name: {b}, replicas: 2, cpu: "1", memory: 256Mi, weight: 5, features: [multi], autoscale: {{min: 2, max: 4, scaleDownDelay: 600s}}}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
    - {{name: multi, nodeSets: [{a}, {b}]}}
"#
        );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), yaml).unwrap();
    let out = slurmops(dir.path(), &["apply", "--wait", "90s"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = slurm();
    let workers = [format!("{a}-0"), format!("{a}-1"), format!("{b}-0"), format!("{b}-1")];
    for w in &workers {
        eventually(&format!("{w} idle"), Duration::from_secs(60), async || {
            let n = s.get(w).await.ok()?;
            (n.state.has("IDLE") && !n.state.has("NOT_RESPONDING")).then_some(())
        })
        .await;
    }
    // Three workers busy, one idle; then a job for three nodes.
    let mut long = Vec::new();
    for w in &workers[..3] {
        long.push(support::slurm::submit_job(serde_json::json!({"partition": "multi", "required_nodes": [w]}), 300).await);
    }
    for (w, j) in workers[..3].iter().zip(&long) {
        eventually(&format!("job {j} running on {w}"), Duration::from_secs(30), async || {
            (job_state(*j).await == vec!["RUNNING".to_string()]).then_some(())
        })
        .await;
    }
    let job = support::slurm::submit_job(serde_json::json!({"partition": "multi",
        "minimum_nodes": 3, "maximum_nodes": 3, "tasks": 3}), 5)
    .await;
    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    let out = slurmops(dir.path(), &["autoscale", "--once"]).output().unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{printed}{}", String::from_utf8_lossy(&out.stderr));
    let (ra, rb) = (replicas(&sts, &a).await.unwrap(), replicas(&sts, &b).await.unwrap());
    assert_eq!((ra, rb), (4, 2), "the idle worker of {b} and two new ones of {a} (lower weight):\n{printed}");
    eventually("the 3-node job runs and completes", Duration::from_secs(120), async || {
        (job_state(job).await == vec!["COMPLETED".to_string()]).then_some(())
    })
    .await;
    for j in long {
        support::slurm::sh(&["exec", support::slurm_instance(), "scancel", &j.to_string()]);
    }
    env.cleanup().await;
}
}

on_oldest_and_newest_slurm! {
async fn scale_in_gives_back_idle_workers_below_a_busy_one() {
    let env = TestEnv::new("autoscale-any").await;
    env.grant_slurmops_role().await;
    let w = env.name("m");
    let yaml = support::cluster_head("c", &env.ns)
        + &format!(
            r#"  nodeSets:
    - name: {w}
      replicas: 3
      podManagement: slurmops
      cpu: "1"
      memory: 256Mi
      autoscale: {{min: 1, max: 3, scaleDownDelay: 6s}}
  partitions:
    - {{name: {w}, nodeSets: [ALL], default: true}}
"#
        );
    // The partition is the test's own: the bed's Slurm is shared, and other tests' jobs
    // pending in `all` would be demand for these workers (seen: the autoscaler held for them
    // until this test's job had ended).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), &yaml).unwrap();
    let apply = |wait: &str| {
        let out = slurmops(dir.path(), &["apply", "--wait", wait]).output().unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    apply("90s");
    let s = slurm();
    let names: Vec<String> = (0..3).map(|i| format!("{w}-{i}")).collect();
    for n in &names {
        eventually(&format!("{n} idle"), Duration::from_secs(60), async || {
            let x = s.get(n).await.ok()?;
            (x.state.has("IDLE") && !x.state.has("NOT_RESPONDING")).then_some(())
        })
        .await;
    }
    // A long job on the highest worker; the two below it are idle.
    let busy = &names[2];
    let job = support::slurm::submit_sleep(busy, 40).await;
    eventually("the job running", Duration::from_secs(30), async || {
        (job_state(job).await == vec!["RUNNING".to_string()]).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let uid = pods.get(busy).await.unwrap().metadata.uid;
    // The live plan of a git scale-in to one worker names the idle workers, not the busy one.
    let git = tempfile::tempdir().unwrap();
    let one = yaml
        .replace("      replicas: 3\n", "      replicas: 1\n")
        .replace("      autoscale: {min: 1, max: 3, scaleDownDelay: 6s}\n", "");
    std::fs::write(git.path().join("cluster.yaml"), one).unwrap();
    let out = slurmops(git.path(), &["plan", "--cluster"]).output().unwrap();
    let plan = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(2), "{plan}");
    assert!(plan.contains("3 -> 1 workers (idle workers are drained"), "{plan}");
    for n in &names[..2] {
        assert!(plan.contains(&format!("node {n} (NodeSet {w}) drains: idle")), "{plan}");
    }
    assert!(!plan.contains(&format!("node {busy} ")), "the busy worker stays:\n{plan}");
    // What the autoscaler says goes with the test's output (shown when it fails).
    let mut autoscaler = slurmops(dir.path(), &["autoscale", "--interval", "1s"])
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Each worker's state and reason as Slurm shows them, printed when they change (what a
    // timeout is read with: CI once waited 40 s for worker 0 on Slurm 24.11).
    let seen = std::sync::Mutex::new(std::collections::BTreeMap::new());
    for n in &names[..2] {
        eventually(&format!("{n} drained by autoscale"), Duration::from_secs(40), async || {
            for m in &names {
                let now = match s.get(m).await {
                    Ok(x) => format!("{:?} {:?}", x.state, x.reason),
                    Err(e) => format!("unreadable: {e}"),
                };
                if seen.lock().unwrap().insert(m.clone(), now.clone()).as_ref() != Some(&now) {
                    eprintln!("[autoscale] {m}: {now}");
                }
            }
            let x = s.get(n).await.ok()?;
            (x.state.has("DRAIN") && x.reason == "slurmops: autoscale").then_some(())
        })
        .await;
    }
    // A later pass of the autoscaler lowers the count over the workers Slurm reports drained
    // (a scale-in never waits inside a pass); then the controller pass deletes the drained
    // pods, and the busy one stays.
    let templates: Api<k8s_openapi::api::core::v1::PodTemplate> =
        Api::namespaced(env.client.clone(), &env.ns);
    eventually("the count lowered to 1", Duration::from_secs(30), async || {
        let t = templates.get(&w).await.ok()?;
        let count = t.metadata.annotations?.get(slurmops::vocab::ANNOTATION_REPLICAS)?.clone();
        (count == "1").then_some(())
    })
    .await;
    apply("60s");
    let _ = autoscaler.kill();
    let _ = autoscaler.wait();
    let left: Vec<String> = pods
        .list(&ListParams::default().labels(&format!("slurmops.dev/nodeset={w}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(left, vec![busy.clone()], "the idle workers below the busy one were given back");
    assert_eq!(pods.get(busy).await.unwrap().metadata.uid, uid, "{busy} was replaced");
    let x = s.get(busy).await.unwrap();
    assert!(!x.state.has("DRAIN"), "{busy} was drained: {:?}", x.state);
    assert_eq!(job_state(job).await, vec!["RUNNING".to_string()]);
    eventually("the job COMPLETED", Duration::from_secs(60), async || {
        (job_state(job).await == vec!["COMPLETED".to_string()]).then_some(())
    })
    .await;
    env.cleanup().await;
}
}

on_each_slurm! {
async fn a_node_set_at_zero_scales_out_for_a_job_in_its_empty_partition_and_the_job_runs() {
    let env = TestEnv::new("autoscale-zero").await;
    env.grant_slurmops_role().await;
    let w = env.name("z");
    // The bed's `zero` partition has no worker yet, only the FUTURE placeholder its autoscaled
    // NodeSet renders; this NodeSet's workers join it through the `zero` feature.
    let yaml = support::cluster_head("c", &env.ns)
        + &format!(
            r#"  nodeSets:
    - name: {w}
      replicas: 0
      cpu: "1"
      memory: 256Mi
      features: [zero]
      autoscale: {{min: 0, max: 2, scaleDownDelay: 6s}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
    - {{name: zero, nodeSets: [{w}]}}
"#
        );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), &yaml).unwrap();
    let out = slurmops(dir.path(), &["apply", "--wait", "90s"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    assert_eq!(replicas(&sts, &w).await, Some(0));
    // Slurm takes the job although the partition has no worker (no error 2014).
    let job = submit_to_partition("zero", 5).await;
    let mut autoscaler = slurmops(dir.path(), &["autoscale", "--interval", "1s"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    eventually("scaled out from 0 to 1", Duration::from_secs(30), async || {
        (replicas(&sts, &w).await == Some(1)).then_some(())
    })
    .await;
    eventually("the job COMPLETED on the new worker", Duration::from_secs(90), async || {
        (job_state(job).await == vec!["COMPLETED".to_string()]).then_some(())
    })
    .await;
    let _ = autoscaler.kill();
    let _ = autoscaler.wait();
    env.cleanup().await;
}
}
