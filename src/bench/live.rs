//! Figures against a real cluster (the test bed's kube-apiserver): the cost of a no-op reconcile
//! and the daemon's idle memory. Each run works in a namespace of its own and removes it.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};

use super::{Figure, fig, generate, ms, rss_mib};
use crate::apply::{self, NoSlurm, Options};
use crate::k8s::Connection;
use crate::{cluster, render};

const EXAMPLE: &str = include_str!("../../examples/repo/cluster.yaml");

/// The example as a cluster of NAMESPACE, without `imex:` (IMEX needs DRA resource claims, which
/// Kubernetes serves from 1.32; the bed runs 1.20) and without its ServiceMonitor (a cluster
/// without the Prometheus Operator has no such API). Every other object is the example's own.
fn example_in(namespace: &str) -> String {
    EXAMPLE
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !l.starts_with("imex:") && !l.starts_with("serviceMonitor:")
        })
        .map(|l| l.replace("namespace: slurm", &format!("namespace: {namespace}")) + "\n")
        .collect()
}

async fn namespace(cluster: &Connection, name: &str, create: bool) -> Result<(), String> {
    let api: Api<Namespace> = Api::all(cluster.client.clone());
    if create {
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Namespace::default()
        };
        api.create(&PostParams::default(), &ns)
            .await
            .map(|_| ())
            .map_err(|e| format!("create namespace {name}: {e}"))
    } else {
        let _ = api.delete(name, &DeleteParams::default()).await;
        Ok(())
    }
}

/// Applies TEXT twice; the second apply's requests, writes and wall time. NOTE ends the judged
/// text of the requests figure (what the input is).
async fn noop(
    cluster: &Connection,
    label: &str,
    text: &str,
    note: &str,
) -> Result<Vec<Figure>, String> {
    let c = cluster::load(label, text).map_err(|d| format!("{label}: {} errors", d.len()))?;
    let r = render::render(&c);
    let opts = Options::default();
    apply::apply(cluster, &c, text, &r, &opts, &NoSlurm)
        .await
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    let rep = apply::apply(cluster, &c, text, &r, &opts, &NoSlurm)
        .await
        .map_err(|e| e.to_string())?;
    let wall = t.elapsed();
    let kinds: std::collections::BTreeSet<&str> =
        r.objects.iter().map(|o| o.kind.as_str()).collect();
    Ok(vec![
        fig(
            &format!("noop.{label}.requests"),
            rep.requests.total as f64,
            "requests",
            format!(
                "{} objects of {} kinds; limit one list per kind (+ the ApplySet parent); {note}",
                r.objects.len(),
                kinds.len()
            ),
        ),
        fig(
            &format!("noop.{label}.writes"),
            rep.requests.writes as f64,
            "writes",
            "must be 0",
        ),
        fig(&format!("noop.{label}.wall"), ms(wall), "ms", ""),
    ])
}

/// The no-op reconcile of the example and of a 200-NodeSet cluster.
pub async fn noop_reconcile(cluster: &Connection) -> Result<Vec<Figure>, String> {
    let ns = format!("slurmops-bench-{}", std::process::id());
    namespace(cluster, &ns, true).await?;
    let example = example_in(&ns);
    let big = generate(200, 0, 20, 0).replace("namespace: slurm", &format!("namespace: {ns}"));
    let mut out = noop(
        cluster,
        "example",
        &example,
        "examples/repo without imex (Kubernetes 1.20 serves no DRA) and its ServiceMonitor",
    )
    .await;
    if let Ok(f) = out.as_mut() {
        // A second namespace's objects would share names: the big cluster is named apart.
        match noop(
            cluster,
            "200_nodesets",
            &big.replace("name: big", "name: big200"),
            "200 NodeSets of 0 replicas, 20 partitions",
        )
        .await
        {
            Ok(more) => f.extend(more),
            Err(e) => out = Err(e),
        }
    }
    namespace(cluster, &ns, false).await?;
    out
}

/// A daemon run by the bench against a repository of its own (the example in a namespace of its
/// own), with or without Slurm.
struct Bench {
    child: std::process::Child,
    port: u16,
    dir: std::path::PathBuf,
    ns: String,
    cluster: Connection,
}

impl Bench {
    async fn start(
        exe: &std::path::Path,
        kubeconfig: &std::path::Path,
        slurmrestd: Option<&str>,
        args: &[&str],
        tag: &str,
    ) -> Result<Bench, String> {
        let dir = std::env::temp_dir().join(format!("slurmops-bench-{tag}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let repo = git2::Repository::init(dir.join("repo")).map_err(|e| e.to_string())?;
        let ns = format!("slurmops-bench-{tag}{}", std::process::id());
        let cluster = Connection::connect(Some(kubeconfig), None)
            .await
            .map_err(|e| e.to_string())?;
        namespace(&cluster, &ns, true).await?;
        std::fs::write(dir.join("repo/cluster.yaml"), example_in(&ns))
            .map_err(|e| e.to_string())?;
        commit(&repo).map_err(|e| e.to_string())?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let mut cmd = std::process::Command::new(exe);
        // The example's policy is the repo's (examples/policies/repo.yaml, for namespace slurm):
        // here the repository is trusted, so that the daemon reconciles the example it measures
        // in the bench's own namespace.
        cmd.args(["run", "--branch", "main", "--trust", "trusted"])
            .args(args);
        match slurmrestd {
            // With Slurm (the token comes from SLURM_JWT in the environment) and worker watches.
            Some(url) => cmd.args(["--slurmrestd-url", url]),
            None => cmd.arg("--no-slurm").env_remove("SLURM_JWT"),
        };
        let child = cmd
            .arg("--repo")
            .arg(format!("file://{}", dir.join("repo").display()))
            .arg("--mirror")
            .arg(dir.join("mirror"))
            .args(["--namespace", &ns, "--listen", &format!("127.0.0.1:{port}")])
            .env("KUBECONFIG", kubeconfig)
            .stdout(std::process::Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut b = Bench {
            child,
            port,
            dir,
            ns,
            cluster,
        };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if get(port, "/readyz").starts_with("HTTP/1.1 200") {
                return Ok(b);
            }
        }
        b.stop().await;
        Err("the daemon did not become ready within 60 s".into())
    }

    fn rss(&self) -> f64 {
        rss_mib(self.child.id())
    }

    /// Passes the daemon finished (its `slurmops_passes_total`).
    fn passes(&self) -> Option<u64> {
        get(self.port, "/metrics")
            .lines()
            .find(|l| l.starts_with("slurmops_passes_total"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .map(|v| v as u64)
    }

    async fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = namespace(&self.cluster, &self.ns, false).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The daemon's resident memory once idle, after reconciling the example (EXE is the binary
/// measured).
pub async fn daemon_idle_rss(
    exe: &std::path::Path,
    kubeconfig: &std::path::Path,
    slurmrestd: Option<&str>,
) -> Result<Vec<Figure>, String> {
    let mut b = Bench::start(exe, kubeconfig, slurmrestd, &["--interval", "1h"], "d").await?;
    // Idle: let the first pass's buffers settle, then read.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss = b.rss();
    b.stop().await;
    Ok(vec![fig(
        "daemon.idle_rss",
        rss,
        "MiB",
        format!(
            "limit 25 MiB; VmRSS of {} after reconciling the example{}",
            exe.display(),
            if slurmrestd.is_some() {
                ", with Slurm and its worker watches"
            } else {
                " (without Slurm: pass --slurmrestd-url to include the watches)"
            }
        ),
    )])
}

/// Passes of the soak after its warm-up.
pub const SOAK_PASSES: u64 = 5_000;

/// The daemon for SOAK_PASSES passes at a 20 ms interval (a git fetch from the repository and,
/// with Slurm, a reading of Slurm's nodes and jobs in every pass): resident memory after a
/// 200-pass warm-up and at the end.
pub async fn daemon_soak(
    exe: &std::path::Path,
    kubeconfig: &std::path::Path,
    slurmrestd: Option<&str>,
) -> Result<Vec<Figure>, String> {
    let args = ["--interval", "20ms", "--drift-interval", "1h"];
    let mut b = Bench::start(exe, kubeconfig, slurmrestd, &args, "s").await?;
    let result = soak(&b).await;
    b.stop().await;
    let (start, end, passes, took) = result?;
    let growth = end - start;
    let rate = passes as f64 / took.as_secs_f64();
    Ok(vec![
        fig(
            "daemon.soak_rss_start",
            start,
            "MiB",
            "VmRSS after 200 passes",
        ),
        fig(
            "daemon.soak_rss_end",
            end,
            "MiB",
            format!("limit 25 MiB; VmRSS after {passes} more passes ({rate:.0} passes/s)"),
        ),
        fig(
            "daemon.soak_rss_growth",
            growth,
            "MiB",
            format!("limit 1 MiB over {passes} passes"),
        ),
    ])
}

async fn soak(b: &Bench) -> Result<(f64, f64, u64, Duration), String> {
    let reach = |target: u64, within: Duration| async move {
        let t = Instant::now();
        loop {
            let now = b.passes().unwrap_or(0);
            if now >= target {
                return Ok(now);
            }
            if t.elapsed() > within {
                return Err(format!(
                    "the soak reached {now} passes of {target} in {within:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    let warm = reach(200, Duration::from_secs(120)).await?;
    let start = b.rss();
    let t = Instant::now();
    let done = reach(warm + SOAK_PASSES, Duration::from_secs(1800)).await?;
    Ok((start, b.rss(), done - warm, t.elapsed()))
}

/// The raw answer to GET PATH on 127.0.0.1:PORT (empty when nothing answers).
fn get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn commit(repo: &git2::Repository) -> Result<(), git2::Error> {
    let mut index = repo.index()?;
    index.add_path(std::path::Path::new("cluster.yaml"))?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = git2::Signature::now("slurmops bench", "bench@slurmops.dev")?;
    let id = repo.commit(None, &sig, &sig, "bench", &tree, &[])?;
    repo.reference("refs/heads/main", id, true, "bench")?;
    repo.set_head("refs/heads/main")
}
