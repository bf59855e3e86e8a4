//! The live view under viewers (issue 38): the daemon's HTTP server (`daemon::http::serve`, on a
//! runtime shaped as the daemon's: two worker threads) serves a view of 1,000 workers while 200
//! viewers load the page at once and then poll its data every 2 s, as the page does (one
//! connection per request, as the daemon serves; `If-None-Match`, so an unchanged copy is a 304).
//! Measured before and during: `/healthz` latency (a probe every 50 ms) and a pass's work on the
//! same runtime (publishing a changed view and rendering the 1,000-worker cluster). The viewers
//! run on threads of their own, on the same two cores: the figures include their cost.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Figure, fig, generate, ms};
use crate::controller::decide::{Holder, Progress, Waiting};
use crate::daemon::http::{self, Shared};
use crate::daemon::view::{API_PATH, Facts, View};
use crate::status::configmap::Status;
use crate::status::{Note, Recorder};

const VIEWERS: usize = 200;
const POLL: Duration = Duration::from_secs(2);
const LOAD: Duration = Duration::from_secs(12);

/// The status of 50 NodeSets of 20 workers, 40 of them waiting for two jobs each, bounded as the
/// daemon bounds it. SEQ changes one fact (a new pass with news).
fn status(seq: u64) -> Status {
    let sets: Vec<Progress> = (0..50)
        .map(|s| Progress {
            node_set: format!("gpu-{s:02}"),
            revision: format!("gpu-{s:02}-5d8f7c9b{seq}"),
            replicas: 20,
            updated: 12,
            in_flight: (0..4).map(|i| format!("gpu-{s:02}-{i}")).collect(),
            waiting: match s < 10 {
                true => (0..4)
                    .map(|i| Waiting {
                        node: format!("gpu-{s:02}-{i}"),
                        why: "rollout".into(),
                        jobs: (0..2)
                            .map(|j| Holder {
                                id: 100_000 + (s * 10 + i * 2 + j) as u64,
                                user: format!("user{j}"),
                                start: None,
                                end: Some(1_900_000_000 + j as i64),
                            })
                            .collect(),
                        since: Some(1_800_000_000),
                    })
                    .collect(),
                false => Vec::new(),
            },
            ..Progress::default()
        })
        .collect();
    Status {
        repository: "https://git.example/infra.git".into(),
        branch: "main".into(),
        last_applied_commit: format!("{seq:040}"),
        result: crate::vocab::Verdict::Applied.as_str().into(),
        node_sets: crate::status::bound::progress(&sets),
        ..Status::default()
    }
}

fn events() -> Recorder {
    let r = Recorder::default();
    for i in 0..crate::status::SHOWN {
        r.show(
            &Note {
                involved: crate::status::node_set_ref("slurm", &format!("gpu-{i:02}"), false),
                reason: "Draining",
                message: format!(
                    "gpu-{i:02}-0 waits for job {} (user0, expected end …)",
                    100_000 + i
                ),
                warning: false,
            },
            1,
        );
    }
    r
}

/// GET PATH (with ETAG as If-None-Match): the status code, the ETag answered, the bytes read.
async fn get(
    addr: SocketAddr,
    path: &str,
    etag: Option<&str>,
) -> std::io::Result<(u16, Option<String>, usize)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let inm = etag
        .map(|e| format!("If-None-Match: {e}\r\n"))
        .unwrap_or_default();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: bench\r\n{inm}Connection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await?;
    let head = String::from_utf8_lossy(&out[..out.len().min(1024)]);
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let tag = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("etag: ")
                .or_else(|| l.strip_prefix("ETag: "))
        })
        .map(|t| t.trim().to_string());
    Ok((code, tag, out.len()))
}

/// /healthz latencies (ms) probed every 50 ms for SPAN.
async fn probe(addr: SocketAddr, span: Duration) -> Vec<f64> {
    let mut out = Vec::new();
    let end = Instant::now() + span;
    while Instant::now() < end {
        let t = Instant::now();
        if let Ok((200, _, _)) = get(addr, "/healthz", None).await {
            out.push(ms(t.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    out
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(((v.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// A pass's work on the server's runtime: publishing a changed view and rendering the
/// 1,000-worker cluster. Its median over N runs, in ms.
fn passes(
    rt: &tokio::runtime::Runtime,
    shared: &Arc<Shared>,
    recorder: &Arc<Recorder>,
    seq: &mut u64,
    n: usize,
) -> f64 {
    let c = crate::cluster::load("bench.yaml", &generate(50, 20, 4, 0))
        .expect("the generated cluster is valid");
    let c = Arc::new(c);
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            *seq += 1;
            let (shared, recorder, c, st) =
                (shared.clone(), recorder.clone(), c.clone(), status(*seq));
            let t = Instant::now();
            rt.block_on(async move {
                tokio::spawn(async move {
                    shared.view.publish(
                        &st,
                        &Facts {
                            cluster: Some("bench"),
                            namespace: "slurm",
                            events: &recorder,
                        },
                    );
                    std::hint::black_box(crate::render::render(&c));
                })
                .await
                .expect("the pass")
            });
            let d = ms(t.elapsed());
            std::thread::sleep(Duration::from_millis(200));
            d
        })
        .collect();
    pct(&mut times, 0.5)
}

/// The figures: /healthz p50/p99 and a pass's median, before and during 200 viewers; requests
/// served and bytes per poll.
pub fn viewers() -> Vec<Figure> {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let recorder = Arc::new(events());
    let shared = Arc::new(Shared::view_only(View::new(true, None)));
    let mut seq = 0;
    shared.view.publish(
        &status(seq),
        &Facts {
            cluster: Some("bench"),
            namespace: "slurm",
            events: &recorder,
        },
    );
    let addr = server.block_on(async {
        let l = http::bind("127.0.0.1:0".parse().expect("address"))
            .await
            .expect("bind");
        let addr = l.local_addr().expect("address");
        tokio::spawn(http::serve(l, shared.clone()));
        addr
    });
    let mut idle = clients.block_on(probe(addr, Duration::from_secs(3)));
    let pass_idle = passes(&server, &shared, &recorder, &mut seq, 10);

    // 200 viewers: the page's four loads at once, then a poll every 2 s.
    let served = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let failed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let poll_bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let viewers: Vec<_> = (0..VIEWERS)
        .map(|_| {
            let (served, failed, poll_bytes) = (served.clone(), failed.clone(), poll_bytes.clone());
            clients.spawn(async move {
                use std::sync::atomic::Ordering::Relaxed;
                for path in ["/", "/app.js", "/app.css", "/icon.svg"] {
                    match get(addr, path, None).await {
                        Ok((200, _, _)) => served.fetch_add(1, Relaxed),
                        _ => failed.fetch_add(1, Relaxed),
                    };
                }
                let mut tag: Option<String> = None;
                while started.elapsed() < LOAD {
                    match get(addr, API_PATH, tag.as_deref()).await {
                        Ok((code @ (200 | 304), t, n)) => {
                            served.fetch_add(1, Relaxed);
                            if code == 200 {
                                poll_bytes.store(n as u64, Relaxed);
                                tag = t;
                            }
                        }
                        _ => {
                            failed.fetch_add(1, Relaxed);
                        }
                    }
                    tokio::time::sleep(POLL).await;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let prober = clients.spawn(probe(addr, Duration::from_secs(8)));
    let pass_loaded = passes(&server, &shared, &recorder, &mut seq, 10);
    let mut loaded = clients.block_on(prober).expect("the prober");
    for v in viewers {
        let _ = clients.block_on(v);
    }
    let secs = started.elapsed().as_secs_f64();
    use std::sync::atomic::Ordering::Relaxed;
    let (served, failed) = (served.load(Relaxed), failed.load(Relaxed));
    vec![
        fig(
            "view.healthz_p50.no_viewer",
            pct(&mut idle, 0.5),
            "ms",
            "probed every 50 ms for 3 s",
        ),
        fig(
            "view.healthz_p99.no_viewer",
            pct(&mut idle, 0.99),
            "ms",
            "probed every 50 ms for 3 s",
        ),
        fig(
            "view.healthz_p50.200_viewers",
            pct(&mut loaded, 0.5),
            "ms",
            "each viewer loads the page, then polls every 2 s",
        ),
        fig(
            "view.healthz_p99.200_viewers",
            pct(&mut loaded, 0.99),
            "ms",
            "goal < 100 ms while 200 viewers poll",
        ),
        fig(
            "view.pass.no_viewer",
            pass_idle,
            "ms",
            "median of 10: publish a changed view of 1,000 workers + render them",
        ),
        fig(
            "view.pass.200_viewers",
            pass_loaded,
            "ms",
            "the same pass while the viewers poll; goal within 1.5x of no viewer",
        ),
        fig(
            "view.requests_served",
            served as f64 / secs,
            "req/s",
            format!("{served} in {secs:.0} s, {failed} failed"),
        ),
        fig(
            "view.poll_size",
            poll_bytes.load(Relaxed) as f64 / 1024.0,
            "KiB",
            "the view of 1,000 workers; an unchanged poll is a 304",
        ),
    ]
}
