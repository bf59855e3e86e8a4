//! One engine, one entrance: `slurmops rollout` is the controller's pass (so it honours a
//! NodeSet's maintenance window and re-creates the pods slurmops makes), and `plan --cluster` is
//! that pass with acting turned off (what the next pass does is exactly what the plan said).
//! Real kube-apiserver and controller-manager, a real slurmd per worker pod, the bed's real
//! slurmctld and slurmrestd, the CLI as an identity holding only slurmops' Role.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use slurmops::slurm::SlurmNodes;

use crate::support;
use support::TestEnv;
use support::slurm::{cli, client as slurm, submit_sleep};

/// Runs CMD to its end, at most LIMIT (then it is killed and the test fails): exit code and output.
fn run_within(cmd: &mut std::process::Command, limit: std::time::Duration) -> (i32, String) {
    use std::io::Read;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Drain both pipes beside the wait, so a chatty command never blocks on a full pipe.
    fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = r.read_to_string(&mut text);
            text
        })
    }
    let (out, err) = (
        drain(child.stdout.take().unwrap()),
        drain(child.stderr.take().unwrap()),
    );
    let reader = || {
        let (o, e) = (
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        );
        o + &e
    };
    let start = std::time::Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let text = reader();
            // The command line without the token that follows --slurm-jwt.
            let args: Vec<_> = cmd.get_args().take_while(|a| *a != "--slurm-jwt").collect();
            panic!("slurmops {args:?} still running after {limit:?}:\n{text}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    (code, reader())
}

fn run(cmd: &mut std::process::Command) -> (i32, String) {
    run_within(cmd, std::time::Duration::from_secs(180))
}

fn ok(cmd: &mut std::process::Command) -> String {
    let (code, out) = run(cmd);
    assert_eq!(code, 0, "{out}");
    out
}

use crate::per_node::{idle_workers as idle, workers as pods};

fn write(dir: &std::path::Path, yaml: &str) {
    std::fs::write(dir.join("cluster.yaml"), yaml).unwrap();
}

/// A NodeSet of two workers that rolls only inside a daily two-minute window twelve hours away.
fn windowed(ns: &str, set: &str, image: &str) -> String {
    crate::window::cluster(ns, set, image, crate::window::minute_after(12 * 3600))
}

on_each_slurm! {
/// `slurmops rollout` of a NodeSet with `update.window: required`, outside its window: nothing
/// drains, no pod is replaced, and it says what it waits for. `--ignore-window` rolls it, and an
/// Event on the StatefulSet records that an operator chose to.
async fn rollout_outside_a_required_window_waits_and_the_override_rolls_with_an_event() {
    let env = TestEnv::new("entr-win").await;
    env.grant_slurmops_role().await;
    let set = env.name("ew");
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &windowed(&env.ns, &set, "img:1"));
    ok(&mut cli(dir.path(), &["apply", "--wait", "90s"]));
    let before = idle(&env, &set, 2).await;
    // The image changes; apply updates the StatefulSet and rolls nothing.
    write(dir.path(), &windowed(&env.ns, &set, "img:2"));
    ok(&mut cli(dir.path(), &["apply", "--no-rollout", "--wait", "0s"]));

    let out = ok(&mut cli(dir.path(), &["rollout"]));
    assert!(out.contains("waits for a maintenance window"), "{out}");
    assert!(out.contains(&format!("{set}: 0 worker(s) replaced")), "{out}");
    let s = slurm();
    for name in before.keys() {
        let n = s.get(name).await.unwrap();
        assert!(!n.state.has("DRAIN"), "{name} drained outside the window: {}", n.reason);
    }
    assert_eq!(pods(&env, &set).await, before, "a pod was replaced outside the window");

    let out = ok(&mut cli(dir.path(), &["rollout", "--ignore-window"]));
    assert!(out.contains(&format!("{set}: 2 worker(s) replaced")), "{out}");
    let after = idle(&env, &set, 2).await;
    for (name, (uid, _)) in &before {
        assert_ne!(&after[name].0, uid, "{name} not replaced");
    }
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    let recorded = events.list(&ListParams::default()).await.unwrap().items;
    let ignored = recorded
        .iter()
        .find(|e| e.reason.as_deref() == Some(slurmops::vocab::EVENT_WINDOW_IGNORED))
        .unwrap_or_else(|| panic!("no WindowIgnored Event: {recorded:?}"));
    assert_eq!(ignored.involved_object.kind.as_deref(), Some("StatefulSet"));
    assert_eq!(ignored.involved_object.name.as_deref(), Some(set.as_str()));
    assert_eq!(ignored.type_.as_deref(), Some("Warning"));
    env.cleanup().await;
}
}

on_each_slurm! {
/// `slurmops rollout` of a perNode NodeSet: slurmops makes those pods, so the rollout that
/// deletes one must make its replacement, on the same Kubernetes node, on the new revision.
async fn rollout_of_a_per_node_node_set_recreates_the_pods_it_replaces() {
    let env = TestEnv::on_nodes("entr-pn", &[&[], &[]]).await;
    env.grant_slurmops_role().await;
    env.grant_node_reader().await;
    let pool = env.suffix.clone();
    for n in &env.kubelet.nodes() {
        support::label_node(&env, n, "slurmops.test/pool", Some(&pool)).await;
    }
    let set = env.name("ep");
    let yaml = |image: &str| {
        support::cluster_head("c", &env.ns)
            + &format!(
                r#"  nodeSets:
    - name: {set}
      replicas: perNode
      cpu: "1"
      memory: 256Mi
      image: {image}
      nodeSelector: {{slurmops.test/pool: "{pool}"}}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
"#
            )
    };
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &yaml("img:1"));
    ok(&mut cli(dir.path(), &["apply", "--wait", "90s"]));
    let before = idle(&env, &set, 2).await;
    write(dir.path(), &yaml("img:2"));
    ok(&mut cli(dir.path(), &["apply", "--no-rollout", "--wait", "0s"]));

    let out = ok(&mut cli(dir.path(), &["rollout"]));
    assert!(out.contains(&format!("{set}: 2 worker(s) replaced")), "{out}");
    let after = idle(&env, &set, 2).await;
    for (name, (uid, host)) in &before {
        let (new_uid, new_host) = &after[name];
        assert_ne!(new_uid, uid, "{name} not replaced");
        assert_eq!(new_host, host, "{name} moved to another node");
    }
    let template: Api<k8s_openapi::api::core::v1::PodTemplate> =
        Api::namespaced(env.client.clone(), &env.ns);
    let rev = template.get(&set).await.unwrap().metadata.labels.unwrap()
        [slurmops::vocab::LABEL_REVISION]
        .clone();
    let live: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    for name in after.keys() {
        let p = live.get(name).await.unwrap();
        assert_eq!(p.metadata.labels.unwrap()[slurmops::vocab::LABEL_REVISION], rev, "{name}");
    }
    env.cleanup().await;
}
}

/// Two NodeSets: A (three workers, one out at a time) and B (three workers); B keeps REPLICAS_B.
fn two_sets(ns: &str, a: &str, b: &str, image: &str, replicas_b: u32, extra: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
    - name: {a}
      replicas: 3
      cpu: "1"
      memory: 256Mi
      image: {image}
      update: {{maxUnavailable: 1}}
    - name: {b}
      replicas: {replicas_b}
      cpu: "1"
      memory: 256Mi
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
{extra}"#
        )
}

on_each_slurm! {
/// The plan is the pass, dry-run: with a rollout under way on A (one worker out at a time), a
/// git scale-in of B whose leaving workers are idle and busy, and a new partition, `plan
/// --cluster` names the steps and object changes of the next pass; one pass (`apply
/// --no-wait`) then does exactly those steps, and applies only objects the plan names.
async fn plan_cluster_names_exactly_what_the_next_pass_does() {
    let env = TestEnv::new("entr-plan").await;
    env.grant_slurmops_role().await;
    let (a, b) = (env.name("pa"), env.name("pb"));
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &two_sets(&env.ns, &a, &b, "img:1", 3, ""));
    ok(&mut cli(dir.path(), &["apply", "--wait", "90s"]));
    idle(&env, &a, 3).await;
    idle(&env, &b, 3).await;
    let busy = format!("{b}-2");
    let job = submit_sleep(&busy, 120).await;
    support::gitops::running(job).await;
    // A's new image is applied, not rolled: a rollout is under way on the live cluster.
    write(dir.path(), &two_sets(&env.ns, &a, &b, "img:2", 3, ""));
    ok(&mut cli(dir.path(), &["apply", "--no-rollout", "--wait", "0s"]));
    // The change: B down to one worker, and a partition more.
    let extra = format!("    - {{name: extra, nodeSets: [{a}]}}\n");
    write(dir.path(), &two_sets(&env.ns, &a, &b, "img:2", 1, &extra));

    let (code, plan) = run(&mut cli(dir.path(), &["plan", "--cluster", "--format", "json"]));
    assert_eq!(code, 2, "{plan}");
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap_or_else(|e| panic!("{e}: {plan}"));
    // The daemon's pass also runs worker sync and autoscale (`by`); `apply`'s pass is the
    // controller's alone, which is what is compared below.
    let steps = plan["slurm"]["next_pass"]
        .as_array()
        .unwrap_or_else(|| panic!("no next_pass: {plan:#}"));
    let by = |sync: bool| -> BTreeSet<(String, String)> {
        steps
            .iter()
            .filter(|s| (s["by"] == "sync") == sync)
            .map(|s| (s["action"].as_str().unwrap().to_string(), s["target"].as_str().unwrap().to_string()))
            .collect()
    };
    let planned_steps = by(false);
    // Sync: the busy worker gets its busy label (no sync ran in this test), nothing else.
    assert_eq!(by(true), BTreeSet::from([("label".to_string(), format!("{b}-2"))]), "{plan:#}");
    let planned_objects: BTreeSet<String> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{}/{}", c["kind"].as_str().unwrap(), c["name"].as_str().unwrap()))
        .collect();
    // What the controller decides now: A's first outdated worker, B's two leaving ones (the
    // busy one too: it drains while its job runs).
    let want: BTreeSet<(String, String)> = [
        ("drain", format!("{a}-0")),
        ("drain", format!("{b}-1")),
        ("drain", busy.clone()),
    ]
    .into_iter()
    .map(|(x, y)| (x.to_string(), y))
    .collect();
    assert_eq!(planned_steps, want, "{plan:#}");
    assert!(planned_objects.contains("ConfigMap/c-config"), "{plan:#}");
    assert!(
        !planned_objects.contains(&format!("StatefulSet/{b}")),
        "B's replicas stay while its leaving workers drain: {plan:#}"
    );

    // One pass of the controller.
    let out = ok(&mut cli(dir.path(), &["apply", "--no-wait", "--wait", "0s"]));
    let mut done_steps = BTreeSet::new();
    let mut done_objects = BTreeSet::new();
    for line in out.lines() {
        if let Some(node) = line.split_once(": draining ").map(|(_, n)| n) {
            done_steps.insert(("drain".to_string(), node.trim().to_string()));
        }
        if let Some(pod) = line.split_once(": ").and_then(|(_, r)| r.strip_suffix(" drained, pod deleted")) {
            done_steps.insert(("delete".to_string(), pod.to_string()));
        }
        if let Some(node) = line.split_once(": ").and_then(|(_, r)| r.strip_suffix(" resumed")) {
            done_steps.insert(("resume".to_string(), node.to_string()));
        }
        for what in ["created: ", "updated: ", "recreated (pods orphaned and adopted): ", "pruned: "] {
            if let Some(id) = line.strip_prefix(what) {
                done_objects.insert(id.to_string());
            }
        }
    }
    assert_eq!(done_steps, planned_steps, "the pass did other steps than planned:\n{out}");
    assert!(!done_objects.is_empty(), "{out}");
    for id in &done_objects {
        assert!(planned_objects.contains(id), "{id} applied, not in the plan {planned_objects:?}:\n{out}");
    }
    let s = slurm();
    let n = s.get(&busy).await.unwrap();
    assert!(n.state.has("DRAIN"), "{busy}: {}", n.state);
    assert_eq!(support::slurm::job_state(job).await, ["RUNNING"], "the job was touched");
    support::slurm::sh(&["exec", support::slurm_instance(), "scancel", &job.to_string()]);
    env.cleanup().await;
}
}
