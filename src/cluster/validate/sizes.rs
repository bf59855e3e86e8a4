//! The bounds on the sizes of cluster.yaml's lists and maps (NodeSets, partitions, checks,
//! features, metadata, slurm.conf settings), told before the typed cluster is made of the file
//! and again on the typed spec, so that no file within the parser's limits makes validation
//! quadratic.

use super::super::diag::{Finding, Path};
use super::super::types::*;
use super::Validator;

/// Most entries of the lists whose entries are checked against one another (which NodeSets a
/// check covers, in which partition each sits): past them those checks are not made (a finding
/// says so), so that no file within the parser's limits makes validation quadratic.
const MAX_NODE_SETS: usize = 1_000;
const MAX_PARTITIONS: usize = 1_000;
const MAX_ACTIVE_CHECKS: usize = 100;
/// Most labels, and most annotations, of `metadata` (each is put on every rendered object: 150,000
/// labels made the rendering of one commit 400 MB).
const MAX_METADATA: usize = 256;
/// Most features of a NodeSet or of a check (Slurm features: a few per node).
const MAX_FEATURES: usize = 256;
/// Most settings of a slurm.conf or slurmdbd.conf map, and most items of one setting's list.
const MAX_SLURM_KEYS: usize = 1_000;
pub(super) const MAX_SLURM_ITEMS: usize = 1_000;
/// Most extra config files (`controller.configFiles`).
const MAX_CONFIG_FILES: usize = 100;

/// The lists checked against one another, with their bounds: (path under spec, bound, what).
const LISTS: [(&str, usize, &str); 3] = [
    ("nodeSets", MAX_NODE_SETS, "NodeSets"),
    ("partitions", MAX_PARTITIONS, "partitions"),
    ("policy.activeChecks", MAX_ACTIVE_CHECKS, "active checks"),
];

/// A finding for each of the LISTS (COUNTS: their lengths) past its bound, under SPEC.
fn lists_over(counts: [usize; 3], spec: &Path) -> Vec<Finding> {
    LISTS
        .iter()
        .zip(counts)
        .filter(|((_, max, _), n)| n > max)
        .map(|((at, max, what), n)| {
            let path = at.split('.').fold(spec.clone(), |p, k| p.key(k));
            Finding::new(path, format!("{n} {what}; slurmops takes at most {max}")).hint(
                "split the cluster, or merge entries: the rest of spec is not checked until then",
            )
        })
        .collect()
}

/// The lists of VALUE (cluster.yaml as JSON) past their bounds, told before the typed cluster is
/// made of it: 20,000 NodeSets would be tens of MB typed, only to be refused.
pub fn oversized(value: &serde_json::Value) -> Vec<Finding> {
    let spec = &value["spec"];
    let len = |at: &str| {
        at.split('.')
            .fold(spec, |v, k| &v[k])
            .as_array()
            .map_or(0, Vec::len)
    };
    let counts = [len(LISTS[0].0), len(LISTS[1].0), len(LISTS[2].0)];
    let mut out = lists_over(counts, &Path::root().key("spec"));
    for at in ["labels", "annotations"] {
        let n = value["metadata"][at].as_object().map_or(0, |m| m.len());
        if n > MAX_METADATA {
            let path = Path::root().key("metadata").key(at);
            out.push(
                Finding::new(path, format!("{n} {at}; slurmops takes at most {MAX_METADATA} (each goes on every object it renders)"))
                    .hint("keep the cluster-wide ones here, and put the others on the objects that need them"),
            );
        }
    }
    out.extend(kubernetes_metadata_limits(&value["metadata"]));
    out.extend(maps_over(spec));
    if out.is_empty() {
        out.extend(super::super::budget::over_budget(value));
    }
    out
}

/// The maps of SPEC (as JSON) past their bounds: the slurm.conf and slurmdbd.conf settings
/// (render merges each into the generated ones by comparison) and the extra config files
/// (Slurm serves a few configless), told before the typed cluster is made of them.
fn maps_over(spec: &serde_json::Value) -> Vec<Finding> {
    let spec_path = Path::root().key("spec");
    let mut maps: Vec<(Path, &serde_json::Value, usize, &str)> = vec![
        (
            spec_path.key("controller").key("slurmConf"),
            &spec["controller"]["slurmConf"],
            MAX_SLURM_KEYS,
            "set the parameters that differ from Slurm's defaults (`man slurm.conf` lists a few hundred in all)",
        ),
        (
            spec_path.key("accounting").key("slurmdbdConf"),
            &spec["accounting"]["slurmdbdConf"],
            MAX_SLURM_KEYS,
            "set the parameters that differ from Slurm's defaults (`man slurmdbd.conf`)",
        ),
        (
            spec_path.key("controller").key("configFiles"),
            &spec["controller"]["configFiles"],
            MAX_CONFIG_FILES,
            "Slurm serves a few files configless: keep those slurmctld serves",
        ),
    ];
    for (i, part) in spec["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        maps.push((
            spec_path.key("partitions").index(i).key("options"),
            &part["options"],
            MAX_SLURM_KEYS,
            "set the partition options that differ from Slurm's defaults (`man slurm.conf`, PARTITION CONFIGURATION)",
        ));
    }
    maps.into_iter()
        .filter_map(|(at, map, max, hint)| {
            let n = map.as_object().map_or(0, |m| m.len());
            (n > max).then(|| {
                Finding::new(at, format!("{n} entries; slurmops takes at most {max}")).hint(hint)
            })
        })
        .collect()
}

/// Kubernetes' own limits on the labels and annotations `metadata` puts on every rendered object
/// (the API server refuses an object past them): a label value of at most 63 characters, all of
/// an object's annotations at most 256 KiB.
fn kubernetes_metadata_limits(metadata: &serde_json::Value) -> Vec<Finding> {
    let mut out = Vec::new();
    let at = |k: &str| Path::root().key("metadata").key(k);
    if let Some(labels) = metadata["labels"].as_object() {
        let long = labels
            .iter()
            .find(|(_, v)| v.as_str().is_some_and(|v| v.len() > 63));
        if let Some((k, v)) = long {
            let n = v.as_str().map_or(0, str::len);
            out.push(
                Finding::new(
                    at("labels").key(k),
                    format!("a label value of {n} bytes; Kubernetes takes at most 63"),
                )
                .hint("put long text in an annotation"),
            );
        }
    }
    if let Some(annotations) = metadata["annotations"].as_object() {
        let bytes: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if bytes > 256 * 1024 {
            out.push(
                Finding::new(
                    at("annotations"),
                    format!(
                        "{bytes} bytes of annotations; Kubernetes takes at most 262144 on an object"
                    ),
                )
                .hint("keep annotations short: each goes on every object slurmops renders"),
            );
        }
    }
    out
}

impl Validator {
    /// Whether the lists checked against one another are within their bounds (else a finding
    /// per list past its bound, and the spec is not checked further).
    pub(super) fn sizes(&mut self, s: &ClusterSpec, p: &Path) -> bool {
        let counts = [
            s.node_sets.len(),
            s.partitions.len(),
            s.policy.active_checks.len(),
        ];
        let over = lists_over(counts, p);
        let mut within = over.is_empty();
        for f in over {
            self.push(f);
        }
        let features = s
            .node_sets
            .iter()
            .enumerate()
            .map(|(i, n)| (n.features.len(), p.key("nodeSets").index(i)))
            .chain(s.policy.active_checks.iter().enumerate().map(|(i, c)| {
                (
                    c.features.len(),
                    p.key("policy").key("activeChecks").index(i),
                )
            }));
        for (n, at) in features {
            if n > MAX_FEATURES {
                within = false;
                self.err(
                    at.key("features"),
                    format!("{n} features; slurmops takes at most {MAX_FEATURES}"),
                    "list the features jobs select on: the rest of spec is not checked until then",
                );
            }
        }
        within
    }
}
