//! Maintenance windows end to end: the daemon follows a repository, against the bed's real Slurm,
//! with a real slurmd per worker pod. A window opens every even minute for one minute; a NodeSet
//! with `window: required` is changed in an odd minute while a real job runs on one of its
//! workers: nothing drains until the window opens, then every worker rolls inside it.

#[macro_use]
mod support;

use std::time::Duration;

use slurmops::slurm::SlurmNodes;

use support::daemon::{applied, status};
use support::eventually;
use support::gitops::{Bed, running};
use support::slurm::{job_state, submit_sleep};

fn cluster(ns: &str, set: &str, image: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  policy:
    maintenanceWindows:
      - {{schedule: "*/2 * * * *", duration: 1m}}
  nodeSets:
    - name: {set}
      replicas: 2
      cpu: "1"
      memory: 256Mi
      image: {image}
      update: {{maxUnavailable: 2, window: required}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
        )
}

fn now() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

/// Sleeps until the next minute of the given parity starts (even: a window opens).
async fn until_minute(even: bool) {
    loop {
        let t = now();
        if (t / 60) % 2 == i64::from(!even) && t % 60 < 2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

on_each_slurm! {
async fn a_rollout_outside_its_window_waits_and_runs_inside_it() {
    let t = Bed::new("window").await;
    let set = t.env.name("wn");
    let daemon = t.deployed(&cluster(&t.env.ns, &set, "img:1"), "d", &[(&set, 2)]).await;
    let uids = async || -> std::collections::BTreeMap<String, String> {
        t.pods(&set).await.into_iter().map(|(n, (uid, _))| (n, uid)).collect()
    };
    let before = uids().await;
    let s = support::slurm::client();

    // An odd minute: no window. A job runs on the first worker; the change is pushed.
    until_minute(false).await;
    let busy = format!("{set}-0");
    let job = submit_sleep(&busy, 30).await;
    running(job).await;
    let commit = t.repo.push(&cluster(&t.env.ns, &set, "img:2"), "img:2");
    applied(&t.env, &commit, Duration::from_secs(20)).await;
    // Until the window opens, no worker is drained and status says what waits for what.
    let st = eventually("status names the window wait", Duration::from_secs(20), async || {
        let st = status(&t.env).await?;
        let p = st.progress().into_iter().find(|p| p.node_set == set)?;
        p.window.clone()
    })
    .await;
    assert_eq!(st.workers.len(), 2, "{st:?}");
    let opens = st.opens.expect("the next window");
    assert_eq!(opens % 120, 0, "windows open at even minutes: {opens}");
    let reservation = format!("slurmops-maint-{set}");
    let reserves = support::slurm_release() != "24.11";
    let late = if reserves {
        // Ahead of the window, a MAINT reservation holds the workers from its start...
        let r = eventually("the reservation", Duration::from_secs(20), async || {
            s.reservations().await.ok()?.into_iter().find(|r| r.name == reservation)
        })
        .await;
        assert_eq!(r.nodes, [format!("{set}-0"), format!("{set}-1")]);
        assert_eq!((r.start_time, r.end_time), (Some(opens), Some(opens + 60)));
        assert!(r.flags.iter().any(|f| f == "MAINT"), "{:?}", r.flags);
        // ...so a job that would still run when it starts does not start there.
        let late = submit_sleep(&format!("{set}-1"), 600).await;
        Some(late)
    } else {
        // slurmrestd 24.11 cannot create reservations: status says so.
        let st = eventually("the reservation note", Duration::from_secs(20), async || {
            let st = status(&t.env).await?;
            st.progress().into_iter().find(|p| p.node_set == set)?.window?.reservation
        })
        .await;
        assert!(st.contains("v0.0.43"), "{st}");
        None
    };
    while now() < opens - 2 {
        for i in 0..2 {
            let n = s.get(&format!("{set}-{i}")).await.unwrap();
            assert!(!n.state.has("DRAIN"), "{set}-{i} drained outside the window: {}", n.reason);
        }
        assert_eq!(uids().await, before, "a pod was replaced outside the window");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    assert_eq!(job_state(job).await, ["COMPLETED"], "the job ran undisturbed");
    if let Some(late) = late {
        assert_eq!(job_state(late).await, ["PENDING"], "a job overlapping the window started");
    }

    // Inside the window: every worker rolls.
    eventually("every worker rolled in the window", Duration::from_secs(90), async || {
        let st = status(&t.env).await?;
        let p = st.progress().into_iter().find(|p| p.node_set == set)?;
        (p.done && p.updated == 2).then_some(())
    })
    .await;
    assert!(now() < opens + 60 + 5, "the rollout ran past its window");
    if let Some(late) = late {
        // Done: the reservation is given back, and the held job may run.
        eventually("the reservation deleted", Duration::from_secs(20), async || {
            let rs = s.reservations().await.ok()?;
            rs.iter().all(|r| r.name != reservation).then_some(())
        })
        .await;
        support::slurm::sh(&["exec", support::slurm_instance(), "scancel", &late.to_string()]);
    }
    let after = uids().await;
    for (name, uid) in &before {
        assert_ne!(after.get(name), Some(uid), "{name} not replaced");
    }
    drop(daemon);
    t.env.cleanup().await;
}
}
