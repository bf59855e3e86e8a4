//! The live view: a read-only page of the cluster (`GET /`) and the JSON it shows
//! (`GET /api/v1/cluster`, documented in docs/live-view.md), served by the daemon on its port.
//!
//! A viewer costs no Kubernetes or Slurm read: each pass publishes what it already holds (the
//! status it writes, the Events it posted lately) as one serialized copy, rebuilt only when it
//! changed, and every request answers from that copy (or 304 when the viewer has it). The page's
//! assets are compiled in; they set every value as text (`textContent`), under a
//! Content-Security-Policy that runs no script but `/app.js`. Nothing secret is in it: the status
//! holds none, and URLs' user information and JWT-looking strings are cut out anyway. With
//! `--ui-token-file` the data asks for `Authorization: Bearer TOKEN` (the assets, which hold no
//! data, do not); `--no-ui` turns both off.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Bytes;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::status::configmap::Status;

/// The version of `/api/v1/cluster`'s document (`apiVersion`), and where it is.
pub use crate::vocab::{VIEW_API_PATH as API_PATH, VIEW_API_VERSION as API_VERSION};

/// Everything the page may load and nothing else: its own script, style and icon, and the data
/// from the same origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");
const ICON: &str = include_str!("page/icon.svg");

/// The view as the handlers share it with the loop.
pub struct View {
    enabled: bool,
    /// SHA-256 of the bearer token the data asks for, if any.
    token: Option<[u8; 32]>,
    published: Mutex<Published>,
}

#[derive(Default)]
struct Published {
    /// What the copy was made from: the status, the Events' generation, and when.
    from: Option<(Status, u64, Instant)>,
    body: Bytes,
    etag: String,
}

/// A pass's facts for the view beyond the status.
pub struct Facts<'a> {
    pub cluster: Option<&'a str>,
    pub namespace: &'a str,
    pub events: &'a crate::status::Recorder,
}

impl View {
    pub fn new(enabled: bool, token: Option<&[u8]>) -> View {
        View {
            enabled,
            token: token.map(|t| Sha256::digest(t).into()),
            published: Mutex::default(),
        }
    }

    /// Publishes STATUS and FACTS, serializing them only when they changed.
    pub fn publish(&self, status: &Status, facts: &Facts<'_>) {
        if !self.enabled {
            return;
        }
        let generation = facts.events.generation();
        {
            let p = self.published.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((s, g, at)) = &p.from
                && same_facts(s, status)
                && *g == generation
                && at.elapsed() < REFRESH
            {
                return;
            }
        }
        // Made outside the lock: viewers keep the last copy meanwhile. Only the loop publishes.
        let doc = document(status, facts);
        let body = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        let etag = format!("\"{}\"", hex(&Sha256::digest(&body)[..8]));
        let mut p = self.published.lock().unwrap_or_else(|e| e.into_inner());
        *p = Published {
            from: Some((status.clone(), generation, Instant::now())),
            body,
            etag,
        };
    }

    /// Whether PATH is the view's (`/`, its assets, its data).
    pub fn serves(&self, path: &str) -> bool {
        self.enabled
            && matches!(
                path,
                "/" | "/index.html" | "/app.js" | "/app.css" | "/icon.svg" | API_PATH
            )
    }

    /// The answer to a GET of one of the view's paths.
    pub fn get<B>(&self, req: &Request<B>) -> Response<Full<Bytes>> {
        let (body, kind): (Bytes, &str) = match req.uri().path() {
            "/" | "/index.html" => (
                Bytes::from_static(INDEX.as_bytes()),
                "text/html; charset=utf-8",
            ),
            "/app.js" => (
                Bytes::from_static(SCRIPT.as_bytes()),
                "text/javascript; charset=utf-8",
            ),
            "/app.css" => (
                Bytes::from_static(STYLE.as_bytes()),
                "text/css; charset=utf-8",
            ),
            "/icon.svg" => (Bytes::from_static(ICON.as_bytes()), "image/svg+xml"),
            _ => return self.data(req),
        };
        let mut r = answer(StatusCode::OK, body, kind);
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r
    }

    fn data<B>(&self, req: &Request<B>) -> Response<Full<Bytes>> {
        if let Some(want) = &self.token {
            let given = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(|t| <[u8; 32]>::from(Sha256::digest(t.trim().as_bytes())));
            if given.as_ref() != Some(want) {
                let mut r = answer(
                    StatusCode::UNAUTHORIZED,
                    Bytes::from_static(b"{\"error\":\"a bearer token is needed (the daemon's --ui-token-file)\"}\n"),
                    "application/json",
                );
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"slurmops\""),
                );
                return r;
            }
        }
        let (body, etag) = {
            let p = self.published.lock().unwrap_or_else(|e| e.into_inner());
            (p.body.clone(), p.etag.clone())
        };
        if body.is_empty() {
            return answer(
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"{\"error\":\"no pass has finished yet\"}\n"),
                "application/json",
            );
        }
        let fresh = req
            .headers()
            .get(header::IF_NONE_MATCH)
            .is_some_and(|v| v.as_bytes() == etag.as_bytes());
        let mut r = match fresh {
            true => answer(StatusCode::NOT_MODIFIED, Bytes::new(), "application/json"),
            false => answer(StatusCode::OK, body, "application/json"),
        };
        let h = r.headers_mut();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
        if let Ok(v) = HeaderValue::from_str(&etag) {
            h.insert(header::ETAG, v);
        }
        r
    }
}

/// How often the copy is made again when only the pass and fetch times moved (every pass
/// changes them): the page's "last pass" is at most this late.
const REFRESH: Duration = Duration::from_secs(15);

/// Whether A and B hold the same facts, the times of the last pass and fetch aside.
fn same_facts(a: &Status, b: &Status) -> bool {
    let Status {
        repository,
        branch,
        last_seen_commit,
        last_applied_commit,
        result,
        result_commit,
        errors,
        summary,
        last_fetch: _,
        last_attempt: _,
        jobs_listed_to: _,
        node_sets,
        slurm,
        held,
        controllers,
        slurmrestd,
        checks,
    } = a;
    *repository == b.repository
        && *branch == b.branch
        && *last_seen_commit == b.last_seen_commit
        && *last_applied_commit == b.last_applied_commit
        && *result == b.result
        && *result_commit == b.result_commit
        && *errors == b.errors
        && *summary == b.summary
        && *node_sets == b.node_sets
        && *slurm == b.slurm
        && *held == b.held
        && *controllers == b.controllers
        && *slurmrestd == b.slurmrestd
        && *checks == b.checks
}

/// A response with the view's security headers.
fn answer(status: StatusCode, body: Bytes, kind: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(kind) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Lines of a free-text status key.
fn lines(s: &str) -> Vec<String> {
    crate::status::bound::text(s)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(redact)
        .collect()
}

/// The view's document: the status as data, the recent Events, secrets cut out.
pub fn document(s: &Status, f: &Facts<'_>) -> Value {
    let mut node_sets = serde_json::to_value(s.progress()).unwrap_or(Value::Null);
    redact_all(&mut node_sets);
    let events: Vec<Value> = f
        .events
        .recent()
        .into_iter()
        .rev()
        .map(|e| {
            json!({"at": e.at, "type": if e.warning { "Warning" } else { "Normal" },
                "object": redact(&e.object), "reason": e.reason, "count": e.count,
                "message": redact(&e.message)})
        })
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "ClusterView",
        "cluster": f.cluster,
        "namespace": f.namespace,
        "repository": redact(&s.repository),
        "branch": s.branch,
        "lastSeenCommit": s.last_seen_commit,
        "lastAppliedCommit": s.last_applied_commit,
        "result": s.result,
        "resultCommit": s.result_commit,
        "errors": lines(&s.errors),
        "summary": lines(&s.summary),
        "lastFetch": s.last_fetch,
        "lastAttempt": s.last_attempt,
        "slurm": {
            "reachable": s.slurm.trim().is_empty(),
            "state": slurm_state(&s.slurm),
            "problem": redact(s.slurm.trim()),
        },
        "held": lines(&s.held),
        "controllers": lines(&s.controllers),
        "slurmrestd": lines(&s.slurmrestd),
        "nodeSets": node_sets,
        "events": events,
    })
}

fn redact_all(v: &mut Value) {
    match v {
        Value::String(s) => *s = redact(s),
        Value::Array(a) => a.iter_mut().for_each(redact_all),
        Value::Object(o) => o.values_mut().for_each(redact_all),
        _ => {}
    }
}

/// TEXT with the user information of URLs (`https://user:token@host`) and JWT-looking strings
/// (`eyJ….….…`) cut out: the status holds no secret, but an error quoting a URL or an answer
/// might.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.find("://").map(|i| i + 3) {
            let authority_end = rest[after..]
                .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
                .map_or(rest.len(), |i| after + i);
            if let Some(at) = rest[after..authority_end].rfind('@') {
                out.push_str(&unjwt(&rest[..after]));
                out.push_str("***");
                rest = &rest[after + at..];
                continue;
            }
            out.push_str(&unjwt(&rest[..authority_end]));
            rest = &rest[authority_end..];
            continue;
        }
        out.push_str(&unjwt(rest));
        break;
    }
    out
}

/// TEXT with every `eyJ` word of three dot-separated base64url parts replaced.
fn unjwt(text: &str) -> String {
    let token = |w: &str| {
        let parts: Vec<&str> = w.split('.').collect();
        w.starts_with("eyJ")
            && parts.len() == 3
            && parts.iter().all(|p| {
                !p.is_empty()
                    && p.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
    };
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let bare = word.trim_end_matches('.');
        if token(bare) {
            out.push_str("[token]");
            out.push_str(&word[bare.len()..]);
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Slurm as the view names it: `reachable`, `off` (the daemon runs with `--no-slurm`) or
/// `unreachable` (it should answer and does not; `problem` says why).
fn slurm_state(line: &str) -> &'static str {
    let line = line.trim();
    if line.is_empty() {
        "reachable"
    } else if line.starts_with(&format!("{} (", crate::vocab::SLURM_OFF)) {
        "off"
    } else {
        "unreachable"
    }
}

#[cfg(test)]
mod tests;
