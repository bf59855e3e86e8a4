//! Slurm's job queue at the size of the clusters slurmops is for (50,000 to 100,000 jobs). One
//! answer with every job is hundreds of MB (about 7.6 KB a job) that slurmrestd needs about a
//! minute to build, so that read is rare: in the background, one at a time, under a deadline of
//! its own, parsed as it arrives into the fields slurmops uses (memory goes with the jobs kept,
//! not with the answer). Between two whole reads the kept queue follows `jobs/state/` (about 80
//! bytes a job: every job's id and state) and reads `job/{id}` for each job that appeared or
//! changed state. What `jobs/state/` cannot tell — a pending job's reason or partition changed
//! in place, array and heterogeneous jobs — waits for the next whole read, at most every
//! [`REFRESH`] or ten times what the last one cost, whichever is longer.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hyper::body::Bytes;
use reqwest::{Method, StatusCode};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{Client, JOBS_REUSE_CAP, JOBS_REUSE_FACTOR};
use crate::slurm::SlurmError;
use crate::slurm::model::{ApiMessage, Job, JobWire, JobsWire};

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
/// Jobs one whole read keeps, unless `SLURMOPS_SLURM_MAX_JOBS` says otherwise.
pub const MAX_JOBS: usize = 1_000_000;
/// The setting that raises [`MAX_JOBS`].
pub const MAX_JOBS_ENV: &str = "SLURMOPS_SLURM_MAX_JOBS";

/// The job cap SETTING asks for; [`MAX_JOBS`] when unset or not a count.
pub(super) fn max_jobs_from(setting: Option<&str>) -> usize {
    setting
        .and_then(|v| v.trim().replace(['_', ','], "").parse::<usize>().ok())
        .filter(|n| (1..=100_000_000).contains(n))
        .unwrap_or(MAX_JOBS)
}

/// What the client knows of the queue, and the whole read in flight.
#[derive(Default)]
pub(super) struct Queue {
    kept: Option<Kept>,
    reading: Option<Reading>,
    /// When the last whole read failed, and how long the next one waits.
    failed: Option<(Instant, Duration, String)>,
}

impl Drop for Queue {
    fn drop(&mut self) {
        if let Some(r) = &self.reading {
            r.task.abort();
        }
    }
}

struct Reading {
    task: tokio::task::JoinHandle<Result<Streamed, SlurmError>>,
    started: Instant,
    /// `jobs/state/` read just before: what the whole answer is at least as new as.
    states: HashMap<String, Vec<String>>,
    states_took: Duration,
}

struct Kept {
    jobs: BTreeMap<u64, Job>,
    /// Every job's state as `jobs/state/` gave it (ids as it writes them: `12`, `12_3`, `12+1`).
    states: HashMap<String, Vec<String>>,
    last_update: Option<i64>,
    whole_at: Instant,
    whole_took: Duration,
    checked_at: Instant,
    check_took: Duration,
    /// False once this client changed the queue (a submission, a cancellation).
    reusable: bool,
    /// `jobs/state/` showed what only a whole read tells (an array or heterogeneous job).
    stale: bool,
}

impl Kept {
    fn list(&self) -> Vec<Job> {
        self.jobs.values().cloned().collect()
    }

    /// A whole read may start: the last one is older than REFRESH and ten times its cost, or
    /// what the kept queue lacks needs one as soon as the ten times have passed.
    fn whole_due(&self) -> bool {
        let spaced = self.whole_at.elapsed() >= self.whole_took * JOBS_REUSE_FACTOR;
        spaced && (self.stale || self.whole_at.elapsed() >= REFRESH)
    }
}

/// The answer of one whole read.
struct Streamed {
    /// None: "no change since update_time".
    jobs: Option<Vec<Job>>,
    last_update: Option<i64>,
}

impl Queue {
    /// Takes a finished whole read in; its error when nothing is kept to fall back on.
    async fn collect(&mut self) -> Result<(), SlurmError> {
        if !self.reading.as_ref().is_some_and(|r| r.task.is_finished()) {
            return Ok(());
        }
        let Some(mut r) = self.reading.take() else {
            return Ok(());
        };
        let result = joined((&mut r.task).await);
        self.finish(r, result)
    }

    /// The end of whole read R: its RESULT kept, or its failure remembered (and returned when
    /// nothing is kept to fall back on).
    fn finish(
        &mut self,
        r: Reading,
        result: Result<Streamed, SlurmError>,
    ) -> Result<(), SlurmError> {
        match result {
            Ok(s) => {
                self.failed = None;
                self.take(r.started, r.states, r.states_took, s);
                Ok(())
            }
            Err(e) => {
                let wait = match e {
                    SlurmError::Timeout { .. }
                    | SlurmError::TooLarge { .. }
                    | SlurmError::TooManyJobs { .. } => FAILED_HEAVY,
                    _ => FAILED_LIGHT,
                };
                self.failed = Some((Instant::now(), wait, e.to_string()));
                if let Some(k) = &mut self.kept {
                    // Not again before the wait: the kept queue goes on following jobs/state/.
                    k.whole_at = Instant::now();
                    k.whole_took = wait / JOBS_REUSE_FACTOR;
                    tracing::warn!(error = %e, "the whole job queue read failed; the kept queue goes on");
                    return Ok(());
                }
                Err(e)
            }
        }
    }

    fn take(
        &mut self,
        started: Instant,
        states: HashMap<String, Vec<String>>,
        states_took: Duration,
        s: Streamed,
    ) {
        let took = started.elapsed();
        match (s.jobs, &mut self.kept) {
            (None, Some(k)) => {
                k.whole_at = started;
                k.whole_took = took;
                k.stale = false;
            }
            (jobs, _) => {
                self.kept = Some(Kept {
                    jobs: jobs
                        .unwrap_or_default()
                        .into_iter()
                        .map(|j| (j.id, j))
                        .collect(),
                    states,
                    last_update: s.last_update,
                    whole_at: started,
                    whole_took: took,
                    checked_at: started,
                    check_took: states_took,
                    reusable: true,
                    stale: false,
                })
            }
        }
    }

    /// Why there is no queue to answer with.
    fn unknown(&self) -> SlurmError {
        let detail = match (&self.reading, &self.failed) {
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

    /// Whether a whole read may start now (none in flight, none failed within its wait).
    fn may_start(&self) -> bool {
        self.reading.is_none()
            && self
                .failed
                .as_ref()
                .is_none_or(|(at, wait, _)| at.elapsed() >= *wait)
    }
}

impl Client {
    /// Every job, as the fields slurmops reads (see the module's comment for how it is kept
    /// current). While no queue was ever read, waits for the first whole read at most
    /// `queue_wait` (the daemon's passes go on without the jobs; a command waits for them).
    pub async fn jobs(&self) -> Result<Vec<Job>, SlurmError> {
        let mut q = self.queue.lock().await;
        q.collect().await?;
        if q.kept.is_none() {
            if q.may_start() {
                self.start_whole(&mut q, None).await?;
            }
            let Some(r) = q.reading.as_mut() else {
                return Err(q.unknown());
            };
            let left = self.config.queue_wait.saturating_sub(r.started.elapsed());
            let Ok(result) = tokio::time::timeout(left, &mut r.task).await else {
                return Err(q.unknown());
            };
            let r = q.reading.take().expect("a read in flight");
            q.finish(r, joined(result))?;
        }
        let k = q.kept.as_ref().expect("kept");
        if k.reusable
            && k.checked_at.elapsed() < (k.check_took * JOBS_REUSE_FACTOR).min(JOBS_REUSE_CAP)
        {
            return Ok(k.list());
        }
        self.follow(&mut q).await
    }

    /// Brings the kept queue up to `jobs/state/`: reads each job that appeared or changed state,
    /// forgets those that left; starts a whole read when one is due or needed.
    async fn follow(&self, q: &mut Queue) -> Result<Vec<Job>, SlurmError> {
        let started = Instant::now();
        let states = self.job_states().await?;
        let k = q.kept.as_ref().expect("kept");
        let mut fetch = Vec::new();
        let mut stale = k.stale;
        for (id, state) in &states {
            if k.states.get(id) != Some(state) {
                match id.parse::<u64>() {
                    Ok(n) => fetch.push(n),
                    Err(_) => stale = true,
                }
            }
        }
        let mut gone = Vec::new();
        for id in k.states.keys().filter(|id| !states.contains_key(*id)) {
            match id.parse::<u64>() {
                Ok(n) => gone.push(n),
                Err(_) => stale = true,
            }
        }
        let mut read = Vec::new();
        if fetch.len() <= MAX_FETCH {
            let answers: Vec<Result<(u64, Option<Job>), SlurmError>> =
                futures::stream::iter(fetch.iter().copied())
                    .map(|id| async move { Ok((id, self.job_record(id).await?)) })
                    .buffer_unordered(FETCH_AT_ONCE)
                    .collect()
                    .await;
            read = answers.into_iter().collect::<Result<_, _>>()?;
        } else {
            stale = true;
        }
        let k = q.kept.as_mut().expect("kept");
        for id in gone {
            k.jobs.remove(&id);
        }
        if read.is_empty() {
            // Too many to read one by one: the known ones at least have their state.
            for id in &fetch {
                if let (Some(j), Some(s)) = (k.jobs.get_mut(id), states.get(&id.to_string())) {
                    j.state = s.clone();
                }
            }
        }
        for (id, job) in read {
            match job {
                Some(j) => k.jobs.insert(id, j),
                None => k.jobs.remove(&id),
            };
        }
        k.states = states;
        k.stale = stale;
        k.checked_at = started;
        k.check_took = started.elapsed();
        k.reusable = true;
        let list = k.list();
        let (due, since) = (k.whole_due(), k.last_update);
        if due && q.may_start() {
            self.start_whole(q, since).await?;
        }
        Ok(list)
    }

    /// Every job's id and state (`jobs/state/`, Slurm 23.11 and later).
    async fn job_states(&self) -> Result<HashMap<String, Vec<String>>, SlurmError> {
        #[derive(serde::Deserialize)]
        struct States {
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
        let w: States = self.get("jobs/state/").await?;
        Ok(w.jobs
            .into_iter()
            .map(|s| {
                let id = match s.job_id {
                    IdWire::Text(t) => t,
                    IdWire::Number(n) => n.to_string(),
                };
                (id, s.state)
            })
            .collect())
    }

    /// Job ID as slurmctld has it now; None once it left the queue.
    async fn job_record(&self, id: u64) -> Result<Option<Job>, SlurmError> {
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

    /// Starts a whole read in the background (asking for changes since SINCE when given), after
    /// reading `jobs/state/`, which it is then at least as new as.
    async fn start_whole(&self, q: &mut Queue, since: Option<i64>) -> Result<(), SlurmError> {
        let started = Instant::now();
        let states = self.job_states().await?;
        let states_took = started.elapsed();
        let p = self.parser().await?;
        let path = match since {
            Some(t) => format!("jobs/?update_time={t}&flags=ALL"),
            None => "jobs/?flags=ALL".to_string(),
        };
        let url = format!("{}/slurm/{}/{path}", self.base, p.as_str());
        self.sent.fetch_add(1, Ordering::Relaxed);
        let req = self
            .authorized(&Method::GET, &url)
            .timeout(self.config.queue_timeout);
        let ctx = Stream {
            base: self.base.clone(),
            path,
            secs: self.config.queue_timeout.as_secs(),
            received: self.received.clone(),
            max_record: self.config.max_answer as u64,
            max_jobs: self.config.max_jobs,
        };
        q.reading = Some(Reading {
            task: tokio::spawn(ctx.read(req)),
            started,
            states,
            states_took,
        });
        Ok(())
    }

    /// How long a job read waits for the first whole-queue read (see `Config::queue_wait`).
    pub fn set_queue_wait(&mut self, wait: Duration) {
        self.config.queue_wait = wait;
    }

    /// Goes on from what OLD (a client of the same slurmrestd, replaced to renew its
    /// credentials) read of the queue and the nodes, its whole-queue read in flight included.
    pub async fn take_reads_from(&self, old: &Client) {
        let taken = std::mem::take(&mut *old.queue.lock().await);
        *self.queue.lock().await = taken;
        let nodes = old.kept_nodes.lock().await.take();
        *self.kept_nodes.lock().await = nodes;
    }

    /// The queue changed by this client's hand: the next job read asks slurmrestd.
    pub(super) async fn jobs_changed(&self) {
        if let Some(k) = self.queue.lock().await.kept.as_mut() {
            k.reusable = false;
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

/// A whole read's task ended: its result.
fn joined(
    r: Result<Result<Streamed, SlurmError>, tokio::task::JoinError>,
) -> Result<Streamed, SlurmError> {
    r.unwrap_or_else(|e| {
        Err(SlurmError::Config(format!(
            "the job queue read stopped: {e}"
        )))
    })
}

/// One whole read, on its own task: what it needs of the client.
struct Stream {
    base: String,
    path: String,
    secs: u64,
    received: Arc<AtomicU64>,
    max_record: u64,
    max_jobs: usize,
}

impl Stream {
    fn timeout(&self) -> SlurmError {
        SlurmError::Timeout {
            url: self.base.clone(),
            path: self.path.clone(),
            secs: self.secs,
        }
    }

    async fn read(self, req: reqwest::RequestBuilder) -> Result<Streamed, SlurmError> {
        let failed = |e: reqwest::Error| match e.is_timeout() {
            true => self.timeout(),
            false => SlurmError::Unreachable {
                url: self.base.clone(),
                detail: super::error_chain(&e),
            },
        };
        let mut resp = req.send().await.map_err(failed)?;
        let status = resp.status();
        if status == StatusCode::NOT_MODIFIED {
            return Ok(Streamed {
                jobs: None,
                last_update: None,
            });
        }
        if !status.is_success() {
            let mut body = Vec::new();
            while let Some(c) = resp.chunk().await.map_err(failed)? {
                body.extend_from_slice(&c);
                if body.len() as u64 > self.max_record {
                    break;
                }
            }
            return Err(super::answer_error(
                &self.base,
                &Method::GET,
                &format!("{}/{}", self.base, self.path),
                status,
                &body,
            )
            .unwrap_or_else(|| self.timeout()));
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
        let (max_record, max_jobs) = (self.max_record, self.max_jobs);
        let parse = tokio::task::spawn_blocking(move || parse(rx, max_record, max_jobs));
        let mut transport = None;
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    self.received.fetch_add(c.len() as u64, Ordering::Relaxed);
                    if tx.send(c).await.is_err() {
                        break; // the parser stopped: its error says why
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    transport = Some(failed(e));
                    break;
                }
            }
        }
        drop(tx);
        let parsed = parse
            .await
            .map_err(|e| SlurmError::Config(format!("the job queue parser stopped: {e}")))?;
        if let Some(e) = transport {
            return Err(e);
        }
        let parsed = parsed.map_err(|e| match e {
            Parsed::Record => SlurmError::TooLarge {
                path: format!("{} (one job)", self.path),
                limit_mib: (self.max_record >> 20) as usize,
            },
            Parsed::Jobs => SlurmError::TooManyJobs {
                path: self.path.clone(),
                limit: self.max_jobs,
            },
            Parsed::Json(e) => SlurmError::Parse {
                what: format!("{}/slurm/.../{}", self.base, self.path),
                detail: e,
            },
        })?;
        if !parsed.errors.is_empty() {
            return Err(SlurmError::Api {
                method: "GET".into(),
                path: self.path.clone(),
                status: status.as_u16(),
                errors: parsed.errors,
            });
        }
        let last_update = parsed.last_update.filter(|t| *t > 0);
        Ok(Streamed {
            // "No change since update_time": no jobs, and no last_update.
            jobs: last_update.map(|_| parsed.jobs),
            last_update,
        })
    }
}

/// A whole answer, parsed.
#[derive(Default)]
struct Whole {
    jobs: Vec<Job>,
    last_update: Option<i64>,
    errors: Vec<ApiMessage>,
}

/// Why a parse stopped.
#[derive(Debug)]
enum Parsed {
    /// One job's record passed the answer cap.
    Record,
    /// More jobs than the cap.
    Jobs,
    Json(String),
}

/// The answer's bytes as they come, counted: a record (the bytes since the last job ended)
/// may not pass MAX.
struct Chunks {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    at: Bytes,
    read: Rc<Cell<u64>>,
    mark: Rc<Cell<u64>>,
    max: u64,
    hit: Rc<Cell<Option<bool>>>,
}

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at.is_empty() {
            match self.rx.blocking_recv() {
                Some(c) => self.at = c,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.at.len());
        buf[..n].copy_from_slice(&self.at.split_to(n));
        self.read.set(self.read.get() + n as u64);
        if self.read.get() - self.mark.get() > self.max {
            self.hit.set(Some(true));
            return Err(std::io::Error::other("one job's record is past the cap"));
        }
        Ok(n)
    }
}

/// Parses a whole answer from RX into the jobs, record by record.
fn parse(
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    max_record: u64,
    max_jobs: usize,
) -> Result<Whole, Parsed> {
    let (read, mark, hit) = (Rc::default(), Rc::default(), Rc::new(Cell::new(None)));
    let chunks = Chunks {
        rx,
        at: Bytes::new(),
        read: Rc::clone(&read),
        mark: Rc::clone(&mark),
        max: max_record,
        hit: Rc::clone(&hit),
    };
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(64 << 10, chunks));
    let seed = Top {
        read,
        mark,
        hit: Rc::clone(&hit),
        max_jobs,
    };
    let result = seed.deserialize(&mut de).and_then(|w| de.end().map(|()| w));
    result.map_err(|e| match hit.get() {
        Some(true) => Parsed::Record,
        Some(false) => Parsed::Jobs,
        None => Parsed::Json(e.to_string()),
    })
}

/// The answer's top level: `jobs` record by record, `last_update`, `errors`; the rest skipped.
struct Top {
    read: Rc<Cell<u64>>,
    mark: Rc<Cell<u64>>,
    hit: Rc<Cell<Option<bool>>>,
    max_jobs: usize,
}

impl<'de> DeserializeSeed<'de> for Top {
    type Value = Whole;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Whole, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top {
    type Value = Whole;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("slurmrestd's answer to jobs/")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Whole, A::Error> {
        let mut w = Whole::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "jobs" => w.jobs = map.next_value_seed(Records(&self))?,
                "last_update" => {
                    w.last_update = map.next_value::<crate::slurm::model::Number>()?.0;
                }
                "errors" => w.errors = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            self.mark.set(self.read.get());
        }
        Ok(w)
    }
}

/// The `jobs` array: each record turned into a [`Job`] as it is read.
struct Records<'a>(&'a Top);

impl<'de> DeserializeSeed<'de> for Records<'_> {
    type Value = Vec<Job>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Vec<Job>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Records<'_> {
    type Value = Vec<Job>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of jobs")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Job>, A::Error> {
        let top = self.0;
        let mut jobs = Vec::new();
        top.mark.set(top.read.get());
        while let Some(w) = seq.next_element::<JobWire>()? {
            top.mark.set(top.read.get());
            if jobs.len() >= top.max_jobs {
                top.hit.set(Some(false));
                return Err(de::Error::custom("more jobs than the cap"));
            }
            jobs.push(Job::try_from(w).map_err(de::Error::custom)?);
        }
        Ok(jobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str, max_record: u64, max_jobs: usize) -> Result<Whole, Parsed> {
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        // Cut in small chunks, as a network delivers it.
        for c in text.as_bytes().chunks(7) {
            tx.try_send(Bytes::copy_from_slice(c)).unwrap();
        }
        drop(tx);
        parse(rx, max_record, max_jobs)
    }

    const ANSWER: &str = r#"{"meta": {"plugin": {"name": "x"}}, "jobs": [
        {"job_id": 7, "name": "a", "job_state": ["PENDING"], "partition": "gpu", "extra": {"deep": [1, 2]}},
        {"job_id": 8, "job_state": ["RUNNING"], "nodes": "n[1-2]", "end_time": {"set": true, "infinite": false, "number": 99}}
    ], "last_update": {"set": true, "infinite": false, "number": 1234}, "errors": [], "warnings": []}"#;

    #[test]
    fn a_streamed_answer_keeps_the_fields_slurmops_reads() {
        let w = parsed(ANSWER, 1 << 20, 10).unwrap();
        assert_eq!(w.last_update, Some(1234));
        assert_eq!(w.jobs.len(), 2);
        assert_eq!(w.jobs[0].partition, "gpu");
        assert_eq!(w.jobs[1].nodes, vec!["n1".to_string(), "n2".to_string()]);
        assert_eq!(w.jobs[1].end_time, Some(99));
    }

    #[test]
    fn a_record_past_the_cap_or_too_many_jobs_stop_the_parse() {
        // One job with a 4 KiB comment, against a 1 KiB record cap; the others are small.
        let big = ANSWER.replace(
            r#""name": "a""#,
            &format!(r#""comment": "{}""#, "x".repeat(4096)),
        );
        assert!(matches!(parsed(&big, 1024, 10), Err(Parsed::Record)));
        assert!(parsed(ANSWER, 1024, 10).is_ok());
        assert!(matches!(parsed(ANSWER, 1 << 20, 1), Err(Parsed::Jobs)));
        assert!(matches!(
            parsed(r#"{"jobs": [{"job_id": 7"#, 1 << 20, 10),
            Err(Parsed::Json(_))
        ));
    }

    #[test]
    fn the_job_cap_is_a_count_and_nonsense_keeps_the_default() {
        assert_eq!(max_jobs_from(None), MAX_JOBS);
        assert_eq!(max_jobs_from(Some("2_000_000")), 2_000_000);
        assert_eq!(max_jobs_from(Some("lots")), MAX_JOBS);
        assert_eq!(max_jobs_from(Some("0")), MAX_JOBS);
    }
}
