//! A test kubelet: what a real kubelet would do for the pods of one test namespace, against the real
//! kube-apiserver, with a real slurmd for each worker pod.
//!
//! - binds every new pod to the test's fake Node;
//! - for a pod with a `slurmd` container, starts that container's own command line as a real
//!   `slurmd` in the Slurm chroot, in a UTS namespace whose hostname is the pod's hostname (so the
//!   Slurm node name is the pod's, as in a real pod). Only test-host differences are rewritten: the
//!   `--conf-server` points at the bed's slurmctld, and the slurmd gets its own port on 127.0.0.1;
//! - marks the pod Running and, once its readiness holds (slurmd: its port accepts TCP, the rendered
//!   tcpSocket probe), Ready;
//! - on deletion runs the container's preStop hook in the chroot under the pod's hostname, stops the
//!   slurmd, and completes the deletion (grace period 0), as a kubelet confirms termination.
//!
//! A login pod's container (`login`) runs as a login image runs it (`support::login_pod`): sssd,
//! sackd and sshd, Ready once sshd accepts TCP. Pods without a slurmd or login container are made
//! Running/Ready without running anything. A pod with
//! an image from a registry under `.invalid` stays Pending with ErrImagePull, as a real kubelet
//! leaves a pod whose image it cannot pull. Each pod is handled by a task of its own (the slow parts — slurmd start, preStop, stop — on blocking
//! threads), as the kubelets of a real cluster's nodes handle their one worker each: one pod's
//! slow termination delays no other pod.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use super::bed::{bed, slurm_instance};
use super::{ctld_files, login_pod, slurm};

mod containers;
mod pod_status;
use containers::{Target, pre_stop, start_slurmd, unpullable};
use pod_status::now;

/// A controller pod's slurmctld, of several, stopped: from its SIGTERM until it had exited.
#[derive(Debug, Clone)]
pub struct ControllerStop {
    pub pod: String,
    pub began: Instant,
    pub ended: Instant,
}

/// What the kubelet did, in order, for assertions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    SlurmdStarted {
        pod: String,
        uid: String,
        /// The Slurm release it runs.
        release: String,
    },
    /// The controller pod's slurmctld (an `OwnSlurm`) started on RELEASE and answers.
    SlurmctldStarted {
        release: String,
    },
    SlurmctldStopped,
    /// A controller pod's slurmctld, of several (`OwnSlurm::controllers`), started and answers.
    ControllerStarted {
        pod: String,
    },
    /// A controller pod's slurmctld, of several, stopped (SIGTERM: it saved its state).
    ControllerStopped {
        pod: String,
    },
    /// The controller pod's `reconfigure` sidecar started.
    SidecarStarted,
    /// A new version of the controller's ConfigMap was written into its config directory.
    ConfigRefreshed,
    SlurmdStopped {
        pod: String,
        uid: String,
    },
    PreStop {
        pod: String,
        ok: bool,
    },
    /// slurmd died before the pod became Ready and was started again (restartPolicy Always).
    SlurmdRestarted {
        pod: String,
        uid: String,
    },
    /// A login pod's sssd, sackd and sshd started; sshd listens on 127.0.0.1:PORT.
    LoginStarted {
        pod: String,
        port: u16,
    },
}

/// When this kubelet marked a pod Ready (for the bench's rollout overhead).
#[derive(Debug, Clone)]
pub struct Readied {
    pub pod: String,
    pub uid: String,
    pub at: std::time::Instant,
}

struct Running {
    pod: String,
    hostname: String,
    /// The slurmd's port (a worker pod), or sshd's (a login pod).
    port: Option<u16>,
    /// A login pod (`support::login_pod`).
    login: bool,
    /// The slurmctld or slurmrestd it runs (a controller or restapi pod of an `OwnSlurm`).
    daemon: Option<Daemon>,
    /// When its slurmd was last seen alive (checked every 2 s until the pod is Ready).
    checked: std::time::Instant,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Daemon {
    Slurmctld,
    Slurmrestd,
}

/// A test's own Slurm instance, run from its pods as a kubelet runs their containers: the
/// controller pod's slurmctld (state kept across pods), the restapi pod's slurmrestd and the
/// workers' slurmd, each from the chroot of the release its pod is labelled with
/// (`slurmops.dev/slurm-version`), as the image of that release would.
pub struct OwnSlurm {
    pub instance: String,
    pub ctld_port: u16,
    pub restd_port: u16,
    /// The test-host Slurm config directory, by release.
    pub confs: BTreeMap<String, std::path::PathBuf>,
    /// High availability: every controller's pod name and address, primary first (the test
    /// starts them; each controller pod then stops and starts its own). Empty: one slurmctld.
    pub controllers: Vec<(String, String)>,
    /// How long a replaced controller pod (of several) takes to start: its new image's pull.
    pub pull: Duration,
}

pub struct Kubelet {
    /// The first node (the only one of `start`).
    pub node: String,
    /// The Slurm instance its pods' daemons run in.
    instance: String,
    nodes: Vec<String>,
    events: Arc<Mutex<Vec<Event>>>,
    stops: Arc<Mutex<Vec<ControllerStop>>>,
    readied: Arc<Mutex<Vec<Readied>>>,
    running: Arc<Mutex<BTreeMap<String, Running>>>,
    closed: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Kubelet {
    /// Registers the fake Node and starts serving the pods of `ns`.
    pub async fn start(client: Client, ns: &str, node: &str) -> Kubelet {
        Kubelet::start_on(client, ns, &[(node, &[])]).await
    }

    /// Registers fake Nodes with their labels, and starts serving the pods of `ns`: a pod of
    /// ordinal I is bound to node I modulo their number (the first node otherwise).
    pub async fn start_on(client: Client, ns: &str, nodes: &[(&str, &[(&str, &str)])]) -> Kubelet {
        Kubelet::start_with(client, ns, nodes, None).await
    }

    /// As `start_on`, running the pods' Slurm daemons in OWN's instance when given.
    pub async fn start_with(
        client: Client,
        ns: &str,
        nodes: &[(&str, &[(&str, &str)])],
        own: Option<OwnSlurm>,
    ) -> Kubelet {
        let own = own.map(Arc::new);
        let instance = own
            .as_ref()
            .map_or_else(|| slurm_instance().to_string(), |o| o.instance.clone());
        for (node, labels) in nodes {
            create_node(&client, node, labels).await;
        }
        let node = nodes
            .first()
            .map(|(n, _)| n.to_string())
            .unwrap_or_default();
        let events = Arc::new(Mutex::new(Vec::new()));
        let stops = Arc::new(Mutex::new(Vec::new()));
        let readied = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(Mutex::new(BTreeMap::new()));
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let state = State {
            config_maps: Api::namespaced(client.clone(), ns),
            secrets: Api::namespaced(client.clone(), ns),
            ctld_files: Arc::default(),
            pods: Api::namespaced(client, ns),
            nodes: nodes.iter().map(|(n, _)| n.to_string()).collect(),
            events: events.clone(),
            stops: stops.clone(),
            readied: readied.clone(),
            running: running.clone(),
            ready: Arc::default(),
            busy: Arc::default(),
            closed: closed.clone(),
            own: own.clone(),
            restd_owner: Arc::default(),
            ports: Arc::default(),
        };
        let task = tokio::spawn(state.serve());
        Kubelet {
            node,
            instance,
            nodes: nodes.iter().map(|(n, _)| n.to_string()).collect(),
            events,
            stops,
            readied,
            running,
            closed,
            task,
        }
    }

    /// Every node this kubelet runs.
    pub fn nodes(&self) -> Vec<String> {
        self.nodes.clone()
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    /// When each controller pod's slurmctld (of several) was stopped, in order.
    pub fn controller_stops(&self) -> Vec<ControllerStop> {
        self.stops.lock().unwrap().clone()
    }

    /// Every time a pod was marked Ready, in order.
    pub fn readied(&self) -> Vec<Readied> {
        self.readied.lock().unwrap().clone()
    }
}

/// A fake Node NAME with LABELS, Ready.
async fn create_node(client: &Client, node: &str, labels: &[(&str, &str)]) {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut all: BTreeMap<&str, &str> = labels.iter().copied().collect();
    all.insert("slurmops.dev/test-kubelet", "true");
    let body: Node = serde_json::from_value(json!({
        "metadata": {"name": node, "labels": all},
    }))
    .unwrap();
    nodes
        .create(&PostParams::default(), &body)
        .await
        .expect("create the fake Node");
    {
        let status = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "TestKubelet",
                            "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}});
        nodes
            .patch_status(node, &PatchParams::default(), &Patch::Merge(status))
            .await
            .expect("mark the fake Node Ready");
    }
}

impl Drop for Kubelet {
    /// Stops every slurmd this kubelet started and removes their Slurm nodes, so a failed test
    /// leaves nothing running in the shared Slurm instance.
    fn drop(&mut self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.task.abort();
        let instance = self.instance.clone();
        for r in self.running.lock().unwrap().values() {
            match r.daemon {
                Some(Daemon::Slurmctld) => {
                    slurm::sh(&["stop-sidecar", &instance, "reconfigure"]);
                    slurm::sh(&["stop-ctld", &instance]);
                    // One controller of several: its own (nothing when there is none).
                    slurm::sh(&["stop-ctld", &instance, &r.hostname]);
                    continue;
                }
                Some(Daemon::Slurmrestd) => {
                    slurm::sh(&["stop-restd", &instance, "slurmrestd"]);
                    continue;
                }
                None if r.login => {
                    login_pod::stop(&instance, &r.hostname);
                    continue;
                }
                None => {}
            }
            slurm::sh(&["stop-slurmd", &instance, &r.hostname]);
            let _ = std::process::Command::new("bash")
                .args(["tests/bed/slurm.sh", "exec", &instance, "scontrol"])
                .arg("delete")
                .arg(format!("nodename={}", r.hostname))
                .output();
        }
    }
}

#[derive(Clone)]
struct State {
    pods: Api<Pod>,
    /// The nodes this kubelet runs; pods are bound by ordinal.
    nodes: Vec<String>,
    events: Arc<Mutex<Vec<Event>>>,
    stops: Arc<Mutex<Vec<ControllerStop>>>,
    readied: Arc<Mutex<Vec<Readied>>>,
    running: Arc<Mutex<BTreeMap<String, Running>>>,
    ready: Arc<Mutex<BTreeSet<String>>>,
    /// Pods (uids) a task is handling now: each pod is handled on its own, as each node's kubelet
    /// handles its pods, so one slow termination delays no other pod.
    busy: Arc<Mutex<BTreeSet<String>>>,
    /// The Kubelet was dropped: a slurmd that finishes starting now is stopped at once.
    closed: Arc<std::sync::atomic::AtomicBool>,
    own: Option<Arc<OwnSlurm>>,
    /// The pod (uid) whose slurmrestd holds the OwnSlurm port: a new restapi pod takes it over
    /// (a Deployment starts the new pod before the old one goes), and stopping the old pod then
    /// leaves the new one's slurmrestd alone.
    restd_owner: Arc<Mutex<Option<String>>>,
    /// The port each node's slurmd last served (by hostname): its next pod's slurmd serves it
    /// again, as every pod of a real cluster serves 6818 (`slurm::slurmd_port_again`).
    ports: Arc<Mutex<BTreeMap<String, u16>>>,
    config_maps: Api<ConfigMap>,
    /// The Secrets a login pod mounts.
    secrets: Api<Secret>,
    /// The ConfigMap version the running slurmctld's config directory holds (an `OwnSlurm`).
    ctld_files: Arc<Mutex<Option<ctld_files::Materialized>>>,
}

impl State {
    async fn serve(self) {
        // Dropped with this task (when the Kubelet is dropped): the pod tasks end with it.
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            if let Ok(list) = self.pods.list(&Default::default()).await {
                self.sync(list.items, &mut tasks);
            }
            while tasks.try_join_next().is_some() {}
            self.refresh_ctld_files().await;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    fn sync(&self, pods: Vec<Pod>, tasks: &mut tokio::task::JoinSet<()>) {
        let seen: BTreeSet<String> = pods
            .iter()
            .map(|p| p.metadata.uid.clone().unwrap_or_default())
            .collect();
        for pod in pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if !self.busy.lock().unwrap().insert(uid.clone()) {
                continue;
            }
            let state = self.clone();
            tasks.spawn(async move {
                if pod.metadata.deletion_timestamp.is_some() {
                    state.terminate(&pod, &uid).await;
                } else {
                    state.run(&pod, &uid).await;
                }
                state.busy.lock().unwrap().remove(&uid);
            });
        }
        // Pods removed behind our back (force delete): their containers stop too.
        let gone: Vec<String> = {
            let running = self.running.lock().unwrap();
            let busy = self.busy.lock().unwrap();
            running
                .keys()
                .filter(|u| !seen.contains(*u) && !busy.contains(*u))
                .cloned()
                .collect()
        };
        for uid in gone {
            self.busy.lock().unwrap().insert(uid.clone());
            let state = self.clone();
            tasks.spawn(async move {
                state.stop(&uid).await;
                state.busy.lock().unwrap().remove(&uid);
            });
        }
    }

    /// The Slurm instance the pods' daemons run in.
    fn instance(&self) -> String {
        self.own
            .as_ref()
            .map_or_else(|| slurm_instance().to_string(), |o| o.instance.clone())
    }

    /// Where POD's Slurm daemons run: the bed's instance of this process's release, or the
    /// test's own instance on the release the pod is labelled with.
    fn target(&self, pod: &Pod) -> Target {
        match &self.own {
            None => Target {
                instance: slurm_instance().to_string(),
                ctld_port: bed().slurmctld_port,
                conf_server: format!("localhost:{}", bed().slurmctld_port),
                release: super::slurm_release().to_string(),
            },
            Some(o) => Target {
                instance: o.instance.clone(),
                ctld_port: o.ctld_port,
                conf_server: if o.controllers.is_empty() {
                    format!("localhost:{}", o.ctld_port)
                } else {
                    let servers: Vec<String> = o
                        .controllers
                        .iter()
                        .map(|(_, addr)| format!("{addr}:{}", o.ctld_port))
                        .collect();
                    servers.join(",")
                },
                release: pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("slurmops.dev/slurm-version"))
                    .cloned()
                    .unwrap_or_else(|| super::slurm_release().to_string()),
            },
        }
    }

    /// Starts the controller pod's slurmctld (state kept) or the restapi pod's slurmrestd of an
    /// `OwnSlurm`, once it answers; Err when it did not come up (started again next time, as a
    /// kubelet restarts a failed container).
    async fn start_daemon(
        &self,
        pod: &str,
        spec: &k8s_openapi::api::core::v1::PodSpec,
        t: &Target,
    ) -> Result<Option<Daemon>, ()> {
        let Some(own) = self.own.clone() else {
            return Ok(None);
        };
        let has = |n: &str| spec.containers.iter().any(|c| c.name == n);
        let daemon = if has("slurmctld") {
            Daemon::Slurmctld
        } else if has("slurmrestd") {
            Daemon::Slurmrestd
        } else {
            return Ok(None);
        };
        let release = t.release.clone();
        if daemon == Daemon::Slurmctld && !own.controllers.is_empty() {
            // One controller of several: this pod's own (no reconfigure sidecar run here); a
            // replaced pod's new image is pulled first.
            let stopped = Event::ControllerStopped {
                pod: pod.to_string(),
            };
            if self.events.lock().unwrap().contains(&stopped) {
                tokio::time::sleep(own.pull).await;
            }
            let (i, r, p) = (own.instance.clone(), release.clone(), pod.to_string());
            let up = tokio::task::spawn_blocking(move || slurm::start_ctld_pod(&i, &r, &p))
                .await
                .unwrap_or(false);
            if !up {
                tokio::time::sleep(Duration::from_secs(1)).await;
                return Err(());
            }
            self.event(Event::ControllerStarted {
                pod: pod.to_string(),
            });
            return Ok(Some(daemon));
        }
        let r = release.clone();
        let up = tokio::task::spawn_blocking(move || match daemon {
            Daemon::Slurmctld => {
                let conf = own
                    .confs
                    .get(&r)
                    .unwrap_or_else(|| panic!("no Slurm {r} config"));
                slurm::start_ctld_keeping_state(&own.instance, &r, conf)
            }
            Daemon::Slurmrestd => slurm::start_restd(&own.instance, &r, own.restd_port),
        })
        .await
        .unwrap_or(false);
        if !up {
            tokio::time::sleep(Duration::from_secs(1)).await;
            return Err(());
        }
        if daemon == Daemon::Slurmctld {
            self.event(Event::SlurmctldStarted {
                release: release.clone(),
            });
            let m = ctld_files::started(&self.config_maps, spec).await;
            *self.ctld_files.lock().unwrap() = m;
            let (s, o) = (spec.clone(), self.own.clone());
            let sidecar = tokio::task::spawn_blocking(move || {
                o.is_some_and(|o| ctld_files::start_sidecar(&s, &o, &release))
            })
            .await
            .unwrap_or(false);
            if sidecar {
                self.event(Event::SidecarStarted);
            }
        }
        Ok(Some(daemon))
    }

    /// As a kubelet refreshes a projected volume: a new version of the running slurmctld's
    /// ConfigMap is written into its config directory.
    async fn refresh_ctld_files(&self) {
        let (Some(own), Some(mut m)) = (self.own.clone(), self.ctld_files.lock().unwrap().take())
        else {
            return;
        };
        if ctld_files::refresh(&self.config_maps, &own, &mut m).await {
            self.event(Event::ConfigRefreshed);
        }
        // Unless a new slurmctld started meanwhile, with its own version.
        self.ctld_files.lock().unwrap().get_or_insert(m);
    }

    /// The node a pod is bound to: by its ordinal (`NAME-I`), over this kubelet's nodes.
    fn node_for(&self, pod: &str) -> &str {
        let i: usize = pod
            .rsplit_once('-')
            .and_then(|(_, i)| i.parse().ok())
            .unwrap_or(0);
        self.nodes
            .get(i % self.nodes.len().max(1))
            .map_or("", String::as_str)
    }

    async fn run(&self, pod: &Pod, uid: &str) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        if spec.node_name.is_none() {
            let binding = json!({"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name}, "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_for(&name)}});
            let _ = self
                .pods
                .create_subresource::<_, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &binding,
                )
                .await;
            return;
        }
        let hostname = spec.hostname.clone().unwrap_or_else(|| name.clone());
        let started = self.running.lock().unwrap().contains_key(uid);
        if !started && spec.containers.iter().any(unpullable) {
            self.image_pull_failed(pod, &name).await;
            return;
        }
        if !started {
            let target = self.target(pod);
            let Ok(daemon) = self.start_daemon(&hostname, &spec, &target).await else {
                return;
            };
            if daemon == Some(Daemon::Slurmrestd) {
                *self.restd_owner.lock().unwrap() = Some(uid.to_string());
            }
            let login = login_pod::container(pod);
            if let Some(c) = &login {
                let t = &target;
                match login_pod::start(
                    &self.secrets,
                    pod,
                    c,
                    &hostname,
                    &t.instance,
                    &t.release,
                    t.ctld_port,
                )
                .await
                {
                    Ok(_) if self.closed.load(std::sync::atomic::Ordering::SeqCst) => {
                        let (i, h) = (t.instance.clone(), hostname.clone());
                        let _ = tokio::task::spawn_blocking(move || login_pod::stop(&i, &h)).await;
                    }
                    Ok(port) => {
                        self.event(Event::LoginStarted {
                            pod: name.clone(),
                            port,
                        });
                        self.running.lock().unwrap().insert(
                            uid.to_string(),
                            Running {
                                pod: name.clone(),
                                hostname,
                                port: Some(port),
                                login: true,
                                daemon,
                                checked: std::time::Instant::now(),
                            },
                        );
                        self.set_status(pod, &name, false).await;
                    }
                    Err(e) => eprintln!("kubelet: login pod {name} not started: {e}"),
                }
                return;
            }
            let slurmd = spec.containers.iter().find(|c| c.name == "slurmd").cloned();
            let port = match slurmd {
                Some(c) => {
                    let (h, t) = (hostname.clone(), target.clone());
                    let previous = self.ports.lock().unwrap().get(&hostname).copied();
                    let port =
                        tokio::task::spawn_blocking(move || start_slurmd(&c, &h, &t, previous))
                            .await
                            .expect("start slurmd");
                    self.ports.lock().unwrap().insert(hostname.clone(), port);
                    Some(port)
                }
                None => None,
            };
            if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
                if port.is_some() {
                    let (h, i) = (hostname.clone(), target.instance.clone());
                    let _ =
                        tokio::task::spawn_blocking(move || slurm::sh(&["stop-slurmd", &i, &h]))
                            .await;
                }
                return;
            }
            if port.is_some() {
                self.event(Event::SlurmdStarted {
                    pod: name.clone(),
                    uid: uid.to_string(),
                    release: target.release.clone(),
                });
            }
            self.running.lock().unwrap().insert(
                uid.to_string(),
                Running {
                    pod: name.clone(),
                    hostname,
                    port,
                    login: false,
                    daemon,
                    checked: std::time::Instant::now(),
                },
            );
            self.set_status(pod, &name, false).await;
            return;
        }
        if !self.ready.lock().unwrap().contains(uid) {
            let port = self.running.lock().unwrap().get(uid).and_then(|r| r.port);
            let ready = port.is_none_or(|p| TcpStream::connect(("127.0.0.1", p)).is_ok());
            if ready && self.set_status(pod, &name, true).await {
                self.ready.lock().unwrap().insert(uid.to_string());
                self.readied.lock().unwrap().push(Readied {
                    pod: name,
                    uid: uid.to_string(),
                    at: std::time::Instant::now(),
                });
            } else if !ready && self.slurmd_died(uid).await {
                // As a real kubelet restarts a crashed container: the next pass starts it again
                // (on a new port, in case the old one was taken).
                if let Some(r) = self.running.lock().unwrap().remove(uid) {
                    // Why it died, in the output of the test that sees the restart.
                    let log = std::fs::read_to_string(format!(
                        "{}/{}/slurmd-{}.out",
                        slurm::run_dir(),
                        self.instance(),
                        r.hostname
                    ))
                    .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(15).collect();
                    eprintln!("kubelet: slurmd of {name} died; its last lines:");
                    tail.iter().rev().for_each(|l| eprintln!("  {l}"));
                    if let Some(p) = r.port.filter(|_| log.contains("Address already in use")) {
                        eprintln!("kubelet: sockets on port {p}: {}", slurm::sockets_on(p));
                    }
                }
                self.event(Event::SlurmdRestarted {
                    pod: name,
                    uid: uid.to_string(),
                });
            }
        }
    }

    /// slurmd of this pod exited (checked every 2 s, from 2 s after its start, however long
    /// a pass of this kubelet takes).
    async fn slurmd_died(&self, uid: &str) -> bool {
        let (hostname, due) = {
            let mut running = self.running.lock().unwrap();
            let Some(r) = running
                .get_mut(uid)
                .filter(|r| r.port.is_some() && !r.login)
            else {
                return false;
            };
            let due = r.checked.elapsed() >= Duration::from_secs(2);
            if due {
                r.checked = std::time::Instant::now();
            }
            (r.hostname.clone(), due)
        };
        let instance = self.instance();
        due && !tokio::task::spawn_blocking(move || {
            std::process::Command::new("bash")
                .args(["tests/bed/slurm.sh", "slurmd-alive", &instance, &hostname])
                .status()
                .is_ok_and(|s| s.success())
        })
        .await
        .unwrap_or(false)
    }

    async fn terminate(&self, pod: &Pod, uid: &str) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if self.running.lock().unwrap().contains_key(uid) {
            let spec = pod.spec.clone().unwrap_or_default();
            let hostname = spec.hostname.clone().unwrap_or_else(|| name.clone());
            for c in &spec.containers {
                if let Some(cmd) = pre_stop(c, &name) {
                    let mut args =
                        vec!["run-as-node".to_string(), self.instance(), hostname.clone()];
                    args.extend(cmd);
                    let ok = tokio::task::spawn_blocking(move || {
                        std::process::Command::new("bash")
                            .arg("tests/bed/slurm.sh")
                            .args(&args)
                            .output()
                            .is_ok_and(|o| o.status.success())
                    })
                    .await
                    .unwrap_or(false);
                    self.event(Event::PreStop {
                        pod: name.clone(),
                        ok,
                    });
                }
            }
            self.stop(uid).await;
        }
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let _ = self.pods.delete(&name, &dp).await;
    }

    async fn stop(&self, uid: &str) {
        let Some(r) = self.running.lock().unwrap().remove(uid) else {
            return;
        };
        self.ready.lock().unwrap().remove(uid);
        let instance = self.instance();
        let owner = self.restd_owner.lock().unwrap().clone();
        if let Some(d) = r
            .daemon
            .filter(|d| *d == Daemon::Slurmctld || owner.as_deref() == Some(uid))
        {
            let i = instance.clone();
            if d == Daemon::Slurmctld
                && self.own.as_ref().is_some_and(|o| !o.controllers.is_empty())
            {
                let h = r.hostname.clone();
                let began = Instant::now();
                let _ =
                    tokio::task::spawn_blocking(move || slurm::sh(&["stop-ctld", &i, &h])).await;
                self.stops.lock().unwrap().push(ControllerStop {
                    pod: r.hostname.clone(),
                    began,
                    ended: Instant::now(),
                });
                self.event(Event::ControllerStopped { pod: r.hostname });
                return;
            }
            if d == Daemon::Slurmctld {
                self.ctld_files.lock().unwrap().take();
            }
            let _ = tokio::task::spawn_blocking(move || match d {
                Daemon::Slurmctld => {
                    slurm::sh(&["stop-sidecar", &i, "reconfigure"]);
                    slurm::sh(&["stop-ctld", &i])
                }
                Daemon::Slurmrestd => slurm::sh(&["stop-restd", &i, "slurmrestd"]),
            })
            .await;
            if d == Daemon::Slurmctld {
                self.event(Event::SlurmctldStopped);
            }
        }
        if r.login {
            let hostname = r.hostname.clone();
            let _ =
                tokio::task::spawn_blocking(move || login_pod::stop(&instance, &hostname)).await;
            return;
        }
        if r.port.is_some() {
            let hostname = r.hostname.clone();
            let _ = tokio::task::spawn_blocking(move || {
                slurm::sh(&["stop-slurmd", &instance, &hostname])
            })
            .await;
            self.event(Event::SlurmdStopped {
                pod: r.pod,
                uid: uid.to_string(),
            });
        }
    }

    fn event(&self, e: Event) {
        self.events.lock().unwrap().push(e);
    }
}
