//! The active checks a change adds, changes or removes (`policy.activeChecks`), in the plan's
//! Slurm terms: what runs, on how many workers, how many at once, when, and what a failure does.
//! Pure: the schedule is shown as written, and `at` adds its next time against the plan's.

use crate::cluster::active_checks::{ActiveCheck, OnFailure, holds_new_workers};
use crate::cluster::types::ClusterFile;

/// One line per check added, changed or removed between BASE and HEAD.
pub fn changes(base: &ClusterFile, head: &ClusterFile) -> Vec<String> {
    let (old, new) = (
        &base.spec.policy.active_checks,
        &head.spec.policy.active_checks,
    );
    let mut out = Vec::new();
    for c in new {
        match old.iter().find(|o| o.name == c.name) {
            None => out.push(format!("check {} added: {}", c.name, what(c, head))),
            Some(o) if o != c => out.push(format!("check {} changed: {}", c.name, what(c, head))),
            Some(_) => {}
        }
    }
    for o in old.iter().filter(|o| !new.iter().any(|c| c.name == o.name)) {
        out.push(format!(
            "check {} removed: no new job; workers drained for it are resumed",
            o.name
        ));
    }
    // Holding new workers is part of their slurmd's registration: turning it on or off for a
    // NodeSet changes its pod template, so the NodeSet rolls (the lines above the checks say so).
    for n in &head.spec.node_sets {
        let (was, is) = (holds_new_workers(old, n), holds_new_workers(new, n));
        if was != is && base.spec.node_sets.iter().any(|b| b.name == n.name) {
            let how = match is {
                true => "now registers drained until its checks pass",
                false => "no longer waits for checks when it registers",
            };
            out.push(format!(
                "NodeSet {}: a new worker {how}; its workers are replaced for it",
                n.name
            ));
        }
    }
    out
}

/// Adds to each line of LINES (from `changes`) for a scheduled check of C when it next runs
/// after NOW, in its time zone.
pub fn at(lines: &mut [String], c: &ClusterFile, now: i64) {
    for check in &c.spec.policy.active_checks {
        let Some(next) = check.next_tick(now) else {
            continue;
        };
        let heads = [
            format!("check {} added: ", check.name),
            format!("check {} changed: ", check.name),
        ];
        let told = crate::cluster::window::told_at(next, &check.time_zone);
        for l in lines
            .iter_mut()
            .filter(|l| heads.iter().any(|h| l.starts_with(h.as_str())))
        {
            l.push_str(&format!("; its next scheduled run: {told}"));
        }
    }
}

/// What check C of HEAD does, in one sentence.
fn what(c: &ActiveCheck, head: &ClusterFile) -> String {
    let sets: Vec<&crate::cluster::types::NodeSet> =
        head.spec.node_sets.iter().filter(|n| c.covers(n)).collect();
    let names: Vec<&str> = sets.iter().map(|n| n.name.as_str()).collect();
    let workers = match sets.iter().any(|n| n.replicas.per_node()) {
        true => "one per matching Kubernetes node".to_string(),
        false => format!(
            "{} workers",
            sets.iter().map(|n| n.replicas.count()).sum::<u32>()
        ),
    };
    let mut when = Vec::new();
    if c.on_register {
        when.push("on each new worker before it takes users' jobs".to_string());
    }
    if let Some(s) = &c.schedule {
        let beside = match c.while_jobs_run {
            true => "beside users' jobs",
            false => "on idle workers",
        };
        when.push(format!("at {s} ({}) {beside}", c.time_zone));
    }
    let threshold = c
        .min_value
        .map(|m| format!(", a figure of at least {m}{}", unit(c)))
        .unwrap_or_default();
    let failure = match (c.on_failure, c.across_nodes()) {
        (OnFailure::Drain, false) => "a failure drains the worker until the check passes again",
        (OnFailure::Drain, true) => {
            "a failure drains every worker of its job until the check passes again"
        }
        (OnFailure::Report, _) => "a failure is reported, the workers stay in service",
    };
    format!(
        "{}{threshold} on NodeSet{} {} ({workers}), at most {} at once, each job up to {}; {}; {failure}",
        c.describe(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", "),
        c.max_concurrent,
        c.timeout,
        when.join(", and "),
    )
}

fn unit(c: &ActiveCheck) -> String {
    c.unit.as_ref().map(|u| format!(" {u}")).unwrap_or_default()
}
