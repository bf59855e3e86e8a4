use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// A slurmrestd whose node list takes SLOW to answer; ASKED counts the requests for it.
fn slow_nodes(slow: Duration, asked: Arc<AtomicUsize>) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let asked = asked.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) <= 2 {
                        break;
                    }
                }
                asked.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(slow);
                let body = r#"{"nodes":[{"name":"w-0","state":["IDLE"]}],"last_update":{"set":true,"infinite":false,"number":7}}"#;
                let mut s = s;
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    url
}

/// Seen at 10,000 workers after a restart: slurmrestd took longer than a pass's deadline for
/// the whole node list; each pass abandoned its request and sent another, which slurmrestd built
/// too, behind the others, for two minutes. Now the request goes on and the next passes wait for
/// it: one request, and the list once it comes.
#[tokio::test(flavor = "multi_thread")]
async fn a_whole_node_list_slower_than_a_pass_is_waited_for_not_asked_again() {
    let asked = Arc::new(AtomicUsize::new(0));
    let url = slow_nodes(Duration::from_millis(1500), asked.clone());
    let mut config = super::super::test_config(url);
    config.timeout = Duration::from_millis(400);
    let c = Client::new(config).unwrap();
    for _ in 0..2 {
        match c.nodes().await {
            Err(SlurmError::StillAnswering { path, .. }) => assert_eq!(path, "nodes/"),
            other => panic!("{:?}", other.map(|n| n.len())),
        }
    }
    tokio::time::sleep(Duration::from_millis(900)).await;
    let nodes = c.nodes().await.expect("the answer of the first request");
    assert!(nodes.contains_key("w-0"), "{nodes:?}");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the node list was asked again"
    );
}
