//! How a request goes to slurmrestd: the data parser both sides speak, the JWT (and the user a
//! job runs as) on it, retries of what is safe to retry, and its answer read within bounds.

use std::time::{Duration, SystemTime};

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use super::Client;
use super::answer::Answer;
use crate::slurm::SlurmError;
use crate::slurm::auth::Issued;
use crate::slurm::model::DataParser;

impl Client {
    /// The answer's body to the request for URL, at most [`MAX_ANSWER`] bytes (within the
    /// request's timeout).
    pub(super) async fn read_bounded(
        &self,
        url: &str,
        mut resp: reqwest::Response,
        deadline: Duration,
    ) -> Result<Vec<u8>, SlurmError> {
        // An answer announcing more than the bound is refused before its body; within it, its
        // length is reserved at once (a buffer doubling its way to the 23 MB of 10,000 nodes
        // copied itself at every step and held 16 and 32 MB together at the last).
        let announced = resp.content_length().unwrap_or(0) as usize;
        if announced > self.config.max_answer {
            return Err(SlurmError::TooLarge {
                path: self.path_of(url),
                limit_mib: self.config.max_answer >> 20,
            });
        }
        let mut body = Vec::with_capacity(announced);
        loop {
            let chunk = resp
                .chunk()
                .await
                .map_err(|e| self.failed(url, &e, deadline))?;
            let Some(chunk) = chunk else {
                return Ok(body);
            };
            if body.len() + chunk.len() > self.config.max_answer {
                return Err(SlurmError::TooLarge {
                    path: self.path_of(url),
                    limit_mib: self.config.max_answer >> 20,
                });
            }
            self.received
                .fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
            body.extend_from_slice(&chunk);
        }
    }

    /// URL without the base (what the errors name).
    pub(super) fn path_of(&self, url: &str) -> String {
        url.strip_prefix(&self.base).unwrap_or(url).to_string()
    }

    /// A failed request to URL: its deadline passed (not retried), or slurmrestd is out of reach.
    pub(super) fn failed(&self, url: &str, e: &reqwest::Error, deadline: Duration) -> SlurmError {
        match e.is_timeout() {
            true => SlurmError::Timeout {
                url: self.base.clone(),
                path: self.path_of(url),
                secs: deadline.as_secs(),
            },
            false => SlurmError::Unreachable {
                url: self.base.clone(),
                detail: error_chain(e),
            },
        }
    }

    /// The data parser in use, probing newest first on first use.
    pub async fn parser(&self) -> Result<DataParser, SlurmError> {
        if let Some(p) = *self.parser.lock().unwrap() {
            return Ok(p);
        }
        for p in DataParser::ALL {
            match self.send(p, Method::GET, "ping/", None).await {
                Ok(_) => {
                    *self.parser.lock().unwrap() = Some(p);
                    return Ok(p);
                }
                Err(SlurmError::Api { status: 404, .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(SlurmError::NoDataParser {
            url: self.base.clone(),
        })
    }

    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, SlurmError> {
        let p = self.parser().await?;
        let body = self.send(p, Method::GET, path, None).await?;
        serde_json::from_slice(&body).map_err(|e| self.parse_error(path, e.to_string()))
    }

    /// As `get`, under the deadline of `jobs/state/` (`Config::queue_timeout`).
    pub(super) async fn get_slow<T: DeserializeOwned>(&self, path: &str) -> Result<T, SlurmError> {
        let p = self.parser().await?;
        let url = format!("{}/slurm/{}/{path}", self.base, p.as_str());
        let body: Vec<u8> = self
            .send_url_within(Method::GET, url, None, self.config.queue_timeout, None)
            .await?;
        serde_json::from_slice(&body).map_err(|e| self.parse_error(path, e.to_string()))
    }

    pub(super) fn parse_error(&self, path: &str, detail: String) -> SlurmError {
        SlurmError::Parse {
            what: format!("{}/slurm/.../{path}", self.base),
            detail,
        }
    }

    /// The Slurm user this client's requests run as, when known.
    pub fn credentials_user(&self) -> Option<String> {
        self.config.credentials.user()
    }

    pub(super) fn credentials(&self) -> Issued {
        let mut slot = self.issued.lock().unwrap();
        let now = SystemTime::now();
        match &*slot {
            Some(i) if i.renew_at.is_none_or(|t| now < t) => i.clone(),
            _ => {
                let i = self.config.credentials.issue(now);
                *slot = Some(i.clone());
                i
            }
        }
    }

    /// Sends one request, retrying transient failures; returns the body of a clean answer.
    pub(super) async fn send(
        &self,
        parser: DataParser,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<Vec<u8>, SlurmError> {
        let url = format!("{}/slurm/{}/{path}", self.base, parser.as_str());
        self.send_url(method, url, body).await
    }

    /// One request to slurmrestd's slurmdbd plugin (`openapi/slurmdbd`), at data parser
    /// v0.0.42: 24.11 and 26.05 serve it with the same shapes (see `accounting::rest`).
    pub async fn slurmdb(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<Vec<u8>, SlurmError> {
        let url = format!(
            "{}/slurmdb/{}/{path}",
            self.base,
            DataParser::V0042.as_str()
        );
        self.send_url(method, url, body).await
    }

    pub(super) async fn send_url(
        &self,
        method: Method,
        url: String,
        body: Option<serde_json::Value>,
    ) -> Result<Vec<u8>, SlurmError> {
        self.send_url_within(method, url, body, self.config.timeout, None)
            .await
    }

    /// As `send_url`, each attempt within DEADLINE; AS_USER: run as that Slurm user instead
    /// (X-SLURM-USER-NAME with this client's administrator token).
    pub(super) async fn send_url_within<A: Answer>(
        &self,
        method: Method,
        url: String,
        body: Option<serde_json::Value>,
        deadline: Duration,
        as_user: Option<&str>,
    ) -> Result<A, SlurmError> {
        let mut delay = self.config.backoff;
        let mut attempt = 1;
        loop {
            let result = match self
                .to_replicas(&method, &url, body.as_ref(), deadline, as_user)
                .await
            {
                Some(r) => r,
                None => {
                    self.send_once(&method, &url, body.as_ref(), deadline, as_user)
                        .await
                }
            };
            match result {
                Err(e) if e.is_transient() && attempt < self.config.attempts => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    pub(super) async fn send_once<A: Answer>(
        &self,
        method: &Method,
        url: &str,
        body: Option<&serde_json::Value>,
        deadline: Duration,
        as_user: Option<&str>,
    ) -> Result<A, SlurmError> {
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut req = self.authorized(method, url, as_user).timeout(deadline);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| self.failed(url, &e, deadline))?;
        let status = resp.status();
        // A conditional list read (`update_time`) whose list did not change.
        if status == StatusCode::NOT_MODIFIED && *method == Method::GET {
            return Ok(A::unchanged());
        }
        A::take(self, method, url, status, resp, deadline).await
    }

    /// A request to URL with this client's credentials; AS_USER names the Slurm user it runs as
    /// instead of the token's (slurmctld allows it to a token of SlurmUser or root only).
    pub(super) fn authorized(
        &self,
        method: &Method,
        url: &str,
        as_user: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let creds = self.credentials();
        let mut req = self
            .http
            .request(method.clone(), url)
            .header("X-SLURM-USER-TOKEN", creds.token.expose());
        if let Some(u) = as_user.or(creds.user.as_deref()) {
            req = req.header("X-SLURM-USER-NAME", u);
        }
        req
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        src = s.source();
    }
    parts.join(": ")
}
