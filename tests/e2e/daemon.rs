//! The daemon end to end on the test bed: it follows a repository served by the bed's git servers
//! and keeps the real apiserver at its cluster.yaml; webhooks, invalid commits, SSH with pinned
//! host keys, and two replicas with leader election.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hmac::{Hmac, Mac};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use sha2::Sha256;
use slurmops::source::remote::{Auth, Remote, RemoteError};

use crate::support::daemon::{
    Daemon, Repo, Tarpit, applied, as_installed, free_port, gitops, status,
};
use crate::support::{TestEnv, bed, eventually, git};

fn cluster_yaml(ns: &str, max_time: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - {{name: w, replicas: 0, cpu: "1", memory: 256Mi}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true, maxTime: "{max_time}"}}
"#
        )
}

fn sign(secret: &[u8], body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
    mac.update(body.as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// The rendered slurm.conf in the cluster (from the ConfigMap that carries it).
async fn live_slurm_conf(env: &TestEnv) -> Option<String> {
    Api::<ConfigMap>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find_map(|cm| cm.data?.get("slurm.conf").cloned())
}

#[tokio::test(flavor = "multi_thread")]
async fn pushes_and_signed_webhooks_sync_the_cluster_and_invalid_commits_are_not_applied() {
    let (env, repo, url, dir) = gitops("daemon").await;
    let secret_file = dir.path().join("webhook-secret");
    std::fs::write(&secret_file, "s3cret\n").unwrap();
    let secret = secret_file.to_str().unwrap();

    // Polling: the first commit, then a push, each within one poll interval (5 s).
    let c1 = repo.push(&cluster_yaml(&env.ns, "1:00:00"), "first");
    let a = Daemon::start(&env, dir.path(), &url, "a", &["--interval", "5s"]);
    applied(&env, &c1, Duration::from_secs(60)).await;
    assert!(
        live_slurm_conf(&env)
            .await
            .unwrap()
            .contains("MaxTime=1:00:00")
    );
    let c2 = repo.push(&cluster_yaml(&env.ns, "2:00:00"), "longer jobs");
    let took = applied(&env, &c2, Duration::from_secs(30)).await;
    assert!(
        took < Duration::from_secs(5 + 4),
        "push applied after {took:?}"
    );
    assert!(
        live_slurm_conf(&env)
            .await
            .unwrap()
            .contains("MaxTime=2:00:00")
    );
    assert_eq!(a.terminate(), Some(0), "SIGTERM stops the daemon cleanly");

    // Webhooks: a daemon that would not poll for 10 minutes.
    let b = Daemon::start(
        &env,
        dir.path(),
        &url,
        "b",
        &["--interval", "10m", "--webhook-secret-file", secret],
    );
    // Ready once its first pass is done (it leads, fetched and reconciled the current commit).
    eventually("daemon b ready", Duration::from_secs(60), async || {
        b.ready().then_some(())
    })
    .await;
    let c3 = repo.push(&cluster_yaml(&env.ns, "3:00:00"), "even longer");
    // What GitHub sends names the branch and the new tip: each push its own body.
    let push_of = |c: &str| format!(r#"{{"ref":"refs/heads/main","after":"{c}"}}"#);
    let push = &push_of(&c3);
    assert_eq!(b.webhook(push, Some(&sign(b"wrong", push))), 401);
    assert_eq!(b.webhook(push, None), 401);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = status(&env).await.unwrap();
    assert_eq!(
        s.last_applied_commit, c2,
        "a rejected webhook changed something"
    );
    assert!(
        live_slurm_conf(&env)
            .await
            .unwrap()
            .contains("MaxTime=2:00:00")
    );
    assert_eq!(b.webhook(push, Some(&sign(b"s3cret", push))), 202);
    let took = applied(&env, &c3, Duration::from_secs(20)).await;
    assert!(took < Duration::from_secs(5), "webhook sync took {took:?}");

    // An invalid commit: not applied; status names the commit and the error with its position.
    let bad = cluster_yaml(&env.ns, "4:00:00").replace("replicas: 0", "replicaz: 0");
    let c4 = repo.push(&bad, "typo");
    let push = &push_of(&c4);
    assert_eq!(b.webhook(push, Some(&sign(b"s3cret", push))), 202);
    let s = eventually(
        "invalid commit reported",
        Duration::from_secs(20),
        async || status(&env).await.filter(|s| s.result_commit == c4),
    )
    .await;
    assert_eq!(s.result, "invalid");
    assert_eq!(s.last_applied_commit, c3);
    assert!(
        s.errors
            .contains(&format!("{url}@{}:cluster.yaml:", &c4[..12]))
            && s.errors.contains("replicaz"),
        "{}",
        s.errors
    );
    assert!(
        live_slurm_conf(&env)
            .await
            .unwrap()
            .contains("MaxTime=3:00:00")
    );
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["status", "--namespace", &env.ns])
        .env("KUBECONFIG", &bed().kubeconfig_restricted)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains(&format!("result:       invalid (commit {})", &c4[..12])),
        "{printed}"
    );
    assert!(printed.contains("replicaz"), "{printed}");
    // The same for a script: one JSON document, the error lines a list.
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["status", "--namespace", &env.ns, "-o", "json"])
        .env("KUBECONFIG", &bed().kubeconfig_restricted)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "status -o json: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let st = &doc["statuses"][0];
    assert_eq!(
        (
            &doc["version"],
            &st["result"],
            &st["resultCommit"],
            &st["lastAppliedCommit"],
            &st["cluster"]
        ),
        (
            &serde_json::json!(1),
            &serde_json::json!("invalid"),
            &serde_json::json!(c4),
            &serde_json::json!(c3),
            &serde_json::Value::Null
        ),
        "{doc}"
    );
    let errors = st["errors"].as_array().expect("errors as a list");
    assert!(
        errors
            .iter()
            .any(|e| e.as_str().is_some_and(|e| e.contains("replicaz"))),
        "{doc}"
    );

    // History rewritten (the invalid commit dropped, a new one force-pushed): followed.
    git(&repo.src, &["reset", "-q", "--hard", &c3]);
    let c5 = repo.push(&cluster_yaml(&env.ns, "5:00:00"), "rewritten");
    let push = &push_of(&c5);
    assert_eq!(b.webhook(push, Some(&sign(b"s3cret", push))), 202);
    applied(&env, &c5, Duration::from_secs(20)).await;
    assert!(
        live_slurm_conf(&env)
            .await
            .unwrap()
            .contains("MaxTime=5:00:00")
    );
    b.kill();
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_only_the_leader_applies_and_killing_it_hands_over() {
    let (env, repo, url, dir) = gitops("leader").await;
    let c1 = repo.push(&cluster_yaml(&env.ns, "1:00:00"), "first");
    let x = Daemon::start(&env, dir.path(), &url, "x", &["--interval", "1s"]);
    let y = Daemon::start(&env, dir.path(), &url, "y", &["--interval", "1s"]);
    applied(&env, &c1, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let applies = |d: &Daemon| d.output().matches(": applied: ").count();
    let (leader, follower) = if applies(&x) > 0 { (x, y) } else { (y, x) };
    assert!(applies(&leader) > 0);
    assert_eq!(
        applies(&follower),
        0,
        "the follower applied:\n{}",
        follower.output()
    );
    assert!(follower.output().contains("not the leader; waiting"));

    leader.kill();
    let c2 = repo.push(&cluster_yaml(&env.ns, "2:00:00"), "after failover");
    applied(&env, &c2, Duration::from_secs(40)).await;
    let out = follower.output();
    assert!(out.contains("became the leader"), "{out}");
    assert!(
        out.contains(&format!("commit {}: applied", &c2[..12])),
        "{out}"
    );
    follower.kill();
    env.cleanup().await;
}

#[test]
fn ssh_fetch_works_with_the_pinned_host_key_and_a_changed_key_is_refused() {
    let g = &bed().git;
    let name = format!("ssh-{}", support::unique_suffix());
    let repo = Repo::new(&name);
    let c1 = repo.push("hello: ssh\n", "first");
    let dir = tempfile::tempdir().unwrap();
    let remote = |known_hosts: PathBuf, mirror: &str| Remote {
        url: format!("{}/{name}.git", g.ssh_url),
        branch: "main".into(),
        path: String::new(),
        auth: Auth::Ssh {
            private_key: g.ssh_key.clone(),
            known_hosts,
        },
        mirror: dir.path().join(mirror),
        timeout: slurmops::source::remote::READ_TIMEOUT,
    };
    let fetched = remote(g.known_hosts.clone(), "m1").fetch().unwrap();
    assert_eq!(fetched.commit, c1);
    assert_eq!(fetched.text, "hello: ssh\n");

    // The same host with another key pinned (as after a server key change): refused.
    let pinned = std::fs::read_to_string(&g.known_hosts).unwrap();
    let other_key = std::fs::read_to_string(g.ssh_key.with_extension("pub")).unwrap_or_else(|_| {
        std::fs::read_to_string(format!("{}.pub", g.ssh_key.display())).unwrap()
    });
    let host = pinned.split_whitespace().next().unwrap();
    let key = other_key
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let changed = dir.path().join("known_hosts.changed");
    std::fs::write(&changed, format!("{host} {key}\n")).unwrap();
    let err = remote(changed.clone(), "m2").fetch().unwrap_err();
    assert!(matches!(err, RemoteError::HostKey { .. }), "{err}");
    assert!(err.to_string().contains("is not pinned in"), "{err}");
    assert!(!dir.path().join("m2/refs/remotes/origin/main").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn install_print_objects_are_accepted_and_the_daemon_works_with_the_rbac_they_declare() {
    let env = TestEnv::new("install").await;
    let name = env.name("inst");
    let repo = Repo::new(&name);
    let url = format!("{}/{name}.git", bed().git.http_url);
    let c1 = repo.push(&cluster_yaml(&env.ns, "1:00:00"), "first");
    let dir = tempfile::tempdir().unwrap();
    let (docs, kubeconfig) = as_installed(&env, &url, dir.path()).await;
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
            "NetworkPolicy"
        ]
    );
    // Least privilege: the one JWT key Secret by name, the one Lease by name; no Secret listed.
    {
        use k8s_openapi::api::coordination::v1::Lease;
        use k8s_openapi::api::core::v1::Secret;
        let admin: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
        for name in ["slurm-jwt", "other"] {
            let s: Secret = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name}, "stringData": {"k": "v"}
            }))
            .unwrap();
            admin.create(&Default::default(), &s).await.unwrap();
        }
        let sa = support::client(&kubeconfig).await;
        let secrets: Api<Secret> = Api::namespaced(sa.clone(), &env.ns);
        secrets.get("slurm-jwt").await.unwrap();
        let forbidden =
            |r: Result<_, kube::Error>| matches!(r, Err(kube::Error::Api(e)) if e.code == 403);
        assert!(forbidden(secrets.get("other").await.map(|_| ())));
        assert!(forbidden(
            secrets.list(&ListParams::default()).await.map(|_| ())
        ));
        let leases: Api<Lease> = Api::namespaced(sa, &env.ns);
        assert!(forbidden(
            leases.get("someone-elses-lease").await.map(|_| ())
        ));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["run", "--once", "--repo", &url, "--namespace", &env.ns])
        .args([
            "--identity",
            "sa",
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .arg("--mirror")
        .arg(dir.path().join("mirror"))
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let s = status(&env).await.unwrap();
    assert_eq!(
        (s.result.as_str(), s.last_applied_commit.as_str()),
        ("applied", c1.as_str()),
        "{s:?}"
    );
    assert!(
        live_slurm_conf(&env)
            .await
            .unwrap()
            .contains("MaxTime=1:00:00")
    );
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_signature_verification_only_commits_signed_by_an_allowed_key_are_applied() {
    let (env, repo, url, dir) = gitops("signed").await;
    // The bed's client key is the allowed signer; another key is not.
    let allowed_key = &bed().git.ssh_key;
    let public = std::fs::read_to_string(format!("{}.pub", allowed_key.display())).unwrap();
    let allowed = dir.path().join("allowed_signers");
    std::fs::write(&allowed, format!("ops@slurmops.dev {public}")).unwrap();
    let other = dir.path().join("other_ed25519");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .status()
        .unwrap();
    assert!(made.success());
    // One pass of the daemon with signature verification; GPG keys allowed too once they exist.
    let gpg_keys = dir.path().join("allowed.asc");
    let once = |identity: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_slurmops"));
        cmd.args(["run", "--once", "--repo", &url, "--namespace", &env.ns])
            .args([
                "--identity",
                identity,
                "--listen",
                &format!("127.0.0.1:{}", free_port()),
            ])
            .arg("--allowed-signers")
            .arg(&allowed)
            .arg("--mirror")
            .arg(dir.path().join("mirror"))
            .env("KUBECONFIG", &bed().kubeconfig_restricted);
        if gpg_keys.exists() {
            cmd.arg("--allowed-gpg-keys").arg(&gpg_keys);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    let c1 = repo.push(&cluster_yaml(&env.ns, "1:00:00"), "unsigned");
    let printed = once("s1");
    assert!(
        printed.contains(&format!(
            "commit {}: refused: commit {} is not signed",
            &c1[..12],
            &c1[..12]
        )),
        "{printed}"
    );
    let s = status(&env).await.unwrap();
    assert_eq!(
        (s.result.as_str(), s.result_commit.as_str()),
        ("refused", c1.as_str())
    );
    assert!(s.last_applied_commit.is_empty());
    assert!(
        live_slurm_conf(&env).await.is_none(),
        "an unsigned commit was applied"
    );

    let ssh = |key: &Path| {
        vec![
            "gpg.format=ssh".to_string(),
            format!("user.signingkey={}", key.display()),
        ]
    };
    let c2 = repo.push_signed(
        &cluster_yaml(&env.ns, "2:00:00"),
        "signed",
        Some(&ssh(allowed_key)),
    );
    once("s2");
    let s = status(&env).await.unwrap();
    assert_eq!(
        (s.result.as_str(), s.last_applied_commit.as_str()),
        ("applied", c2.as_str()),
        "{s:?}"
    );
    assert!(
        live_slurm_conf(&env)
            .await
            .unwrap()
            .contains("MaxTime=2:00:00")
    );

    let c3 = repo.push_signed(
        &cluster_yaml(&env.ns, "3:00:00"),
        "wrong key",
        Some(&ssh(&other)),
    );
    once("s3");
    let s = status(&env).await.unwrap();
    assert_eq!(
        (s.result.as_str(), s.result_commit.as_str()),
        ("refused", c3.as_str())
    );
    assert!(
        s.errors.contains("which is not an allowed signer"),
        "{}",
        s.errors
    );
    assert_eq!(s.last_applied_commit, c2);
    assert!(
        live_slurm_conf(&env)
            .await
            .unwrap()
            .contains("MaxTime=2:00:00")
    );

    // OpenPGP: a commit signed by the allowed GPG key is applied, one by another GPG key refused.
    let home = dir.path().join("gnupg");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let gpg = dir.path().join("gpg.sh");
    std::fs::write(
        &gpg,
        format!(
            "#!/bin/sh\nexec gpg --homedir {} --batch --pinentry-mode loopback --passphrase '' \"$@\"\n",
            home.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&gpg, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for who in ["ops <ops@slurmops.dev>", "eve <eve@example.org>"] {
        let ok = Command::new(&gpg)
            .args(["--quick-gen-key", who, "ed25519", "sign", "never"])
            .output()
            .unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    }
    let exported = Command::new(&gpg)
        .args(["--armor", "--export", "ops@slurmops.dev"])
        .output()
        .unwrap();
    std::fs::write(&gpg_keys, &exported.stdout).unwrap();
    let pgp = |who: &str| {
        vec![
            format!("gpg.program={}", gpg.display()),
            format!("user.signingkey={who}"),
        ]
    };
    let c4 = repo.push_signed(
        &cluster_yaml(&env.ns, "4:00:00"),
        "gpg signed",
        Some(&pgp("ops@slurmops.dev")),
    );
    once("s4");
    let s = status(&env).await.unwrap();
    assert_eq!(
        (s.result.as_str(), s.last_applied_commit.as_str()),
        ("applied", c4.as_str()),
        "{s:?}"
    );
    let c5 = repo.push_signed(
        &cluster_yaml(&env.ns, "5:00:00"),
        "gpg, other key",
        Some(&pgp("eve@example.org")),
    );
    once("s5");
    let s = status(&env).await.unwrap();
    assert_eq!(
        (s.result.as_str(), s.result_commit.as_str()),
        ("refused", c5.as_str())
    );
    assert!(
        s.errors.contains("not valid for any allowed key"),
        "{}",
        s.errors
    );
    assert!(
        live_slurm_conf(&env)
            .await
            .unwrap()
            .contains("MaxTime=4:00:00")
    );
    env.cleanup().await;
}

/// Issue 16: a git server that accepts and never answers. The fetch gives up within the read
/// timeout and says so; meanwhile the loop keeps passing (fetches run beside it), `/healthz`
/// stays green, the cluster keeps the last applied commit, and once the server answers again the
/// newer commit is applied. The token in the repository URL shows nowhere.
#[tokio::test(flavor = "multi_thread")]
async fn a_git_server_that_never_answers_fails_the_fetch_in_time_and_the_loop_goes_on() {
    let (env, repo, url, dir) = gitops("tarpit").await;
    let upstream = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_string();
    let tarpit = Tarpit::start(&upstream);
    let secret = "tok-s3cret-9f2";
    let proxied = url.replace(
        &format!("http://{upstream}"),
        &format!("http://ci:{secret}@{}", tarpit.addr),
    );
    let c1 = repo.push(&cluster_yaml(&env.ns, "1:00:00"), "first");
    let d = Daemon::start(
        &env,
        dir.path(),
        &proxied,
        "a",
        &[
            "--interval",
            "1s",
            "--git-timeout",
            "3s",
            "--no-slurm",
            "--allow-http",
        ],
    );
    applied(&env, &c1, Duration::from_secs(60)).await;

    tarpit.set(true);
    let c2 = repo.push(&cluster_yaml(&env.ns, "2:00:00"), "second");
    let silenced = std::time::Instant::now();
    let s = eventually(
        "fetch-failed reported",
        Duration::from_secs(60),
        async || status(&env).await.filter(|s| s.result == "fetch-failed"),
    )
    .await;
    let reported = silenced.elapsed();
    eprintln!("tarpit: fetch-failed reported {reported:?} after the server went silent");
    // One interval until the next fetch starts, the 3 s read timeout, the status write.
    assert!(reported < Duration::from_secs(12), "took {reported:?}");
    assert!(s.errors.contains("timed out"), "{}", s.errors);
    assert_eq!(s.last_applied_commit, c1);

    // The loop is not held by the fetches the tarpit keeps.
    let before = d.metric("slurmops_passes_total").unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = d.metric("slurmops_passes_total").unwrap();
    assert!(after >= before + 2.0, "passes {before} → {after}");
    assert_eq!(d.get("/healthz").0, 200);

    tarpit.set(false);
    let recovered = applied(&env, &c2, Duration::from_secs(60)).await;
    eprintln!("tarpit: commit applied {recovered:?} after the server answered again");

    let s = status(&env).await.unwrap();
    let shown = format!("{s:?}\n{}", d.output());
    assert!(!shown.contains(secret), "the token leaked: {shown}");
    assert!(
        s.repository.starts_with("http://127.0.0.1:"),
        "{}",
        s.repository
    );
    drop(d);
    env.cleanup().await;
}

/// Slurm out of reach pass after pass: the daemon says so once, when it starts — not every pass
/// (issue 56: a condition that persists is logged when it starts, changes and ends) — while its
/// passes go on and `/healthz` stays green.
#[tokio::test(flavor = "multi_thread")]
async fn slurm_out_of_reach_is_logged_once_while_the_passes_go_on() {
    let (env, repo, url, dir) = gitops("quiet").await;
    repo.push(&cluster_yaml(&env.ns, "1:00:00"), "first");
    // A loopback port nothing listens on: every read of Slurm is refused at once.
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let d = Daemon::start(
        &env,
        dir.path(),
        &url,
        "a",
        &[
            "--interval",
            "1s",
            "--slurmrestd-url",
            &nobody,
            "--slurm-jwt",
            "not.a.token",
        ],
    );
    eventually("ten passes", Duration::from_secs(90), async || {
        (d.metric("slurmops_passes_total")? >= 10.0).then_some(())
    })
    .await;
    assert_eq!(d.get("/healthz").0, 200);
    let log = d.output();
    let told: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Slurm's state is unknown"))
        .collect();
    assert_eq!(told.len(), 1, "said once over ten passes:\n{log}");
    assert!(told[0].contains("WARN"), "{}", told[0]);
    drop(d);
    env.cleanup().await;
}

/// A daemon taking signed webhooks (secret "s3cret"), without Slurm, polling every 10 minutes,
/// with its first commit applied; at most NOFILE open descriptors when given.
async fn webhook_daemon(
    name: &str,
    nofile: Option<u32>,
) -> (TestEnv, Repo, tempfile::TempDir, Daemon) {
    let (env, repo, url, dir) = gitops(name).await;
    let secret_file = dir.path().join("webhook-secret");
    std::fs::write(&secret_file, "s3cret\n").unwrap();
    let c1 = repo.push(&cluster_yaml(&env.ns, "1:00:00"), "first");
    let args = [
        "--interval",
        "10m",
        "--no-slurm",
        "--webhook-secret-file",
        secret_file.to_str().unwrap(),
    ];
    let d = match nofile {
        Some(n) => Daemon::start_limited(&env, dir.path(), &url, &args, n),
        None => Daemon::start(&env, dir.path(), &url, "a", &args),
    };
    applied(&env, &c1, Duration::from_secs(60)).await;
    (env, repo, dir, d)
}

/// N probes of `/healthz` as the kubelet sends them, one every EVERY: each answers 200 within
/// 2 s. The slowest.
async fn probe_health(d: &Daemon, n: usize, every: Duration) -> Duration {
    let mut slowest = Duration::ZERO;
    for _ in 0..n {
        let t = std::time::Instant::now();
        let (code, body) = d.get("/healthz");
        slowest = slowest.max(t.elapsed());
        assert_eq!(code, 200, "/healthz: {code} {body}");
        tokio::time::sleep(every).await;
    }
    assert!(
        slowest < Duration::from_secs(2),
        "slowest probe {slowest:?}"
    );
    slowest
}

/// Issue 16: 3,000 connections that send half a request and trickle header lines (reconnecting
/// when closed) against a daemon limited to 2,048 descriptors: `/healthz` keeps answering, a
/// signed webhook syncs, the pushed commit is fetched and applied, and the daemon's memory stays
/// under 100 MB.
#[tokio::test(flavor = "multi_thread")]
async fn slow_connections_do_not_lock_out_health_webhooks_or_git() {
    let (env, repo, _dir, d) = webhook_daemon("slowloris", Some(2048)).await;

    let attack = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/slowloris.py"
        ))
        .args([&d.port.to_string(), "3000", "40"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;

    let slowest = probe_health(&d, 15, Duration::from_secs(1)).await;

    // A push, announced by a signed webhook: fetched (git has descriptors) and applied.
    let c2 = repo.push(&cluster_yaml(&env.ns, "2:00:00"), "second");
    let push = r#"{"ref":"refs/heads/main"}"#;
    assert_eq!(d.webhook(push, Some(&sign(b"s3cret", push))), 202);
    applied(&env, &c2, Duration::from_secs(20)).await;

    let peak_mib = slurmops::bench::peak_rss_mib_of(d.child.id());
    let out = attack.wait_with_output().unwrap();
    let opened = String::from_utf8_lossy(&out.stdout).trim().to_string();
    eprintln!(
        "slowloris: {opened} slow connections opened in 40 s; slowest /healthz {slowest:?}; daemon peak RSS {peak_mib:.0} MiB"
    );
    assert!(peak_mib < 100.0, "daemon peak RSS {peak_mib:.0} MiB");
    let s = status(&env).await.unwrap();
    assert_ne!(s.result, "fetch-failed", "{}", s.errors);
    drop(d);
    env.cleanup().await;
}

/// Issue 33: anyone who reaches the port may send webhooks. 500 connections each send 1 MiB of
/// body (all but its last byte, then hold), half with a made-up signature, half with none:
/// `/healthz` keeps answering and the daemon's memory stays under 100 MB (it read every body
/// before checking its signature: hundreds of MiB). A signed delivery is taken once; the same
/// bytes again (a replay) trigger nothing.
#[tokio::test(flavor = "multi_thread")]
async fn webhook_bodies_wait_for_a_signature_and_a_replayed_delivery_does_nothing() {
    use std::io::Write as _;
    let (env, repo, _dir, d) = webhook_daemon("webhook-flood", None).await;

    let port = d.port;
    let body = std::sync::Arc::new(vec![b'x'; (1 << 20) - 1]);
    let senders: Vec<_> = (0..500)
        .map(|i| {
            let body = body.clone();
            std::thread::spawn(move || {
                let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
                    return;
                };
                let sig = match i % 2 {
                    0 => format!("X-Hub-Signature-256: sha256={}\r\n", "0".repeat(64)),
                    _ => String::new(),
                };
                let head = format!(
                    "POST /webhook HTTP/1.1\r\nHost: x\r\n{sig}Content-Length: {}\r\n\r\n",
                    1 << 20
                );
                // Refused connections are closed under the sender: its writes fail.
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(&body);
                std::thread::sleep(Duration::from_secs(8));
            })
        })
        .collect();
    let slowest = probe_health(&d, 10, Duration::from_millis(500)).await;
    for s in senders {
        s.join().unwrap();
    }
    let peak_mib = slurmops::bench::peak_rss_mib_of(d.child.id());
    eprintln!("webhook flood: slowest /healthz {slowest:?}; daemon peak RSS {peak_mib:.0} MiB");
    assert!(peak_mib < 100.0, "daemon peak RSS {peak_mib:.0} MiB");

    // A signed push is taken once; its replay is answered and does nothing.
    let c2 = repo.push(&cluster_yaml(&env.ns, "2:00:00"), "second");
    let push = format!(r#"{{"ref":"refs/heads/main","after":"{c2}"}}"#);
    let signed = sign(b"s3cret", &push);
    assert_eq!(d.webhook(&push, Some(&signed)), 202);
    applied(&env, &c2, Duration::from_secs(20)).await;
    assert_eq!(d.webhook(&push, Some(&signed)), 200, "a replay");
    let (_, metrics) = d.get("/metrics");
    for (outcome, at_least) in [("accepted", 1.0), ("replayed", 1.0), ("rejected", 250.0)] {
        let n: f64 = metrics
            .lines()
            .find(|l| l.starts_with(&format!("slurmops_webhooks_total{{outcome=\"{outcome}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0);
        assert!(n >= at_least, "{outcome}: {n} in\n{metrics}");
    }
    drop(d);
    env.cleanup().await;
}

/// Issue 16: the status ConfigMap is data from the cluster, not trusted: garbage in it (commit
/// ids of multi-byte text, JSON that does not parse, a huge value) neither panics `slurmops
/// status` nor a daemon that reads it at start; the daemon's next write replaces it.
#[tokio::test(flavor = "multi_thread")]
async fn garbage_in_the_status_config_map_panics_nothing_and_is_replaced() {
    let (env, repo, url, dir) = gitops("garbage").await;
    let c1 = repo.push(&cluster_yaml(&env.ns, "1:00:00"), "first");
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let garbage: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "slurmops-status"},
        "data": {
            "repository": url,
            "branch": "main",
            "lastAppliedCommit": "é".repeat(7),
            "lastSeenCommit": "\u{1F4A5}",
            "result": "applied\u{0007}",
            "resultCommit": "ü",
            "nodeSets": "[{\"name\": 12, \"workers\": [[[",
            "lastFetch": "yesterday",
            "lastAttempt": "-99999999999999999999",
            "errors": "x".repeat(600_000),
            "slurm": "{",
        }
    }))
    .unwrap();
    cms.create(&Default::default(), &garbage).await.unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["status", "--namespace", &env.ns])
        .env("KUBECONFIG", &bed().kubeconfig_restricted)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "status: {err}");
    assert!(!err.contains("panicked"), "{err}");

    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args([
            "run",
            "--once",
            "--repo",
            &url,
            "--namespace",
            &env.ns,
            "--no-slurm",
        ])
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--mirror")
        .arg(dir.path().join("mirror"))
        .env("KUBECONFIG", &bed().kubeconfig_restricted)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("panicked"),
        "run: {err}"
    );
    let s = status(&env).await.unwrap();
    assert_eq!(
        (s.result.as_str(), s.last_applied_commit.as_str()),
        ("applied", c1.as_str())
    );
    env.cleanup().await;
}

/// Two clusters in one namespace, each with its daemon (`--cluster`): each applies its own
/// repository under its own Lease and status, neither touches the other's objects when it
/// prunes, `slurmops status` shows both, and a daemon never applies a cluster.yaml of another
/// cluster.
#[tokio::test(flavor = "multi_thread")]
async fn two_clusters_in_one_namespace_each_with_its_daemon() {
    let env = TestEnv::new("two").await;
    env.grant_slurmops_role_for(&[Some("a"), Some("b"), Some("z")])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = |name: &str, node_set: &str| {
        support::cluster_head(name, &env.ns)
            + &format!(
                "  nodeSets:\n    - {{name: {node_set}, replicas: 0, cpu: \"1\", memory: 256Mi}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n"
            )
    };
    let (ra, rb) = (Repo::new(&env.name("ra")), Repo::new(&env.name("rb")));
    let url = |r: &str| format!("{}/{}.git", bed().git.http_url, env.name(r));
    let ca = ra.push(&yaml("a", "wa"), "a");
    let cb = rb.push(&yaml("b", "wb"), "b");
    let opts = |c: &'static str| ["--interval", "1s", "--no-slurm", "--cluster", c];
    let da = Daemon::start(&env, dir.path(), &url("ra"), "a", &opts("a"));
    let db = Daemon::start(&env, dir.path(), &url("rb"), "b", &opts("b"));
    let status_of = |c: &'static str| {
        let client = env.client.clone();
        let ns = env.ns.clone();
        async move {
            slurmops::status::configmap::read(&client, &ns, Some(c))
                .await
                .ok()
                .flatten()
        }
    };
    for (c, commit) in [("a", &ca), ("b", &cb)] {
        eventually(
            &format!("cluster {c} applied"),
            Duration::from_secs(60),
            async || (status_of(c).await?.last_applied_commit == *commit).then_some(()),
        )
        .await;
    }
    let sts: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(env.client.clone(), &env.ns);
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(env.client.clone(), &env.ns);
    for (lease, holder) in [("slurmops-leader-a", "a"), ("slurmops-leader-b", "b")] {
        let l = leases
            .get(lease)
            .await
            .unwrap_or_else(|e| panic!("{lease}: {e}"));
        assert_eq!(
            l.spec.and_then(|s| s.holder_identity).as_deref(),
            Some(holder)
        );
    }
    assert!(
        sts.get_opt("wa").await.unwrap().is_some() && sts.get_opt("wb").await.unwrap().is_some()
    );

    // a's NodeSet is renamed: a prunes its own StatefulSet, b's stays.
    let ca2 = ra.push(&yaml("a", "wa2"), "rename");
    eventually("a's rename applied", Duration::from_secs(60), async || {
        (status_of("a").await?.last_applied_commit == ca2).then_some(())
    })
    .await;
    eventually("wa pruned", Duration::from_secs(30), async || {
        sts.get_opt("wa").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        sts.get_opt("wb").await.unwrap().is_some(),
        "b's objects untouched by a's prune"
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    assert!(cms.get_opt("b-config").await.unwrap().is_some());

    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["status", "--namespace", &env.ns])
        .env("KUBECONFIG", &bed().kubeconfig_admin)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("== cluster a") && text.contains("== cluster b"),
        "{text}"
    );
    assert!(
        text.contains(&ca2[..12]) && text.contains(&cb[..12]),
        "{text}"
    );

    // A daemon for cluster z pointed at b's repository applies nothing.
    let z = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args([
            "run",
            "--repo",
            &url("rb"),
            "--namespace",
            &env.ns,
            "--identity",
            "z",
        ])
        .args([
            "--no-slurm",
            "--cluster",
            "z",
            "--once",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--mirror")
        .arg(dir.path().join("mirror-z"))
        .env("KUBECONFIG", &bed().kubeconfig_restricted)
        .output()
        .unwrap();
    let zs = status_of("z").await.expect("z's status");
    assert_eq!(zs.result, "refused", "{zs:?} {z:?}");
    assert!(
        zs.errors.contains("this daemon manages cluster z"),
        "{}",
        zs.errors
    );
    da.kill();
    db.kill();
    env.cleanup().await;
}

/// The daemon's Events on the real apiserver: a reason repeated on the same object counts on
/// the Event posted before (count, latest message), as `kubectl get events` reads "x3"; another
/// reason or object is an Event of its own; a counted Event deleted meanwhile starts anew.
#[tokio::test]
async fn repeated_events_count_on_one_event_with_the_latest_message() {
    use k8s_openapi::api::core::v1::Event;
    let env = TestEnv::new("events").await;
    let events = slurmops::status::Recorder::default();
    let note = |set: &str, reason: &'static str, message: &str| slurmops::status::Note {
        involved: slurmops::status::node_set_ref(&env.ns, set, false),
        reason,
        message: message.into(),
        warning: false,
    };
    let draining = slurmops::vocab::EVENT_DRAINING;
    let replaced = slurmops::vocab::EVENT_WORKER_REPLACED;
    for (set, reason, message) in [
        ("a", draining, "draining a-0, a-1"),
        ("a", draining, "draining a-2, a-3"),
        ("a", replaced, "replacing a-0, a-1"),
        ("b", draining, "draining b-0"),
        ("a", draining, "draining a-4, a-5"),
    ] {
        events
            .record(&env.client, note(set, reason, message))
            .await
            .unwrap();
    }
    let api = Api::<Event>::namespaced(env.client.clone(), &env.ns);
    let list = |api: Api<Event>| async move {
        let mut got: Vec<(String, String, i32, String)> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|e| {
                let object = e.involved_object.name.unwrap_or_default();
                let reason = e.reason.unwrap_or_default();
                (
                    object,
                    reason,
                    e.count.unwrap_or(0),
                    e.message.unwrap_or_default(),
                )
            })
            .collect();
        got.sort();
        got
    };
    let got = list(api.clone()).await;
    let want = |v: &[(&str, &str, i32, &str)]| -> Vec<(String, String, i32, String)> {
        v.iter()
            .map(|(o, r, c, m)| (o.to_string(), r.to_string(), *c, m.to_string()))
            .collect()
    };
    assert_eq!(
        got,
        want(&[
            ("a", draining, 3, "draining a-4, a-5"),
            ("a", replaced, 1, "replacing a-0, a-1"),
            ("b", draining, 1, "draining b-0"),
        ])
    );

    // The counted Event is gone (the apiserver's TTL, or someone deleted it): a new one.
    api.delete_collection(&Default::default(), &ListParams::default())
        .await
        .unwrap();
    events
        .record(&env.client, note("a", draining, "draining a-6"))
        .await
        .unwrap();
    assert_eq!(list(api).await, want(&[("a", draining, 1, "draining a-6")]));
}
