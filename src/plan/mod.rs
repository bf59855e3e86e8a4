//! `plan`: what changing the cluster from one rendering (or from nothing) to another will do,
//! as Kubernetes object changes and in Slurm's terms (config diffs, partitions, which NodeSets
//! roll and therefore drain). Pure: two renderings in, a [`Plan`] out.

mod checks;
pub mod format;
mod model;
mod object_diff;
pub mod sides;
mod slurm_summary;
mod upgrade;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value as Json;

pub use model::*;
pub use object_diff::{IMMUTABLE_STS_FIELDS, unified};
use object_diff::{immutable_warning, same, spec_field, yaml};
pub use slurm_summary::at;
use slurm_summary::slurm_summary;
pub use upgrade::upgrade;

use crate::render::{Object, Rendered};

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
