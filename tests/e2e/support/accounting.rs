//! A Slurm cluster with accounting for one test: the bed's MariaDB, a slurmdbd started with the
//! slurmdbd.conf slurmops renders (the password added by the rendered init container's own
//! command, from the value its Secret would hold), slurmctld with accounting_storage/slurmdbd,
//! slurmrestd serving the slurmdb endpoints, and one slurmd. Its own instance of
//! tests/bed/slurm.sh, so that its QOS, accounts and limits touch no other test.

use std::collections::BTreeMap;
use std::process::Command;

use slurmops::cluster::ClusterFile;
use slurmops::render::render;

use super::slurm::{overlay_files, sh_on, slurmd_port};

/// A MariaDB of tests/bed/slurm.sh: the bed's shared one, or a test's own.
pub struct Mariadb {
    pub instance: String,
    pub port: u16,
    own: bool,
}

impl Mariadb {
    /// The bed's MariaDB (tests/bed/bed.sh starts it).
    pub fn bed() -> Mariadb {
        Mariadb {
            instance: "mariadb".into(),
            port: 13306,
            own: false,
        }
    }

    /// A MariaDB of this test's own, run with CNF (a my.cnf) plus the test host's address,
    /// port and paths.
    pub fn start(cnf: &str) -> Mariadb {
        let instance = format!("db-{}", super::unique_suffix());
        let port = slurmd_port();
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), cnf).expect("write my.cnf");
        sh_on(
            "24.11",
            &[
                "start-mariadb",
                &instance,
                &port.to_string(),
                &file.path().to_string_lossy(),
            ],
        );
        Mariadb {
            instance,
            port,
            own: true,
        }
    }

    /// SQL as this MariaDB's root (over its socket in the chroot).
    pub fn sql(&self, sql: &str) -> String {
        use std::io::Write;
        let mut child = Command::new("bash")
            .args(["tests/bed/slurm.sh", "sql", &self.instance])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run mariadb");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(sql.as_bytes())
            .expect("write SQL");
        let out = child.wait_with_output().expect("mariadb");
        assert!(
            out.status.success(),
            "SQL failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn log(&self) -> String {
        sh_on("24.11", &["log", &self.instance, "mariadbd"])
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        if self.own {
            let _ = Command::new("bash")
                .args(["tests/bed/slurm.sh", "stop", &self.instance])
                .output();
        }
    }
}

pub struct AcctSlurm {
    pub instance: String,
    pub release: &'static str,
    pub cluster: String,
    pub restd_url: String,
    pub ctld_port: u16,
    /// Where the test wrote the slurm config (rendered + test-host overlay).
    pub conf: tempfile::TempDir,
}

/// Settings of the rendered FILE (`Key=Value` lines) replaced or added.
fn set(file: &str, set: &[(&str, String)]) -> String {
    let mut out: Vec<String> = file
        .lines()
        .filter(|l| {
            let k = l.split('=').next().unwrap_or("");
            !set.iter().any(|(s, _)| *s == k)
        })
        .map(String::from)
        .collect();
    out.extend(set.iter().map(|(k, v)| format!("{k}={v}")));
    out.join("\n") + "\n"
}

/// The rendered slurmdbd init container: its shell command and the Secret its STORAGE_PASS
/// comes from.
fn init_container(c: &ClusterFile) -> (String, String, String, String) {
    let r = render(c);
    let dbd = r
        .objects
        .iter()
        .find(|o| o.name == format!("{}-accounting", c.metadata.name) && o.kind != "Service")
        .unwrap_or_else(|| {
            panic!(
                "slurmops renders no accounting workload for {}",
                c.metadata.name
            )
        });
    let init = &dbd.body["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(
        init["name"], "slurmdbd-conf",
        "the init container that writes slurmdbd.conf"
    );
    let cmd = init["args"][0]
        .as_str()
        .expect("the init container's script")
        .to_string();
    // The password comes from a mounted Secret, never the environment.
    assert!(
        init["env"].is_null(),
        "the init container has an environment: {init}"
    );
    let mount = init["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == "storage-pass")
        .expect("the init container mounts the password");
    let volume = dbd.body["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "storage-pass")
        .expect("the pod has the password's volume");
    let secret = &volume["projected"]["sources"][0]["secret"];
    let item = &secret["items"][0];
    let file = format!(
        "{}/{}",
        mount["mountPath"].as_str().unwrap_or_default(),
        item["path"].as_str().unwrap_or_default()
    );
    (
        cmd,
        secret["name"].as_str().unwrap_or_default().into(),
        item["key"].as_str().unwrap_or_default().into(),
        file,
    )
}

impl AcctSlurm {
    /// Starts C's Slurm on RELEASE with accounting on the bed's MariaDB, the database password
    /// being PASSWORD (the value of the Secret `accounting.database.password` names).
    pub fn start(c: &ClusterFile, release: &'static str, password: &str) -> AcctSlurm {
        let db = Mariadb::bed();
        AcctSlurm::start_on(c, release, password, &db, true)
    }

    /// As `start`, on the MariaDB DB; MAKE_DB: create the database and user first, as a DBA
    /// does (false: they were made already, as the in-cluster MariaDB's image makes them).
    pub fn start_on(
        c: &ClusterFile,
        release: &'static str,
        password: &str,
        mariadb: &Mariadb,
        make_db: bool,
    ) -> AcctSlurm {
        let suffix = super::unique_suffix();
        let instance = format!("acct-{suffix}");
        let db = c
            .spec
            .accounting
            .database
            .as_ref()
            .expect("accounting.database");
        let cluster = slurmops::accounting::cluster_name(c);
        let (ctld_port, dbd_port, restd_port) = (slurmd_port(), slurmd_port(), slurmd_port());
        // The database and the account slurmdbd uses, as a DBA creates them.
        let sql = format!(
            "CREATE DATABASE IF NOT EXISTS `{d}`;\n\
             CREATE USER IF NOT EXISTS '{u}'@'127.0.0.1' IDENTIFIED BY '{password}';\n\
             ALTER USER '{u}'@'127.0.0.1' IDENTIFIED BY '{password}';\n\
             GRANT ALL ON `{d}`.* TO '{u}'@'127.0.0.1';\n",
            u = db.user,
            d = db.name
        );
        if make_db {
            mariadb.sql(&sql);
        }
        let r = render(c);
        let conf = tempfile::tempdir().expect("temp dir");
        let mut files = r.slurm.clone();
        let rendered_dbd = files
            .remove("slurmdbd.conf")
            .expect("slurmops renders slurmdbd.conf");
        let mut files = overlay_files(files, &instance, ctld_port);
        let slurm_conf = files.get("slurm.conf").cloned().unwrap_or_default();
        let enforce = r.slurm["slurm.conf"]
            .lines()
            .find_map(|l| l.strip_prefix("AccountingStorageEnforce="))
            .unwrap_or("associations")
            .to_string();
        files.insert(
            "slurm.conf".into(),
            set(
                &slurm_conf,
                &[
                    (
                        "AccountingStorageType",
                        "accounting_storage/slurmdbd".into(),
                    ),
                    ("AccountingStorageHost", "localhost".into()),
                    ("AccountingStoragePort", dbd_port.to_string()),
                    ("AccountingStorageEnforce", enforce),
                ],
            ),
        );
        // Test-host overlay of the rendered slurmdbd.conf: addresses, ports, paths.
        let template = set(
            &rendered_dbd,
            &[
                ("DbdHost", "localhost".into()),
                ("DbdPort", dbd_port.to_string()),
                ("StorageHost", "127.0.0.1".into()),
                ("StoragePort", mariadb.port.to_string()),
                ("PidFile", format!("/run/slurm-{instance}/slurmdbd.pid")),
                (
                    "AuthAltParameters",
                    format!("jwt_key=/etc/slurm-{instance}/jwt_hs256.key"),
                ),
            ],
        );
        assert!(
            !template.contains(password),
            "the rendered slurmdbd.conf holds no password"
        );
        files.insert(
            "slurmdbd.conf".into(),
            with_password(c, &template, password),
        );
        for (name, content) in &files {
            std::fs::write(conf.path().join(name), content).expect("write slurm config");
        }
        let conf_dir = conf.path().to_string_lossy().into_owned();
        sh_on(release, &["start-ctld", &instance, &conf_dir]);
        sh_on(
            release,
            &["start-restd", &instance, &restd_port.to_string()],
        );
        AcctSlurm {
            instance,
            release,
            cluster,
            restd_url: format!("http://127.0.0.1:{restd_port}"),
            ctld_port,
            conf,
        }
    }

    /// Runs a Slurm client command (sacctmgr, sacct, squeue, ...) of this cluster.
    pub fn exec(&self, args: &[&str]) -> String {
        let mut all = vec!["exec", self.instance.as_str()];
        all.extend(args);
        sh_on(self.release, &all)
    }

    /// `sacctmgr -n -P show ARGS`: one line per row, fields split at `|`.
    pub fn sacctmgr_show(&self, args: &[&str]) -> Vec<Vec<String>> {
        let mut all = vec!["sacctmgr", "-n", "-P", "show"];
        all.extend(args);
        self.exec(&all)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.split('|').map(String::from).collect())
            .collect()
    }

    /// A JWT for USER (root: the administrator slurmops runs as).
    pub fn token(&self, user: &str) -> String {
        sh_on(self.release, &["token", &self.instance, user])
            .trim()
            .to_string()
    }

    /// Starts a dynamic slurmd NAME with CPUS CPUs; waits until slurmctld has it idle.
    pub fn start_node(&self, name: &str, cpus: u32) {
        let port = slurmd_port();
        sh_on(
            self.release,
            &[
                "start-slurmd",
                &self.instance,
                name,
                &port.to_string(),
                &format!("CPUs={cpus} RealMemory=256"),
                "-D",
                "-Z",
                "--conf-server",
                &format!("localhost:{}", self.ctld_port),
            ],
        );
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_secs(60) {
            let state = self.exec(&["sinfo", "-h", "-n", name, "-o", "%T"]);
            if state.trim().starts_with("idle") {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        panic!("slurmd {name} never became idle in {}", self.instance);
    }

    /// A slurmops client of this cluster's slurmrestd, as root.
    pub fn client(&self) -> slurmops::slurm::Client {
        slurmops::slurm::Client::new(slurmops::slurm::Config::new(
            self.restd_url.clone(),
            slurmops::slurm::auth::Credentials::Token {
                token: slurmops::slurm::auth::Secret::new(self.token("root")),
                user: None,
            },
        ))
        .expect("slurmrestd client")
    }

    /// Submits `sleep SECS` as USER charging ACCOUNT (with QOS when given) through slurmrestd,
    /// asking for CPUS CPUs; the job id.
    pub async fn submit(
        &self,
        user: &str,
        account: &str,
        qos: Option<&str>,
        cpus: u32,
        secs: u32,
    ) -> u64 {
        // No output file: job ids restart at 1 in every test's instance, and a `slurm-1.out` another
        // instance's root job left in the shared /tmp would make this user's job fail to start.
        let mut job = serde_json::json!({"partition": "all", "account": account, "tasks": 1,
            "cpus_per_task": cpus, "name": "acct-sleep", "current_working_directory": "/tmp",
            "standard_output": "/dev/null", "standard_error": "/dev/null",
            "environment": ["PATH=/usr/bin:/bin"]});
        if let Some(q) = qos {
            job["qos"] = q.into();
        }
        let body = serde_json::json!({"script": format!("#!/bin/sh\nsleep {secs}\n"), "job": job});
        let _ = rustls::crypto::ring::default_provider().install_default();
        let resp: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/slurm/v0.0.42/job/submit", self.restd_url))
            .header("X-SLURM-USER-TOKEN", self.token(user))
            .json(&body)
            .send()
            .await
            .expect("submit a job")
            .json()
            .await
            .expect("submit answer");
        resp["job_id"]
            .as_u64()
            .unwrap_or_else(|| panic!("job not submitted: {resp}"))
    }

    /// `squeue` state and reason of job ID (`PENDING QOSMaxCpuPerUserLimit`), or None once gone.
    pub fn job(&self, id: u64) -> Option<(String, String)> {
        let out = self.exec(&["squeue", "-h", "-j", &id.to_string(), "-o", "%T %r"]);
        let line = out.lines().next()?.trim().to_string();
        let (state, reason) = line.split_once(' ').unwrap_or((&line, ""));
        Some((state.to_string(), reason.to_string()))
    }

    /// The job's state as slurmdbd recorded it (`sacct`), e.g. `COMPLETED`.
    pub fn sacct_state(&self, id: u64) -> Option<String> {
        let out = self.exec(&[
            "sacct",
            "-n",
            "-P",
            "-X",
            "-j",
            &id.to_string(),
            "-o",
            "State",
        ]);
        out.lines()
            .next()
            .map(|l| l.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    pub fn log(&self, daemon: &str) -> String {
        sh_on(self.release, &["log", &self.instance, daemon])
    }
}

impl Drop for AcctSlurm {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .args(["tests/bed/slurm.sh", "stop", &self.instance])
            .output();
    }
}

/// slurmdbd.conf as the rendered init container writes it: its own command line run with the
/// paths of this host and STORAGE_PASS set to the Secret's value.
fn with_password(c: &ClusterFile, template: &str, password: &str) -> String {
    let (cmd, secret, key, file) = init_container(c);
    let db = c
        .spec
        .accounting
        .database
        .as_ref()
        .expect("accounting.database");
    assert_eq!(
        (secret.as_str(), key.as_str()),
        (db.password.name.as_str(), db.password.key.as_str())
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let (tpl, keys, etc) = (
        dir.path().join("tpl"),
        dir.path().join("keys"),
        dir.path().join("etc"),
    );
    for d in [&tpl, &keys, &etc] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(tpl.join("slurmdbd.conf"), template).expect("write template");
    std::fs::write(keys.join("slurm.key"), "k").expect("write key");
    // The Secret's file, where the pod mounts it.
    let pass = dir.path().join("pass");
    std::fs::write(&pass, password).expect("write the password's file");
    let cmd = cmd
        .replace(&file, &pass.display().to_string())
        .replace("/run/slurmdbd-template/", &format!("{}/", tpl.display()))
        .replace("/run/slurm-keys/", &format!("{}/", keys.display()))
        .replace("/etc/slurm/", &format!("{}/", etc.display()));
    let out = Command::new("sh")
        .args(["-ec", &cmd])
        .output()
        .expect("run the init container's command");
    assert!(
        out.status.success(),
        "the init container's command failed: {out:?}"
    );
    std::fs::read_to_string(etc.join("slurmdbd.conf"))
        .expect("slurmdbd.conf written by the init container")
}

/// Rows of `sacctmgr show` keyed by their first field.
pub fn by_first(rows: Vec<Vec<String>>) -> BTreeMap<String, Vec<String>> {
    rows.into_iter()
        .filter_map(|r| Some((r.first()?.clone(), r)))
        .collect()
}
