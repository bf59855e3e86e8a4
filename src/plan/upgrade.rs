//! The upgrade from one Slurm release to another: its steps in order, the copies taken first,
//! and why it is refused when it is.

use crate::cluster::types::ClusterFile;

use super::model::Upgrade;

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
