use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use super::*;

/// How the local slurmrestd answers `nodes/`.
#[derive(Clone, Copy)]
enum Send {
    /// BODY in chunks of N bytes, a pause between each (chunked transfer, no length).
    Chunked(usize),
    /// Announces the body's length and closes after half of it.
    CutShort,
}

/// A slurmrestd answering every request with BODY as HOW says.
fn serving(body: String, how: Send) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let body = body.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) <= 2 {
                        break;
                    }
                }
                let mut s = s;
                match how {
                    Send::Chunked(n) => {
                        let _ = write!(
                            s,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                        );
                        for c in body.as_bytes().chunks(n) {
                            let _ = write!(s, "{:x}\r\n", c.len());
                            let _ = s.write_all(c);
                            let _ = write!(s, "\r\n");
                            let _ = s.flush();
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        let _ = write!(s, "0\r\n\r\n");
                    }
                    Send::CutShort => {
                        let _ = write!(
                            s,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = s.write_all(&body.as_bytes()[..body.len() / 2]);
                    }
                }
            });
        }
    });
    url
}

fn client(url: String, max_answer: usize) -> Client {
    let mut config = super::super::test_config(url);
    config.timeout = Duration::from_secs(10);
    config.max_answer = max_answer;
    Client::new(config).unwrap()
}

/// A node list of N nodes, as slurmrestd writes it.
fn list(n: usize) -> String {
    let nodes: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"name":"w-{i}","state":["IDLE","DRAIN"],"reason":"r {i}","features":["a","b"],"address":"10.0.0.{}","port":6818,"cpus":8}}"#,
                i % 250
            )
        })
        .collect();
    format!(
        r#"{{"nodes":[{}],"last_update":{{"set":true,"infinite":false,"number":42}},"meta":{{"plugin":{{"type":"openapi/slurmctld"}}}},"errors":[],"warnings":[]}}"#,
        nodes.join(",")
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_list_is_parsed_as_its_chunks_arrive_and_every_node_is_read() {
    let body = list(2000);
    let c = client(serving(body.clone(), Send::Chunked(7001)), 64 << 20);
    let nodes = c.nodes().await.expect("the list");
    assert_eq!(nodes.len(), 2000);
    let n = &nodes["w-1999"];
    assert_eq!(n.reason, "r 1999");
    assert!(n.state.has("DRAIN"), "{:?}", n.state);
    assert_eq!(n.features, ["a", "b"]);
    assert_eq!(n.cpus, 8);
    assert_eq!(c.traffic().bytes, body.len() as u64, "bytes counted");
}

#[tokio::test(flavor = "multi_thread")]
async fn slurm_s_errors_in_a_node_list_s_answer_are_an_error_not_a_list() {
    let body = r#"{"nodes":[{"name":"w-0","state":["IDLE"]}],"errors":[{"error":"Unable to query nodes","error_number":1}]}"#;
    let c = client(serving(body.into(), Send::Chunked(10)), 64 << 20);
    match c.nodes().await {
        Err(SlurmError::Api { errors, .. }) => {
            assert_eq!(errors[0].error.as_deref(), Some("Unable to query nodes"))
        }
        other => panic!("{:?}", other.map(|n| n.len())),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_list_cut_short_is_an_error_never_part_of_the_list() {
    let c = client(serving(list(500), Send::CutShort), 64 << 20);
    let got = c.nodes().await;
    assert!(got.is_err(), "{:?}", got.map(|n| n.len()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_list_past_the_bound_is_refused_as_it_arrives() {
    // No length announced: the bound is kept on what arrives.
    let c = client(serving(list(2000), Send::Chunked(4096)), 64 << 10);
    match c.nodes().await {
        Err(SlurmError::TooLarge { path, .. }) => assert!(path.ends_with("nodes/"), "{path}"),
        other => panic!("{:?}", other.map(|n| n.len())),
    }
}
