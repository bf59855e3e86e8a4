//! Checks across nodes (`span: block | pair`), pure: one job over a group of workers — the
//! workers of one topology block (NCCL over NVLink), or two workers (InfiniBand between them) —
//! started at the check's schedule once every worker of the group is free, and judged once for
//! all of them. A group cannot be told apart from its members, so a failure marks and drains
//! every worker the job ran on (`onFailure: report` only reports); the next run that passes
//! resumes them. Such a check never holds a new worker: it would wait for the others.
//!
//! The job is named `slurmops-check:CHECK:@GROUP:DUE` (GROUP: the block, or the pair's first
//! worker), so a pass finds it again in Slurm like a per-node check's.

use std::collections::BTreeMap;

use super::{
    Checked, Latest, Mark, check_drain, count, ended, hold, job_name, judge, judgeable, mark_of,
    request, summary, tally,
};
use crate::cluster::active_checks::{ActiveCheck, CheckSpan, OnFailure};
use crate::controller::decide::{Action, SetView, SlurmView, Worker};
use crate::slurm::Node;

/// Workers one job of a check runs on.
pub(super) struct Group<'a> {
    /// `@BLOCK`, or `@FIRST` for a pair: the job name's target.
    key: String,
    members: Vec<(&'a Worker, &'a Node)>,
}

/// Where a NodeSet's groups run.
pub(super) struct On<'a> {
    pub set: &'a SetView,
    pub latest: &'a Latest<'a>,
    pub partition: &'a str,
    pub gpus: u32,
}

/// The groups of check C among SET's registered workers, in order: by the block of each
/// worker's Kubernetes node (HOST_BLOCKS; a worker on an unlabelled node is in none), or in
/// pairs by ordinal (an odd last worker joins the last pair).
pub(super) fn of<'a>(
    c: &ActiveCheck,
    set: &'a SetView,
    slurm: &'a SlurmView,
    host_blocks: &BTreeMap<String, String>,
) -> Vec<Group<'a>> {
    let mut ws: Vec<(&Worker, &Node)> = set
        .workers
        .iter()
        .filter(|w| !w.deleting)
        .filter_map(|w| slurm.nodes.get(&w.name).map(|n| (w, n)))
        .collect();
    ws.sort_by_key(|(w, _)| (w.ordinal, w.name.clone()));
    match c.span {
        CheckSpan::Node => Vec::new(),
        CheckSpan::Block => {
            let mut by: BTreeMap<&str, Vec<(&Worker, &Node)>> = BTreeMap::new();
            for (w, n) in ws {
                if let Some(b) = w.host.as_ref().and_then(|h| host_blocks.get(h)) {
                    by.entry(b).or_default().push((w, n));
                }
            }
            by.into_iter()
                .map(|(b, members)| Group {
                    key: format!("@{b}"),
                    members,
                })
                .collect()
        }
        CheckSpan::Pair => {
            // An odd last worker joins the last pair: no worker is in two groups, so one
            // group's result never clears another's.
            let mut pairs: Vec<Vec<(&Worker, &Node)>> = ws.chunks(2).map(<[_]>::to_vec).collect();
            if pairs.len() > 1 && pairs.last().is_some_and(|p| p.len() == 1) {
                let odd = pairs.pop().expect("a last pair");
                pairs.last_mut().expect("a pair before").extend(odd);
            }
            pairs
                .into_iter()
                .filter(|p| p.len() >= 2)
                .map(|members| Group {
                    key: format!("@{}", members[0].0.name),
                    members,
                })
                .collect()
        }
    }
}

fn mark<'w>(w: &'w Worker, c: &ActiveCheck) -> Option<&'w Mark> {
    w.checks.get(&c.name)
}

/// Check C on group G this pass. CHECKS: all of them (a worker another check failed on stays
/// drained). ROOM: jobs each check may still start under its cap.
pub(super) fn run(
    on: &On,
    c: &ActiveCheck,
    g: &Group,
    checks: &[ActiveCheck],
    room: &mut BTreeMap<&str, u32>,
    now: i64,
    out: &mut Checked,
) {
    let set = on.set.name.as_str();
    let drains = c.on_failure == OnFailure::Drain;
    let due = c.last_tick(now).filter(|t| {
        g.members.iter().any(|(w, _)| {
            w.created.unwrap_or(0) <= *t && mark(w, c).is_none_or(|m: &Mark| m.at < *t)
        })
    });
    let fresh = on
        .latest
        .get(&(c.name.as_str(), g.key.as_str()))
        .filter(|(d, j)| {
            g.members
                .iter()
                .any(|(w, _)| mark(w, c).is_none_or(|m| *d > m.at && m.job != Some(j.id)))
        })
        .map(|(d, j)| (*d, *j));
    let Some(stamp) = due.or(fresh.map(|f| f.0)) else {
        for (w, _) in &g.members {
            count(out, set, c, w);
        }
        return;
    };
    let mut acts: Vec<Action> = Vec::new();
    let on_job = |j: u64, text: &str| Mark {
        passed: false,
        at: now,
        job: Some(j),
        value: None,
        text: text.into(),
    };
    match fresh.filter(|f| f.0 >= stamp).map(|f| f.1) {
        Some(j) if judgeable(j) => {
            let m = judge(c, j, now);
            for (w, n) in &g.members {
                if !j.nodes.contains(&w.name) {
                    count(out, set, c, w);
                    continue;
                }
                if !m.passed && drains && check_drain(n).as_deref() != Some(c.name.as_str()) {
                    acts.push(hold(&c.name, &w.name, m.job, &m.text));
                }
                if mark(w, c) != Some(&m) {
                    acts.push(mark_of(w, c, m.clone()));
                }
                tally(out, set, c, w, &m);
            }
        }
        Some(j) if !ended(j) => {
            let limit = c.timeout.as_secs() as i64;
            match j.start_time.filter(|s| *s > 0) {
                Some(s) if now - s >= limit => {
                    let text = format!("ran past its timeout {}, cancelled", c.timeout);
                    // Drained first: a job cancelled frees its workers, and Slurm would start
                    // a user's job there before a later drain.
                    if drains {
                        for (w, _) in &g.members {
                            acts.push(hold(&c.name, &w.name, Some(j.id), &text));
                        }
                    }
                    acts.push(Action::CheckCancel { job: j.id });
                    for (w, _) in &g.members {
                        acts.push(mark_of(w, c, on_job(j.id, &text)));
                    }
                }
                Some(s) => {
                    let sm = summary(out, set, &c.name);
                    sm.running += g.members.len() as u32;
                    sm.next = Some(sm.next.map_or(s + limit, |t| t.min(s + limit)));
                }
                // Waiting on a worker someone else drained: it would hold room under the cap
                // until that drain ends; a later run finds the group free.
                None if g.members.iter().any(|(_, n)| {
                    n.state.has("DRAIN") && check_drain(n).as_deref() != Some(c.name.as_str())
                }) =>
                {
                    acts.push(Action::CheckCancel { job: j.id });
                    summary(out, set, &c.name).waiting += g.members.len() as u32;
                }
                None => summary(out, set, &c.name).running += g.members.len() as u32,
            }
        }
        // Never submitted, or ended without running: due.
        _ if due.is_some() => {
            let failed_other = |w: &Worker| {
                checks.iter().any(|o| {
                    o.name != c.name
                        && o.on_failure == OnFailure::Drain
                        && w.checks.get(&o.name).is_some_and(|m| !m.passed)
                })
            };
            // Free: in service and idle (or the check runs beside jobs), or drained by this
            // check's last failure alone (resumed as its job is submitted, which starts first).
            let free = |(w, n): &(&Worker, &Node)| {
                let answers = !n.state.has("DOWN") && !n.state.has("NOT_RESPONDING");
                let ours = check_drain(n).as_deref() == Some(c.name.as_str()) && !failed_other(w);
                answers
                    && (ours || !n.state.has("DRAIN") && (c.while_jobs_run || !n.state.is_busy()))
            };
            let n = g.members.len() as u32;
            let left = room.get_mut(c.name.as_str()).filter(|r| **r > 0);
            match left {
                Some(r) if g.members.iter().all(free) => {
                    *r -= 1;
                    let nodes = g.members.iter().map(|(w, _)| w.name.clone()).collect();
                    let name = job_name(&c.name, &g.key, stamp);
                    acts.push(Action::CheckSubmit {
                        job: request(c, &name, nodes, on.partition, on.gpus),
                    });
                    for (w, node) in &g.members {
                        if check_drain(node).as_deref() == Some(c.name.as_str()) {
                            acts.push(Action::Resume {
                                node: w.name.clone(),
                            });
                        }
                    }
                    summary(out, set, &c.name).running += n;
                }
                _ => summary(out, set, &c.name).waiting += n,
            }
        }
        _ => {}
    }
    if !acts.is_empty() {
        out.actions.entry(set.to_string()).or_default().extend(acts);
    }
}

#[cfg(test)]
mod tests;
