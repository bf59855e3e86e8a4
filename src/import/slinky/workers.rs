//! The workers' part of a Slinky import: NodeSets (size from their container's resources,
//! features, weight and GPU type from their node line, volumes, placement, update pace) and
//! partitions (their own, and a NodeSet's `partition`).

use serde_json::{Map, Value as Json, json};

use super::{Images, conf, ignored, needs, path, placement, volumes_and_env};
use crate::import::Outcome;
use crate::import::values::Values;

/// `Key=Value` pairs of a node line (`extraConf` of a NodeSet).
fn node_line(text: &str) -> Vec<(String, String)> {
    text.split_whitespace()
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn node_sets(v: &Values, images: &Images) -> Vec<Json> {
    let mut out = Vec::new();
    for name in v.keys(&["nodesets"]) {
        let base = ["nodesets", name.as_str()];
        let to = format!("spec.nodeSets[{name}]");
        if v.read(&path(&base, &["enabled"])) == Some(Json::Bool(false)) {
            v.tell(&base, ignored("disabled"));
            continue;
        }
        v.tell(&path(&base, &["enabled"]), Outcome::Mapped(to.clone()));
        let mut n = Map::new();
        n.insert("name".into(), name.clone().into());
        let per_node = v.text(&path(&base, &["scalingMode"])).as_deref() == Some("DaemonSet");
        v.tell(
            &path(&base, &["scalingMode"]),
            Outcome::Mapped(format!("{to}.replicas")),
        );
        let replicas = v.map(&path(&base, &["replicas"]), &format!("{to}.replicas"));
        n.insert(
            "replicas".into(),
            match (per_node, replicas) {
                (true, _) => "perNode".into(),
                (false, Some(r)) => r,
                (false, None) => 1.into(),
            },
        );
        if let Some(i) = images.of(v, &path(&base, &["slurmd", "image"]), "slurmd") {
            n.insert("image".into(), i.into());
        }
        // A worker's size from its container's resources (limits, else requests).
        let res = v.map(
            &path(&base, &["slurmd", "resources"]),
            &format!("{to}.cpu, .memory, .gpus"),
        );
        let amount = |k: &str| {
            res.as_ref().and_then(|r| {
                r.pointer(&format!("/limits/{}", k.replace('/', "~1")))
                    .or_else(|| r.pointer(&format!("/requests/{}", k.replace('/', "~1"))))
                    .map(|x| x.as_str().map(String::from).unwrap_or(x.to_string()))
            })
        };
        if let Some(c) = amount("cpu") {
            n.insert("cpu".into(), c.into());
        }
        if let Some(m) = amount("memory") {
            n.insert("memory".into(), m.into());
        }
        let mut gpus = amount("nvidia.com/gpu")
            .and_then(|g| g.parse::<u32>().ok())
            .map(|c| json!({"count": c}));
        // The node line: features, weight, GPU type.
        let extra = conf(v, &base, &format!("{to}.features, .weight, .gpus"));
        let mut rest = Vec::new();
        let text = |x: &Json| x.as_str().map(String::from).unwrap_or(x.to_string());
        for (k, val) in extra.iter().map(|(k, x)| (k.clone(), text(x))) {
            match k.as_str() {
                "Features" => {
                    n.insert(
                        "features".into(),
                        val.split(',')
                            .map(|f| Json::from(f.to_string()))
                            .collect::<Vec<_>>()
                            .into(),
                    );
                }
                "Weight" => {
                    if let Ok(w) = val.parse::<u32>() {
                        n.insert("weight".into(), w.into());
                    }
                }
                "Gres" => {
                    // gpu:TYPE:COUNT
                    let parts: Vec<&str> = val.split(':').collect();
                    if let ["gpu", t, c] = parts.as_slice() {
                        gpus = Some(json!({"count": c.parse::<u32>().unwrap_or(0), "type": t}));
                    } else {
                        rest.push(format!("{k}={val}"));
                    }
                }
                _ => rest.push(format!("{k}={val}")),
            }
        }
        if !rest.is_empty() {
            v.note(
                &path(&base, &["extraConf"]),
                Outcome::Needs(format!(
                    "node line settings slurmops derives itself or does not take: {}",
                    rest.join(" ")
                )),
            );
        }
        if let Some(mut g) = gpus {
            if g.get("type").is_none() {
                v.note(
                    &path(&base, &["slurmd", "resources"]),
                    needs("GPUs without a type (no Gres=gpu:TYPE:N in the node line): the cluster.yaml says `gpu`; name the model, e.g. h100"),
                );
                g["type"] = "gpu".into();
            }
            n.insert("gpus".into(), g);
        }
        volumes_and_env(v, &base, "slurmd", &to, &mut n);
        // Its size is cpu, memory and gpus (above): slurmops derives the container's resources.
        placement(v, &base, None, &to, &mut n);
        let pace = path(
            &base,
            &["updateStrategy", "rollingUpdate", "maxUnavailable"],
        );
        match v.map(&pace, &format!("{to}.update.maxUnavailable")) {
            Some(m) => {
                n.insert("update".into(), json!({"maxUnavailable": m}));
            }
            None => v.note(
                &pace,
                Outcome::Default("Slinky's chart rolls 25% of a NodeSet at once, slurmops 1 worker: the import keeps slurmops's".into()),
            ),
        }
        if v.text(&path(&base, &["updateStrategy", "type"])).as_deref() == Some("OnDelete") {
            v.tell(&path(&base, &["updateStrategy", "type"]), needs("OnDelete: slurmops rolls every change, draining first; pause it with spec.policy.suspend"));
        }
        v.tell(
            &path(&base, &["updateStrategy", "scheduledUpdate"]),
            needs("scheduled updates: use update.window with spec.policy.maintenanceWindows"),
        );
        if v.read(&path(&base, &["partition", "enabled"])) == Some(Json::Bool(true)) {
            v.tell(
                &path(&base, &["partition", "enabled"]),
                Outcome::Mapped(format!("spec.partitions[{name}]")),
            );
        }
        for (k, why) in [
            (
                "pinToNode",
                "slurmops spreads workers one per Kubernetes node; pin them with nodeSelector or affinity",
            ),
            (
                "taintKubeNodes",
                "slurmops does not taint nodes: taint them yourself and add tolerations",
            ),
            (
                "oversubscribeNode",
                "slurmops runs one worker per Kubernetes node",
            ),
        ] {
            if v.read(&path(&base, &[k])) == Some(Json::Bool(true)) {
                v.tell(&path(&base, &[k]), needs(why));
            }
        }
        if v.read(&path(&base, &["ssh", "enabled"])) == Some(Json::Bool(true)) {
            v.tell(&path(&base, &["ssh", "enabled"]), needs("sshd in workers: slurmops has none; users reach workers through Slurm (srun) from login sets"));
        }
        let padding = v.read(&path(&base, &["ordinalPadding"]));
        if padding
            .as_ref()
            .and_then(Json::as_u64)
            .is_some_and(|p| p > 0)
        {
            v.tell(
                &path(&base, &["ordinalPadding"]),
                needs("padded ordinals change node names: slurmops names workers NODESET-ORDINAL"),
            );
        }
        out.push(n.into());
    }
    if out.is_empty() {
        v.note(
            &["nodesets"],
            needs("no NodeSet is enabled (the chart's defaults make none): the cluster.yaml has `workers` with 0 replicas; describe your workers there"),
        );
        out.push(json!({"name": "workers", "replicas": 0}));
    }
    out
}

pub(super) fn partitions(v: &Values, node_sets: &[String]) -> Vec<Json> {
    let mut out = Vec::new();
    let mut one = |name: &str, base: &[&str], sets: Json| {
        let to = format!("spec.partitions[{name}]");
        let mut p = Map::new();
        p.insert("name".into(), name.into());
        p.insert("nodeSets".into(), sets);
        let mut options = conf(v, base, &format!("{to}.options"));
        if let Some(Json::Object(m)) = v.map(&path(base, &["configMap"]), &format!("{to}.options"))
        {
            options.extend(m);
        }
        if let Some(t) = v.map_text(&path(base, &["config"]), &format!("{to}.options")) {
            options.extend(node_line(&t).into_iter().map(|(k, x)| (k, Json::from(x))));
        }
        if let Some(d) = options.remove("Default") {
            p.insert(
                "default".into(),
                matches!(d.as_str(), Some("YES" | "yes")).into(),
            );
        }
        if let Some(t) = options.remove("MaxTime") {
            p.insert(
                "maxTime".into(),
                t.as_str().map(String::from).unwrap_or(t.to_string()).into(),
            );
        }
        options.remove("Nodes");
        if options.get("State").and_then(Json::as_str) == Some("UP") {
            options.remove("State");
        }
        if !options.is_empty() {
            p.insert("options".into(), options.into());
        }
        out.push(Json::from(p));
    };
    for name in v.keys(&["partitions"]) {
        let base = ["partitions", name.as_str()];
        if v.read(&path(&base, &["enabled"])) == Some(Json::Bool(false)) {
            v.tell(&base, ignored("disabled"));
            continue;
        }
        v.tell(
            &path(&base, &["enabled"]),
            Outcome::Mapped(format!("spec.partitions[{name}]")),
        );
        let sets = v
            .map(
                &path(&base, &["nodesets"]),
                &format!("spec.partitions[{name}].nodeSets"),
            )
            .unwrap_or(json!(["ALL"]));
        // Slinky's partitions and NodeSets share one namespace of names; a NodeSet that is gone
        // (disabled) cannot be named.
        let sets: Vec<Json> = sets
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| {
                s.as_str() == Some("ALL")
                    || s.as_str().is_some_and(|s| node_sets.iter().any(|n| n == s))
            })
            .cloned()
            .collect();
        if sets.is_empty() {
            v.note(&base, needs("its NodeSets are all disabled: left out"));
            continue;
        }
        one(&name, &base, sets.into());
    }
    // A NodeSet's own partition (`partition.enabled`).
    for name in node_sets {
        let base = ["nodesets", name.as_str(), "partition"];
        if v.read(&path(&base, &["enabled"])) == Some(Json::Bool(true)) {
            one(name, &base, json!([name]));
        }
    }
    if out.is_empty() && !node_sets.is_empty() {
        v.note(
            &["partitions"],
            Outcome::Default(
                "no partition is enabled: the import adds `all` with every NodeSet, the default"
                    .into(),
            ),
        );
        out.push(json!({"name": "all", "nodeSets": ["ALL"], "default": true}));
    }
    one_default(v, &mut out);
    out
}

/// Several partitions marked `Default=YES` (an overlay's beside the chart's `all`): slurmctld
/// takes the last one slurm.conf lists, so the cluster.yaml marks that one only.
fn one_default(v: &Values, out: &mut [Json]) {
    let marked: Vec<usize> = (0..out.len())
        .filter(|i| out[*i]["default"] == Json::Bool(true))
        .collect();
    let [_, .., last] = marked.as_slice() else {
        return;
    };
    let names: Vec<&str> = marked
        .iter()
        .filter_map(|i| out[*i]["name"].as_str())
        .collect();
    v.note(
        &["partitions"],
        Outcome::Default(format!(
            "{} partitions are marked Default=YES ({}): slurmctld takes the last slurm.conf lists, {}; the cluster.yaml marks only it default (set `default: true` on the one you mean)",
            names.len(),
            names.join(", "),
            names.last().copied().unwrap_or_default()
        )),
    );
    for i in marked.iter().filter(|i| *i != last) {
        out[*i]["default"] = Json::Bool(false);
    }
}
