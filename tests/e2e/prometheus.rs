//! A real Prometheus on the bed (Debian's 2.42, unpacked by tests/bed/packages.sh) scrapes the
//! daemon every two seconds — and slurmctld's own metrics where the release serves them — with
//! the alert rules of `alerts/slurmops.rules.yaml` loaded as they ship, except their `for:`: 3 s
//! for the two rules the test makes fire, 30 s for the others (longer than a pass and a slow
//! scrape), `SlurmopsRolloutStuck`'s as it ships (the rules' real durations are promtool's to
//! prove: alerts/slurmops.rules.test.yaml). Through a failing check, a commit that is refused and a
//! rollout, the test makes the rules' conditions true and false and reads Prometheus's own
//! answers: every target is scraped and parsed; the daemon's Slurm metrics are there on every
//! release; `SlurmopsCheckFailing` fires for the worker whose check failed, with its check, and
//! resolves once the rollout replaced it and its check passed; `SlurmopsCommitRefused` fires for
//! an invalid commit and resolves with the next good one; none of the rules about the daemon's
//! own health fires on a healthy bed; Prometheus kept the rollout's phases. A screenshot of
//! Prometheus's graph of the rollout goes to `artifacts/page/` beside the live view's
//! (tests/e2e/view.rs), and CI keeps it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use slurmops::slurm::SlurmNodes;

use crate::support::bed::{bed, slurm_release};
use crate::support::daemon::applied;
use crate::support::eventually;
use crate::support::gitops::Bed;

/// What the `for:` of the rules this test makes fire becomes here.
const FOR_FIRING: &str = "3s";
/// What every other rule's `for:` becomes: longer than a pass and a retry (a gauge holds until
/// the next pass) and a slow scrape on a loaded machine, shorter than the test.
const FOR_QUIET: &str = "30s";
/// The rules the test makes fire.
const FIRING: &[&str] = &["SlurmopsCheckFailing", "SlurmopsCommitRefused"];
/// `SlurmopsRolloutStuck` keeps its own `for:`: it reads 30 minutes of step counters, which a
/// daemon started for the test has not had (the first sample of a step's series shows no
/// increase), so on a fresh daemon a short `for:` would page for a rollout that moves.
const KEPT: &[&str] = &["SlurmopsRolloutStuck"];

/// Alerts about the daemon's own health: none of them may fire on the healthy bed. (Those
/// about Slurm's nodes read the bed's one slurmctld, which the other tests share.)
const HEALTH: &[&str] = &[
    "SlurmopsAbsent",
    "SlurmopsNoLeader",
    "SlurmopsLoopStuck",
    "SlurmopsApplyFailing",
    "SlurmopsGitUnreachable",
    "SlurmopsSlurmUnreachable",
    "SlurmopsNoSlurmctldInControl",
    "SlurmopsSlurmQueueUnknown",
    "SlurmopsCanaryHalted",
    "SlurmopsRolloutStuck",
];

/// One NodeSet SET of three small workers running IMAGE, rolled one at a time, checked on
/// registration by `probe`: its figure is 50 (10 needed), except on worker 1 the first time,
/// where it is 5. (The check runs as a Slurm job on the worker; the marker lives in the
/// worker's /tmp, named after the test's namespace.)
fn cluster(ns: &str, set: &str, image: &str) -> String {
    crate::support::cluster_head("c", ns)
        + &format!(
            r#"  policy:
    activeChecks:
      - name: probe
        script: |
          case "$SLURMD_NODENAME" in
            *-1) mkdir "/tmp/slurmops-{ns}-$SLURMD_NODENAME" 2>/dev/null && {{ echo "slurmops-value: 5"; exit 0; }} ;;
          esac
          echo "slurmops-value: 50"
        minValue: 10
        unit: GB/s
        maxConcurrent: 3
  nodeSets:
    - name: {set}
      replicas: 3
      cpu: "1"
      memory: 256Mi
      image: {image}
      update: {{maxUnavailable: 1}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
        )
}

/// TEXT with the `for:` of the rules in [`FIRING`] set to [`FOR_FIRING`], and of every other rule
/// but those [`KEPT`] to [`FOR_QUIET`].
fn rules_with_short_for(text: &str) -> String {
    let mut alert = String::new();
    let mut cut = 0;
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            let code = l.trim_start();
            if let Some(name) = code.strip_prefix("- alert: ") {
                alert = name.trim().to_string();
            }
            let indent = &l[..l.len() - code.len()];
            match code.strip_prefix("for: ") {
                Some(_) if KEPT.contains(&alert.as_str()) => l.to_string(),
                Some(_) => {
                    cut += 1;
                    let to = match FIRING.contains(&alert.as_str()) {
                        true => FOR_FIRING,
                        false => FOR_QUIET,
                    };
                    format!("{indent}for: {to}")
                }
                None => l.to_string(),
            }
        })
        .collect();
    assert!(
        cut >= 5,
        "alerts/slurmops.rules.yaml changed shape: {cut} `for:` lines"
    );
    out.join("\n") + "\n"
}

/// Percent-encodes S for a URL's query.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../artifacts/page");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A Prometheus scraping TARGETS every second, with the shipped rules (short `for:`).
struct Prometheus {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    http: reqwest::Client,
}

impl Prometheus {
    /// TARGETS: (job, host:port, metrics path).
    fn start(targets: &[(&str, String, &str)]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let rules = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("alerts/slurmops.rules.yaml"),
        )
        .unwrap();
        std::fs::write(dir.path().join("rules.yaml"), rules_with_short_for(&rules)).unwrap();
        let mut config = String::from(
            "global: {scrape_interval: 2s, scrape_timeout: 2s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\nscrape_configs:\n",
        );
        for (job, target, path) in targets {
            config.push_str(&format!(
                "  - job_name: {job}\n    metrics_path: {path}\n    static_configs: [{{targets: ['{target}']}}]\n"
            ));
        }
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let port = crate::support::daemon::free_port();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = Command::new("prometheus")
            .current_dir(dir.path())
            .args([
                "--config.file=prometheus.yml",
                "--storage.tsdb.path=data",
                &format!("--web.listen-address=127.0.0.1:{port}"),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start prometheus ({e}): tests/bed/packages.sh unpacks it from Debian's prometheus package")
            });
        Prometheus {
            child,
            port,
            dir,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The `data` of Prometheus's API answer at PATH (None while it does not answer).
    async fn api(&self, path: &str) -> Option<Value> {
        let v: Value = self
            .http
            .get(self.url(path))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        assert_eq!(v["status"], "success", "{path}: {v}");
        Some(v["data"].clone())
    }

    /// The samples of the instant query EXPR: (labels, value).
    async fn query(&self, expr: &str) -> Vec<(Value, f64)> {
        let Some(data) = self
            .api(&format!("/api/v1/query?query={}", encode(expr)))
            .await
        else {
            return Vec::new();
        };
        data["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|s| {
                let v = s["value"][1].as_str().and_then(|v| v.parse().ok());
                (s["metric"].clone(), v.unwrap_or(f64::NAN))
            })
            .collect()
    }

    /// The value of EXPR's single sample.
    async fn value(&self, expr: &str) -> Option<f64> {
        match self.query(expr).await.as_slice() {
            [(_, v)] => Some(*v),
            _ => None,
        }
    }

    /// The labels of the alerts firing now.
    async fn firing(&self) -> Vec<Value> {
        let Some(data) = self.api("/api/v1/alerts").await else {
            return Vec::new();
        };
        data["alerts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a["state"] == "firing")
            .map(|a| a["labels"].clone())
            .collect()
    }

    /// The firing alerts NAME whose labels hold every (key, value) of WITH.
    async fn firing_as(&self, name: &str, with: &[(&str, &str)]) -> Vec<Value> {
        self.firing()
            .await
            .into_iter()
            .filter(|l| l["alertname"] == name && with.iter().all(|(k, v)| l[*k] == *v))
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "prometheus's log (last lines):\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}

on_slurm_releases!(
async fn a_real_prometheus_sees_a_failing_check_a_refused_commit_and_a_rollout_and_the_rules_fire_and_resolve() {
    let t = Bed::new("prom").await;
    let set = t.env.name("pm");
    let c1 = t.repo.push(&cluster(&t.env.ns, &set, "img:1"), "first");
    let daemon = t.daemon("d");
    let mut targets = vec![("slurmops", format!("127.0.0.1:{}", daemon.port), "/metrics")];
    let ctld_metrics = slurmops::cluster::release::find(slurm_release()).is_some_and(|r| r.openmetrics);
    if ctld_metrics {
        targets.push(("slurmctld", format!("127.0.0.1:{}", bed().slurmctld_port), "/metrics/nodes"));
    }
    let prom = Prometheus::start(&targets);
    applied(&t.env, &c1, Duration::from_secs(60)).await;

    // Every target is scraped, and what it serves parses (`up` is 1 only then).
    let within = Duration::from_secs(60);
    eventually("Prometheus scrapes every target", within, async || {
        let up = prom.query("up == 1").await;
        (up.len() == targets.len()).then_some(())
    })
    .await;
    // From here on no rule about the daemon's health may fire. (Before its first scrape
    // Prometheus has no `slurmops_leader`: `SlurmopsAbsent`'s few seconds here.)
    let scraped = std::time::Instant::now();
    // Slurm's nodes, as the daemon observes them, on every release: this test's three
    // workers at least, and a slurmctld in control.
    eventually("the daemon's Slurm metrics in Prometheus", within, async || {
        (prom.value("slurm_nodes_total").await? >= 3.0
            && prom.value("slurmops_slurmctld_in_control").await? == 1.0)
            .then_some(())
    })
    .await;
    if ctld_metrics {
        let n = prom.value(r#"slurm_nodes{job="slurmctld"}"#).await;
        assert!(n.is_some_and(|n| n >= 3.0), "slurmctld's own slurm_nodes: {n:?}");
    }

    // Worker 1's check fails: the worker is drained, and the alert names it and the check.
    let bad = format!("{set}-1");
    eventually(&format!("SlurmopsCheckFailing for {bad}"), Duration::from_secs(180), async || {
        let f = prom.firing_as("SlurmopsCheckFailing", &[("node", &bad), ("check", "probe")]).await;
        (!f.is_empty()).then_some(())
    })
    .await;
    // Slurm drained it for the check, and the daemon's next pass counts it so.
    let reason = crate::support::slurm::client().get(&bad).await.map(|n| n.reason).unwrap_or_default();
    assert!(reason.starts_with("slurmops: check probe failed"), "{bad}'s reason: {reason}");
    eventually("a node drained by a check in Prometheus", within, async || {
        (prom.value(r#"slurmops_slurm_drained_nodes{by="check_failed"}"#).await? >= 1.0).then_some(())
    })
    .await;
    let others: Vec<Value> = prom
        .firing_as("SlurmopsCheckFailing", &[])
        .await
        .into_iter()
        .filter(|l| l["node"] != bad.as_str())
        .collect();
    assert!(others.is_empty(), "only {bad} failed its check: {others:?}");

    // A commit that is not valid: refused, the cluster stays, the alert fires.
    t.repo.push("spec: [this is not a cluster\n", "broken");
    eventually("SlurmopsCommitRefused", Duration::from_secs(60), async || {
        let f = prom.firing_as("SlurmopsCommitRefused", &[("result", "invalid")]).await;
        (!f.is_empty()).then_some(())
    })
    .await;

    // The next commit rolls the workers: the refusal resolves at once, and the failed worker
    // is replaced by one whose check passes, so its alert resolves too.
    let c2 = t.repo.push(&cluster(&t.env.ns, &set, "img:2"), "img:2");
    applied(&t.env, &c2, Duration::from_secs(60)).await;
    eventually("SlurmopsCommitRefused resolved", Duration::from_secs(30), async || {
        prom.firing_as("SlurmopsCommitRefused", &[]).await.is_empty().then_some(())
    })
    .await;
    let all = format!(r#"slurmops_rollout_workers{{node_set="{set}",state="updated"}}"#);
    eventually("the rollout done, every worker's check passed", Duration::from_secs(300), async || {
        let updated = prom.value(&all).await?;
        let passed = prom.query(&format!(r#"slurmops_check_result{{check="probe",node=~"{set}-.*"}} == 1"#)).await;
        (updated == 3.0 && passed.len() == 3).then_some(())
    })
    .await;
    eventually(&format!("SlurmopsCheckFailing for {bad} resolved"), Duration::from_secs(30), async || {
        prom.firing_as("SlurmopsCheckFailing", &[("node", &bad)]).await.is_empty().then_some(())
    })
    .await;

    // Prometheus kept what happened: the rollout's phases, and each alert firing.
    for (what, expr) in [
        ("workers in flight", format!(r#"max_over_time(slurmops_rollout_workers{{node_set="{set}",state="in_flight"}}[15m])"#)),
        ("the check alert", format!(r#"max_over_time(ALERTS{{alertname="SlurmopsCheckFailing",alertstate="firing",node="{bad}"}}[15m])"#)),
        ("the refusal alert", r#"max_over_time(ALERTS{alertname="SlurmopsCommitRefused",alertstate="firing"}[15m])"#.to_string()),
    ] {
        let v = prom.value(&expr).await;
        assert!(v.is_some_and(|v| v >= 1.0), "{what}: {expr} = {v:?}");
    }
    let health: Vec<Value> = prom
        .firing()
        .await
        .into_iter()
        .filter(|l| HEALTH.iter().any(|h| l["alertname"] == *h))
        .collect();
    assert!(health.is_empty(), "a health alert fired on the healthy bed: {health:?}");
    let fired = prom
        .query(&format!(
            r#"max_over_time(ALERTS{{alertstate="firing",alertname=~"{}"}}[{}s])"#,
            HEALTH.join("|"),
            scraped.elapsed().as_secs().max(1)
        ))
        .await;
    assert!(fired.is_empty(), "a health alert fired during the test: {fired:?}");

    // The graph of the rollout, as a person opens it: drawn (its legend names the series), and
    // kept as a screenshot.
    // Over the test's time since the first scrape, so that the rollout fills the graph.
    let range = format!("{}s", scraped.elapsed().as_secs() + 10);
    let graph = prom.url(&format!(
        "/classic/graph?g0.expr={}&g0.tab=0&g0.range_input={range}&g1.expr={}&g1.tab=0&g1.range_input={range}",
        encode(&format!(r#"slurmops_rollout_workers{{node_set="{set}"}}"#)),
        encode(r#"ALERTS{alertstate="firing"}"#),
    ));
    let chromium = |extra: &[&str]| {
        Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1700", "--virtual-time-budget=10000"])
            .args(extra)
            .arg(&graph)
            .stderr(Stdio::null())
            .output()
            .expect("chromium (tests/bed/packages.sh installs it)")
    };
    let dom = String::from_utf8_lossy(&chromium(&["--dump-dom"]).stdout).to_string();
    assert!(
        dom.contains("state=\"in_flight\"") && dom.contains("SlurmopsCheckFailing"),
        "the graph page drew no series of the rollout or the alerts:\n{}",
        &dom[..dom.len().min(4000)]
    );
    let shot = artifacts().join(format!("prometheus-rollout-{}.png", slurm_release().replace('.', "_")));
    let _ = std::fs::remove_file(&shot);
    chromium(&[&format!("--screenshot={}", shot.display())]);
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 20_000, "{}: {size} bytes", shot.display());
    eprintln!("screenshot: {}", shot.display());
    drop(prom);
    drop(daemon);
    t.env.cleanup().await;
}
; slurm_24_11 "24.11", slurm_26_05 "26.05");
