use std::collections::BTreeMap;

use super::reach::{Network, Pod, Source};
use super::*;
use crate::render::names::LABEL_COMPONENT;

fn cluster(extra: &str) -> ClusterFile {
    crate::cluster::load("c.yaml", &cluster_text(extra)).unwrap()
}

fn cluster_text(extra: &str) -> String {
    format!(
        "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: c, namespace: slurm}}\nspec:\n  slurmVersion: \"24.11\"\n  auth:\n    slurmKey: {{name: k, key: k}}\n    jwtKey: {{name: j, key: j}}\n  nodeSets: [{{name: w, replicas: 1}}]\n  partitions: [{{name: p, nodeSets: [ALL]}}]\n{extra}"
    )
}

const FULL: &str = "  accounting:\n    enabled: true\n    database:\n      user: slurm\n      password: {name: db, key: pw}\n      inCluster: {storage: 1Gi}\n  loginSets: [{name: users, authorizedKeys: {name: keys, key: k}}]\n";

/// The labels of the pods C's workloads make, by component (as rendered: pod templates).
fn pods_of(c: &ClusterFile) -> BTreeMap<String, Pod> {
    let mut out = BTreeMap::new();
    for o in crate::render::render(c).objects {
        let labels = &o.body["spec"]["template"]["metadata"]["labels"];
        let Some(component) = labels[LABEL_COMPONENT].as_str() else {
            continue;
        };
        let labels: BTreeMap<String, String> = serde_json::from_value(labels.clone()).unwrap();
        let namespace = o.body["metadata"]["namespace"].as_str().unwrap();
        out.insert(
            component.to_string(),
            Pod {
                namespace: namespace.into(),
                labels,
                ..Pod::default()
            },
        );
    }
    out
}

#[test]
fn every_path_the_cluster_needs_is_open_and_the_rest_closed() {
    let c = cluster(FULL);
    let names = Names::new(&c);
    let net = Network::new(policies(&c, &names));
    let pods = pods_of(&c);
    let pod = |component: &str| {
        pods.get(component)
            .unwrap_or_else(|| panic!("{component} in {:?}", pods.keys()))
            .clone()
    };
    let from = |component: &str| Source::Pod(pod(component));
    let daemon = Source::Pod(Pod::new(
        "slurmops",
        &[
            ("app.kubernetes.io/name", "slurmops"),
            ("app.kubernetes.io/managed-by", "slurmops"),
        ],
    ));
    let stranger = Source::Pod(Pod::new("other", &[("app", "x")]));
    let outside = Source::Outside("203.0.113.7".parse().unwrap());
    // (from, to, port, allowed)
    let table: Vec<(&str, Source, &str, u16, bool)> = vec![
        ("slurmctld", from("controller"), "accounting", 6819, true),
        ("slurmrestd", from("restapi"), "accounting", 6819, true),
        ("sacct on login", from("login"), "accounting", 6819, true),
        ("slurmdbd", from("accounting"), "database", 3306, true),
        ("a worker", from("worker"), "controller", 6817, true),
        ("a login pod", from("login"), "controller", 6817, true),
        ("slurmrestd", from("restapi"), "controller", 6817, true),
        ("slurmctld", from("controller"), "worker", 6818, true),
        ("a worker (MPI)", from("worker"), "worker", 41000, true),
        ("a worker (srun I/O)", from("worker"), "login", 40000, true),
        ("the daemon", daemon.clone(), "restapi", 6820, true),
        ("outside (ssh)", outside.clone(), "login", 22, true),
        ("a stranger (ssh)", stranger.clone(), "login", 22, true),
        ("outside", outside.clone(), "database", 3306, false),
        ("a stranger", stranger.clone(), "database", 3306, false),
        ("slurmctld", from("controller"), "database", 3306, false),
        ("a worker", from("worker"), "database", 3306, false),
        ("outside", outside.clone(), "accounting", 6819, false),
        ("a stranger", stranger.clone(), "accounting", 6819, false),
        ("outside", outside.clone(), "controller", 6817, false),
        ("a stranger", stranger.clone(), "controller", 6817, false),
        ("a stranger", stranger.clone(), "restapi", 6820, false),
        (
            "the daemon (not its port)",
            daemon.clone(),
            "restapi",
            6817,
            false,
        ),
        ("outside", outside.clone(), "worker", 6818, false),
        ("a stranger", stranger.clone(), "worker", 6818, false),
        ("outside (not ssh)", outside.clone(), "login", 6818, false),
    ];
    let mut wrong = Vec::new();
    for (who, source, to, port, want) in &table {
        if net.allows(source, &pod(to), *port, "TCP") != *want {
            wrong.push(format!("{who} → {to}:{port} should be allowed: {want}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // One policy per component, each its own name.
    let named: Vec<_> = net
        .policies
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        named,
        [
            "c-controller",
            "c-accounting",
            "c-database",
            "c-restapi",
            "c-worker",
            "c-login"
        ]
    );
}

#[test]
fn namespaces_listed_reach_slurmrestd_and_slurmctld_s_metrics() {
    // slurmctld's metrics arrived in Slurm 25.11.
    let text = cluster_text(
        "  controller: {metrics: {enabled: true}}\n  networkPolicy: {restapiFromNamespaces: [dash], metricsFromNamespaces: [monitoring]}\n",
    )
    .replace("\"24.11\"", "\"25.11\"");
    let c = crate::cluster::load("c.yaml", &text).unwrap();
    let names = Names::new(&c);
    let net = Network::new(policies(&c, &names));
    let pods = pods_of(&c);
    let any = |ns: &str| Source::Pod(Pod::new(ns, &[("app", "x")]));
    assert!(net.allows(&any("dash"), &pods["restapi"], 6820, "TCP"));
    assert!(!net.allows(&any("dash"), &pods["controller"], 6817, "TCP"));
    assert!(net.allows(&any("monitoring"), &pods["controller"], 6817, "TCP"));
    assert!(!net.allows(&any("monitoring"), &pods["restapi"], 6820, "TCP"));
    // Without the metrics, the monitoring namespace reaches nothing.
    let off = cluster("  networkPolicy: {metricsFromNamespaces: [monitoring]}\n");
    let net = Network::new(policies(&off, &Names::new(&off)));
    assert!(!net.allows(&any("monitoring"), &pods["controller"], 6817, "TCP"));
}

#[test]
fn policies_are_rendered_unless_turned_off() {
    let names = Names::new(&cluster(""));
    // No accounting, no login sets: slurmctld, slurmrestd and the workers.
    assert_eq!(policies(&cluster(""), &names).len(), 3);
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

#[test]
fn the_evaluator_reads_selectors_peers_and_ports_as_kubernetes_does() {
    let np: NetworkPolicy = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "a"},
        "spec": {
            "podSelector": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["db"]}]},
            "ingress": [
                {"from": [{"podSelector": {"matchLabels": {"app": "web"}}}], "ports": [{"port": 5432}]},
                {"from": [{"namespaceSelector": {"matchLabels": {"team": "ops"}},
                           "podSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}}],
                 "ports": [{"port": 9000, "endPort": 9010, "protocol": "UDP"}, {"port": "metrics"}]},
                {"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}
            ]
        }
    }))
    .unwrap();
    let mut net = Network::new(vec![np]);
    net.namespace(
        "b",
        BTreeMap::from([("team".to_string(), "ops".to_string())]),
    );
    let mut db = Pod::new("a", &[("role", "db")]);
    db.ports.insert("metrics".into(), 9187);
    let pod = |ns: &str, l: &[(&str, &str)]| Source::Pod(Pod::new(ns, l));
    let ip = |s: &str| Source::Outside(s.parse().unwrap());
    let cases = [
        (pod("a", &[("app", "web")]), 5432, "TCP", true),
        (pod("a", &[("app", "web")]), 5433, "TCP", false),
        (pod("a", &[("app", "web")]), 5432, "UDP", false),
        // A podSelector alone: the policy's namespace only.
        (pod("b", &[("app", "web")]), 5432, "TCP", false),
        // Both selectors in one peer: both must match.
        (pod("b", &[("tier", "x")]), 9005, "UDP", true),
        (pod("b", &[("tier", "x")]), 9011, "UDP", false),
        (pod("b", &[("tier", "x")]), 9187, "TCP", true),
        (pod("b", &[("app", "web")]), 9187, "TCP", false),
        (pod("c", &[("tier", "x")]), 9187, "TCP", false),
        // An ipBlock and its exception; no ports: every port.
        (ip("10.2.3.4"), 1, "TCP", true),
        (ip("10.1.3.4"), 1, "TCP", false),
        (ip("192.0.2.1"), 1, "TCP", false),
    ];
    for (from, port, protocol, want) in cases {
        assert_eq!(
            net.allows(&from, &db, port, protocol),
            want,
            "{from:?} :{port}/{protocol}"
        );
    }
    // A pod no policy selects is not isolated; nor is one whose namespace has no policy.
    let open = Pod::new("a", &[("role", "web")]);
    assert!(net.allows(&ip("192.0.2.1"), &open, 1, "TCP"));
    assert!(net.allows(
        &ip("192.0.2.1"),
        &Pod::new("b", &[("role", "db")]),
        1,
        "TCP"
    ));
    // An Egress-only policy does not isolate for ingress; namespaceSelector {} is every pod.
    let egress: NetworkPolicy = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "e", "namespace": "a"},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"]}
    }))
    .unwrap();
    assert!(Network::new(vec![egress]).allows(&ip("192.0.2.1"), &open, 1, "TCP"));
    let any = Network::new(vec![policy_for(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            namespace: Some("a".into()),
            ..Default::default()
        },
        BTreeMap::new(),
        vec![rule(Some(vec![any_pod()]), Some(80))],
    )]);
    assert!(any.allows(&pod("z", &[]), &open, 80, "TCP"));
    assert!(!any.allows(&ip("10.0.0.1"), &open, 80, "TCP"));
}
