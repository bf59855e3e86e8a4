//! The daemon's git client against hostile servers and repositories, on loopback (no bed): a
//! cluster.yaml larger than 4 MiB is refused from its object header before it is read, and a
//! server that refuses the credentials gets them once, not again and again.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use slurmops::source::remote::{Auth, READ_TIMEOUT, Remote, RemoteError};

fn git(dir: &std::path::Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example"])
        .args(args)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

fn remote(url: String, auth: Auth, mirror: std::path::PathBuf) -> Remote {
    Remote {
        url,
        branch: "main".into(),
        path: String::new(),
        auth,
        mirror,
        timeout: READ_TIMEOUT,
    }
}

#[test]
fn a_cluster_yaml_over_4_mib_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    git(dir.path(), &["init", "-q", "-b", "main", "src"]);
    let big = "# padding\n".repeat(500_000); // 5 MB
    std::fs::write(src.join("cluster.yaml"), big).unwrap();
    git(&src, &["add", "."]);
    git(&src, &["commit", "-qm", "huge"]);
    let r = remote(
        format!("file://{}", src.display()),
        Auth::Anonymous,
        dir.path().join("mirror"),
    );
    match r.fetch() {
        Err(e @ RemoteError::TooLarge { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("5000000 bytes") && text.contains("at most"),
                "{text}"
            );
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn refused_credentials_are_offered_once() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let with_credentials = Arc::new(AtomicUsize::new(0));
    let counter = with_credentials.clone();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut buf = vec![0u8; 8192];
            let n = s.read(&mut buf).unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]).to_lowercase();
            if request.contains("authorization:") {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            let _ = s.write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let r = remote(
        format!("http://127.0.0.1:{port}/repo.git"),
        Auth::Token("wrong-token".to_string().into()),
        dir.path().join("mirror"),
    );
    let err = r.fetch().unwrap_err().to_string();
    assert!(err.contains("refused the credentials"), "{err}");
    assert!(!err.contains("wrong-token"), "{err}");
    assert_eq!(
        with_credentials.load(Ordering::SeqCst),
        1,
        "credentials sent more than once"
    );
}
