//! The daemon's HTTP side: the webhook receiver (a signed push triggers a sync at once),
//! `/healthz` (fails when the loop is stuck), `/readyz` and Prometheus `/metrics` (OpenMetrics).
//!
//! Webhook signatures are HMAC-SHA256 of the raw body with the shared secret, hex, prefixed
//! `sha256=`: GitHub's `X-Hub-Signature-256`, or `X-Slurmops-Signature` for any other sender.
//! A missing or wrong signature is 401 and changes nothing.
//!
//! The port may face the internet (webhooks): every connection has deadlines, their number is
//! capped, and the webhook's body is read within the connection's deadline and size limit.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hmac::{Hmac, Mac};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::Sha256;
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot};

/// Bodies larger than this are refused (GitHub caps payloads at 25 MB; pushes are far smaller).
const MAX_BODY: usize = 1 << 20;

pub use super::metrics::Metrics;

/// What the handlers share with the reconcile loop.
pub struct Shared {
    pub secret: Option<secrecy::SecretSlice<u8>>,
    pub branch: String,
    /// Wakes the loop for a pass now (webhook, watch event, new leadership).
    pub sync_now: Arc<Notify>,
    /// The next pass fetches git even if the poll interval has not passed.
    pub fetch_now: std::sync::atomic::AtomicBool,
    /// This replica just became the leader: the next pass fetches unless its last fetch is
    /// fresh (a standby fetches on its own interval too).
    pub became_leader: std::sync::atomic::AtomicBool,
    pub metrics: Mutex<Metrics>,
    /// When the loop last finished an iteration: `/healthz` fails when that is older than
    /// `stale_after` (a stuck loop), so Kubernetes restarts the daemon and the lease moves.
    pub last_pass: Mutex<Option<std::time::Instant>>,
    pub stale_after: std::time::Duration,
    /// When the fetch in flight started: `/healthz` fails once it is older than `fetch_stuck`
    /// (its deadline, a read timeout and a minute: libgit2 could not give up, a restart frees it).
    pub fetching_since: Mutex<Option<std::time::Instant>>,
    pub fetch_stuck: std::time::Duration,
}

/// Whether SIGNATURE (`sha256=HEX`) is the HMAC-SHA256 of BODY under SECRET (constant time).
pub fn signature_ok(secret: &[u8], body: &[u8], signature: &str) -> bool {
    let Some(hex) = signature.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Some(expected) = decode_hex(hex) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn reply(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *r.status_mut() = status;
    r
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    Ok(match (req.method().clone(), path.as_str()) {
        (Method::GET, "/healthz") => healthz(&shared),
        (Method::GET, "/readyz") => {
            if shared.metrics.lock().expect("metrics").ready {
                reply(StatusCode::OK, "ready")
            } else {
                reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "not ready: no reconcile finished yet",
                )
            }
        }
        (Method::GET, "/metrics") => {
            let text = shared.metrics.lock().expect("metrics").render();
            let mut r = reply(StatusCode::OK, text.trim_end());
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            r
        }
        (Method::POST, "/webhook") => webhook(&shared, req).await,
        _ => reply(StatusCode::NOT_FOUND, "not found"),
    })
}

fn healthz(shared: &Shared) -> Response<Full<Bytes>> {
    let last = *shared.last_pass.lock().expect("last pass");
    let fetching = *shared.fetching_since.lock().expect("fetching");
    match (last, fetching) {
        (Some(t), _) if t.elapsed() > shared.stale_after => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("stuck: no pass finished for {}s", t.elapsed().as_secs()),
        ),
        (_, Some(t)) if t.elapsed() > shared.fetch_stuck => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("stuck: a git fetch has run for {}s", t.elapsed().as_secs()),
        ),
        _ => reply(StatusCode::OK, "ok"),
    }
}

async fn webhook(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let Some(secret) = &shared.secret else {
        return reply(
            StatusCode::NOT_FOUND,
            "webhook disabled: no secret configured",
        );
    };
    let signature = ["x-hub-signature-256", "x-slurmops-signature"]
        .iter()
        .find_map(|h| req.headers().get(*h))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return reply(StatusCode::PAYLOAD_TOO_LARGE, "body too large"),
    };
    let ok = signature
        .is_some_and(|s| signature_ok(secrecy::ExposeSecret::expose_secret(secret), &body, &s));
    shared.metrics.lock().expect("metrics").webhook(ok);
    if !ok {
        return reply(StatusCode::UNAUTHORIZED, "bad or missing signature");
    }
    // A GitHub push names its ref; a push to another branch needs no sync.
    let other_branch = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("ref").and_then(|r| r.as_str()).map(str::to_string))
        .is_some_and(|r| r != format!("refs/heads/{}", shared.branch));
    if other_branch {
        return reply(StatusCode::ACCEPTED, "push to another branch: ignored");
    }
    shared
        .fetch_now
        .store(true, std::sync::atomic::Ordering::SeqCst);
    shared.sync_now.notify_one();
    reply(StatusCode::ACCEPTED, "sync triggered")
}

/// Most time a connection may live: the whole request, header and body, and the answer. One
/// request per connection (no keep-alive), so a slow or idle client holds nothing for longer.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// Most time the request header may take to arrive.
const HEADER_DEADLINE: Duration = Duration::from_secs(5);
/// Most connections open at once, whatever the descriptor limit is (the rest of the daemon —
/// git, the Kubernetes API, slurmrestd — keeps at least half of the descriptors).
const MAX_CONNECTIONS: usize = 512;

/// Connections open now, oldest first, each with the switch that closes it.
#[derive(Default)]
struct Open {
    next: u64,
    conns: VecDeque<(u64, oneshot::Sender<()>)>,
}

/// Serves until the process ends. A full house closes the oldest connection (one that is slow
/// to send its request: a quick probe or a webhook is long done), so a flood of slow clients
/// cannot lock `/healthz` or the webhook out; accept errors (out of descriptors) back off.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let cap = connection_cap();
    let open = Arc::new(Mutex::new(Open::default()));
    let mut backoff = Duration::from_millis(10);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                backoff = Duration::from_millis(10);
                stream
            }
            Err(e) => {
                tracing::warn!("http: accept: {e}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let (close, closed) = oneshot::channel();
        let id = {
            let mut o = open.lock().expect("open connections");
            while o.conns.len() >= cap {
                // Dropping the sender closes that connection.
                o.conns.pop_front();
            }
            o.next += 1;
            let id = o.next;
            o.conns.push_back((id, close));
            id
        };
        let (shared, open) = (shared.clone(), open.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req| handle(shared.clone(), req));
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_DEADLINE)
                .keep_alive(false)
                .max_buf_size(64 * 1024);
            let conn = builder.serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                _ = tokio::time::timeout(CONNECTION_DEADLINE, conn) => {}
                _ = closed => {}
            }
            open.lock()
                .expect("open connections")
                .conns
                .retain(|(i, _)| *i != id);
        });
        // A deep backlog is accepted in a burst: let the connection just accepted (a probe's
        // request is already there) and those just evicted (their descriptors) run first, or
        // the burst evicts a probe before it is read and runs out of descriptors.
        tokio::task::yield_now().await;
    }
}

/// MAX_CONNECTIONS, or a quarter of the process's descriptor limit when that is lower.
fn connection_cap() -> usize {
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|soft| soft.parse::<usize>().ok())
        });
    limit.map_or(MAX_CONNECTIONS, |n| (n / 4).clamp(16, MAX_CONNECTIONS))
}

/// Binds ADDR (errors name the address).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_hmac_sha256_of_the_raw_body() {
        let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(b"{\"ref\":\"refs/heads/main\"}");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let body = b"{\"ref\":\"refs/heads/main\"}";
        assert!(signature_ok(b"s3cret", body, &format!("sha256={hex}")));
        assert!(!signature_ok(b"other", body, &format!("sha256={hex}")));
        assert!(!signature_ok(
            b"s3cret",
            b"tampered",
            &format!("sha256={hex}")
        ));
        assert!(!signature_ok(b"s3cret", body, &hex));
        assert!(!signature_ok(b"s3cret", body, "sha256=zz"));
    }
}
