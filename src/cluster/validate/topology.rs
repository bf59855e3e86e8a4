//! Checks of `spec.topology`: a release whose slurmctld lets dynamic nodes join a topology,
//! a node label that is a Kubernetes label key, blocks and leaf switches that are label values
//! listed once, known NodeSets, each in at most one topology. Each of these is written into
//! Slurm's topology.yaml: a value with a line break, a quote or a comma would add to that file
//! what git never named (a topology of the pusher's), so each is checked as the type it is.

use std::collections::{BTreeSet, HashSet};

use super::super::diag::Path;
use super::super::release::Release;
use super::super::types::*;
use super::kubernetes_names::{is_label_key, is_label_value};
use super::{Known, Validator};

impl Validator {
    pub(super) fn topology(
        &mut self,
        t: &Topology,
        s: &ClusterSpec,
        version: Option<&Release>,
        p: &Path,
    ) {
        if let Some(r) = version.filter(|r| !r.block_topology) {
            let why = match r.version {
                "24.11" => {
                    "refuses blocks and switches of dynamic nodes that have not registered yet, and cannot put a registered dynamic node in one"
                }
                _ => "is not run by slurmops' tests (no Slurm of it here)",
            };
            self.err(
                p.clone(),
                format!(
                    "a topology needs Slurm 25.11 or later: Slurm {} {why}",
                    r.version
                ),
                "raise spec.slurmVersion to \"25.11\" or later, or remove spec.topology",
            );
        }
        if t.block.is_none() && t.tree.is_none() {
            self.err(
                p.clone(),
                "spec.topology sets neither block nor tree",
                "set block (NVLink domains) or tree (switches), or remove spec.topology",
            );
        }
        if let Some(b) = &t.block {
            self.block(b, s, &p.key("block"));
        }
        if let Some(tr) = &t.tree {
            self.tree(tr, s, &p.key("tree"));
        }
        if let (Some(b), Some(tr)) = (&t.block, &t.tree) {
            // Looked up, not searched: both lists are as long as a push makes them.
            let in_blocks: HashSet<&str> = b.node_sets.iter().map(String::as_str).collect();
            for (j, n) in tr.node_sets.iter().enumerate() {
                if in_blocks.contains(n.as_str()) {
                    self.err(
                        p.key("tree").key("nodeSets").index(j),
                        format!("NodeSet {n:?} is in the block topology too"),
                        "place each NodeSet in one topology",
                    );
                }
            }
        }
    }

    fn block(&mut self, b: &BlockTopology, s: &ClusterSpec, p: &Path) {
        if b.block_size == 0 {
            self.err(
                p.key("blockSize"),
                "blockSize must be 1 or more",
                "use the number of nodes per NVLink domain, e.g. 18",
            );
        }
        self.placed(
            &b.node_label,
            &b.blocks,
            &b.node_sets,
            s,
            p,
            (
                "block",
                "blocks",
                "nvidia.com/gpu.clique",
                "one per NVLink domain",
            ),
        );
    }

    fn tree(&mut self, t: &TreeTopology, s: &ClusterSpec, p: &Path) {
        self.placed(
            &t.node_label,
            &t.switches,
            &t.node_sets,
            s,
            p,
            (
                "switch",
                "switches",
                "a rack or leaf switch label",
                "one per leaf switch",
            ),
        );
        let root = format!("{TOPOLOGY_TREE}-root");
        for (j, v) in t.switches.iter().enumerate() {
            if *v == root {
                self.err(
                    p.key("switches").index(j),
                    format!("{v:?} is the name of the tree's root switch"),
                    "name the leaf switches otherwise",
                );
            }
        }
    }

    /// A topology's label, its units (blocks or switches) and its NodeSets. WORDS: (unit,
    /// units' key, an example label, how many units).
    fn placed(
        &mut self,
        label: &str,
        units: &[String],
        sets: &[String],
        s: &ClusterSpec,
        p: &Path,
        words: (&str, &str, &str, &str),
    ) {
        let (unit, key, example, how_many) = words;
        let names = Known::new(s.node_sets.iter().map(|n| n.name.as_str()));
        if label.trim().is_empty() {
            self.err(
                p.key("nodeLabel"),
                "nodeLabel is empty",
                format!("e.g. {example}"),
            );
        } else if !is_label_key(label) {
            self.err(
                p.key("nodeLabel"),
                format!(
                    "{:?} is not a Kubernetes label key (it is written into topology.yaml and matched against the labels of nodes)",
                    super::super::diag::clip(label)
                ),
                format!("write an optional DNS prefix and '/', then 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, e.g. {example}"),
            );
        }
        if sets.is_empty() {
            self.err(
                p.key("nodeSets"),
                format!("a {unit} topology needs at least one NodeSet"),
                format!("list the NodeSets placed in {key}"),
            );
        }
        for (j, r) in sets.iter().enumerate() {
            if !names.contains(r) {
                self.unknown_ref(p.key("nodeSets").index(j), "NodeSet", r, &names);
            }
        }
        if units.is_empty() {
            self.err(
                p.key(key),
                format!("a {unit} topology needs at least one {unit}"),
                format!("list the values of the {label} label, {how_many}"),
            );
        }
        let mut seen = BTreeSet::new();
        for (j, v) in units.iter().enumerate() {
            if !is_label_value(v) {
                self.err(
                    p.key(key).index(j),
                    format!(
                        "{:?} is not a Kubernetes label value",
                        super::super::diag::clip(v)
                    ),
                    format!("a {unit} is a value of nodeLabel on nodes and a Slurm {unit} name in topology.yaml: use 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (no spaces, line breaks, quotes, ',', ':', '=' or '#')"),
                );
            } else if !seen.insert(v) {
                self.err(
                    p.key(key).index(j),
                    format!("{unit} {v:?} is listed twice"),
                    format!("list each {unit} once"),
                );
            }
        }
    }
}
