//! A bound on what one cluster.yaml costs past the parser, estimated from its JSON before the
//! typed cluster or any object is made of it, in one walk linear in its size.
//!
//! Two things grow far past the text: a Kubernetes type is kilobytes in memory whatever its text
//! (a bare `{name: v}` volume is about 6.7 KB typed, so a 2.6 MB list of them took 1.1 GB), and
//! what render copies (cluster.yaml's `metadata` goes on every object it renders: 256 KiB of
//! annotations on the 2,000 objects of 1,000 NodeSets took 600 MB). A file whose estimate is
//! past [`MAX_RENDERED`] is refused at its largest contributor, with what to change.

use serde_json::{Map, Value};

use super::diag::{Finding, Path};

/// Most bytes of rendered objects and typed Kubernetes values one cluster.yaml may make
/// (estimated): a real cluster makes well under 1 MiB.
pub const MAX_RENDERED: usize = 16 << 20;

/// Objects slurmops renders whatever the spec (ConfigMaps, Services, the controller, slurmrestd,
/// the database, accounting, their PodDisruptionBudgets, a NetworkPolicy for each and for the
/// workers and the login pods, a ServiceMonitor), at most.
const FIXED_OBJECTS: usize = 34;
/// Objects per NodeSet (its StatefulSet or pods' template, its PodDisruptionBudget) and per login
/// set (its Deployment, its Service).
const OBJECTS_PER_SET: usize = 2;
/// What one rendered object costs besides what cluster.yaml puts in it (its generated pod
/// template, labels, probes, its JSON), at most.
const OBJECT_BYTES: usize = 6 << 10;
/// What a JSON value costs held in memory besides its text (the node, its map entry).
const NODE_BYTES: usize = 48;

/// Kubernetes types whose typed form costs far more than their text, by the key of the list
/// that holds them, and what one item costs typed (its text is added): a `Volume` holds every
/// volume source inline, a `Container` every probe and setting.
const TYPED: &[(&str, usize)] = &[
    ("volumes", 7 << 10),
    ("extraContainers", 4 << 10),
    ("initContainers", 4 << 10),
    ("volumeClaimTemplates", 4 << 10),
    ("volumeMounts", 512),
    ("env", 512),
    ("envFrom", 512),
    ("ports", 512),
    ("tolerations", 512),
    ("topologySpreadConstraints", 1 << 10),
];

/// Parts of spec that render makes no object of (slurmops keeps them through slurmrestd).
const NOT_RENDERED: &[&str] = &["qos", "accounts", "users"];

/// Findings when VALUE (cluster.yaml as JSON, within the parser's and the lists' limits) would
/// render, or be typed, past [`MAX_RENDERED`]: one, at the largest contributor.
pub fn over_budget(value: &Value) -> Vec<Finding> {
    let spec = &value["spec"];
    let sets = |k: &str| spec[k].as_array().map_or(0, Vec::len);
    let objects = FIXED_OBJECTS + OBJECTS_PER_SET * (sets("nodeSets") + sets("loginSets"));
    let meta = |k: &str| value["metadata"][k].as_object().map_or(0, map_cost);
    let (labels, annotations) = (meta("labels"), meta("annotations"));
    let mut walk = Walk::default();
    let root = Path::root().key("spec");
    if let Value::Object(m) = spec {
        for (k, v) in m {
            walk.at.push(Step::Key(k));
            match v {
                Value::Object(a) if k == "accounting" => {
                    for (ak, av) in a {
                        if !NOT_RENDERED.contains(&ak.as_str()) {
                            walk.at.push(Step::Key(ak));
                            walk.value(av, Some(ak));
                            walk.at.pop();
                        }
                    }
                }
                _ => walk.value(v, Some(k)),
            }
            walk.at.pop();
        }
    }
    let total = objects
        .saturating_mul(OBJECT_BYTES + labels + annotations)
        .saturating_add(walk.json)
        .saturating_add(walk.typed);
    if total <= MAX_RENDERED {
        return Vec::new();
    }
    let metadata = |k: &str| Path::root().key("metadata").key(k);
    let mut parts = vec![
        (
            objects.saturating_mul(annotations),
            metadata("annotations"),
            format!(
                "metadata.annotations, about {} on each of {objects} objects",
                kib(annotations)
            ),
            "keep metadata.annotations short (each goes on every object slurmops renders), or put them where they are needed (podTemplate.annotations)",
        ),
        (
            objects.saturating_mul(labels),
            metadata("labels"),
            format!(
                "metadata.labels, about {} on each of {objects} objects",
                kib(labels)
            ),
            "keep metadata.labels few (each goes on every object slurmops renders), or put them where they are needed (podTemplate.labels)",
        ),
        (
            objects.saturating_mul(OBJECT_BYTES),
            root.key("nodeSets"),
            format!("{objects} objects, 2 per NodeSet and login set"),
            "merge NodeSets that differ only in name (features tell workers apart)",
        ),
        (
            walk.json,
            root.clone(),
            format!("spec itself, {}", kib(walk.json)),
            "keep large content out of cluster.yaml: reference it (a ConfigMap or Secret of its own)",
        ),
    ];
    if let Some((cost, at)) = walk.largest {
        parts.push((
            cost,
            at.clone(),
            format!("{at}, about {} typed", kib(cost)),
            "each item of this list is a Kubernetes value of kilobytes: list fewer (share a volume, mount it at several paths)",
        ));
    }
    let (_, at, what, hint) = parts
        .into_iter()
        .max_by_key(|(cost, ..)| *cost)
        .expect("parts is not empty");
    vec![
        Finding::new(
            at,
            format!(
                "cluster.yaml would render to about {} of Kubernetes objects; slurmops renders at most {} per cluster.yaml (the largest part: {what})",
                kib(total),
                kib(MAX_RENDERED)
            ),
        )
        .hint(hint),
    ]
}

/// One step down from spec: a key or an index.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// What one walk found: the estimate in all, and its largest single list of typed items.
#[derive(Default)]
struct Walk<'a> {
    /// Text and JSON nodes of the rendered parts of spec.
    json: usize,
    /// What the typed lists add.
    typed: usize,
    /// The typed list costing most: (its cost, where it is).
    largest: Option<(usize, Path)>,
    /// Where the walk is, below spec (a path is made only for a new largest list).
    at: Vec<Step<'a>>,
}

impl<'a> Walk<'a> {
    /// Adds V (under key KEY, at `self.at`) and all it holds.
    fn value(&mut self, v: &'a Value, key: Option<&str>) {
        self.json = self.json.saturating_add(NODE_BYTES);
        match v {
            Value::String(s) => self.json = self.json.saturating_add(s.len()),
            Value::Array(items) => {
                let weight = key.and_then(|k| TYPED.iter().find(|(t, _)| *t == k));
                if let Some((_, w)) = weight {
                    let cost = items.len().saturating_mul(*w);
                    self.typed = self.typed.saturating_add(cost);
                    if self.largest.as_ref().is_none_or(|(c, _)| cost > *c) {
                        self.largest = Some((cost, self.path()));
                    }
                }
                for (i, item) in items.iter().enumerate() {
                    self.at.push(Step::Index(i));
                    self.value(item, None);
                    self.at.pop();
                }
            }
            Value::Object(m) => {
                for (k, item) in m {
                    self.json = self.json.saturating_add(k.len());
                    self.at.push(Step::Key(k));
                    self.value(item, Some(k));
                    self.at.pop();
                }
            }
            _ => {}
        }
    }

    /// The path of where the walk is.
    fn path(&self) -> Path {
        self.at
            .iter()
            .fold(Path::root().key("spec"), |p, s| match s {
                Step::Key(k) => p.key(k),
                Step::Index(i) => p.index(*i),
            })
    }
}

/// What V costs held as JSON: its text and its nodes.
fn cost(v: &Value) -> usize {
    NODE_BYTES.saturating_add(match v {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(cost).fold(0, usize::saturating_add),
        Value::Object(m) => map_cost(m),
        _ => 0,
    })
}

fn map_cost(m: &Map<String, Value>) -> usize {
    m.iter()
        .map(|(k, v)| k.len().saturating_add(cost(v)))
        .fold(0, usize::saturating_add)
}

/// N bytes in KiB or MiB, as people read them.
fn kib(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    } else {
        format!("{} KiB", n.div_ceil(1024))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(metadata: Value, spec: Value) -> Value {
        serde_json::json!({"metadata": metadata, "spec": spec})
    }

    #[test]
    fn a_small_cluster_is_within_the_budget() {
        let c = cluster(
            serde_json::json!({"name": "a", "labels": {"team": "hpc"}}),
            serde_json::json!({"nodeSets": [{"name": "cpu", "volumes": [{"name": "v", "emptyDir": {}}]}]}),
        );
        assert!(over_budget(&c).is_empty());
    }

    #[test]
    fn metadata_on_every_object_is_refused_at_metadata_annotations() {
        let sets: Vec<Value> = (0..1000)
            .map(|i| serde_json::json!({"name": format!("s{i}")}))
            .collect();
        let c = cluster(
            serde_json::json!({"annotations": {"a": "x".repeat(100 << 10)}}),
            serde_json::json!({ "nodeSets": sets }),
        );
        let f = over_budget(&c);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].path.to_string(), "metadata.annotations");
        assert!(
            f[0].message.contains("at most 16.0 MiB"),
            "{}",
            f[0].message
        );
        assert!(f[0].hint.as_deref().unwrap().contains("short"));
    }

    #[test]
    fn bare_volumes_are_refused_at_their_list() {
        let vols: Vec<Value> = (0..10_000)
            .map(|i| serde_json::json!({"name": format!("v{i}")}))
            .collect();
        let c = cluster(
            serde_json::json!({"name": "a"}),
            serde_json::json!({"nodeSets": [{"name": "a"}, {"name": "b", "volumes": vols}]}),
        );
        let f = over_budget(&c);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].path.to_string(), "spec.nodeSets[1].volumes");
        // Sidecars' mounts are found too, inside their container.
        let mounts: Vec<Value> = (0..40_000)
            .map(|i| serde_json::json!({"name": format!("v{i}"), "mountPath": "/m"}))
            .collect();
        let c = cluster(
            serde_json::json!({"name": "a"}),
            serde_json::json!({"loginSets": [{"name": "l", "podTemplate": {"extraContainers": [{"name": "s", "volumeMounts": mounts}]}}]}),
        );
        let f = over_budget(&c);
        assert_eq!(
            f[0].path.to_string(),
            "spec.loginSets[0].podTemplate.extraContainers[0].volumeMounts"
        );
    }

    #[test]
    fn accounting_objects_are_not_counted_as_rendered() {
        let users: Vec<Value> = (0..100_000)
            .map(|i| serde_json::json!({"name": format!("u{i}"), "accounts": [{"name": "a"}]}))
            .collect();
        let c = cluster(
            serde_json::json!({"name": "a"}),
            serde_json::json!({"accounting": {"enabled": true, "users": users}}),
        );
        assert!(over_budget(&c).is_empty());
    }
}
