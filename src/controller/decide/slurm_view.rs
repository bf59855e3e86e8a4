//! Slurm as read once for a pass: its nodes, and its jobs indexed once (by the nodes they hold, by
//! id, canary and check jobs by name), counting the job records a pass reads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::slurm::model::Word;
use crate::slurm::{Job, Jobs, Node, Nodes};

/// Slurm as read once for the pass, with the jobs indexed once (by the nodes they hold, by id,
/// canary jobs by name), so that a pass costs O(workers + jobs), not workers × jobs.
#[derive(Debug, Default)]
pub struct SlurmView {
    /// Shared with the Slurm client's kept node list and queue: a pass copies neither.
    pub nodes: Nodes,
    jobs: Jobs,
    /// Node name → indexes in `jobs` of the jobs holding it (running, suspended, completing).
    on: HashMap<Word, Vec<usize>>,
    /// Job id → its index in `jobs`.
    by_id: HashMap<u64, usize>,
    /// A canary job's name → the index of the newest job of that name (a retried submission
    /// may have made two).
    canaries: HashMap<Word, usize>,
    /// The job queue was needed and could not be read (too large, too slow): the nodes are
    /// known, the jobs are not. Rollouts go on from node states; what needs the jobs themselves
    /// (autoscale, canary verdicts) waits, and says why.
    pub jobs_error: Option<String>,
    /// The jobs are those read so far of a queue read job by job (a daemon started against a
    /// large one), and this many pending job ids are not read yet (`jobs_error` says why): what
    /// needs every job waits as without the queue, but autoscale scales out for the pending jobs
    /// read (a floor of the demand), and in only once this is 0.
    pub pending_unread: Option<usize>,
    /// The job queue's first read is in flight (a start): a pass a moment later takes it rather
    /// than the next poll.
    pub jobs_soon: bool,
    /// The pass read the job queue (it needed it): with no `jobs_error`, every job is here. A
    /// pass that did not need the queue has no jobs and no error.
    pub jobs_read: bool,
    /// Check jobs read again this pass, by id: they replace the kept queue's records.
    fresh: HashMap<u64, std::sync::Arc<Job>>,
    /// Job records handed out to the pass's decisions so far: what decide reads of the queue,
    /// which must stay O(workers + jobs) (a test checks it at 10,000 workers and 50,000 jobs).
    handed: AtomicUsize,
}

impl Clone for SlurmView {
    fn clone(&self) -> SlurmView {
        SlurmView {
            nodes: self.nodes.clone(),
            jobs: self.jobs.clone(),
            on: self.on.clone(),
            by_id: self.by_id.clone(),
            canaries: self.canaries.clone(),
            jobs_error: self.jobs_error.clone(),
            pending_unread: self.pending_unread,
            jobs_soon: self.jobs_soon,
            jobs_read: self.jobs_read,
            fresh: self.fresh.clone(),
            handed: AtomicUsize::new(self.handed()),
        }
    }
}

impl SlurmView {
    pub fn new(nodes: Vec<Node>, jobs: Vec<Job>) -> SlurmView {
        let nodes = nodes.into_iter().map(|n| (n.name.clone(), n)).collect();
        let jobs = jobs.into_iter().map(std::sync::Arc::new).collect();
        SlurmView::shared(std::sync::Arc::new(nodes), jobs)
    }

    /// The view of NODES and JOBS as the Slurm client keeps them: the jobs indexed, nothing
    /// copied.
    pub fn shared(nodes: Nodes, jobs: Jobs) -> SlurmView {
        let mut on: HashMap<Word, Vec<usize>> = Default::default();
        let mut by_id = HashMap::with_capacity(jobs.len());
        let mut canaries: HashMap<Word, usize> = Default::default();
        for (i, j) in jobs.iter().enumerate() {
            by_id.insert(j.id, i);
            if j.name.starts_with(crate::vocab::CANARY_JOB_PREFIX)
                || j.name.starts_with(crate::vocab::CHECK_JOB_PREFIX)
            {
                let newest = canaries.entry(j.name.clone()).or_insert(i);
                if jobs[*newest].id < j.id {
                    *newest = i;
                }
            }
            if !j.holds_nodes() {
                continue;
            }
            for n in &j.nodes {
                let held = on.entry(n.clone()).or_default();
                // A node listed twice in one job is held once.
                if held.last() != Some(&i) {
                    held.push(i);
                }
            }
        }
        SlurmView {
            nodes,
            jobs,
            on,
            by_id,
            canaries,
            jobs_error: None,
            pending_unread: None,
            jobs_soon: false,
            jobs_read: false,
            fresh: HashMap::new(),
            handed: AtomicUsize::new(0),
        }
    }

    /// Only jobs of Slurm user SUBMITTER (the one slurmops submits as) count as canary jobs: a
    /// job any Slurm user names like one can neither pass nor fail a canary. None (the user is
    /// not known): every job of that name counts.
    pub fn canaries_of(mut self, submitter: Option<&str>) -> SlurmView {
        if let Some(user) = submitter {
            self.canaries.clear();
            for (i, j) in self.jobs.iter().enumerate() {
                let ours = j.name.starts_with(crate::vocab::CANARY_JOB_PREFIX)
                    || j.name.starts_with(crate::vocab::CHECK_JOB_PREFIX);
                if j.user == user && ours {
                    let newest = self.canaries.entry(j.name.clone()).or_insert(i);
                    if self.jobs[*newest].id < j.id {
                        *newest = i;
                    }
                }
            }
        }
        self
    }

    /// Slurm's NODES and the jobs read so far of a queue read job by job (KNOWN): see
    /// `pending_unread`.
    pub fn partial(nodes: Nodes, known: crate::slurm::Known) -> SlurmView {
        let why = known.why();
        SlurmView {
            jobs_error: Some(why),
            // While the first listing is in flight, how many are unread is not known: at least
            // one, so that no scale-in is decided on the lead alone.
            pending_unread: Some(match known.cover.listing {
                true => known.cover.pending_unread.max(1),
                false => known.cover.pending_unread,
            }),
            ..SlurmView::shared(nodes, known.jobs)
        }
    }

    /// Slurm's NODES, with the job queue unknown for WHY.
    pub fn without_jobs(nodes: Nodes, why: String) -> SlurmView {
        SlurmView {
            jobs_error: Some(why),
            ..SlurmView::shared(nodes, Vec::new().into())
        }
    }

    fn hand(&self, n: usize) {
        self.handed.fetch_add(n, Ordering::Relaxed);
    }

    /// Job records handed out so far (each call of `jobs` counts them all).
    pub fn handed(&self) -> usize {
        self.handed.load(Ordering::Relaxed)
    }

    /// Every job Slurm listed.
    pub fn jobs(&self) -> &[std::sync::Arc<Job>] {
        self.hand(self.jobs.len());
        &self.jobs
    }

    /// Job ID, when Slurm listed it.
    pub fn job(&self, id: u64) -> Option<&Job> {
        self.hand(1);
        self.by_id.get(&id).map(|i| &*self.jobs[*i])
    }

    /// The newest canary job named NAME (see `canary::job_name`).
    pub fn canary_job(&self, name: &str) -> Option<&Job> {
        self.hand(1);
        self.canaries.get(name).map(|i| &*self.jobs[*i])
    }

    /// The newest job of each name starting with PREFIX that slurmops submitted (an active
    /// check's jobs: `slurmops-check:CHECK:`).
    pub fn check_jobs(&self, prefix: &str) -> Vec<&Job> {
        let jobs: Vec<&Job> = self
            .canaries
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(_, i)| {
                let kept = &*self.jobs[*i];
                self.fresh.get(&kept.id).map_or(kept, |j| &**j)
            })
            .collect();
        self.hand(jobs.len());
        jobs
    }

    /// Our running check jobs with no report in the kept queue yet (at most MAX): a report is a
    /// comment, which `jobs/state/` does not follow.
    pub fn unreported_checks(&self, max: usize) -> Vec<u64> {
        self.canaries
            .iter()
            .filter(|(name, _)| name.starts_with(crate::vocab::CHECK_JOB_PREFIX))
            .map(|(_, i)| &*self.jobs[*i])
            .filter(|j| j.has_state("RUNNING") && j.comment.is_empty())
            .map(|j| j.id)
            .take(max)
            .collect()
    }

    /// Jobs read again this pass (`unreported_checks`), in place of the kept ones.
    pub fn refresh_checks(&mut self, jobs: Vec<Job>) {
        self.fresh = jobs
            .into_iter()
            .map(|j| (j.id, std::sync::Arc::new(j)))
            .collect();
    }

    /// The nodes and the jobs, taken apart.
    pub fn into_parts(self) -> (Nodes, Jobs) {
        (self.nodes, self.jobs)
    }

    /// Jobs holding NODE (running, suspended, completing).
    pub fn jobs_on(&self, node: &str) -> Vec<Job> {
        let on = self.on.get(node).map(Vec::as_slice).unwrap_or_default();
        self.hand(on.len());
        on.iter().map(|i| Job::clone(&self.jobs[*i])).collect()
    }

    /// Whether a job holds NODE: one of the jobs read says so, or Slurm's node state does
    /// (ALLOCATED, MIXED, COMPLETING): a pass that read no jobs still knows a busy node.
    pub fn busy(&self, node: &str) -> bool {
        self.on.get(node).is_some_and(|v| !v.is_empty())
            || self.nodes.get(node).is_some_and(|n| n.state.is_busy())
    }
}
