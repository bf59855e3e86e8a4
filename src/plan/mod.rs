//! `plan`: what changing the cluster from one rendering (or from nothing) to another will do,
//! as Kubernetes object changes and in Slurm's terms (config diffs, partitions, which NodeSets
//! roll and therefore drain). Pure: two renderings in, a [`Plan`] out.

mod checks;
pub mod format;
pub mod sides;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value as Json;
use similar::TextDiff;

use crate::cluster::types::{ClusterFile, NodeSet};
use crate::cluster::values::{IntOrPercent, Replicas};
use crate::cluster::window::ControlPlaneWindow;
use crate::render::{Object, Rendered};

/// One side of a plan: a cluster.yaml and what it renders to.
pub struct Side<'a> {
    pub cluster: &'a ClusterFile,
    pub rendered: &'a Rendered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Replace,
    Delete,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Replace => "replace",
            Action::Delete => "delete",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub action: Action,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Unified diff of the object's YAML (secret values masked).
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileDiff {
    pub file: String,
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scale {
    pub node_set: String,
    pub from: Replicas,
    pub to: Replicas,
    /// slurmops makes the pods: a scale-in takes idle workers, whatever their ordinals.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub any_idle: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Roll {
    pub node_set: String,
    /// None for a perNode NodeSet: one per matching Kubernetes node, known in the cluster only.
    pub workers: Option<u32>,
    /// Resolved for a fixed count; a perNode NodeSet's as written (`25%` of its live workers).
    pub max_unavailable: IntOrPercent,
    /// Which parts of the pod template changed (e.g. `image`, `args`).
    pub because: Vec<String>,
    /// The workers replaced and validated first, when the NodeSet has a canary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryStep>,
    /// The maintenance windows the rollout waits for, when the NodeSet asks for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowStep>,
}

/// A rollout that waits for a maintenance window, in the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowStep {
    /// `required` or `preferred`.
    pub mode: String,
    /// Each window as written: `0 2 * * Sat for 4h (UTC)`.
    pub windows: Vec<String>,
    /// The next window [start, end) as UNIX seconds, once a time is given (`at`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<(i64, i64)>,
    /// The time zone of the schedule that names `next` (the text tells the window in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// The plan's time, when it is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<i64>,
    /// The live queue's pending jobs that may run on the NodeSet's workers (`plan --cluster`):
    /// the reservation holds back those that would still run when the window opens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingJobs>,
}

/// Pending jobs of the partitions holding a NodeSet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingJobs {
    /// Those whose time limit (or none) would still run when the window opens, were they to
    /// start at the plan's time: the reservation keeps them off the NodeSet's workers.
    pub held_back: usize,
    pub pending: usize,
    pub partitions: Vec<String>,
}

/// A rollout's canary in the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CanaryStep {
    pub replicas: u32,
    /// The canaries by name, once the live cluster is known (`plan --cluster`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// How the validation is named: "the built-in gpu check", "its inline script", ...
    pub check: String,
    /// One job on each canary, or one on all of them.
    pub per_node: bool,
    pub timeout: String,
    /// How long a replaced canary may take to be Ready and registered before it fails.
    pub ready_timeout: String,
}

/// The plan in Slurm's terms.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SlurmSummary {
    pub config_diffs: Vec<FileDiff>,
    pub partitions_added: Vec<String>,
    pub partitions_removed: Vec<String>,
    pub node_sets_added: Vec<String>,
    /// Removed NodeSets: all their workers are drained, then their objects pruned.
    pub node_sets_removed: Vec<String>,
    /// NodeSets whose pods change: each worker is drained, then replaced.
    pub node_sets_rolled: Vec<Roll>,
    pub scaled: Vec<Scale>,
    pub autoscale_changes: Vec<String>,
    /// Active checks added, changed or removed, in words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// slurmctld's pod template changes: the controller restarts.
    pub controller_restarts: bool,
    /// The slurm.conf settings that restart it (a reconfigure cannot change them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restart_because: Vec<String>,
    /// Backup controllers running before and after the restart (`controller.ha.backups` of both
    /// revisions, the smaller): 0 means the scheduler is down while slurmctld restarts.
    pub backups_through_restart: u32,
    /// The new revision's controllers are behind one address (`controller.ha.serviceAddress`):
    /// slurmops replaces them, not their StatefulSet.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub one_address: bool,
    /// Config files change and slurmctld does not restart: its pod's `reconfigure` sidecar
    /// applies them in place (`scontrol reconfigure`) once the kubelet has updated them.
    pub controller_reconfigures: bool,
    /// NodeSets kept whose workers this change does not touch (with a controller restart, they
    /// pick the new configuration up from slurmctld without restarting).
    pub node_sets_untouched: Vec<String>,
    /// With a live cluster and Slurm: each node the change drains and the jobs running there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drains: Vec<NodeDrain>,
    /// With a live cluster and Slurm: the worker steps the controller's next pass takes (its
    /// own decisions, not a guess), after the object changes above.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub next_pass: Vec<Step>,
    /// `slurmVersion` changes: the in-place upgrade, in the order it is applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<Upgrade>,
    /// The slurmctld restart or the upgrade waits for a maintenance window
    /// (`policy.controlPlaneWindow: required`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_window: Option<WindowStep>,
    /// QOS, accounts and users: between two revisions, or against slurmdbd with a live Slurm.
    #[serde(skip_serializing_if = "crate::accounting::Diff::is_quiet")]
    pub accounting: crate::accounting::Diff,
}

/// A Slurm release change, as apply carries it out (or why it cannot).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Upgrade {
    pub from: String,
    pub to: String,
    /// The steps, each after the one before is healthy.
    pub steps: Vec<String>,
    /// Why apply refuses it (a downgrade, or further than Slurm upgrades in place), with the
    /// path that is allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Which part of the daemon's pass takes a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepBy {
    /// The controller: what `apply` and `rollout` do too.
    #[default]
    Controller,
    /// Worker sync (the daemon's pass, `slurmops sync`): labels, node health, drain requests.
    Sync,
    /// Autoscale (the daemon's pass, `slurmops autoscale`).
    Autoscale,
}

/// One step of the daemon's next pass on a NodeSet's workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub node_set: String,
    /// Who takes it. Only the controller's steps make a plan's exit code 2: sync and autoscale
    /// follow the cluster's state, not the change.
    pub by: StepBy,
    /// drain, delete, resume, create, topology, submit, cancel, hold, reserve, unreserve, label
    /// (worker sync's busy label), scale (autoscale); sync's and autoscale's steps say `sync:` or
    /// `autoscale:` in their detail.
    pub action: &'static str,
    /// The worker (node or pod), job or reservation it acts on.
    pub target: String,
    /// Why, in the controller's words (a drain reason, a bound node, the canary's nodes).
    pub detail: String,
}

/// A Slurm node a change drains, and what runs on it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeDrain {
    pub node: String,
    pub node_set: String,
    pub jobs: Vec<JobOnNode>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobOnNode {
    pub id: u64,
    pub user: String,
    /// Expected end, UNIX seconds (None: no time limit).
    pub end_time: Option<i64>,
}

impl SlurmSummary {
    /// Nothing happens on the Slurm side (untouched NodeSets are context, not a change).
    pub fn is_empty(&self) -> bool {
        let mut s = SlurmSummary {
            node_sets_untouched: Vec::new(),
            ..self.clone()
        };
        // Objects made by hand are context too: nothing happens to them.
        s.accounting.unmanaged.clear();
        // So is what sync and autoscale would do on their own.
        s.next_pass.retain(|st| st.by == StepBy::Controller);
        s == SlurmSummary::default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub changes: Vec<Change>,
    pub slurm: SlurmSummary,
    pub warnings: Vec<String>,
}

impl Plan {
    pub fn has_changes(&self) -> bool {
        !self.changes.is_empty() || !self.slurm.is_empty()
    }
    pub fn count(&self, a: Action) -> usize {
        self.changes.iter().filter(|c| c.action == a).count()
    }
}

/// StatefulSet fields the API server refuses to change in place.
pub const IMMUTABLE_STS_FIELDS: &[&str] = &[
    "volumeClaimTemplates",
    "selector",
    "serviceName",
    "podManagementPolicy",
];

const MASK: &str = "(sensitive value hidden)";

/// Secret values never reach a plan: each is replaced by a marker that still changes when the
/// value does (a short digest), so that a changed key shows as changed.
fn masked(o: &Object) -> Json {
    let mut body = o.body.clone();
    if o.kind == "Secret" {
        for field in ["data", "stringData"] {
            if let Some(Json::Object(map)) = body.get_mut(field) {
                for v in map.values_mut() {
                    let digest = crate::render::pod::checksum(&v.to_string());
                    *v = Json::String(format!("{MASK} #{}", &digest[..8]));
                }
            }
        }
    }
    body
}

fn yaml(o: Option<&Object>) -> String {
    let to_yaml = |v: &Json| serde_saphyr::to_string(v).expect("JSON values serialize to YAML");
    // Only a Secret has values to mask: other objects are written as they are, not copied first.
    o.map(|o| match o.kind == "Secret" {
        true => to_yaml(&masked(o)),
        false => to_yaml(&o.body),
    })
    .unwrap_or_default()
}

pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

fn spec_field<'a>(o: &'a Object, field: &str) -> Option<&'a Json> {
    o.body.get("spec").and_then(|s| s.get(field))
}

pub fn plan(base: Option<Side>, head: Side) -> Plan {
    let empty = Rendered {
        objects: Vec::new(),
        slurm: BTreeMap::new(),
        scripts: BTreeMap::new(),
    };
    let old = base.as_ref().map_or(&empty, |b| b.rendered);
    let new = head.rendered;
    let mut changes = Vec::new();
    let mut warnings = Vec::new();
    // Borrowed keys: a lookup per object, thousands of them, copies no name.
    fn key(o: &Object) -> (&str, &str, &str) {
        (&o.kind, &o.namespace, &o.name)
    }
    let old_by_id: BTreeMap<_, &Object> = old.objects.iter().map(|o| (key(o), o)).collect();
    let new_ids: BTreeSet<_> = new.objects.iter().map(key).collect();
    // Workloads found unchanged here: the Slurm summary does not compare their templates again.
    let mut unchanged = BTreeSet::new();
    for o in &new.objects {
        let before = old_by_id.get(&key(o)).copied();
        if before.is_some_and(|b| same(&b.body, &o.body)) {
            if is_workload(o) {
                unchanged.insert(o.name.as_str());
            }
            continue;
        }
        let mut action = if before.is_some() {
            Action::Update
        } else {
            Action::Create
        };
        if let Some(b) = before
            && o.kind == "StatefulSet"
        {
            let fields: Vec<&str> = IMMUTABLE_STS_FIELDS
                .iter()
                .copied()
                .filter(|f| spec_field(b, f) != spec_field(o, f))
                .collect();
            if !fields.is_empty() {
                action = Action::Replace;
                warnings.push(immutable_warning(
                    o,
                    &fields,
                    head.cluster.spec.policy.allow_recreate,
                ));
            }
        }
        let diff = unified(
            &yaml(before),
            &yaml(Some(o)),
            &format!("a/{}", o.id()),
            &format!("b/{}", o.id()),
        );
        changes.push(Change {
            action,
            kind: o.kind.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            diff,
        });
    }
    // Deletions in reverse apply order, as prune will do them.
    for o in old
        .objects
        .iter()
        .rev()
        .filter(|o| !new_ids.contains(&key(o)))
    {
        let diff = unified(&yaml(Some(o)), "", &format!("a/{}", o.id()), "/dev/null");
        changes.push(Change {
            action: Action::Delete,
            kind: o.kind.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            diff,
        });
    }
    let slurm = slurm_summary(base.as_ref(), &head, (old, new), &unchanged);
    if !slurm.node_sets_removed.is_empty() {
        warnings.push(format!(
            "NodeSets removed: {}. Every worker is drained in Slurm first (running jobs finish), then its objects are pruned.",
            slurm.node_sets_removed.join(", ")
        ));
    }
    if !slurm.partitions_removed.is_empty() {
        warnings.push(format!(
            "partitions removed: {}. Pending jobs in them can no longer run; move them first (scontrol update job=ID partition=NEW).",
            slurm.partitions_removed.join(", ")
        ));
    }
    Plan {
        changes,
        slurm,
        warnings,
    }
}

fn immutable_warning(o: &Object, fields: &[&str], allow: bool) -> String {
    let what = format!(
        "StatefulSet {}/{}: {} cannot be changed in place",
        o.namespace,
        o.name,
        fields.join(", ")
    );
    if allow {
        format!(
            "{what}; apply will delete the StatefulSet with orphan propagation and create it again, so its pods keep running and are adopted (spec.policy.allowRecreate is true)"
        )
    } else {
        format!(
            "{what}; apply will refuse this change. Set spec.policy.allowRecreate: true to let apply recreate the StatefulSet (orphan propagation: pods keep running)"
        )
    }
}

fn template_diff(old: &Object, new: &Object) -> Vec<String> {
    let (Some(a), Some(b)) = (template(old), template(new)) else {
        return if template(old) == template(new) {
            Vec::new()
        } else {
            vec!["pod template".into()]
        };
    };
    if same(a, b) {
        return Vec::new();
    }
    fn container<'a>(v: &'a Json, f: &str) -> Option<&'a Json> {
        v.pointer("/spec/containers/0").and_then(|c| c.get(f))
    }
    let mut because: Vec<String> = [
        "image",
        "args",
        "command",
        "env",
        "resources",
        "volumeMounts",
        "securityContext",
    ]
    .into_iter()
    .filter(|f| container(a, f) != container(b, f))
    .map(|f| format!("container {f}"))
    .collect();
    for f in [
        "metadata",
        "spec/volumes",
        "spec/affinity",
        "spec/tolerations",
        "spec/nodeSelector",
        "spec/resourceClaims",
    ] {
        let p = format!("/{f}");
        if a.pointer(&p) != b.pointer(&p) {
            because.push(
                f.trim_start_matches("spec/")
                    .replace("metadata", "pod labels/annotations"),
            );
        }
    }
    if because.is_empty() {
        because.push("pod template".into());
    }
    because
}

/// JSON equality with a fast path: both sides come from the same renderer, so equal objects
/// almost always have their keys in the same order, and comparing in order avoids hashing every
/// key (the order-insensitive `==` decides when the orders differ).
fn same(a: &Json, b: &Json) -> bool {
    fn in_order(a: &Json, b: &Json) -> bool {
        match (a, b) {
            (Json::Object(x), Json::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y.iter())
                        .all(|((ka, va), (kb, vb))| ka == kb && in_order(va, vb))
            }
            (Json::Array(x), Json::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| in_order(p, q))
            }
            _ => a == b,
        }
    }
    in_order(a, b) || a == b
}

/// The pod template of a workload, or of a perNode NodeSet's PodTemplate.
fn template(o: &Object) -> Option<&Json> {
    o.body
        .pointer("/spec/template")
        .or_else(|| o.body.pointer("/template"))
}

/// The slurmctld StatefulSet.
fn ctl(r: &Rendered) -> Option<&Object> {
    r.objects.iter().find(|o| {
        o.kind == "StatefulSet"
            && o.body
                .pointer("/metadata/labels/app.kubernetes.io~1component")
                .and_then(Json::as_str)
                == Some("controller")
    })
}

/// A NodeSet's workload (or slurmctld's): a StatefulSet, or a perNode NodeSet's PodTemplate.
fn is_workload(o: &Object) -> bool {
    o.kind == "StatefulSet" || o.kind == "PodTemplate"
}

fn stateful_sets(r: &Rendered) -> BTreeMap<&str, &Object> {
    r.objects
        .iter()
        .filter(|o| is_workload(o))
        .map(|o| (o.name.as_str(), o))
        .collect()
}

/// Accounting between two revisions: the older revision stands for slurmdbd, every object in
/// it made by slurmops (the live plan reads slurmdbd instead).
fn offline_accounting(base: Option<&ClusterFile>, head: &ClusterFile) -> crate::accounting::Diff {
    use crate::accounting::{diff, model};
    let want = |c: &ClusterFile| {
        c.spec
            .accounting
            .enabled
            .then(|| model::desired(&c.spec.accounting))
    };
    let current = base.and_then(want).unwrap_or_default();
    let desired = want(head).unwrap_or_default();
    let cluster = crate::accounting::cluster_name(head);
    let inputs = diff::Inputs {
        cluster: &cluster,
        desired: &desired,
        current: &current,
        last: None,
        busy: &[],
    };
    diff::diff(&inputs, crate::accounting::mode(head))
}

/// The plan in Slurm's terms from OLD to NEW (rendered from BASE and HEAD); UNCHANGED names the
/// workloads whose objects are the same in both.
fn slurm_summary(
    base: Option<&Side>,
    head: &Side,
    (old, new): (&Rendered, &Rendered),
    unchanged: &BTreeSet<&str>,
) -> SlurmSummary {
    let mut s = SlurmSummary::default();
    let files: std::collections::BTreeSet<&String> = old
        .slurm
        .keys()
        .chain(new.slurm.keys())
        .chain(old.scripts.keys())
        .chain(new.scripts.keys())
        .collect();
    for f in files {
        let a = old
            .slurm
            .get(f)
            .or_else(|| old.scripts.get(f))
            .map_or("", String::as_str);
        let b = new
            .slurm
            .get(f)
            .or_else(|| new.scripts.get(f))
            .map_or("", String::as_str);
        if a != b {
            s.config_diffs.push(FileDiff {
                file: f.clone(),
                diff: unified(a, b, &format!("a/{f}"), &format!("b/{f}")),
            });
        }
    }
    let names =
        |c: Option<&ClusterFile>, f: fn(&ClusterFile) -> Vec<String>| c.map(f).unwrap_or_default();
    let parts = |c: &ClusterFile| c.spec.partitions.iter().map(|p| p.name.clone()).collect();
    let sets = |c: &ClusterFile| c.spec.node_sets.iter().map(|n| n.name.clone()).collect();
    let base_c = base.map(|b| b.cluster);
    let (old_parts, new_parts) = (names(base_c, parts), parts(head.cluster));
    s.partitions_added = new_parts
        .iter()
        .filter(|p| !old_parts.contains(p))
        .cloned()
        .collect();
    s.partitions_removed = old_parts
        .iter()
        .filter(|p| !new_parts.contains(p))
        .cloned()
        .collect();
    let (old_sets, new_sets) = (names(base_c, sets), sets(head.cluster));
    let (old_set_names, new_set_names): (BTreeSet<&String>, BTreeSet<&String>) =
        (old_sets.iter().collect(), new_sets.iter().collect());
    s.node_sets_added = new_sets
        .iter()
        .filter(|n| !old_set_names.contains(n))
        .cloned()
        .collect();
    s.node_sets_removed = old_sets
        .iter()
        .filter(|n| !new_set_names.contains(n))
        .cloned()
        .collect();
    s.accounting = offline_accounting(base_c, head.cluster);
    let Some(base_c) = base_c else { return s };
    // Indexed once: a cluster has hundreds of NodeSets and thousands of objects.
    let before_sets: BTreeMap<&str, &NodeSet> = base_c
        .spec
        .node_sets
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    let (old_sts, new_sts) = (stateful_sets(old), stateful_sets(new));
    for ns in &head.cluster.spec.node_sets {
        let Some(before) = before_sets.get(ns.name.as_str()).copied() else {
            continue;
        };
        if let (Some(a), Some(b)) = (old_sts.get(ns.name.as_str()), new_sts.get(ns.name.as_str())) {
            // An object unchanged has its template unchanged.
            let because = match a.kind == b.kind && unchanged.contains(b.name.as_str()) {
                true => Vec::new(),
                false => template_diff(a, b),
            };
            if !because.is_empty() {
                let (workers, max_unavailable) = match (before.replicas, ns.replicas) {
                    (Replicas::Count(a), Replicas::Count(b)) => (
                        Some(a.min(b)),
                        IntOrPercent::Int(ns.update.max_unavailable.resolve(b)),
                    ),
                    _ => (None, ns.update.max_unavailable),
                };
                s.node_sets_rolled.push(Roll {
                    node_set: ns.name.clone(),
                    workers,
                    max_unavailable,
                    because,
                    window: window_step(head.cluster, ns),
                    canary: ns.update.canary.as_ref().map(|c| CanaryStep {
                        replicas: c.replicas,
                        nodes: Vec::new(),
                        check: c.validate.describe(),
                        per_node: c.validate.nodes
                            == crate::cluster::canary::ValidateNodes::PerNode,
                        timeout: c.validate.timeout.to_string(),
                        ready_timeout: c.ready_timeout.to_string(),
                    }),
                });
            }
        }
        if !s.node_sets_rolled.iter().any(|r| r.node_set == ns.name) {
            s.node_sets_untouched.push(ns.name.clone());
        }
        if before.replicas != ns.replicas {
            s.scaled.push(Scale {
                node_set: ns.name.clone(),
                from: before.replicas,
                to: ns.replicas,
                any_idle: ns.managed(),
            });
        }
        if before.autoscale != ns.autoscale {
            let show = |a: &Option<crate::cluster::types::Autoscale>| match a {
                Some(a) => format!(
                    "min {} max {} ({} pending jobs per worker, scale down after {} idle)",
                    a.min, a.max, a.pending_jobs_per_replica, a.scale_down_delay
                ),
                None => "off".to_string(),
            };
            s.autoscale_changes.push(format!(
                "{}: autoscale {} -> {}",
                ns.name,
                show(&before.autoscale),
                show(&ns.autoscale)
            ));
        }
    }
    s.controller_restarts =
        matches!((ctl(old), ctl(new)), (Some(a), Some(b)) if !template_diff(a, b).is_empty());
    if s.controller_restarts {
        s.restart_because =
            crate::render::reconfigure::restart_changes(slurm_conf(old), slurm_conf(new));
        let backups = |c: &ClusterFile| c.spec.controller.ha.as_ref().map_or(0, |h| h.backups);
        s.backups_through_restart = backups(base_c).min(backups(head.cluster));
        s.one_address = crate::render::components::behind_one_address(&head.cluster.spec);
    }
    s.controller_reconfigures = !s.controller_restarts && ctld_files(old) != ctld_files(new);
    s.upgrade = upgrade(base_c, head.cluster);
    s.checks = checks::changes(base_c, head.cluster);
    let restart_waits =
        s.controller_restarts || s.upgrade.as_ref().is_some_and(|u| u.refused.is_none());
    if restart_waits
        && head.cluster.spec.policy.control_plane_window == ControlPlaneWindow::Required
    {
        s.control_plane_window = Some(windows_of(head.cluster, "required"));
    }
    s
}

fn window_step(c: &ClusterFile, ns: &NodeSet) -> Option<WindowStep> {
    let mode = match ns.update.window {
        crate::cluster::window::WindowMode::None => return None,
        crate::cluster::window::WindowMode::Required => "required",
        crate::cluster::window::WindowMode::Preferred => "preferred",
    };
    Some(windows_of(c, mode))
}

fn windows_of(c: &ClusterFile, mode: &str) -> WindowStep {
    WindowStep {
        mode: mode.into(),
        windows: c
            .spec
            .policy
            .maintenance_windows
            .iter()
            .map(|w| format!("{} for {} ({})", w.schedule, w.duration, w.time_zone))
            .collect(),
        next: None,
        time_zone: None,
        now: None,
        pending: None,
    }
}

/// Gives P's window steps the next window after NOW (the plan itself takes no clock).
pub fn at(p: &mut Plan, c: &ClusterFile, now: i64) {
    let windows = &c.spec.policy.maintenance_windows;
    let t = crate::cluster::window::timing(windows, now);
    let next = t.open.or(t.next);
    let zone = next.and_then(|n| crate::cluster::window::zone_of(windows, n, now));
    let rolls = p
        .slurm
        .node_sets_rolled
        .iter_mut()
        .filter_map(|r| r.window.as_mut());
    for w in rolls.chain(p.slurm.control_plane_window.as_mut()) {
        w.next = next;
        w.time_zone = zone.map(str::to_string);
        w.now = Some(now);
    }
    checks::at(&mut p.slurm.checks, c, now);
}

fn slurm_conf(r: &Rendered) -> &str {
    r.slurm.get("slurm.conf").map_or("", String::as_str)
}

/// The files slurmctld reads from its config directory (slurmdbd.conf is slurmdbd's).
fn ctld_files(r: &Rendered) -> Vec<(&String, &String)> {
    let mut f: Vec<(&String, &String)> = r
        .slurm
        .iter()
        .filter(|(k, _)| *k != "slurmdbd.conf")
        .collect();
    f.extend(r.scripts.iter());
    f
}

/// The upgrade from BASE's Slurm release to HEAD's, when they differ.
pub fn upgrade(base: &ClusterFile, head: &ClusterFile) -> Option<Upgrade> {
    use crate::cluster::release;
    let (from, to) = (&base.spec.slurm_version, &head.spec.slurm_version);
    if from == to {
        return None;
    }
    let s = &head.spec;
    let converts = release::converts(from, to);
    // Where the copies go before a conversion (none for a patch release: nothing converts).
    let copy = |what: &str, dir: &str| match s.backup.as_ref().and_then(|b| b.claim()) {
        Some(claim) if converts => format!(
            "a copy of {what} to PersistentVolumeClaim {claim} ({}/{dir}/) first, ",
            head.metadata.name
        ),
        _ => String::new(),
    };
    let mut steps = Vec::new();
    if s.accounting.enabled {
        steps.push(format!(
            "slurmdbd ({}its database is converted on start)",
            copy("its database", "accounting")
        ));
    }
    steps.push(format!(
        "slurmctld ({}state kept: running and pending jobs stay)",
        copy("its state", "slurmctld")
    ));
    let mut clients = Vec::new();
    if s.restapi.enabled {
        clients.push("slurmrestd");
    }
    if !s.login_sets.is_empty() {
        clients.push("login pods");
    }
    if !clients.is_empty() {
        steps.push(clients.join(" and "));
    }
    let sets: Vec<&str> = s.node_sets.iter().map(|n| n.name.as_str()).collect();
    if !sets.is_empty() {
        steps.push(format!(
            "workers, drain-before-replace (NodeSets {}): never newer than slurmctld",
            sets.join(", ")
        ));
    }
    Some(Upgrade {
        from: from.clone(),
        to: to.clone(),
        steps,
        refused: release::upgrade(from, to)
            .err()
            .map(|e| e.to_string())
            .or_else(|| crate::cluster::backup::refusal(s, from, to)),
    })
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn only_the_controller_s_steps_are_changes_sync_and_autoscale_follow_the_cluster() {
        let step = |by| super::Step {
            node_set: "w".into(),
            by,
            action: "label",
            target: "w-0".into(),
            detail: String::new(),
        };
        let mut s = super::SlurmSummary {
            next_pass: vec![step(super::StepBy::Sync), step(super::StepBy::Autoscale)],
            ..Default::default()
        };
        assert!(
            s.is_empty(),
            "a plan with only sync's and autoscale's steps exits 0"
        );
        s.next_pass.push(step(super::StepBy::Controller));
        assert!(!s.is_empty());
    }
    use serde_json::json;

    #[test]
    fn equality_ignores_key_order_and_sees_every_value() {
        let a = json!({"spec": {"replicas": 2, "template": {"x": [1, {"a": 1, "b": 2}]}}});
        let reordered = json!({"spec": {"template": {"x": [1, {"b": 2, "a": 1}]}, "replicas": 2}});
        let changed = json!({"spec": {"replicas": 2, "template": {"x": [1, {"a": 1, "b": 3}]}}});
        let longer = json!({"spec": {"replicas": 2, "template": {"x": [1, {"a": 1, "b": 2}, 3]}}});
        assert!(same(&a, &a.clone()));
        assert!(same(&a, &reordered));
        assert!(!same(&a, &changed));
        assert!(!same(&a, &longer));
    }
}
