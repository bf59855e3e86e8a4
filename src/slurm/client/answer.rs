//! How an answer's body is taken: whole (`Vec<u8>`, what most requests read), or parsed as it
//! arrives (`Parsed`, for the node list: at 10,000 nodes slurmrestd's answer is 23 MB, and the
//! whole body beside the list parsed from it was the daemon's peak memory, +23 MB on every pass
//! that read it). Either way the same bound on bytes and time, and an answer that carries Slurm's
//! errors is an error.

use std::io::Read;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use super::super::SlurmError;
use super::super::model::ApiMessage;
use super::Client;
use super::answer_error::{answer_error, error_of};

/// An answer's body as a request returns it.
pub(crate) trait Answer: Sized + Send + 'static {
    /// The answer to a conditional read whose list did not change (304, no body).
    fn unchanged() -> Self;

    /// The body of RESP (status STATUS) to METHOD URL, within DEADLINE; Slurm's errors in it
    /// are an error.
    fn take(
        client: &Client,
        method: &Method,
        url: &str,
        status: StatusCode,
        resp: reqwest::Response,
        deadline: Duration,
    ) -> impl Future<Output = Result<Self, SlurmError>> + Send;
}

impl Answer for Vec<u8> {
    fn unchanged() -> Self {
        Vec::new()
    }

    async fn take(
        client: &Client,
        method: &Method,
        url: &str,
        status: StatusCode,
        resp: reqwest::Response,
        deadline: Duration,
    ) -> Result<Self, SlurmError> {
        let bytes = client.read_bounded(url, resp, deadline).await?;
        match answer_error(&client.base, method, url, status, &bytes) {
            Some(e) => Err(e),
            None => Ok(bytes),
        }
    }
}

/// A list slurmrestd answers, with the errors its envelope carries.
pub(crate) trait Listed: DeserializeOwned + Send + 'static {
    /// The answer's `errors` (taken out).
    fn errors(&mut self) -> Vec<ApiMessage>;
}

/// A list parsed as its answer arrives; None: it did not change (304).
pub(crate) struct Parsed<T>(pub Option<T>);

impl<T: Listed> Answer for Parsed<T> {
    fn unchanged() -> Self {
        Parsed(None)
    }

    async fn take(
        client: &Client,
        method: &Method,
        url: &str,
        status: StatusCode,
        resp: reqwest::Response,
        deadline: Duration,
    ) -> Result<Self, SlurmError> {
        if !status.is_success() {
            // An error's answer is small: read whole, as every other.
            let bytes = client.read_bounded(url, resp, deadline).await?;
            return Err(answer_error(&client.base, method, url, status, &bytes)
                .unwrap_or_else(|| error_of(&client.base, method, url, status, vec![], &bytes)));
        }
        let mut list: T = client.parse_arriving(url, resp, deadline).await?;
        let errors = list.errors();
        if !errors.is_empty() {
            return Err(error_of(&client.base, method, url, status, errors, &[]));
        }
        Ok(Parsed(Some(list)))
    }
}

impl Client {
    /// The JSON answer RESP to URL parsed as its chunks arrive (on a blocking thread, a few
    /// chunks behind), at most `Config::max_answer` bytes within the request's deadline. A
    /// transfer that fails or stops short is that error, never a partial list.
    async fn parse_arriving<T: DeserializeOwned + Send + 'static>(
        &self,
        url: &str,
        mut resp: reqwest::Response,
        deadline: Duration,
    ) -> Result<T, SlurmError> {
        let too_large = || SlurmError::TooLarge {
            path: self.path_of(url),
            limit_mib: self.config.max_answer >> 20,
        };
        if resp.content_length().unwrap_or(0) as usize > self.config.max_answer {
            return Err(too_large());
        }
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        let parse = tokio::task::spawn_blocking(move || {
            let reader = Chunks {
                rx,
                at: 0,
                chunk: None,
            };
            serde_json::from_reader::<_, T>(std::io::BufReader::with_capacity(64 << 10, reader))
        });
        let mut total = 0usize;
        let fed = loop {
            let chunk = match resp.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break Ok(()),
                Err(e) => break Err(self.failed(url, &e, deadline)),
            };
            total += chunk.len();
            if total > self.config.max_answer {
                break Err(too_large());
            }
            self.received
                .fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
            if tx.send(chunk).await.is_err() {
                // The parser stopped (the JSON is bad): its error says why.
                break Ok(());
            }
        };
        drop(tx);
        let parsed = parse.await;
        fed?;
        let path = self.path_of(url);
        match parsed {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => Err(SlurmError::Parse {
                what: format!("{}{path}", self.base),
                detail: e.to_string(),
            }),
            Err(e) => Err(SlurmError::Parse {
                what: format!("{}{path}", self.base),
                detail: format!("the parser stopped: {e}"),
            }),
        }
    }
}

/// The chunks of an answer as they arrive, read as one stream (the end: the sender dropped).
struct Chunks<B> {
    rx: tokio::sync::mpsc::Receiver<B>,
    chunk: Option<B>,
    at: usize,
}

impl<B: AsRef<[u8]>> Read for Chunks<B> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(c) = &self.chunk {
                let rest = &c.as_ref()[self.at..];
                if !rest.is_empty() {
                    let n = rest.len().min(buf.len());
                    buf[..n].copy_from_slice(&rest[..n]);
                    self.at += n;
                    return Ok(n);
                }
            }
            match self.rx.blocking_recv() {
                Some(c) => {
                    self.chunk = Some(c);
                    self.at = 0;
                }
                None => return Ok(0),
            }
        }
    }
}

#[cfg(test)]
mod tests;
