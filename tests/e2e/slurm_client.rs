//! The slurmrestd client and the drain primitives against the real Slurm of the test bed
//! (slurmctld, dynamic slurmd, slurmrestd with JWT), on every supported release: the suite runs
//! through the newest data parser each release serves (v0.0.42 on 24.11, v0.0.45 on 26.05), and
//! through v0.0.42 on 26.05 too, the parser both releases share.

use crate::support;

use std::time::{Duration, Instant};

use slurmops::slurm::auth::{Credentials, KeyBytes, Secret};
use slurmops::slurm::client::errno;
use slurmops::slurm::{Client, Config, DataParser, Drain, Resume, SlurmError, SlurmNodes};

use crate::support::slurm::{Slurmd, job_state, scontrol, sh, submit_sleep};
use crate::support::{bed, eventually, slurm_instance, unique_suffix};

fn client(parser: DataParser) -> Client {
    let b = bed();
    let mut c = Config::new(
        b.slurmrestd_url.clone(),
        Credentials::Token {
            token: Secret::new(b.slurm_jwt.clone()),
            user: None,
        },
    );
    c.parser = Some(parser);
    Client::new(c).unwrap()
}

async fn wait_idle(c: &Client, node: &str) {
    eventually(
        &format!("{node} IDLE"),
        Duration::from_secs(30),
        async || {
            let n = c.node(node).await.ok()?;
            let s = &n.state;
            (s.has("IDLE") && !s.has("DRAIN") && !s.has("NOT_RESPONDING") && !s.has("INVALID_REG"))
                .then_some(())
        },
    )
    .await;
}

async fn wait_busy(c: &Client, node: &str) {
    eventually(
        &format!("{node} busy"),
        Duration::from_secs(30),
        async || c.node(node).await.ok()?.state.is_busy().then_some(()),
    )
    .await;
}

/// Idle node: drain → drained within 2 s, a repeat is harmless; resume → IDLE again.
async fn idle_node_drains_fast_and_resumes(c: &Client, node: &str) {
    wait_idle(c, node).await;
    let t0 = Instant::now();
    assert_eq!(c.drain(node, "rollout").await.unwrap(), Drain::Requested);
    while !c.is_drained(node).await.unwrap() {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "idle {node} not drained within 2 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let n = c.node(node).await.unwrap();
    assert_eq!(n.reason, "slurmops: rollout");
    assert_eq!(c.drain(node, "rollout").await.unwrap(), Drain::AlreadyOurs);
    assert!(c.is_drained(node).await.unwrap());

    assert_eq!(c.resume(node).await.unwrap(), Resume::Resumed);
    wait_idle(c, node).await;
    assert!(!c.is_drained(node).await.unwrap());
    // Resuming a node that is not drained is a no-op, not Slurm's error.
    assert_eq!(c.resume(node).await.unwrap(), Resume::NotDrained);
    // Slurm itself refuses RESUME of an IDLE node, with an error number that changed between
    // releases; resume() takes either as "resumed already" when its own earlier RESUME landed.
    let (status, number) = match support::slurm_release() {
        "24.11" => (500, errno::INVALID_NODE_STATE),
        "25.11" => (500, errno::INVALID_NODE_STATE_TRANSITION),
        _ => (422, errno::INVALID_NODE_STATE_TRANSITION),
    };
    match c.update_node(node, "RESUME", None).await {
        Err(SlurmError::Api {
            status: s, errors, ..
        }) => {
            assert_eq!(s, status, "{errors:?}");
            assert!(
                errors.iter().any(|e| e.error_number == Some(number)),
                "{errors:?}"
            );
        }
        other => panic!("RESUME of an IDLE node: {other:?}"),
    }
}

/// Busy node: draining, never drained, while a real job runs; drained once it ends, and the job
/// completes normally.
async fn busy_node_is_drained_only_after_its_job_ends(c: &Client, node: &str) {
    wait_idle(c, node).await;
    let job = submit_sleep(node, 6).await;
    wait_busy(c, node).await;
    let on = c.jobs_on(node).await.unwrap();
    assert_eq!(on.iter().map(|j| j.id).collect::<Vec<_>>(), vec![job]);
    assert!(
        on[0].end_time.is_some(),
        "a running job has an expected end"
    );

    assert_eq!(
        c.drain(node, "image change").await.unwrap(),
        Drain::Requested
    );
    let t0 = Instant::now();
    let mut drained_at = None;
    while t0.elapsed() < Duration::from_secs(30) {
        // Node first, job second: a job still RUNNING after the node was seen drained was running
        // then too. The other order races with the job ending between the two reads.
        let drained = c.is_drained(node).await.unwrap();
        let running = job_state(job).await.iter().any(|s| s == "RUNNING");
        assert!(
            !(running && drained),
            "{node} reported drained while job {job} runs"
        );
        if drained {
            drained_at = Some(t0.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        drained_at.is_some(),
        "{node} never drained after its job ended"
    );
    assert_eq!(job_state(job).await, vec!["COMPLETED".to_string()]);
    assert!(c.jobs_on(node).await.unwrap().is_empty());
    assert_eq!(c.resume(node).await.unwrap(), Resume::Resumed);
    wait_idle(c, node).await;
}

/// A cancelled job also frees the node: drained right after.
async fn cancelled_job_frees_the_drain(c: &Client, node: &str) {
    wait_idle(c, node).await;
    let job = submit_sleep(node, 300).await;
    wait_busy(c, node).await;
    c.drain(node, "scale-in").await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!c.is_drained(node).await.unwrap());
    sh(&["exec", slurm_instance(), "scancel", &job.to_string()]);
    eventually(
        &format!("{node} drained after cancel"),
        Duration::from_secs(30),
        async || c.is_drained(node).await.unwrap().then_some(()),
    )
    .await;
    assert_eq!(c.resume(node).await.unwrap(), Resume::Resumed);
}

/// An administrator's drain: never resumed, its reason never rewritten.
async fn admin_drain_is_never_undone(c: &Client, node: &str) {
    wait_idle(c, node).await;
    scontrol(&[
        "update",
        &format!("nodename={node}"),
        "state=drain",
        "reason=maint",
    ]);
    let held = c.resume(node).await.unwrap();
    assert!(
        matches!(&held, Resume::HeldByOther { reason, .. } if reason == "maint"),
        "{held:?}"
    );
    let held = c.drain(node, "rollout").await.unwrap();
    assert!(
        matches!(&held, Drain::HeldByOther { reason, .. } if reason == "maint"),
        "{held:?}"
    );
    let n = c.node(node).await.unwrap();
    assert!(n.state.has("DRAIN"), "{node} was undrained: {}", n.state);
    assert_eq!(n.reason, "maint");
    scontrol(&["update", &format!("nodename={node}"), "state=resume"]);
}

async fn unknown_node_is_an_error_everywhere(c: &Client) {
    let ghost = format!("ghost-{}", unique_suffix());
    assert!(matches!(
        c.is_drained(&ghost).await,
        Err(SlurmError::UnknownNode(_))
    ));
    assert!(matches!(
        c.drain(&ghost, "x").await,
        Err(SlurmError::UnknownNode(_))
    ));
    assert!(matches!(
        c.resume(&ghost).await,
        Err(SlurmError::UnknownNode(_))
    ));
    assert!(matches!(
        c.jobs_on(&ghost).await,
        Err(SlurmError::UnknownNode(_))
    ));
    assert!(matches!(
        c.is_drained("../ping").await,
        Err(SlurmError::Config(_))
    ));
}

async fn bad_token_is_an_auth_error(parser: DataParser, node: &str) {
    let mut cfg = Config::new(
        bed().slurmrestd_url.clone(),
        Credentials::Token {
            token: Secret::new("eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl"),
            user: None,
        },
    );
    cfg.parser = Some(parser);
    let c = Client::new(cfg).unwrap();
    let err = c.is_drained(node).await.unwrap_err();
    assert!(matches!(err, SlurmError::Auth { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        !text.contains("c2lnbmF0dXJl"),
        "the token leaked into: {text}"
    );
    assert!(c.drain(node, "x").await.is_err());
}

/// A token minted from the cluster's JWT key (as the daemon does) is accepted.
async fn minted_token_works(parser: DataParser, node: &str) {
    let key = std::process::Command::new("bash")
        .args(["tests/bed/slurm.sh", "exec", slurm_instance(), "cat"])
        .arg(format!("/etc/slurm-{}/jwt_hs256.key", slurm_instance()))
        .output()
        .unwrap()
        .stdout;
    assert_eq!(key.len(), 32);
    let mut cfg = Config::new(
        bed().slurmrestd_url.clone(),
        Credentials::Key {
            key: KeyBytes(key),
            user: "root".into(),
            lifetime: Duration::from_secs(120),
        },
    );
    cfg.parser = Some(parser);
    let c = Client::new(cfg).unwrap();
    assert!(!c.is_drained(node).await.unwrap());
}

/// slurmrestd goes away mid-operation: errors after bounded retries, never "drained".
async fn slurmrestd_stopped_fails_closed(parser: DataParser, node: &str) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let name = format!("restd-{}", unique_suffix());
    sh(&["start-restd", slurm_instance(), &port.to_string(), &name]);
    let mut cfg = Config::new(
        format!("http://127.0.0.1:{port}"),
        Credentials::Token {
            token: Secret::new(bed().slurm_jwt.clone()),
            user: None,
        },
    );
    cfg.parser = Some(parser);
    let c = Client::new(cfg).unwrap();
    c.drain(node, "rollout").await.unwrap();
    sh(&["stop-restd", slurm_instance(), &name]);
    let t0 = Instant::now();
    let err = c.is_drained(node).await.unwrap_err();
    assert!(matches!(err, SlurmError::Unreachable { .. }), "{err:?}");
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "retries are bounded"
    );
    assert!(err.to_string().contains(&format!("127.0.0.1:{port}")));
    assert!(matches!(
        c.resume(node).await,
        Err(SlurmError::Unreachable { .. })
    ));
    // The shared slurmrestd still sees the drain slurmops set before the outage.
    let shared = client(parser);
    assert!(shared.is_drained(node).await.unwrap());
    assert_eq!(shared.resume(node).await.unwrap(), Resume::Resumed);
}

async fn suite(parser: DataParser) {
    let tag = parser.as_str().replace("v0.0.", "p");
    let s = unique_suffix();
    let idle = Slurmd::start(&format!("idle-{tag}-{s}"), "bed");
    let busy = Slurmd::start(&format!("busy-{tag}-{s}"), "bed");
    let cancel = Slurmd::start(&format!("cancel-{tag}-{s}"), "bed");
    let c = client(parser);
    assert_eq!(c.parser().await.unwrap(), parser);
    let (a, b, d) = tokio::join!(
        idle_node_drains_fast_and_resumes(&c, &idle.name),
        busy_node_is_drained_only_after_its_job_ends(&c, &busy.name),
        cancelled_job_frees_the_drain(&c, &cancel.name),
    );
    let _ = (a, b, d);
    admin_drain_is_never_undone(&c, &idle.name).await;
    unknown_node_is_an_error_everywhere(&c).await;
    bad_token_is_an_auth_error(parser, &idle.name).await;
    minted_token_works(parser, &idle.name).await;
    wait_idle(&c, &cancel.name).await;
    slurmrestd_stopped_fails_closed(parser, &cancel.name).await;
}

/// The newest data parser this process's Slurm release serves.
fn newest_parser() -> DataParser {
    let release = slurmops::cluster::release::find(support::slurm_release()).unwrap();
    DataParser::ALL
        .into_iter()
        .find(|p| p.as_str() == release.parsers[0])
        .unwrap()
}

on_each_slurm! {
async fn drain_primitives_through_the_newest_data_parser() {
    suite(newest_parser()).await;
}
}

#[tokio::test(flavor = "multi_thread")]
async fn drain_primitives_on_slurm_26_05_through_data_parser_v0_0_42() {
    support::select_slurm("26.05");
    suite(DataParser::V0042).await;
}

on_each_slurm! {
async fn probing_picks_the_newest_data_parser_slurmrestd_serves() {
    let b = bed();
    let c = Client::new(Config::new(
        b.slurmrestd_url.clone(),
        Credentials::Token {
            token: Secret::new(b.slurm_jwt.clone()),
            user: None,
        },
    ))
    .unwrap();
    assert_eq!(c.parser().await.unwrap(), newest_parser());
    assert!(c.ping().await.unwrap().iter().any(|p| p.responding));
    let unreachable = Client::new(Config::new(
        "http://127.0.0.1:9",
        Credentials::Token {
            token: Secret::new("x"),
            user: None,
        },
    ))
    .unwrap();
    assert!(matches!(
        unreachable.parser().await,
        Err(SlurmError::Unreachable { .. })
    ));
}
}

on_each_slurm! {
/// `slurmops slurm nodes|drain|resume` as an operator runs it.
async fn admin_cli_lists_drains_and_refuses_to_resume_someone_elses_drain() {
    let b = bed();
    let ns = format!("cli-{}", unique_suffix());
    // Named and featured as a NodeSet's worker is: NODESET-ORDINAL with the NodeSet feature.
    let node = Slurmd::start(&format!("{ns}-0"), &ns);
    let c = client(DataParser::V0042);
    wait_idle(&c, &node.name).await;
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
            .arg("slurm")
            .args(args)
            .env("SLURMRESTD_URL", &b.slurmrestd_url)
            .env("SLURM_JWT", &b.slurm_jwt)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, _) = run(&["nodes"]);
    assert_eq!(code, Some(0));
    let row = out
        .lines()
        .find(|l| l.starts_with(&node.name))
        .expect("node row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[1..],
        ["IDLE+DYNAMIC_NORM", "-", "-", ns.as_str()],
        "{out}"
    );

    let (code, out, _) = run(&["drain", &node.name, "--reason", "kernel upgrade"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("drained"), "{out}");
    let (_, out, _) = run(&["nodes"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with(&node.name) && l.contains("slurmops: kernel upgrade"))
    );
    // The same for a script.
    let (code, out, err) = run(&["nodes", "-o", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let n = doc["nodes"]
        .as_array()
        .and_then(|l| l.iter().find(|n| n["name"] == node.name.as_str()))
        .unwrap_or_else(|| panic!("{} not in {doc}", node.name));
    assert_eq!(
        (&n["reason"], &n["jobs"], &n["nodeSet"]),
        (&serde_json::json!("slurmops: kernel upgrade"), &serde_json::json!([]), &serde_json::json!(ns)),
        "{n}"
    );
    assert!(n["state"].as_str().is_some_and(|s| s.contains("DRAIN")), "{n}");
    let (code, _, _) = run(&["resume", &node.name]);
    assert_eq!(code, Some(0));
    wait_idle(&c, &node.name).await;

    scontrol(&[
        "update",
        &format!("nodename={}", node.name),
        "state=drain",
        "reason=maint",
    ]);
    let (code, _, err) = run(&["resume", &node.name]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("not by slurmops") && err.contains("maint"),
        "{err}"
    );
    assert!(c.node(&node.name).await.unwrap().state.has("DRAIN"));

    let (code, _, err) = run(&["drain", "no-such-node-x", "--reason", "x"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("does not know node"), "{err}");
    assert!(!err.contains(&b.slurm_jwt));
}
}

on_each_slurm! {
/// `slurmops slurm --cluster DIR`: the JWT key comes from the Secret cluster.yaml names (read
/// through the kubeconfig), tokens are minted from it; nothing secret is printed.
async fn admin_cli_connects_from_cluster_yaml_and_the_jwt_key_secret() {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret as KubeSecret;
    let env = support::TestEnv::new("slurmcli").await;
    let b = bed();
    let key = std::process::Command::new("bash")
        .args(["tests/bed/slurm.sh", "exec", slurm_instance(), "cat"])
        .arg(format!("/etc/slurm-{}/jwt_hs256.key", slurm_instance()))
        .output()
        .unwrap()
        .stdout;
    let mut secret = KubeSecret::default();
    secret.metadata.name = Some("slurm-jwt".into());
    secret.data = Some([("jwt_hs256.key".to_string(), ByteString(key.clone()))].into());
    kube::Api::<KubeSecret>::namespaced(env.client.clone(), &env.ns)
        .create(&Default::default(), &secret)
        .await
        .unwrap();
    let node = Slurmd::start(&env.name("k8s"), "bed");
    wait_idle(&client(DataParser::V0042), &node.name).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cluster.yaml"),
        format!(
            "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: c, namespace: {}}}\nspec:\n  slurmVersion: \"{}\"\n  auth:\n    slurmKey: {{name: slurm-auth, key: slurm.key}}\n    jwtKey: {{name: slurm-jwt, key: jwt_hs256.key}}\n  nodeSets:\n    - {{name: w, replicas: 0, cpu: \"1\", memory: 256Mi}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n",
            env.ns,
            support::slurm_release()
        ),
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
            .arg("slurm")
            .args(extra)
            .args(["--cluster-file", dir.path().to_str().unwrap()])
            .args(["--slurmrestd-url", &b.slurmrestd_url])
            .env("KUBECONFIG", &b.kubeconfig_admin)
            .env_remove("SLURM_JWT")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&["nodes"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.lines().any(|l| l.starts_with(&node.name)), "{out}");
    // Tokens are minted for --user: a Slurm user who is not an administrator cannot drain.
    let (code, _, err) = run(&["drain", &node.name, "--reason", "x", "--user", "alice"]);
    assert_eq!(code, Some(1), "alice drained a node: {err}");
    assert!(
        !client(DataParser::V0042)
            .node(&node.name)
            .await
            .unwrap()
            .state
            .has("DRAIN")
    );
    let (code, out, err) = run(&["drain", &node.name, "--reason", "x"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let text = String::from_utf8_lossy(&key);
    assert!(!err.contains(text.as_ref()));
    env.cleanup().await;
}
}

on_each_slurm! {
/// Pending jobs per partition and reservations, as the autoscaler and planner read them.
async fn pending_jobs_per_partition_and_reservations_come_from_real_slurm() {
    let s = unique_suffix();
    let node = Slurmd::start(&format!("pend-{s}"), "bed");
    let c = client(DataParser::V0042);
    wait_idle(&c, &node.name).await;
    // A drained node takes no new work: a job bound to it waits.
    c.drain(&node.name, "hold").await.unwrap();
    let job = submit_sleep(&node.name, 5).await;
    eventually("job pending", Duration::from_secs(10), async || {
        job_state(job)
            .await
            .iter()
            .any(|x| x == "PENDING")
            .then_some(())
    })
    .await;
    // Other tests share this Slurm and submit jobs meanwhile: the count must equal what squeue
    // reports in a moment when squeue reads the same both before and after it.
    let squeue = || {
        let out = sh(&[
            "exec",
            slurm_instance(),
            "squeue",
            "-h",
            "-t",
            "PENDING",
            "-p",
            "all",
            "-o",
            "%i",
        ]);
        out.lines().filter(|l| !l.trim().is_empty()).count()
    };
    let (seen, counted) = eventually(
        "a quiet moment in the queue",
        Duration::from_secs(20),
        async || {
            let n1 = squeue();
            let p = c.pending_jobs_per_partition().await.ok()?;
            let n2 = squeue();
            (n1 == n2).then(|| (n1, p.get("all").copied().unwrap_or(0)))
        },
    )
    .await;
    assert_eq!(
        counted, seen,
        "pending jobs in partition all: slurmops vs squeue"
    );
    assert!(seen >= 1, "the held job is pending in all");
    let resv = format!("resv-{s}");
    scontrol(&[
        "create",
        "reservation",
        &format!("reservationname={resv}"),
        &format!("nodes={}", node.name),
        "starttime=now+3600",
        "duration=60",
        "users=root",
        "flags=maint",
    ]);
    let found = c.reservations().await.unwrap();
    let r = found
        .iter()
        .find(|r| r.name == resv)
        .expect("the reservation");
    assert_eq!(r.nodes, vec![node.name.clone()]);
    assert!(r.start_time.is_some() && r.end_time > r.start_time);
    assert!(r.flags.iter().any(|f| f == "MAINT"), "{:?}", r.flags);
    scontrol(&["delete", &format!("reservationname={resv}")]);
    sh(&["exec", slurm_instance(), "scancel", &job.to_string()]);
    assert_eq!(c.resume(&node.name).await.unwrap(), Resume::Resumed);
}
}

/// Issue 33: a Slurm user writes job names, comments and drain reasons, and slurmops shows them
/// in status, Events, plans and logs. Terminal sequences in them (set the title, clear the
/// screen) reach slurmops as sent, and are escaped when read.
#[tokio::test(flavor = "multi_thread")]
async fn terminal_sequences_a_slurm_user_writes_are_escaped_when_read() {
    let s = unique_suffix();
    let node = Slurmd::start(&format!("esc-{s}"), "bed");
    let c = client(DataParser::V0042);
    wait_idle(&c, &node.name).await;
    let evil = "\u{1b}]0;owned\u{7}\u{1b}[2J";
    scontrol(&[
        "update",
        &format!("nodename={}", node.name),
        "state=drain",
        &format!("reason=disk{evil}"),
    ]);
    let job = support::slurm::submit_job(
        serde_json::json!({"partition": "all", "hold": true, "name": format!("j{evil}"),
            "comment": format!("c{evil}")}),
        1,
    )
    .await;
    let read = c.node(&node.name).await.unwrap();
    let jobs = c.jobs().await.unwrap();
    let j = jobs.iter().find(|j| j.id == job).expect("the held job");
    let shown = "\\u{1b}]0;owned\\u{7}\\u{1b}[2J";
    assert_eq!(read.reason, format!("disk{shown}"));
    assert_eq!(j.name, format!("j{shown}"));
    assert_eq!(j.comment, format!("c{shown}"));
    // Slurm kept them as sent: the escaping is ours.
    let raw = sh(&[
        "exec",
        slurm_instance(),
        "squeue",
        "-h",
        "-j",
        &job.to_string(),
        "-o",
        "%j",
    ]);
    sh(&["exec", slurm_instance(), "scancel", &job.to_string()]);
    assert!(raw.contains('\u{1b}'), "{raw:?}");
}

on_each_slurm! {
/// A pass reads the node list and the queue through the client every time: while neither
/// changed, each read hands out the list kept from the last one, not a copy (at 10,000 nodes
/// and 50,000 jobs a copy per pass is tens of MB of allocation). Other tests change nodes and
/// jobs meanwhile, so two reads in a row sharing is waited for.
async fn an_unchanged_node_list_and_queue_are_shared_not_copied() {
    let c = client(newest_parser());
    eventually("two node reads in a row share one list", Duration::from_secs(60), async || {
        let (a, b) = (c.nodes().await.ok()?, c.nodes().await.ok()?);
        std::sync::Arc::ptr_eq(&a, &b).then_some(())
    })
    .await;
    eventually("two queue reads in a row share one list", Duration::from_secs(60), async || {
        let (a, b) = (c.jobs().await.ok()?, c.jobs().await.ok()?);
        std::sync::Arc::ptr_eq(&a, &b).then_some(())
    })
    .await;
}
}

on_each_slurm! {
/// After the queue changed (a job came), the new list holds the same record for every job that
/// did not change, not a copy of each (at 50,000 jobs the copies were half of the daemon's
/// memory for the queue, and a list rebuilt on every change under churn).
async fn a_changed_queue_shares_every_job_that_did_not_change() {
    let c = client(newest_parser());
    let held = serde_json::json!({"partition": "all", "hold": true, "name": "shared-records"});
    let first = support::slurm::submit_job(held.clone(), 1).await;
    let before = eventually("the first job listed", Duration::from_secs(60), async || {
        let l = c.jobs().await.ok()?;
        l.iter().any(|j| j.id == first).then_some(l)
    })
    .await;
    let second = support::slurm::submit_job(held, 1).await;
    let after = eventually("the second job listed", Duration::from_secs(60), async || {
        let l = c.jobs().await.ok()?;
        l.iter().any(|j| j.id == second).then_some(l)
    })
    .await;
    let find = |l: &slurmops::slurm::Jobs| l.iter().find(|j| j.id == first).cloned().unwrap();
    assert!(!std::sync::Arc::ptr_eq(&before, &after));
    assert!(
        std::sync::Arc::ptr_eq(&find(&before), &find(&after)),
        "the unchanged job was copied"
    );
    for id in [first, second] {
        sh(&["exec", slurm_instance(), "scancel", &id.to_string()]);
    }
}
}

on_each_slurm! {
/// The jobs slurmops submits (active checks, canaries' validations) run as the install's job
/// user (`daemon` by default), never as the administrator whose token submits them, and still
/// get the top priority (set by the administrator: Slurm drops a priority a user asks for); a
/// GPU worker's job asks for its GPUs through `tres_per_node`, which slurmctld reads: this bed
/// configures no GPU, so it refuses the request instead of running the job without GPUs.
async fn submitted_jobs_run_as_the_job_user_at_the_top_priority_and_ask_for_their_gpus() {
    let s = unique_suffix();
    let node = Slurmd::start(&format!("sub-{s}"), "bed");
    let c = support::slurm::client();
    wait_idle(&c, &node.name).await;
    let job = slurmops::slurm::JobRequest {
        name: format!("slurmops-check:t:{}:0", node.name),
        script: "#!/bin/sh\nid -un\n".into(),
        partition: "all".into(),
        nodes: vec![node.name.clone()],
        time_limit_minutes: 1,
        exclusive: true,
        licenses: None,
        gpus: 0,
    };
    let id = c.submit(&job).await.unwrap();
    let shown = scontrol(&["show", "job", &id.to_string(), "-o"]);
    eprintln!("[submit] {shown}");
    assert!(shown.contains(" UserId=daemon("), "{shown}");
    assert!(shown.contains(" Priority=4294967293 "), "{shown}");
    let gpu = slurmops::slurm::JobRequest { gpus: 8, ..job };
    let refused = c.submit(&gpu).await.expect_err("a GPU request on a node without GPUs");
    eprintln!("[submit] with gres/gpu:8: {refused}");
    assert!(refused.to_string().to_lowercase().contains("gres"), "{refused}");
}
}
