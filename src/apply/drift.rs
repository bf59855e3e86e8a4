//! `plan --cluster`: what applying would change on the live cluster. Every desired object is
//! compared with the server's answer to a dry-run apply of it (so defaults and hand edits show
//! as the server would leave them), keys added by hand to the files slurmops owns show as
//! removed, and objects that left git as deletes; diffs follow the desired object's key order.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use super::{
    ApplyError, Connection, Verdict, api_err, compare, desired, field_manager, immutable_changes,
    key, members, retry, served, verdict,
};
use crate::cluster::types::ClusterFile;
use crate::plan::{self, Action, Change, Plan, Side};
use crate::render::Rendered;

/// `plan --cluster`: live vs desired for every object of APPLIED (what the pass would apply: R
/// with unsafe scale-ins held), objects that would be pruned, and the Slurm summary of R against
/// the cluster.yaml last applied. An object is unchanged when apply would leave it alone (the
/// same `unchanged` check apply makes); otherwise the server's dry run shows the difference.
pub async fn drift(
    cluster: &Connection,
    c: &ClusterFile,
    r: &Rendered,
    applied: &Rendered,
    base: Option<(&ClusterFile, &Rendered)>,
) -> Result<Plan, ApplyError> {
    served(cluster, applied)?;
    super::state_claim::check(cluster, c).await?;
    let live = members(cluster, c, applied).await?;
    let desired = desired(c, applied, cluster, &live);
    let manager = field_manager(c);
    let mut changes = Vec::new();
    for o in &desired {
        let id = key(&o.kind, &o.name);
        let (action, before, after) = match live.get(&id) {
            None => (Action::Create, String::new(), yaml(&o.body)),
            Some(l)
                if matches!(
                    verdict(cluster, o, Some(l), false, false, &manager).await?,
                    Verdict::Unchanged { .. }
                ) =>
            {
                continue;
            }
            Some(l) => {
                let lj = compare::comparable(&serde_json::to_value(l).unwrap_or_default());
                let dry = retry(|| cluster.apply(&o.body, &manager, true, true)).await;
                let dj = match dry {
                    Ok(d) => compare::comparable(&serde_json::to_value(&d).unwrap_or_default()),
                    // An immutable field: the dry run is refused; show our object instead.
                    Err(kube::Error::Api(s)) if s.code == 422 => o.body.clone(),
                    Err(e) => return Err(api_err(&id, e)),
                };
                // Apply also takes back keys added by hand to the files slurmops owns.
                let dj = compare::without(&dj, &compare::foreign_keys(&o.kind, &o.body, &lj));
                // In the desired object's order, so that the diff shows values, not moves.
                let (lj, dj) = (
                    compare::order_like(&lj, &o.body),
                    compare::order_like(&dj, &o.body),
                );
                let replace =
                    o.kind == "StatefulSet" && !immutable_changes(&o.body, &lj).is_empty();
                let action = if replace {
                    Action::Replace
                } else {
                    Action::Update
                };
                (action, yaml(&lj), yaml(&dj))
            }
        };
        changes.push(Change {
            action,
            kind: o.kind.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            diff: plan::unified(
                &before,
                &after,
                &format!("live/{id}"),
                &format!("desired/{id}"),
            ),
        });
    }
    let want: BTreeSet<String> = desired.iter().map(|o| key(&o.kind, &o.name)).collect();
    for (k, (_, o)) in live
        .objects
        .iter()
        .rev()
        .filter(|(k, _)| !want.contains(*k))
    {
        let (kind, name) = k.split_once('/').unwrap();
        let lj = compare::comparable(&serde_json::to_value(o).unwrap_or_default());
        changes.push(Change {
            action: Action::Delete,
            kind: kind.into(),
            namespace: c.metadata.namespace.clone(),
            name: name.into(),
            diff: plan::unified(&yaml(&lj), "", &format!("live/{k}"), "/dev/null"),
        });
    }
    let head = Side {
        cluster: c,
        rendered: r,
    };
    let base_side = base.map(|(bc, br)| Side {
        cluster: bc,
        rendered: br,
    });
    let mut p = plan::plan(base_side, head);
    p.changes = changes;
    Ok(p)
}

fn yaml(v: &Json) -> String {
    serde_saphyr::to_string(v).unwrap_or_default()
}
