//! The daemon's HTTP side: the webhook receiver (a signed push triggers a sync at once),
//! `/healthz` (fails when the loop is stuck), `/readyz`, Prometheus `/metrics` (OpenMetrics) and
//! the live view (`/`, `/api/v1/cluster`: `view.rs`).
//!
//! Webhook signatures are HMAC-SHA256 of the raw body with the shared secret, hex, prefixed
//! `sha256=`: GitHub's `X-Hub-Signature-256`, or `X-Slurmops-Signature` for any other sender.
//! A missing or wrong signature is 401 and changes nothing; a signed body taken before (a
//! replay) is 200 and changes nothing either.
//!
//! The port may face the internet (webhooks): every connection has deadlines, their number is
//! capped, and a webhook's body is read only after its header carries a well-formed signature,
//! a few bodies at a time (the others are 503), within the connection's deadline and size
//! limit. Accepted deliveries wake the loop and ask its next pass to fetch: one fetch a pass
//! however many arrive (a pass that did nothing is followed a second later at the soonest).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::Sha256;
use tokio::net::{TcpListener, TcpSocket};
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
    /// The webhook's gate: bodies read at once, deliveries already taken.
    pub deliveries: Deliveries,
    /// The live view (`/`, `/api/v1/cluster`): what the last pass published.
    pub view: super::view::View,
}

impl Shared {
    /// What a server of the live view alone needs (no webhook, a loop that never stalls): for
    /// the browser tests, which serve a view made up of hostile names.
    pub fn view_only(view: super::view::View) -> Shared {
        Shared {
            secret: None,
            branch: String::new(),
            sync_now: Arc::new(Notify::new()),
            fetch_now: AtomicBool::new(false),
            became_leader: AtomicBool::new(false),
            metrics: Mutex::new(Metrics::for_cluster(None)),
            last_pass: Mutex::new(None),
            stale_after: Duration::MAX,
            fetching_since: Mutex::new(None),
            fetch_stuck: Duration::MAX,
            deliveries: Deliveries::default(),
            view,
        }
    }
}

/// Webhook bodies read at once: a body is buffered (up to MAX_BODY) before its signature can be
/// checked, so anyone able to reach the port could otherwise make the daemon hold MAX_BODY per
/// connection (512 connections: 512 MiB against its memory limit). The rest are turned away
/// with 503 before their body is read. GitHub does not redeliver a failed delivery by itself:
/// the next poll (`--interval`) fetches the commit instead.
const BODY_READS: usize = 4;
/// Signed deliveries remembered, to take a replayed one as already done.
const REMEMBERED: usize = 1024;

/// What the webhook keeps between requests.
pub struct Deliveries {
    reading: tokio::sync::Semaphore,
    /// SHA-256 of the last REMEMBERED signed bodies taken, oldest first.
    seen: Mutex<VecDeque<[u8; 32]>>,
}

impl Default for Deliveries {
    fn default() -> Deliveries {
        Deliveries {
            reading: tokio::sync::Semaphore::new(BODY_READS),
            seen: Mutex::new(VecDeque::with_capacity(REMEMBERED)),
        }
    }
}

impl Deliveries {
    /// Takes the signed BODY: false when it was taken before (a replay: the same push, the same
    /// bytes), which then triggers nothing.
    fn first(&self, body: &[u8]) -> bool {
        use sha2::Digest;
        let digest: [u8; 32] = Sha256::digest(body).into();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains(&digest) {
            return false;
        }
        if seen.len() == REMEMBERED {
            seen.pop_front();
        }
        seen.push_back(digest);
        true
    }
}

/// Whether SIGNATURE has the form of one (`sha256=` and 64 hex digits): nothing else is worth
/// reading a body for.
fn well_formed(signature: &str) -> bool {
    signature
        .trim()
        .strip_prefix("sha256=")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
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
            let (ready, standby) = {
                let m = shared.metrics.lock().expect("metrics");
                (m.ready, m.standby)
            };
            if ready {
                reply(StatusCode::OK, "ready")
            } else if standby {
                reply(StatusCode::OK, "ready: a standby (another replica leads)")
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
        (Method::GET, p) if shared.view.serves(p) => shared.view.get(&req),
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
        .filter(|s| well_formed(s))
        .map(str::to_string);
    // No body is read for a request without a signature, nor beyond BODY_READS at once.
    let Some(signature) = signature else {
        shared.metrics.lock().expect("metrics").webhook("rejected");
        return reply(StatusCode::UNAUTHORIZED, "bad or missing signature");
    };
    let Ok(reading) = shared.deliveries.reading.try_acquire() else {
        shared.metrics.lock().expect("metrics").webhook("busy");
        return reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy: other webhook bodies are being read; deliver again later",
        );
    };
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return reply(StatusCode::PAYLOAD_TOO_LARGE, "body too large"),
    };
    drop(reading);
    if !signature_ok(
        secrecy::ExposeSecret::expose_secret(secret),
        &body,
        &signature,
    ) {
        shared.metrics.lock().expect("metrics").webhook("rejected");
        return reply(StatusCode::UNAUTHORIZED, "bad or missing signature");
    }
    if !shared.deliveries.first(&body) {
        shared.metrics.lock().expect("metrics").webhook("replayed");
        return reply(StatusCode::OK, "delivery already taken: ignored");
    }
    shared.metrics.lock().expect("metrics").webhook("accepted");
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

/// A full house closes no connection younger than this: one just accepted gets time to send
/// its request, even when the daemon or its client is short of CPU.
const EVICTION_GRACE: Duration = Duration::from_millis(100);

/// One open connection: when it was accepted, whether its request header has arrived, and the
/// switch that closes it (dropped: closed).
struct Conn {
    id: u64,
    at: Instant,
    started: Arc<AtomicBool>,
    _close: oneshot::Sender<()>,
}

/// Connections open now, oldest first.
#[derive(Default)]
struct Open {
    next: u64,
    conns: VecDeque<Conn>,
}

impl Open {
    /// Closes the oldest connection still waiting for its request header (a slow client), else
    /// the oldest; or says how long to wait when it is younger than EVICTION_GRACE.
    fn evict(&mut self, now: Instant) -> Result<(), Duration> {
        let i = self
            .conns
            .iter()
            .position(|c| !c.started.load(Ordering::Relaxed))
            .unwrap_or(0);
        let Some(c) = self.conns.get(i) else {
            return Ok(());
        };
        let age = now.saturating_duration_since(c.at);
        if age < EVICTION_GRACE {
            return Err(EVICTION_GRACE - age);
        }
        self.conns.remove(i);
        Ok(())
    }
}

/// Makes room for one more connection: evicts while the house is full, waiting (accepting
/// nothing; the kernel's backlog holds the next clients) while every candidate is in its grace.
async fn make_room(open: &Mutex<Open>, cap: usize) {
    loop {
        let wait = {
            let mut o = open.lock().expect("open connections");
            if o.conns.len() < cap {
                return;
            }
            match o.evict(Instant::now()) {
                Ok(()) => continue,
                Err(wait) => wait,
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// Serves until the process ends. A full house closes the oldest connection that is slow to
/// send its request header (a quick probe or a webhook is served as soon as its header is in),
/// never one younger than EVICTION_GRACE, so a flood of slow clients cannot lock `/healthz` or
/// the webhook out; accept errors (out of descriptors) back off.
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
        make_room(&open, cap).await;
        let (close, closed) = oneshot::channel();
        let started = Arc::new(AtomicBool::new(false));
        let id = {
            let mut o = open.lock().expect("open connections");
            o.next += 1;
            let id = o.next;
            o.conns.push_back(Conn {
                id,
                at: Instant::now(),
                started: started.clone(),
                _close: close,
            });
            id
        };
        let (shared, open) = (shared.clone(), open.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                started.store(true, Ordering::Relaxed);
                handle(shared.clone(), req)
            });
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
                .retain(|c| c.id != id);
        });
        // A deep backlog is accepted in a burst: let the connection just accepted (a probe's
        // request is already there) and those just evicted (their descriptors) run first.
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

/// Clients the kernel holds for accept. Deeper than the default 1024 so a probe still finds a
/// place behind a flood of slow clients waiting to reconnect; the kernel caps it at somaxconn.
const LISTEN_BACKLOG: u32 = 4096;

/// Binds ADDR (errors name the address).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    let fail = |e: std::io::Error| format!("cannot listen on {addr}: {e}");
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(fail)?;
    socket.set_reuseaddr(true).map_err(fail)?;
    socket.bind(addr).map_err(fail)?;
    socket.listen(LISTEN_BACKLOG).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(id: u64, at: Instant, started: bool) -> Conn {
        Conn {
            id,
            at,
            started: Arc::new(AtomicBool::new(started)),
            _close: oneshot::channel().0,
        }
    }

    #[test]
    fn a_full_house_closes_the_oldest_slow_client_and_none_in_its_grace() {
        let now = Instant::now();
        let old = now - Duration::from_secs(3);
        let mut o = Open::default();
        // The oldest has sent its request (a webhook reading its body): a slow client goes first.
        o.conns.push_back(conn(1, old, true));
        o.conns.push_back(conn(2, old, false));
        o.conns.push_back(conn(3, now, false));
        assert_eq!(o.evict(now), Ok(()));
        let ids: Vec<u64> = o.conns.iter().map(|c| c.id).collect();
        assert_eq!(ids, [1, 3]);
        // The only slow client is in its grace: wait for it, close nothing.
        let wait = o.evict(now).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= EVICTION_GRACE, "{wait:?}");
        assert_eq!(o.conns.len(), 2);
        // Once it is past its grace, it goes; then the oldest of those served.
        assert_eq!(o.evict(now + EVICTION_GRACE), Ok(()));
        assert_eq!(o.conns.front().map(|c| c.id), Some(1));
        assert_eq!(o.evict(now + EVICTION_GRACE), Ok(()));
        assert!(o.conns.is_empty());
    }

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

    #[test]
    fn a_signed_body_is_taken_once_and_the_oldest_are_forgotten_past_the_bound() {
        let d = Deliveries::default();
        assert!(d.first(b"push 1"));
        assert!(!d.first(b"push 1"), "a replay");
        assert!(d.first(b"push 2"));
        for i in 0..REMEMBERED {
            d.first(format!("filler {i}").as_bytes());
        }
        assert_eq!(d.seen.lock().unwrap().len(), REMEMBERED);
        assert!(d.first(b"push 1"), "forgotten past {REMEMBERED} deliveries");
    }

    #[test]
    fn only_a_well_formed_signature_lets_a_body_be_read() {
        let hex = "ab".repeat(32);
        assert!(well_formed(&format!("sha256={hex}")));
        for bad in [
            String::new(),
            hex.clone(),
            format!("sha1={hex}"),
            format!("sha256={}", &hex[1..]),
            format!("sha256={}zz", &hex[2..]),
        ] {
            assert!(!well_formed(&bad), "{bad}");
        }
    }
}
