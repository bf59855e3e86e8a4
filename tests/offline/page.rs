//! The live view in a real browser: Debian's Chromium, headless, loads the page from the
//! daemon's own HTTP server (`daemon::http::serve`) serving a view whose names, reasons and
//! messages are hostile markup. It must show them as text, run no script of theirs, log no
//! console error (a CSP violation is one) and hold no secret; screenshots at 1280 px and at a
//! phone's width, light and dark, go to `artifacts/page/` beside the build (under
//! `target/TRIPLE/` with `--target`) for people to look at.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use slurmops::controller::decide::{Holder, Progress, Waiting};
use slurmops::controller::gate::CanaryProgress;
use slurmops::daemon::http::{self, Shared};
use slurmops::daemon::view::{Facts, View};
use slurmops::status::configmap::Status;
use slurmops::status::{Note, Recorder, node_set_ref};

const XSS: &str =
    "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>";
const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.c2lnbmF0dXJlLW9mLXRoZS1rZXk";

fn hostile() -> Status {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let gpu = Progress {
        node_set: "gpu".into(),
        revision: "gpu-5d8f7c9b4".into(),
        replicas: 8,
        updated: 3,
        in_flight: vec!["gpu-3".into()],
        waiting: vec![Waiting {
            node: "gpu-3".into(),
            why: format!("rollout {XSS}"),
            jobs: vec![
                Holder {
                    id: 4242,
                    user: format!("alice{XSS}"),
                    start: None,
                    end: Some(now + 1800),
                },
                Holder {
                    id: 4243,
                    user: "bob".into(),
                    start: None,
                    end: None,
                },
            ],
            since: Some(now - 300),
        }],
        canary: Some(CanaryProgress {
            revision: "gpu-5d8f7c9b4".into(),
            stage: slurmops::controller::features::canary::CanaryStage::Failed,
            canaries: vec!["gpu-0".into()],
            jobs: vec![4100],
            error: Some(format!("job 4100 failed: {XSS}")),
            tail: Some(format!("nccl all_reduce: 112 GB/s\n{XSS}")),
            deadline: None,
        }),
        ..Progress::default()
    };
    let cpu = Progress {
        node_set: "cpu".into(),
        revision: "cpu-77aa01".into(),
        replicas: 4,
        updated: 4,
        done: true,
        ..Progress::default()
    };
    Status {
        repository: "https://deploy:ghp_s3cr3tT0ken@git.example/infra.git".into(),
        branch: "main".into(),
        last_seen_commit: "b".repeat(40),
        last_applied_commit: "a".repeat(40),
        result: "applied".into(),
        errors: format!("slurmrestd: {XSS} (token {JWT})"),
        summary: "applied: 2 created, 1 updated".into(),
        last_attempt: "2026-11-28T01:00:00Z".into(),
        last_fetch: "2026-11-28T01:00:00Z".into(),
        node_sets: serde_json::to_string(&vec![gpu, cpu]).unwrap(),
        held: format!("slurmctld waits for a window {XSS}"),
        ..Status::default()
    }
}

/// The daemon's HTTP server on loopback, serving the hostile view (TOKEN: its --ui-token-file).
async fn serve(token: Option<&[u8]>) -> SocketAddr {
    let view = View::new(true, token);
    let events = Recorder::default();
    events.show(
        &Note {
            involved: node_set_ref("slurm", "gpu", false),
            reason: "CanaryFailed",
            message: format!("gpu-0: {XSS}"),
            warning: true,
        },
        2,
    );
    view.publish(
        &hostile(),
        &Facts {
            cluster: Some("prod"),
            namespace: "slurm",
            events: &events,
        },
    );
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(http::serve(listener, Arc::new(Shared::view_only(view))));
    addr
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../artifacts/page");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Chromium, headless, on URL with ARGS: its standard output (the DOM with `--dump-dom`) and
/// its console messages.
fn chromium(url: &str, args: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=4000",
            &format!("--user-data-dir={}", profile.path().display()),
        ])
        .args(args)
        .arg(url)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run chromium ({e}): apt-get install chromium (tests/bed/packages.sh does)"
            )
        });
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "chromium failed:\n{stderr}");
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .collect::<Vec<_>>()
        .join("\n");
    (String::from_utf8_lossy(&out.stdout).to_string(), console)
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_names_show_as_text_and_the_page_logs_no_error_and_no_secret() {
    let addr = serve(None).await;
    let url = format!("http://{addr}/");
    let (dom, console) = tokio::task::spawn_blocking(move || chromium(&url, &["--dump-dom"]))
        .await
        .unwrap();
    assert!(console.is_empty(), "console messages:\n{console}");
    // Drawn from the data: the NodeSets, the waiting worker's jobs, the failed canary.
    for shown in [
        "gpu",
        "cpu",
        "3 / 8",
        "job 4242",
        "job 4243",
        "canary failed",
        "validation job 4100",
        "CanaryFailed ×2",
    ] {
        assert!(dom.contains(shown), "{shown:?} not on the page:\n{dom}");
    }
    // Markup from the data is text: escaped in the DOM, never an element, never run.
    assert!(
        dom.contains("alice&lt;img src=x onerror=\"document.title='pwned'\"&gt;&lt;script&gt;"),
        "{dom}"
    );
    assert!(
        !dom.contains("<img src=\"x\""),
        "an element made from data:\n{dom}"
    );
    assert!(
        !dom.contains("pwned</title>") && dom.contains("<title>slurmops · prod · applied</title>"),
        "{dom}"
    );
    for secret in ["ghp_s3cr3tT0ken", "deploy:", JWT] {
        assert!(!dom.contains(secret), "{secret} on the page");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_token_the_page_asks_for_it_and_shows_nothing_before() {
    let addr = serve(Some(b"0123456789abcdef0123")).await;
    let url = format!("http://{addr}/");
    let (dom, console) = tokio::task::spawn_blocking(move || chromium(&url, &["--dump-dom"]))
        .await
        .unwrap();
    assert!(dom.contains("asks for a bearer token"), "{dom}");
    assert!(
        !dom.contains("<form id=\"login\" hidden"),
        "the token form is hidden:\n{dom}"
    );
    assert!(!dom.contains("job 4242") && !dom.contains("ghp_"), "{dom}");
    // The refused data request is the only console line (Chromium logs a 401).
    assert!(console.lines().all(|l| l.contains("401")), "{console}");
}

#[tokio::test(flavor = "multi_thread")]
async fn screenshots_at_1280_px_and_on_a_phone_light_and_dark() {
    let addr = serve(None).await;
    let dir = artifacts();
    let shots = [
        (
            "view-1280-light.png",
            "1280,900",
            "--blink-settings=preferredColorScheme=1",
        ),
        (
            "view-1280-dark.png",
            "1280,900",
            "--blink-settings=preferredColorScheme=0",
        ),
        (
            "view-phone-light.png",
            "390,844",
            "--blink-settings=preferredColorScheme=1",
        ),
        (
            "view-phone-dark.png",
            "390,844",
            "--blink-settings=preferredColorScheme=0",
        ),
    ];
    for (name, size, scheme) in shots {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        let url = format!("http://{addr}/");
        let (shot, size, scheme) = (
            format!("--screenshot={}", path.display()),
            format!("--window-size={size}"),
            scheme.to_string(),
        );
        let (_, console) =
            tokio::task::spawn_blocking(move || chromium(&url, &[&shot, &size, &scheme]))
                .await
                .unwrap();
        assert!(console.is_empty(), "{name}: console messages:\n{console}");
        let png = std::fs::read(&path).unwrap_or_else(|e| panic!("{name}: no screenshot: {e}"));
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{name}: {} bytes",
            png.len()
        );
    }
    eprintln!("screenshots in {}", dir.display());
}
