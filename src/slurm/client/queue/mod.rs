//! Slurm's job queue at the size of the clusters slurmops is for (50,000 to 100,000 jobs), read
//! narrowly: slurmrestd is never asked for the whole queue. One answer with every job is hundreds
//! of MB (about 7.6 KB a job) that slurmrestd builds in its memory (about 90 s at 50,000 jobs on
//! Slurm 24.11, and it died building one of 100,000), so nothing that decides may wait for it.
//!
//! Each refresh reads `jobs/state/` (about 80 bytes a job: every job's id and state), then
//! `job/{id}` for the jobs that need it, in this order: the jobs read before whose state changed
//! (a canary's or check's job ending, a running job's nodes), the pending jobs never read
//! (autoscale's demand; newest first, as the oldest have been waiting through earlier passes) in
//! turn with the jobs holding nodes never read (what a moving worker waits for), the other jobs
//! never read (newest first: the names canaries and checks find their jobs by), and pending jobs
//! read more than [`REFRESH`] ago (a partition or reason changed
//! in place, which `jobs/state/` does not show: each once per [`REFRESH`], spread over the
//! refreshes, so that a pass reads a share of them, never all at once). Each record is kept by
//! its job id (`job/{id}`
//! answers an array's tasks and a heterogeneous job's components together) with the states it
//! was read at, and read again only when they change.
//!
//! A refresh runs in a task of its own, one at a time, for at most [`SLICE`]; it hands what it
//! read over as it goes: first `jobs/state/` and the first reads (within `Config::queue_wait` of
//! its start, so a daemon's first pass decides on them), then a batch a second. A daemon started
//! against a large queue thus decides at once on what it read (autoscale scales out for the
//! pending jobs read, and in only once every pending job is read), and learns the rest over its
//! next passes; what needs every job (canary and check jobs found by name) waits for the rest
//! and says so (see [`Cover`]). A command waits for every job (`Client::jobs`).

pub mod footprint;
mod kept;
mod known;
mod order;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::mpsc;

use super::Client;
use crate::slurm::model::{Job, JobsWire, Word, state_word};
use crate::slurm::{Jobs, SlurmError};
pub(super) use kept::Queue;
use kept::{Delta, Refresh};
pub use known::{Cover, Known};
use order::{groups, plan, sweep};

/// Pending jobs read longer ago than this are read again (a partition or reason changed in
/// place shows by then; `jobs/state/` shows only states).
pub const REFRESH: Duration = Duration::from_secs(300);
/// The first batch a refresh hands over holds at most this many reads.
pub const MAX_FETCH: usize = 256;
/// `job/{id}` reads in flight at once.
const FETCH_AT_ONCE: usize = 8;
/// A refresh starts reading jobs one by one for at most this long after `jobs/state/` (and
/// keeps the reads then in flight); the next refresh goes on from there.
pub const SLICE: Duration = Duration::from_secs(8);
/// Reads after `jobs/state/` before the first batch is handed over (sooner when the caller's
/// wait would run out).
const FIRST_READS: Duration = Duration::from_secs(1);
/// The first batch waits for this many reads at least (when there are as many to do), whatever
/// its deadline: a pass that decides on `jobs/state/` alone would see no pending job.
const FIRST_MIN: usize = 32;
/// Later batches, at most this often.
const BATCH: Duration = Duration::from_secs(1);
/// A restarted daemon's first refresh reads the jobs above the last one listed before (its lead,
/// see [`Client::lead_from`]) while `jobs/state/` is built: at most this many, the pending ones
/// first, newest first.
const LEAD_MAX: usize = 256;
/// Which ids above it are in the queue is asked `jobs/state/` of this many ids a request (one
/// request of 512 ids: 12 ms at 50,000 jobs on Slurm 24.11, where the whole listing takes 18 s;
/// its query about 6 KB),
const LEAD_WINDOW: u64 = 512;
/// until this many windows in a row hold no job (ids are handed out in order; a gap is jobs that
/// ended and left the queue: 2,048 ids in a row),
const LEAD_EMPTY: u64 = 4;
/// and this many windows at most (32,768 ids).
const LEAD_REACH: u64 = 64;
/// After a refresh failed, the next waits this long.
const FAILED_PAUSE: Duration = Duration::from_secs(10);
/// The most job records kept, unless `SLURMOPS_SLURM_MAX_JOBS` says otherwise (the daemon's
/// memory goes with them, about 0.5 KB a job: `queue.kept_bytes_per_job`); past it the jobs not
/// read yet stay unread.
pub const MAX_JOBS: usize = 200_000;
/// The setting that raises [`MAX_JOBS`].
pub const MAX_JOBS_ENV: &str = "SLURMOPS_SLURM_MAX_JOBS";

/// The job cap SETTING asks for; [`MAX_JOBS`] when unset or not a count.
pub fn max_jobs_from(setting: Option<&str>) -> usize {
    setting
        .and_then(|v| v.trim().replace(['_', ','], "").parse::<usize>().ok())
        .filter(|n| (1..=100_000_000).contains(n))
        .unwrap_or(MAX_JOBS)
}

/// Every job's state as `jobs/state/` gave it (ids as it writes them: `12`, `12_3`, `12+1`).
type States = Arc<HashMap<String, Word>>;

/// A `jobs/state/` answer.
#[derive(serde::Deserialize)]
struct StatesWire {
    #[serde(default)]
    jobs: Vec<StateWire>,
}

#[derive(serde::Deserialize)]
struct StateWire {
    job_id: IdWire,
    #[serde(default)]
    state: Vec<String>,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum IdWire {
    Text(String),
    Number(u64),
}

fn states_of(w: StatesWire) -> States {
    Arc::new(
        w.jobs
            .into_iter()
            .map(|s| {
                let id = match s.job_id {
                    IdWire::Text(t) => t,
                    IdWire::Number(n) => n.to_string(),
                };
                (id, state_word(&s.state))
            })
            .collect(),
    )
}

impl Client {
    /// The jobs read so far (see the module's comment): keeps what the refresh in flight handed
    /// over, starts the refresh that is due, waits for its first batch at most `queue_wait`
    /// after its start, and answers with what is kept and how much of the queue that is.
    pub async fn jobs_known(&self) -> Result<Known, SlurmError> {
        let max = self.config.max_jobs;
        let mut q = self.queue.lock().await;
        q.take_landed(max);
        if q.due(self.config.queue_every, max) {
            self.start_refresh(&mut q);
        }
        if let Some(r) = q.refresh.as_ref().filter(|r| !r.landed) {
            let until = r.started + self.config.queue_wait;
            q.next_batch(until, max).await;
        }
        match q.kept.as_mut() {
            Some(k) => Ok(Known {
                jobs: k.list(),
                cover: k.cover,
            }),
            None => Err(q.error.take().unwrap_or_else(|| q.unknown())),
        }
    }

    /// Every job: waits (at most `queue_wait`) until every job is read; the queue not known
    /// whole by then is an error that says how much is left.
    pub async fn jobs(&self) -> Result<Jobs, SlurmError> {
        let until = Instant::now() + self.config.queue_wait;
        loop {
            let k = self.jobs_known().await?;
            if k.complete() {
                return Ok(k.jobs);
            }
            if let Some(limit) = k.cover.limit {
                return Err(SlurmError::TooManyJobs {
                    path: format!("jobs/state/ ({} jobs)", k.cover.jobs),
                    limit,
                });
            }
            if Instant::now() >= until {
                return Err(SlurmError::QueueUnknown { detail: k.why() });
            }
            let mut q = self.queue.lock().await;
            // The refresh failed: said once as it came, then as a failure kept.
            if q.refresh.is_none() {
                if let Some(e) = q.error.take() {
                    return Err(e);
                }
                if q.failed.is_some() {
                    return Err(q.unknown());
                }
            }
            match q.refresh.is_some() {
                true => q.next_batch(until, self.config.max_jobs).await,
                false => {
                    drop(q);
                    let pause = until.saturating_duration_since(Instant::now());
                    tokio::time::sleep(pause.min(Duration::from_secs(1))).await;
                }
            }
        }
    }

    fn start_refresh(&self, q: &mut Queue) {
        let seen: HashMap<u64, (u64, Instant)> = q
            .kept
            .as_ref()
            .map(|k| {
                k.read
                    .iter()
                    .map(|(id, r)| (*id, (r.digest, r.at)))
                    .collect()
            })
            .unwrap_or_default();
        let kept = q.kept.as_ref().map_or(0, |k| k.records);
        let room = self.config.max_jobs.saturating_sub(kept);
        let sweep = q.kept.as_ref().map_or(0, |k| {
            let pending = k.groups.values().filter(|g| g.pending).count();
            sweep(pending, k.checked_at.elapsed())
        });
        // The lead: the jobs above the highest id known (listed or read), queued since; the
        // first refresh of a restarted daemon starts above what the daemon before it listed.
        let lead = match &q.kept {
            Some(k) => Some(k.listed_to).filter(|n| *n > 0),
            None => q.lead.take(),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(self.clone().follow(seen, room, sweep, lead, tx));
        q.refresh = Some(Refresh {
            task,
            batches: rx,
            started: Instant::now(),
            landed: false,
        });
    }

    /// `jobs/state/`, then the jobs to read (`plan`) for at most [`SLICE`], handed over in
    /// batches: the first within the caller's wait, then one a second. With a LEAD (the last
    /// job id listed before a restart), the jobs above it are read while `jobs/state/` is built,
    /// and handed over first.
    async fn follow(
        self,
        seen: HashMap<u64, (u64, Instant)>,
        room: usize,
        sweep: usize,
        lead: Option<u64>,
        tx: mpsc::UnboundedSender<Delta>,
    ) -> Result<(), SlurmError> {
        let started = Instant::now();
        let listing = self.job_states();
        tokio::pin!(listing);
        let mut listed = None;
        let mut led = std::collections::HashSet::new();
        if let Some(from) = lead {
            let reads = self.lead_reads(from, started + self.config.queue_wait.mul_f32(0.8));
            tokio::pin!(reads);
            let read = loop {
                tokio::select! {
                    biased;
                    r = &mut reads => break r,
                    s = &mut listing, if listed.is_none() => listed = Some(s),
                }
            };
            // Said, not fatal: `jobs/state/` goes on.
            match read {
                Ok(read) if listed.is_none() && !read.is_empty() => {
                    led.extend(read.iter().map(|(id, _)| *id));
                    let read = read.into_iter().map(|(id, jobs)| (id, 0, jobs)).collect();
                    let batch = Delta {
                        states: None,
                        read,
                        lead: true,
                    };
                    if tx.send(batch).is_err() {
                        return Ok(());
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "the jobs above the last one listed could not be read first")
                }
            }
        }
        let states = match listed {
            Some(s) => s?,
            None => listing.await?,
        };
        let took = started.elapsed();
        let groups = groups(&states);
        let mut order = plan(&groups, &seen, Instant::now(), room, sweep);
        // The lead was just read: its jobs are read again by the next refresh (their digests
        // are none), not by this one.
        order.retain(|id| !led.contains(id));
        let first_min = order.len().min(FIRST_MIN);
        let read_from = Instant::now();
        // The slice counts the reads, not `jobs/state/` (at 50,000 jobs on a busy Slurm 24.11 that
        // alone took longer than a slice).
        let stop = read_from + SLICE;
        // The first batch lands within the caller's wait when it can (a daemon's pass waits a
        // few seconds), at most FIRST_READS after jobs/state/.
        let first = (read_from + FIRST_READS)
            .min(started + self.config.queue_wait.mul_f32(0.8))
            .max(read_from);
        let mut batch = Delta {
            states: Some((states, took)),
            ..Delta::default()
        };
        let (mut sent, mut last) = (false, read_from);
        let this = &self;
        // No read starts past the slice; those in flight then (at most FETCH_AT_ONCE, each
        // bounded by the request's timeout) are awaited and kept: dropped, they would have cost
        // slurmrestd their answers and be asked again by the next refresh.
        let mut reads = futures::stream::iter(order)
            .take_while(|_| std::future::ready(Instant::now() < stop))
            .map(|id| async move { (id, this.job_records(id).await) })
            .buffer_unordered(FETCH_AT_ONCE);
        let mut result = Ok(());
        loop {
            let send_at = match (sent, batch.read.len() >= first_min) {
                (true, _) => last + BATCH,
                (false, true) => first,
                // Not the first reads yet: no deadline but the slice's.
                (false, false) => stop,
            };
            // Past the slice only the reads in flight are left: wait for them, sending batches
            // at their pace.
            let send_at = match Instant::now() >= stop {
                true => send_at.max(Instant::now() + BATCH),
                false => send_at.min(stop),
            };
            let until = tokio::time::Instant::from_std(send_at);
            match tokio::time::timeout_at(until, reads.next()).await {
                Ok(Some((id, Ok(jobs)))) => {
                    let digest = groups.get(&id).map_or(0, |g| g.digest);
                    batch.read.push((id, digest, jobs.unwrap_or_default()));
                }
                // slurmrestd or slurmctld out of reach, the credentials refused: the rest waits
                // for the next refresh.
                Ok(Some((_, Err(e))))
                    if e.is_transient()
                        || !matches!(e, SlurmError::Parse { .. } | SlurmError::Api { .. }) =>
                {
                    result = Err(e);
                    break;
                }
                // A record slurmops cannot read (or slurmctld refuses) would stop every refresh
                // at the same job: it is left out, and said.
                Ok(Some((id, Err(e)))) => {
                    tracing::warn!(job = id, error = %e, "a job's record could not be read; it is left out");
                    let digest = groups.get(&id).map_or(0, |g| g.digest);
                    batch.read.push((id, digest, Vec::new()));
                }
                Ok(None) => break,
                Err(_) => {}
            }
            let now = Instant::now();
            let first_ready = sent || batch.read.len() >= first_min;
            let due_at = if sent { last + BATCH } else { first };
            if first_ready && (now >= due_at || (!sent && batch.read.len() >= MAX_FETCH)) {
                if tx.send(std::mem::take(&mut batch)).is_err() {
                    return result;
                }
                (sent, last) = (true, now);
            }
        }
        if !sent || !batch.read.is_empty() {
            let _ = tx.send(batch);
        }
        result
    }

    /// The jobs above FROM (the jobs queued since FROM was listed; slurmctld hands out ids in
    /// order), by UNTIL: which ids are in the queue, asked `jobs/state/` a window of ids at a
    /// time until [`LEAD_EMPTY`] windows in a row hold none (so a run of jobs that ended and left
    /// the queue since is crossed, not taken for the end), then the records of at most
    /// [`LEAD_MAX`] of them, the pending first (autoscale's demand), newest first.
    async fn lead_reads(
        &self,
        from: u64,
        until: Instant,
    ) -> Result<Vec<(u64, Vec<Job>)>, SlurmError> {
        let until = tokio::time::Instant::from_std(until);
        let mut found: Vec<(u64, bool)> = Vec::new();
        let mut empty = 0;
        for w in 0..LEAD_REACH {
            let first = from.saturating_add(1 + w * LEAD_WINDOW);
            let window = first..first.saturating_add(LEAD_WINDOW);
            let Ok(states) = tokio::time::timeout_at(until, self.states_among(window)).await else {
                break;
            };
            let states = states?;
            match states.is_empty() {
                true => empty += 1,
                false => empty = 0,
            }
            found.extend(states);
            if empty >= LEAD_EMPTY {
                break;
            }
        }
        found.sort_by_key(|&(id, pending)| (std::cmp::Reverse(pending), std::cmp::Reverse(id)));
        found.dedup_by_key(|(id, _)| *id);
        found.truncate(LEAD_MAX);
        let this = &self;
        let mut reads = futures::stream::iter(found)
            .map(|(id, _)| async move { (id, this.job_records(id).await) })
            .buffered(FETCH_AT_ONCE);
        let mut out = Vec::new();
        while let Ok(Some((id, r))) = tokio::time::timeout_at(until, reads.next()).await {
            if let Some(jobs) = r?.filter(|j| !j.is_empty()) {
                out.push((id, jobs));
            }
        }
        out.sort_by_key(|(id, _)| *id);
        Ok(out)
    }

    /// Which of the job ids IDS are in the queue, and whether each is pending (`jobs/state/`
    /// asked for those ids alone: slurmctld looks each up, the ids not in the queue are left
    /// out). An array's tasks count for their job's id.
    async fn states_among(
        &self,
        ids: std::ops::Range<u64>,
    ) -> Result<Vec<(u64, bool)>, SlurmError> {
        let query: Vec<String> = ids.map(|id| format!("job_id={id}")).collect();
        let w: StatesWire = self
            .get(&format!("jobs/state/?{}", query.join("&")))
            .await?;
        Ok(w.jobs
            .into_iter()
            .filter_map(|s| {
                let id = match s.job_id {
                    IdWire::Text(t) => {
                        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
                        t[..digits].parse().ok()?
                    }
                    IdWire::Number(n) => n,
                };
                Some((
                    id,
                    s.state.iter().any(|w| w.eq_ignore_ascii_case("PENDING")),
                ))
            })
            .collect())
    }

    /// Every job's id and state (`jobs/state/`, Slurm 23.11 and later), under the deadline of a
    /// slow read.
    async fn job_states(&self) -> Result<States, SlurmError> {
        let w: StatesWire = self.get_slow("jobs/state/").await?;
        Ok(states_of(w))
    }

    /// Job ID's records as slurmctld has them now (an array's tasks and a heterogeneous job's
    /// components with it); None once it left the queue.
    async fn job_records(&self, id: u64) -> Result<Option<Vec<Job>>, SlurmError> {
        let path = format!("job/{id}?flags=ALL");
        let w: JobsWire = match self.get(&path).await {
            Ok(w) => w,
            Err(SlurmError::Api { errors, .. })
                if errors
                    .iter()
                    .any(|e| e.error_number == Some(super::errno::INVALID_JOB_ID)) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        w.jobs
            .into_iter()
            .map(|w| Job::try_from(w).map_err(|e| self.parse_error(&path, e.to_string())))
            .collect::<Result<Vec<Job>, _>>()
            .map(Some)
    }

    /// Job ID as slurmctld has it now; None once it left the queue.
    pub(crate) async fn job_record(&self, id: u64) -> Result<Option<Job>, SlurmError> {
        Ok(self
            .job_records(id)
            .await?
            .and_then(|jobs| jobs.into_iter().find(|j| j.id == id)))
    }

    /// A restarted daemon's first refresh reads the jobs above LAST (the highest job id listed
    /// before it stopped, kept in its status) while `jobs/state/` is built, and hands them over
    /// first: the jobs queued since, at most [`LEAD_MAX`]. Starts that refresh now; nothing once
    /// this client has read the queue.
    pub async fn lead_from(&self, last: u64) {
        let mut q = self.queue.lock().await;
        if q.kept.is_some() || q.refresh.is_some() || q.failed.is_some() {
            return;
        }
        q.lead = Some(last);
        self.start_refresh(&mut q);
    }

    /// The highest job id listed (`jobs/state/`) or read so far; None before any.
    pub async fn jobs_listed_to(&self) -> Option<u64> {
        let q = self.queue.lock().await;
        q.kept.as_ref().map(|k| k.listed_to).filter(|n| *n > 0)
    }

    /// How long a job read waits for a refresh (see `Config::queue_wait`). Only before the
    /// client is shared.
    pub fn set_queue_wait(&mut self, wait: Duration) {
        self.configure(|c| c.queue_wait = wait);
    }

    /// How long the kept queue answers without asking again, at most (see
    /// `Config::queue_every`). Only before the client is shared.
    pub fn set_queue_every(&mut self, every: Duration) {
        self.configure(|c| c.queue_every = every);
    }

    /// The user the jobs it submits run as (see `Config::job_user`). Only before the client is
    /// shared.
    pub fn set_job_user(&mut self, user: &str) {
        self.configure(|c| c.job_user = user.to_string());
    }

    fn configure(&mut self, f: impl FnOnce(&mut super::Config)) {
        match std::sync::Arc::get_mut(&mut self.0) {
            Some(inner) => f(&mut inner.config),
            None => tracing::warn!("a shared client's settings stay as they are"),
        }
    }

    /// Goes on from what OLD (a client of the same slurmrestd, replaced to renew its
    /// credentials) read of the queue and the nodes, its refresh in flight included.
    pub async fn take_reads_from(&self, old: &Client) {
        let taken = std::mem::take(&mut *old.queue.lock().await);
        *self.queue.lock().await = taken;
        let nodes = old.kept_nodes.lock().await.take();
        *self.kept_nodes.lock().await = nodes;
    }

    /// The queue changed by this client's hand: the next job read follows it.
    pub(super) async fn jobs_changed(&self) {
        if let Some(k) = self.queue.lock().await.kept.as_mut() {
            k.changed_at = Some(Instant::now());
        }
    }

    /// Pending jobs per partition (a job pending in several partitions counts in each).
    pub async fn pending_jobs_per_partition(
        &self,
    ) -> Result<std::collections::BTreeMap<String, usize>, SlurmError> {
        let mut out = std::collections::BTreeMap::new();
        for j in self.jobs().await?.iter().filter(|j| j.has_state("PENDING")) {
            for p in j.partition.split(',').filter(|p| !p.is_empty()) {
                *out.entry(p.to_string()).or_default() += 1;
            }
        }
        Ok(out)
    }
}
