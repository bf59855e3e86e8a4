//! The pod settings every pod-bearing component shares (service account, resources,
//! scheduling) and the typed additions to a rendered pod template.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvVar, PodSecurityContext, ResourceRequirements, Toleration,
    TopologySpreadConstraint,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Settings every pod-bearing component shares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSettings {
    /// ServiceAccount of the component's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// CPU and memory of the main container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Added to the affinity slurmops renders (workers: one per Kubernetes node; control plane:
    /// spread over nodes): anti-affinity terms are appended, node and pod affinity are yours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Extra fields merged into the pod template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodOverrides>,
}

/// Typed additions to a rendered pod template. Lists are appended, maps merged, scalars replaced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodOverrides {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Environment variables added to the main container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Sidecar containers added next to the main container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
}
