//! slurmrestd answers that could turn the daemon into load on the users' scheduler: a read that
//! times out (slurmrestd still building its answer) and an answer past the size slurmops reads
//! are errors at once, asked once, never retried; the queue is never asked for whole. The peer is a socket on
//! loopback that behaves as such a slurmrestd does on the wire (no bed needed).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use slurmops::slurm::auth::{Credentials, Secret};
use slurmops::slurm::{Client, Config, DataParser, SlurmError};

/// A peer on loopback: `jobs/state/` answers STATES pending jobs; every other request is
/// ANSWER's, on its connection. Counts those other requests.
fn peer_with(states: usize, answer: fn(std::net::TcpStream)) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let count = count.clone();
            std::thread::spawn(move || {
                // One request per connection.
                if request(&mut s).contains("/jobs/state/") {
                    let jobs: Vec<String> = (1..=states)
                        .map(|i| format!(r#"{{"job_id": "{i}", "state": ["PENDING"]}}"#))
                        .collect();
                    let body = format!(r#"{{"jobs": [{}], "errors": []}}"#, jobs.join(","));
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    return;
                }
                count.fetch_add(1, Ordering::SeqCst);
                answer(s)
            });
        }
    });
    (url, seen)
}

/// Reads the request head.
fn request(s: &mut std::net::TcpStream) -> String {
    let mut buf = [0u8; 4096];
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&head).to_string()
}

fn client(url: &str, timeout: Duration) -> Client {
    Client::new(config(url, timeout)).unwrap()
}

/// A client's settings for the peer at URL: its first parser, TIMEOUT for every read.
fn config(url: &str, timeout: Duration) -> Config {
    let mut cfg = Config::new(
        url,
        Credentials::Token {
            token: Secret::new("t".to_string()),
            user: None,
        },
    );
    cfg.parser = Some(DataParser::V0042);
    cfg.timeout = timeout;
    cfg.queue_timeout = timeout;
    cfg.attempts = 4;
    cfg
}

#[tokio::test]
async fn a_read_that_times_out_is_asked_once_and_says_so() {
    // slurmrestd not answering a job's read: the request is read, nothing comes back.
    let (url, seen) = peer_with(1, |_s| {
        std::thread::sleep(Duration::from_secs(30));
    });
    let c = client(&url, Duration::from_secs(1));
    let t = Instant::now();
    let err = c.jobs().await.unwrap_err();
    assert!(matches!(err, SlurmError::Timeout { .. }), "{err:?}");
    assert!(!err.is_transient());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "the timed-out read was retried"
    );
    assert!(err.to_string().contains("job/1"), "{err}");
    // Not asked again at once: the next read says why and when.
    let again = c.jobs().await.unwrap_err();
    assert!(
        matches!(again, SlurmError::QueueUnknown { .. }),
        "{again:?}"
    );
    assert!(again.to_string().contains("failed"), "{again}");
    assert_eq!(seen.load(Ordering::SeqCst), 1, "asked again at once");
}

#[tokio::test]
async fn an_answer_past_the_limit_is_refused_once_and_names_its_size() {
    // An answer that never ends: 64 KiB chunks, for ever.
    let (url, seen) = peer_with(1, |mut s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n");
        // A job whose record never ends (a job's comment of endless spaces).
        let _ = s.write_all(br#"{"jobs": [{"job_id": 1, "comment": ""#);
        let chunk = vec![b' '; 64 << 10];
        while s.write_all(&chunk).is_ok() {}
    });
    let c = client(&url, Duration::from_secs(60));
    let err = c.jobs().await.unwrap_err();
    assert!(matches!(err, SlurmError::TooLarge { .. }), "{err:?}");
    assert!(!err.is_transient());
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "the oversized read was retried"
    );
    assert!(err.to_string().contains("128 MiB"), "{err}");
    assert!(
        err.to_string().contains("SLURMOPS_SLURM_MAX_ANSWER_MIB"),
        "the error names the setting to raise: {err}"
    );
}

#[tokio::test]
async fn an_answer_announcing_a_length_past_the_limit_is_refused_before_its_body() {
    // A peer announcing 1 GiB, then sending nothing (slurmrestd would send it, slowly).
    let (url, seen) = peer_with(1, |mut s| {
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n{",
        );
        std::thread::sleep(Duration::from_secs(30));
    });
    let c = client(&url, Duration::from_secs(20));
    let t = Instant::now();
    let err = c.jobs().await.unwrap_err();
    assert!(matches!(err, SlurmError::TooLarge { .. }), "{err:?}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "refused only after {:?}: the body was waited for",
        t.elapsed()
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1, "asked again");
}

#[tokio::test]
async fn a_pass_waits_for_the_first_queue_read_no_longer_than_told() {
    // slurmrestd slow to answer the first job's read.
    let (url, _) = peer_with(1, |_s| std::thread::sleep(Duration::from_secs(30)));
    let mut c = client(&url, Duration::from_secs(60));
    c.set_queue_wait(Duration::from_millis(300));
    let t = Instant::now();
    let err = c.jobs().await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(matches!(err, SlurmError::QueueUnknown { .. }), "{err:?}");
    assert!(err.to_string().contains("first read"), "{err}");
}

#[tokio::test]
async fn a_queue_past_the_job_cap_is_never_asked_for_whole_and_names_the_setting() {
    // slurmrestd builds a whole answer in its memory (one of 100,000 jobs took Slurm 24.11's
    // down): the queue is never asked for whole; past the cap the jobs past it are not read, and
    // the error names the setting.
    let (url, seen) = peer_with(12, |mut s| {
        // (The request was read; any job's record will do.)
        let id = 1;
        let body = format!(r#"{{"jobs": [{{"job_id": {id}, "job_state": ["PENDING"]}}]}}"#);
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let mut cfg = config(&url, Duration::from_secs(60));
    cfg.max_jobs = 10;
    let c = Client::new(cfg).unwrap();
    let t = Instant::now();
    let err = c.jobs().await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(matches!(err, SlurmError::TooManyJobs { .. }), "{err:?}");
    assert!(err.to_string().contains("12 jobs"), "{err}");
    assert!(err.to_string().contains("SLURMOPS_SLURM_MAX_JOBS"), "{err}");
    assert!(
        seen.load(Ordering::SeqCst) <= 10,
        "jobs past the cap were read"
    );
}
