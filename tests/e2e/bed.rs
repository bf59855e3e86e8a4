//! The test bed itself, end to end: real kube-apiserver + kube-controller-manager, the test kubelet
//! running a real slurmd per worker pod against the real slurmctld, real slurmrestd with JWT, and
//! real git servers on every transport.

use crate::support;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use slurmops::cluster::load;
use slurmops::render::render;

use crate::support::{
    Event, TestEnv, bed, eventually, git, git_command, served_repo, slurm_instance,
};

/// A worker StatefulSet exactly as slurmops renders it for a one-NodeSet cluster in the test's
/// namespace.
fn worker_statefulset(env: &TestEnv, node_set: &str, replicas: u32) -> StatefulSet {
    let yaml = support::cluster_head("bed", &env.ns)
        + &format!(
            r#"  nodeSets:
    - name: {node_set}
      replicas: {replicas}
      cpu: "1"
      memory: 256Mi
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
        );
    let cluster = load("cluster.yaml", &yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let rendered = render(&cluster);
    let obj = rendered
        .get("StatefulSet", node_set)
        .expect("the NodeSet's StatefulSet");
    serde_json::from_value(obj.body.clone()).expect("a StatefulSet")
}

async fn apply(env: &TestEnv, sts: &StatefulSet) {
    let api: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    let name = sts.metadata.name.clone().unwrap();
    api.patch(
        &name,
        &PatchParams::apply("slurmops-test"),
        &Patch::Apply(sts),
    )
    .await
    .unwrap_or_else(|e| panic!("server-side apply of StatefulSet {name}: {e}"));
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until the StatefulSet has `n` Ready pods; returns pod name → uid.
async fn ready_pods(env: &TestEnv, node_set: &str, n: usize) -> BTreeMap<String, String> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    let lp = ListParams::default().labels(&format!("slurmops.dev/nodeset={node_set}"));
    eventually(
        &format!("{n} Ready pods of {node_set}"),
        Duration::from_secs(60),
        async || {
            let list = pods.list(&lp).await.ok()?;
            let ready: BTreeMap<String, String> = list
                .items
                .iter()
                .filter(|p| is_ready(p) && p.metadata.deletion_timestamp.is_none())
                .map(|p| {
                    (
                        p.metadata.name.clone().unwrap(),
                        p.metadata.uid.clone().unwrap(),
                    )
                })
                .collect();
            let counted = sts
                .get(node_set)
                .await
                .ok()?
                .status?
                .ready_replicas
                .unwrap_or(0);
            (ready.len() == n && counted == n as i32).then_some(ready)
        },
    )
    .await
}

/// Waits until Slurm has the node registered and usable (IDLE, not INVAL/DOWN).
async fn registered_idle(name: &str) -> BTreeMap<String, String> {
    eventually(
        &format!("Slurm node {name} registered IDLE"),
        Duration::from_secs(30),
        async || {
            let fields = support::slurm::node(slurm_instance(), name)?;
            let state = fields.get("State")?;
            (state.starts_with("IDLE")
                && !state.contains("INVAL")
                && !state.contains("NOT_RESPONDING"))
            .then_some(fields)
        },
    )
    .await
}

on_each_slurm! {
async fn statefulset_pods_become_ready_and_each_registers_a_real_slurmd_under_its_hostname() {
    let env = TestEnv::new("sts").await;
    let ns_name = env.name("w");
    apply(&env, &worker_statefulset(&env, &ns_name, 3)).await;

    // kube-controller-manager creates the pods; the test kubelet binds them, starts their slurmd
    // and reports them Ready; the StatefulSet controller counts them.
    let pods = ready_pods(&env, &ns_name, 3).await;
    let expected: Vec<String> = (0..3).map(|i| format!("{ns_name}-{i}")).collect();
    assert_eq!(pods.keys().cloned().collect::<Vec<_>>(), expected);
    for pod in &expected {
        let node = registered_idle(pod).await;
        // The pod's own command line reached Slurm: its --conf features, its hostname as name.
        let features = node.get("AvailableFeatures").cloned().unwrap_or_default();
        assert!(
            features.split(',').any(|f| f == ns_name),
            "{pod}: Slurm node lacks the NodeSet feature {ns_name}: {features}"
        );
        assert!(
            node.get("Partitions")
                .is_some_and(|p| p.split(',').any(|x| x == "all"))
        );
    }
    let started = env
        .kubelet
        .events()
        .iter()
        .filter(|e| matches!(e, Event::SlurmdStarted { .. }))
        .count();
    assert_eq!(started, 3, "one slurmd per pod: {:?}", env.kubelet.events());
    env.cleanup().await;
}
}

on_each_slurm! {
async fn deleting_a_worker_pod_removes_its_slurm_node_until_the_recreated_pod_registers_again() {
    let env = TestEnv::new("del").await;
    let ns_name = env.name("w");
    apply(&env, &worker_statefulset(&env, &ns_name, 2)).await;
    let before = ready_pods(&env, &ns_name, 2).await;
    let victim = format!("{ns_name}-1");
    registered_idle(&victim).await;
    registered_idle(&format!("{ns_name}-0")).await;

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    pods.delete(&victim, &DeleteParams::default())
        .await
        .expect("delete the worker pod");

    // The pod's preStop (as rendered) takes its node out of Slurm; the other node stays.
    eventually(
        &format!("{victim} gone from Slurm"),
        Duration::from_secs(20),
        async || {
            support::slurm::node(slurm_instance(), &victim)
                .is_none()
                .then_some(())
        },
    )
    .await;
    assert!(support::slurm::node(slurm_instance(), &format!("{ns_name}-0")).is_some());

    // The StatefulSet controller recreates the pod (new uid); its slurmd registers again.
    let after = ready_pods(&env, &ns_name, 2).await;
    assert_ne!(
        after[&victim], before[&victim],
        "{victim} was not recreated"
    );
    assert_eq!(
        after[&format!("{ns_name}-0")],
        before[&format!("{ns_name}-0")]
    );
    registered_idle(&victim).await;

    let events = env.kubelet.events();
    let old_uid = &before[&victim];
    assert!(
        events.contains(&Event::PreStop {
            pod: victim.clone(),
            ok: true
        }),
        "{events:?}"
    );
    assert!(
        events.contains(&Event::SlurmdStopped {
            pod: victim.clone(),
            uid: old_uid.clone()
        }),
        "{events:?}"
    );
    env.cleanup().await;
}
}

on_each_slurm! {
async fn slurmrestd_answers_with_the_bed_jwt_and_refuses_without_it() {
    let b = bed();
    let curl = |token: Option<&str>| {
        let mut c = Command::new("curl");
        c.args(["-s", "-o", "/dev/null", "-w", "%{http_code}"]);
        if let Some(t) = token {
            c.args(["-H", &format!("X-SLURM-USER-TOKEN: {t}")]);
        }
        let out = c
            .arg(format!("{}/slurm/v0.0.42/ping", b.slurmrestd_url))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(curl(Some(&b.slurm_jwt)), "200");
    assert_eq!(curl(None), "401");
}
}

#[tokio::test(flavor = "multi_thread")]
async fn the_restricted_identity_has_only_the_rights_a_role_grants_it() {
    let env = TestEnv::new("rbac").await;
    let restricted = support::client(&bed().kubeconfig_restricted).await;
    let pods: Api<Pod> = Api::namespaced(restricted.clone(), &env.ns);
    let err = pods
        .list(&ListParams::default())
        .await
        .expect_err("no rights yet");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err:?}"
    );

    let role = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "read-pods", "namespace": env.ns},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]});
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "read-pods", "namespace": env.ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-pods"},
        "subjects": [{"kind": "User", "name": "slurmops-restricted", "apiGroup": "rbac.authorization.k8s.io"}]});
    let pp = PatchParams::apply("slurmops-test");
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(env.client.clone(), &env.ns);
    roles
        .patch("read-pods", &pp, &Patch::Apply(&role))
        .await
        .unwrap();
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(env.client.clone(), &env.ns);
    bindings
        .patch("read-pods", &pp, &Patch::Apply(&binding))
        .await
        .unwrap();

    eventually(
        "the Role to take effect",
        Duration::from_secs(10),
        async || pods.list(&ListParams::default()).await.ok().map(|_| ()),
    )
    .await;
    let sts: Api<StatefulSet> = Api::namespaced(restricted, &env.ns);
    let err = sts
        .list(&ListParams::default())
        .await
        .expect_err("not granted");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err:?}"
    );
    env.cleanup().await;
}

#[test]
fn every_git_transport_clones_and_fetches_and_ssh_pins_the_host_key() {
    let name = format!("transports-{}", support::unique_suffix());
    let bare = served_repo(&name);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    git(w, &["init", "-q", "-b", "main", "src"]);
    let src = w.join("src");
    std::fs::write(src.join("cluster.yaml"), "first\n").unwrap();
    git(&src, &["add", "."]);
    git(&src, &["commit", "-qm", "first"]);
    git(&src, &["push", "-q", bare.to_str().unwrap(), "main"]);
    let first = git(&src, &["rev-parse", "HEAD"]);

    let g = &bed().git;
    let urls = [
        ("git", format!("{}/{name}.git", g.daemon_url)),
        ("http", format!("{}/{name}.git", g.http_url)),
        ("ssh", format!("{}/{name}.git", g.ssh_url)),
    ];
    for (t, url) in &urls {
        git(w, &["clone", "-q", url, t]);
        assert_eq!(git(&w.join(t), &["rev-parse", "HEAD"]), first, "{t} clone");
    }
    std::fs::write(src.join("cluster.yaml"), "second\n").unwrap();
    git(&src, &["commit", "-qam", "second"]);
    git(&src, &["push", "-q", bare.to_str().unwrap(), "main"]);
    let second = git(&src, &["rev-parse", "HEAD"]);
    for (t, _) in &urls {
        git(&w.join(t), &["fetch", "-q", "origin"]);
        assert_eq!(
            git(&w.join(t), &["rev-parse", "origin/main"]),
            second,
            "{t} fetch"
        );
    }

    // A known_hosts entry with another key for the same host: ssh refuses to connect.
    let other = w.join("other-host-key");
    let out = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            other.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let port = g
        .ssh_url
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let public = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let wrong = w.join("known_hosts");
    let key: Vec<&str> = public.split_whitespace().take(2).collect();
    std::fs::write(&wrong, format!("[127.0.0.1]:{port} {}\n", key.join(" "))).unwrap();
    let out = git_command(w, &["ls-remote", &urls[2].1])
        .env(
            "GIT_SSH_COMMAND",
            format!(
                "ssh -i {} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={}",
                g.ssh_key.display(),
                wrong.display()
            ),
        )
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "ssh accepted a host key that is not the pinned one"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("HOST IDENTIFICATION HAS CHANGED"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
