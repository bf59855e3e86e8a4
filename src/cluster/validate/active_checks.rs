//! Checks of `policy.activeChecks`: unique names fit for job names and conditions, exactly one
//! script source, NodeSets that exist and sit in a partition (the job must run somewhere), a
//! schedule that parses, a cap and a timeout that can work.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::super::active_checks::{ActiveCheck, CheckBuiltin, CheckSpan};
use super::super::canary::SCRIPT_END;
use super::super::diag::{Path, clip};
use super::super::types::*;
use super::Validator;
use super::canary::MAX_SCRIPT_BYTES;

/// Longest check name: it goes in job names, drain reasons and condition types.
const MAX_NAME: usize = 40;

/// What the checks are held against, looked up at once: a check costs what it names, times
/// the NodeSets (bounded), not the NodeSets times the partitions.
struct Index<'a> {
    /// NodeSet names, and each NodeSet's features with its name.
    features: HashMap<&'a str, HashSet<&'a str>>,
    /// NodeSets a partition lists; whether one lists ALL.
    in_partition: HashSet<&'a str>,
    all_in_partition: bool,
    /// Checks a canary runs.
    canary_runs: HashSet<&'a str>,
    /// NodeSets in block topology.
    in_blocks: HashSet<&'a str>,
}

impl<'a> Index<'a> {
    fn of(s: &'a ClusterSpec) -> Self {
        let refs = s.partitions.iter().flat_map(|p| p.node_sets.iter());
        Index {
            features: s
                .node_sets
                .iter()
                .map(|n| {
                    let f = n
                        .features
                        .iter()
                        .map(|f| f.as_str())
                        .chain([n.name.as_str()]);
                    (n.name.as_str(), f.collect())
                })
                .collect(),
            in_partition: refs.clone().map(|r| r.as_str()).collect(),
            all_in_partition: refs.clone().any(|r| r == "ALL"),
            canary_runs: s
                .node_sets
                .iter()
                .filter_map(|n| n.update.canary.as_ref()?.validate.check.as_deref())
                .collect(),
            in_blocks: s
                .topology
                .iter()
                .flat_map(|t| t.block.iter())
                .flat_map(|b| b.node_sets.iter().map(|n| n.as_str()))
                .collect(),
        }
    }

    /// The NodeSets C covers, in order (`ActiveCheck::covers`, by lookups).
    fn covered<'s>(
        &'s self,
        c: &'s ActiveCheck,
        s: &'a ClusterSpec,
    ) -> impl Iterator<Item = &'a NodeSet> + 's {
        let listed: HashSet<&str> = c.node_sets.iter().map(|n| n.as_str()).collect();
        s.node_sets.iter().filter(move |n| {
            let has = &self.features[n.name.as_str()];
            (listed.is_empty() || listed.contains(n.name.as_str()))
                && c.features.iter().all(|f| has.contains(f.as_str()))
        })
    }
}

impl Validator {
    pub(super) fn active_checks(&mut self, s: &ClusterSpec, p: &Path) {
        let mut seen = BTreeSet::new();
        let index = Index::of(s);
        for (i, c) in s.policy.active_checks.iter().enumerate() {
            let cp = p.key("activeChecks").index(i);
            self.active_check(c, s, &index, &cp);
            if !seen.insert(c.name.as_str()) {
                self.err(
                    cp.key("name"),
                    format!("a second check is named {:?}", c.name),
                    "give each check its own name",
                );
            }
        }
    }

    fn active_check(&mut self, c: &ActiveCheck, s: &ClusterSpec, index: &Index, p: &Path) {
        let name_ok = !c.name.is_empty()
            && c.name.len() <= MAX_NAME
            && c.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !c.name.starts_with('-');
        if !name_ok {
            self.err(
                p.key("name"),
                format!("{:?} cannot name a check", c.name),
                format!("use lowercase letters, digits and '-', at most {MAX_NAME}, e.g. gpu-diag"),
            );
        }
        match (&c.builtin, &c.script) {
            (Some(_), Some(_)) | (None, None) => self.err(
                p.clone(),
                "a check needs exactly one of builtin and script",
                "e.g. builtin: gpu, or script: with the check to run",
            ),
            (None, Some(text)) => self.check_script(text, &p.key("script")),
            _ => {}
        }
        if let Some(l) = c.level {
            if c.builtin != Some(CheckBuiltin::Gpu) {
                self.err(
                    p.key("level"),
                    "level is the gpu check's dcgmi diag level",
                    "remove it, or use builtin: gpu",
                );
            } else if !(1..=4).contains(&l) {
                self.err(
                    p.key("level"),
                    format!("dcgmi diag has no level {l}"),
                    "use 1 (quick) to 4 (longest)",
                );
            }
        }
        for (j, n) in c.node_sets.iter().enumerate() {
            if !index.features.contains_key(n.as_str()) {
                self.err(
                    p.key("nodeSets").index(j),
                    format!("no NodeSet is named {:?}", clip(n)),
                    "name a NodeSet of spec.nodeSets, or leave nodeSets out for every NodeSet",
                );
            }
        }
        let mut covers_one = false;
        for n in index.covered(c, s) {
            covers_one = true;
            if !index.all_in_partition && !index.in_partition.contains(n.name.as_str()) {
                self.err(
                    p.clone(),
                    format!(
                        "NodeSet {:?} is in no partition, so check {:?} cannot run there",
                        clip(&n.name),
                        clip(&c.name)
                    ),
                    "add the NodeSet to a partition in spec.partitions, or list only other NodeSets",
                );
            }
        }
        if !s.node_sets.is_empty() && !covers_one {
            let at = match c.features.is_empty() {
                true => p.key("nodeSets"),
                false => p.key("features"),
            };
            self.err(
                at,
                format!("check {:?} covers no NodeSet", c.name),
                "a NodeSet is covered when it is listed (or none is) and has every feature listed (its name counts)",
            );
        }
        let a_canary_runs_it = index.canary_runs.contains(c.name.as_str());
        if !c.on_register && c.schedule.is_none() && !a_canary_runs_it {
            self.err(
                p.clone(),
                format!("check {:?} never runs", c.name),
                "set onRegister: true, a schedule, or name it in a canary's validate.check",
            );
        }
        if let Some(Err(e)) = c.parsed_schedule() {
            let (field, hint) = if e.contains("time zone") {
                ("timeZone", "e.g. UTC or Europe/Paris")
            } else {
                (
                    "schedule",
                    "five fields, days by name, e.g. \"0 3 * * Sun\" (03:00 every Sunday)",
                )
            };
            self.err(p.key(field), e, hint);
        }
        self.span(c, s, index, p);
        if c.max_concurrent == 0 {
            self.err(
                p.key("maxConcurrent"),
                "a cap of 0 lets no check run",
                "use 1 or more",
            );
        }
        if c.timeout.as_secs() < 10 {
            self.err(
                p.key("timeout"),
                format!("{} is too short for any job to start and report", c.timeout),
                "use 10s or more, e.g. 10m",
            );
        }
        if c.min_value.is_some_and(|v| !v.is_finite()) {
            self.err(
                p.key("minValue"),
                "the threshold is not a number",
                "e.g. 350",
            );
        }
    }

    /// A check across nodes: scheduled only, a built-in that runs across nodes, and (`block`)
    /// NodeSets in block topology.
    fn span(&mut self, c: &ActiveCheck, s: &ClusterSpec, index: &Index, p: &Path) {
        if !c.across_nodes() {
            return;
        }
        let span = c.span.name();
        if c.on_register {
            self.err(
                p.key("onRegister"),
                format!("a check across nodes ({span}) cannot hold a new worker: it would wait for the other workers of its group to be free"),
                "set onRegister: false and give it a schedule; a per-node check (span: node) can hold new workers",
            );
        }
        let fits = match c.builtin {
            Some(CheckBuiltin::Gpu) => false,
            Some(CheckBuiltin::Ib) => c.span == CheckSpan::Pair,
            _ => true,
        };
        if !fits {
            let b = c.builtin.map_or("", |b| b.name());
            self.err(
                p.key("span"),
                format!("the built-in {b} check does not run across nodes as span {span}"),
                "gpu runs per node; ib runs per node or across a pair (span: pair); nccl runs per node, per pair or per block",
            );
        }
        if c.span != CheckSpan::Block {
            return;
        }
        for n in index.covered(c, s) {
            if !index.in_blocks.contains(n.name.as_str()) {
                self.err(
                    p.key("span"),
                    format!(
                        "NodeSet {:?} is not in block topology, so check {:?} finds no block there",
                        clip(&n.name),
                        clip(&c.name)
                    ),
                    "add it to spec.topology.block.nodeSets, or use span: pair",
                );
            }
        }
    }

    /// A script slurmops wraps into a job: not empty, not too long, without the wrapper's end.
    pub(super) fn check_script(&mut self, text: &str, p: &Path) {
        if text.trim().is_empty() {
            self.err(p.clone(), "the script is empty", "write the check to run");
        } else if text.len() > MAX_SCRIPT_BYTES {
            self.err(
                p.clone(),
                format!(
                    "the script has {} bytes, more than {MAX_SCRIPT_BYTES}",
                    text.len()
                ),
                "keep it short, or put it in the worker image and call it",
            );
        }
        if text.lines().any(|l| l.trim() == SCRIPT_END) {
            self.err(
                p.clone(),
                format!("the script contains the line {SCRIPT_END}, which ends it in the job"),
                "rename that line",
            );
        }
    }
}
