//! Maintenance windows end to end: the daemon follows a repository, against the bed's real Slurm,
//! with a real slurmd per worker pod. A NodeSet with `window: required` is changed while a real job
//! runs on one of its workers, in a commit whose two-minute window opens at the first whole minute
//! at least 75 s later: nothing drains until the window opens, then every worker rolls inside it.
//! On Slurm 24.11, whose slurmrestd cannot make reservations, the window's reservation is made by
//! the controller pod's `reconfigure` sidecar (run here as a kubelet would, against the shared
//! slurmctld) from the ConfigMap the controller writes.
//! A setting that restarts slurmctld, under `controlPlaneWindow: required`, waits the same way.

use crate::support;

use std::time::Duration;

use slurmops::slurm::SlurmNodes;

use crate::support::ctld_files::SharedSidecar;
use crate::support::daemon::{applied, status};
use crate::support::eventually;
use crate::support::gitops::{Bed, running};
use crate::support::slurm::{job_state, submit_sleep};

/// A daily window at the START (UNIX seconds, a whole minute), two minutes long.
pub(crate) fn cluster(ns: &str, set: &str, image: &str, start: i64) -> String {
    let (minute, hour) = ((start / 60) % 60, (start / 3600) % 24);
    support::cluster_head("c", ns)
        + &format!(
            r#"  policy:
    maintenanceWindows:
      - {{schedule: "{minute} {hour} * * *", duration: 2m}}
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

/// The first whole minute at least SECS from now.
pub(crate) fn minute_after(secs: i64) -> i64 {
    (now() + secs + 59) / 60 * 60
}

on_each_slurm! {
async fn a_rollout_outside_its_window_waits_and_runs_inside_it() {
    let t = Bed::new("window").await;
    let set = t.env.name("wn");
    let first = cluster(&t.env.ns, &set, "img:1", minute_after(12 * 3600));
    let daemon = t.deployed(&first, "d", &[(&set, 2)]).await;
    // Slurm 24.11's slurmrestd cannot make reservations: the controller pod's sidecar does, as
    // a kubelet would run it beside slurmctld.
    let sidecar = match support::slurm_release() {
        "24.11" => Some(SharedSidecar::start(&t.env.client, &t.env.ns, "c").await),
        _ => None,
    };
    // Whoever else may write that ConfigMap: entries that are malformed, over, or on nodes
    // that are not a list make no reservation (and the controller does not count them).
    let junk = [
        ("slurmops-maint-junk-a", "soon later x-0\n".to_string()),
        ("slurmops-maint-junk-b", format!("1.5 {} x-0\n", now() + 3600)),
        ("slurmops-maint-junk-c", format!("{} {} x-0;reboot\n", now() + 60, now() + 3600)),
        ("slurmops-maint-junk-d", format!("{} {} {set}-0\n", now() - 120, now() - 60)),
    ];
    if sidecar.is_some() {
        use kube::api::{Patch, PatchParams};
        let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(t.env.client.clone(), &t.env.ns);
        let data: std::collections::BTreeMap<_, _> = junk.iter().cloned().collect();
        let patch = serde_json::json!({"data": data});
        cms.patch("c-maintenance", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let uids = async || -> std::collections::BTreeMap<String, String> {
        t.pods(&set).await.into_iter().map(|(n, (uid, _))| (n, uid)).collect()
    };
    let before = uids().await;
    let s = support::slurm::client();

    // No window is open. A job runs on the first worker; the change is pushed.
    let busy = format!("{set}-0");
    let job = submit_sleep(&busy, 30).await;
    running(job).await;
    let window = minute_after(75);
    let head = cluster(&t.env.ns, &set, "img:2", window);
    // The plan of the change against the live cluster: when, on which workers, and the queue
    // its reservation holds back: held jobs of the partition, one with no time limit (it would
    // run into the window) and one of a minute (it would end before the window opens).
    let queue = |limit: Option<u32>| {
        let mut job = serde_json::json!({"partition": "all", "required_nodes": [format!("{set}-1")], "hold": true});
        if let Some(m) = limit {
            job["time_limit"] = serde_json::json!({"set": true, "infinite": false, "number": m});
        }
        support::slurm::submit_job(job, 1)
    };
    let (unlimited, short) = (queue(None).await, queue(Some(1)).await);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), &head).unwrap();
    let out = support::slurm::cli(dir.path(), &["plan", "--cluster"])
        .env("KUBECONFIG", &support::bed().kubeconfig_admin)
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&out.stdout);
    // The window in its schedule's zone (UTC), as a schedule reads: `Wed 2026-11-25 12:34–12:36`.
    let utc = |t: i64| {
        let z = k8s_openapi::jiff::Timestamp::from_second(t).unwrap();
        z.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
    };
    let (opens, closes) = (utc(window), utc(window + 120));
    let day = "%a %Y-%m-%d %H:%M";
    let end = match opens.date() == closes.date() {
        true => format!("–{}", closes.strftime("%H:%M")),
        false => format!(" – {}", closes.strftime(day)),
    };
    let expected = format!(
        "NodeSet {set}: waits for a maintenance window (no worker drains outside one): next {}{end} UTC (in ",
        opens.strftime(day)
    );
    assert!(plan.contains(&expected), "{plan}{}", String::from_utf8_lossy(&out.stderr));
    let reservation =
        format!("reservation slurmops-maint-{set} on {set}-[0-1] from the window's start keeps ");
    let counts: Vec<usize> = plan
        .split(&reservation)
        .nth(1)
        .map(|rest| rest.split(' ').filter_map(|w| w.parse().ok()).take(2).collect())
        .unwrap_or_else(|| panic!("{plan}"));
    // Other tests may queue jobs in the shared partition too: at least ours are counted, and
    // the one-minute job is pending but not held back.
    let [held_back, pending] = counts[..] else { panic!("{plan}") };
    assert!(held_back >= 1 && pending > held_back, "{plan}");
    assert!(
        plan.contains("pending jobs (partitions all) off them now: their time limits run past the window's start"),
        "{plan}"
    );
    for job in [unlimited, short] {
        support::slurm::sh(&["exec", support::slurm_instance(), "scancel", &job.to_string()]);
    }
    let commit = t.repo.push(&head, "img:2");
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
    assert_eq!(opens, window, "the window the commit names");
    let reservation = format!("slurmops-maint-{set}");
    // Ahead of the window, a MAINT reservation holds the workers from its start (on 24.11,
    // made by slurmctld's sidecar from the ConfigMap the controller writes)...
    let r = eventually("the reservation", Duration::from_secs(30), async || {
        s.reservations().await.ok()?.into_iter().find(|r| r.name == reservation)
    })
    .await;
    assert_eq!(r.nodes, [format!("{set}-0"), format!("{set}-1")]);
    assert_eq!((r.start_time, r.end_time), (Some(opens), Some(opens + 120)));
    assert!(r.flags.iter().any(|f| f == "MAINT"), "{:?}", r.flags);
    if let Some(sidecar) = &sidecar {
        // scontrol makes the reservation before the sidecar's own line is written.
        let line = format!("reserved {reservation} on {set}-0,{set}-1");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !sidecar.output().contains(&line) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let out = sidecar.output();
        assert!(out.contains(&line), "{out}");
        let made: Vec<String> = s.reservations().await.unwrap().into_iter().map(|r| r.name).collect();
        for (junk, _) in &junk {
            assert!(!made.iter().any(|m| m == junk), "{junk} was made: {out}");
        }
    }
    // ...so a job that would still run when it starts does not start there.
    let late = submit_sleep(&format!("{set}-1"), 600).await;
    while now() < opens - 2 {
        for i in 0..2 {
            let n = s.get(&format!("{set}-{i}")).await.unwrap();
            assert!(!n.state.has("DRAIN"), "{set}-{i} drained outside the window: {}", n.reason);
        }
        assert_eq!(uids().await, before, "a pod was replaced outside the window");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    assert_eq!(job_state(job).await, ["COMPLETED"], "the job ran undisturbed");
    assert_eq!(job_state(late).await, ["PENDING"], "a job overlapping the window started");

    // Inside the window: every worker rolls.
    eventually("every worker rolled in the window", Duration::from_secs(90), async || {
        let st = status(&t.env).await?;
        let p = st.progress().into_iter().find(|p| p.node_set == set)?;
        (p.done && p.updated == 2).then_some(())
    })
    .await;
    assert!(now() < opens + 120 + 5, "the rollout ran past its window");
    // Done: the reservation is given back, and the held job may run.
    eventually("the reservation deleted", Duration::from_secs(30), async || {
        let rs = s.reservations().await.ok()?;
        rs.iter().all(|r| r.name != reservation).then_some(())
    })
    .await;
    support::slurm::sh(&["exec", support::slurm_instance(), "scancel", &late.to_string()]);
    drop(sidecar);
    let after = uids().await;
    for (name, uid) in &before {
        assert_ne!(after.get(name), Some(uid), "{name} not replaced");
    }
    drop(daemon);
    t.env.cleanup().await;
}
}

/// A cluster of one worker whose controller restarts only in a window at START; CONF is added
/// to slurm.conf.
fn control_plane(ns: &str, set: &str, conf: &str, start: i64) -> String {
    let (minute, hour) = ((start / 60) % 60, (start / 3600) % 24);
    support::cluster_head("c", ns)
        + &format!(
            r#"  controller:
    slurmConf: {{{conf}}}
  policy:
    maintenanceWindows:
      - {{schedule: "{minute} {hour} * * *", duration: 2m}}
    controlPlaneWindow: required
  nodeSets:
    - {{name: {set}, replicas: 1, cpu: "1", memory: 256Mi}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
        )
}

/// A commit that changes a setting a reconfigure cannot change, under `controlPlaneWindow:
/// required`: outside the window the controller StatefulSet, its pod and its ConfigMap stay as
/// they are and status says what waits; a daemon polling git only every 10 minutes wakes when
/// the window opens and applies them at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_slurmctld_restart_waits_for_its_window_and_the_daemon_wakes_for_it() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::api::Api;
    let t = Bed::new("ctldwin").await;
    let set = t.env.name("cw");
    let first = control_plane(&t.env.ns, &set, "", minute_after(12 * 3600));
    let daemon = t.deployed(&first, "d", &[(&set, 1)]).await;
    let sts: Api<StatefulSet> = Api::namespaced(t.env.client.clone(), &t.env.ns);
    let cms: Api<ConfigMap> = Api::namespaced(t.env.client.clone(), &t.env.ns);
    let pods: Api<Pod> = Api::namespaced(t.env.client.clone(), &t.env.ns);
    let template = async || {
        let s = sts.get("c-controller").await.unwrap();
        serde_json::to_value(s.spec.unwrap().template).unwrap()
    };
    let conf = async || {
        let cm = cms.get("c-config").await.unwrap();
        cm.data
            .unwrap_or_default()
            .remove("slurm.conf")
            .unwrap_or_default()
    };
    let pod_uid = async || pods.get("c-controller-0").await.ok()?.metadata.uid;
    let before = (template().await, conf().await);
    let uid = eventually("the controller pod", Duration::from_secs(30), pod_uid).await;
    assert!(!before.1.contains("cred_expire=200"), "{}", before.1);
    drop(daemon);

    // The change is pushed while no window is open; a daemon that polls every 10 minutes
    // starts and applies everything else.
    let window = minute_after(50);
    let head = control_plane(&t.env.ns, &set, "AuthInfo: [cred_expire=200]", window);
    let commit = t.repo.push(&head, "restart setting");
    let daemon = t.daemon_polling("d", "10m");
    applied(&t.env, &commit, Duration::from_secs(40)).await;
    let st = status(&t.env).await.unwrap();
    let opens = k8s_openapi::jiff::Timestamp::from_second(window).unwrap();
    let opens = opens
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .strftime("%a %Y-%m-%d %H:%M UTC");
    assert_eq!(
        st.held,
        format!(
            "ConfigMap/c-config, Deployment/c-restapi, StatefulSet/c-controller (waiting for a maintenance window for the slurmctld restart (opens {opens}))"
        ),
    );
    while now() < window - 2 {
        assert_eq!(
            (template().await, conf().await),
            before,
            "restarted outside the window"
        );
        assert_eq!(
            pod_uid().await,
            Some(uid.clone()),
            "the controller pod was replaced"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // The window opens: the daemon wakes for it, with no commit and no poll due.
    eventually(
        "the new files and template applied",
        Duration::from_secs(15),
        async || {
            (conf().await.contains("cred_expire=200") && template().await != before.0).then_some(())
        },
    )
    .await;
    eventually(
        "slurmctld's pod restarted",
        Duration::from_secs(30),
        async || (pod_uid().await? != uid).then_some(()),
    )
    .await;
    let st = status(&t.env).await.unwrap();
    assert_eq!(st.held, "", "nothing is held once the window opened");
    drop(daemon);
    t.env.cleanup().await;
}
