//! The cluster's NetworkPolicies (`spec.networkPolicy`, on unless `enabled: false`), one per
//! component: slurmctld reachable from the cluster's own pods (and, with metrics on, the
//! monitoring namespaces listed); slurmdbd from the cluster's own pods (slurmctld, slurmrestd,
//! and `sacct`/`sacctmgr` on login pods and in jobs, which reach slurmdbd directly); the
//! in-cluster MariaDB from slurmdbd alone (and the pods of the scheduled copies); slurmrestd
//! from the cluster's own pods, the slurmops daemon's pods in any namespace and the namespaces
//! listed; workers on every port from the cluster's own pods only (job steps, MPI and NCCL talk
//! between workers, srun from login pods); login pods on ssh from anywhere and on every port from
//! the cluster's own pods (srun's I/O connections come back from the workers). `reach` says what
//! a set of policies lets through.

pub mod reach;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::names::{Component, LABEL_INSTANCE, LABEL_NAME, Names};
use super::objects::meta;
use super::slurm::{SLURMCTLD_PORT, SLURMDBD_PORT, SLURMRESTD_PORT};
use crate::cluster::ClusterFile;

/// The port login pods' sshd listens on (their Services map theirs to it).
const SSH_PORT: u16 = 22;

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
pub fn namespaces(names: &[String]) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: reach::NAMESPACE_NAME.into(),
                operator: "In".into(),
                values: Some(names.to_vec()),
            }]),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// Every pod of every namespace (no source outside the cluster).
pub fn any_pod() -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector::default()),
        ..NetworkPolicyPeer::default()
    }
}

/// The slurmops daemon's pods, in whatever namespace it was installed in (cluster.yaml does not
/// know it): `app.kubernetes.io/name: slurmops`.
fn daemon() -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                LABEL_NAME.to_string(),
                crate::vocab::DAEMON_NAME.to_string(),
            )])),
            ..LabelSelector::default()
        }),
        ..any_pod()
    }
}

/// A rule letting FROM (None: anyone) through on PORT over TCP (None: every port and protocol).
pub fn rule(from: Option<Vec<NetworkPolicyPeer>>, port: Option<u16>) -> NetworkPolicyIngressRule {
    NetworkPolicyIngressRule {
        from,
        ports: port.map(|p| {
            vec![NetworkPolicyPort {
                port: Some(IntOrString::Int(i32::from(p))),
                protocol: Some("TCP".into()),
                ..NetworkPolicyPort::default()
            }]
        }),
    }
}

/// Ingress to the pods of SELECTOR through RULES only.
pub fn policy_for(
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    selector: BTreeMap<String, String>,
    rules: Vec<NetworkPolicyIngressRule>,
) -> NetworkPolicy {
    NetworkPolicy {
        metadata,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            egress: None,
            ingress: Some(rules),
        }),
    }
}

/// Ingress to COMPONENT's pods through RULES only.
fn policy(
    names: &Names,
    component: Component,
    rules: Vec<NetworkPolicyIngressRule>,
) -> NetworkPolicy {
    policy_for(
        meta(
            names,
            &format!("{}-{}", names.name, component.as_str()),
            Some(component),
            None,
        ),
        names.selector(component, None),
        rules,
    )
}

/// The policies C asks for: every component's, unless `spec.networkPolicy.enabled` is false.
pub fn policies(c: &ClusterFile, names: &Names) -> Vec<NetworkPolicy> {
    let np = c.spec.network_policy.clone().unwrap_or_default();
    if !np.enabled {
        return Vec::new();
    }
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
    let mut out = vec![policy(
        names,
        Component::Controller,
        vec![rule(Some(from), Some(SLURMCTLD_PORT))],
    )];
    if c.spec.accounting.enabled {
        out.push(policy(
            names,
            Component::Accounting,
            vec![rule(Some(vec![cluster()]), Some(SLURMDBD_PORT))],
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
        out.push(policy(
            names,
            Component::Database,
            vec![rule(Some(from), Some(db.port))],
        ));
    }
    if c.spec.restapi.enabled {
        let mut from = vec![cluster(), daemon()];
        if !np.restapi_from_namespaces.is_empty() {
            from.push(namespaces(&np.restapi_from_namespaces));
        }
        out.push(policy(
            names,
            Component::RestApi,
            vec![rule(Some(from), Some(SLURMRESTD_PORT))],
        ));
    }
    out.push(policy(
        names,
        Component::Worker,
        vec![rule(Some(vec![cluster()]), None)],
    ));
    if !c.spec.login_sets.is_empty() {
        out.push(policy(
            names,
            Component::Login,
            vec![
                rule(None, Some(SSH_PORT)),
                rule(Some(vec![cluster()]), None),
            ],
        ));
    }
    out
}
