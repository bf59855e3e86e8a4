//! `spec.loginSets`: login pods (sackd + sshd) users reach over SSH, and their Service.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{SecurityContext, Volume, VolumeMount};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::pod_settings::PodSettings;
use super::secret_ref::SecretRef;
use super::serde_defaults::one;

/// Login pods (sackd + sshd) users reach over SSH.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoginSet {
    pub name: String,
    #[serde(default = "one")]
    pub replicas: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default)]
    pub service: LoginService,
    /// authorized_keys for root, by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorized_keys: Option<SecretRef>,
    /// sssd.conf (user directory), by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sssd_conf: Option<SecretRef>,
    /// Volumes of the login pods, e.g. the shared filesystem users stage data on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Mounts into the login container of volumes declared in `volumes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// securityContext of the login container (e.g. `privileged: true` where enroot must run,
    /// if the cluster allows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<SecurityContext>,
    #[serde(default, flatten)]
    pub pod: PodSettings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoginService {
    #[serde(rename = "type", default = "default_service_type")]
    pub type_: ServiceType,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default = "default_ssh_port")]
    pub port: u16,
}

impl Default for LoginService {
    fn default() -> Self {
        LoginService {
            type_: default_service_type(),
            annotations: BTreeMap::new(),
            port: 22,
        }
    }
}

fn default_service_type() -> ServiceType {
    ServiceType::ClusterIP
}
fn default_ssh_port() -> u16 {
    22
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ServiceType {
    ClusterIP,
    NodePort,
    LoadBalancer,
}

impl ServiceType {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}
