//! Checks across nodes (`span: block | pair`), pure: one job over a group of workers — the
//! workers of one topology block (NCCL over NVLink), or two workers (InfiniBand between them) —
//! started at the check's schedule once every worker of the group is free, and judged once for
//! all of them. A block's job waits until the block is whole: every worker Kubernetes put on its
//! nodes registered and placed in the block in Slurm (a job over part of an NVLink domain would
//! judge the domain by a run that never crossed it). A group cannot be told apart from its
//! members, so a failure marks and drains every worker the job ran on (`onFailure: report` only
//! reports); the next run that passes resumes them. Such a check never holds a new worker: it
//! would wait for the others.
//!
//! The job is named `slurmops-check:CHECK:@GROUP:DUE` (GROUP: the block, or the pair's first
//! worker), so a pass finds it again in Slurm like a per-node check's.

use std::collections::BTreeMap;

use super::{
    Checked, Latest, Mark, check_drain, count, ended, hold, job_name, judge, judgeable, mark_of,
    request, summary, tally,
};
use crate::cluster::active_checks::{ActiveCheck, CheckSpan, OnFailure};
use crate::cluster::types::TOPOLOGY_BLOCK;
use crate::controller::decide::{Action, SetView, SlurmView, Worker};
use crate::render::slurm::node_topology;
use crate::slurm::{Job, Node};

/// Workers one job of a check runs on.
pub(super) struct Group<'a> {
    /// `@BLOCK`, or `@FIRST` for a pair: the job name's target.
    key: String,
    members: Vec<(&'a Worker, &'a Node)>,
    /// Every worker of the group is a member: none is still registering, or (a block's)
    /// waiting to be placed in it. A job is submitted only for a whole group.
    whole: bool,
}

/// Where a NodeSet's groups run.
pub(super) struct On<'a> {
    pub set: &'a SetView,
    pub latest: &'a Latest<'a>,
    pub partition: &'a str,
    pub gpus: u32,
}

/// The groups of check C among SET's registered workers, in order: by the block of each
/// worker's Kubernetes node (HOST_BLOCKS; a worker on an unlabelled node is in none; a worker
/// not registered yet, or not placed in its block in Slurm yet, leaves its block not whole), or
/// in pairs by ordinal (an odd last worker joins the last pair).
pub(super) fn of<'a>(
    c: &ActiveCheck,
    set: &'a SetView,
    slurm: &'a SlurmView,
    host_blocks: &BTreeMap<String, String>,
) -> Vec<Group<'a>> {
    match c.span {
        CheckSpan::Node => Vec::new(),
        CheckSpan::Block => {
            let mut by: BTreeMap<&str, Group> = BTreeMap::new();
            for w in set.workers.iter().filter(|w| !w.deleting) {
                let Some(b) = w.host.as_ref().and_then(|h| host_blocks.get(h)) else {
                    continue;
                };
                let g = by.entry(b).or_insert_with(|| Group {
                    key: format!("@{b}"),
                    members: Vec::new(),
                    whole: true,
                });
                match slurm.nodes.get(&w.name) {
                    Some(n) => {
                        g.whole &= n.topology == node_topology(TOPOLOGY_BLOCK, b);
                        g.members.push((w, n));
                    }
                    None => g.whole = false,
                }
            }
            by.into_values()
                .filter(|g| !g.members.is_empty())
                .map(|mut g| {
                    g.members.sort_by_key(|(w, _)| (w.ordinal, w.name.clone()));
                    g
                })
                .collect()
        }
        CheckSpan::Pair => {
            let mut ws: Vec<(&Worker, &Node)> = set
                .workers
                .iter()
                .filter(|w| !w.deleting)
                .filter_map(|w| slurm.nodes.get(&w.name).map(|n| (w, n)))
                .collect();
            ws.sort_by_key(|(w, _)| (w.ordinal, w.name.clone()));
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
                    whole: true,
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
    let mut pass = GroupPass {
        on,
        c,
        g,
        acts: Vec::new(),
    };
    match fresh.filter(|f| f.0 >= stamp).map(|f| f.1) {
        Some(j) if judgeable(j) => pass.keep_result(j, now, out),
        Some(j) if !ended(j) => pass.time_running(j, now, out),
        // Never submitted, or ended without running: due, once the group is whole.
        _ if due.is_some() && g.whole => pass.submit_if_free(checks, room, stamp, out),
        _ if due.is_some() => summary(out, set, &c.name).waiting += g.members.len() as u32,
        _ => {}
    }
    pass.record(out);
}

/// Check C on group G this pass, and the steps it takes.
struct GroupPass<'a> {
    on: &'a On<'a>,
    c: &'a ActiveCheck,
    g: &'a Group<'a>,
    acts: Vec<Action>,
}

impl<'a> GroupPass<'a> {
    fn set(&self) -> &'a str {
        self.on.set.name.as_str()
    }

    /// The group's job J is judged: each worker it ran on marked (and drained on a failure).
    fn keep_result(&mut self, j: &Job, now: i64, out: &mut Checked) {
        let (c, g, set) = (self.c, self.g, self.set());
        let drains = c.on_failure == OnFailure::Drain;
        let m = judge(c, j, now);
        for (w, n) in &g.members {
            if !j.nodes.iter().any(|n| *n == w.name) {
                count(out, set, c, w);
                continue;
            }
            if !m.passed && drains && check_drain(n).as_deref() != Some(c.name.as_str()) {
                self.acts.push(hold(&c.name, &w.name, m.job, &m.text));
            }
            if mark(w, c) != Some(&m) {
                self.acts.push(mark_of(w, c, m.clone()));
            }
            tally(out, set, c, w, &m);
        }
    }

    /// The group's job J runs (or waits to start): cancelled past its timeout, which fails
    /// every member; else the next pass is asked for at its timeout; one waiting on a worker
    /// someone else drained is cancelled.
    fn time_running(&mut self, j: &Job, now: i64, out: &mut Checked) {
        let (c, g, set) = (self.c, self.g, self.set());
        let limit = c.timeout.as_secs() as i64;
        match j.start_time.filter(|s| *s > 0) {
            Some(s) if now - s >= limit => {
                let text = format!("ran past its timeout {}, cancelled", c.timeout);
                // Drained first: a job cancelled frees its workers, and Slurm would start
                // a user's job there before a later drain.
                if c.on_failure == OnFailure::Drain {
                    for (w, _) in &g.members {
                        self.acts.push(hold(&c.name, &w.name, Some(j.id), &text));
                    }
                }
                self.acts.push(Action::CheckCancel { job: j.id });
                for (w, _) in &g.members {
                    let m = Mark {
                        passed: false,
                        at: now,
                        job: Some(j.id),
                        value: None,
                        text: text.clone(),
                    };
                    self.acts.push(mark_of(w, c, m));
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
                self.acts.push(Action::CheckCancel { job: j.id });
                summary(out, set, &c.name).waiting += g.members.len() as u32;
            }
            None => summary(out, set, &c.name).running += g.members.len() as u32,
        }
    }

    /// The group's due job (STAMP) submitted when every member is free and the check has room
    /// under its cap (a member drained by this check's last failure is resumed for it); else
    /// it waits. CHECKS: all of them.
    fn submit_if_free(
        &mut self,
        checks: &[ActiveCheck],
        room: &mut BTreeMap<&str, u32>,
        stamp: i64,
        out: &mut Checked,
    ) {
        let (on, c, g, set) = (self.on, self.c, self.g, self.set());
        let n = g.members.len() as u32;
        let left = room.get_mut(c.name.as_str()).filter(|r| **r > 0);
        match left {
            Some(r) if g.members.iter().all(|m| free(c, checks, m)) => {
                *r -= 1;
                let nodes = g.members.iter().map(|(w, _)| w.name.clone()).collect();
                let name = job_name(&c.name, &g.key, stamp);
                self.acts.push(Action::CheckSubmit {
                    job: request(c, &name, nodes, on.partition, on.gpus),
                });
                for (w, node) in &g.members {
                    if check_drain(node).as_deref() == Some(c.name.as_str()) {
                        self.acts.push(Action::Resume {
                            node: w.name.clone(),
                        });
                    }
                }
                summary(out, set, &c.name).running += n;
            }
            _ => summary(out, set, &c.name).waiting += n,
        }
    }

    /// The steps gathered, added to the group's NodeSet's.
    fn record(self, out: &mut Checked) {
        if !self.acts.is_empty() {
            let set = self.set().to_string();
            out.actions.entry(set).or_default().extend(self.acts);
        }
    }
}

/// Whether member (W, N) is free for check C: in service and idle (or the check runs beside
/// jobs), or drained by this check's last failure alone (resumed as its job is submitted,
/// which starts first). CHECKS: all of them.
fn free(c: &ActiveCheck, checks: &[ActiveCheck], (w, n): &(&Worker, &Node)) -> bool {
    let answers = !n.state.has("DOWN") && !n.state.has("NOT_RESPONDING");
    let ours = check_drain(n).as_deref() == Some(c.name.as_str()) && !failed_another(c, checks, w);
    answers && (ours || !n.state.has("DRAIN") && (c.while_jobs_run || !n.state.is_busy()))
}

/// Whether another check than C that drains on failure failed on W. CHECKS: all of them.
fn failed_another(c: &ActiveCheck, checks: &[ActiveCheck], w: &Worker) -> bool {
    checks.iter().any(|o| {
        o.name != c.name
            && o.on_failure == OnFailure::Drain
            && w.checks.get(&o.name).is_some_and(|m| !m.passed)
    })
}

#[cfg(test)]
mod tests;
