//! One generated case: a base (examples/minimal or examples/quickstart) with 1 to 4 subtrees
//! replaced or inserted, at hand-picked positions (pod templates, volumes and their mounts,
//! slurmConf, configFiles, partitions' options, topology, labels, ...) or at a position reached by
//! a random walk down the schema, then mostly repaired of what makes it invalid for reasons no
//! policy is about.

use serde_json::{Value as Json, json};
use slurmops::cluster::yaml;

use super::paths::{Seg, get_at, parse_path, set_at, show_path};
use super::rng::Rng;
use super::schema::Schema;

const BASES: &[(&str, &str)] = &[
    (
        "examples/minimal",
        include_str!("../../../examples/minimal/cluster.yaml"),
    ),
    (
        "examples/quickstart",
        include_str!("../../../examples/quickstart/cluster.yaml"),
    ),
];

/// The bases a case starts from, by name, as JSON.
pub(super) fn bases() -> Vec<(&'static str, Json)> {
    BASES
        .iter()
        .map(|(name, text)| {
            let tree = yaml::parse(text).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            (*name, yaml_to_json(&tree))
        })
        .collect()
}

/// A YAML tree as JSON: plain scalars that read as booleans, integers or null are those.
fn yaml_to_json(n: &yaml::Node) -> Json {
    match &n.value {
        yaml::Value::Scalar { text, plain } => {
            if *plain {
                match &**text {
                    "true" => return json!(true),
                    "false" => return json!(false),
                    "" | "~" | "null" => return Json::Null,
                    t => {
                        if let Ok(i) = t.parse::<i64>() {
                            return json!(i);
                        }
                    }
                }
            }
            json!(text.to_string())
        }
        yaml::Value::Seq(items) => Json::Array(items.iter().map(yaml_to_json).collect()),
        yaml::Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.text.to_string(), yaml_to_json(v)))
                .collect(),
        ),
    }
}

/// Positions worth mutating (numbers are indexes: an index past the end appends).
const TARGETS: &[&str] = &[
    "metadata.labels",
    "metadata.annotations",
    "spec.images",
    "spec.images.registry",
    "spec.images.slurmd",
    "spec.imagePullSecrets",
    "spec.priorityClassName",
    "spec.nodeSets.0.podTemplate",
    "spec.nodeSets.0.podTemplate.env",
    "spec.nodeSets.0.podTemplate.extraContainers",
    "spec.nodeSets.0.podTemplate.initContainers",
    "spec.nodeSets.0.podTemplate.securityContext",
    "spec.nodeSets.0.podTemplate.labels",
    "spec.nodeSets.0.podTemplate.annotations",
    "spec.nodeSets.0.podTemplate.hostNetwork",
    "spec.nodeSets.0.volumes",
    "spec.nodeSets.0.volumeMounts",
    "spec.nodeSets.0.volumeClaimTemplates",
    "spec.nodeSets.0.containerSecurityContext",
    "spec.nodeSets.0.serviceAccountName",
    "spec.nodeSets.0.image",
    "spec.nodeSets.0.privileged",
    "spec.nodeSets.0.gpus",
    "spec.nodeSets.0.imex",
    "spec.nodeSets.1",
    "spec.controller.podTemplate",
    "spec.controller.podTemplate.env",
    "spec.controller.podTemplate.extraContainers",
    "spec.controller.slurmConf",
    "spec.controller.configFiles",
    "spec.controller.scripts",
    "spec.controller.healthCheck",
    "spec.controller.persistence",
    "spec.restapi.podTemplate",
    "spec.restapi.podTemplate.env",
    "spec.accounting",
    "spec.accounting.podTemplate",
    "spec.accounting.slurmdbdConf",
    "spec.accounting.database",
    "spec.loginSets.0",
    "spec.loginSets.0.podTemplate",
    "spec.loginSets.0.volumes",
    "spec.loginSets.0.volumeMounts",
    "spec.loginSets.0.containerSecurityContext",
    "spec.partitions.0.options",
    "spec.partitions.1",
    "spec.topology",
    "spec.clusterName",
    "spec.networkPolicy",
];

/// Components whose pods take volumes and mounts.
const POD_OWNERS: &[&str] = &["spec.nodeSets.0", "spec.loginSets.0"];

/// Where a random walk down the schema ends, from the root.
fn random_path(schema: &Schema, rng: &mut Rng, doc: &Json) -> Vec<Seg> {
    // Below spec (or metadata): apiVersion and kind have one valid value each.
    let top = if rng.chance(0.9) { "spec" } else { "metadata" };
    let mut path = vec![Seg::Key(top.into())];
    let mut s = &schema.root["properties"][top];
    let mut here = doc.get(top);
    for depth in 1..8 {
        if depth >= 2 && rng.chance(0.3) {
            break;
        }
        let st = schema.structural(s);
        let seg = if let Some(props) = st.get("properties").and_then(Json::as_object) {
            let keys: Vec<&String> = props.keys().collect();
            let k = (*rng.pick(&keys)).clone();
            s = &props[&k];
            Seg::Key(k)
        } else if let Some(items) = st.get("items") {
            let len = here.and_then(Json::as_array).map_or(0, Vec::len);
            s = items;
            Seg::Index(rng.below(len + 1))
        } else {
            break;
        };
        here = here.and_then(|h| match &seg {
            Seg::Key(k) => h.get(k.as_str()),
            Seg::Index(i) => h.get(*i),
        });
        path.push(seg);
    }
    path
}

/// One generated case: the base it started from, what was changed, the document.
pub(super) struct Case {
    pub(super) base: &'static str,
    pub(super) changes: Vec<String>,
    pub(super) doc: Json,
}

/// Generates the list entries on PATH that DOC lacks whole (a login set gets its name), so
/// that a mutation below one is not invalid for that alone.
fn make_parents(schema: &Schema, rng: &mut Rng, doc: &mut Json, path: &[Seg]) {
    for n in 1..path.len() {
        if matches!(path[n - 1], Seg::Index(_)) && get_at(doc, &path[..n]).is_none() {
            let hint = match n.checked_sub(2).map(|i| &path[i]) {
                Some(Seg::Key(k)) => k.clone(),
                _ => String::new(),
            };
            if let Some(s) = schema.at(&path[..n]) {
                let fresh = schema.generate(rng, s, &hint, 0);
                set_at(doc, &path[..n], fresh);
            }
        }
    }
}

/// Mends some of what makes a generated document invalid for reasons no policy is about:
/// mounts of volumes not declared, partitions and topologies naming no NodeSet, a topology on a
/// Slurm release without it.
fn repair(rng: &mut Rng, doc: &mut Json) {
    let Some(spec) = doc.get_mut("spec").and_then(Json::as_object_mut) else {
        return;
    };
    for list in ["nodeSets", "loginSets"] {
        for x in spec
            .get_mut(list)
            .and_then(Json::as_array_mut)
            .into_iter()
            .flatten()
        {
            repair_mounts(rng, x);
        }
    }
    let node_sets: Vec<Json> = spec
        .get("nodeSets")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.get("name").cloned())
        .collect();
    for p in spec
        .get_mut("partitions")
        .and_then(Json::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(o) = p.as_object_mut() {
            o.insert("nodeSets".into(), json!(["ALL"]));
        }
    }
    if let Some(t) = spec.get_mut("topology").and_then(Json::as_object_mut) {
        for k in ["block", "tree"] {
            if let Some(b) = t.get_mut(k).and_then(Json::as_object_mut) {
                b.insert("nodeSets".into(), Json::Array(node_sets.clone()));
            }
        }
        spec.insert("slurmVersion".into(), json!("25.11"));
    }
}

/// Mounts of COMPONENT (a NodeSet or login set) name its volumes: none without volumes, an
/// undeclared one renamed to a random volume.
fn repair_mounts(rng: &mut Rng, component: &mut Json) {
    let volumes: Vec<String> = component
        .get("volumes")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Json::as_str).map(String::from))
        .collect();
    if let Some(mounts) = component
        .get_mut("volumeMounts")
        .and_then(Json::as_array_mut)
    {
        if volumes.is_empty() {
            mounts.clear();
        }
        for m in mounts.iter_mut().filter_map(Json::as_object_mut) {
            let known = m
                .get("name")
                .and_then(Json::as_str)
                .is_some_and(|n| volumes.iter().any(|v| v == n));
            if !known {
                m.insert("name".into(), json!(rng.pick(&volumes)));
            }
        }
    }
}

pub(super) fn generate_case(schema: &Schema, bases: &[(&'static str, Json)], seed: u64) -> Case {
    let mut rng = Rng(seed);
    let (base, doc) = rng.pick(bases);
    let mut doc = doc.clone();
    let mut changes = Vec::new();
    // 1 to 4 changes, fewer more often: each is a chance to be invalid.
    let changes_n = *rng.pick(&[1usize, 1, 1, 1, 2, 2, 2, 3, 3, 4]);
    for _ in 0..changes_n {
        let roll = rng.below(10);
        if roll < 2 {
            set_volumes_and_mounts(schema, &mut rng, &mut doc, &mut changes);
            continue;
        }
        let path = if roll < 8 {
            parse_path(TARGETS[rng.below(TARGETS.len())])
        } else {
            random_path(schema, &mut rng, &doc)
        };
        let Some(sub) = schema.at(&path) else {
            continue;
        };
        make_parents(schema, &mut rng, &mut doc, &path);
        let hint = match path.last() {
            Some(Seg::Key(k)) => k.clone(),
            _ => String::new(),
        };
        let v = schema.generate(&mut rng, sub, &hint, 0);
        changes.push(format!("{} = {}", show_path(&path), v));
        set_at(&mut doc, &path, v);
    }
    if rng.chance(0.85) {
        repair(&mut rng, &mut doc);
    }
    Case { base, changes, doc }
}

/// Volumes and mounts of them on a NodeSet or a login set, named alike, so that some validate.
fn set_volumes_and_mounts(
    schema: &Schema,
    rng: &mut Rng,
    doc: &mut Json,
    changes: &mut Vec<String>,
) {
    let owner = rng.pick(POD_OWNERS);
    let vpath = parse_path(&format!("{owner}.volumes"));
    let vs = schema.at(&vpath).expect("volumes in the schema");
    let volumes = schema.generate(rng, vs, "volumes", 1);
    let names: Vec<String> = volumes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Json::as_str).map(String::from))
        .collect();
    let mpath = parse_path(&format!("{owner}.volumeMounts"));
    let ms = schema.at(&mpath).expect("volumeMounts in the schema");
    let mut mounts = schema.generate(rng, ms, "volumeMounts", 1);
    if let Some(a) = mounts.as_array_mut() {
        for (i, m) in a.iter_mut().enumerate() {
            if let (Some(n), Some(o)) = (names.get(i % names.len().max(1)), m.as_object_mut()) {
                o.insert("name".into(), json!(n));
            }
        }
    }
    changes.push(format!("{} = {}", show_path(&vpath), volumes));
    changes.push(format!("{} = {}", show_path(&mpath), mounts));
    make_parents(schema, rng, doc, &vpath);
    set_at(doc, &vpath, volumes);
    set_at(doc, &mpath, mounts);
}
