//! Scheduled copies (issue 77) on the real node (tests/bed/node.sh) from the 24.11 images:
//! `backup.schedule` added to a running cluster with accounting (every minute, keep 1) makes a
//! CronJob (served at `batch/v1beta1` on the node's 1.20) whose first run comes on schedule; a
//! second taken on demand (`kubectl create job --from=cronjob/...`, as docs/howto.md says) leaves
//! exactly the newest copy and deletes nothing else on the claim; a run that cannot write fails
//! with its reason and leaves it; the newest restores as docs/howto.md says; the schedule removed, apply prunes the
//! CronJob. On the one-at-a-time chain (deployed.rs removes the images its runs start from), on
//! volumes of its own.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::backup::{
    CLUSTER, CTLD, apply, cluster_yaml, ctld, named, restore_db_pod, run_pod, sacct, scale, setup,
};
use crate::support::eventually;
use crate::support::slurm_images::{all_ready_and_idle, kubectl, kubectl_ok};

/// cluster.yaml of the scheduled-copies test: 24.11, and backup.schedule when SCHEDULE.
fn scheduled_yaml(ns: &str, schedule: Option<&str>) -> String {
    let y = cluster_yaml(ns, "24.11");
    match schedule {
        Some(sch) => y.replace(
            "    claim: slurm-copies\n",
            &format!("    claim: slurm-copies\n    schedule: {sch}\n"),
        ),
        None => y,
    }
}

/// The scheduled copies in DIR (`accounting-TIME.sql`), oldest first.
fn scheduled_copies(dir: &Path) -> Vec<String> {
    named(dir, "accounting-2")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("Z.sql"))
        .collect()
}

/// The backup CronJob's Jobs in NS: (name, failed).
fn backup_jobs(ns: &str) -> Vec<(String, bool)> {
    let text = kubectl_ok(&[
        "-n",
        ns,
        "get",
        "jobs",
        "-l",
        "app.kubernetes.io/component=backup",
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            let failed = j["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Failed" && c["status"] == "True");
            (j["metadata"]["name"].as_str().unwrap().to_string(), failed)
        })
        .collect()
}

/// A copy now: what `kubectl create job --from=cronjob/CLUSTER-backup JOB` does (the CronJob's
/// Job template as a Job it owns), done here because a kubectl of 1.25 or later knows only
/// `batch/v1` CronJobs and the node's 1.20 serves `v1beta1`.
fn copy_now(ns: &str, dir: &Path, job: &str) {
    let name = format!("{CLUSTER}-backup");
    let cj: serde_json::Value = serde_json::from_str(&kubectl_ok(&[
        "-n",
        ns,
        "get",
        "cronjobs.v1beta1.batch",
        &name,
        "-o",
        "json",
    ]))
    .unwrap();
    let template = &cj["spec"]["jobTemplate"];
    let mut meta = match template["metadata"].clone() {
        serde_json::Value::Object(m) => serde_json::Value::Object(m),
        _ => serde_json::json!({}),
    };
    meta["name"] = job.into();
    meta["annotations"]["cronjob.kubernetes.io/instantiate"] = "manual".into();
    meta["ownerReferences"] = serde_json::json!([{"apiVersion": "batch/v1beta1", "kind": "CronJob",
        "name": name, "uid": cj["metadata"]["uid"], "controller": true}]);
    let body = serde_json::json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
        "spec": template["spec"]});
    let file = dir.join(format!("{job}.json"));
    std::fs::write(&file, body.to_string()).unwrap();
    kubectl_ok(&["-n", ns, "create", "-f", &file.to_string_lossy()]);
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduled_copies_keep_the_newest_a_failed_run_keeps_them_and_the_newest_restores() {
    let started = Instant::now();
    let bed = setup("bs", &["24.11"]);
    let (ns, dir) = (bed.ns.as_str(), bed.dir.path());
    // The cluster first, without a schedule (every pod Ready: a finished run's pod never is).
    std::fs::write(dir.join("cluster.yaml"), scheduled_yaml(ns, None)).unwrap();
    let (ok, out) = apply(dir, &["--wait", "0s"]);
    assert!(ok, "{out}");
    let took = all_ready_and_idle(ns, CTLD, Duration::from_secs(420)).await;
    eprintln!("Slurm 24.11 with accounting: every pod Ready, the worker IDLE in {took:.1?}");
    let done = ctld(
        ns,
        "cd /tmp && sbatch --wait --parsable -o /dev/null --wrap true",
    )
    .unwrap()
    .trim()
    .to_string();
    eventually(
        "slurmdbd to have the finished job",
        Duration::from_secs(120),
        async || {
            if sacct(ns, &done).contains(&format!("{done}|COMPLETED")) {
                return Some(());
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            None
        },
    )
    .await;

    // Files of the claim's scheduled directory that are not the schedule's: never deleted.
    let sched = dir.join("slurm-copies").join(CLUSTER).join("scheduled");
    std::fs::create_dir_all(&sched).unwrap();
    let mode = |m: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&sched, std::fs::Permissions::from_mode(m)).unwrap();
    };
    mode(0o777);
    let others = ["accounting-manual.sql", "notes.txt"];
    for f in others {
        std::fs::write(sched.join(f), "kept\n").unwrap();
    }

    // The schedule added: plan shows the CronJob, and the database's NetworkPolicy admitting
    // its pods; apply makes them.
    let with = scheduled_yaml(ns, Some("{cron: \"* * * * *\", keep: 1}"));
    std::fs::write(dir.join("old.yaml"), scheduled_yaml(ns, None)).unwrap();
    std::fs::write(dir.join("cluster.yaml"), &with).unwrap();
    let plan = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .arg("plan")
        .arg(dir)
        .arg("--from")
        .arg(dir.join("old.yaml"))
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert!(
        plan.contains("1 to create, 1 to update, 0 to replace, 0 to delete")
            && plan.contains(&format!("+ create CronJob {ns}/{CLUSTER}-backup"))
            && plan.contains(&format!("~ update NetworkPolicy {ns}/{CLUSTER}-database")),
        "{plan}"
    );
    std::fs::remove_file(dir.join("old.yaml")).unwrap();
    let t0 = Instant::now();
    let (ok, out) = apply(dir, &["--wait", "0s"]);
    assert!(ok, "{out}");
    // Kubernetes 1.20 serves CronJobs at batch/v1beta1 only: apply sent it there.
    kubectl_ok(&[
        "-n",
        ns,
        "get",
        "cronjobs.v1beta1.batch",
        &format!("{CLUSTER}-backup"),
    ]);

    // The first run on schedule; the second on demand, as an operator takes a copy now
    // (`kubectl create job --from=cronjob/...`: the CronJob's pod as scheduled): each copy seen
    // (polled every second; a copy lives a run), the older deleted once the second is made.
    let mut seen: Vec<String> = Vec::new();
    let mut copies = async |n: usize, what: &str| {
        eventually(what, Duration::from_secs(150), async || {
            for c in scheduled_copies(&sched) {
                if !seen.contains(&c) {
                    eprintln!("{c} after {:.1?}", t0.elapsed());
                    seen.push(c);
                }
            }
            if seen.len() >= n {
                return Some(());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            None
        })
        .await;
    };
    copies(1, "the first scheduled copy").await;
    copy_now(ns, dir, "copy-now");
    copies(2, "the copy taken on demand").await;
    seen.sort();
    let now = scheduled_copies(&sched);
    assert_eq!(now, seen[seen.len() - 1..], "the newest of {seen:?} kept");
    let mut all: Vec<String> = named(&sched, "")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    all.sort();
    let mut want: Vec<String> = now
        .iter()
        .cloned()
        .chain(others.map(String::from))
        .collect();
    want.sort();
    assert_eq!(all, want, "nothing else deleted, no partial copy left");
    let sql = std::fs::read_to_string(sched.join(&now[0])).unwrap();
    assert!(
        sql.contains("CREATE DATABASE") && sql.contains("_job_table"),
        "a mariadb-dump of the accounting database: {}",
        &sql[..sql.len().min(400)]
    );
    eprintln!(
        "two runs, one copy kept, in {:.1?} after the apply",
        t0.elapsed()
    );

    // A run that cannot write: its Job fails with the reason, the copies stay as they were.
    let before: Vec<(String, Vec<u8>)> = now
        .iter()
        .map(|n| (n.clone(), std::fs::read(sched.join(n)).unwrap()))
        .collect();
    let failed_before: Vec<String> = backup_jobs(ns)
        .into_iter()
        .filter(|(_, f)| *f)
        .map(|(n, _)| n)
        .collect();
    mode(0o555);
    let t1 = Instant::now();
    copy_now(ns, dir, "copy-read-only");
    let job = eventually(
        "a run on the read-only directory to fail",
        Duration::from_secs(150),
        async || {
            let failed = backup_jobs(ns)
                .into_iter()
                .find(|(n, f)| *f && !failed_before.contains(n));
            if failed.is_none() {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            failed.map(|(n, _)| n)
        },
    )
    .await;
    let message = kubectl_ok(&[
        "-n",
        ns,
        "get",
        "pods",
        "-l",
        &format!("job-name={job}"),
        "-o",
        "jsonpath={.items[0].status.containerStatuses[0].state.terminated.message}",
    ]);
    assert!(
        message.contains("the scheduled copy of the accounting database failed")
            && message.contains("Permission denied"),
        "{message}"
    );
    eprintln!("a failed run in {:.1?}: {}", t1.elapsed(), message.trim());
    for (n, bytes) in &before {
        assert_eq!(
            std::fs::read(sched.join(n)).ok().as_ref(),
            Some(bytes),
            "{n} unchanged"
        );
    }
    assert_eq!(scheduled_copies(&sched), now);

    // The newest copy restores as docs/howto.md says (the directory still read-only: no run
    // changes the copies meanwhile).
    let t2 = Instant::now();
    scale(ns, &format!("{CLUSTER}-accounting"), 0).await;
    run_pod(
        ns,
        "restore-db",
        &restore_db_pod(&format!("{CLUSTER}/scheduled/{}", now[0])),
    )
    .await;
    scale(ns, &format!("{CLUSTER}-accounting"), 1).await;
    eventually(
        "sacct to list the job from the restored database",
        Duration::from_secs(180),
        async || {
            if sacct(ns, &done).contains(&format!("{done}|COMPLETED")) {
                return Some(());
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            None
        },
    )
    .await;
    eprintln!("restored from {} in {:.1?}", now[0], t2.elapsed());

    // The schedule removed: apply prunes the CronJob.
    std::fs::write(dir.join("cluster.yaml"), scheduled_yaml(ns, None)).unwrap();
    let (ok, out) = apply(dir, &["--wait", "0s"]);
    assert!(ok, "{out}");
    let gone = kubectl(&[
        "-n",
        ns,
        "get",
        "cronjobs.v1beta1.batch",
        &format!("{CLUSTER}-backup"),
    ]);
    assert!(
        gone.as_ref().is_err_and(|e| e.contains("NotFound")),
        "{gone:?}"
    );
    mode(0o777);
    eprintln!("the whole test: {:.1?}", started.elapsed());
}
