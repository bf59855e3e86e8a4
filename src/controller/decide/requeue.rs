//! `update.runningJobs: requeue`: which jobs a worker drained for the rollout requeues, and
//! when (pure). Slurm's REST API has no requeue; a node set DOWN has its batch jobs requeued when
//! they may be and the others killed (slurmctld's node failure), so a worker goes DOWN only when
//! every job on it may be requeued.

use super::{Holder, Policy, SlurmView, holder};
use crate::slurm::Node;

/// JOBS as a plan names them: each id, user and how long it has run at NOW.
pub fn requeued_words(jobs: &[Holder], now: i64) -> String {
    let each: Vec<String> = jobs
        .iter()
        .map(|j| match j.start {
            Some(s) => format!(
                "job {} ({}, ran {})",
                j.id,
                j.user,
                crate::cluster::values::Duration::from_secs(now.saturating_sub(s).max(0) as u64)
            ),
            None => format!("job {} ({})", j.id, j.user),
        })
        .collect();
    format!(
        "set DOWN: Slurm requeues {} (runningJobs: requeue)",
        each.join(", ")
    )
}

/// The jobs on N, a worker drained for the rollout, that `runningJobs: requeue` requeues now:
/// once it has drained for the rule's `after`, when the whole queue is known and every job on
/// it is a batch job Slurm may requeue that the rule selects and that names no nodes (one that
/// does may never start again once its worker is replaced under the same name). None: it waits
/// (a job that may not be requeued is never killed: the node goes DOWN only when every job on it
/// is requeued).
pub fn requeue_now(n: &Node, p: &Policy, slurm: &SlurmView, now: i64) -> Option<Vec<Holder>> {
    let rule = p.requeue.as_ref()?;
    if n.state.has("DOWN") {
        // Set DOWN already: Slurm requeued its jobs (a requeued job may still name the node while
        // it completes); asking again would only repeat the Event.
        return None;
    }
    if slurm.jobs_error.is_some() || slurm.pending_unread.is_some() {
        // A job on it may not be read yet: setting the node DOWN would kill it if it may not
        // be requeued.
        return None;
    }
    let since = n.reason_changed_at?;
    if now - since < rule.after {
        return None;
    }
    let jobs = slurm.jobs_on(&n.name);
    let selected = |j: &crate::slurm::Job| {
        j.batch
            && j.requeue
            && !j.pinned
            && (rule.partitions.is_empty() || rule.partitions.iter().any(|p| *p == j.partition))
            && (rule.qos.is_empty() || rule.qos.iter().any(|q| *q == j.qos))
            && rule.max_nodes.is_none_or(|m| j.nodes.len() as u32 <= m)
    };
    (!jobs.is_empty() && jobs.iter().all(selected)).then(|| jobs.iter().map(holder).collect())
}

#[cfg(test)]
mod tests;
