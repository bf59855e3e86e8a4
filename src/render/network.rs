//! NetworkPolicies for the control plane (`spec.networkPolicy`): slurmctld reachable from the
//! cluster's own pods (and, with metrics on, the monitoring namespaces listed), slurmdbd from
//! slurmctld and slurmrestd, the in-cluster MariaDB from slurmdbd (and the pods of the scheduled
//! copies), slurmrestd from the cluster's pods and the namespaces listed. Workers and login pods
//! are left open: job steps talk between workers, and users reach login pods.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::names::{Component, LABEL_INSTANCE, Names};
use super::objects::meta;
use super::slurm::{SLURMCTLD_PORT, SLURMDBD_PORT, SLURMRESTD_PORT};
use crate::cluster::ClusterFile;

fn pods(labels: BTreeMap<String, String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(labels),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// Every pod of the namespaces NAMES.
fn namespaces(names: &[String]) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".into(),
                operator: "In".into(),
                values: Some(names.to_vec()),
            }]),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// Ingress to COMPONENT's pods on PORT from FROM only.
fn policy(
    names: &Names,
    component: Component,
    port: u16,
    from: Vec<NetworkPolicyPeer>,
) -> NetworkPolicy {
    NetworkPolicy {
        metadata: meta(
            names,
            &format!("{}-{}", names.name, component.as_str()),
            Some(component),
            None,
        ),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(names.selector(component, None)),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            egress: None,
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(from),
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(i32::from(port))),
                    protocol: Some("TCP".into()),
                    ..NetworkPolicyPort::default()
                }]),
            }]),
        }),
    }
}

/// The policies C asks for (none without `spec.networkPolicy.enabled`).
pub fn policies(c: &ClusterFile, names: &Names) -> Vec<NetworkPolicy> {
    let Some(np) = c.spec.network_policy.as_ref().filter(|n| n.enabled) else {
        return Vec::new();
    };
    let cluster = || {
        pods(BTreeMap::from([(
            LABEL_INSTANCE.to_string(),
            names.name.clone(),
        )]))
    };
    let mut from = vec![cluster()];
    if c.spec.controller.metrics.enabled && !np.metrics_from_namespaces.is_empty() {
        from.push(namespaces(&np.metrics_from_namespaces));
    }
    let mut out = vec![policy(names, Component::Controller, SLURMCTLD_PORT, from)];
    if c.spec.accounting.enabled {
        out.push(policy(
            names,
            Component::Accounting,
            SLURMDBD_PORT,
            vec![
                pods(names.selector(Component::Controller, None)),
                pods(names.selector(Component::RestApi, None)),
            ],
        ));
    }
    let in_cluster_db = c
        .spec
        .accounting
        .database
        .as_ref()
        .filter(|d| d.in_cluster.is_some());
    if let (true, Some(db)) = (c.spec.accounting.enabled, in_cluster_db) {
        // The in-cluster MariaDB: slurmdbd only, and the pods of the scheduled copies.
        let mut from = vec![pods(names.selector(Component::Accounting, None))];
        if crate::cluster::backup::scheduled(&c.spec).is_some() {
            from.push(pods(BTreeMap::from([
                (LABEL_INSTANCE.to_string(), names.name.clone()),
                (
                    super::names::LABEL_COMPONENT.to_string(),
                    super::backup_schedule::COMPONENT.to_string(),
                ),
            ])));
        }
        out.push(policy(names, Component::Database, db.port, from));
    }
    if c.spec.restapi.enabled {
        let mut from = vec![cluster()];
        if !np.restapi_from_namespaces.is_empty() {
            from.push(namespaces(&np.restapi_from_namespaces));
        }
        out.push(policy(names, Component::RestApi, SLURMRESTD_PORT, from));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(extra: &str) -> ClusterFile {
        crate::cluster::load("c.yaml", &cluster_text(extra)).unwrap()
    }

    #[test]
    fn the_control_plane_is_closed_to_all_but_the_cluster_and_the_namespaces_listed() {
        let c = cluster("  networkPolicy: {restapiFromNamespaces: [slurmops]}\n");
        let names = Names::new(&c);
        let p = policies(&c, &names);
        let json = serde_json::to_value(&p).unwrap();
        // slurmctld and slurmrestd (accounting is off): ingress on their ports only.
        assert_eq!(p.len(), 2, "{json:#}");
        assert_eq!(json[0]["spec"]["ingress"][0]["ports"][0]["port"], 6817);
        assert_eq!(
            json[0]["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"][LABEL_INSTANCE],
            "c"
        );
        assert_eq!(json[1]["spec"]["ingress"][0]["ports"][0]["port"], 6820);
        assert_eq!(
            json[1]["spec"]["ingress"][0]["from"][1]["namespaceSelector"]["matchExpressions"][0]["values"],
            serde_json::json!(["slurmops"])
        );
        assert!(policies(&cluster(""), &names).is_empty());
        let off = cluster("  networkPolicy: {enabled: false}\n");
        assert!(policies(&off, &names).is_empty());
        let bad = "  networkPolicy: {restapiFromNamespaces: [Not_A_Namespace]}\n";
        assert!(
            crate::cluster::load("c.yaml", &cluster_text(bad))
                .unwrap_err()
                .iter()
                .any(|d| d.path.contains("restapiFromNamespaces[0]"))
        );
    }

    fn cluster_text(extra: &str) -> String {
        format!(
            "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: c, namespace: slurm}}\nspec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {{name: k, key: k}}\n    jwtKey: {{name: j, key: j}}\n  nodeSets: [{{name: w, replicas: 1}}]\n  partitions: [{{name: p, nodeSets: [ALL]}}]\n{extra}"
        )
    }
}
