//! The daemon under test: a repository the bed's git servers serve, `slurmops run` as a child
//! process (killed when the test ends, whatever happens), and its status.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use slurmops::status::configmap::{self, Status};

use super::{TestEnv, bed, eventually, git, served_repo};

/// A work tree pushing to a bare repository the bed serves.
pub struct Repo {
    pub bare: PathBuf,
    pub src: PathBuf,
    _dir: tempfile::TempDir,
}

impl Repo {
    pub fn new(name: &str) -> Repo {
        let bare = served_repo(name);
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main", "src"]);
        Repo {
            bare,
            src: dir.path().join("src"),
            _dir: dir,
        }
    }

    /// Commits TEXT as cluster.yaml, pushes, returns the commit id.
    pub fn push(&self, text: &str, message: &str) -> String {
        self.push_signed(text, message, None)
    }

    /// As `push`, signed (`commit -S`) with the git settings SIGNING (`key=value`) when given.
    pub fn push_signed(&self, text: &str, message: &str, signing: Option<&[String]>) -> String {
        std::fs::write(self.src.join("cluster.yaml"), text).unwrap();
        git(&self.src, &["add", "."]);
        let mut args: Vec<&str> = Vec::new();
        for kv in signing.unwrap_or_default() {
            args.extend(["-c", kv.as_str()]);
        }
        args.extend(["commit", "-qm", message]);
        if signing.is_some() {
            args.push("-S");
        }
        git(&self.src, &args);
        git(
            &self.src,
            &["push", "-qf", self.bare.to_str().unwrap(), "main"],
        );
        git(&self.src, &["rev-parse", "HEAD"])
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Daemon {
    pub child: Child,
    pub log: PathBuf,
    pub port: u16,
}

impl Daemon {
    pub fn start(
        env: &TestEnv,
        dir: &Path,
        repo_url: &str,
        identity: &str,
        extra: &[&str],
    ) -> Daemon {
        Daemon::start_as(
            env,
            dir,
            repo_url,
            identity,
            extra,
            &bed().kubeconfig_restricted,
        )
    }

    /// As `start`, with the identity of KUBECONFIG.
    pub fn start_as(
        env: &TestEnv,
        dir: &Path,
        repo_url: &str,
        identity: &str,
        extra: &[&str],
        kubeconfig: &Path,
    ) -> Daemon {
        Daemon::start_in(&env.ns, dir, repo_url, identity, extra, kubeconfig)
    }

    /// As `start_as`, for the cluster of namespace NS.
    pub fn start_in(
        ns: &str,
        dir: &Path,
        repo_url: &str,
        identity: &str,
        extra: &[&str],
        kubeconfig: &Path,
    ) -> Daemon {
        let cmd = Command::new(env!("CARGO_BIN_EXE_slurmops"));
        Daemon::spawn(cmd, ns, dir, repo_url, identity, extra, kubeconfig, false)
    }

    /// As `start`, with the install's default trust level, `guarded` (the other daemons of the
    /// tests run `--trust trusted`: the test's own repositories are the node administrator, as
    /// their scripts, images and claims need; the guardrails' tests run as users install).
    pub fn start_guarded(
        env: &TestEnv,
        dir: &Path,
        repo_url: &str,
        identity: &str,
        extra: &[&str],
    ) -> Daemon {
        let cmd = Command::new(env!("CARGO_BIN_EXE_slurmops"));
        let kubeconfig = &bed().kubeconfig_restricted;
        Daemon::spawn(
            cmd, &env.ns, dir, repo_url, identity, extra, kubeconfig, true,
        )
    }

    /// As `start`, with at most NOFILE open descriptors (prlimit; the daemon's PID is the child's).
    pub fn start_limited(
        env: &TestEnv,
        dir: &Path,
        repo_url: &str,
        extra: &[&str],
        nofile: u32,
    ) -> Daemon {
        let mut cmd = Command::new("prlimit");
        cmd.arg(format!("--nofile={nofile}"))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_slurmops"));
        let kubeconfig = &bed().kubeconfig_restricted;
        Daemon::spawn(cmd, &env.ns, dir, repo_url, "a", extra, kubeconfig, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn(
        mut cmd: Command,
        ns: &str,
        dir: &Path,
        repo_url: &str,
        identity: &str,
        extra: &[&str],
        kubeconfig: &Path,
        guarded: bool,
    ) -> Daemon {
        let trust: &[&str] = if guarded {
            &[]
        } else {
            &["--trust", "trusted"]
        };
        let port = free_port();
        let log = dir.join(format!("{identity}.log"));
        let child = cmd
            .args(["run", "--repo", repo_url, "--namespace", ns])
            .args([
                "--identity",
                identity,
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .arg("--mirror")
            .arg(dir.join(format!("mirror-{identity}")))
            .args(extra)
            .args(trust)
            .env("KUBECONFIG", kubeconfig)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Daemon { child, log, port }
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// POST /webhook with BODY and SIGNATURE; the HTTP status code.
    pub fn webhook(&self, body: &str, signature: Option<&str>) -> u16 {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let sig = signature
            .map(|v| format!("X-Hub-Signature-256: {v}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{sig}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    pub fn terminate(mut self) -> Option<i32> {
        unsafe_kill(self.child.id(), "TERM");
        self.child.wait().unwrap().code()
    }

    pub fn kill(self) {}

    /// GET /readyz answers 200: the daemon finished a pass on its first fetch.
    pub fn ready(&self) -> bool {
        self.get("/readyz").0 == 200
    }
}

/// A daemon never outlives its test, even one that fails; a failing test shows the end of its
/// log (the test's temporary directory goes with it).
impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines
                .get(lines.len().saturating_sub(80)..)
                .unwrap_or_default();
            eprintln!(
                "--- the daemon's last log lines ({}):\n{}",
                self.log.display(),
                tail.join("\n")
            );
        }
    }
}

pub fn unsafe_kill(pid: u32, sig: &str) {
    Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap();
}

/// A test namespace with the slurmops Role for the restricted identity, a repository the bed
/// serves over smart HTTP (and its URL), and a scratch directory.
pub async fn gitops(test: &str) -> (TestEnv, Repo, String, tempfile::TempDir) {
    let env = TestEnv::new(test).await;
    env.grant_slurmops_role().await;
    let name = env.name("repo");
    let repo = Repo::new(&name);
    let url = format!("{}/{name}.git", bed().git.http_url);
    (env, repo, url, tempfile::tempdir().unwrap())
}

pub async fn status(env: &TestEnv) -> Option<Status> {
    configmap::read(&env.client, &env.ns, None)
        .await
        .ok()
        .flatten()
}

pub async fn applied(env: &TestEnv, commit: &str, within: Duration) -> Duration {
    let t0 = Instant::now();
    eventually(&format!("commit {commit} applied"), within, async || {
        (status(env).await?.last_applied_commit == commit).then_some(())
    })
    .await;
    t0.elapsed()
}

/// Applies what `slurmops install --print --repo URL --namespace NS` prints in the test namespace
/// — ServiceAccount and RBAC for real, the Deployment and Service through a server-side dry run
/// (the real apiserver validates them; no pod of the daemon image runs here) — and returns the
/// objects and a kubeconfig for the ServiceAccount (its token minted by the controller-manager):
/// the daemon then runs with exactly the rights it is installed with.
pub async fn as_installed(
    env: &TestEnv,
    url: &str,
    dir: &Path,
) -> (Vec<serde_json::Value>, PathBuf) {
    use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
    use kube::discovery::ApiResource;
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(["install", "--print", "--repo", url, "--namespace", &env.ns])
        .output()
        .unwrap();
    assert!(out.status.success());
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    // RBAC and the ServiceAccount for real; the Deployment and Service through a server-side dry
    // run (the real apiserver validates them; no pod of the daemon image runs here).
    for d in &docs {
        let mut d = d.clone();
        if d["kind"] == "PodDisruptionBudget" {
            // policy/v1 is served from Kubernetes 1.21; the bed's apiserver is 1.20 (same shape).
            d["apiVersion"] = "policy/v1beta1".into();
        }
        let d = &d;
        let (group, version) = match d["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), d["apiVersion"].as_str().unwrap().to_string()),
        };
        let kind = d["kind"].as_str().unwrap();
        let plural = match kind {
            k if k.ends_with('y') => format!("{}ies", k[..k.len() - 1].to_lowercase()),
            k => format!("{}s", k.to_lowercase()),
        };
        let ar = ApiResource {
            group: group.clone(),
            version: version.clone(),
            api_version: d["apiVersion"].as_str().unwrap().into(),
            kind: kind.into(),
            plural,
        };
        let api: Api<DynamicObject> = match d["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(env.client.clone(), ns, &ar),
            None => Api::all_with(env.client.clone(), &ar),
        };
        let mut pp = PatchParams::apply("test-install");
        pp.dry_run = matches!(kind, "Deployment" | "Service" | "PodDisruptionBudget");
        api.patch(
            d["metadata"]["name"].as_str().unwrap(),
            &pp,
            &Patch::Apply(d),
        )
        .await
        .unwrap_or_else(|e| panic!("{kind} refused: {e}"));
    }
    // The ServiceAccount's token (minted by the controller-manager) in a kubeconfig.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(env.client.clone(), &env.ns);
    let token = eventually(
        "service account token",
        Duration::from_secs(30),
        async || {
            secrets
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find_map(|s| {
                    let sa = s
                        .metadata
                        .annotations
                        .as_ref()?
                        .get("kubernetes.io/service-account.name")?;
                    if sa != "slurmops" {
                        return None;
                    }
                    String::from_utf8(s.data?.get("token")?.0.clone()).ok()
                })
        },
    )
    .await;
    let restricted = std::fs::read_to_string(&env.kubeconfig_restricted).unwrap();
    let old_token = restricted
        .split("token: \"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap();
    let kubeconfig = dir.join("sa.kubeconfig");
    std::fs::write(&kubeconfig, restricted.replace(old_token, &token)).unwrap();
    (docs, kubeconfig)
}

/// A TCP relay in front of a git server that can turn into a tarpit: it then accepts connections
/// and never answers (nor closes them), as a hung server or a black-holing network would.
pub struct Tarpit {
    pub addr: std::net::SocketAddr,
    on: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Tarpit {
    /// Relays to UPSTREAM (`host:port`) until `set(true)`.
    pub fn start(upstream: &str) -> Tarpit {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let on = std::sync::Arc::new(AtomicBool::new(false));
        let (flag, upstream) = (on.clone(), upstream.to_string());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for client in listener.incoming().flatten() {
                if flag.load(Ordering::SeqCst) {
                    held.push(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        Tarpit { addr, on }
    }

    pub fn set(&self, on: bool) {
        self.on.store(on, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Daemon {
    /// GET PATH on the daemon's HTTP port: (status code, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return (0, String::new());
        };
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        let code = out
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        (code, body.to_string())
    }

    /// The value of the metric NAME (first sample), from /metrics.
    pub fn metric(&self, name: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics");
        body.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }
}
