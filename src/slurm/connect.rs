//! A Slurm client for a cluster.yaml, the way the daemon runs by default: tokens minted (and
//! renewed before they expire) from the cluster's JWT key Secret (`spec.auth.jwtKey`), sent to the
//! slurmrestd Service the cluster renders. Only that one Secret is read, and its bytes never leave
//! the client (redacted in Debug, never logged). With several slurmrestd, the pods behind that
//! Service are taken from its EndpointSlices (`replicas_of_slices`; its Endpoints, `replicas_of`,
//! where the apiserver serves no EndpointSlice), so that each is addressed and named.

use std::time::Duration;

use serde::Deserialize;

use k8s_openapi::api::core::v1::{Endpoints, Secret};

use super::auth::{Credentials, KeyBytes};
use super::{Client, Config, Replica, SlurmError};
use crate::cluster::ClusterFile;

/// Lifetime of a minted token (renewed at 80%).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(600);

/// The in-cluster URL of C's slurmrestd Service.
pub fn service_url(c: &ClusterFile) -> String {
    let names = crate::render::Names::new(c);
    format!(
        "http://{}.{}.svc:{}",
        names.restapi(),
        c.metadata.namespace,
        crate::render::slurm::SLURMRESTD_PORT
    )
}

/// Reads C's JWT key Secret and builds a client that mints tokens for USER (a Slurm admin: the
/// SlurmUser or root) against URL (default: C's slurmrestd Service); ALLOW_HTTP lets tokens go
/// over plain http:// beyond loopback and in-cluster Services.
pub async fn from_secret(
    kube: &kube::Client,
    c: &ClusterFile,
    url: Option<String>,
    user: &str,
    allow_http: bool,
) -> Result<Client, SlurmError> {
    let ns = &c.metadata.namespace;
    let s = &c.spec.auth.jwt_key;
    let api: kube::Api<Secret> = kube::Api::namespaced(kube.clone(), ns);
    let secret = api.get_opt(&s.name).await.map_err(|e| {
        SlurmError::Config(format!(
            "cannot read Secret {ns}/{} (spec.auth.jwtKey): {e}",
            s.name
        ))
    })?;
    let secret = secret.ok_or_else(|| {
        SlurmError::Config(format!(
            "Secret {ns}/{} (spec.auth.jwtKey) does not exist: create it with the cluster's JWT key, or pass --slurm-jwt",
            s.name
        ))
    })?;
    let key = secret
        .data
        .and_then(|d| d.get(&s.key).cloned())
        .ok_or_else(|| {
            SlurmError::Config(format!(
                "Secret {ns}/{} has no key {:?} (spec.auth.jwtKey.key)",
                s.name, s.key
            ))
        })?;
    let mut config = Config::new(
        url.unwrap_or_else(|| service_url(c)),
        Credentials::Key {
            key: KeyBytes(key.0),
            user: user.to_string(),
            lifetime: TOKEN_LIFETIME,
        },
    );
    config.allow_http = allow_http;
    Client::new(config)
}

/// The slurmrestd pods behind a Service, from its Endpoints E: the ready addresses that name
/// their pod, at the `slurmrestd` port (else the only one), in name order.
pub fn replicas_of(e: &Endpoints) -> Vec<Replica> {
    let mut out = Vec::new();
    for s in e.subsets.iter().flatten() {
        let ports = s.ports.as_deref().unwrap_or_default();
        let port = ports
            .iter()
            .find(|p| p.name.as_deref() == Some("slurmrestd"))
            .or(ports.first().filter(|_| ports.len() == 1));
        let Some(port) = port else { continue };
        for a in s.addresses.iter().flatten() {
            let Some(pod) = a.target_ref.as_ref().and_then(|t| t.name.clone()) else {
                continue;
            };
            out.push(replica(pod, &a.ip, port.port));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The replica POD at IP:PORT (an IPv6 address in brackets).
fn replica(pod: String, ip: &str, port: i32) -> Replica {
    let host = match ip.contains(':') {
        true => format!("[{ip}]"),
        false => ip.to_string(),
    };
    Replica {
        name: pod,
        base: format!("http://{host}:{port}"),
    }
}

/// What of an EndpointSlice (`discovery.k8s.io` v1, or v1beta1 on 1.20: the same fields) names
/// the pods behind a Service; read from JSON, as the daemon watches either version.
#[derive(serde::Deserialize)]
struct Slice {
    #[serde(rename = "addressType", default)]
    address_type: String,
    #[serde(default)]
    endpoints: Vec<SliceEndpoint>,
    #[serde(default)]
    ports: Option<Vec<SlicePort>>,
}

#[derive(serde::Deserialize)]
struct SliceEndpoint {
    #[serde(default)]
    addresses: Vec<String>,
    #[serde(default)]
    conditions: SliceConditions,
    #[serde(rename = "targetRef")]
    target_ref: Option<SliceRef>,
}

#[derive(serde::Deserialize, Default)]
struct SliceConditions {
    ready: Option<bool>,
}

#[derive(serde::Deserialize)]
struct SliceRef {
    name: Option<String>,
}

#[derive(serde::Deserialize)]
struct SlicePort {
    name: Option<String>,
    port: Option<i32>,
}

/// The slurmrestd pods behind a Service, from its EndpointSlices SLICES (JSON objects): the
/// ready endpoints (a missing `ready` counts as ready, as the API says consumers should take it;
/// a terminating pod is not ready) that name their pod, at the `slurmrestd` port (else the only
/// one), in name order, each pod once (a pod can be in two slices while they are rewritten). A
/// slice that does not parse is skipped.
pub fn replicas_of_slices(slices: &[serde_json::Value]) -> Vec<Replica> {
    let mut out: Vec<Replica> = Vec::new();
    for value in slices {
        let Ok(s) = Slice::deserialize(value) else {
            continue;
        };
        if !matches!(s.address_type.as_str(), "IPv4" | "IPv6") {
            continue;
        }
        let ports = s.ports.as_deref().unwrap_or_default();
        let port = ports
            .iter()
            .find(|p| p.name.as_deref() == Some("slurmrestd"))
            .or(ports.first().filter(|_| ports.len() == 1))
            .and_then(|p| p.port);
        let Some(port) = port else { continue };
        for e in &s.endpoints {
            let (Some(pod), Some(ip)) = (
                e.target_ref.as_ref().and_then(|t| t.name.clone()),
                e.addresses.first(),
            ) else {
                continue;
            };
            if e.conditions.ready == Some(false) || out.iter().any(|r| r.name == pod) {
                continue;
            }
            out.push(replica(pod, ip, port));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What both tests' inputs hold behind the Service: pods a and b, ready, in name order.
    fn ready_a_and_b() -> Vec<(String, String)> {
        [("c-restapi-a", "10.0.0.1"), ("c-restapi-b", "10.0.0.2")]
            .map(|(p, ip)| (p.to_string(), format!("http://{ip}:6820")))
            .to_vec()
    }

    #[test]
    fn replicas_are_the_ready_endpoints_of_the_slices_each_pod_once() {
        let slice = |endpoints: serde_json::Value| {
            serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
                "metadata": {"name": "c-restapi-x"},
                "addressType": "IPv4",
                "endpoints": endpoints,
                "ports": [{"name": "slurmrestd", "port": 6820, "protocol": "TCP"}]
            })
        };
        let slices = [
            slice(serde_json::json!([
                {"addresses": ["10.0.0.2"], "conditions": {"ready": true},
                 "targetRef": {"kind": "Pod", "name": "c-restapi-b"}},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": false, "terminating": true},
                 "targetRef": {"kind": "Pod", "name": "c-restapi-c"}},
                {"addresses": ["10.0.0.9"], "conditions": {"ready": true}}
            ])),
            // The same pod again (slices being rewritten), and one whose readiness is unknown.
            slice(serde_json::json!([
                {"addresses": ["10.0.0.2"], "targetRef": {"kind": "Pod", "name": "c-restapi-b"}},
                {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": "c-restapi-a"}}
            ])),
            serde_json::json!({"addressType": "FQDN", "endpoints": [{"addresses": ["x.example"],
                "targetRef": {"name": "c-restapi-d"}}], "ports": [{"port": 6820}]}),
            serde_json::json!({"endpoints": "not a list"}),
        ];
        let names: Vec<(String, String)> = replicas_of_slices(&slices)
            .into_iter()
            .map(|r| (r.name, r.base))
            .collect();
        assert_eq!(names, ready_a_and_b());
    }

    #[test]
    fn replicas_are_the_ready_addresses_with_their_pods() {
        let e: Endpoints = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c-restapi"},
            "subsets": [{
                "addresses": [
                    {"ip": "10.0.0.2", "targetRef": {"kind": "Pod", "name": "c-restapi-b"}},
                    {"ip": "10.0.0.1", "targetRef": {"kind": "Pod", "name": "c-restapi-a"}},
                    {"ip": "10.0.0.9"}
                ],
                "notReadyAddresses": [{"ip": "10.0.0.3", "targetRef": {"kind": "Pod", "name": "c-restapi-c"}}],
                "ports": [{"name": "slurmrestd", "port": 6820}]
            }]
        }))
        .unwrap();
        let names: Vec<(String, String)> = replicas_of(&e)
            .into_iter()
            .map(|r| (r.name, r.base))
            .collect();
        assert_eq!(names, ready_a_and_b());
    }
}
