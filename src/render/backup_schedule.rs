//! Scheduled copies of the accounting database (`spec.backup.schedule`): a CronJob, `NAME-backup`,
//! whose pod dumps the database with mariadb-dump onto the backup claim as
//! `CLUSTER/scheduled/accounting-TIME.sql` (written as `.partial`, renamed once complete), then
//! deletes the oldest such copies beyond `keep`. A run that fails deletes nothing: the earlier
//! copies stay, and the Job fails with the reason in its pod's termination message.
//!
//! The CronJob is rendered at `batch/v1`; apply sends it at `batch/v1beta1` where the cluster
//! serves CronJobs only there (Kubernetes 1.20): the body is the same at both.

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, EnvVar, LocalObjectReference, PodAffinity, PodAffinityTerm,
    PodSpec, PodTemplateSpec, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::backup::{MOUNT, VOLUME, image as copy_image, volume};
use super::components::copier_security;
use super::names::{Component, LABEL_COMPONENT, Names};
use super::objects::meta;
use super::pod;
use crate::cluster::backup::scheduled;
use crate::cluster::types::ClusterFile;

/// The CronJob's name (`NAME-backup`) and its pods' component label.
pub const COMPONENT: &str = "backup";
/// The directory of the scheduled copies under `CLUSTER/` on the claim.
pub const DIR: &str = "scheduled";
/// A run that has not started this long after its time is skipped (the next one copies).
pub const STARTING_DEADLINE_SECONDS: i64 = 300;
/// A run still going (or still waiting for slurmdbd's node) after this long is stopped and fails.
pub const ACTIVE_DEADLINE_SECONDS: i64 = 6 * 3600;
/// How long a run waits for the database to answer.
const WAIT_SECONDS: u32 = 60;

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

/// The script of one run: wait for the database, dump it to a `.partial` file, rename it, then
/// delete the oldest copies named `accounting-TIME.sql` beyond `$KEEP` (and nothing else).
fn script() -> String {
    format!(
        "set -u\n\
         umask 027\n\
         fail() {{ m=\"the scheduled copy of the accounting database failed: $*\"; echo \"$m\" >&2; echo \"$m\" > /dev/termination-log 2>/dev/null; exit 1; }}\n\
         dir=\"$BACKUP/$CLUSTER/{DIR}\"\n\
         mkdir -p \"$dir\" || fail \"cannot make $dir on the backup claim\"\n\
         q=\"SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '$DB_NAME'\"\n\
         i=0\n\
         ask() {{ mariadb -h \"$DB_HOST\" -P \"$DB_PORT\" -u \"$DB_USER\" -N -e \"$q\"; }}\n\
         until tables=$(ask 2>/dev/null); do\n\
         \x20 i=$((i + 1))\n\
         \x20 [ \"$i\" -ge {tries} ] && fail \"the database at $DB_HOST:$DB_PORT did not answer in {WAIT_SECONDS} s: $(ask 2>&1 >/dev/null | tail -n 2)\"\n\
         \x20 sleep 2\n\
         done\n\
         tables=$(echo $tables)\n\
         [ \"$tables\" != 0 ] || fail \"database $DB_NAME has no tables (slurmdbd has not made them yet, or they were dropped): nothing copied, the earlier copies kept\"\n\
         to=\"$dir/accounting-$(date -u +%Y%m%dT%H%M%SZ).sql\"\n\
         out=$(mariadb-dump -h \"$DB_HOST\" -P \"$DB_PORT\" -u \"$DB_USER\" --single-transaction --databases \"$DB_NAME\" --result-file=\"$to.partial\" 2>&1) || {{ rm -f \"$to.partial\"; fail \"$out\"; }}\n\
         tail -n 3 \"$to.partial\" | grep -q '^-- Dump completed' || {{ rm -f \"$to.partial\"; fail \"mariadb-dump ended without its closing line: $out\"; }}\n\
         mv \"$to.partial\" \"$to\" || fail \"cannot rename $to.partial\"\n\
         echo \"copied database $DB_NAME to $to\"\n\
         set -- \"$dir\"/accounting-{stamp}.sql\n\
         [ -e \"$1\" ] || set --\n\
         n=$(($# - KEEP))\n\
         while [ \"$n\" -gt 0 ]; do\n\
         \x20 rm -f -- \"$1\" || fail \"copied to $to, but cannot delete the older copy $1 (keep: $KEEP)\"\n\
         \x20 echo \"deleted $1 (keep: $KEEP)\"\n\
         \x20 shift\n\
         \x20 n=$((n - 1))\n\
         done\n",
        tries = WAIT_SECONDS / 2,
        stamp = "[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]T[0-9][0-9][0-9][0-9][0-9][0-9]Z",
    )
}

/// The CronJob of C's scheduled copies, when it asks for them.
pub fn cron_job(c: &ClusterFile, names: &Names) -> Option<CronJob> {
    let s = &c.spec;
    let schedule = scheduled(s)?;
    let db = s.accounting.database.as_ref()?;
    let host = db.host.clone().unwrap_or_else(|| names.database_host());
    let container = Container {
        name: COMPONENT.into(),
        image: Some(copy_image(s, db)),
        image_pull_policy: Some(s.images.pull_policy.as_str().into()),
        command: Some(vec!["/bin/sh".into(), "-c".into()]),
        args: Some(vec![script()]),
        env: Some(vec![
            env("BACKUP", MOUNT),
            env("CLUSTER", &names.name),
            env("KEEP", &schedule.keep.to_string()),
            env("DB_HOST", &host),
            env("DB_PORT", &db.port.to_string()),
            env("DB_USER", &db.user),
            env("DB_NAME", &db.name),
            // The password reaches the clients in MYSQL_PWD, never on a command line.
            pod::secret_env("MYSQL_PWD", &db.password),
        ]),
        resources: Some(super::resources::over(super::resources::COPY, None)),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(vec![pod::mount(VOLUME, MOUNT, false)]),
        // Pod Security "restricted", as the control plane's containers.
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    let mut labels = names.labels(None, None);
    labels.insert(LABEL_COMPONENT.into(), COMPONENT.into());
    let settings = &s.accounting.pod;
    let pod_spec = PodSpec {
        containers: vec![container],
        restart_policy: Some("Never".into()),
        volumes: Some(volume(s).into_iter().collect()),
        security_context: Some(copier_security(s)),
        automount_service_account_token: Some(false),
        image_pull_secrets: (!s.image_pull_secrets.is_empty()).then(|| {
            s.image_pull_secrets
                .iter()
                .map(|n| LocalObjectReference { name: n.clone() })
                .collect()
        }),
        priority_class_name: s.priority_class_name.clone(),
        // On slurmdbd's node, as the copies before an upgrade: a ReadWriteOnce claim that
        // slurmdbd mounts mounts here too (slurmdbd's node selector and tolerations, to land there).
        affinity: Some(Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(names.selector(Component::Accounting, None)),
                        ..LabelSelector::default()
                    }),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..PodAffinityTerm::default()
                }]),
                ..PodAffinity::default()
            }),
            ..Affinity::default()
        }),
        node_selector: (!settings.node_selector.is_empty()).then(|| settings.node_selector.clone()),
        tolerations: (!settings.tolerations.is_empty()).then(|| settings.tolerations.clone()),
        ..PodSpec::default()
    };
    let mut metadata = meta(names, &names.of(COMPONENT), None, None);
    metadata.labels = Some(labels.clone());
    Some(CronJob {
        metadata,
        spec: Some(CronJobSpec {
            schedule: schedule.cron.clone(),
            concurrency_policy: Some("Forbid".into()),
            starting_deadline_seconds: Some(STARTING_DEADLINE_SECONDS),
            successful_jobs_history_limit: Some(1),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(JobSpec {
                    // One try per run: a failed run says why, and the next run is the retry.
                    backoff_limit: Some(0),
                    active_deadline_seconds: Some(ACTIVE_DEADLINE_SECONDS),
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(labels),
                            ..ObjectMeta::default()
                        }),
                        spec: Some(pod_spec),
                    },
                    ..JobSpec::default()
                }),
            },
            ..CronJobSpec::default()
        }),
        ..CronJob::default()
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use crate::render::render;
    use serde_json::Value;

    fn cluster(backup: &str, network_policy: bool) -> crate::cluster::ClusterFile {
        let np = if network_policy {
            "  networkPolicy: {enabled: true}\n"
        } else {
            ""
        };
        let text = format!(
            "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: c, namespace: slurm}}\n\
             spec:\n  slurmVersion: \"25.11.3\"\n  auth:\n    slurmKey: {{name: k, key: k}}\n    jwtKey: {{name: j, key: j}}\n\
             {backup}\n{np}  accounting:\n    enabled: true\n    database:\n      user: slurm\n      password: {{name: db, key: pw}}\n      inCluster: {{storage: 1Gi}}\n\
             \x20 nodeSets: [{{name: w, replicas: 2}}]\n  partitions: [{{name: p, nodeSets: [ALL]}}]\n"
        );
        crate::cluster::load("c.yaml", &text).unwrap_or_else(|e| panic!("{e:#?}"))
    }

    fn cron_job(c: &crate::cluster::ClusterFile) -> Option<Value> {
        render(c)
            .objects
            .into_iter()
            .find(|o| o.kind == "CronJob")
            .map(|o| o.body)
    }

    #[test]
    fn a_schedule_renders_one_cron_job_that_dumps_the_database_onto_the_claim() {
        let c = cluster(
            "  backup: {claim: copies, schedule: {cron: \"0 3 * * *\", keep: 7}}",
            false,
        );
        let cj = cron_job(&c).expect("a CronJob");
        assert_eq!(cj["apiVersion"], "batch/v1");
        assert_eq!(cj["metadata"]["name"], "c-backup");
        let spec = &cj["spec"];
        assert_eq!(spec["schedule"], "0 3 * * *");
        assert_eq!(spec["concurrencyPolicy"], "Forbid");
        assert_eq!(spec["startingDeadlineSeconds"], 300);
        assert_eq!(spec["successfulJobsHistoryLimit"], 1);
        assert_eq!(spec["failedJobsHistoryLimit"], 3);
        let job = &spec["jobTemplate"]["spec"];
        assert_eq!(job["backoffLimit"], 0);
        let pod = &job["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(pod["automountServiceAccountToken"], false);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["fsGroup"], 401);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let claim = &pod["volumes"][0];
        assert_eq!(claim["persistentVolumeClaim"]["claimName"], "copies");
        let ctr = &pod["containers"][0];
        assert_eq!(ctr["image"], "docker.io/library/mariadb:11.8");
        assert_eq!(ctr["securityContext"]["allowPrivilegeEscalation"], false);
        let script = ctr["args"][0].as_str().unwrap();
        assert!(script.contains("mariadb-dump") && script.contains("--single-transaction"));
        let env = |n: &str| {
            ctr["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == n)
                .cloned()
                .unwrap_or_else(|| panic!("{n}"))
        };
        assert_eq!(env("KEEP")["value"], "7");
        assert_eq!(env("DB_HOST")["value"], "c-mariadb.slurm.svc.cluster.local");
        assert_eq!(env("MYSQL_PWD")["valueFrom"]["secretKeyRef"]["name"], "db");
        // Its pods are not slurmdbd's: neither slurmdbd's Service nor its StatefulSet selects
        // them; they run on slurmdbd's node (a ReadWriteOnce claim mounts there).
        let labels = &job["template"]["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/component"], "backup");
        let term =
            &pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(
            term["labelSelector"]["matchLabels"]["app.kubernetes.io/component"],
            "accounting"
        );
    }

    #[test]
    fn without_a_schedule_there_is_no_cron_job() {
        for backup in ["", "  backup: {claim: copies}"] {
            assert!(cron_job(&cluster(backup, false)).is_none(), "{backup}");
        }
    }

    #[test]
    fn with_network_policies_the_copies_reach_the_database() {
        let c = cluster(
            "  backup: {claim: copies, schedule: {cron: \"0 3 * * *\", keep: 7}}",
            true,
        );
        let r = render(&c);
        let np = r
            .get("NetworkPolicy", "c-database")
            .expect("the database's policy");
        let from = np.body["spec"]["ingress"][0]["from"].as_array().unwrap();
        assert!(
            from.iter().any(
                |p| p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "backup"
            ),
            "{from:?}"
        );
    }

    /// Runs the rendered script under /bin/sh in DIR with stand-ins for the MariaDB clients:
    /// `mariadb` answers TABLES, `mariadb-dump` writes a dump or fails (DUMP_FAILS). The exit
    /// code and the termination message.
    fn run(dir: &Path, keep: u32, tables: &str, dump_fails: bool) -> (bool, String) {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let stub = |name: &str, body: &str| {
            use std::os::unix::fs::PermissionsExt;
            let p = bin.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        stub("mariadb", &format!("echo {tables}"));
        let dump = match dump_fails {
            true => "echo 'mariadb-dump: Got error: 1045: Access denied' >&2; exit 2",
            false => {
                "for a; do case $a in --result-file=*) f=${a#--result-file=};; esac; done\nprintf 'CREATE DATABASE x;\\n-- Dump completed on now\\n' > \"$f\""
            }
        };
        stub("mariadb-dump", dump);
        let log = dir.join("termination-log");
        let _ = std::fs::remove_file(&log);
        let script = super::script().replace("/dev/termination-log", log.to_str().unwrap());
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("BACKUP", dir.join("claim"))
            .env("CLUSTER", "c")
            .env("KEEP", keep.to_string())
            .env("DB_HOST", "db")
            .env("DB_PORT", "3306")
            .env("DB_USER", "slurm")
            .env("DB_NAME", "slurm_acct_db")
            .output()
            .unwrap();
        let msg = std::fs::read_to_string(&log).unwrap_or_default();
        (out.status.success(), msg)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn each_run_keeps_the_newest_copies_and_deletes_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let copies = tmp.path().join("claim/c/scheduled");
        std::fs::create_dir_all(&copies).unwrap();
        // Older copies, and files that are not the schedule's: never deleted.
        let old = [
            "accounting-20250101T030000Z.sql",
            "accounting-20250102T030000Z.sql",
            "accounting-20250103T030000Z.sql",
        ];
        let others = [
            "accounting-manual.sql",
            "accounting-20250101T030000Z.sql.keep",
            "notes.txt",
        ];
        for f in old.iter().chain(&others) {
            std::fs::write(copies.join(f), "x").unwrap();
        }
        let (ok, msg) = run(tmp.path(), 2, "42", false);
        assert!(ok, "{msg}");
        let now = names(&copies);
        let new: Vec<&String> = now
            .iter()
            .filter(|n| {
                n.starts_with("accounting-2") && n.ends_with("Z.sql") && !old.contains(&n.as_str())
            })
            .collect();
        assert_eq!(new.len(), 1, "{now:?}");
        let mut want: Vec<String> = others.iter().map(|s| s.to_string()).collect();
        want.push(old[2].to_string());
        want.push(new[0].clone());
        want.sort();
        assert_eq!(now, want, "the newest 2 copies and the other files");
        assert!(
            std::fs::read_to_string(copies.join(new[0]))
                .unwrap()
                .contains("-- Dump completed")
        );
    }

    #[test]
    fn a_failed_run_keeps_the_earlier_copies_and_says_why() {
        let tmp = tempfile::tempdir().unwrap();
        let copies = tmp.path().join("claim/c/scheduled");
        std::fs::create_dir_all(&copies).unwrap();
        let old = [
            "accounting-20250101T030000Z.sql",
            "accounting-20250102T030000Z.sql",
        ];
        for f in old {
            std::fs::write(copies.join(f), "x").unwrap();
        }
        let (ok, msg) = run(tmp.path(), 1, "42", true);
        assert!(!ok);
        assert!(
            msg.contains("the scheduled copy of the accounting database failed: mariadb-dump: Got error: 1045"),
            "{msg}"
        );
        assert_eq!(names(&copies), old, "no partial file left, none deleted");
        // A database without tables (dropped, or slurmdbd not started yet) copies nothing, and
        // rotates no good copy out.
        let (ok, msg) = run(tmp.path(), 1, "0", false);
        assert!(!ok);
        assert!(msg.contains("has no tables"), "{msg}");
        assert_eq!(names(&copies), old);
    }
}
