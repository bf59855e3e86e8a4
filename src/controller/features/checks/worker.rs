//! One worker's per-node checks this pass, in three phases: each check's job judged, timed or
//! found due ([`WorkerPass::judge_check`]); the due ones submitted under their caps
//! ([`WorkerPass::submit_due`]); and the worker held, kept drained or resumed
//! ([`WorkerPass::hold_or_resume`]). Checks across nodes are run by their groups (groups.rs):
//! here a group's failure only keeps the worker drained.

use std::collections::BTreeMap;

use super::{
    Checked, Latest, Mark, check_drain, count, ended, hold, job_name, judge, judgeable, mark_of,
    request, summary,
};
use crate::cluster::active_checks::{ActiveCheck, OnFailure};
use crate::controller::decide::{Action, Worker};
use crate::slurm::{Job, Node};

/// One due check on one worker.
struct Due<'a> {
    check: &'a ActiveCheck,
    name: String,
}

/// A worker and where its checks run.
pub(super) struct Worker1<'a> {
    pub w: &'a Worker,
    pub n: &'a Node,
    pub latest: &'a Latest<'a>,
    pub set: &'a str,
    pub partition: &'a str,
    pub gpus: u32,
    pub resumed_by_rollout: bool,
}

/// One worker's checks.
pub(super) fn worker(
    cx: &Worker1,
    checks: &[&ActiveCheck],
    room: &mut BTreeMap<&str, u32>,
    now: i64,
    out: &mut Checked,
) {
    let mut pass = WorkerPass::new(cx);
    for c in checks {
        pass.judge_check(c, now, out);
    }
    let waiting = pass.submit_due(room, out);
    pass.hold_or_resume(waiting, out);
    pass.record(out);
}

/// What one worker's checks found this pass, check by check, and the steps that follow.
struct WorkerPass<'a> {
    cx: &'a Worker1<'a>,
    /// Its node answers: neither down nor not responding.
    answers: bool,
    /// Its node's drain for checks ([`check_drain`]).
    drain: Option<String>,
    /// Held for pending checks since (a new worker, or one whose node's problem cleared).
    pending_since: Option<i64>,
    acts: Vec<Action>,
    dues: Vec<Due<'a>>,
    /// A check failed and drains the worker: it stays out until that check passes again.
    failed: bool,
    /// A check across nodes failed here: the worker stays drained for it (its group runs it
    /// again), though its own checks may run.
    group_failed: Option<(&'a str, &'a Mark)>,
    /// Jobs submitted and not started: a failed worker's are cancelled (they would wait on a
    /// drained node, and hold room under their check's cap, for ever).
    pending: Vec<(&'a str, u64)>,
}

impl<'a> WorkerPass<'a> {
    fn new(cx: &'a Worker1<'a>) -> Self {
        let n = cx.n;
        let drain = check_drain(n);
        let pending_since = (drain.as_deref() == Some(""))
            .then_some(n.reason_changed_at)
            .flatten();
        WorkerPass {
            cx,
            answers: !n.state.has("DOWN") && !n.state.has("NOT_RESPONDING"),
            drain,
            pending_since,
            acts: Vec::new(),
            dues: Vec::new(),
            failed: false,
            group_failed: None,
            pending: Vec::new(),
        }
    }

    /// Check C on the worker: a group's failure noted, its job judged or timed, or it due.
    fn judge_check(&mut self, c: &'a ActiveCheck, now: i64, out: &mut Checked) {
        let (cx, w) = (self.cx, self.cx.w);
        let drains = c.on_failure == OnFailure::Drain;
        let mark = w.checks.get(&c.name);
        if c.across_nodes() {
            // Run and counted by its group (groups.rs); a failure keeps the worker drained.
            if let Some(m) = mark.filter(|m| drains && !m.passed) {
                self.group_failed = self.group_failed.or(Some((c.name.as_str(), m)));
            }
            return;
        }
        // Its newest job, when newer than its last result: in flight, or ended and not judged
        // yet (a worker resumed for it is due no more, and still needs its verdict). Slurm's
        // times are whole seconds: a job due in the very second of the last result is newer
        // when it is another job (seen in CI: passed, cordoned, uncordoned and held, all
        // within one second; the new job was never judged).
        let latest = cx.latest.get(&(c.name.as_str(), w.name.as_str()));
        let fresh = latest
            .filter(|(due, j)| mark.is_none_or(|m| *due >= m.at && m.job != Some(j.id)))
            .map(|(due, j)| (*due, *j));
        let newest = latest.map(|(due, j)| (*due, j.id));
        let due = due_since(c, w, mark, self.pending_since, newest, now);
        let Some(stamp) = due.or(fresh.map(|f| f.0)) else {
            self.failed |= count(out, cx.set, c, w);
            return;
        };
        let name = job_name(&c.name, &w.name, stamp);
        match fresh.filter(|f| f.0 >= stamp).map(|f| f.1) {
            // Ended after it ran, or failed and waits to be drained.
            Some(j) if judgeable(j) => self.keep_result(c, j, mark, now),
            Some(j) if !ended(j) => self.time_running(c, j, mark, now, out),
            // Never submitted, or ended without running: due.
            _ if due.is_some() => self.dues.push(Due { check: c, name }),
            _ => {}
        }
    }

    /// C's job J is judged: its result kept on the pod, and a failure drains the worker.
    fn keep_result(&mut self, c: &ActiveCheck, j: &Job, mark: Option<&Mark>, now: i64) {
        let w = self.cx.w;
        let m = judge(c, j, now);
        if !m.passed && c.on_failure == OnFailure::Drain {
            self.failed = true;
            if self.drain.as_deref() != Some(c.name.as_str()) {
                self.acts.push(hold(&c.name, &w.name, m.job, &m.text));
            }
        }
        // Kept once: a pass that writes nothing new does not act (nor wake the next).
        if mark != Some(&m) {
            self.acts.push(mark_of(w, c, m));
        }
    }

    /// C's job J runs (or waits to start): cancelled past its timeout, which fails the check;
    /// else the next pass is asked for at its timeout.
    fn time_running(
        &mut self,
        c: &'a ActiveCheck,
        j: &Job,
        mark: Option<&Mark>,
        now: i64,
        out: &mut Checked,
    ) {
        let (w, set) = (self.cx.w, self.cx.set);
        summary(out, set, &c.name).running += 1;
        // A new worker's first result: `apply` and `rollout` wait for it.
        if mark.is_none() {
            out.busy.insert(set.to_string());
        }
        let limit = c.timeout.as_secs() as i64;
        match j.start_time.filter(|s| *s > 0) {
            Some(s) if now - s >= limit => {
                let text = format!("ran past its timeout {}, cancelled", c.timeout);
                // Drained first: a job cancelled frees the worker, and Slurm would
                // start a user's job there before a later drain (seen in CI).
                if c.on_failure == OnFailure::Drain {
                    self.failed = true;
                    self.acts.push(hold(&c.name, &w.name, Some(j.id), &text));
                }
                self.acts.push(Action::CheckCancel { job: j.id });
                let m = Mark {
                    passed: false,
                    at: now,
                    job: Some(j.id),
                    value: None,
                    text,
                };
                self.acts.push(mark_of(w, c, m));
            }
            Some(s) => {
                let sm = summary(out, set, &c.name);
                sm.next = Some(sm.next.map_or(s + limit, |t| t.min(s + limit)));
            }
            None => self.pending.push((c.name.as_str(), j.id)),
        }
    }

    /// Held (slurmops drained it for checks, or the rollout would resume a replaced worker).
    fn held(&self) -> bool {
        self.drain.is_some() || self.cx.resumed_by_rollout
    }

    /// Whether check C may start on the worker now: held, every due check may (they are
    /// submitted together); in service, a scheduled run starts on an idle worker (or beside
    /// jobs when the check allows).
    fn may(&self, c: &ActiveCheck) -> bool {
        let n = self.cx.n;
        self.answers
            && (self.held() || !n.state.has("DRAIN") && (c.while_jobs_run || !n.state.is_busy()))
    }

    /// Whether D may start now and its check has room under its cap.
    fn go(&self, d: &Due, room: &BTreeMap<&str, u32>) -> bool {
        self.may(d.check) && room.get(d.check.name.as_str()).is_some_and(|r| *r > 0)
    }

    /// The due checks submitted: a held worker's every due check at once or none; a failed
    /// worker's none, and its jobs not started cancelled. Whether a due check waits.
    fn submit_due(&mut self, room: &mut BTreeMap<&str, u32>, out: &mut Checked) -> bool {
        let (cx, set) = (self.cx, self.cx.set);
        let held = self.held();
        let dues = std::mem::take(&mut self.dues);
        let all = !dues.is_empty() && dues.iter().all(|d| self.go(d, room));
        let mut waiting = false;
        if self.failed {
            for (check, job) in std::mem::take(&mut self.pending) {
                self.acts.push(Action::CheckCancel { job });
                summary(out, set, check).running -= 1;
            }
        }
        for d in &dues {
            // A held worker waits for its checks; a scheduled run on one in service (which may
            // wait days for the worker to be idle) keeps no command waiting.
            if held && !self.failed {
                out.busy.insert(set.to_string());
            }
            if !self.failed && (all || !held) && self.go(d, room) {
                *room.get_mut(d.check.name.as_str()).expect("room") -= 1;
                let nodes = vec![cx.w.name.clone()];
                self.acts.push(Action::CheckSubmit {
                    job: request(d.check, &d.name, nodes, cx.partition, cx.gpus),
                });
                summary(out, set, &d.check.name).running += 1;
            } else {
                waiting = true;
                summary(out, set, &d.check.name).waiting += 1;
            }
        }
        waiting
    }

    /// A held worker: kept drained while a check failed or waits (drained for a group's failed
    /// check once its own passed), else resumed. WAITING: a due check waits.
    fn hold_or_resume(&mut self, waiting: bool, out: &mut Checked) {
        if !self.held() {
            return;
        }
        let w = self.cx.w;
        if self.failed || waiting || self.group_failed.is_some() {
            if self.cx.resumed_by_rollout {
                out.keep_drained.insert(w.name.clone());
            }
            // Its own checks passed, a group's failed: drained for that group's check, which
            // resumes it when the group passes (held `checks pending`, no group would run it).
            if let (false, false, Some((c, m))) = (self.failed, waiting, self.group_failed)
                && self.drain.as_deref().is_some_and(|d| d != c)
            {
                self.acts.push(hold(c, &w.name, m.job, &m.text));
            }
        } else if self.drain.is_some() && self.answers {
            self.acts.push(Action::Resume {
                node: w.name.clone(),
            });
        }
    }

    /// The steps gathered, added to the worker's NodeSet's.
    fn record(self, out: &mut Checked) {
        if !self.acts.is_empty() {
            out.actions
                .entry(self.cx.set.to_string())
                .or_default()
                .extend(self.acts);
        }
    }
}

/// Since when check C is due on W (the stamp in its job's name), or None when its last result
/// stands: a new pod has none (`onRegister`); a worker held `slurmops: checks pending` since
/// PENDING (its node's problem cleared) needs a result newer than that; and a scheduled check
/// is due again at each tick after the pod was made. NEWEST: the stamp and id of C's newest job
/// on W, which tells a result of the hold's second apart from one before it.
fn due_since(
    c: &ActiveCheck,
    w: &Worker,
    mark: Option<&Mark>,
    pending: Option<i64>,
    newest: Option<(i64, u64)>,
    now: i64,
) -> Option<i64> {
    let created = w.created.unwrap_or(0);
    if c.on_register && mark.is_none() {
        return Some(created);
    }
    if let (true, Some(p), Some(m)) = (c.on_register, pending, mark) {
        // Slurm's times are whole seconds: a result of the very second the worker was held
        // stands only when its job was submitted for that hold (seen on the bed: a check passed,
        // the node was cordoned and uncordoned within that second, and the worker was resumed
        // on the result from before).
        let after = m.at > p
            || (m.at == p && newest.is_some_and(|(due, id)| due >= p && m.job == Some(id)));
        if !after {
            return Some(p);
        }
    }
    let tick = c.last_tick(now).filter(|t| *t >= created)?;
    mark.is_none_or(|m| m.at < tick).then_some(tick)
}
