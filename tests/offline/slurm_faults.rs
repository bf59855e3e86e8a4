//! slurmrestd answers that could turn the daemon into load on the users' scheduler: a read that
//! times out (slurmrestd still building a whole-queue answer) and an answer past the size
//! slurmops reads are errors at once, asked once, never retried. The peer is a socket on
//! loopback that behaves as such a slurmrestd does on the wire (no bed needed).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use slurmops::slurm::auth::{Credentials, Secret};
use slurmops::slurm::{Client, Config, DataParser, SlurmError};

/// A peer on loopback that runs ANSWER on each connection; counts the connections.
fn peer(answer: fn(std::net::TcpStream)) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || answer(s));
        }
    });
    (url, seen)
}

/// Reads the request head.
fn request(s: &mut std::net::TcpStream) {
    let mut buf = [0u8; 4096];
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

fn client(url: &str, timeout: Duration) -> Client {
    let mut cfg = Config::new(
        url,
        Credentials::Token {
            token: Secret::new("t".to_string()),
            user: None,
        },
    );
    cfg.parser = Some(DataParser::V0042);
    cfg.timeout = timeout;
    cfg.attempts = 4;
    Client::new(cfg).unwrap()
}

#[tokio::test]
async fn a_read_that_times_out_is_asked_once_and_says_so() {
    // slurmrestd building a whole-queue answer: the request is read, nothing comes back.
    let (url, seen) = peer(|mut s| {
        request(&mut s);
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
    assert!(err.to_string().contains("jobs/"), "{err}");
}

#[tokio::test]
async fn an_answer_past_the_limit_is_refused_once_and_names_its_size() {
    // An answer that never ends: 64 KiB chunks, for ever.
    let (url, seen) = peer(|mut s| {
        request(&mut s);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n");
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
