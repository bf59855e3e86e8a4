//! What `slurmops install --print` adds for a Prometheus Operator and a Grafana: with
//! `--prometheus-rule`, a `monitoring.coreos.com/v1` PrometheusRule whose groups are the rules
//! file's (`alerts/slurmops.rules.yaml`, built in: one copy of the rules); with
//! `--grafana-dashboard`, a ConfigMap holding the dashboard (`dashboards/slurmops.json`) with the
//! label the Grafana Helm chart's dashboard sidecar looks for.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value as Json, json};

use super::install::{Install, labels, meta};
use crate::cluster::yaml;

/// The alert rules, as `alerts/` ships them.
pub const RULES: &str = include_str!("../../alerts/slurmops.rules.yaml");
/// The Grafana dashboard, as `dashboards/` ships it.
pub const DASHBOARD: &str = include_str!("../../dashboards/slurmops.json");
/// The dashboard's key in its ConfigMap (the file the sidecar writes for Grafana).
pub const DASHBOARD_FILE: &str = "slurmops.json";
/// The value of the sidecar's label (`crate::vocab::LABEL_GRAFANA_DASHBOARD`) on the ConfigMap.
const SIDECAR_VALUE: &str = "1";

/// A YAML node as JSON, with YAML 1.2's core schema for plain scalars (null, booleans, numbers);
/// a quoted or block scalar is a string.
fn to_json(n: &yaml::Node) -> Json {
    match &n.value {
        _ if n.is_null() => Json::Null,
        yaml::Value::Scalar { text, plain: true } => match &**text {
            "true" | "True" | "TRUE" => Json::Bool(true),
            "false" | "False" | "FALSE" => Json::Bool(false),
            t => t
                .parse::<i64>()
                .map(Json::from)
                .ok()
                .or_else(|| {
                    t.parse::<f64>()
                        .ok()
                        .and_then(|f| f.is_finite().then_some(f.into()))
                })
                .unwrap_or_else(|| Json::String(t.to_string())),
        },
        yaml::Value::Scalar { text, .. } => Json::String(text.to_string()),
        yaml::Value::Seq(items) => Json::Array(items.iter().map(to_json).collect()),
        yaml::Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.text.to_string(), to_json(v)))
                .collect(),
        ),
    }
}

/// The rules file's `groups`.
pub fn rule_groups() -> Json {
    let tree = yaml::parse(RULES).expect("alerts/slurmops.rules.yaml is YAML");
    to_json(tree.get("groups").expect("the rules file has groups"))
}

/// The PrometheusRule of install I: the rules file's groups, in the daemon's namespace, with its
/// labels (typed here: k8s-openapi has no type for this CRD).
pub fn prometheus_rule(i: &Install) -> Json {
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": meta(i, &i.namespace),
        "spec": { "groups": rule_groups() },
    })
}

/// The ConfigMap `NAME-dashboard` holding the dashboard, labelled for Grafana's sidecar.
pub fn dashboard_config_map(i: &Install) -> Json {
    let mut metadata = meta(i, &i.namespace);
    metadata.name = Some(format!("{}-dashboard", i.name()));
    let mut l = labels(i);
    l.insert(
        crate::vocab::LABEL_GRAFANA_DASHBOARD.into(),
        SIDECAR_VALUE.into(),
    );
    metadata.labels = Some(l);
    let map = ConfigMap {
        metadata,
        data: Some(BTreeMap::from([(
            DASHBOARD_FILE.to_string(),
            DASHBOARD.to_string(),
        )])),
        ..ConfigMap::default()
    };
    serde_json::to_value(map).expect("typed objects serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install() -> Install {
        crate::daemon::install::tests::install()
    }

    /// The rules file read line by line, not as YAML: each rule's `alert`, `expr` (a block
    /// scalar's lines joined), `for`, and its labels' and annotations' `KEY: VALUE`, in order,
    /// quotes taken off.
    fn rule_lines(text: &str) -> Vec<(String, String)> {
        let unquote = |v: &str| v.trim().trim_matches('"').to_string();
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Vec::new();
        let mut n = 0;
        while n < lines.len() {
            let l = lines[n].trim_start().trim_start_matches("- ");
            n += 1;
            let Some((k, v)) = l.split_once(": ").or(l.strip_suffix(':').map(|k| (k, ""))) else {
                continue;
            };
            if l.starts_with('#') || matches!(k, "groups" | "name" | "rules") {
                continue;
            }
            if ["labels", "annotations"].contains(&k) {
                continue;
            }
            if v == "|" {
                let mut block = String::new();
                while n < lines.len() && lines[n].starts_with("          ") {
                    block.push_str(lines[n].trim_start());
                    block.push('\n');
                    n += 1;
                }
                out.push((k.to_string(), block));
            } else {
                out.push((k.to_string(), unquote(v)));
            }
        }
        out
    }

    /// The same walk over the rendered groups.
    fn rendered_lines(groups: &Json) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for g in groups.as_array().unwrap() {
            for r in g["rules"].as_array().unwrap() {
                for (k, v) in r.as_object().unwrap() {
                    match v {
                        Json::Object(m) => {
                            for (k, v) in m {
                                out.push((k.clone(), v.as_str().unwrap().to_string()));
                            }
                        }
                        v => out.push((k.clone(), v.as_str().unwrap().to_string())),
                    }
                }
            }
        }
        out
    }

    #[test]
    fn the_prometheus_rule_holds_the_rules_files_groups_in_the_daemons_namespace() {
        let file = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("alerts/slurmops.rules.yaml"),
        )
        .unwrap();
        let mut i = install();
        i.cluster = Some("a".into());
        let rule = prometheus_rule(&i);
        assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(rule["kind"], "PrometheusRule");
        assert_eq!(rule["metadata"]["name"], "slurmops-a");
        assert_eq!(rule["metadata"]["namespace"], i.namespace.as_str());
        assert_eq!(
            rule["metadata"]["labels"],
            serde_json::to_value(labels(&i)).unwrap()
        );
        let groups = &rule["spec"]["groups"];
        assert_eq!(groups.as_array().unwrap().len(), 1);
        assert_eq!(groups[0]["name"], "slurmops");
        let alerts = file.lines().filter(|l| l.contains("- alert: ")).count();
        assert!(alerts >= 13, "{alerts}");
        assert_eq!(groups[0]["rules"].as_array().unwrap().len(), alerts);
        let want = rule_lines(&file);
        assert!(want.len() >= alerts * 5, "{want:?}");
        assert_eq!(rendered_lines(groups), want);
    }

    #[test]
    fn the_dashboard_config_map_holds_the_dashboard_for_grafanas_sidecar_and_fits() {
        let file = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards/slurmops.json"),
        )
        .unwrap();
        let i = install();
        let map = dashboard_config_map(&i);
        assert_eq!(map["kind"], "ConfigMap");
        assert_eq!(map["metadata"]["name"], "slurmops-dashboard");
        assert_eq!(map["metadata"]["namespace"], i.namespace.as_str());
        let labels = &map["metadata"]["labels"];
        assert_eq!(labels["grafana_dashboard"], "1");
        assert_eq!(labels[crate::vocab::LABEL_MANAGED_BY], "slurmops");
        let held: Json = serde_json::from_str(map["data"][DASHBOARD_FILE].as_str().unwrap())
            .expect("the ConfigMap holds JSON");
        assert_eq!(held, serde_json::from_str::<Json>(&file).unwrap());
        // A ConfigMap holds at most 1 MiB.
        let size = serde_json::to_string(&map).unwrap().len();
        assert!(size < 1 << 20, "{size} bytes");
    }

    #[test]
    fn plain_scalars_read_as_yamls_core_schema_and_quoted_ones_as_strings() {
        let tree = yaml::parse("a: 1\nb: \"1\"\nc: true\nd: ~\ne: 1h\nf: [x, 2.5]\n").unwrap();
        assert_eq!(
            to_json(&tree),
            json!({"a": 1, "b": "1", "c": true, "d": null, "e": "1h", "f": ["x", 2.5]})
        );
    }
}
