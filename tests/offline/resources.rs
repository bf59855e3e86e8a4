//! docs/cluster-yaml.md's table "What each pod asks of its node", held against what slurmops
//! renders: a cluster.yaml that sizes nothing gets the table's requests, limits and QoS classes,
//! and no pod of any example is BestEffort.

use serde_json::Value;
use slurmops::cluster::load;
use slurmops::render::render;

/// A cluster with every component and nothing sized, but the NodeSet `sized`.
const BARE: &str = r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {name: c, namespace: slurm}
spec:
  slurmVersion: "24.11"
  auth:
    slurmKey: {name: k, key: k}
    jwtKey: {name: j, key: j}
  loginSets:
    - name: users
      replicas: 1
  nodeSets:
    - {name: bare, replicas: 1}
    - {name: sized, replicas: 1, cpu: "2", memory: 4Gi}
  partitions:
    - {name: p, nodeSets: [ALL], default: true}
  accounting:
    enabled: true
    database:
      user: slurm
      password: {name: db, key: password}
      inCluster: {storage: 20Gi}
"#;

struct Row {
    component: String,
    container: String,
    requests: String,
    limit: String,
    qos: String,
}

fn table() -> Vec<Row> {
    let doc = std::fs::read_to_string("docs/cluster-yaml.md").unwrap();
    let section = doc
        .split("## What each pod asks of its node")
        .nth(1)
        .expect("docs/cluster-yaml.md has the section");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| Component"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<String> = l
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            Row {
                component: cells[0].clone(),
                container: cells[1].trim_end_matches(" (init)").to_string(),
                requests: cells[2].clone(),
                limit: cells[3].clone(),
                qos: cells[4].clone(),
            }
        })
        .collect()
}

/// Every pod template of OBJECTS, with its component label and its name.
fn pods(objects: &[slurmops::render::Object]) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for o in objects {
        let b = &o.body;
        let spec = b
            .pointer("/spec/template/spec")
            .or_else(|| b.pointer("/template/spec"))
            .or_else(|| b.pointer("/spec/jobTemplate/spec/template/spec"));
        let Some(spec) = spec else { continue };
        let labels = b
            .pointer("/spec/template/metadata/labels")
            .or_else(|| b.pointer("/template/metadata/labels"))
            .or_else(|| b.pointer("/spec/jobTemplate/spec/template/metadata/labels"))
            .cloned()
            .unwrap_or_default();
        let component = labels["app.kubernetes.io/component"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        out.push((component, o.name.clone(), spec.clone()));
    }
    out
}

fn containers(pod: &Value) -> Vec<&Value> {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|k| pod[k].as_array())
        .flatten()
        .collect()
}

/// The pod's QoS class, as the kubelet computes it: Guaranteed when every container limits
/// CPU and memory with requests equal (a request left out is the limit); BestEffort when none
/// asks or limits anything; else Burstable.
fn qos(pod: &Value) -> &'static str {
    let cs = containers(pod);
    let asks = |c: &Value| {
        ["requests", "limits"].iter().any(|k| {
            c["resources"][k]
                .as_object()
                .is_some_and(|m| m.contains_key("cpu") || m.contains_key("memory"))
        })
    };
    if !cs.iter().any(|c| asks(c)) {
        return "BestEffort";
    }
    let guaranteed = cs.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = &c["resources"]["limits"][r];
            let request = &c["resources"]["requests"][r];
            !limit.is_null() && (request.is_null() || request == limit)
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[test]
fn a_cluster_that_sizes_nothing_gets_the_documented_requests_limits_and_qos_classes() {
    let c = load("cluster.yaml", BARE).unwrap_or_else(|d| panic!("{d:#?}"));
    let r = render(&c);
    let pods = pods(&r.objects);
    let rows = table();
    assert!(rows.len() >= 8, "the table has {} rows", rows.len());
    for row in &rows {
        let of_component: Vec<_> = pods.iter().filter(|p| p.0 == row.component).collect();
        assert!(!of_component.is_empty(), "no pod of {}", row.component);
        for (_, name, pod) in of_component {
            let c = containers(pod)
                .into_iter()
                .find(|c| c["name"] == row.container.as_str())
                .unwrap_or_else(|| panic!("{name} has no container {}", row.container));
            let res = &c["resources"];
            let sized = name == "sized";
            let (cpu, memory, limit, class) = if sized {
                // The NodeSet's own amounts, as requests and limits: Guaranteed.
                ("2", "4Gi", "4Gi", "Guaranteed")
            } else {
                let (cpu, memory) = row
                    .requests
                    .rsplit_once(", ")
                    .map(|(a, b)| (a.rsplit(' ').nth(1).unwrap_or(a), b))
                    .unwrap();
                let cpu = cpu.trim_end_matches(" CPU");
                let class = if row.qos.contains("else ") {
                    row.qos.rsplit("else ").next().unwrap()
                } else {
                    row.qos.as_str()
                };
                let limit = if row.limit.starts_with("the NodeSet") {
                    "none"
                } else {
                    row.limit.as_str()
                };
                (cpu, memory, limit, class)
            };
            assert_eq!(
                res["requests"]["cpu"], cpu,
                "{name}/{}: {res}",
                row.container
            );
            assert_eq!(
                res["requests"]["memory"], memory,
                "{name}/{}: {res}",
                row.container
            );
            match limit {
                "none" => assert!(res["limits"]["memory"].is_null(), "{name}: {res}"),
                l => assert_eq!(res["limits"]["memory"], l, "{name}: {res}"),
            }
            assert!(
                res["limits"]["cpu"].is_null() || sized,
                "{name}: a CPU limit: {res}"
            );
            assert_eq!(qos(pod), class, "{name}'s QoS class");
        }
    }
}

#[test]
fn no_pod_of_any_example_is_best_effort() {
    for entry in std::fs::read_dir("examples").unwrap() {
        let dir = entry.unwrap().path();
        let f = dir.join("cluster.yaml");
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let c = load(&f.display().to_string(), &text).unwrap();
        let r = render(&c);
        let pods = pods(&r.objects);
        assert!(!pods.is_empty(), "{}", f.display());
        for (component, name, pod) in &pods {
            assert_ne!(qos(pod), "BestEffort", "{} {component} {name}", f.display());
        }
    }
}
