//! `slurmops apply` and `plan --cluster` against the real kube-apiserver + controller-manager of
//! the test bed, run as an identity holding only the Role slurmops documents for itself.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{TestEnv, bed, eventually};

fn small_cluster(ns: &str, node_sets: &str, policy: &str) -> String {
    support::cluster_head("c", ns)
        + &format!(
            r#"  nodeSets:
{node_sets}
  partitions:
    - {{name: all, nodeSets: [ALL], default: true}}
{policy}
"#
        )
}

fn node_set(name: &str, replicas: u32) -> String {
    format!("    - {{name: {name}, replicas: {replicas}, cpu: \"1\", memory: 256Mi}}\n")
}

fn write(dir: &Path, yaml: &str) {
    std::fs::write(dir.join("cluster.yaml"), yaml).unwrap();
}

/// Runs slurmops as the restricted identity; (exit code, stdout, stderr).
fn slurmops(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(args)
        .env("KUBECONFIG", &bed().kubeconfig_restricted)
        .env_remove("SLURMRESTD_URL")
        .env_remove("SLURM_JWT")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn apply_ok(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["apply", dir.to_str().unwrap()];
    args.extend(extra);
    let (code, out, err) = slurmops(&args);
    assert_eq!(code, 0, "apply failed:\n{out}\n{err}");
    out
}

fn plan_cluster(dir: &Path) -> (i32, String) {
    let (code, out, err) = slurmops(&["plan", dir.to_str().unwrap(), "--cluster"]);
    assert!(
        code == 0 || code == 2,
        "plan --cluster failed ({code}):\n{out}\n{err}"
    );
    (code, out)
}

/// `N writes` from apply's summary line.
fn writes(out: &str) -> usize {
    let tail = out.rsplit(" API requests (").next().unwrap();
    tail.split(" writes")
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

async fn pod_uids(env: &TestEnv, node_set: &str) -> Vec<(String, String)> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let lp = ListParams::default().labels(&format!("slurmops.dev/nodeset={node_set}"));
    let mut v: Vec<(String, String)> = pods
        .list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| (p.metadata.name.unwrap(), p.metadata.uid.unwrap()))
        .collect();
    v.sort();
    v
}

fn temp_repo() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn example_applies_from_empty_then_plan_is_clean_and_a_second_apply_writes_nothing() {
    let env = TestEnv::new("example").await;
    env.grant_slurmops_role().await;
    // What the platform provides before slurmops runs: the priority class and service accounts
    // the example's pods name.
    let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": "slurm-critical"}, "value": 1000000});
    let _ = Api::<k8s_openapi::api::scheduling::v1::PriorityClass>::all(env.client.clone())
        .create(&PostParams::default(), &serde_json::from_value(pc).unwrap())
        .await;
    for sa in ["slurmctld", "slurm-login", "slurm-worker"] {
        let body = serde_json::from_value(json!({"metadata": {"name": sa}})).unwrap();
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(env.client.clone(), &env.ns)
            .create(&PostParams::default(), &body)
            .await
            .unwrap();
    }
    let repo = temp_repo();
    let text = std::fs::read_to_string("examples/repo/cluster.yaml").unwrap();
    let text = text.replace("namespace: slurm\n", &format!("namespace: {}\n", env.ns));
    assert!(text.contains(&env.ns), "the example's namespace line moved");
    write(repo.path(), &text);
    // Its ServiceMonitor needs the Prometheus Operator's API: without it, apply refuses before
    // writing anything. (Only this test serves that API on the bed.)
    env.serve_service_monitors(false).await;
    let (code, _, err) = slurmops(&["apply", repo.path().to_str().unwrap(), "--wait", "0s"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("ServiceMonitor/research-metrics")
            && err.contains("Prometheus Operator")
            && err.contains("nothing was changed"),
        "{err}"
    );
    env.serve_service_monitors(true).await;
    // The example's IMEX NodeSet needs DRA (Kubernetes >= 1.32); the bed's 1.20 has none: apply
    // refuses before writing anything.
    let (code, _, err) = slurmops(&["apply", repo.path().to_str().unwrap(), "--wait", "0s"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("DRA resource claims") && err.contains("nothing was changed"),
        "{err}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    assert!(
        cms.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .all(|c| c.metadata.name.as_deref() == Some("kube-root-ca.crt"))
    );
    // The rest of the example, exactly as written, on this cluster:
    let imex = "      imex: {computeDomain: h100-nvlink}\n";
    assert!(text.contains(imex));
    write(repo.path(), &text.replace(imex, ""));

    let out = apply_ok(repo.path(), &["--wait", "0s"]);
    assert!(out.contains("created: StatefulSet/"), "{out}");
    assert!(
        out.contains("created: ServiceMonitor/research-metrics"),
        "{out}"
    );
    assert!(writes(&out) > 0);
    let (code, plan) = plan_cluster(repo.path());
    assert_eq!(code, 0, "live cluster differs right after apply:\n{plan}");

    let again = apply_ok(repo.path(), &["--wait", "0s"]);
    assert_eq!(writes(&again), 0, "a no-op apply wrote:\n{again}");
    assert!(again.contains(" 0 created, 0 updated"), "{again}");
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hand_edits_show_as_drift_and_apply_corrects_them_while_ignore_rules_hold() {
    let env = TestEnv::new("drift").await;
    env.grant_slurmops_role().await;
    let ns_name = env.name("d");
    let repo = temp_repo();
    let policy = "  policy:\n    ignoreDifferences:\n      - {kind: StatefulSet, jsonPointers: [/spec/replicas]}\n";
    write(
        repo.path(),
        &small_cluster(&env.ns, &node_set(&ns_name, 1), policy),
    );
    let out = apply_ok(repo.path(), &["--wait", "60s"]);
    assert!(out.contains("created: ConfigMap/c-config"), "{out}");

    // Someone edits the rendered slurm.conf by hand, and scales the workers.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let edit = json!({"data": {"slurm.conf": "# edited by hand\n"}});
    cms.patch("c-config", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    sts.patch(
        &ns_name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();

    let (code, plan) = plan_cluster(repo.path());
    assert_eq!(code, 2, "{plan}");
    assert!(
        plan.contains("ConfigMap") && plan.contains("c-config"),
        "{plan}"
    );
    assert!(
        plan.contains("# edited by hand"),
        "the diff shows the edit:\n{plan}"
    );
    assert!(
        !plan.contains(&format!("StatefulSet {}/{ns_name}", env.ns)),
        "replicas are ignored:\n{plan}"
    );

    // Detect-only: reported, left in place.
    let out = apply_ok(repo.path(), &["--wait", "0s", "--detect-only"]);
    assert!(
        out.contains("drift left in place (detect-only): ConfigMap/c-config"),
        "{out}"
    );
    assert_eq!(writes(&out), 0, "{out}");
    let live = cms.get("c-config").await.unwrap();
    assert!(live.data.unwrap()["slurm.conf"].contains("edited by hand"));

    let out = apply_ok(repo.path(), &["--wait", "0s"]);
    assert!(out.contains("updated: ConfigMap/c-config"), "{out}");
    let live = cms.get("c-config").await.unwrap();
    assert!(!live.data.unwrap()["slurm.conf"].contains("edited by hand"));
    let replicas = sts.get(&ns_name).await.unwrap().spec.unwrap().replicas;
    assert_eq!(replicas, Some(2), "an ignored field was reset");
    let (code, plan) = plan_cluster(repo.path());
    assert_eq!(code, 0, "{plan}");
    env.cleanup().await;
}

/// The `-`/`+` lines of the diff of OBJECT in a plan (without the ---/+++ headers).
fn diff_lines(plan: &str, object: &str) -> Vec<String> {
    let Some(start) = plan.find(object) else {
        return Vec::new();
    };
    plan[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("    ") || l.is_empty())
        .map(str::trim_start)
        .filter(|l| {
            (l.starts_with('-') || l.starts_with('+'))
                && !l.starts_with("---")
                && !l.starts_with("+++")
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_added_by_hand_to_the_slurm_config_map_is_drift_and_a_one_line_edit_diffs_as_one_line()
 {
    let env = TestEnv::new("keys").await;
    env.grant_slurmops_role().await;
    let repo = temp_repo();
    write(
        repo.path(),
        &small_cluster(&env.ns, &node_set(&env.name("k"), 0), ""),
    );
    apply_ok(repo.path(), &["--wait", "0s"]);
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);

    // A file nobody reviewed, slipped into slurmctld's config directory.
    let edit = json!({"data": {"plugstack.conf": "required /tmp/evil.so\n"}});
    cms.patch("c-config", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    let (code, plan) = plan_cluster(repo.path());
    assert_eq!(code, 2, "{plan}");
    let object = format!("update ConfigMap {}/c-config", env.ns);
    assert_eq!(
        diff_lines(&plan, &object),
        ["-  plugstack.conf: |", "-    required /tmp/evil.so"],
        "{plan}"
    );
    let out = apply_ok(repo.path(), &["--wait", "0s", "--detect-only"]);
    assert!(
        out.contains("drift left in place (detect-only): ConfigMap/c-config"),
        "{out}"
    );
    assert!(
        cms.get("c-config")
            .await
            .unwrap()
            .data
            .unwrap()
            .contains_key("plugstack.conf")
    );
    let out = apply_ok(repo.path(), &["--wait", "0s"]);
    assert!(out.contains("updated: ConfigMap/c-config"), "{out}");
    let data = cms.get("c-config").await.unwrap().data.unwrap();
    assert!(!data.contains_key("plugstack.conf"), "{data:?}");
    assert_eq!(plan_cluster(repo.path()).0, 0);

    // One value edited by hand: the diff is that line, not the object rearranged.
    let cgroup = data["cgroup.conf"].replace("ConstrainRAMSpace=yes", "ConstrainRAMSpace=no");
    let edit = json!({"data": {"cgroup.conf": cgroup}});
    cms.patch("c-config", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    let (code, plan) = plan_cluster(repo.path());
    assert_eq!(code, 2, "{plan}");
    assert_eq!(
        diff_lines(&plan, &object),
        ["-    ConstrainRAMSpace=no", "+    ConstrainRAMSpace=yes"],
        "{plan}"
    );
    env.cleanup().await;
}

on_each_slurm! {
async fn removed_node_sets_are_pruned_only_when_safe_and_foreign_objects_stay() {
    let env = TestEnv::new("prune").await;
    env.grant_slurmops_role().await;
    let (a, b, c, d) = (env.name("a"), env.name("b"), env.name("c"), env.name("e"));
    let repo = temp_repo();
    let all = [
        node_set(&a, 0),
        node_set(&b, 1),
        node_set(&c, 0),
        node_set(&d, 0),
    ]
    .concat();
    write(
        repo.path(),
        &small_cluster(&env.ns, &all, "  policy: {maxPrune: 2}\n"),
    );
    apply_ok(repo.path(), &["--wait", "60s"]);
    // An object slurmops did not create, in the same namespace: never touched.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let foreign = serde_json::from_value(json!({"metadata": {"name": "c-notes", "labels": {"app.kubernetes.io/managed-by": "slurmops"}}, "data": {"k": "v"}})).unwrap();
    cms.create(&PostParams::default(), &foreign).await.unwrap();

    // Removing a NodeSet whose worker may run jobs: refused without Slurm's word, nothing changes.
    write(
        repo.path(),
        &small_cluster(
            &env.ns,
            &[node_set(&a, 0), node_set(&c, 0), node_set(&d, 0)].concat(),
            "  policy: {maxPrune: 2}\n",
        ),
    );
    let (code, _, err) = slurmops(&["apply", repo.path().to_str().unwrap(), "--wait", "0s"]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("refusing to prune StatefulSet {b}"))
            && err.contains(&format!("{b}-0")),
        "{err}"
    );
    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    assert!(sts.get_opt(&b).await.unwrap().is_some());

    // With slurmrestd: apply drains the removed NodeSet's worker, waits until Slurm reports it
    // drained, then prunes.
    let b0 = format!("{b}-0");
    eventually("worker registered", Duration::from_secs(30), async || {
        support::slurm::node_state(support::slurm_instance(), &b0).filter(|s| s.starts_with("IDLE"))
    })
    .await;
    let with_slurm = |extra: &[&str]| {
        let mut args = vec![
            "apply",
            repo.path().to_str().unwrap(),
            "--wait",
            "0s",
            "--slurmrestd-url",
            &bed().slurmrestd_url,
            "--slurm-jwt",
            &bed().slurm_jwt,
        ];
        args.extend(extra);
        slurmops(&args)
    };
    let (code, out, err) = with_slurm(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("{b}: drained before removal: {b0}")),
        "{out}"
    );
    assert!(out.contains(&format!("pruned: StatefulSet/{b}")), "{out}");
    let drained = support::slurm::node_state(support::slurm_instance(), &b0);
    assert!(
        drained.is_none() || drained.as_deref().is_some_and(|s| s.contains("DRAIN")),
        "{b0} pruned without a drain: {drained:?}"
    );
    assert!(sts.get_opt(&b).await.unwrap().is_none());
    assert!(
        cms.get_opt("c-notes").await.unwrap().is_some(),
        "a foreign object was pruned"
    );

    // More than policy.maxPrune (2) at once: refused, then allowed explicitly.
    write(
        repo.path(),
        &small_cluster(&env.ns, &node_set(&a, 0), "  policy: {maxPrune: 2}\n"),
    );
    let (code, _, err) = slurmops(&["apply", repo.path().to_str().unwrap(), "--wait", "0s"]);
    assert_eq!(code, 1);
    assert!(err.contains("refusing to prune 4 of the"), "{err}");
    assert!(sts.get_opt(&c).await.unwrap().is_some());
    let out = apply_ok(repo.path(), &["--wait", "0s", "--allow-mass-prune"]);
    assert!(
        out.contains(&format!("pruned: StatefulSet/{c}"))
            && out.contains(&format!("pruned: StatefulSet/{d}")),
        "{out}"
    );
    env.cleanup().await;
}
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_of_the_same_name_that_is_not_this_clusters_is_refused_not_taken_over() {
    let env = TestEnv::new("foreign").await;
    env.grant_slurmops_role().await;
    let a = env.name("a");
    // Another team's StatefulSet (or another cluster's) with the name cluster.yaml gives a
    // NodeSet: server-side apply would take it over.
    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    let theirs: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": a, "labels": {"app.kubernetes.io/instance": "other"}},
        "spec": {"replicas": 0, "serviceName": "other",
            "selector": {"matchLabels": {"app": "other"}},
            "template": {"metadata": {"labels": {"app": "other"}},
                "spec": {"containers": [{"name": "c", "image": "other:1"}]}}}
    }))
    .unwrap();
    sts.create(&PostParams::default(), &theirs).await.unwrap();
    // And a ConfigMap with the name of the one holding slurm.conf, made by another tool that
    // puts the instance label on everything it makes (as Helm and Argo CD do): a label alone
    // never makes an object ours.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let notes: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "c-config", "labels": {"app.kubernetes.io/instance": "c"}},
        "data": {"mine": "x"}
    }))
    .unwrap();
    let helm = PostParams {
        field_manager: Some("helm".into()),
        ..PostParams::default()
    };
    cms.create(&helm, &notes).await.unwrap();
    let repo = temp_repo();
    write(repo.path(), &small_cluster(&env.ns, &node_set(&a, 0), ""));
    let (code, out, err) = slurmops(&["apply", repo.path().to_str().unwrap(), "--wait", "0s"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!("StatefulSet/{a}"))
            && err.contains("ConfigMap/c-config")
            && err.contains("not this cluster's"),
        "{err}"
    );
    let kept = cms.get("c-config").await.unwrap();
    assert_eq!(
        kept.metadata.labels.unwrap_or_default().len(),
        1,
        "their ConfigMap was taken over"
    );
    assert_eq!(kept.data.unwrap().len(), 1);
    let after = sts.get(&a).await.unwrap();
    let image = after.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone();
    assert_eq!(
        image.as_deref(),
        Some("other:1"),
        "their StatefulSet was changed"
    );
    // Refused before the first write: not even the ApplySet parent exists.
    assert!(cms.get_opt("c-applyset").await.unwrap().is_none());

    // Theirs gone, the apply goes through; the next apply of what it made is no refusal.
    sts.delete(&a, &Default::default()).await.unwrap();
    cms.delete("c-config", &Default::default()).await.unwrap();
    eventually(
        "their StatefulSet gone",
        Duration::from_secs(30),
        async || sts.get_opt(&a).await.unwrap().is_none().then_some(()),
    )
    .await;
    apply_ok(repo.path(), &["--wait", "0s"]);
    apply_ok(repo.path(), &["--wait", "0s"]);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rendering_that_would_prune_everything_is_refused() {
    let env = TestEnv::new("all").await;
    env.grant_slurmops_role().await;
    let repo = temp_repo();
    let yaml = small_cluster(&env.ns, &node_set(&env.name("x"), 0), "");
    write(repo.path(), &yaml);
    apply_ok(repo.path(), &["--wait", "0s"]);
    let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_restricted), None)
        .await
        .unwrap();
    let c = slurmops::cluster::load("cluster.yaml", &yaml).unwrap();
    let mut empty = slurmops::render::render(&c);
    empty.objects.clear();
    let err = slurmops::apply::apply(
        &cluster,
        &c,
        &yaml,
        &empty,
        &Default::default(),
        &slurmops::apply::NoSlurm,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, slurmops::apply::ApplyError::MassPrune { .. }),
        "{err}"
    );
    assert_eq!(
        cluster.log.summary().writes,
        0,
        "nothing may be written before refusing"
    );
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn immutable_change_recreates_the_statefulset_orphaning_pods_which_keep_their_uids() {
    let env = TestEnv::new("recreate").await;
    env.grant_slurmops_role().await;
    let w = env.name("v");
    let repo = temp_repo();
    let with_vct = |size: &str, policy: &str| {
        let ns_yaml = format!(
            "    - name: {w}\n      replicas: 2\n      cpu: \"1\"\n      memory: 256Mi\n      volumeClaimTemplates:\n        - metadata: {{name: scratch}}\n          spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: {size}}}}}}}\n"
        );
        small_cluster(&env.ns, &ns_yaml, policy)
    };
    write(repo.path(), &with_vct("1Gi", ""));
    apply_ok(repo.path(), &["--wait", "60s"]);
    let before = pod_uids(&env, &w).await;
    assert_eq!(before.len(), 2);

    write(repo.path(), &with_vct("2Gi", ""));
    let (code, plan) = plan_cluster(repo.path());
    assert_eq!(code, 2);
    assert!(plan.contains("replace"), "{plan}");
    let (code, _, err) = slurmops(&["apply", repo.path().to_str().unwrap(), "--wait", "0s"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("volumeClaimTemplates") && err.contains("allowRecreate"),
        "{err}"
    );

    write(
        repo.path(),
        &with_vct("2Gi", "  policy: {allowRecreate: true}\n"),
    );
    let out = apply_ok(repo.path(), &["--wait", "60s"]);
    assert!(
        out.contains(&format!(
            "recreated (pods orphaned and adopted): StatefulSet/{w}"
        )),
        "{out}"
    );
    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    let new_uid = sts.get(&w).await.unwrap().metadata.uid.unwrap();
    assert_eq!(pod_uids(&env, &w).await, before, "pods were replaced");
    // The new StatefulSet adopts the running pods.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    for (name, _) in &before {
        eventually(
            &format!("{name} adopted"),
            Duration::from_secs(30),
            async || {
                let p = pods.get(name).await.ok()?;
                p.metadata
                    .owner_references?
                    .iter()
                    .any(|o| o.uid == new_uid)
                    .then_some(())
            },
        )
        .await;
    }
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_field_owned_by_another_manager_is_a_conflict_until_forced() {
    let env = TestEnv::new("conflict").await;
    env.grant_slurmops_role().await;
    let repo = temp_repo();
    write(
        repo.path(),
        &small_cluster(&env.ns, &node_set(&env.name("f"), 0), ""),
    );
    apply_ok(repo.path(), &["--wait", "0s"]);
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "c-config", "namespace": env.ns},
                       "data": {"slurm.conf": "# owned by another tool\n"}});
    cms.patch(
        "c-config",
        &PatchParams::apply("other-tool").force(),
        &Patch::Apply(&other),
    )
    .await
    .unwrap();
    let (code, _, err) = slurmops(&["apply", repo.path().to_str().unwrap(), "--wait", "0s"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("c-config") && err.contains("other-tool") && err.contains("--force-conflicts"),
        "{err}"
    );
    let out = apply_ok(repo.path(), &["--wait", "0s", "--force-conflicts"]);
    assert!(out.contains("updated: ConfigMap/c-config"), "{out}");
    let live = cms.get("c-config").await.unwrap();
    assert!(!live.data.unwrap()["slurm.conf"].contains("another tool"));
    env.cleanup().await;
}

/// Renames the `slurmops/c` entries of NAME's managedFields to `slurmops`; how many.
async fn as_old_manager<K>(api: &Api<K>, name: &str) -> usize
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let live = api.get(name).await.unwrap();
    let mut fields = serde_json::to_value(live.meta().managed_fields.as_ref()).unwrap();
    let mut n = 0;
    for e in fields.as_array_mut().unwrap() {
        if e["manager"] == "slurmops/c" {
            e["manager"] = json!("slurmops");
            n += 1;
        }
    }
    let patch = json!({"metadata": {"managedFields": fields}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    n
}

/// The managers of the StatefulSet's managedFields entries.
async fn managers(sts: &Api<StatefulSet>, name: &str) -> Vec<(String, String)> {
    let live = sts.get(name).await.unwrap();
    live.metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            (
                e.manager.unwrap_or_default(),
                e.operation.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_cluster_applies_under_its_own_field_manager_and_takes_over_the_old_shared_one() {
    let env = TestEnv::new("manager").await;
    env.grant_slurmops_role().await;
    let repo = temp_repo();
    let w = env.name("w");
    let with_selector = format!("    - {{name: {w}, replicas: 0, nodeSelector: {{team: a}}}}\n");
    write(repo.path(), &small_cluster(&env.ns, &with_selector, ""));
    apply_ok(repo.path(), &["--wait", "0s"]);
    let sts: Api<StatefulSet> = Api::namespaced(env.client.clone(), &env.ns);
    let applied: Vec<_> = managers(&sts, &w)
        .await
        .into_iter()
        .filter(|(_, op)| op == "Apply")
        .map(|(m, _)| m)
        .collect();
    assert_eq!(applied, ["slurmops/c"]);

    // What a daemon of before left: every cluster's fields under the one name `slurmops`.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let renamed = as_old_manager(&sts, &w).await
        + as_old_manager(&cms, "c-config").await
        + as_old_manager(&cms, "c-applyset").await;
    assert_eq!(renamed, 3);
    assert!(
        managers(&sts, &w)
            .await
            .contains(&("slurmops".into(), "Apply".into()))
    );

    // git drops the nodeSelector: the next apply hands the old entries over and the field goes
    // (kept for good, owned by the old name, without the hand-over).
    let without = format!("    - {{name: {w}, replicas: 0}}\n");
    write(repo.path(), &small_cluster(&env.ns, &without, ""));
    let out = apply_ok(repo.path(), &["--wait", "0s"]);
    assert!(
        out.contains("handed over to this cluster's on 3 objects"),
        "{out}"
    );
    let live = sts.get(&w).await.unwrap();
    let selector = live.spec.unwrap().template.spec.unwrap().node_selector;
    assert_eq!(selector, None, "the field git dropped is still there");
    let all = managers(&sts, &w).await;
    assert!(
        all.iter().all(|(m, _)| m != "slurmops")
            && all.contains(&("slurmops/c".into(), "Apply".into())),
        "{all:?}"
    );
    // Done once: the apply after writes nothing.
    let out = apply_ok(repo.path(), &["--wait", "0s"]);
    assert_eq!(writes(&out), 0, "{out}");
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn backup_controllers_are_refused_unless_their_state_claim_is_read_write_many() {
    let env = TestEnv::new("stateclaim").await;
    env.grant_slurmops_role().await;
    let example = std::fs::read_to_string("examples/ha/cluster.yaml")
        .unwrap()
        .replace("namespace: slurm\n", &format!("namespace: {}\n", env.ns));
    let repo = temp_repo();
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let refused = |claim: &str, why: &str| {
        write(
            repo.path(),
            &example.replace(
                "existingClaim: slurmctld-state-rwx",
                &format!("existingClaim: {claim}"),
            ),
        );
        let (code, out, err) = slurmops(&["apply", repo.path().to_str().unwrap(), "--wait", "0s"]);
        assert_eq!(code, 1, "{out}{err}");
        assert!(
            err.contains(&format!("PersistentVolumeClaim {claim}"))
                && err.contains(why)
                && err.contains("ReadWriteMany"),
            "{err}"
        );
    };
    // No such claim; a ReadWriteOnce one: the backup could never mount the state.
    refused("state-missing", "which does not exist");
    // The plan of the live cluster says so too.
    let (code, out, err) = slurmops(&["plan", repo.path().to_str().unwrap(), "--cluster"]);
    assert!(
        code == 1
            && err.contains("PersistentVolumeClaim state-missing ")
            && err.contains("which does not exist"),
        "{code}: {out}{err}"
    );
    env.state_claim("state-rwo", "ReadWriteOnce").await;
    refused("state-rwo", "which is ReadWriteOnce");
    // Refused before the first write: not even the ApplySet parent exists.
    assert!(cms.get_opt("ha-applyset").await.unwrap().is_none());

    // A ReadWriteMany claim: applied.
    env.state_claim("state-rwx", "ReadWriteMany").await;
    write(
        repo.path(),
        &example.replace(
            "existingClaim: slurmctld-state-rwx",
            "existingClaim: state-rwx",
        ),
    );
    apply_ok(repo.path(), &["--wait", "0s"]);
    assert!(cms.get_opt("ha-applyset").await.unwrap().is_some());
    env.cleanup().await;
}
