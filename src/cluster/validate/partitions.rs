//! Checks of `spec.partitions`: names, one default, the NodeSets they list, time limits,
//! options their own fields set, and topology.

use std::collections::BTreeSet;

use super::super::diag::Path;
use super::super::types::*;
use super::{Known, Validator, grammar};

impl Validator {
    pub(super) fn partitions(&mut self, s: &ClusterSpec, p: &Path) {
        if s.partitions.is_empty() {
            self.err(
                p.clone(),
                "a cluster needs at least one partition",
                "add e.g. {name: all, nodeSets: [ALL], default: true}",
            );
        }
        let names = Known::new(s.node_sets.iter().map(|n| n.name.as_str()));
        let mut seen = BTreeSet::new();
        let mut defaults = 0;
        for (i, part) in s.partitions.iter().enumerate() {
            let pp = p.index(i);
            let name_ok = !part.name.is_empty()
                && part.name.len() <= 64
                && part
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !name_ok {
                self.err(
                    pp.key("name"),
                    format!("{:?} is not a usable partition name", part.name),
                    "use letters, digits, '-' and '_'",
                );
            }
            if !seen.insert(part.name.as_str()) {
                self.err(
                    pp.key("name"),
                    format!("partition {:?} is defined twice", part.name),
                    "names must be unique",
                );
            }
            defaults += usize::from(part.default);
            if part.node_sets.is_empty() {
                self.err(
                    pp.key("nodeSets"),
                    "a partition needs at least one NodeSet",
                    "list NodeSets, or [ALL]",
                );
            }
            for (j, r) in part.node_sets.iter().enumerate() {
                if r != "ALL" && !names.contains(r) {
                    self.unknown_ref(pp.key("nodeSets").index(j), "NodeSet", r, &names);
                }
            }
            if let Some(t) = part
                .max_time
                .as_deref()
                .filter(|t| !grammar::is_time_limit(t))
            {
                self.err(
                    pp.key("maxTime"),
                    format!("{t:?} is not a Slurm time limit"),
                    "use minutes, HH:MM:SS, D-HH:MM:SS or UNLIMITED",
                );
            }
            for k in part.options.keys() {
                // Compared as Slurm reads keys, without case.
                if ["Nodes", "Default", "MaxTime", "PartitionName", "Topology"]
                    .iter()
                    .any(|own| own.eq_ignore_ascii_case(k))
                {
                    self.err(
                        pp.key("options").key(k),
                        format!("{k} is set by the partition's own field"),
                        "use nodeSets, default, maxTime or topology",
                    );
                }
            }
            if let Some(kind) = part.topology
                && !s.topology.as_ref().is_some_and(|t| t.has(kind))
            {
                self.err(
                    pp.key("topology"),
                    format!("spec.topology.{} is not set", kind.key()),
                    format!(
                        "set spec.topology.{}, or remove the partition's topology",
                        kind.key()
                    ),
                );
            }
            self.slurm_conf_map(&part.options, &pp.key("options"), false);
        }
        if defaults > 1 {
            self.err(
                p.clone(),
                format!("{defaults} partitions are marked default"),
                "mark exactly one partition default: true",
            );
        }
    }
}
