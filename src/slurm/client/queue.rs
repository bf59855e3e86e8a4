//! Slurm's job queue at the size of the clusters slurmops is for (50,000 to 100,000 jobs). One
//! answer with every job is hundreds of MB (about 7.6 KB a job) that slurmrestd needs about a
//! minute to build, so that read is rare, parsed as it arrives into the fields slurmops uses
//! (memory goes with the jobs kept, not with the answer). Between two whole reads the kept queue
//! follows `jobs/state/` (about 80 bytes a job: every job's id and state) and reads `job/{id}` for
//! each job that appeared or changed state. What `jobs/state/` cannot tell — a pending job's
//! reason or partition changed in place, array and heterogeneous jobs — waits for the next whole
//! read, at most every [`REFRESH`] or ten times what the last one cost, whichever is longer.
//!
//! Every refresh (whole or following) runs in a task of its own, one at a time, under the
//! deadline of a whole-queue read: a job read starts the refresh that is due and waits for it at
//! most `Config::queue_wait`, then answers with the freshest queue kept (the daemon's passes go on;
//! a command waits). Slurm 24.11's slurmrestd builds `jobs/state/` in time that grows faster than
//! the queue (0.6 s at 20,000 jobs, about 15 s at 100,000), so it too is spaced at ten times its
//! cost.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::Method;

use super::stream::Stream;
use super::{Client, JOBS_REUSE_CAP, JOBS_REUSE_FACTOR};
use crate::slurm::model::{Job, JobsWire};
use crate::slurm::{Jobs, SlurmError};

/// The kept queue is read whole again at most this often (or ten times what the last whole read
/// cost, if longer): reasons and partitions changed in place show by then.
pub const REFRESH: Duration = Duration::from_secs(300);
/// After a whole read failed for its size or deadline, the next waits this long (it would fail
/// the same way, and slurmrestd may still be building the last answer).
const FAILED_HEAVY: Duration = REFRESH;
/// After any other failure (slurmrestd restarting), the next whole read waits this long.
const FAILED_LIGHT: Duration = Duration::from_secs(30);
/// At most this many `job/{id}` reads follow one `jobs/state/`; past it, a whole read.
pub const MAX_FETCH: usize = 256;
/// `job/{id}` reads in flight at once.
const FETCH_AT_ONCE: usize = 8;
/// The largest queue read whole, unless `SLURMOPS_SLURM_MAX_JOBS` says otherwise: 50,000 was
/// read in about a minute, and Slurm 24.11's slurmrestd died building the answer for 100,000
/// (the jobs bench, on this machine); past it, what needs the jobs waits and says so.
pub const MAX_JOBS: usize = 60_000;
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

/// What the client knows of the queue, and the refresh in flight.
#[derive(Default)]
pub(super) struct Queue {
    kept: Option<Kept>,
    refresh: Option<Refresh>,
    /// When the last whole read failed, how long the next one waits, and why.
    failed: Option<(Instant, Duration, String)>,
}

impl Drop for Queue {
    fn drop(&mut self) {
        if let Some(r) = &self.refresh {
            r.task.abort();
        }
    }
}

/// A refresh in flight.
struct Refresh {
    task: tokio::task::JoinHandle<Result<Refreshed, SlurmError>>,
    started: Instant,
    whole: bool,
}

/// What a refresh brought.
enum Refreshed {
    /// Every job (None: no change since the kept queue's `last_update`), and `jobs/state/` as
    /// read just before, which the answer is at least as new as.
    Whole {
        states: States,
        states_took: Duration,
        jobs: Option<Vec<Job>>,
        last_update: Option<i64>,
    },
    Followed(Delta),
}

/// The kept queue brought up to `jobs/state/`.
struct Delta {
    states: States,
    took: Duration,
    /// Jobs read again (None: gone meanwhile), jobs gone, known jobs' new states.
    read: Vec<(u64, Option<Job>)>,
    gone: Vec<u64>,
    patched: Vec<(u64, Vec<String>)>,
    /// Something only a whole read tells changed.
    stale: bool,
}

struct Kept {
    jobs: BTreeMap<u64, Arc<Job>>,
    /// `jobs` as handed out, until they change.
    shared: Option<Jobs>,
    states: States,
    last_update: Option<i64>,
    whole_at: Instant,
    whole_took: Duration,
    checked_at: Instant,
    check_took: Duration,
    /// When this client last changed the queue (a submission, a cancellation): a refresh
    /// started before then does not make the kept queue current.
    changed_at: Option<Instant>,
    stale: bool,
}

impl Kept {
    fn list(&mut self) -> Jobs {
        let jobs = &self.jobs;
        self.shared
            .get_or_insert_with(|| jobs.values().cloned().collect())
            .clone()
    }

    /// A whole read is due: the last one is older than REFRESH and ten times its cost, or what
    /// the kept queue lacks needs one as soon as the ten times have passed.
    fn whole_due(&self) -> bool {
        let spaced = self.whole_at.elapsed() >= self.whole_took * JOBS_REUSE_FACTOR;
        spaced && (self.stale || self.whole_at.elapsed() >= REFRESH)
    }

    /// Young enough to answer with as it is: checked after this client's last change, and
    /// within ten times what the check cost.
    fn current(&self) -> bool {
        let after_change = self.changed_at.is_none_or(|t| t < self.checked_at);
        after_change
            && self.checked_at.elapsed() < (self.check_took * JOBS_REUSE_FACTOR).min(JOBS_REUSE_CAP)
    }

    fn apply(&mut self, started: Instant, d: Delta) {
        if !(d.gone.is_empty() && d.patched.is_empty() && d.read.is_empty()) {
            self.shared = None;
        }
        for id in d.gone {
            self.jobs.remove(&id);
        }
        for (id, state) in d.patched {
            if let Some(j) = self.jobs.get_mut(&id) {
                Arc::make_mut(j).state = state;
            }
        }
        for (id, job) in d.read {
            match job {
                Some(j) => self.jobs.insert(id, Arc::new(j)),
                None => self.jobs.remove(&id),
            };
        }
        self.states = d.states;
        self.stale |= d.stale;
        self.checked_at = started;
        self.check_took = d.took;
    }
}

/// A refresh to start.
#[derive(Clone, Copy)]
enum Due {
    /// A whole read, asking for changes since this `last_update` when given.
    Whole(Option<i64>),
    /// `jobs/state/` and the jobs that changed.
    Follow,
}

/// Why a failed whole read waits this long before the next.
fn wait_after(e: &SlurmError) -> Duration {
    match e {
        SlurmError::Timeout { .. }
        | SlurmError::TooLarge { .. }
        | SlurmError::TooManyJobs { .. } => FAILED_HEAVY,
        _ => FAILED_LIGHT,
    }
}

impl Queue {
    /// The refresh due now, if any.
    fn due(&self) -> Option<Due> {
        if self.refresh.is_some() {
            return None;
        }
        let may_whole = self
            .failed
            .as_ref()
            .is_none_or(|(at, wait, _)| at.elapsed() >= *wait);
        match &self.kept {
            None => may_whole.then_some(Due::Whole(None)),
            Some(k) if k.whole_due() && may_whole => Some(Due::Whole(k.last_update)),
            Some(k) if !k.current() => Some(Due::Follow),
            Some(_) => None,
        }
    }

    /// The end of refresh R: what it brought kept, or its failure remembered. The failure is
    /// returned when nothing is kept to fall back on.
    fn finish(
        &mut self,
        r: Refresh,
        result: Result<Refreshed, SlurmError>,
    ) -> Result<(), SlurmError> {
        match result {
            Ok(Refreshed::Whole {
                states,
                states_took,
                jobs,
                last_update,
            }) => {
                self.failed = None;
                let took = r.started.elapsed();
                match (jobs, &mut self.kept) {
                    (None, Some(k)) => {
                        k.whole_at = r.started;
                        k.whole_took = took;
                        k.stale = false;
                    }
                    (jobs, kept) => {
                        let changed_at = kept.as_ref().and_then(|k| k.changed_at);
                        *kept = Some(Kept {
                            jobs: jobs
                                .unwrap_or_default()
                                .into_iter()
                                .map(|j| (j.id, Arc::new(j)))
                                .collect(),
                            shared: None,
                            states,
                            last_update,
                            whole_at: r.started,
                            whole_took: took,
                            checked_at: r.started,
                            check_took: states_took,
                            changed_at,
                            stale: false,
                        })
                    }
                }
                Ok(())
            }
            Ok(Refreshed::Followed(d)) => {
                if let Some(k) = &mut self.kept {
                    k.apply(r.started, d);
                }
                Ok(())
            }
            Err(e) if r.whole => {
                let wait = wait_after(&e);
                self.failed = Some((Instant::now(), wait, e.to_string()));
                match &mut self.kept {
                    Some(k) => {
                        // Not again before the wait: the kept queue goes on following.
                        k.whole_at = Instant::now();
                        k.whole_took = wait / JOBS_REUSE_FACTOR;
                        tracing::warn!(error = %e, "the whole job queue read failed; the kept queue goes on");
                        Ok(())
                    }
                    None => Err(e),
                }
            }
            Err(e) => {
                // A following read failed: the kept queue stays, asked again after a pause.
                if let Some(k) = &mut self.kept {
                    k.checked_at = Instant::now();
                    k.check_took = k.check_took.max(Duration::from_secs(1));
                }
                tracing::warn!(error = %e, "following the job queue failed; the kept queue stays");
                Ok(())
            }
        }
    }

    /// Why there is no queue to answer with.
    fn unknown(&self) -> SlurmError {
        let detail = match (&self.refresh, &self.failed) {
            (Some(r), _) => format!(
                "a read of the whole queue has run for {} s in the background (a queue of 50,000 jobs takes about a minute); what needs the jobs waits for it",
                r.started.elapsed().as_secs()
            ),
            (None, Some((at, wait, why))) => format!(
                "the last read of the whole queue failed {} s ago ({why}); the next starts in {} s",
                at.elapsed().as_secs(),
                wait.saturating_sub(at.elapsed()).as_secs()
            ),
            (None, None) => "no read of the whole queue has started".to_string(),
        };
        SlurmError::QueueUnknown { detail }
    }
}

/// A refresh's task ended: its result.
fn joined(
    r: Result<Result<Refreshed, SlurmError>, tokio::task::JoinError>,
) -> Result<Refreshed, SlurmError> {
    r.unwrap_or_else(|e| {
        Err(SlurmError::Config(format!(
            "the job queue read stopped: {e}"
        )))
    })
}

impl Client {
    /// Every job, as the fields slurmops reads (see the module's comment for how it is kept
    /// current): starts the refresh that is due, waits for it at most `queue_wait`, and answers
    /// with the freshest queue kept.
    pub async fn jobs(&self) -> Result<Jobs, SlurmError> {
        let mut q = self.queue.lock().await;
        if q.refresh.as_ref().is_some_and(|r| r.task.is_finished()) {
            let mut r = q.refresh.take().expect("a refresh");
            let result = joined((&mut r.task).await);
            q.finish(r, result)?;
        }
        if let Some(due) = q.due() {
            let states = q.kept.as_ref().map(|k| Arc::clone(&k.states));
            let task = match due {
                Due::Whole(since) => tokio::spawn(self.clone().whole(since)),
                Due::Follow => tokio::spawn(self.clone().follow(states.unwrap_or_default())),
            };
            q.refresh = Some(Refresh {
                task,
                started: Instant::now(),
                whole: matches!(due, Due::Whole(_)),
            });
        }
        if let Some(r) = q.refresh.as_mut() {
            let left = self.config.queue_wait.saturating_sub(r.started.elapsed());
            if let Ok(result) = tokio::time::timeout(left, &mut r.task).await {
                let r = q.refresh.take().expect("a refresh");
                q.finish(r, joined(result))?;
            }
        }
        match &mut q.kept {
            Some(k) => Ok(k.list()),
            None => Err(q.unknown()),
        }
    }

    /// `jobs/state/`, then the jobs that appeared or changed state since OLD.
    async fn follow(self, old: States) -> Result<Refreshed, SlurmError> {
        let started = Instant::now();
        let states = self.job_states().await?;
        let mut fetch = Vec::new();
        let mut stale = false;
        for (id, state) in states.iter() {
            if old.get(id) != Some(state) {
                match id.parse::<u64>() {
                    Ok(n) => fetch.push(n),
                    Err(_) => stale = true,
                }
            }
        }
        let mut gone = Vec::new();
        for id in old.keys().filter(|id| !states.contains_key(*id)) {
            match id.parse::<u64>() {
                Ok(n) => gone.push(n),
                Err(_) => stale = true,
            }
        }
        let (mut read, mut patched) = (Vec::new(), Vec::new());
        if fetch.len() <= MAX_FETCH {
            let this = &self;
            let answers: Vec<Result<(u64, Option<Job>), SlurmError>> =
                futures::stream::iter(fetch.iter().copied())
                    .map(|id| async move { Ok((id, this.job_record(id).await?)) })
                    .buffer_unordered(FETCH_AT_ONCE)
                    .collect()
                    .await;
            read = answers.into_iter().collect::<Result<_, _>>()?;
        } else {
            // Too many to read one by one: the known ones at least get their state.
            stale = true;
            patched = fetch
                .iter()
                .filter_map(|id| Some((*id, states.get(&id.to_string())?.clone())))
                .collect();
        }
        Ok(Refreshed::Followed(Delta {
            states,
            took: started.elapsed(),
            read,
            gone,
            patched,
            stale,
        }))
    }

    /// `jobs/state/`, then every job (changes since SINCE when given), parsed as it arrives.
    async fn whole(self, since: Option<i64>) -> Result<Refreshed, SlurmError> {
        let started = Instant::now();
        let states = self.job_states().await?;
        let states_took = started.elapsed();
        // Counted before it is asked for: slurmrestd builds the whole answer in its memory, and
        // Slurm 24.11's died building one of 100,000 jobs (the jobs bench, this machine).
        if states.len() > self.config.max_jobs {
            return Err(SlurmError::TooManyJobs {
                path: format!("jobs/ ({} jobs by jobs/state/)", states.len()),
                limit: self.config.max_jobs,
            });
        }
        let p = self.parser().await?;
        let path = match since {
            Some(t) => format!("jobs/?update_time={t}&flags=ALL"),
            None => "jobs/?flags=ALL".to_string(),
        };
        let base = self.preferred_base();
        let url = format!("{base}/slurm/{}/{path}", p.as_str());
        self.sent.fetch_add(1, Ordering::Relaxed);
        let req = self
            .authorized(&Method::GET, &url, None)
            .timeout(self.config.queue_timeout);
        let stream = Stream {
            base,
            path,
            secs: self.config.queue_timeout.as_secs(),
            received: self.received.clone(),
            max_record: self.config.max_answer as u64,
            max_jobs: self.config.max_jobs,
        };
        let s = stream.read(req).await?;
        Ok(Refreshed::Whole {
            states,
            states_took,
            jobs: s.jobs,
            last_update: s.last_update,
        })
    }

    /// Every job's id and state (`jobs/state/`, Slurm 23.11 and later), under the deadline of a
    /// whole-queue read.
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

    /// Job ID as slurmctld has it now; None once it left the queue.
    pub(crate) async fn job_record(&self, id: u64) -> Result<Option<Job>, SlurmError> {
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
        let mut found = None;
        for w in w.jobs {
            let j = Job::try_from(w).map_err(|e| self.parse_error(&path, e.to_string()))?;
            if j.id == id {
                found = Some(j);
            }
        }
        Ok(found)
    }

    /// How long a job read waits for a refresh (see `Config::queue_wait`). Only before the
    /// client is shared.
    pub fn set_queue_wait(&mut self, wait: Duration) {
        self.configure(|c| c.queue_wait = wait);
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
    pub async fn pending_jobs_per_partition(&self) -> Result<BTreeMap<String, usize>, SlurmError> {
        let mut out = BTreeMap::new();
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
}
