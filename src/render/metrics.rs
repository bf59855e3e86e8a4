//! Slurm's own metrics made scrapeable: with `controller.metrics` on (Slurm 25.11 and later),
//! slurmctld serves OpenMetrics on its port; a Service annotated for Prometheus' annotation-based
//! discovery points at it, and a Prometheus Operator ServiceMonitor (typed here: k8s-openapi has
//! no type for this CRD) scrapes every endpoint.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};

use super::names::{Component, Names};
use super::objects::service;
use super::slurm::SLURMCTLD_PORT;
use crate::cluster::release;
use crate::cluster::types::ClusterFile;

/// slurmctld's OpenMetrics endpoints (`/metrics` itself is an index of them), as 26.05 serves them.
pub const ENDPOINTS: &[&str] = &[
    "/metrics/jobs",
    "/metrics/nodes",
    "/metrics/partitions",
    "/metrics/scheduler",
];

/// Metrics are on and the release has them.
fn enabled(c: &ClusterFile) -> bool {
    c.spec.controller.metrics.enabled
        && release::find(&c.spec.slurm_version).is_some_and(|r| r.openmetrics)
}

/// The `CLUSTER-metrics` Service: slurmctld's port, named `metrics`, with the
/// `prometheus.io/*` annotations for `/metrics/nodes`.
pub fn metrics_service(c: &ClusterFile, names: &Names) -> Option<Service> {
    if !enabled(c) {
        return None;
    }
    let mut svc = service(
        names,
        &names.metrics(),
        Component::Controller,
        &[("metrics", SLURMCTLD_PORT)],
        false,
    );
    // The controller pod names its port `slurmctld`: target it by number.
    if let Some(p) = svc
        .spec
        .as_mut()
        .and_then(|s| s.ports.as_mut())
        .and_then(|p| p.first_mut())
    {
        p.target_port = Some(
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(SLURMCTLD_PORT.into()),
        );
    }
    svc.metadata.annotations = Some(BTreeMap::from([
        ("prometheus.io/scrape".to_string(), "true".to_string()),
        ("prometheus.io/port".to_string(), SLURMCTLD_PORT.to_string()),
        (
            "prometheus.io/path".to_string(),
            "/metrics/nodes".to_string(),
        ),
    ]));
    Some(svc)
}

/// A `monitoring.coreos.com/v1` ServiceMonitor, the fields slurmops sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceMonitor {
    pub metadata: ObjectMeta,
    pub spec: ServiceMonitorSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    pub selector: LabelSelector,
    pub endpoints: Vec<Endpoint>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    pub port: String,
    pub path: String,
    pub interval: String,
}

impl k8s_openapi::Resource for ServiceMonitor {
    const API_VERSION: &'static str = "monitoring.coreos.com/v1";
    const GROUP: &'static str = "monitoring.coreos.com";
    const KIND: &'static str = "ServiceMonitor";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "servicemonitors";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for ServiceMonitor {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The ServiceMonitor `controller.metrics.serviceMonitor` asks for, selecting the metrics Service.
pub fn service_monitor(c: &ClusterFile, names: &Names) -> Option<ServiceMonitor> {
    let sm = c.spec.controller.metrics.service_monitor.as_ref()?;
    if !enabled(c) || !sm.enabled {
        return None;
    }
    let svc = metrics_service(c, names)?;
    let mut metadata = svc.metadata.clone();
    metadata.annotations = None;
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(sm.labels.clone());
    let interval = format!("{}s", sm.interval.as_secs());
    Some(ServiceMonitor {
        metadata,
        spec: ServiceMonitorSpec {
            selector: LabelSelector {
                match_labels: svc.metadata.labels.clone(),
                ..LabelSelector::default()
            },
            endpoints: ENDPOINTS
                .iter()
                .map(|path| Endpoint {
                    port: "metrics".into(),
                    path: (*path).into(),
                    interval: interval.clone(),
                })
                .collect(),
        },
    })
}
