use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::slurm::auth::Secret;

#[test]
fn jobs_are_never_submitted_as_the_administrator_the_token_speaks_for_nor_root() {
    let client = |job_user: &str| {
        let creds = Credentials::Key {
            key: crate::slurm::auth::KeyBytes(b"k".to_vec()),
            user: "slurm".into(),
            lifetime: Duration::from_secs(60),
        };
        let mut c = Config::new("http://127.0.0.1:9", creds);
        c.job_user = job_user.into();
        Client::new(c).unwrap()
    };
    for admin in ["slurm", "root", "nobody", ""] {
        let e = client(admin).job_user().unwrap_err().to_string();
        assert!(e.contains("--job-user"), "{admin}: {e}");
    }
    assert_eq!(client("daemon").job_user().unwrap(), "daemon");
    let c = client("hpc-checks");
    assert_eq!(
        crate::slurm::SlurmNodes::submitter(&c).as_deref(),
        Some("hpc-checks")
    );
}

/// A server that answers every request with a redirect to TARGET.
fn redirecting(target: String) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}/slurm/v0.0.42/ping/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    port
}

#[test]
fn the_answer_cap_is_raised_in_mib_and_nonsense_keeps_the_default() {
    assert_eq!(max_answer_from(None), MAX_ANSWER);
    assert_eq!(max_answer_from(Some("512")), 512 << 20);
    assert_eq!(max_answer_from(Some("lots")), MAX_ANSWER);
    assert_eq!(max_answer_from(Some("0")), MAX_ANSWER);
}

#[tokio::test]
async fn a_redirect_never_carries_the_token_elsewhere() {
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("http://{}", elsewhere.local_addr().unwrap());
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = reached.clone();
    std::thread::spawn(move || {
        for _ in elsewhere.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let port = redirecting(target);
    let mut config = Config::new(
        format!("http://127.0.0.1:{port}"),
        Credentials::Token {
            token: Secret::new("eyJ.secret.token"),
            user: None,
        },
    );
    config.attempts = 1;
    let client = Client::new(config).unwrap();
    let err = client.ping().await.unwrap_err().to_string();
    assert!(!err.contains("eyJ.secret.token"), "{err}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
}
