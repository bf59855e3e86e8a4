//! One field manager per cluster. Daemons used to apply every cluster under one name,
//! `slurmops`; now each applies under `slurmops/NAME`. Server-side apply removes a field only
//! when no manager owns it any more, so an object still carrying the old name's entry would
//! keep, for good, every field git drops after the switch. The first apply under the new name
//! hands the old entry over (renamed, or merged into the cluster's own), in one write per
//! object that has it, checked against the object's resourceVersion, as kubectl's client-side
//! to server-side migration does. Objects that never had it cost nothing.

use futures::StreamExt;
use kube::api::DynamicObject;
use serde_json::{Value as Json, json};

use super::{ApplyError, Members, key, retry};
use crate::k8s::Connection;
use crate::vocab::MANAGER_APPLY;

/// Objects handed over at once.
const AT_ONCE: usize = 16;

/// Hands the old shared manager's entries of LIVE (the parent and every member) to MANAGER.
/// Returns how many objects were written.
pub(super) async fn hand_over(
    cluster: &Connection,
    live: &Members,
    manager: &str,
) -> Result<usize, ApplyError> {
    let parent = live
        .parent
        .as_ref()
        .map(|p| ("v1".to_string(), "ConfigMap".to_string(), p));
    let members = live.objects.iter().map(|(k, (api_version, o))| {
        let kind = k.split_once('/').map(|(kind, _)| kind).unwrap_or(k);
        (api_version.clone(), kind.to_string(), o)
    });
    let work: Vec<_> = parent
        .into_iter()
        .chain(members)
        .filter_map(|(api_version, kind, o)| {
            let fields = handed_over(o, manager)?;
            Some((api_version, kind, o, fields))
        })
        .collect();
    let n = work.len();
    let writes: Vec<_> = work
        .into_iter()
        .map(|(api_version, kind, o, fields)| {
            hand_one(cluster, api_version, kind, o, fields, manager)
        })
        .collect();
    let done: Vec<Result<(), ApplyError>> = futures::stream::iter(writes)
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    done.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(n)
}

/// Writes FIELDS as O's managedFields, if O is still at the resourceVersion read.
async fn hand_one(
    cluster: &Connection,
    api_version: String,
    kind: String,
    o: &DynamicObject,
    fields: Vec<Json>,
    manager: &str,
) -> Result<(), ApplyError> {
    let name = o.metadata.name.clone().unwrap_or_default();
    let ns = o.metadata.namespace.clone().unwrap_or_default();
    let patch = json!({"metadata": {
        "resourceVersion": o.metadata.resource_version,
        "managedFields": fields,
    }});
    retry(|| cluster.merge_patch(&api_version, &kind, &ns, &name, manager, &patch))
        .await
        .map(drop)
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => ApplyError::Rejected {
                object: key(&kind, &name),
                code: 409,
                message: format!(
                    "it changed while its field manager `{MANAGER_APPLY}` was handed over to \
                     `{manager}`; nothing else was written, the next apply tries again"
                ),
            },
            e => super::api_err(&key(&kind, &name), e),
        })
}

/// What apply reads of a live member's managedFields: each entry's manager and operation (other
/// appliers), and whole entries only where the old shared manager's Apply entry is handed over
/// (`handover`). Every other member's field sets (`fieldsV1`, which mirror the object's fields,
/// often half its size) are dropped as it is listed: 500 worker StatefulSets are read at once.
pub(super) fn slim_managed_fields(o: &mut DynamicObject) {
    let Some(entries) = o.metadata.managed_fields.as_mut() else {
        return;
    };
    let hands_over = entries.iter().any(|e| {
        e.manager.as_deref() == Some(MANAGER_APPLY) && e.operation.as_deref() == Some("Apply")
    });
    if !hands_over {
        for e in entries {
            e.fields_v1 = None;
        }
    }
}

/// O's managedFields with the old shared manager's Apply entry handed to MANAGER: renamed, or
/// merged into MANAGER's own entry of the same apiVersion (dropped if its apiVersion differs:
/// the fields stay, owned by nobody, as after `kubectl apply --server-side` takes over). None:
/// O has no such entry.
fn handed_over(o: &DynamicObject, manager: &str) -> Option<Vec<Json>> {
    let entries: Vec<Json> = o
        .metadata
        .managed_fields
        .as_ref()?
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    let is_apply = |e: &Json, m: &str| {
        e["manager"].as_str() == Some(m) && e["operation"].as_str() == Some("Apply")
    };
    let old = entries.iter().position(|e| is_apply(e, MANAGER_APPLY))?;
    let mut entries = entries;
    let mut legacy = entries.remove(old);
    match entries.iter_mut().find(|e| is_apply(e, manager)) {
        Some(own) if own["apiVersion"] == legacy["apiVersion"] => {
            let theirs = legacy["fieldsV1"].take();
            union(&mut own["fieldsV1"], theirs);
        }
        Some(_) => {}
        None => {
            legacy["manager"] = json!(manager);
            entries.insert(old, legacy);
        }
    }
    Some(entries)
}

/// A ∪ B for two fieldsV1 sets (nested objects of `f:`/`k:`/`v:`/`i:` keys, `.` for the
/// field itself).
fn union(a: &mut Json, b: Json) {
    match (a, b) {
        (Json::Object(a), Json::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(mine) => union(mine, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (a @ Json::Null, b) => *a = b,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(entries: Json) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "managedFields": entries},
        }))
        .unwrap()
    }

    fn entry(manager: &str, op: &str, fields: Json) -> Json {
        json!({"manager": manager, "operation": op, "apiVersion": "v1",
               "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    #[test]
    fn the_old_entry_is_renamed_and_nothing_else_moves() {
        let o = object(json!([
            entry("kubectl-edit", "Update", json!({"f:data": {"f:x": {}}})),
            entry("slurmops", "Apply", json!({"f:data": {"f:a": {}}})),
            entry(
                "slurmops-autoscale",
                "Apply",
                json!({"f:spec": {"f:replicas": {}}})
            ),
        ]));
        let got = handed_over(&o, "slurmops/c").unwrap();
        let managers: Vec<_> = got.iter().map(|e| e["manager"].as_str().unwrap()).collect();
        assert_eq!(
            managers,
            ["kubectl-edit", "slurmops/c", "slurmops-autoscale"]
        );
        assert_eq!(got[1]["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    }

    #[test]
    fn an_entry_of_the_cluster_already_takes_the_union() {
        let o = object(json!([
            entry("slurmops/c", "Apply", json!({"f:data": {"f:a": {}}})),
            entry(
                "slurmops",
                "Apply",
                json!({"f:data": {"f:b": {}, "f:a": {}}})
            ),
        ]));
        let got = handed_over(&o, "slurmops/c").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
    }

    #[test]
    fn a_member_keeps_its_field_sets_only_where_they_are_handed_over() {
        let legacy = || {
            object(json!([
                entry("slurmops/c", "Apply", json!({"f:data": {"f:a": {}}})),
                entry("slurmops", "Apply", json!({"f:data": {"f:b": {}}})),
            ]))
        };
        let mut o = legacy();
        slim_managed_fields(&mut o);
        assert_eq!(
            handed_over(&o, "slurmops/c"),
            handed_over(&legacy(), "slurmops/c")
        );
        assert_eq!(
            handed_over(&o, "slurmops/c").unwrap()[0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );

        let mut o = object(json!([
            entry("slurmops/c", "Apply", json!({"f:data": {"f:a": {}}})),
            entry("helm", "Apply", json!({"f:data": {"f:x": {}}})),
            entry("slurmops", "Update", json!({"f:data": {"f:y": {}}})),
        ]));
        slim_managed_fields(&mut o);
        let entries = o.metadata.managed_fields.as_ref().unwrap();
        assert!(entries.iter().all(|e| e.fields_v1.is_none()));
        // Who applies what stays: another applier is still told.
        assert_eq!(
            super::super::other_appliers(Some(&o), "slurmops/c"),
            ["helm"]
        );
        assert_eq!(handed_over(&o, "slurmops/c"), None);
    }

    #[test]
    fn objects_without_the_old_entry_are_not_written() {
        let o = object(json!([
            entry("slurmops/c", "Apply", json!({})),
            // Another tool's Update under the same name is not an applier's entry.
            entry("slurmops", "Update", json!({})),
        ]));
        assert!(handed_over(&o, "slurmops/c").is_none());
    }
}
