//! The objects `install --print` prints, in apply order: the ServiceAccount, a Role and
//! RoleBinding per namespace, the node reader, the Deployment, its PodDisruptionBudget, the
//! leader's Service and the NetworkPolicy that lets only pods reach its port.

use k8s_openapi::api::core::v1::{Service, ServiceAccount, ServicePort, ServiceSpec};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value as Json;

use super::deployment::deployment;
use super::settings::{Install, PORT, labels, meta, node_reader_name};
use crate::apply::rbac;
use crate::render::network;

fn to_json<T: serde::Serialize>(o: &T) -> Json {
    serde_json::to_value(o).expect("typed objects serialize")
}

/// The objects, in apply order.
pub fn objects(i: &Install) -> Vec<Json> {
    let mut out = vec![to_json(&ServiceAccount {
        metadata: meta(i, &i.namespace),
        automount_service_account_token: Some(true),
        ..ServiceAccount::default()
    })];
    let clusters = i.cluster_namespaces();
    let mut namespaces = clusters.clone();
    namespaces.push(i.namespace.clone());
    namespaces.sort();
    namespaces.dedup();
    let lease = rbac::lease_for(i.cluster.as_deref());
    for ns in &namespaces {
        // Its own namespace, when no cluster lives there: its Lease, its status and Events, no
        // workload (a pod there could mount its git token and ServiceAccount token).
        let role = match clusters.contains(ns) {
            true => rbac::role(&i.name(), ns, std::slice::from_ref(&lease), &i.jwt_secrets),
            false => rbac::home_role(
                &i.name(),
                ns,
                &lease,
                &crate::status::configmap::name_for(i.cluster.as_deref()),
            ),
        };
        out.push(to_json(&role));
        out.push(to_json(&RoleBinding {
            metadata: meta(i, ns),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: i.name(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: i.name(),
                namespace: Some(i.namespace.clone()),
                ..Subject::default()
            }]),
        }));
    }
    if i.node_reader {
        let name = node_reader_name(&i.name(), &i.namespace);
        let mut role = rbac::node_reader(&name);
        role.metadata.labels = Some(labels(i));
        out.push(to_json(&role));
        out.push(to_json(&ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels(i)),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name,
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: i.name(),
                namespace: Some(i.namespace.clone()),
                ..Subject::default()
            }]),
        }));
    }
    out.push(to_json(&deployment(i)));
    // At most one replica out at a time (a node drain never takes them all).
    out.push(to_json(&PodDisruptionBudget {
        metadata: meta(i, &i.namespace),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(labels(i)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }));
    // The leader alone: a webhook, the view and metrics never reach a standby.
    let mut leader = labels(i);
    leader.insert(crate::vocab::LABEL_LEADER.into(), "true".into());
    out.push(to_json(&Service {
        metadata: meta(i, &i.namespace),
        spec: Some(ServiceSpec {
            selector: Some(leader),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: PORT,
                // Explicit: server-side apply needs the list key on Kubernetes < 1.26.
                protocol: Some("TCP".into()),
                target_port: Some(IntOrString::String("http".into())),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }));
    if i.network_policy {
        out.push(to_json(&network_policy(i)));
    }
    out
}

/// Ingress to the daemon's pods on its port only (metrics, webhook, live view), from the pods of
/// the namespaces the install names, else from every pod of the Kubernetes cluster: from outside
/// it only through an in-cluster ingress controller or proxy.
fn network_policy(i: &Install) -> NetworkPolicy {
    let from = match i.reachable_from.is_empty() {
        true => network::any_pod(),
        false => network::namespaces(&i.reachable_from),
    };
    let port = u16::try_from(PORT).expect("the daemon's port is a port");
    network::policy_for(
        meta(i, &i.namespace),
        labels(i),
        vec![network::rule(Some(vec![from]), Some(port))],
    )
}
