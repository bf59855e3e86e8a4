//! Accounting for real: the bed's MariaDB, a slurmdbd started with the slurmdbd.conf slurmops
//! renders, slurmctld storing to it and slurmrestd's slurmdb endpoints. QOS, accounts and users
//! come from cluster.yaml; what they did is checked with Slurm's own tools (`sacctmgr`, `sacct`,
//! `squeue`), not with slurmops' reader.

use crate::support;

use std::process::Command;
use std::time::Duration;

use crate::support::accounting::{AcctSlurm, Mariadb, by_first};
use crate::support::slurm::sh_on;

/// The bed's cluster with accounting, a QOS limited to MAX_CPU CPUs per user, an account tree
/// research → vision and users alice (vision) and bob (research and vision).
fn cluster_yaml(suffix: &str, max_cpu: u32, with_vision: bool, extra: &str) -> String {
    let base =
        std::fs::read_to_string("tests/bed/cluster.yaml").expect("read the bed cluster.yaml");
    let vision = if with_vision {
        "      - name: vision\n        parent: research\n        description: Vision team\n        limits: {maxJobs: 10}\n"
    } else {
        ""
    };
    let alice = if with_vision {
        "      - name: alice\n        accounts: [{name: vision, qos: [normal, gpu-high], defaultQOS: gpu-high}]\n"
    } else {
        ""
    };
    let bob_vision = if with_vision {
        "\n          - {name: vision}"
    } else {
        ""
    };
    format!(
        "{base}  clusterName: acct_{u}\n{extra}  accounting:\n    enabled: true\n    database:\n      host: db.example\n      name: acct_{u}\n      user: acct_{u}\n      password: {{name: slurmdbd-db, key: password}}\n    qos:\n      - name: gpu-high\n        description: GPU jobs\n        priority: 100\n        limits: {{maxTRESPerUser: \"cpu={max_cpu}\", maxWall: \"1:00:00\"}}\n    accounts:\n      - name: research\n        description: Research\n        fairshare: 10\n        qos: [normal, gpu-high]\n        defaultQOS: normal\n{vision}    users:\n{alice}      - name: bob\n        adminLevel: Operator\n        accounts:\n          - {{name: research}}{bob_vision}\n",
        u = suffix.replace('-', "_"),
    )
}

struct Cli {
    url: String,
    dir: tempfile::TempDir,
}

impl Cli {
    /// `slurmops slurm accounting` on TEXT (`--apply` when APPLY; LAST: the cluster.yaml
    /// applied before): exit code and output.
    fn run(&self, s: &AcctSlurm, text: &str, apply: bool, last: Option<&str>) -> (i32, String) {
        let file = self.dir.path().join("cluster.yaml");
        std::fs::write(&file, text).expect("write cluster.yaml");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_slurmops"));
        cmd.args(["slurm", "--slurmrestd-url", &self.url, "accounting"])
            .arg(&file);
        cmd.env("SLURM_JWT", s.token("root"));
        if apply {
            cmd.arg("--apply");
        }
        if let Some(l) = last {
            let lf = self.dir.path().join("last.yaml");
            std::fs::write(&lf, l).expect("write the last applied cluster.yaml");
            cmd.arg("--last-applied").arg(lf);
        }
        let out = cmd.output().expect("run slurmops");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }
}

async fn until<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

on_each_slurm! {
    /// slurmdbd runs with the rendered config and records jobs; QOS, accounts and users from git
    /// exist in slurmdbd and their limits hold jobs; raising a limit in git releases them.
    async fn accounting_objects_from_git_are_in_slurmdbd_and_their_limits_hold() {
        support::bed();
        let release = support::slurm_release();
        let suffix = support::unique_suffix();
        let v1 = cluster_yaml(&suffix, 1, true, "");
        let c = slurmops::cluster::load("cluster.yaml", &v1).unwrap_or_else(|d| panic!("{d:?}"));
        let s = AcctSlurm::start(&c, release, &format!("pw-{suffix}"));
        assert!(
            s.log("slurmdbd").contains("started"),
            "slurmdbd started with the rendered slurmdbd.conf:\n{}",
            s.log("slurmdbd")
        );
        s.start_node("acct-n1", 2);
        let cli = Cli { url: s.restd_url.clone(), dir: tempfile::tempdir().unwrap() };

        let (code, out) = cli.run(&s, &v1, false, None);
        assert_eq!(code, 2, "the plan shows the objects to add:\n{out}");
        assert!(out.contains("QOS gpu-high added"), "{out}");
        let (code, out) = cli.run(&s, &v1, true, None);
        assert_eq!(code, 0, "apply:\n{out}");

        // Checked with Slurm's own tool.
        let qos = by_first(s.sacctmgr_show(&["qos", "format=Name,Priority,MaxTRESPU,MaxWall,Description"]));
        let q = qos.get("gpu-high").unwrap_or_else(|| panic!("QOS gpu-high in sacctmgr: {qos:?}"));
        assert_eq!(q[1..4], ["100", "cpu=1", "01:00:00"], "{q:?}");
        assert!(q[4].starts_with("slurmops:"), "owned by slurmops: {q:?}");
        let cluster = format!("cluster={}", s.cluster);
        let assocs = s.sacctmgr_show(&["assoc", "where", &cluster, "format=Account,User,ParentName,QOS,DefaultQOS,Share"]);
        let find = |acc: &str, user: &str| {
            assocs
                .iter()
                .find(|r| r[0] == acc && r[1] == user)
                .unwrap_or_else(|| panic!("association {acc}/{user} in {assocs:?}"))
                .clone()
        };
        assert_eq!(find("research", "")[2], "root");
        assert_eq!(find("research", "")[5], "10");
        assert_eq!(find("vision", "")[2], "research");
        assert_eq!(find("vision", "alice")[3..5], ["gpu-high,normal", "gpu-high"]);
        find("research", "bob");
        let users = by_first(s.sacctmgr_show(&["user", "format=User,DefaultAccount,AdminLevel"]));
        assert_eq!(users["bob"][1..], ["research", "Operator"]);
        assert_eq!(users["alice"][1..], ["vision", "None"]);

        // A job over the QOS limit waits with Slurm's reason; raising the limit in git runs it.
        let job = s.submit("alice", "vision", Some("gpu-high"), 2, 3).await;
        let reason = until("the job held by its QOS", 30, || {
            s.job(job).filter(|(st, r)| st == "PENDING" && r.starts_with("QOS")).map(|(_, r)| r)
        })
        .await;
        assert_eq!(reason, "QOSMaxCpuPerUserLimit");
        let v2 = cluster_yaml(&suffix, 2, true, "");
        let (code, out) = cli.run(&s, &v2, false, Some(&v1));
        assert_eq!(code, 2);
        assert!(out.contains("QOS gpu-high: MaxTRESPerUser cpu=1 → cpu=2"), "{out}");
        let (code, out) = cli.run(&s, &v2, true, Some(&v1));
        assert_eq!(code, 0, "{out}");
        until("the job to run once the limit is raised", 60, || {
            s.job(job).filter(|(st, _)| st != "PENDING").map(|_| ())
                .or_else(|| s.job(job).is_none().then_some(()))
        })
        .await;
        let state = until("the job's record in slurmdbd", 60, || {
            s.sacct_state(job).filter(|st| st == "COMPLETED")
        })
        .await;
        assert_eq!(state, "COMPLETED", "sacct reads the job from slurmdbd");

        // Converged: a second apply writes nothing.
        let (code, out) = cli.run(&s, &v2, true, Some(&v2));
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("0 slurmdbd writes"), "no write on a no-op:\n{out}");
        let (code, out) = cli.run(&s, &v2, false, Some(&v2));
        assert_eq!(code, 0, "nothing to do:\n{out}");
    }
}

on_each_slurm! {
    /// Hand edits are drift (corrected, or only reported in detect-only mode), accounts made by
    /// hand are never removed, and an account with a running job is not removed.
    async fn hand_edits_are_drift_and_nothing_made_by_hand_or_busy_is_removed() {
        support::bed();
        let release = support::slurm_release();
        let suffix = support::unique_suffix();
        let v1 = cluster_yaml(&suffix, 2, true, "");
        let c = slurmops::cluster::load("cluster.yaml", &v1).unwrap_or_else(|d| panic!("{d:?}"));
        let s = AcctSlurm::start(&c, release, &format!("pw-{suffix}"));
        s.start_node("acct-n1", 2);
        let cli = Cli { url: s.restd_url.clone(), dir: tempfile::tempdir().unwrap() };
        let (code, out) = cli.run(&s, &v1, true, None);
        assert_eq!(code, 0, "{out}");

        // Someone edits with sacctmgr and makes an account by hand.
        s.exec(&["sacctmgr", "-i", "modify", "qos", "gpu-high", "set", "priority=5"]);
        s.exec(&["sacctmgr", "-i", "add", "account", "manual", "cluster", &s.cluster]);
        let detect = cluster_yaml(&suffix, 2, true, "  policy: {detectDriftOnly: true}\n");
        let (code, out) = cli.run(&s, &detect, true, Some(&detect));
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("drift (hand edit, reported only"), "{out}");
        assert!(out.contains("QOS gpu-high: Priority is 5 in Slurm, 100 in cluster.yaml"), "{out}");
        assert!(out.contains("account manual exists in Slurm but not in cluster.yaml"), "{out}");
        assert!(out.contains("0 slurmdbd writes"), "detect-only changes nothing:\n{out}");
        let prio = || by_first(s.sacctmgr_show(&["qos", "format=Name,Priority"]))["gpu-high"][1].clone();
        assert_eq!(prio(), "5", "left as edited in detect-only mode");

        let (code, out) = cli.run(&s, &v1, true, Some(&v1));
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("QOS gpu-high: Priority 5 → 100 (undoes a hand edit)"), "{out}");
        assert_eq!(prio(), "100", "corrected");
        let accounts = by_first(s.sacctmgr_show(&["account", "format=Account"]));
        assert!(accounts.contains_key("manual"), "an account made by hand stays: {accounts:?}");

        // vision has a running job: removing it from git is refused with the job id.
        let job = s.submit("alice", "vision", None, 1, 300).await;
        until("the long job to run", 30, || s.job(job).filter(|(st, _)| st == "RUNNING").map(|_| ())).await;
        let without = cluster_yaml(&suffix, 2, false, "");
        let (code, out) = cli.run(&s, &without, true, Some(&v1));
        assert_eq!(code, 1, "refused:\n{out}");
        assert!(
            out.contains(&format!("REFUSED: account vision removed: account vision has running or pending jobs {job}")),
            "{out}"
        );
        let accounts = by_first(s.sacctmgr_show(&["account", "format=Account"]));
        assert!(accounts.contains_key("vision"), "still there: {accounts:?}");
        assert_eq!(s.job(job).map(|j| j.0), Some("RUNNING".into()), "the job is untouched");

        // Once the job is gone the same change goes through; the hand-made account stays.
        s.exec(&["scancel", &job.to_string()]);
        until("the job to end", 30, || s.job(job).is_none().then_some(())).await;
        let (code, out) = cli.run(&s, &without, true, Some(&v1));
        assert_eq!(code, 0, "{out}");
        let accounts = by_first(s.sacctmgr_show(&["account", "format=Account"]));
        assert!(!accounts.contains_key("vision"), "removed: {accounts:?}");
        assert!(accounts.contains_key("manual") && accounts.contains_key("research"), "{accounts:?}");

        // Only policy.accounting.prune removes what was made by hand.
        let prune = cluster_yaml(&suffix, 2, false, "  policy:\n    accounting: {prune: true}\n");
        let (code, out) = cli.run(&s, &prune, true, Some(&without));
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("account manual removed"), "{out}");
        let accounts = by_first(s.sacctmgr_show(&["account", "format=Account"]));
        assert!(!accounts.contains_key("manual") && accounts.contains_key("research"), "{accounts:?}");
    }
}

/// `slurmops apply` with Slurm (the daemon's pass, looped) reconciles accounting after the
/// Kubernetes objects; `plan --cluster` reads slurmdbd live; the last applied revision in the
/// ApplySet parent tells a hand edit (reported in detect-only mode) from a change in git.
#[tokio::test(flavor = "multi_thread")]
async fn apply_reconciles_accounting_in_its_pass_and_plan_reads_slurmdbd_live() {
    support::select_slurm("24.11");
    let env = support::TestEnv::new("acct").await;
    env.grant_slurmops_role().await;
    let ns_line = format!("namespace: {}", env.ns);
    let yaml = |max_cpu: u32, extra: &str| {
        cluster_yaml(&env.suffix, max_cpu, true, extra).replace("namespace: slurm", &ns_line)
    };
    let v1 = yaml(1, "");
    let c = slurmops::cluster::load("cluster.yaml", &v1).unwrap_or_else(|d| panic!("{d:?}"));
    let s = AcctSlurm::start(&c, "24.11", &format!("pw-{}", env.suffix));
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path().to_str().unwrap().to_string();
    let token = s.token("root");
    let run = |args: &[&str], text: &str| {
        std::fs::write(repo.path().join("cluster.yaml"), text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
            .args(args)
            .args(["--slurmrestd-url", &s.restd_url, "--slurm-jwt", &token])
            .env("KUBECONFIG", &support::bed().kubeconfig_restricted)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    };

    let (code, out) = run(&["plan", &dir, "--cluster"], &v1);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("QOS gpu-high added"),
        "live plan reads slurmdbd:\n{out}"
    );
    let (code, out) = run(&["apply", &dir, "--wait", "0s"], &v1);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("created: StatefulSet/bed-accounting"),
        "Kubernetes objects first:\n{out}"
    );
    assert!(out.contains("accounting: QOS gpu-high added"), "{out}");
    assert!(out.contains("accounting: account vision added"), "{out}");
    let qos = by_first(s.sacctmgr_show(&["qos", "format=Name,MaxTRESPU"]));
    assert_eq!(qos["gpu-high"][1], "cpu=1");

    // A change in git is applied even in detect-only mode; a hand edit there is only reported.
    s.exec(&[
        "sacctmgr",
        "-i",
        "modify",
        "qos",
        "gpu-high",
        "set",
        "priority=5",
    ]);
    let v2 = yaml(2, "  policy: {detectDriftOnly: true}\n");
    let (code, out) = run(&["plan", &dir, "--cluster"], &v2);
    assert_eq!(code, 2, "{out}");
    let (code, out) = run(&["apply", &dir, "--wait", "0s"], &v2);
    assert_eq!(code, 0, "{out}");
    let qos = by_first(s.sacctmgr_show(&["qos", "format=Name,MaxTRESPU,Priority"]));
    assert_eq!(
        qos["gpu-high"][1..],
        ["cpu=2", "100"],
        "the change from git wins over the hand edit"
    );
    s.exec(&[
        "sacctmgr",
        "-i",
        "modify",
        "qos",
        "gpu-high",
        "set",
        "priority=7",
    ]);
    let (code, out) = run(&["apply", &dir, "--wait", "0s"], &v2);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("drift (hand edit, reported only: policy.detectDriftOnly): QOS gpu-high: Priority is 7 in Slurm, 100 in cluster.yaml"),
        "{out}"
    );
    let qos = by_first(s.sacctmgr_show(&["qos", "format=Name,Priority"]));
    assert_eq!(qos["gpu-high"][1], "7", "left as edited");
    env.cleanup().await;
}

on_each_slurm! {
    /// The in-cluster MariaDB as slurmops renders it: Debian's mariadbd runs with the rendered
    /// my.cnf, its database and user are made from the StatefulSet's environment as the image
    /// makes them, and slurmdbd stores to it without a setting Slurm warns about.
    async fn the_in_cluster_mariadb_runs_with_the_rendered_config_and_slurmdbd_stores_to_it() {
        support::bed();
        let release = support::slurm_release();
        let suffix = support::unique_suffix();
        let text = cluster_yaml(&suffix, 1, true, "").replace(
            "      host: db.example\n",
            "      inCluster: {storage: 1Gi, resources: {limits: {memory: 3Gi}}}\n",
        );
        let c = slurmops::cluster::load("cluster.yaml", &text).unwrap_or_else(|d| panic!("{d:?}"));
        let r = slurmops::render::render(&c);
        let cnf = r
            .get("ConfigMap", "bed-mariadb")
            .and_then(|o| o.body["data"]["slurm.cnf"].as_str().map(String::from))
            .expect("the rendered my.cnf");
        let sts = r.get("StatefulSet", "bed-mariadb").expect("the MariaDB StatefulSet");
        let env = &sts.body["spec"]["template"]["spec"]["containers"][0]["env"];
        let value = |name: &str| {
            env.as_array()
                .and_then(|l| l.iter().find(|e| e["name"] == name))
                .cloned()
                .unwrap_or_else(|| panic!("{name} in {env}"))
        };
        let (database, user) = (value("MARIADB_DATABASE")["value"].clone(), value("MARIADB_USER")["value"].clone());
        // The password as a file of the Secret (the image's `_FILE` contract), not in the environment.
        let file = value("MARIADB_PASSWORD_FILE")["value"].as_str().unwrap_or_default().to_string();
        let pod = &sts.body["spec"]["template"]["spec"];
        let mount = pod["containers"][0]["volumeMounts"].as_array().into_iter().flatten().find(|m| file.starts_with(&format!("{}/", m["mountPath"].as_str().unwrap_or("-")))).unwrap_or_else(|| panic!("no mount holds {file}"));
        let volume = pod["volumes"].as_array().into_iter().flatten().find(|v| v["name"] == mount["name"]).expect("the password's volume");
        let secret = &volume["projected"]["sources"][0]["secret"];
        assert_eq!((secret["name"].as_str(), secret["items"][0]["key"].as_str()), (Some("slurmdbd-db"), Some("password")));
        assert!(!env.to_string().contains("secretKeyRef"), "{env}");
        assert!(r.slurm["slurmdbd.conf"].contains("StorageHost=bed-mariadb.slurm.svc.cluster.local"));

        let db = Mariadb::start(&cnf);
        let password = format!("pw-{suffix}");
        // What the image does with that environment at its first start.
        db.sql(&format!(
            "CREATE DATABASE `{d}`; CREATE USER '{u}'@'%' IDENTIFIED BY '{password}'; GRANT ALL ON `{d}`.* TO '{u}'@'%';",
            d = database.as_str().unwrap(),
            u = user.as_str().unwrap()
        ));
        let vars = db.sql(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_snapshot_isolation', 'innodb_lock_wait_timeout', 'innodb_buffer_pool_size');",
        );
        for want in ["innodb_buffer_pool_size\t2147483648", "innodb_lock_wait_timeout\t900", "innodb_snapshot_isolation\tOFF"] {
            assert!(vars.contains(want), "{want} in effect:\n{vars}");
        }
        let s = AcctSlurm::start_on(&c, release, &password, &db, false);
        let log = s.log("slurmdbd");
        assert!(log.contains("started"), "{log}");
        assert!(
            !log.contains("not recommended") && !log.contains("innodb_snapshot_isolation"),
            "slurmdbd finds the database as Slurm recommends it:\n{log}"
        );
        let cli = Cli { url: s.restd_url.clone(), dir: tempfile::tempdir().unwrap() };
        let (code, out) = cli.run(&s, &text, true, None);
        assert_eq!(code, 0, "{out}");
        let qos = by_first(s.sacctmgr_show(&["qos", "format=Name"]));
        assert!(qos.contains_key("gpu-high"), "stored in the in-cluster MariaDB: {qos:?}");
        let tables = db.sql(&format!("SHOW TABLES FROM `{}`;", database.as_str().unwrap()));
        assert!(tables.contains("qos_table"), "slurmdbd's tables are in it:\n{tables}");
    }
}

on_each_slurm! {
    /// slurmdbd goes away for a minute while jobs run and finish: slurmctld keeps their records
    /// and sends them when it returns (`sacct` shows every job), and `apply` meanwhile applies
    /// the Kubernetes objects and says that accounting could not be read, naming slurmdbd.
    async fn a_slurmdbd_outage_loses_no_job_record_and_blocks_no_apply() {
        let release = support::slurm_release();
        let env = support::TestEnv::new("dbd").await;
        env.grant_slurmops_role().await;
        let v1 = cluster_yaml(&env.suffix, 2, true, "")
            .replace("namespace: slurm", &format!("namespace: {}", env.ns));
        let c = slurmops::cluster::load("cluster.yaml", &v1).unwrap_or_else(|d| panic!("{d:?}"));
        let s = AcctSlurm::start(&c, release, &format!("pw-{}", env.suffix));
        s.start_node("dbd-n1", 2);
        let cli = Cli { url: s.restd_url.clone(), dir: tempfile::tempdir().unwrap() };
        let (code, out) = cli.run(&s, &v1, true, None);
        assert_eq!(code, 0, "apply:\n{out}");
        let before = s.submit("bob", "research", None, 1, 1).await;
        until("the first job recorded", 60, || s.sacct_state(before).filter(|st| st == "COMPLETED")).await;

        sh_on(release, &["stop-dbd", &s.instance]);
        let stopped = std::time::Instant::now();
        let mut during = Vec::new();
        for user in ["alice", "bob", "bob"] {
            let account = if user == "alice" { "vision" } else { "research" };
            during.push(s.submit(user, account, None, 1, 2).await);
        }
        for &job in &during {
            until("a job run and gone during the outage", 60, || s.job(job).is_none().then_some(())).await;
        }
        // The pass while slurmdbd is away: the Kubernetes objects applied, accounting named as
        // what could not be done.
        let repo = tempfile::tempdir().unwrap();
        std::fs::write(repo.path().join("cluster.yaml"), &v1).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
            .args(["apply", repo.path().to_str().unwrap(), "--wait", "0s"])
            .args(["--slurmrestd-url", &s.restd_url, "--slurm-jwt", &s.token("root")])
            .env("KUBECONFIG", &support::bed().kubeconfig_restricted)
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("created: StatefulSet/bed-accounting"), "Kubernetes objects applied:\n{text}");
        assert!(text.contains("error: accounting: cannot read slurmdbd, nothing changed"), "the outage named:\n{text}");
        assert_eq!(out.status.code(), Some(1), "what could not be done is an error:\n{text}");
        let outage = Duration::from_secs(60).saturating_sub(stopped.elapsed());
        tokio::time::sleep(outage).await;

        sh_on(release, &["start-dbd", &s.instance]);
        let back = std::time::Instant::now();
        for &job in &during {
            let state = until("the outage's jobs in sacct", 120, || s.sacct_state(job).filter(|st| st == "COMPLETED")).await;
            assert_eq!(state, "COMPLETED");
        }
        eprintln!(
            "Slurm {release}: slurmdbd away {:.0} s; jobs recorded after it returned: {}/{} ({:.1} s after)",
            back.duration_since(stopped).as_secs_f64(), during.len(), during.len(), back.elapsed().as_secs_f64()
        );
        env.cleanup().await;
    }
}

/// A fresh install's first pass meets slurmrestd not up yet (it starts after the daemon): the
/// objects are applied, accounting waits — the status says so in its held line — and the daemon
/// does accounting's step alone within seconds of slurmrestd answering, not at the drift
/// re-apply (an hour here) nor the next poll (ten minutes here): a user's `--account` works then.
#[tokio::test(flavor = "multi_thread")]
async fn accounting_that_meets_slurmrestd_not_up_is_done_within_seconds_of_it_answering() {
    support::select_slurm("24.11");
    let (env, repo, url, dir) = support::daemon::gitops("acctwait").await;
    let v1 = cluster_yaml(&env.suffix, 2, true, "")
        .replace("namespace: slurm", &format!("namespace: {}", env.ns));
    let c = slurmops::cluster::load("cluster.yaml", &v1).unwrap_or_else(|d| panic!("{d:?}"));
    let s = AcctSlurm::start(&c, "24.11", &format!("pw-{}", env.suffix));
    s.start_node("acctwait-n1", 2);
    let port = s.restd_url.rsplit(':').next().unwrap().to_string();
    sh_on("24.11", &["stop-restd", &s.instance, "slurmrestd"]);
    let commit = repo.push(&v1, "accounts for a new cluster");
    let token = s.token("root");
    let d = support::daemon::Daemon::start(
        &env,
        dir.path(),
        &url,
        "acctwait",
        &[
            "--interval",
            "10m",
            "--drift-interval",
            "1h",
            "--slurmrestd-url",
            &s.restd_url,
            "--slurm-jwt",
            &token,
        ],
    );
    support::daemon::applied(&env, &commit, Duration::from_secs(120)).await;
    let waiting = support::eventually(
        "the status to say accounting waits for slurmrestd",
        Duration::from_secs(60),
        async || {
            let st = support::daemon::status(&env).await?;
            st.held
                .contains("accounting: QOS, accounts and users (waiting")
                .then_some(st)
        },
    )
    .await;
    assert!(
        waiting.errors.contains("accounting: cannot read slurmdbd"),
        "{:?}",
        waiting.errors
    );
    let qos = || by_first(s.sacctmgr_show(&["qos", "format=Name"]));
    assert!(!qos().contains_key("gpu-high"), "nothing made yet");
    // Passes go on meanwhile (every few seconds while Slurm does not answer): said once.
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(
        d.output()
            .matches("accounting waits for slurmrestd or slurmdbd")
            .count(),
        1,
        "told once while it lasts:\n{}",
        d.output()
    );

    sh_on("24.11", &["start-restd", &s.instance, &port]);
    let back = std::time::Instant::now();
    until("the QOS and accounts of git in slurmdbd", 60, || {
        let accounts = by_first(s.sacctmgr_show(&["account", "format=Account"]));
        (qos().contains_key("gpu-high") && accounts.contains_key("vision")).then_some(())
    })
    .await;
    let took = back.elapsed();
    eprintln!(
        "accounting done {:.1} s after slurmrestd answered",
        took.as_secs_f64()
    );
    assert!(
        took < Duration::from_secs(25),
        "accounting waited {took:?} after slurmrestd answered"
    );
    support::eventually(
        "the status to say accounting waits no more",
        Duration::from_secs(30),
        async || {
            let st = support::daemon::status(&env).await?;
            (!st.held.contains("accounting:") && st.errors.is_empty()).then_some(())
        },
    )
    .await;
    let job = s.submit("alice", "vision", None, 1, 1).await;
    until("alice's job charged to vision to run", 60, || {
        s.sacct_state(job).filter(|st| st == "COMPLETED")
    })
    .await;
    drop(d);
    env.cleanup().await;
}
