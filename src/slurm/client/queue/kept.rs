//! What a client keeps of the queue between refreshes, and the refresh in flight.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::order::{Group, groups};
use super::{Cover, FAILED_PAUSE, States};
use crate::slurm::client::JOBS_REUSE_FACTOR;
use crate::slurm::model::Job;
use crate::slurm::{Jobs, SlurmError};

/// A job id's records as `job/{id}` answered, with the digest of its states then.
pub(super) struct Read {
    pub(super) jobs: Box<[Arc<Job>]>,
    pub(super) digest: u64,
    pub(super) at: Instant,
}

/// What one batch of a refresh brought.
#[derive(Default)]
pub(super) struct Delta {
    /// `jobs/state/` as the refresh read it and what that cost (its first batch only).
    pub(super) states: Option<(States, Duration)>,
    /// Job ids read: the digest of their states when planned, their records (empty: gone).
    pub(super) read: Vec<(u64, u64, Vec<Job>)>,
    /// These reads are the lead (jobs above the last one listed before a start), read before
    /// `jobs/state/` answered.
    pub(super) lead: bool,
}

/// A refresh in flight: its task, and the batches it hands over.
pub(super) struct Refresh {
    pub(super) task: tokio::task::JoinHandle<Result<(), SlurmError>>,
    pub(super) batches: mpsc::UnboundedReceiver<Delta>,
    pub(super) started: Instant,
    /// Its first batch was taken.
    pub(super) landed: bool,
}

/// What the client knows of the queue, and the refresh in flight.
#[derive(Default)]
pub(in crate::slurm::client) struct Queue {
    pub(super) kept: Option<Kept>,
    pub(super) refresh: Option<Refresh>,
    /// When the last refresh failed, and why.
    pub(super) failed: Option<(Instant, String)>,
    /// That failure itself, until a caller is told it.
    pub(super) error: Option<SlurmError>,
    /// The last job id listed before this client started (a restarted daemon's, from its
    /// status): its first refresh reads the jobs above it while `jobs/state/` is built.
    pub(super) lead: Option<u64>,
}

impl Drop for Queue {
    fn drop(&mut self) {
        if let Some(r) = &self.refresh {
            r.task.abort();
        }
    }
}

pub(super) struct Kept {
    pub(super) states: States,
    pub(super) groups: HashMap<u64, Group>,
    pub(super) read: HashMap<u64, Read>,
    /// Records in `read`.
    pub(super) records: usize,
    /// The records as handed out, until they change.
    pub(super) shared: Option<Jobs>,
    pub(super) cover: Cover,
    pub(super) checked_at: Instant,
    pub(super) check_took: Duration,
    /// When this client last changed the queue (a submission, a cancellation): a refresh
    /// started before then does not make the kept queue current.
    pub(super) changed_at: Option<Instant>,
    /// No `jobs/state/` has landed yet: only the lead is known.
    pub(super) listing: bool,
    /// The highest job id listed (or read in the lead).
    pub(super) listed_to: u64,
}

impl Kept {
    /// The records, sorted by id, each in its state as `jobs/state/` last gave it.
    pub(super) fn list(&mut self) -> Jobs {
        let (read, states) = (&self.read, &self.states);
        self.shared
            .get_or_insert_with(|| {
                let mut v: Vec<Arc<Job>> = read
                    .values()
                    .flat_map(|r| r.jobs.iter())
                    .map(|j| match states.get(&j.id.to_string()) {
                        Some(s) if *s != j.state => Arc::new(Job {
                            state: s.clone(),
                            ..Job::clone(j)
                        }),
                        _ => Arc::clone(j),
                    })
                    .collect();
                v.sort_by_key(|j| j.id);
                v.into()
            })
            .clone()
    }

    /// Young enough to answer with as it is: checked after this client's last change, and
    /// within ten times what the check cost (at most EVERY).
    pub(super) fn current(&self, every: Duration) -> bool {
        let after_change = self.changed_at.is_none_or(|t| t < self.checked_at);
        after_change && self.checked_at.elapsed() < (self.check_took * JOBS_REUSE_FACTOR).min(every)
    }

    /// Job ids not read yet that the cap leaves room for.
    pub(super) fn crawling(&self, max_jobs: usize) -> bool {
        self.cover.unread > 0 && self.records < max_jobs
    }

    pub(super) fn recount(&mut self, max_jobs: usize) {
        self.records = self.read.values().map(|r| r.jobs.len().max(1)).sum();
        let mut cover = Cover {
            jobs: self.states.len(),
            limit: (self.states.len() > max_jobs).then_some(max_jobs),
            listing: self.listing,
            ..Cover::default()
        };
        for (id, g) in &self.groups {
            if !self.read.contains_key(id) {
                cover.unread += 1;
                cover.pending_unread += usize::from(g.pending);
            }
        }
        self.cover = cover;
    }
}

/// Keeps what batch D of the refresh STARTED brought.
pub(super) fn apply(kept: &mut Option<Kept>, started: Instant, d: Delta, max_jobs: usize) {
    let fresh = |took| Kept {
        states: Arc::default(),
        groups: HashMap::new(),
        read: HashMap::new(),
        records: 0,
        shared: None,
        cover: Cover::default(),
        checked_at: started,
        check_took: took,
        changed_at: None,
        listing: false,
        listed_to: 0,
    };
    if let Some((states, took)) = d.states {
        let mut groups = groups(&states);
        let top = groups.keys().copied().max().unwrap_or(0);
        let k = kept.get_or_insert_with(|| fresh(took));
        // A job the lead of this refresh read above what the listing shows was queued after the
        // listing was taken: it stays. Any other job the listing lacks left the queue.
        k.read
            .retain(|id, r| groups.contains_key(id) || (*id > top && r.at >= started));
        for (id, r) in &k.read {
            groups.entry(*id).or_insert_with(|| lead_group(&r.jobs));
        }
        k.listed_to = k.listed_to.max(top);
        k.groups = groups;
        k.states = states;
        k.checked_at = started;
        k.check_took = took;
        k.listing = false;
    } else if d.lead {
        // Before `jobs/state/` answered: the lead's jobs as their records say they are (nothing
        // listed yet after a start: the lead's jobs alone). Their digests are none (0): the next
        // refresh reads them again against its listing.
        let k = kept.get_or_insert_with(|| Kept {
            listing: true,
            ..fresh(Duration::ZERO)
        });
        for (id, _, jobs) in &d.read {
            k.groups.insert(*id, lead_group(jobs));
        }
    }
    let Some(k) = kept.as_mut() else {
        return;
    };
    let now = Instant::now();
    for (id, digest, jobs) in d.read {
        if !jobs.is_empty() {
            k.listed_to = k.listed_to.max(id);
        }
        k.read.insert(
            id,
            Read {
                // A boxed slice, its length exactly: collected in place, the Vec of pointers
                // would keep the allocation of the records it was made from (that of the
                // answer's parsed entries, room for four of them: 2,640 bytes a job in all
                // against 1,098 by `queue.kept_bytes_per_job` in `slurmops bench`).
                jobs: jobs
                    .into_iter()
                    .map(Arc::new)
                    .collect::<Vec<_>>()
                    .into_boxed_slice(),
                digest,
                at: now,
            },
        );
    }
    k.shared = None;
    k.recount(max_jobs);
}

/// The group of a job id read before any listing showed it, from its records JOBS.
fn lead_group<J: std::borrow::Borrow<Job>>(jobs: &[J]) -> Group {
    Group {
        digest: 0,
        pending: jobs.iter().any(|j| j.borrow().has_state("PENDING")),
        holding: jobs.iter().any(|j| {
            ["RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"]
                .iter()
                .any(|s| j.borrow().has_state(s))
        }),
    }
}

impl Queue {
    /// A refresh is due now.
    pub(super) fn due(&self, every: Duration, max_jobs: usize) -> bool {
        if self.refresh.is_some()
            || self
                .failed
                .as_ref()
                .is_some_and(|(at, _)| at.elapsed() < FAILED_PAUSE)
        {
            return false;
        }
        self.kept
            .as_ref()
            .is_none_or(|k| k.crawling(max_jobs) || !k.current(every))
    }

    /// Keeps the batches the refresh in flight handed over; ends it once it finished.
    pub(super) fn take_landed(&mut self, max_jobs: usize) {
        let Some(r) = self.refresh.as_mut() else {
            return;
        };
        let done = r.task.is_finished();
        while let Ok(d) = r.batches.try_recv() {
            r.landed = true;
            apply(&mut self.kept, r.started, d, max_jobs);
        }
        if !done {
            return;
        }
        let r = self.refresh.take().expect("a refresh");
        let result = futures::FutureExt::now_or_never(r.task)
            .unwrap_or_else(|| Ok(Err(SlurmError::Config("unfinished".into()))));
        let result = result.unwrap_or_else(|e| {
            Err(SlurmError::Config(format!(
                "the job queue read stopped: {e}"
            )))
        });
        match result {
            Ok(()) => (self.failed, self.error) = (None, None),
            Err(e) => {
                tracing::warn!(error = %e, "reading the job queue failed; what was read stays");
                self.failed = Some((Instant::now(), e.to_string()));
                self.error = Some(e);
            }
        }
    }

    /// Waits until UNTIL for the next batch of the refresh in flight (none: returns at once).
    pub(super) async fn next_batch(&mut self, until: Instant, max_jobs: usize) {
        let Some(r) = self.refresh.as_mut() else {
            return;
        };
        let until = tokio::time::Instant::from_std(until);
        if let Ok(Some(d)) = tokio::time::timeout_at(until, r.batches.recv()).await {
            r.landed = true;
            apply(&mut self.kept, r.started, d, max_jobs);
        }
        self.take_landed(max_jobs);
    }

    /// Why there is no queue to answer with.
    pub(super) fn unknown(&self) -> SlurmError {
        let detail = match (&self.refresh, &self.failed) {
            (Some(r), _) => format!(
                "its first read (jobs/state/: every job's id and state) has run for {} s",
                r.started.elapsed().as_secs()
            ),
            (None, Some((at, why))) => format!(
                "the last read failed {} s ago ({why}); the next starts in {} s",
                at.elapsed().as_secs(),
                FAILED_PAUSE.saturating_sub(at.elapsed()).as_secs()
            ),
            (None, None) => "no read has started".to_string(),
        };
        SlurmError::QueueUnknown { detail }
    }
}
