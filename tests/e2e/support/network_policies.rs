//! The NetworkPolicies applied on the bed, judged without a network that enforces them: the bed's
//! node runs no network plugin that enforces NetworkPolicies (its pods share a plain bridge), so a
//! connection refused by a policy would still go through there. Instead the policies the API server
//! accepted (so valid against its schema) and the running pods, with their namespaces' labels,
//! are read back and `slurmops::render::network::reach` (Kubernetes' semantics) says which
//! connections the policies let through.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ListParams};
use slurmops::render::network::reach::{self, Network, Source};
use slurmops::render::slurm::{SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT, SLURMRESTD_PORT};

/// The policies and pods of NAMESPACES, as the API server has them.
pub async fn read(kube: &kube::Client, namespaces: &[&str]) -> (Network, Vec<reach::Pod>) {
    let mut net = Network::default();
    let mut pods = Vec::new();
    let all: Api<Namespace> = Api::all(kube.clone());
    for ns in namespaces {
        let labels = all
            .get(ns)
            .await
            .unwrap()
            .metadata
            .labels
            .unwrap_or_default();
        net.namespace(ns, labels);
        let policies: Api<NetworkPolicy> = Api::namespaced(kube.clone(), ns);
        let list = policies.list(&ListParams::default()).await.unwrap();
        net.policies.extend(list.items);
        let api: Api<Pod> = Api::namespaced(kube.clone(), ns);
        for p in api.list(&ListParams::default()).await.unwrap().items {
            let ports = p
                .spec
                .iter()
                .flat_map(|s| &s.containers)
                .flat_map(|c| c.ports.iter().flatten())
                .filter_map(|c| Some((c.name.clone()?, u16::try_from(c.container_port).ok()?)))
                .collect();
            pods.push(reach::Pod {
                namespace: ns.to_string(),
                labels: p.metadata.labels.unwrap_or_default(),
                ip: p
                    .status
                    .and_then(|s| s.pod_ip)
                    .and_then(|ip| ip.parse().ok()),
                ports,
            });
        }
    }
    (net, pods)
}

/// Every connection the running quickstart in CLUSTER_NS needs is let through by the policies
/// applied there and in DAEMON_NS (the install's), and an outsider reaches none of its
/// databases and daemons; each pod found is judged, with what it needs.
pub async fn quickstart_paths_allowed(kube: &kube::Client, cluster_ns: &str, daemon_ns: &str) {
    let (mut net, pods) = read(kube, &[cluster_ns, daemon_ns]).await;
    let names: Vec<String> = net
        .policies
        .iter()
        .map(|p| {
            format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect();
    eprintln!("NetworkPolicies read back: {names:?}");
    let label = |p: &reach::Pod, k: &str| p.labels.get(k).cloned().unwrap_or_default();
    let of = |component: &str| -> Vec<&reach::Pod> {
        pods.iter()
            .filter(|p| {
                p.namespace == cluster_ns && label(p, "app.kubernetes.io/component") == component
            })
            .collect()
    };
    let daemons: Vec<&reach::Pod> = pods
        .iter()
        .filter(|p| p.namespace == daemon_ns && label(p, "app.kubernetes.io/name") == "slurmops")
        .collect();
    let (ctl, dbd, rest, db, workers) = (
        of("controller"),
        of("accounting"),
        of("restapi"),
        of("database"),
        of("worker"),
    );
    for (what, found) in [
        ("slurmctld", &ctl),
        ("slurmdbd", &dbd),
        ("slurmrestd", &rest),
        ("MariaDB", &db),
        ("a worker", &workers),
        ("the daemon", &daemons),
    ] {
        assert!(!found.is_empty(), "no pod of {what} among {pods:?}");
    }
    let mysql = db[0]
        .ports
        .get("mysql")
        .copied()
        .expect("MariaDB's port, named mysql");
    // An outsider: a pod of a namespace of its own, labelled as nothing of ours.
    net.namespace("outsider", BTreeMap::new());
    let outsider = Source::Pod(reach::Pod::new("outsider", &[("app", "outsider")]));
    let pod = |p: &&reach::Pod| Source::Pod((*p).clone());
    let mut paths: Vec<(String, Source, reach::Pod, u16, bool)> = Vec::new();
    let mut need = |what: &str, from: &[&reach::Pod], to: &[&reach::Pod], port: u16| {
        for f in from {
            for t in to {
                paths.push((what.to_string(), pod(f), (*t).clone(), port, true));
            }
        }
    };
    need("the daemon -> slurmrestd", &daemons, &rest, SLURMRESTD_PORT);
    need("slurmctld -> slurmdbd", &ctl, &dbd, SLURMDBD_PORT);
    need("slurmrestd -> slurmdbd", &rest, &dbd, SLURMDBD_PORT);
    need("slurmdbd -> slurmctld", &dbd, &ctl, SLURMCTLD_PORT);
    need("slurmdbd -> MariaDB", &dbd, &db, mysql);
    need("slurmrestd -> slurmctld", &rest, &ctl, SLURMCTLD_PORT);
    need("a worker -> slurmctld", &workers, &ctl, SLURMCTLD_PORT);
    need("slurmctld -> a worker", &ctl, &workers, SLURMD_PORT);
    // Job steps: srun's and MPI's ports are ephemeral ones.
    need("a worker -> a worker", &workers, &workers, 45000);
    // The daemon's port: from any pod of the cluster (the default install).
    need("slurmctld -> the daemon", &ctl, &daemons, 8080);
    for (what, to, port) in [
        ("MariaDB", &db, mysql),
        ("slurmdbd", &dbd, SLURMDBD_PORT),
        ("slurmctld", &ctl, SLURMCTLD_PORT),
        ("slurmrestd", &rest, SLURMRESTD_PORT),
        ("a worker", &workers, SLURMD_PORT),
    ] {
        for t in to.iter() {
            paths.push((
                format!("an outsider -> {what}"),
                outsider.clone(),
                (*t).clone(),
                port,
                false,
            ));
        }
    }
    // Nobody but slurmdbd reaches MariaDB: not slurmctld, not a worker.
    for f in ctl.iter().chain(&workers) {
        paths.push((
            "not slurmdbd -> MariaDB".into(),
            pod(f),
            db[0].clone(),
            mysql,
            false,
        ));
    }
    let mut wrong = Vec::new();
    for (what, from, to, port, want) in &paths {
        if net.allows(from, to, *port, "TCP") != *want {
            let to_name = label(to, "app.kubernetes.io/name");
            wrong.push(format!(
                "{what} ({to_name}:{port}): allowed should be {want}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "the applied NetworkPolicies ({names:?}) judge wrongly:\n{}",
        wrong.join("\n")
    );
    eprintln!(
        "NetworkPolicies: {} paths between {} pods judged as needed",
        paths.len(),
        pods.len()
    );
}
