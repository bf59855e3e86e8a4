//! The pieces every rendered component builds its objects from: metadata, label selectors,
//! Services, PodDisruptionBudgets, and the security context of a pod that runs as a non-root user.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSecurityContext, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::names::{Component, Names};

pub fn meta(
    names: &Names,
    name: &str,
    component: Option<Component>,
    node_set: Option<&str>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(names.namespace.clone()),
        labels: Some(names.labels(component, node_set)),
        ..ObjectMeta::default()
    }
}

pub fn selector(names: &Names, component: Component, node_set: Option<&str>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(names.selector(component, node_set)),
        ..LabelSelector::default()
    }
}

pub fn service(
    names: &Names,
    name: &str,
    component: Component,
    ports: &[(&str, u16)],
    headless: bool,
) -> Service {
    Service {
        metadata: meta(names, name, Some(component), None),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            cluster_ip: headless.then(|| "None".into()),
            publish_not_ready_addresses: headless.then_some(true),
            selector: Some(names.selector(component, None)),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p)| ServicePort {
                        name: Some((*n).into()),
                        port: (*p).into(),
                        target_port: Some(IntOrString::String((*n).into())),
                        protocol: Some("TCP".into()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

pub fn pdb(
    names: &Names,
    name: &str,
    component: Component,
    node_set: Option<&str>,
    selector_labels: BTreeMap<String, String>,
    max_unavailable: i32,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(names, name, Some(component), node_set),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(max_unavailable)),
            selector: Some(LabelSelector {
                match_labels: Some(selector_labels),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}

/// A control-plane pod running as UID (with `pod::restricted` containers: Pod Security
/// "restricted").
pub fn non_root(uid: i64) -> PodSecurityContext {
    PodSecurityContext {
        run_as_user: Some(uid),
        run_as_group: Some(uid),
        fs_group: Some(uid),
        run_as_non_root: Some(true),
        seccomp_profile: Some(k8s_openapi::api::core::v1::SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..PodSecurityContext::default()
    }
}
