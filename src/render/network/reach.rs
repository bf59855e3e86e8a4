//! Whether Kubernetes' NetworkPolicies let a connection through, by the API's semantics (what a
//! CNI that enforces them does): a pod is isolated for ingress when some policy of its namespace
//! selects it and has `Ingress` among its `policyTypes` (or no `policyTypes` at all); a
//! connection to an isolated pod is allowed when some such policy has an ingress rule whose
//! `from` matches the source (none or empty: every source) and whose `ports` hold the port (none
//! or empty: every port). A peer's `podSelector` selects pods of the policy's namespace, its
//! `namespaceSelector` the namespaces (by their labels, `kubernetes.io/metadata.name` among
//! them), both together the pods matching both; an `ipBlock` matches sources by address.
//!
//! Pure: the render's unit tests ask it of rendered policies, the end-to-end test of the policies
//! and pods read back from an API server whose network does not enforce them.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The label Kubernetes puts on every namespace: its name.
pub const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";

/// A pod, as policies see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    /// Its address, for `ipBlock` peers (None: it matches none).
    pub ip: Option<IpAddr>,
    /// Its containers' named ports, for policies that name a port.
    pub ports: BTreeMap<String, u16>,
}

impl Pod {
    pub fn new(namespace: &str, labels: &[(&str, &str)]) -> Self {
        Pod {
            namespace: namespace.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Pod::default()
        }
    }
}

/// Where a connection comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Pod(Pod),
    /// Not a pod (outside the cluster): only `ipBlock` peers and rules without `from` match it.
    Outside(IpAddr),
}

/// The policies of a cluster and its namespaces' labels.
#[derive(Debug, Clone, Default)]
pub struct Network {
    pub policies: Vec<NetworkPolicy>,
    /// Each namespace's labels; `kubernetes.io/metadata.name` is added, as API servers do since
    /// Kubernetes 1.21.
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

impl Network {
    pub fn new(policies: Vec<NetworkPolicy>) -> Self {
        Network {
            policies,
            namespaces: BTreeMap::new(),
        }
    }

    /// Namespace NAME carries LABELS (a namespace not given has its name's label alone).
    pub fn namespace(&mut self, name: &str, labels: BTreeMap<String, String>) -> &mut Self {
        self.namespaces.insert(name.into(), labels);
        self
    }

    fn namespace_labels(&self, name: &str) -> BTreeMap<String, String> {
        let mut l = self.namespaces.get(name).cloned().unwrap_or_default();
        l.insert(NAMESPACE_NAME.into(), name.into());
        l
    }

    /// The policies that isolate TO for ingress.
    pub fn selecting<'a>(&'a self, to: &'a Pod) -> impl Iterator<Item = &'a NetworkPolicy> {
        self.policies.iter().filter(move |p| {
            let Some(spec) = &p.spec else { return false };
            let ingress = spec
                .policy_types
                .as_ref()
                .is_none_or(|t| t.iter().any(|t| t == "Ingress"));
            ingress
                && p.metadata.namespace.as_deref() == Some(to.namespace.as_str())
                && selects(spec.pod_selector.as_ref(), &to.labels)
        })
    }

    /// Whether a connection from FROM to TO's PORT over PROTOCOL (`TCP`, `UDP`, `SCTP`) is let
    /// through.
    pub fn allows(&self, from: &Source, to: &Pod, port: u16, protocol: &str) -> bool {
        let mut isolated = false;
        for p in self.selecting(to) {
            isolated = true;
            let namespace = p.metadata.namespace.as_deref().unwrap_or_default();
            let rules = p.spec.as_ref().and_then(|s| s.ingress.as_deref());
            let admits = rules.unwrap_or_default().iter().any(|r| {
                let from_ok = match r.from.as_deref() {
                    None | Some([]) => true,
                    Some(peers) => peers.iter().any(|peer| self.matches(peer, namespace, from)),
                };
                let port_ok = match r.ports.as_deref() {
                    None | Some([]) => true,
                    Some(ports) => ports.iter().any(|q| port_matches(q, to, port, protocol)),
                };
                from_ok && port_ok
            });
            if admits {
                return true;
            }
        }
        !isolated
    }

    /// Whether PEER of a policy in NAMESPACE matches FROM.
    fn matches(&self, peer: &NetworkPolicyPeer, namespace: &str, from: &Source) -> bool {
        if let Some(block) = &peer.ip_block {
            let ip = match from {
                Source::Pod(p) => p.ip,
                Source::Outside(ip) => Some(*ip),
            };
            return ip.is_some_and(|ip| in_block(block, ip));
        }
        let Source::Pod(pod) = from else {
            return false;
        };
        let namespace_ok = match &peer.namespace_selector {
            Some(s) => selects(Some(s), &self.namespace_labels(&pod.namespace)),
            // A podSelector alone: pods of the policy's own namespace.
            None if peer.pod_selector.is_some() => pod.namespace == namespace,
            // No selector and no ipBlock: the API server refuses such a peer.
            None => false,
        };
        namespace_ok
            && peer
                .pod_selector
                .as_ref()
                .is_none_or(|s| selects(Some(s), &pod.labels))
    }
}

/// Whether SELECTOR (None or empty: everything) matches LABELS.
pub fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(s) = selector else { return true };
    let by_label = s
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expression = s.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    by_label && by_expression
}

fn port_matches(q: &NetworkPolicyPort, to: &Pod, port: u16, protocol: &str) -> bool {
    if q.protocol.as_deref().unwrap_or("TCP") != protocol {
        return false;
    }
    let first = match &q.port {
        None => return true,
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(name)) => match to.ports.get(name) {
            Some(n) => i32::from(*n),
            None => return false,
        },
    };
    let last = q.end_port.unwrap_or(first);
    (first..=last).contains(&i32::from(port))
}

fn in_block(block: &IPBlock, ip: IpAddr) -> bool {
    in_cidr(&block.cidr, ip) && !block.except.iter().flatten().any(|c| in_cidr(c, ip))
}

/// Whether IP lies in CIDR (`10.0.0.0/8`, `fd00::/8`); a malformed CIDR holds nothing.
fn in_cidr(cidr: &str, ip: IpAddr) -> bool {
    let Some((net, bits)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return false;
    };
    let (net, ip, width) = match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => (u128::from(n.to_bits()), u128::from(i.to_bits()), 32),
        (IpAddr::V6(n), IpAddr::V6(i)) => (n.to_bits(), i.to_bits(), 128),
        _ => return false,
    };
    if bits > width {
        return false;
    }
    let shift = width - bits;
    shift >= 128 || (net >> shift) == (ip >> shift)
}
