//! How a plan reads: text for people at a terminal, Markdown for a pull-request comment, JSON
//! for machines. All three say the same things in the same order.

use std::fmt::Write;

use serde_json::json;

use super::{Action, Plan};

fn sign(a: Action) -> &'static str {
    match a {
        Action::Create => "+",
        Action::Update => "~",
        Action::Replace => "-/+",
        Action::Delete => "-",
    }
}

fn headline(p: &Plan, target: &str) -> String {
    if !p.has_changes() {
        return format!("No changes: {target} already matches cluster.yaml.");
    }
    let accounting = match p.slurm.accounting.changes.len() {
        0 => String::new(),
        n => format!(
            " Accounting: {n} change{} in slurmdbd.",
            if n == 1 { "" } else { "s" }
        ),
    };
    format!(
        "Plan for {target}: {} to create, {} to update, {} to replace, {} to delete.{accounting}",
        p.count(Action::Create),
        p.count(Action::Update),
        p.count(Action::Replace),
        p.count(Action::Delete)
    )
}

/// Lines describing the Slurm side, shared by text and Markdown.
fn slurm_lines(p: &Plan) -> Vec<String> {
    let s = &p.slurm;
    let mut out = Vec::new();
    if let Some(u) = &s.upgrade {
        out.push(match &u.refused {
            Some(why) => format!("REFUSED: {why}"),
            None => format!(
                "Slurm upgrade {} → {}: {}; each step waits until the one before is healthy",
                u.from,
                u.to,
                u.steps.join(", then ")
            ),
        });
    }
    // An upgrade restarts slurmctld on the new release: the line above says so.
    if s.controller_restarts && s.upgrade.is_none() {
        let why = if s.restart_because.is_empty() {
            "its pod template changed".to_string()
        } else {
            format!(
                "{} changed, which a reconfigure cannot change",
                s.restart_because.join(", ")
            )
        };
        let scheduler = match s.backups_through_restart {
            n if n > 0 && s.one_address => format!("slurmops replaces the controllers one at a time, the {n} standby backup{} first and the controller in control last, once every standby runs the new template; clients reach whichever has control at the controllers' Service (SlurmctldAddr), and while none has, a standby answers that it stands by and they wait rather than fail", if n == 1 { "" } else { "s" }),
            0 => "the scheduler is down until it is back: sbatch, srun and squeue fail meanwhile (no backup controller through the change: controller.ha)".to_string(),
            n => format!("the StatefulSet replaces the controllers one at a time, the {n} backup{} first; while the primary is replaced a backup answers that it stands by and Slurm's clients wait for the primary (up to 1.5 × SlurmctldTimeout) rather than fail; a primary away longer than SlurmctldTimeout (a slow image pull) leaves a backup in control until it returns and takes control back (the backup saves its state and stops first: about 10 s without a scheduler)", if n == 1 { "" } else { "s" }),
        };
        out.push(format!(
            "slurmctld restarts ({why}) and loads the new configuration; running jobs keep running; {scheduler}"
        ));
    }
    if let Some(w) = &s.control_plane_window {
        let what = match &s.upgrade {
            Some(_) => "the upgrade starts",
            None => "slurmctld restarts",
        };
        out.push(format!(
            "{what} only inside a maintenance window (policy.controlPlaneWindow): {}; until then the control plane and its files stay as they are",
            window_when(w)
        ));
    }
    if s.controller_reconfigures {
        out.push("slurmctld reconfigures in place, no restart (scontrol reconfigure, once its pod sees the new files); running jobs keep running".to_string());
    }
    if (s.controller_restarts || s.controller_reconfigures)
        && s.upgrade.is_none()
        && !s.node_sets_untouched.is_empty()
    {
        out.push(format!(
            "workers not restarted (configless: slurmd reloads the configuration from slurmctld): NodeSets {}",
            s.node_sets_untouched.join(", ")
        ));
    }
    for r in &s.node_sets_rolled {
        let workers = match r.workers {
            Some(n) => format!("{n} workers"),
            None => "every worker (one per matching Kubernetes node)".to_string(),
        };
        out.push(format!(
            "NodeSet {}: {workers} drained and replaced, at most {} at a time, because of: {}",
            r.node_set,
            r.max_unavailable,
            r.because.join(", ")
        ));
        if let Some(c) = &r.canary {
            out.push(canary(r, c));
        }
        if let Some(w) = &r.window {
            out.push(window(r, w, &s.drains));
        }
    }
    for sc in &s.scaled {
        use crate::cluster::values::Replicas::{Count, PerNode};
        let how = match (sc.from, sc.to) {
            (Count(a), Count(b)) if b < a && sc.any_idle => {
                "idle workers are drained, then removed, whatever their ordinals; busy ones stay"
            }
            (Count(a), Count(b)) if b < a => "the highest ordinals are drained, then removed",
            (Count(_), Count(_)) => "new workers join, nothing drains",
            (_, PerNode) => {
                "one worker per matching Kubernetes node; workers on other nodes are drained, then removed"
            }
            (PerNode, Count(_)) => "workers above the count are drained, then removed",
        };
        out.push(format!(
            "NodeSet {}: {} -> {} workers ({how})",
            sc.node_set, sc.from, sc.to
        ));
    }
    for n in &s.node_sets_added {
        out.push(format!("NodeSet {n} added"));
    }
    for n in &s.node_sets_removed {
        out.push(format!(
            "NodeSet {n} removed: all its workers are drained, then deleted"
        ));
    }
    for n in &s.partitions_added {
        out.push(format!("partition {n} added"));
    }
    for n in &s.partitions_removed {
        out.push(format!("partition {n} removed"));
    }
    out.extend(s.autoscale_changes.iter().cloned());
    out.extend(s.checks.iter().cloned());
    out.extend(s.accounting.lines());
    for st in &s.next_pass {
        let detail = match st.detail.is_empty() {
            true => String::new(),
            false => format!(" ({})", st.detail),
        };
        // A controller's step belongs to no NodeSet.
        let set = match st.node_set.is_empty() {
            true => String::new(),
            false => format!(" (NodeSet {})", st.node_set),
        };
        out.push(format!(
            "next pass: {} {}{set}{detail}",
            st.action, st.target
        ));
    }
    for d in &s.drains {
        let jobs: Vec<String> = d
            .jobs
            .iter()
            .map(|j| {
                let end = j
                    .end_time
                    .and_then(|t| k8s_openapi::jiff::Timestamp::from_second(t).ok())
                    .map_or("no time limit".to_string(), |t| format!("expected end {t}"));
                format!("job {} ({}, {end})", j.id, j.user)
            })
            .collect();
        out.push(format!(
            "node {} (NodeSet {}) drains: {}",
            d.node,
            d.node_set,
            if jobs.is_empty() {
                "idle, no job affected".to_string()
            } else {
                format!("waits for {}", jobs.join(", "))
            }
        ));
    }
    out
}

/// The canary of rollout R in words: which workers go first, how they are validated, and what
/// follows.
fn canary(r: &crate::plan::Roll, c: &crate::plan::CanaryStep) -> String {
    let first = match c.nodes.as_slice() {
        [] if c.replicas == 1 => "1 worker (an idle one first)".to_string(),
        [] => format!("{} workers (idle ones first)", c.replicas),
        names => names.join(", "),
    };
    let jobs = if c.per_node {
        "a job on each"
    } else {
        "one job on all of them"
    };
    let rest = match r.workers {
        Some(n) => format!("then {} more workers", n.saturating_sub(c.replicas)),
        None => "then the other workers".to_string(),
    };
    format!(
        "NodeSet {}: canary: {first} replaced first and validated by {} ({jobs}, timeout {}), {rest}; a failed validation, or a canary not Ready and registered within {}, halts the rollout with the canaries drained",
        r.node_set, c.check, c.timeout, c.ready_timeout
    )
}

/// A rollout that waits for a maintenance window in words: when, the reservation, and the jobs
/// that would still run when the window opens (known against the live cluster).
fn window(
    r: &crate::plan::Roll,
    w: &crate::plan::WindowStep,
    drains: &[crate::plan::NodeDrain],
) -> String {
    let what = match w.mode.as_str() {
        "preferred" => "busy workers wait for a maintenance window (idle ones roll at once)",
        _ => "waits for a maintenance window (no worker drains outside one)",
    };
    let when = window_when(w);
    let workers: Vec<&str> = drains
        .iter()
        .filter(|d| d.node_set == r.node_set)
        .map(|d| d.node.as_str())
        .collect();
    let on = match workers.is_empty() {
        true => "its workers".to_string(),
        false => crate::slurm::hostlist::compress(&workers),
    };
    let holds = match &w.pending {
        Some(p) if p.pending > 0 => format!(
            "keeps {} of the {} pending jobs (partitions {}) off them now: their time limits run past the window's start",
            p.held_back,
            p.pending,
            p.partitions.join(", ")
        ),
        Some(_) => "holds back jobs that would run into it (none is pending now)".to_string(),
        None => "holds back jobs that would run into it".to_string(),
    };
    let mut out = format!(
        "NodeSet {}: {what}: {when}; reservation slurmops-maint-{} on {on} from the window's start {holds}",
        r.node_set, r.node_set
    );
    if let Some((start, _)) = w.next {
        let past: Vec<String> = drains
            .iter()
            .filter(|d| d.node_set == r.node_set)
            .flat_map(|d| {
                d.jobs
                    .iter()
                    .filter(|j| j.end_time.is_none_or(|e| e > start))
                    .map(move |j| {
                        let end = j
                            .end_time
                            .map_or("no time limit".into(), |e| format!("ends {}", ts(e)));
                        format!("job {} ({}, {}, {end})", j.id, j.user, d.node)
                    })
            })
            .collect();
        if !past.is_empty() {
            out += &format!("; jobs running past the window start: {}", past.join(", "));
        }
    }
    out
}

fn ts(t: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(t)
        .map(|x| x.to_string())
        .unwrap_or_else(|_| t.to_string())
}

/// When W's next window is, against the plan's time (or the schedules, without one): in the time
/// zone of its schedule, and in UTC too where that is another.
fn window_when(w: &crate::plan::WindowStep) -> String {
    use crate::cluster::window::{local, told_at};
    let zone = w.time_zone.as_deref().unwrap_or("UTC");
    match (w.next, w.now) {
        (Some((s, e)), Some(now)) if s <= now => {
            format!("a window is open now, until {}", told_at(e, zone))
        }
        (Some((s, e)), Some(now)) => {
            let d = s - now;
            let local = local((s, e), zone).unwrap_or_else(|| format!("{} – {}", ts(s), ts(e)));
            let utc = match zone {
                "UTC" => String::new(),
                _ => format!("{} – {}, ", ts(s), ts(e)),
            };
            format!(
                "next {local} ({utc}in {}d {}h {}m)",
                d / 86_400,
                d % 86_400 / 3600,
                d % 3600 / 60
            )
        }
        _ => format!("windows: {}", w.windows.join("; ")),
    }
}

pub fn text(p: &Plan, target: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}", headline(p, target));
    for c in &p.changes {
        let _ = writeln!(
            o,
            "\n{} {} {} {}/{}",
            sign(c.action),
            c.action.as_str(),
            c.kind,
            c.namespace,
            c.name
        );
        if c.action != Action::Delete {
            for line in c.diff.lines().skip(2) {
                let _ = writeln!(o, "    {line}");
            }
        }
    }
    let slurm = slurm_lines(p);
    if !slurm.is_empty() || !p.slurm.config_diffs.is_empty() {
        let _ = writeln!(o, "\nSlurm:");
        for l in &slurm {
            let _ = writeln!(o, "  * {l}");
        }
        for f in &p.slurm.config_diffs {
            let _ = writeln!(o, "  {}:", f.file);
            for line in f.diff.lines().skip(2) {
                let _ = writeln!(o, "    {line}");
            }
        }
    }
    if !p.warnings.is_empty() {
        let _ = writeln!(o, "\nWarnings:");
        for w in &p.warnings {
            let _ = writeln!(o, "  ! {w}");
        }
    }
    o
}

pub fn markdown(p: &Plan, target: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "### slurmops plan\n\n{}\n", headline(p, target));
    if !p.warnings.is_empty() {
        for w in &p.warnings {
            let _ = writeln!(o, "> [!WARNING]\n> {w}\n");
        }
    }
    let slurm = slurm_lines(p);
    if !slurm.is_empty() {
        let _ = writeln!(o, "#### Slurm\n");
        for l in &slurm {
            let _ = writeln!(o, "- {l}");
        }
        let _ = writeln!(o);
    }
    for f in &p.slurm.config_diffs {
        let _ = writeln!(
            o,
            "<details><summary><code>{}</code> changes</summary>\n\n```diff\n{}```\n</details>\n",
            f.file, f.diff
        );
    }
    if !p.changes.is_empty() {
        let _ = writeln!(
            o,
            "#### Kubernetes objects\n\n| action | kind | object |\n|---|---|---|"
        );
        for c in &p.changes {
            let _ = writeln!(
                o,
                "| {} {} | {} | `{}/{}` |",
                sign(c.action),
                c.action.as_str(),
                c.kind,
                c.namespace,
                c.name
            );
        }
        let _ = writeln!(o);
        for c in p.changes.iter().filter(|c| c.action != Action::Delete) {
            let _ = writeln!(
                o,
                "<details><summary>{} {} <code>{}/{}</code></summary>\n\n```diff\n{}```\n</details>\n",
                c.action.as_str(),
                c.kind,
                c.namespace,
                c.name,
                c.diff
            );
        }
    }
    o
}

pub fn json(p: &Plan) -> String {
    let v = json!({
        "version": 1,
        "changes": p.changes,
        "slurm": p.slurm,
        "warnings": p.warnings,
    });
    serde_json::to_string_pretty(&v).expect("plans serialize") + "\n"
}
