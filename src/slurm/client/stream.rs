//! A whole-queue answer parsed as it arrives: hundreds of MB at 50,000 jobs, never held. The
//! body's chunks feed a parser on a blocking thread that keeps, record by record, the fields
//! slurmops reads; each job's record is capped (the answer cap) and so is the count of jobs.

use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hyper::body::Bytes;
use reqwest::{Method, StatusCode};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::slurm::SlurmError;
use crate::slurm::model::{ApiMessage, Job, JobWire};

/// Streamed answer of a whole read.
pub(super) struct Streamed {
    /// None: "no change since update_time".
    pub jobs: Option<Vec<Job>>,
    pub last_update: Option<i64>,
}

/// One whole read, on its own task: what it needs of the client.
pub(super) struct Stream {
    pub base: String,
    pub path: String,
    pub secs: u64,
    pub received: Arc<AtomicU64>,
    pub max_record: u64,
    pub max_jobs: usize,
}

impl Stream {
    fn timeout(&self) -> SlurmError {
        SlurmError::Timeout {
            url: self.base.clone(),
            path: self.path.clone(),
            secs: self.secs,
        }
    }

    pub async fn read(self, req: reqwest::RequestBuilder) -> Result<Streamed, SlurmError> {
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
}
