//! Test support: the real parts slurmops talks to, for integration tests.
//!
//! `TestEnv::new(name)` gives a test its own namespace on the bed's real kube-apiserver (with
//! kube-controller-manager running the workload controllers), a test kubelet that runs a real slurmd
//! per worker pod, and a unique suffix for names that must not collide in the shared Slurm
//! instance (NodeSet names become Slurm node names). `bed()` gives slurmrestd and git servers.
#![allow(dead_code)] // each test binary uses a different part of this module

/// A test that talks to Slurm, run once per release the bed runs: `async fn NAME() { .. }` becomes
/// `NAME::slurm_24_11`, `NAME::slurm_25_11` and `NAME::slurm_26_05`, the same body against each
/// release's slurmctld, slurmrestd and slurmd (see `bed::select_slurm`).
///
/// The rule for which tests run where (it keeps the cold CI run under an hour): every test that
/// talks to Slurm runs on all three releases (`on_each_slurm!`), except a scenario of more than
/// 40 s whose every Slurm call another three-release test makes too; such a test runs on the
/// oldest and the newest release only (`on_oldest_and_newest_slurm!`).
#[allow(unused_macros)]
macro_rules! on_each_slurm {
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        on_slurm_releases!($(#[$meta])* async fn $name() $body; slurm_24_11 "24.11", slurm_25_11 "25.11", slurm_26_05 "26.05");
    };
}

/// As `on_each_slurm!`, on 24.11 and 26.05 only: see the rule there.
#[allow(unused_macros)]
macro_rules! on_oldest_and_newest_slurm {
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        on_slurm_releases!($(#[$meta])* async fn $name() $body; slurm_24_11 "24.11", slurm_26_05 "26.05");
    };
}

#[allow(unused_macros)]
macro_rules! on_slurm_releases {
    ($(#[$meta:meta])* async fn $name:ident() $body:block; $($variant:ident $release:literal),+) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn body() $body
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $variant() {
                    crate::support::select_slurm($release);
                    body().await
                }
            )+
        }
    };
}

pub mod accounting;
pub mod at_scale;
pub mod bed;
pub mod control_plane;
pub mod ctld_files;
pub mod daemon;
pub mod fleet;
pub mod gitops;
pub mod guest;
pub mod jobs_axis;
pub mod kubelet;
pub mod login_pod;
pub mod network_policies;
pub mod oci;
pub mod real_node;
pub mod scale;
pub mod slurm;
pub mod slurm_images;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

#[allow(unused_imports)]
pub use bed::{bed, select_slurm, slurm_instance, slurm_release};
#[allow(unused_imports)]
pub use kubelet::{Event, Kubelet, OwnSlurm};

/// A kube client for one of the bed's identities.
pub async fn client(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("read the bed's kubeconfig");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    Client::try_from(config).expect("kube client")
}

/// Five lowercase alphanumerics, distinct across concurrently running test processes.
pub fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let mut n = nanos ^ (u128::from(std::process::id()) << 40);
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..5)
        .map(|_| {
            let c = alphabet[(n % 36) as usize] as char;
            n /= 36;
            c
        })
        .collect()
}

pub struct TestEnv {
    pub client: Client,
    pub ns: String,
    pub suffix: String,
    pub kubelet: Kubelet,
    /// The restricted identity's kubeconfig of the apiserver this test runs on (the bed's, or a
    /// control plane of the test's own).
    pub kubeconfig_restricted: std::path::PathBuf,
}

impl TestEnv {
    /// Starts (or joins) the bed, creates namespace `t-NAME-SUFFIX` and a kubelet for it.
    pub async fn new(name: &str) -> TestEnv {
        TestEnv::on_nodes(name, &[&[]]).await
    }

    /// As `new`, with a kubelet running one fake Node per entry of NODES (their labels), named
    /// `node-SUFFIX-I`; pods are bound by ordinal modulo their number.
    pub async fn on_nodes(name: &str, nodes: &[&[(&str, &str)]]) -> TestEnv {
        TestEnv::build(name, nodes, |_| None).await
    }

    /// As `new`, with the pods' Slurm daemons (slurmctld, slurmrestd, slurmd) in the test's own
    /// Slurm instance that OWN describes for the test's namespace.
    pub async fn with_own_slurm(
        name: &str,
        own: impl FnOnce(&str) -> kubelet::OwnSlurm,
    ) -> TestEnv {
        TestEnv::build(name, &[&[]], |ns| Some(own(ns))).await
    }

    /// As `with_own_slurm`, on the control plane CP of the test's own rather than the bed's.
    pub async fn with_own_slurm_on(
        cp: &control_plane::ControlPlane,
        name: &str,
        own: impl FnOnce(&str) -> kubelet::OwnSlurm,
    ) -> TestEnv {
        TestEnv::build_on(
            (&cp.kubeconfig_admin(), &cp.kubeconfig_restricted()),
            name,
            &[&[]],
            |ns| Some(own(ns)),
        )
        .await
    }

    async fn build(
        name: &str,
        nodes: &[&[(&str, &str)]],
        own: impl FnOnce(&str) -> Option<kubelet::OwnSlurm>,
    ) -> TestEnv {
        let bed = bed();
        let kubeconfigs = (&bed.kubeconfig_admin, &bed.kubeconfig_restricted);
        TestEnv::build_on(kubeconfigs, name, nodes, own).await
    }

    async fn build_on(
        (admin, restricted): (&std::path::PathBuf, &std::path::PathBuf),
        name: &str,
        nodes: &[&[(&str, &str)]],
        own: impl FnOnce(&str) -> Option<kubelet::OwnSlurm>,
    ) -> TestEnv {
        let client = client(admin).await;
        let suffix = unique_suffix();
        let ns = format!("t-{name}-{suffix}");
        let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &body)
            .await
            .unwrap_or_else(|e| panic!("create namespace {ns}: {e}"));
        let names: Vec<String> = (0..nodes.len())
            .map(|i| match i {
                0 => format!("node-{suffix}"),
                _ => format!("node-{suffix}-{i}"),
            })
            .collect();
        let with_labels: Vec<(&str, &[(&str, &str)])> = names
            .iter()
            .zip(nodes)
            .map(|(n, l)| (n.as_str(), *l))
            .collect();
        let kubelet = Kubelet::start_with(client.clone(), &ns, &with_labels, own(&ns)).await;
        TestEnv {
            client,
            ns,
            suffix,
            kubelet,
            kubeconfig_restricted: restricted.clone(),
        }
    }

    /// `BASE-SUFFIX`: a name unique to this test (e.g. a NodeSet, hence its Slurm node names).
    pub fn name(&self, base: &str) -> String {
        format!("{base}-{}", self.suffix)
    }

    /// Binds the Role slurmops documents for itself to the bed's restricted identity here.
    /// A PersistentVolumeClaim NAME with access MODE, as a site creates for the controllers'
    /// state (nothing binds it here); without the protection finalizer, so the namespace goes.
    pub async fn state_claim(&self, name: &str, mode: &str) {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &self.ns);
        let body: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"accessModes": [mode], "resources": {"requests": {"storage": "1Gi"}}}}))
        .unwrap();
        api.create(&PostParams::default(), &body)
            .await
            .unwrap_or_else(|e| panic!("create PersistentVolumeClaim {name}: {e}"));
        let strip = json!({"metadata": {"finalizers": null}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(strip))
            .await
            .unwrap_or_else(|e| panic!("strip PersistentVolumeClaim {name}'s finalizer: {e}"));
    }

    pub async fn grant_slurmops_role(&self) {
        self.grant_slurmops_role_for(&[None]).await;
    }

    /// As `grant_slurmops_role`, for the daemons of CLUSTERS (`--cluster`; None: without).
    pub async fn grant_slurmops_role_for(&self, clusters: &[Option<&str>]) {
        let leases: Vec<String> = clusters
            .iter()
            .map(|c| slurmops::apply::rbac::lease_for(*c))
            .collect();
        let role =
            slurmops::apply::rbac::role("slurmops", &self.ns, &leases, &["slurm-jwt".to_string()]);
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "slurmops", "namespace": self.ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "slurmops"},
            "subjects": [{"kind": "User", "name": "slurmops-restricted", "apiGroup": "rbac.authorization.k8s.io"}]});
        let pp = kube::api::PatchParams::apply("test-setup");
        Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(self.client.clone(), &self.ns)
            .patch("slurmops", &pp, &kube::api::Patch::Apply(&role))
            .await
            .expect("apply the slurmops Role");
        Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(self.client.clone(), &self.ns)
            .patch("slurmops", &pp, &kube::api::Patch::Apply(&binding))
            .await
            .expect("bind the slurmops Role");
    }

    /// Lets the restricted identity read Nodes (the optional ClusterRole slurmops documents).
    pub async fn grant_node_reader(&self) {
        let role = slurmops::apply::rbac::node_reader("slurmops-node-reader");
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "slurmops-node-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "slurmops-node-reader"},
            "subjects": [{"kind": "User", "name": "slurmops-restricted", "apiGroup": "rbac.authorization.k8s.io"}]});
        let pp = kube::api::PatchParams::apply("test-setup");
        Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(self.client.clone())
            .patch("slurmops-node-reader", &pp, &kube::api::Patch::Apply(&role))
            .await
            .expect("apply the node reader ClusterRole");
        Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(self.client.clone())
            .patch(
                "slurmops-node-reader",
                &pp,
                &kube::api::Patch::Apply(&binding),
            )
            .await
            .expect("bind the node reader ClusterRole");
    }

    /// Makes the cluster serve the Prometheus Operator's ServiceMonitor (its CRD, with an open
    /// schema), as a cluster with the operator installed does, or stop serving it (the CRD
    /// deleted); waits until discovery says so. Cluster-wide: one test uses it.
    pub async fn serve_service_monitors(&self, serve: bool) {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        const NAME: &str = "servicemonitors.monitoring.coreos.com";
        let crds = Api::<CustomResourceDefinition>::all(self.client.clone());
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": NAME},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                "names": {"plural": "servicemonitors", "singular": "servicemonitor",
                          "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}});
        let what = if serve { "served" } else { "gone" };
        eventually(
            &format!("ServiceMonitor {what}"),
            Duration::from_secs(60),
            async || {
                if serve {
                    let pp = kube::api::PatchParams::apply("test-setup");
                    // Refused while an earlier deletion is still finishing: tried again.
                    let _ = crds.patch(NAME, &pp, &kube::api::Patch::Apply(&crd)).await;
                } else {
                    let _ = crds.delete(NAME, &DeleteParams::default()).await;
                }
                let groups = self.client.list_api_groups().await.ok()?;
                let listed = groups
                    .groups
                    .iter()
                    .any(|g| g.name == "monitoring.coreos.com");
                (listed == serve).then_some(())
            },
        )
        .await;
    }

    /// Removes the namespace and the fake Node (the kubelet stops its slurmds when dropped).
    pub async fn cleanup(self) {
        let dp = DeleteParams::default();
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.ns, &dp)
            .await;
        for node in self.kubelet.nodes() {
            let _ = Api::<Node>::all(self.client.clone())
                .delete(&node, &dp)
                .await;
        }
    }
}

/// Polls `f` every 100 ms until it returns Some, or panics after `timeout` with `what`.
pub async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut f: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// As `eventually`, for a wait whose timeout needs explaining: `f` says what it saw when not
/// yet (Err), and a timeout panics with the last of it (what a CI log needs to tell a slow
/// convergence from a stuck one).
pub async fn eventually_explained<T>(
    what: &str,
    timeout: Duration,
    mut f: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let seen = match f().await {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}; last seen:\n{seen}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs git with ARGS in DIR; panics with git's output on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_command(dir, args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// git with a fixed identity, no user config, and the bed's pinned SSH host key and client key.
pub fn git_command(dir: &Path, args: &[&str]) -> Command {
    let g = &bed().git;
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "slurmops test")
        .env("GIT_AUTHOR_EMAIL", "test@slurmops.dev")
        .env("GIT_COMMITTER_NAME", "slurmops test")
        .env("GIT_COMMITTER_EMAIL", "test@slurmops.dev")
        .env(
            "GIT_SSH_COMMAND",
            format!(
                "ssh -i {} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={}",
                g.ssh_key.display(),
                g.known_hosts.display()
            ),
        );
    cmd
}

/// A new bare repository served by every git server of the bed: `NAME.git` under the bed root.
pub fn served_repo(name: &str) -> PathBuf {
    let path = bed().git.root.join(format!("{name}.git"));
    git(
        &bed().git.root,
        &["init", "-q", "--bare", "-b", "main", path.to_str().unwrap()],
    );
    path
}

/// The head of a test cluster.yaml (metadata, the Slurm release this test process runs against,
/// the auth Secrets the bed provides); a test appends its `nodeSets:` and `partitions:` (indented
/// under `spec:`).
pub fn cluster_head(name: &str, namespace: &str) -> String {
    let release = slurm_release();
    format!(
        r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  slurmVersion: "{release}"
  auth:
    slurmKey: {{name: slurm-auth, key: slurm.key}}
    jwtKey: {{name: slurm-jwt, key: jwt_hs256.key}}
"#
    )
}

/// A cluster of one NodeSet NODE_SET: 4 small workers running IMAGE, rolled one at a time
/// (maxUnavailable 1), in one default partition.
pub fn four_workers(ns: &str, node_set: &str, image: &str) -> String {
    cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - name: {node_set}
      replicas: 4
      cpu: "1"
      memory: 256Mi
      image: {image}
      update: {{maxUnavailable: 1}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
        )
}

/// Sets (Some) or removes (None) label KEY on Kubernetes node NODE, as an administrator does.
pub async fn label_node(env: &TestEnv, node: &str, key: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"labels": {key: value}}});
    Api::<k8s_openapi::api::core::v1::Node>::all(env.client.clone())
        .patch(
            node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
        .expect("label the node");
}
