//! As users deploy it: the README's install steps, line for line, against the real node
//! (tests/bed/node.sh: kube-scheduler, kubelet, containerd and runc 1.20.2 / 1.6 / 1.1), with the
//! daemon's image built by the repository's image script from a static build of slurmops.
//!
//! What runs for real here: the scheduler places the daemon's pods, the kubelet pulls nothing
//! (the image is imported), mounts the ServiceAccount token and the git Secret, applies the
//! securityContext (non-root 65532, read-only root, no capability), runs the HTTP probes; the
//! daemon reaches the apiserver through the `kubernetes` Service address with its own token and
//! only the rights `install` renders, follows the bed's git server and applies the quickstart.
//! The quickstart's Slurm runs from images too (tests/bed/images.sh: Slurm 24.11 and MariaDB 11.8
//! from Debian, named and laid out as the images slurmops renders by default), through the
//! scheduler, the kubelet, kube-proxy and the cluster DNS: first without them on the node (every
//! Slurm pod waits on its image; the view shows the NodeSets from Kubernetes alone, Slurm
//! unreachable), then with them: every pod Ready, the worker IDLE after configless registration,
//! `srun` and `sbatch` from a pod, and a push of a new worker image rolled through the kubelet
//! while a job runs (the busy PDB refuses an eviction; the job completes; then the pod is
//! replaced).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use slurmops::status::configmap;

use crate::support::daemon::Repo;
use crate::support::real_node::{
    ctr, default_daemon_image, import_daemon_image, real_node, static_binary,
};
use crate::support::slurm_images::{
    all_ready_and_idle, archives, evict, import, in_pod, kubectl_ok, pods, sinfo, workers,
};
use crate::support::{bed, client, eventually};

/// The README's install steps: the shell block that runs `slurmops install --print`, one command
/// per entry (continuation lines joined), comments dropped.
fn readme_install_steps() -> Vec<String> {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let block = readme
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("slurmops install --print"))
        .expect("the README has a sh block with `slurmops install --print`");
    let mut steps = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        let code = match line.find("  #") {
            Some(i) => &line[..i],
            None => line,
        }
        .trim_end();
        if code.trim_start().starts_with('#') || code.is_empty() {
            continue;
        }
        match code.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(code);
                steps.push(
                    std::mem::take(&mut current)
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                );
            }
        }
    }
    steps
}

/// Runs STEP with bash in DIR against the real node, the slurmops under test first on PATH.
fn shell(step: &str, dir: &Path) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_slurmops")).parent().unwrap();
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", step])
        .current_dir(dir)
        .env("KUBECONFIG", &real_node().kubeconfig)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        );
    cmd
}

fn run(step: &str, dir: &Path) -> String {
    let out = shell(step, dir).output().unwrap();
    assert!(
        out.status.success(),
        "README step `{step}` failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The port-forward the README ends with, stopped with the test.
struct Background(Child);
impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    body.starts_with("HTTP/1.1 200")
        .then(|| body.split_once("\r\n\r\n").map(|(_, b)| b.to_string()))
        .flatten()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_s_install_steps_run_the_daemon_from_its_image_on_a_real_node_and_it_applies_the_quickstart()
 {
    let node = real_node();
    let kube = client(&node.kubeconfig).await;
    // The node starts without the Slurm images: they arrive after the first apply.
    crate::support::slurm_images::forget();
    // The README's namespaces go with the test: the daemon's first, so it makes no more pods.
    let _gone = crate::support::slurm_images::Teardown(vec!["slurmops".into(), NS.into()]);
    let image = default_daemon_image();
    let imported = import_daemon_image(&static_binary(), &image);
    eprintln!(
        "daemon image {image}: {:.1} MiB (OCI archive), id {}",
        imported.size as f64 / 1048576.0,
        imported.id
    );

    // The repository: examples/quickstart, on the bed's git server, as pods reach it.
    let name = format!("deployed-{}", crate::support::unique_suffix());
    let repo = Repo::new(&name);
    let quickstart = std::fs::read_to_string("examples/quickstart/cluster.yaml").unwrap();
    let commit = repo.push(&quickstart, "the quickstart");
    // As pods reach the bed's sshd: through the bridge's address (tests/bed/node.sh).
    let url = format!(
        "{}/{name}.git",
        bed().git.ssh_url.replace("127.0.0.1", &node.pod_gateway)
    );
    // What `ssh-keyscan` would print from a pod: the bed's pinned host key, under that address.
    let known_hosts = std::fs::read_to_string(&bed().git.known_hosts)
        .unwrap()
        .replace("[127.0.0.1]", &format!("[{}]", node.pod_gateway));

    let dir = tempfile::tempdir().unwrap();
    let local_port = crate::support::daemon::free_port();
    let steps = readme_install_steps();
    let mut forward = None;
    let mut timings = Vec::new();
    let started = Instant::now();
    for step in &steps {
        // What only this bed changes: the repository's address and key, a free local port.
        let step = step
            .replace("ssh://git@git.example/infra.git", &url)
            .replace("=deploy_key", &format!("={}", bed().git.ssh_key.display()))
            .replace("8080:8080", &format!("{local_port}:8080"))
            .replace("label node NODE ", &format!("label node {} ", node.node));
        eprintln!("README step: {step}");
        let t0 = Instant::now();
        if step.starts_with("ssh-keyscan git.example") {
            // The host scans nothing at the pods' address (the bed's NAT is for pods only).
            std::fs::write(dir.path().join("known_hosts"), &known_hosts).unwrap();
        } else if step.contains(" port-forward ") {
            let child = shell(&step, dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            forward = Some(Background(child));
        } else if step.starts_with("slurmops status") {
            // Right after the install the daemon may not have written its status yet: the step
            // is run until it names the pushed commit as applied.
            let out = eventually(
                "`slurmops status` to name the pushed commit as applied",
                Duration::from_secs(180),
                async || {
                    let out = shell(&step, dir.path()).output().ok()?;
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    let applied = text
                        .lines()
                        .any(|l| l.starts_with("applied:") && l.contains(&commit[..12]));
                    (out.status.success() && applied).then_some(text)
                },
            )
            .await;
            eprintln!("{out}");
        } else {
            run(&step, dir.path());
        }
        if step.starts_with("slurmops install") {
            // The bed's apiserver is 1.20, which serves PodDisruptionBudget as policy/v1beta1
            // only (policy/v1 since 1.21, the version users run): the one edit of the output.
            let file = dir.path().join("slurmops.yaml");
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(text.contains("apiVersion: policy/v1\nkind: PodDisruptionBudget"));
            std::fs::write(
                &file,
                text.replace(
                    "apiVersion: policy/v1\nkind: PodDisruptionBudget",
                    "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget",
                ),
            )
            .unwrap();
        }
        timings.push((step.clone(), t0.elapsed()));
    }
    let ready_after = timings
        .iter()
        .take_while(|(s, _)| !s.starts_with("slurmops status"))
        .map(|(_, d)| *d)
        .sum::<Duration>();
    eprintln!("from the first README step to the daemon's pods Ready: {ready_after:.1?}");

    // The scheduler placed every pod of the daemon on the node; the kubelet runs them from the
    // imported image, Ready through the HTTP probes.
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "slurmops");
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=slurmops"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 2, "the install's two replicas");
    let listed = ctr(&["images", "ls", &format!("name=={image}")]);
    assert!(
        listed.contains(&image),
        "{image} is in the node's containerd:\n{listed}"
    );
    let digest = imported.id.clone();
    for p in &list.items {
        let pod = p.metadata.name.as_deref().unwrap();
        let spec = p.spec.as_ref().unwrap();
        let status = p.status.as_ref().unwrap();
        assert_eq!(
            spec.node_name.as_deref(),
            Some(node.node.as_str()),
            "{pod} placed"
        );
        let c = &status.container_statuses.as_ref().unwrap()[0];
        assert!(c.ready, "{pod} Ready");
        assert_eq!(c.image, image, "{pod} runs the image install names");
        assert!(
            c.image_id.contains(&digest),
            "{pod} runs the imported image {digest}, not {}",
            c.image_id
        );
        assert_eq!(c.restart_count, 0, "{pod} never restarted");
    }
    let events: Api<Event> = Api::namespaced(kube.clone(), "slurmops");
    let scheduled = events
        .list(&ListParams::default().fields("reason=Scheduled"))
        .await
        .unwrap();
    for p in &list.items {
        let pod = p.metadata.name.as_deref().unwrap();
        assert!(
            scheduled
                .items
                .iter()
                .any(|e| e.involved_object.name.as_deref() == Some(pod)
                    && [
                        e.reporting_component.as_deref(),
                        e.source.as_ref().and_then(|s| s.component.as_deref()),
                    ]
                    .contains(&Some("default-scheduler"))),
            "kube-scheduler placed {pod} (its Scheduled Event)"
        );
    }

    // Each container's process runs as 65532, with no capability and a read-only root.
    let mut checked = 0;
    for task in ctr(&["tasks", "ls"]).lines().skip(1) {
        let mut f = task.split_whitespace();
        let (Some(id), Some(pid), Some("RUNNING")) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let info = ctr(&["containers", "info", id]);
        let of_ours = list
            .items
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .any(|p| info.contains(&format!("\"io.kubernetes.pod.name\": \"{p}\"")));
        if !of_ours || !info.contains("\"io.kubernetes.container.name\": \"slurmops\"") {
            continue;
        }
        checked += 1;
        let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let field = |k: &str| {
            proc_status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap()
        };
        assert_eq!(field("Uid:"), "65532 65532 65532 65532", "container {id}");
        assert_eq!(field("CapEff:"), "0000000000000000", "container {id}");
        let mounts = std::fs::read_to_string(format!("/proc/{pid}/mounts")).unwrap();
        let root = mounts
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("/"))
            .unwrap();
        assert!(
            root.split_whitespace()
                .nth(3)
                .unwrap()
                .split(',')
                .any(|o| o == "ro"),
            "read-only root: {root}"
        );
    }
    assert_eq!(checked, 2, "both replicas' containers were looked at");

    // The daemon applied the quickstart with the rights install gave it: the status names the
    // commit, no error; the quickstart's objects exist.
    let status = configmap::read(&kube, "slurmops", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.last_applied_commit, commit);
    assert_eq!(status.result, "applied", "errors: {}", status.errors);
    let sets: Api<StatefulSet> = Api::namespaced(kube.clone(), "slurm");
    let names: Vec<String> = sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    assert!(!names.is_empty(), "the quickstart's StatefulSets");
    let deployments: Api<Deployment> = Api::namespaced(kube.clone(), "slurmops");
    assert!(deployments.get("slurmops").await.is_ok());

    // No request of the daemon was forbidden (its logs, read through the kubelet as a user does).
    for p in &list.items {
        let pod = p.metadata.name.as_deref().unwrap();
        let logs = run(&format!("kubectl -n slurmops logs {pod}"), dir.path());
        assert!(!logs.is_empty(), "{pod} logged nothing");
        assert!(
            !logs.contains("forbidden") && !logs.contains("Forbidden"),
            "{pod} was refused a request:\n{logs}"
        );
    }

    // One replica leads, the other stands by, both Ready; the Service routes to the leader
    // alone (its pod labelled by the daemon itself, with the rights install gave it).
    let leaders: Vec<&str> = list
        .items
        .iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(slurmops::vocab::LABEL_LEADER))
                .map(String::as_str)
                == Some("true")
        })
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(
        leaders.len(),
        1,
        "exactly one pod labelled the leader: {leaders:?}"
    );
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(kube.clone(), "slurmops");
    let behind = endpoints.get("slurmops").await.unwrap();
    let targets: Vec<String> = behind
        .subsets
        .unwrap_or_default()
        .into_iter()
        .flat_map(|s| s.addresses.unwrap_or_default())
        .filter_map(|a| a.target_ref.and_then(|t| t.name))
        .collect();
    assert_eq!(
        targets,
        [leaders[0].to_string()],
        "the Service routes to the leader alone"
    );

    // The live view through the README's port-forward: every NodeSet of the quickstart, from
    // Kubernetes alone (Slurm does not answer here).
    assert!(
        forward.is_some(),
        "the README ends with the view's port-forward"
    );
    let view = eventually(
        "the view through the port-forward",
        Duration::from_secs(30),
        async || http_get(local_port, "/api/v1/cluster"),
    )
    .await;
    let view: serde_json::Value = serde_json::from_str(&view).unwrap();
    assert_eq!(view["kind"], "ClusterView");
    assert_eq!(view["lastAppliedCommit"], commit.as_str());
    assert_eq!(view["slurm"]["state"], "unreachable", "{}", view["slurm"]);
    let sets: Vec<&str> = view["nodeSets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["node_set"].as_str())
        .collect();
    assert_eq!(
        sets,
        ["cpu"],
        "the quickstart's NodeSets, before Slurm answers"
    );
    drop(forward);
    let waiting = crate::support::slurm_images::pods("slurm");
    assert!(
        !waiting.is_empty() && waiting.iter().all(|(_, ready, _)| !ready),
        "without their images on the node, no Slurm pod is Ready: {waiting:?}"
    );

    // An upgrade of the daemon (a new ReplicaSet): the new standby is Ready, so the rollout ends
    // and a new pod leads; the status still names the commit.
    let t0 = Instant::now();
    run(
        "kubectl -n slurmops rollout restart deployment/slurmops",
        dir.path(),
    );
    run(
        "kubectl -n slurmops rollout status deployment/slurmops --timeout=4m",
        dir.path(),
    );
    eprintln!("the daemon's rolling restart: {:.1?}", t0.elapsed());
    let old: Vec<String> = list
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    eventually("a new pod to lead", Duration::from_secs(120), async || {
        let now = pods
            .list(&ListParams::default().labels(&format!("{}=true", slurmops::vocab::LABEL_LEADER)))
            .await
            .ok()?;
        let names: Vec<String> = now
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        (names.len() == 1 && !old.contains(&names[0])).then_some(())
    })
    .await;
    slurm_from_images(&repo, &quickstart, &commit, dir.path()).await;
    eprintln!(
        "README steps: {}",
        timings
            .iter()
            .map(|(s, d)| format!("\n  {d:>8.1?}  {s}"))
            .collect::<String>()
    );
    eprintln!("total {:.1?}", started.elapsed());
}

const NS: &str = "slurm";
const CONTROLLER: &str = "quick-controller-0";
/// The second name of the bed's slurmd image (tests/bed/images.sh).
const BUILT_NEXT: &str = "bed.local/slurm/slurmd:24.11-next";
/// The image the push names: a new tag of the repository the daemon's default guardrails allow
/// (issue 54: the quickstart's install widens nothing), given to the bed's build on the node.
const NEXT_SLURMD: &str = "ghcr.io/slinkyproject/slurmd:24.11-next";

/// `sacct`'s State and ExitCode of JOB, from slurmctld's pod.
fn job_state(job: &str) -> Option<String> {
    in_pod(
        NS,
        CONTROLLER,
        "slurmctld",
        &format!("sacct -X -n -P -j {job} -o State,ExitCode"),
    )
    .ok()
    .map(|s| s.trim().to_string())
}

async fn slurm_from_images(repo: &Repo, quickstart: &str, applied: &str, dir: &Path) {
    // The images arrive on the node. The kubelet retries a pull only after its back-off (up to
    // five minutes): the pods that gave up are deleted, and their StatefulSets, Deployment and
    // the daemon (the per-node worker) make them again at once.
    // This release's Slurm and MariaDB (the other releases' images are release_images.rs's).
    let built: Vec<_> = archives()
        .into_iter()
        .filter(|a| {
            let n = a.file_name().unwrap().to_string_lossy();
            n == "slurm-24.11.oci.tar" || n.starts_with("mariadb-")
        })
        .collect();
    assert_eq!(
        built.len(),
        2,
        "tests/bed/images.sh built 24.11 and MariaDB"
    );
    for a in &built {
        import(a);
        eprintln!(
            "image {}: {:.1} MiB (OCI archive)",
            a.file_name().unwrap().to_string_lossy(),
            std::fs::metadata(a).unwrap().len() as f64 / 1048576.0
        );
    }
    crate::support::real_node::ctr(&["images", "tag", "--force", BUILT_NEXT, NEXT_SLURMD]);
    kubectl_ok(&["-n", NS, "delete", "pods", "--all", "--wait=false"]);
    let took = all_ready_and_idle(NS, CONTROLLER, Duration::from_secs(300)).await;
    // The old pods' deletion takes its time; the figure users see is from the pods being made.
    eprintln!(
        "the Slurm images on the node -> every pod Ready, every worker IDLE: {took:.1?}; from the \
         oldest pod made: {} s (each pod, made -> Ready: {})",
        crate::support::slurm_images::since_made(NS),
        crate::support::slurm_images::ready_after(NS).join(", ")
    );

    // The NetworkPolicies the quickstart renders and the install prints, as applied: the bed's
    // network does not enforce them, so they are judged on what the API server accepted and the
    // pods running now (tests/e2e/support/network_policies.rs).
    let kube = crate::support::client(&real_node().kubeconfig).await;
    crate::support::network_policies::quickstart_paths_allowed(&kube, NS, "slurmops").await;

    // A user's jobs, from a worker pod (the quickstart has no login pod): srun and sbatch.
    let (worker, old_uid, image) = workers(NS).remove(0);
    assert_eq!(image, "ghcr.io/slinkyproject/slurmd:24.11-ubuntu24.04");
    let out = in_pod(NS, &worker, "slurmd", "srun hostname").unwrap();
    assert_eq!(out.trim(), worker, "srun ran on the worker");
    let job = in_pod(
        NS,
        &worker,
        "slurmd",
        "cd /tmp && sbatch --wait --parsable -o /tmp/job.out --wrap 'echo ran on $(hostname)'",
    )
    .unwrap();
    let job = job.trim().to_string();
    assert_eq!(
        in_pod(NS, &worker, "slurmd", "cat /tmp/job.out")
            .unwrap()
            .trim(),
        format!("ran on {worker}")
    );
    // slurmctld sends the job's end to slurmdbd on its own time (its agent queue): accounting
    // says COMPLETED within seconds, not at the instant sbatch --wait returns.
    let mut seen = None;
    eventually(
        "the sbatch job COMPLETED|0:0 in accounting",
        Duration::from_secs(30),
        async || {
            let s = job_state(&job);
            if s != seen {
                eprintln!("sacct: job {job}: {s:?}");
                seen = s.clone();
            }
            (s.as_deref() == Some("COMPLETED|0:0")).then_some(())
        },
    )
    .await;

    // A push changes the workers' image while a job runs on the worker.
    let long = in_pod(
        NS,
        &worker,
        "slurmd",
        "cd /tmp && sbatch --parsable -o /dev/null --wrap 'sleep 100'",
    )
    .unwrap()
    .trim()
    .to_string();
    eventually("the long job to run", Duration::from_secs(30), async || {
        (job_state(&long)?.starts_with("RUNNING|")).then_some(())
    })
    .await;
    let next = quickstart.replace(
        "  slurmVersion: \"24.11\"\n",
        &format!("  slurmVersion: \"24.11\"\n  images:\n    slurmd: {NEXT_SLURMD}\n"),
    );
    assert_ne!(next, quickstart);
    let pushed = repo.push(&next, "workers: a new slurmd image");
    assert_ne!(pushed, applied);
    let t0 = Instant::now();
    // The daemon follows it (its poll: one minute) and marks the busy worker for its PDB.
    eventually(
        "the daemon to apply the push and mark the worker busy",
        Duration::from_secs(150),
        async || {
            let status = run("slurmops status --namespace slurmops", dir);
            let busy = kubectl_ok(&[
                "-n",
                NS,
                "get",
                "pod",
                &worker,
                "-o",
                "jsonpath={.metadata.labels.slurmops\\.dev/busy}",
            ]);
            let applied = status
                .lines()
                .any(|l| l.starts_with("applied:") && l.contains(&pushed[..12]));
            if !(applied && busy == "true") {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            (applied && busy == "true").then_some(())
        },
    )
    .await;
    // `kubectl drain` would be refused: the busy worker's PDB allows no disruption.
    let refused = evict(NS, &worker).expect_err("the eviction of a busy worker is refused");
    assert!(
        refused.contains("disruption budget"),
        "refused for its PDB: {refused}"
    );
    // The job runs on; the worker pod is the same.
    assert!(job_state(&long).unwrap().starts_with("RUNNING|"));
    assert_eq!(workers(NS)[0].1, old_uid, "the busy worker is not replaced");

    // The job ends by itself; then the worker is drained, deleted (the kubelet stops its
    // container), and replaced from the new image; it registers and is IDLE.
    eventually(
        "the long job to complete",
        Duration::from_secs(150),
        async || {
            let s = job_state(&long)?;
            if s.starts_with("RUNNING|") || s.starts_with("PENDING|") {
                tokio::time::sleep(Duration::from_secs(1)).await;
                return None;
            }
            assert_eq!(s, "COMPLETED|0:0", "the running job was not killed");
            Some(())
        },
    )
    .await;
    let replaced = eventually(
        "the worker replaced from the new image, IDLE",
        Duration::from_secs(180),
        async || {
            let now = workers(NS);
            let fresh = now.len() == 1 && now[0].1 != old_uid && now[0].2 == NEXT_SLURMD;
            let ready = pods(NS).iter().all(|(_, r, _)| *r);
            let idle = fresh
                && ready
                && sinfo(NS, CONTROLLER)?
                    .lines()
                    .any(|l| l == format!("{} idle", now[0].0));
            if !idle {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            idle.then(|| now[0].0.clone())
        },
    )
    .await;
    eprintln!(
        "push of a new worker image -> the busy worker replaced and IDLE: {:.1?} (its job had 100 s to run)",
        t0.elapsed()
    );
    let killing = kubectl_ok(&[
        "-n",
        NS,
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.uid={old_uid},reason=Killing"),
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(
        killing.contains("Stopping container slurmd"),
        "the kubelet stopped the old worker's container: {killing:?}"
    );
    let out = in_pod(NS, &replaced, "slurmd", "srun hostname").unwrap();
    assert_eq!(out.trim(), replaced, "the new worker runs jobs");
}
