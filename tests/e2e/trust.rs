//! What a push may do (issue 33), on the bed's git server and apiserver: a push is trusted only
//! as far as the install allows.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};

use crate::support::daemon::{Daemon, applied, gitops, status};
use crate::support::{TestEnv, cluster_head, eventually, git};
use slurmops::status::configmap::Status;

fn cluster_yaml(ns: &str, max_time: &str) -> String {
    cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - {{name: w, replicas: 0, cpu: "1", memory: 256Mi}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true, maxTime: "{max_time}"}}
"#
        )
}

/// Anyone able to push could move the branch back to an older commit (signed once, perhaps) and
/// roll the cluster back: removed users and QOS return, old images too. The daemon refuses a tip
/// that does not descend from the last applied commit and stays where it is; a tip several
/// commits ahead (beyond the shallow mirror's depth) is taken; with --allow-force-push the
/// install takes force-pushes, with a Warning Event.
#[tokio::test(flavor = "multi_thread")]
async fn a_branch_moved_back_to_an_older_commit_is_refused_unless_the_install_allows_it() {
    let (env, repo, url, dir) = gitops("force-push").await;
    let c1 = repo.push(&cluster_yaml(&env.ns, "1:00:00"), "first");
    let d = Daemon::start_guarded(
        &env,
        dir.path(),
        &url,
        "a",
        &["--interval", "1s", "--no-slurm"],
    );
    applied(&env, &c1, Duration::from_secs(60)).await;
    let c2 = repo.push(&cluster_yaml(&env.ns, "2:00:00"), "second");
    applied(&env, &c2, Duration::from_secs(20)).await;

    // The branch moved back to c1.
    let bare = repo.bare.to_str().unwrap();
    git(
        &repo.src,
        &["push", "-qf", bare, &format!("{c1}:refs/heads/main")],
    );
    let s = eventually("the rewind refused", Duration::from_secs(20), async || {
        status(&env)
            .await
            .filter(|s| s.result_commit == c1 && s.result == "refused")
    })
    .await;
    assert_eq!(s.last_applied_commit, c2);
    assert!(
        s.errors
            .contains("does not descend from the last applied commit")
            && s.errors.contains("--allow-force-push"),
        "{}",
        s.errors
    );
    // Still refused a few polls later, nothing applied.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(status(&env).await.unwrap().last_applied_commit, c2);

    // Two commits on top of c2, pushed at once: the mirror has the tip only (depth 1), its
    // history is fetched to find c2 among its ancestors.
    git(&repo.src, &["reset", "-q", "--hard", &c2]);
    std::fs::write(repo.src.join("notes.txt"), "between").unwrap();
    git(&repo.src, &["add", "."]);
    git(&repo.src, &["commit", "-qm", "between"]);
    let c3 = repo.push(&cluster_yaml(&env.ns, "3:00:00"), "third");
    applied(&env, &c3, Duration::from_secs(20)).await;
    drop(d);

    // The install allows force-pushes: the rewind is taken, and says so.
    let d = Daemon::start_guarded(
        &env,
        dir.path(),
        &url,
        "a",
        &["--interval", "1s", "--no-slurm", "--allow-force-push"],
    );
    git(
        &repo.src,
        &["push", "-qf", bare, &format!("{c1}:refs/heads/main")],
    );
    applied(&env, &c1, Duration::from_secs(60)).await;
    let events = Api::<Event>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let said = events
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("ForcePushFollowed"));
    let said = said.and_then(|e| e.message.clone()).unwrap_or_default();
    assert!(
        said.contains(&c1[..12]) && said.contains(&c3[..12]),
        "no ForcePushFollowed Event naming both commits: {said:?}\n{}",
        d.output()
    );
    drop(d);
    env.cleanup().await;
}

/// A daemon with the install's defaults (no Slurm, polling every second), and its status once
/// it refused COMMIT.
async fn refused(env: &TestEnv, dir: &Path, url: &str, commit: &str) -> (Daemon, Status) {
    let d = Daemon::start_guarded(env, dir, url, "a", &["--interval", "1s", "--no-slurm"]);
    let s = eventually("the commit refused", Duration::from_secs(60), async || {
        status(env)
            .await
            .filter(|s| s.result_commit == commit && s.result == "refused")
    })
    .await;
    (d, s)
}

/// A commit may name only the namespaces the daemon was installed for (by default its own): one
/// naming another namespace (the daemon's own, where its git token and ServiceAccount token
/// live, when clusters live elsewhere) is refused at its position, nothing applied.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_naming_a_namespace_the_install_does_not_allow_is_refused_at_its_position() {
    let (env, repo, url, dir) = gitops("pinned").await;
    let elsewhere = format!("{}-x", env.ns);
    let c1 = repo.push(&cluster_yaml(&elsewhere, "1:00:00"), "elsewhere");
    let (d, s) = refused(&env, dir.path(), &url, &c1).await;
    assert!(
        s.errors
            .contains(&format!("{url}@{}:cluster.yaml:", &c1[..12]))
            && s.errors.contains("metadata.namespace")
            && s.errors.contains(&elsewhere)
            && s.errors.contains("--cluster-namespace"),
        "{}",
        s.errors
    );
    assert!(s.last_applied_commit.is_empty(), "{s:?}");
    // The namespace it was installed for: applied.
    let c2 = repo.push(&cluster_yaml(&env.ns, "2:00:00"), "here");
    applied(&env, &c2, Duration::from_secs(30)).await;
    drop(d);
    env.cleanup().await;
}

/// A push may not take the nodes: a worker volume mounting the node's root filesystem is refused
/// by the daemon's default guardrails, at its position and naming the setting that would allow
/// it; nothing is applied.
#[tokio::test(flavor = "multi_thread")]
async fn node_root_asked_by_a_commit_is_refused_by_default() {
    let (env, repo, url, dir) = gitops("node-root").await;
    let text = cluster_yaml(&env.ns, "1:00:00").replace(
        "memory: 256Mi}",
        "memory: 256Mi, volumes: [{name: root, hostPath: {path: /}}], volumeMounts: [{name: root, mountPath: /host}]}",
    );
    let c1 = repo.push(&text, "node root");
    let (d, s) = refused(&env, dir.path(), &url, &c1).await;
    assert!(
        s.errors
            .contains("spec.nodeSets[0].volumes[0].hostPath.path")
            && s.errors.contains("--allow-host-path"),
        "{}",
        s.errors
    );
    assert!(s.last_applied_commit.is_empty(), "{s:?}");
    drop(d);
    env.cleanup().await;
}

/// Issue 54: an image runs with its pod's rights — in slurmd's privileged container for
/// workers. A pushed image outside the install's allowed repositories (by default the images
/// slurmops renders) is refused at its position: the running cluster is untouched (the workers'
/// StatefulSet keeps its image and generation), the status says why, naming the setting that
/// would allow it, and so does a RefusedCommit Event.
#[tokio::test(flavor = "multi_thread")]
async fn a_pushed_image_not_on_the_allow_list_leaves_the_running_cluster_untouched_and_says_why() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let (env, repo, url, dir) = gitops("image").await;
    let c1 = repo.push(&cluster_yaml(&env.ns, "1:00:00"), "first");
    let d = Daemon::start_guarded(
        &env,
        dir.path(),
        &url,
        "a",
        &["--interval", "1s", "--no-slurm"],
    );
    applied(&env, &c1, Duration::from_secs(60)).await;
    let sets = Api::<StatefulSet>::namespaced(env.client.clone(), &env.ns);
    let workers = async || {
        // The NodeSet's StatefulSet is named after it.
        let s = sets.get("w").await.unwrap();
        let image = s
            .spec
            .unwrap()
            .template
            .spec
            .unwrap()
            .containers
            .into_iter()
            .find(|c| c.name == "slurmd")
            .and_then(|c| c.image)
            .unwrap();
        (image, s.metadata.generation)
    };
    let before = workers().await;
    assert!(
        before.0.starts_with("ghcr.io/slinkyproject/slurmd:"),
        "{before:?}"
    );

    let text = cluster_yaml(&env.ns, "1:00:00").replace(
        "memory: 256Mi}",
        "memory: 256Mi, image: \"evil.example/slurmd:24.11\"}",
    );
    let line = text
        .lines()
        .position(|l| l.contains("evil.example"))
        .unwrap()
        + 1;
    let c2 = repo.push(&text, "workers: another image");
    let s = eventually("the image refused", Duration::from_secs(60), async || {
        status(&env)
            .await
            .filter(|s| s.result_commit == c2 && s.result == "refused")
    })
    .await;
    assert!(
        s.errors
            .contains(&format!("{url}@{}:cluster.yaml:{line}:", &c2[..12]))
            && s.errors.contains("spec.nodeSets[0].image")
            && s.errors.contains("evil.example/slurmd")
            && s.errors.contains("--allow-image evil.example/slurmd"),
        "{}",
        s.errors
    );
    // A few polls later: still refused, the cluster as it was.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(status(&env).await.unwrap().last_applied_commit, c1);
    assert_eq!(workers().await, before);
    let events = Api::<Event>::namespaced(env.client.clone(), &env.ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let said: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some(slurmops::vocab::EVENT_REFUSED_COMMIT))
        .filter_map(|e| e.message.clone())
        .collect();
    assert!(
        said.iter()
            .any(|m| m.contains(&c2[..12]) && m.contains("evil.example/slurmd")),
        "no RefusedCommit Event naming the commit and the image: {said:#?}"
    );
    drop(d);
    env.cleanup().await;
}
