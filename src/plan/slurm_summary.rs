//! The plan in Slurm's terms: config diffs, partitions, scaling, which NodeSets roll (and in
//! which maintenance windows), accounting changes, checks and the upgrade; and the next window
//! a plan is given once a clock is read.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::types::{ClusterFile, NodeSet};
use crate::cluster::values::{IntOrPercent, Replicas};
use crate::cluster::window::ControlPlaneWindow;
use crate::render::Rendered;

use super::model::*;
use super::object_diff::{template_diff, unified};
use super::upgrade::upgrade;
use super::{checks, ctl, stateful_sets};

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
pub(super) fn slurm_summary(
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
