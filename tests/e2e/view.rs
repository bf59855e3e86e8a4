//! The live view on the bed, in a real browser: the daemon follows a repository on the bed's
//! git server against the bed's real Slurm, and Debian's Chromium, headless, driven through the
//! DevTools protocol (chromiumoxide), keeps its page open through a rollout. The page must show
//! the NodeSet, then within a few seconds of the drain the worker that waits for a user's running
//! job with that job's id, lose it once the worker is replaced, and show a failed canary with
//! its validation job; with no console message and no uncaught error all along. A screenshot of
//! each state (the idle cluster, the rollout waiting for a job, the failed canary) goes to
//! `artifacts/page/` beside the build (`target/artifacts/page/`, or under `target/TRIPLE/` with
//! `--target`, as CI builds), at 1280 px, and the failed canary also on a phone's width, dark.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::emulation::{
    MediaFeature, SetDeviceMetricsOverrideParams,
};
use chromiumoxide::cdp::browser_protocol::log::{EnableParams as LogEnable, EventEntryAdded};
use chromiumoxide::cdp::js_protocol::runtime::{EventConsoleApiCalled, EventExceptionThrown};
use chromiumoxide::page::{Page, ScreenshotParams};
use futures::StreamExt;

use crate::canary::{FAILING, make_check};
use crate::support::gitops::{Bed, drained_by_us, running, scancel};
use crate::support::slurm::submit_sleep;

/// The canary tests' NodeSet of three workers running IMAGE, all allowed out at once, with its
/// canary validated by the failing ConfigMap script (`canary::make_check`) when CANARY.
fn cluster(ns: &str, set: &str, image: &str, canary: bool) -> String {
    let text = crate::canary::cluster(ns, set, image, FAILING);
    if canary {
        return text;
    }
    let without = text.replace(
        &format!("        canary: {{replicas: 1, validate: {FAILING}}}\n"),
        "",
    );
    assert_ne!(without, text, "the canary tests' cluster changed shape");
    without
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../artifacts/page");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A headless Chromium with the page at URL open, and what its console said.
struct Viewer {
    browser: Browser,
    page: Page,
    said: Arc<Mutex<Vec<String>>>,
    _profile: tempfile::TempDir,
}

impl Viewer {
    async fn open(url: &str) -> Viewer {
        let profile = tempfile::tempdir().unwrap();
        let config = BrowserConfig::builder()
            .chrome_executable("/usr/bin/chromium")
            .no_sandbox()
            .user_data_dir(profile.path())
            .window_size(1280, 900)
            .viewport(None)
            .arg("--disable-gpu")
            .build()
            .unwrap();
        let (browser, mut handler) = Browser::launch(config).await.unwrap_or_else(|e| {
            panic!(
                "cannot start chromium ({e}): apt-get install chromium (tests/bed/packages.sh does)"
            )
        });
        tokio::spawn(async move { while handler.next().await.is_some() {} });
        let page = browser.new_page("about:blank").await.unwrap();
        let said = Arc::new(Mutex::new(Vec::new()));
        page.execute(LogEnable::default()).await.unwrap();
        let mut console = page
            .event_listener::<EventConsoleApiCalled>()
            .await
            .unwrap();
        let mut thrown = page.event_listener::<EventExceptionThrown>().await.unwrap();
        let mut logged = page.event_listener::<EventEntryAdded>().await.unwrap();
        let s = said.clone();
        tokio::spawn(async move {
            loop {
                let line = tokio::select! {
                    Some(e) = console.next() => format!("console.{:?}: {:?}", e.r#type, e.args.iter().map(|a| a.value.clone()).collect::<Vec<_>>()),
                    Some(e) = thrown.next() => format!("uncaught: {}", e.exception_details.text),
                    Some(e) = logged.next() => format!("{:?} {:?}: {}", e.entry.level, e.entry.source, e.entry.text),
                    else => break,
                };
                s.lock().unwrap().push(line);
            }
        });
        page.goto(url).await.unwrap();
        Viewer {
            browser,
            page,
            said,
            _profile: profile,
        }
    }

    /// The text of the page's elements that match SELECTOR, as a person reads it.
    async fn text(&self, selector: &str) -> String {
        let js = format!(
            "[...document.querySelectorAll({selector:?})].map(e => e.innerText).join('\\n')"
        );
        self.page
            .evaluate(js)
            .await
            .ok()
            .and_then(|v| v.into_value::<String>().ok())
            .unwrap_or_default()
    }

    /// Waits (WITHIN) until the text of SELECTOR's elements satisfies WANT; how long it took.
    async fn shows(
        &self,
        what: &str,
        selector: &str,
        within: Duration,
        want: impl Fn(&str) -> bool,
    ) -> Duration {
        let start = Instant::now();
        loop {
            let text = self.text(selector).await;
            if want(&text) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < within,
                "the page did not show {what} within {within:?}:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn screenshot(&self, name: &str) {
        let path = artifacts().join(name);
        self.page
            .save_screenshot(ScreenshotParams::builder().full_page(true).build(), &path)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!("screenshot: {}", path.display());
    }

    fn said(&self) -> Vec<String> {
        self.said.lock().unwrap().clone()
    }
}

on_slurm_releases!(
async fn the_page_follows_a_rollout_live_from_idle_to_a_worker_waiting_for_a_job_to_a_failed_canary() {
    let t = Bed::new("view").await;
    make_check(&t.env).await;
    let set = t.env.name("vw");
    let daemon = t.deployed(&cluster(&t.env.ns, &set, "img:1", false), "d", &[(&set, 3)]).await;
    let viewer = Viewer::open(&format!("http://127.0.0.1:{}/", daemon.port)).await;

    // Idle: the NodeSet, all three workers on its revision.
    viewer
        .shows("the idle NodeSet", "table.sets", Duration::from_secs(20), |t| t.contains(&set) && t.contains("3 / 3") && t.contains("up to date"))
        .await;
    viewer.screenshot("bed-idle.png").await;
    // No token asked: its form is not shown.
    let form = viewer.page.evaluate("getComputedStyle(document.getElementById('login')).display").await.unwrap();
    assert_eq!(form.into_value::<String>().unwrap(), "none", "the token form shows without a token");

    // A user's job on the first worker, then a new image: the worker waits for the job, and the
    // page (open all along, polling) names the job within a few seconds of the drain.
    let busy = format!("{set}-0");
    let job = submit_sleep(&busy, 300).await;
    running(job).await;
    t.repo.push(&cluster(&t.env.ns, &set, "img:2", false), "img:2");
    drained_by_us(&busy, Duration::from_secs(60)).await;
    let drained = Instant::now();
    let seen = viewer
        .shows(&format!("job {job}"), "ul.waits", Duration::from_secs(30), |t| t.contains(&format!("job {job}")) && t.contains(&busy))
        .await;
    eprintln!("the page named job {job} {:.1} s after {busy} drained", drained.elapsed().as_secs_f64());
    assert!(seen < Duration::from_secs(8), "the waiting worker showed {seen:?} after the drain");
    viewer.shows("the waiting state", "table.sets", Duration::from_secs(5), |t| t.contains("waits for 1 worker")).await;
    viewer.screenshot("bed-waiting.png").await;

    // The job ends: the worker is replaced and leaves the page (the recent Events still tell).
    scancel(job);
    viewer.shows("the waiting worker gone", "ul.waits", Duration::from_secs(90), str::is_empty).await;
    viewer.shows("the rollout done", "table.sets", Duration::from_secs(90), |t| t.contains("3 / 3") && t.contains("up to date")).await;

    // A canary whose validation fails.
    t.repo.push(&cluster(&t.env.ns, &set, "img:3", true), "img:3");
    viewer
        .shows("the failed canary", "main", Duration::from_secs(120), |t| t.contains("canary failed") && t.contains("validation job") && t.contains("GPU 0 missing on"))
        .await;
    viewer.screenshot("bed-canary-failed.png").await;
    viewer.page.emulate_media_features(vec![MediaFeature { name: "prefers-color-scheme".into(), value: "dark".into() }]).await.unwrap();
    viewer.page.execute(SetDeviceMetricsOverrideParams::new(390, 844, 2.0, true)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    viewer.screenshot("bed-canary-failed-phone-dark.png").await;

    let said = viewer.said();
    assert!(said.is_empty(), "the console:\n{}", said.join("\n"));
    let Viewer { mut browser, .. } = viewer;
    let _ = browser.close().await;
    drop(daemon);
    t.env.cleanup().await;
}
; slurm_26_05 "26.05");
