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

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::mpsc;

use super::{Client, JOBS_REUSE_FACTOR};
use crate::slurm::model::{Job, JobsWire};
use crate::slurm::{Jobs, SlurmError};

/// Pending jobs read longer ago than this are read again (a partition or reason changed in
/// place shows by then; `jobs/state/` shows only states).
pub const REFRESH: Duration = Duration::from_secs(300);
/// The first batch a refresh hands over holds at most this many reads.
pub const MAX_FETCH: usize = 256;
/// `job/{id}` reads in flight at once.
const FETCH_AT_ONCE: usize = 8;
/// A refresh reads jobs one by one for at most this long after `jobs/state/`; the next refresh
/// goes on from there.
pub const SLICE: Duration = Duration::from_secs(8);
/// Reads after `jobs/state/` before the first batch is handed over (sooner when the caller's
/// wait would run out).
const FIRST_READS: Duration = Duration::from_secs(1);
/// The first batch waits for this many reads at least (when there are as many to do), whatever
/// its deadline: a pass that decides on `jobs/state/` alone would see no pending job.
const FIRST_MIN: usize = 32;
/// Later batches, at most this often.
const BATCH: Duration = Duration::from_secs(1);
/// After a refresh failed, the next waits this long.
const FAILED_PAUSE: Duration = Duration::from_secs(10);
/// The most job records kept, unless `SLURMOPS_SLURM_MAX_JOBS` says otherwise (the daemon's
/// memory goes with them, about 1 KB a job); past it the jobs not read yet stay unread.
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
type States = Arc<HashMap<String, Vec<String>>>;

/// How much of the queue is read: every job listed by `jobs/state/`, and those whose record is
/// not read yet, counted by job id (an array or heterogeneous job once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cover {
    /// Jobs `jobs/state/` listed (array tasks one by one).
    pub jobs: usize,
    /// Job ids not read yet.
    pub unread: usize,
    /// Of those, pending ones: autoscale's demand is a floor while any is left.
    pub pending_unread: usize,
    /// The queue is past the job cap (`SLURMOPS_SLURM_MAX_JOBS`): what is past it stays unread.
    pub limit: Option<usize>,
}

/// The jobs read so far, and how many are not.
#[derive(Debug, Clone, Default)]
pub struct Known {
    pub jobs: Jobs,
    pub cover: Cover,
}

impl Known {
    /// Every job of JOBS is known.
    pub fn all(jobs: Jobs) -> Known {
        Known {
            cover: Cover {
                jobs: jobs.len(),
                ..Cover::default()
            },
            jobs,
        }
    }

    /// Every job is read.
    pub fn complete(&self) -> bool {
        self.cover.unread == 0
    }

    /// Why not every job is known, for the status and the logs.
    pub fn why(&self) -> String {
        let c = &self.cover;
        match c.limit {
            Some(limit) => format!(
                "{} jobs queued, more than slurmops keeps ({limit} jobs): {} not read, so canary and check verdicts wait (autoscale scales out for the pending jobs read). Raise the cap with {MAX_JOBS_ENV} (and the daemon's memory limit with it, slurmops install --jobs)",
                c.jobs, c.unread
            ),
            None => format!(
                "read job by job since the start: {} of {} job ids left ({} of them pending); canary and check verdicts wait for them, autoscale scales out for the pending jobs read",
                c.unread, c.jobs, c.pending_unread
            ),
        }
    }
}

/// The id `job/{id}` answers a job of for: `12` for `12`, `12_3` (an array's task) and `12+1` (a
/// heterogeneous job's component), as `jobs/state/` writes them.
fn base_of(id: &str) -> Option<u64> {
    let end = id.find(|c: char| !c.is_ascii_digit()).unwrap_or(id.len());
    id[..end].parse().ok().filter(|n| *n > 0)
}

/// One job id's entries in `jobs/state/`: a digest of their ids and states (changes when any
/// changes), and whether one is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Group {
    digest: u64,
    pending: bool,
    /// One holds nodes (running, suspended, completing): the jobs a moving worker waits for.
    holding: bool,
}

fn groups(states: &HashMap<String, Vec<String>>) -> HashMap<u64, Group> {
    let mut out: HashMap<u64, Group> = HashMap::with_capacity(states.len());
    for (id, state) in states {
        let Some(base) = base_of(id) else {
            continue;
        };
        // SipHash with fixed keys: the same digest for the same entries in every refresh.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (id, state).hash(&mut h);
        let g = out.entry(base).or_insert(Group {
            digest: 0,
            pending: false,
            holding: false,
        });
        // A sum: the entries' order in the answer does not matter.
        g.digest = g.digest.wrapping_add(h.finish());
        g.pending |= state.iter().any(|s| s == "PENDING");
        g.holding |= state
            .iter()
            .any(|s| ["RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"].contains(&s.as_str()));
    }
    out
}

/// A job id's records as `job/{id}` answered, with the digest of its states then.
struct Read {
    jobs: Vec<Arc<Job>>,
    digest: u64,
    at: Instant,
}

/// What a refresh reads, in order (see the module's comment): GROUPS from `jobs/state/`, SEEN
/// the digest each job id was read at and when. ROOM: job ids that may still be added (the cap);
/// SWEEP: pending jobs read again at most (spread over the passes, not all at once).
fn plan(
    groups: &HashMap<u64, Group>,
    seen: &HashMap<u64, (u64, Instant)>,
    now: Instant,
    room: usize,
    sweep: usize,
) -> Vec<u64> {
    let (mut changed, mut pending, mut holding, mut other, mut old) =
        (vec![], vec![], vec![], vec![], vec![]);
    for (id, g) in groups {
        match seen.get(id) {
            Some((d, _)) if *d != g.digest => changed.push(*id),
            Some((_, at)) if g.pending && now.saturating_duration_since(*at) >= REFRESH => {
                old.push((*at, *id))
            }
            Some(_) => {}
            None if g.pending => pending.push(*id),
            None if g.holding => holding.push(*id),
            None => other.push(*id),
        }
    }
    for v in [&mut changed, &mut pending, &mut holding, &mut other] {
        v.sort_unstable_by(|a, b| b.cmp(a));
    }
    old.sort_unstable();
    // Pending jobs (autoscale's demand) and jobs holding nodes (what moving workers wait for)
    // in turn, so that neither waits for all of the other.
    let mut turns = Vec::with_capacity(pending.len() + holding.len());
    let (mut p, mut h) = (pending.into_iter(), holding.into_iter());
    loop {
        match (p.next(), h.next()) {
            (None, None) => break,
            (a, b) => turns.extend(a.into_iter().chain(b)),
        }
    }
    let mut out = changed;
    out.extend(turns.into_iter().chain(other).take(room));
    out.extend(old.into_iter().take(sweep).map(|(_, id)| id));
    out
}

/// Pending jobs read again by a refresh ELAPSED after the last one, of PENDING read: each once
/// per [`REFRESH`], spread evenly over the refreshes (at least one).
fn sweep(pending: usize, elapsed: Duration) -> usize {
    let share = pending as f64 * elapsed.as_secs_f64() / REFRESH.as_secs_f64();
    (share.ceil() as usize).max(1)
}

/// What one batch of a refresh brought.
#[derive(Default)]
struct Delta {
    /// `jobs/state/` as the refresh read it and what that cost (its first batch only).
    states: Option<(States, Duration)>,
    /// Job ids read: the digest of their states when planned, their records (empty: gone).
    read: Vec<(u64, u64, Vec<Job>)>,
}

/// A refresh in flight: its task, and the batches it hands over.
struct Refresh {
    task: tokio::task::JoinHandle<Result<(), SlurmError>>,
    batches: mpsc::UnboundedReceiver<Delta>,
    started: Instant,
    /// Its first batch was taken.
    landed: bool,
}

/// What the client knows of the queue, and the refresh in flight.
#[derive(Default)]
pub(super) struct Queue {
    kept: Option<Kept>,
    refresh: Option<Refresh>,
    /// When the last refresh failed, and why.
    failed: Option<(Instant, String)>,
    /// That failure itself, until a caller is told it.
    error: Option<SlurmError>,
}

impl Drop for Queue {
    fn drop(&mut self) {
        if let Some(r) = &self.refresh {
            r.task.abort();
        }
    }
}

struct Kept {
    states: States,
    groups: HashMap<u64, Group>,
    read: HashMap<u64, Read>,
    /// Records in `read`.
    records: usize,
    /// The records as handed out, until they change.
    shared: Option<Jobs>,
    cover: Cover,
    checked_at: Instant,
    check_took: Duration,
    /// When this client last changed the queue (a submission, a cancellation): a refresh
    /// started before then does not make the kept queue current.
    changed_at: Option<Instant>,
}

impl Kept {
    /// The records, sorted by id, each in its state as `jobs/state/` last gave it.
    fn list(&mut self) -> Jobs {
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
    fn current(&self, every: Duration) -> bool {
        let after_change = self.changed_at.is_none_or(|t| t < self.checked_at);
        after_change && self.checked_at.elapsed() < (self.check_took * JOBS_REUSE_FACTOR).min(every)
    }

    /// Job ids not read yet that the cap leaves room for.
    fn crawling(&self, max_jobs: usize) -> bool {
        self.cover.unread > 0 && self.records < max_jobs
    }

    fn recount(&mut self, max_jobs: usize) {
        self.records = self.read.values().map(|r| r.jobs.len().max(1)).sum();
        let mut cover = Cover {
            jobs: self.states.len(),
            limit: (self.states.len() > max_jobs).then_some(max_jobs),
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
fn apply(kept: &mut Option<Kept>, started: Instant, d: Delta, max_jobs: usize) {
    if let Some((states, took)) = d.states {
        let groups = groups(&states);
        let k = kept.get_or_insert_with(|| Kept {
            states: Arc::default(),
            groups: HashMap::new(),
            read: HashMap::new(),
            records: 0,
            shared: None,
            cover: Cover::default(),
            checked_at: started,
            check_took: took,
            changed_at: None,
        });
        k.read.retain(|id, _| groups.contains_key(id));
        k.groups = groups;
        k.states = states;
        k.checked_at = started;
        k.check_took = took;
    }
    let Some(k) = kept.as_mut() else {
        return;
    };
    let now = Instant::now();
    for (id, digest, jobs) in d.read {
        k.read.insert(
            id,
            Read {
                jobs: jobs.into_iter().map(Arc::new).collect(),
                digest,
                at: now,
            },
        );
    }
    k.shared = None;
    k.recount(max_jobs);
}

impl Queue {
    /// A refresh is due now.
    fn due(&self, every: Duration, max_jobs: usize) -> bool {
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
    fn take_landed(&mut self, max_jobs: usize) {
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
    async fn next_batch(&mut self, until: Instant, max_jobs: usize) {
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
    fn unknown(&self) -> SlurmError {
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
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(self.clone().follow(seen, room, sweep, tx));
        q.refresh = Some(Refresh {
            task,
            batches: rx,
            started: Instant::now(),
            landed: false,
        });
    }

    /// `jobs/state/`, then the jobs to read (`plan`) for at most [`SLICE`], handed over in
    /// batches: the first within the caller's wait, then one a second.
    async fn follow(
        self,
        seen: HashMap<u64, (u64, Instant)>,
        room: usize,
        sweep: usize,
        tx: mpsc::UnboundedSender<Delta>,
    ) -> Result<(), SlurmError> {
        let started = Instant::now();
        let states = self.job_states().await?;
        let took = started.elapsed();
        let groups = groups(&states);
        let order = plan(&groups, &seen, Instant::now(), room, sweep);
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
            read: Vec::new(),
        };
        let (mut sent, mut last) = (false, read_from);
        let this = &self;
        let mut reads = futures::stream::iter(order)
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
            let until = tokio::time::Instant::from_std(send_at.min(stop));
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
            if now >= stop {
                break;
            }
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

    /// Every job's id and state (`jobs/state/`, Slurm 23.11 and later), under the deadline of a
    /// slow read.
    async fn job_states(&self) -> Result<States, SlurmError> {
        #[derive(serde::Deserialize)]
        struct StatesWire {
            #[serde(default)]
            jobs: Vec<State>,
        }
        #[derive(serde::Deserialize)]
        struct State {
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
        let w: StatesWire = self.get_slow("jobs/state/").await?;
        Ok(Arc::new(
            w.jobs
                .into_iter()
                .map(|s| {
                    let id = match s.job_id {
                        IdWire::Text(t) => t,
                        IdWire::Number(n) => n.to_string(),
                    };
                    (id, s.state)
                })
                .collect(),
        ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_cap_is_a_count_and_nonsense_keeps_the_default() {
        assert_eq!(max_jobs_from(None), MAX_JOBS);
        assert_eq!(max_jobs_from(Some("2_000_000")), 2_000_000);
        assert_eq!(max_jobs_from(Some("lots")), MAX_JOBS);
        assert_eq!(max_jobs_from(Some("0")), MAX_JOBS);
    }

    fn states(entries: &[(&str, &str)]) -> HashMap<String, Vec<String>> {
        entries
            .iter()
            .map(|(id, s)| (id.to_string(), vec![s.to_string()]))
            .collect()
    }

    #[test]
    fn array_tasks_and_components_are_read_through_their_job_id() {
        assert_eq!(base_of("12"), Some(12));
        assert_eq!(base_of("12_3"), Some(12));
        assert_eq!(base_of("12+1"), Some(12));
        assert_eq!(base_of(""), None);
        assert_eq!(base_of("x"), None);
        let g = groups(&states(&[
            ("12_1", "RUNNING"),
            ("12_2", "PENDING"),
            ("13", "RUNNING"),
        ]));
        assert_eq!(g.len(), 2);
        assert!(g[&12].pending);
        assert!(!g[&13].pending);
        // The digest follows the entries, not their order, and changes with any state.
        let again = groups(&states(&[
            ("13", "RUNNING"),
            ("12_2", "PENDING"),
            ("12_1", "RUNNING"),
        ]));
        assert_eq!(g, again);
        let moved = groups(&states(&[
            ("12_1", "RUNNING"),
            ("12_2", "RUNNING"),
            ("13", "RUNNING"),
        ]));
        assert_ne!(g[&12].digest, moved[&12].digest);
        assert_eq!(g[&13], moved[&13]);
    }

    #[test]
    fn a_refresh_reads_changed_jobs_then_pending_and_running_ones_newest_first_then_the_rest() {
        let now = Instant::now();
        let s = states(&[
            ("1", "PENDING"),
            ("2", "RUNNING"),
            ("3", "PENDING"),
            ("4", "COMPLETED"),
            ("5", "PENDING"),
            ("6", "RUNNING"),
        ]);
        let g = groups(&s);
        // Nothing read yet (a start): pending jobs and running ones in turn, newest first, then
        // the others.
        assert_eq!(
            plan(&g, &HashMap::new(), now, 100, 0),
            vec![5, 6, 3, 2, 1, 4]
        );
        // The cap leaves room for three.
        assert_eq!(plan(&g, &HashMap::new(), now, 3, 0), vec![5, 6, 3]);
        // 6 was read running and finished since (it changed: first), 1 and 2 are read and
        // unchanged (not again), 3 was read pending long ago (last: a partition may have changed
        // in place).
        let long_ago = now.checked_sub(REFRESH * 2).unwrap_or(now);
        let mut seen: HashMap<u64, (u64, Instant)> = HashMap::new();
        seen.insert(1, (g[&1].digest, now));
        seen.insert(2, (g[&2].digest, now));
        seen.insert(3, (g[&3].digest, long_ago));
        let ran = groups(&states(&[("6", "RUNNING")]));
        seen.insert(6, (ran[&6].digest, now));
        let mut finished = s.clone();
        finished.insert("6".into(), vec!["COMPLETED".into()]);
        let g = groups(&finished);
        let order = plan(&g, &seen, now, 100, 1);
        match long_ago < now {
            true => assert_eq!(order, vec![6, 5, 4, 3]),
            false => assert_eq!(order, vec![6, 5, 4]),
        }
        // Without a sweep this refresh, the pending job read long ago waits for a later one.
        assert_eq!(plan(&g, &seen, now, 100, 0), vec![6, 5, 4]);
    }

    #[test]
    fn pending_jobs_are_read_again_once_per_refresh_period_spread_over_the_passes() {
        // 50,000 pending jobs, a refresh every 10 s: about 1,700 each, every one within 300 s.
        assert_eq!(sweep(50_000, Duration::from_secs(10)), 1667);
        assert_eq!(sweep(3, Duration::from_secs(1)), 1);
        assert_eq!(sweep(0, Duration::from_secs(1)), 1);
    }

    fn job(id: u64, state: &str, partition: &str) -> Job {
        Job {
            id,
            state: vec![state.into()],
            partition: partition.into(),
            ..Job::default()
        }
    }

    #[test]
    fn what_is_kept_counts_what_is_left_and_hands_out_the_newest_states() {
        let started = Instant::now();
        let s: States = Arc::new(states(&[
            ("1", "PENDING"),
            ("2", "PENDING"),
            ("3", "RUNNING"),
        ]));
        let g = groups(&s);
        let mut kept = None;
        // The first batch: the states and job 2.
        apply(
            &mut kept,
            started,
            Delta {
                states: Some((s.clone(), Duration::from_millis(5))),
                read: vec![(2, g[&2].digest, vec![job(2, "PENDING", "a")])],
            },
            1000,
        );
        let k = kept.as_mut().unwrap();
        assert_eq!(
            k.cover,
            Cover {
                jobs: 3,
                unread: 2,
                pending_unread: 1,
                limit: None
            }
        );
        assert_eq!(k.list().len(), 1);
        // The next batch: the rest.
        apply(
            &mut kept,
            started,
            Delta {
                states: None,
                read: vec![
                    (1, g[&1].digest, vec![job(1, "PENDING", "a")]),
                    (3, g[&3].digest, vec![job(3, "RUNNING", "b")]),
                ],
            },
            1000,
        );
        let k = kept.as_mut().unwrap();
        assert_eq!(k.cover.unread, 0);
        let ids: Vec<u64> = k.list().iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        // A new jobs/state/: 2 runs now (its record is handed out in that state until it is
        // read again), 3 is gone, 4 came (unread, counted).
        let s2: States = Arc::new(states(&[
            ("1", "PENDING"),
            ("2", "RUNNING"),
            ("4", "PENDING"),
        ]));
        apply(
            &mut kept,
            started,
            Delta {
                states: Some((s2, Duration::from_millis(5))),
                read: vec![],
            },
            1000,
        );
        let k = kept.as_mut().unwrap();
        assert_eq!(k.cover.unread, 1);
        assert_eq!(k.cover.pending_unread, 1);
        let list = k.list();
        let ids: Vec<u64> = list.iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![1, 2]);
        assert!(list[1].has_state("RUNNING"));
        // Past the cap: said, with the setting.
        k.recount(2);
        assert_eq!(k.cover.limit, Some(2));
        let known = Known {
            jobs: k.list(),
            cover: k.cover,
        };
        assert!(known.why().contains(MAX_JOBS_ENV), "{}", known.why());
    }

    /// A slurmrestd of HELD held jobs (ids 1..=HELD) and, newest, one job that workers would
    /// start; each `job/{id}` answered after DELAY. Counts the requests by kind.
    fn fake_slurmrestd(
        held: u64,
        delay: Duration,
        asked: Arc<std::sync::Mutex<Vec<String>>>,
    ) -> String {
        use std::io::{BufRead, BufReader, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let asked = asked.clone();
                std::thread::spawn(move || {
                    let mut r = BufReader::new(s.try_clone().unwrap());
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    let path = line.split(' ').nth(1).unwrap_or("").to_string();
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) <= 2 {
                            break;
                        }
                    }
                    asked.lock().unwrap().push(path.clone());
                    let body = if path.ends_with("/jobs/state/") {
                        let jobs: Vec<String> = (1..=held + 1)
                            .map(|i| format!(r#"{{"job_id":"{i}","state":["PENDING"]}}"#))
                            .collect();
                        format!(r#"{{"jobs":[{}]}}"#, jobs.join(","))
                    } else if let Some(id) = path
                        .split("/job/")
                        .nth(1)
                        .and_then(|x| x.split('?').next())
                        .and_then(|x| x.parse::<u64>().ok())
                    {
                        std::thread::sleep(delay);
                        let reason = if id > held {
                            "Resources"
                        } else {
                            "JobHeldUser"
                        };
                        format!(
                            r#"{{"jobs":[{{"job_id":{id},"job_state":["PENDING"],"partition":"p","state_reason":"{reason}","node_count":{{"set":true,"infinite":false,"number":1}}}}]}}"#
                        )
                    } else {
                        r#"{"jobs":[]}"#.to_string()
                    };
                    let mut s = s;
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                });
            }
        });
        url
    }

    fn client_of(url: String, wait: Duration) -> Client {
        let mut config = super::super::Config::new(
            url,
            crate::slurm::auth::Credentials::Token {
                token: crate::slurm::auth::Secret::new("t"),
                user: None,
            },
        );
        config.parser = Some(crate::slurm::DataParser::V0042);
        config.queue_wait = wait;
        config.attempts = 1;
        Client::new(config).unwrap()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_start_against_a_large_queue_decides_on_the_newest_pending_jobs_read_and_learns_the_rest_job_by_job()
     {
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let url = fake_slurmrestd(2_000, Duration::from_millis(2), asked.clone());
        // A daemon's pass: waits a few seconds for the first batch.
        let daemon = client_of(url.clone(), Duration::from_secs(3));
        let started = Instant::now();
        let first = daemon.jobs_known().await.unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(!first.complete());
        assert_eq!(first.cover.jobs, 2_001);
        // The newest job (the one workers would start) is among the first read.
        assert!(
            first
                .jobs
                .iter()
                .any(|j| j.id == 2_001 && j.state_reason == "Resources")
        );
        assert!(first.jobs.len() >= FIRST_MIN, "{}", first.jobs.len());
        assert!(first.cover.pending_unread > 0);
        assert!(first.why().contains("left"), "{}", first.why());
        // Passes go on: every job is read within a few refreshes, none of them whole.
        let mut k = first;
        while !k.complete() && started.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            k = daemon.jobs_known().await.unwrap();
        }
        assert!(k.complete(), "{:?}", k.cover);
        assert_eq!(k.jobs.len(), 2_001);
        let paths = asked.lock().unwrap().clone();
        assert!(
            paths
                .iter()
                .all(|p| !p.contains("/jobs/?") && !p.ends_with("/jobs/")),
            "a whole read"
        );
        let reads = paths.iter().filter(|p| p.contains("/job/")).count();
        assert_eq!(reads, 2_001, "each job read once");
        // A command waits for every job.
        let command = client_of(url, Duration::from_secs(60));
        assert_eq!(command.jobs().await.unwrap().len(), 2_001);
    }
}
