//! Rendering and planning as a user sees them: golden output of the examples, determinism,
//! the committed schema, and plans for create / update / delete / replace with their exit codes.

use std::path::Path;
use std::process::Command;

use slurmops::cli::{objects_yaml, schema_text};
use slurmops::cluster::{ClusterFile, load};
use slurmops::plan::{Action, Side, format, plan};
use slurmops::render::{Object, Rendered, render};

fn example(dir: &str) -> (ClusterFile, String) {
    let f = format!("{dir}/cluster.yaml");
    let text = std::fs::read_to_string(&f).unwrap();
    (load(&f, &text).unwrap(), text)
}

fn load_text(text: &str) -> ClusterFile {
    load("cluster.yaml", text).unwrap_or_else(|d| panic!("{d:#?}"))
}

/// Compares with tests/golden/NAME; `UPDATE_GOLDEN=1` rewrites it (review the diff in git).
fn golden(name: &str, actual: &str) {
    let path = Path::new("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{} differs from the rendering; run UPDATE_GOLDEN=1 cargo test and review:\n{}",
        path.display(),
        slurmops::plan::unified(&expected, actual, "golden", "actual")
    );
}

#[test]
fn golden_rendering_of_the_examples() {
    for (dir, name) in [
        ("examples/repo", "repo"),
        ("examples/minimal", "minimal"),
        ("examples/quickstart", "quickstart"),
        ("examples/ha", "ha"),
        ("examples/gpu-checks", "gpu-checks"),
    ] {
        let r = render(&example(dir).0);
        golden(&format!("{name}.objects.yaml"), &objects_yaml(&r));
        let slurm: String = r
            .slurm
            .iter()
            .map(|(f, c)| format!("##### {f}\n{c}"))
            .collect();
        golden(&format!("{name}.slurm.txt"), &slurm);
    }
}

#[test]
fn rendering_is_byte_identical_across_runs() {
    let (_, text) = example("examples/repo");
    let first = objects_yaml(&render(&load_text(&text)));
    for _ in 0..5 {
        assert_eq!(objects_yaml(&render(&load_text(&text))), first);
    }
}

#[test]
fn committed_schema_is_current() {
    let committed = std::fs::read_to_string("schema/cluster.schema.json").unwrap_or_default();
    assert!(
        committed == schema_text(),
        "schema/cluster.schema.json is stale: run `cargo run -- schema > schema/cluster.schema.json`"
    );
}

/// The jobs the GPU example's active checks submit, as a GPU worker runs them (the wrapper
/// included), as `render --output-dir` writes them under jobs/ for sbatch: what a reviewer
/// reads to see the commands and thresholds, and what an operator runs by hand.
#[test]
fn golden_active_check_jobs_of_the_gpu_example() {
    let (c, _) = example("examples/gpu-checks");
    let jobs = slurmops::ops::render::probe_jobs(&c.spec);
    let text: String = jobs
        .iter()
        .map(|(file, script)| format!("##### jobs/{file}\n{script}"))
        .collect();
    assert!(text.contains("dcgmi diag -r 2"), "{text}");
    assert!(
        text.contains("all_reduce_perf -b 8M -e 1G -f 2 -g 8"),
        "{text}"
    );
    // The check's job takes the node whole, with its 8 GPUs, under the check's license (its cap).
    let (_, nccl) = jobs
        .iter()
        .find(|(f, _)| f == "check-nccl-h100.sbatch")
        .expect("the nccl check's job");
    for line in [
        "#SBATCH --exclusive\n",
        "#SBATCH --gres=gpu:8\n",
        "#SBATCH --nodelist=h100-0\n",
        "#SBATCH --licenses=",
    ] {
        assert!(nccl.contains(line), "{line}: {nccl}");
    }
    assert!(nccl.starts_with("#!/bin/bash\n#SBATCH "), "{nccl}");
    let (_, pairs) = jobs
        .iter()
        .find(|(f, _)| f == "check-ib-pairs-h100.sbatch")
        .expect("the pair check's job");
    assert!(
        pairs.contains("#SBATCH --nodes=2\n")
            && pairs.contains("#SBATCH --nodelist=h100-0,h100-1\n"),
        "{pairs}"
    );
    golden("gpu-checks.jobs.txt", &text);
}

#[test]
fn examples_carry_the_schema_modeline() {
    for f in [
        "examples/repo/cluster.yaml",
        "examples/minimal/cluster.yaml",
        "examples/ha/cluster.yaml",
        "examples/gpu-checks/cluster.yaml",
    ] {
        let first = std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        assert_eq!(
            first, "# yaml-language-server: $schema=../../schema/cluster.schema.json",
            "{f}"
        );
    }
}

#[test]
fn no_rendered_object_carries_the_database_password() {
    let (c, _) = example("examples/repo");
    let r = render(&c);
    let conf = r
        .get("ConfigMap", "research-slurmdbd")
        .unwrap()
        .body
        .pointer("/data/slurmdbd.conf")
        .unwrap()
        .as_str()
        .unwrap();
    assert!(
        conf.contains("StorageUser=slurm") && !conf.lines().any(|l| l.starts_with("StoragePass")),
        "slurmdbd.conf must not hold the password"
    );
    // It reaches slurmdbd.conf from a mounted file, never through the environment (where `ps e`
    // or a child process would see it).
    let dbd = r.get("StatefulSet", "research-accounting").unwrap();
    let pod = dbd.body.pointer("/spec/template/spec").unwrap();
    let pass = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "storage-pass")
        .expect("a volume of the password");
    assert_eq!(
        pass["projected"]["sources"][0]["secret"]["name"],
        "slurm-db"
    );
    let text = serde_json::to_string(pod).unwrap();
    assert!(!text.contains("secretKeyRef"), "{text}");
}

#[test]
fn only_settings_a_reconfigure_cannot_change_alter_the_daemons_pod_templates() {
    let (_, text) = example("examples/repo");
    let a = render(&load_text(&text));
    let template = |r: &Rendered, kind: &str, name: &str| {
        r.get(kind, name)
            .unwrap()
            .body
            .pointer("/spec/template")
            .cloned()
    };
    // A scheduling parameter: slurmctld reconfigures; no pod template changes.
    let b = render(&load_text(
        &text.replace("MinJobAge: 300", "MinJobAge: 600"),
    ));
    assert_ne!(a.slurm["slurm.conf"], b.slurm["slurm.conf"]);
    for (kind, name) in [
        ("StatefulSet", "research-controller"),
        ("Deployment", "research-restapi"),
    ] {
        assert_eq!(template(&a, kind, name), template(&b, kind, name), "{name}");
    }
    // An authentication setting: slurmctld and slurmrestd restart.
    let b = render(&load_text(&text.replace(
        "      SlurmctldParameters: [cloud_reg_addrs]\n",
        "      SlurmctldParameters: [cloud_reg_addrs]\n      AuthInfo: [cred_expire=200]\n",
    )));
    assert_ne!(
        template(&a, "StatefulSet", "research-controller"),
        template(&b, "StatefulSet", "research-controller")
    );
    assert_ne!(
        template(&a, "Deployment", "research-restapi"),
        template(&b, "Deployment", "research-restapi")
    );
    // Workers are configless: a slurm.conf change is a reconfigure, not a pod replacement.
    assert_eq!(
        template(&a, "StatefulSet", "h100"),
        template(&b, "StatefulSet", "h100")
    );
    assert_eq!(
        template(&a, "StatefulSet", "research-accounting"),
        template(&b, "StatefulSet", "research-accounting")
    );
}

fn plan_of(old: &str, new: &str) -> slurmops::plan::Plan {
    let (oc, nc) = (load_text(old), load_text(new));
    let (or, nr) = (render(&oc), render(&nc));
    plan(
        Some(Side {
            cluster: &oc,
            rendered: &or,
        }),
        Side {
            cluster: &nc,
            rendered: &nr,
        },
    )
}

#[test]
fn plan_from_empty_creates_everything() {
    let (c, _) = example("examples/minimal");
    let r = render(&c);
    let p = plan(
        None,
        Side {
            cluster: &c,
            rendered: &r,
        },
    );
    assert_eq!(p.count(Action::Create), r.objects.len());
    assert_eq!(p.slurm.partitions_added, vec!["debug".to_string()]);
}

#[test]
fn plan_without_changes_is_empty() {
    let (_, text) = example("examples/repo");
    let p = plan_of(&text, &text);
    assert!(!p.has_changes());
    assert!(format::text(&p, "x").starts_with("No changes"));
}

#[test]
fn image_change_updates_and_rolls_only_that_node_set() {
    let (_, text) = example("examples/repo");
    let new = text.replace(
        "    - name: cpu\n      replicas: 2\n",
        "    - name: cpu\n      replicas: 2\n      image: registry.example/slurmd:custom\n",
    );
    let p = plan_of(&text, &new);
    assert_eq!(p.changes.len(), 1, "{:#?}", p.changes);
    let c = &p.changes[0];
    assert_eq!(
        (c.action, c.kind.as_str(), c.name.as_str()),
        (Action::Update, "StatefulSet", "cpu")
    );
    assert!(
        c.diff
            .contains("+        image: registry.example/slurmd:custom"),
        "{}",
        c.diff
    );
    assert_eq!(p.slurm.node_sets_rolled.len(), 1);
    assert_eq!(p.slurm.node_sets_rolled[0].node_set, "cpu");
    assert_eq!(
        p.slurm.node_sets_rolled[0].because,
        vec!["container image".to_string()]
    );
    assert!(!p.slurm.controller_restarts);
}

#[test]
fn a_per_node_node_set_renders_a_revisioned_pod_template_and_plans_its_roll() {
    let (_, text) = example("examples/repo");
    let one = text.replace(
        "    - name: h100\n      replicas: 4\n",
        "    - name: h100\n      replicas: perNode\n",
    );
    let r = render(&load_text(&one));
    assert!(
        r.get("StatefulSet", "h100").is_none(),
        "no StatefulSet for perNode"
    );
    let t = r.get("PodTemplate", "h100").expect("a PodTemplate");
    let rev = t.body.pointer("/metadata/labels/slurmops.dev~1revision");
    assert!(rev.and_then(|v| v.as_str()).is_some_and(|v| v.len() == 16));
    // The pods made from it carry the revision rollouts compare.
    assert_eq!(
        rev,
        t.body
            .pointer("/template/metadata/labels/slurmops.dev~1revision")
    );
    // The same worker pod as the StatefulSet's.
    let sts = render(&load_text(&text));
    let sts = sts.get("StatefulSet", "h100").unwrap();
    assert_eq!(
        sts.body.pointer("/spec/template/spec"),
        t.body.pointer("/template/spec")
    );
    // A new image: a new revision, and the plan rolls every worker of the matching nodes.
    let two = one.replace(
        "    - name: h100\n      replicas: perNode\n",
        "    - name: h100\n      replicas: perNode\n      image: registry.example/slurmd:custom\n",
    )
    .replace("        maxUnavailable: 1\n        drainTimeout: 12h", "        maxUnavailable: 25%\n        drainTimeout: 12h");
    let r2 = render(&load_text(&two));
    let rev2 = r2
        .get("PodTemplate", "h100")
        .and_then(|t| t.body.pointer("/metadata/labels/slurmops.dev~1revision"));
    assert_ne!(rev, rev2);
    let p = plan_of(&one, &two);
    assert_eq!(p.slurm.node_sets_rolled.len(), 1);
    let roll = &p.slurm.node_sets_rolled[0];
    assert_eq!((roll.node_set.as_str(), roll.workers), ("h100", None));
    assert!(roll.because.contains(&"container image".to_string()));
    let text_plan = format::text(&p, "x");
    assert!(
        text_plan.contains("NodeSet h100: every worker (one per matching Kubernetes node) drained and replaced, at most 25% at a time"),
        "{text_plan}"
    );
    // From a count to perNode: said in Slurm's terms.
    let p = plan_of(&text, &one);
    let scaled = format::text(&p, "x");
    assert!(
        scaled.contains("NodeSet h100: 4 -> perNode workers"),
        "{scaled}"
    );
}

#[test]
fn a_partition_change_reconfigures_slurmctld_and_restarts_nothing() {
    let (_, text) = example("examples/repo");
    let new = text.replace("maxTime: UNLIMITED", "maxTime: \"7-00:00:00\"");
    assert_ne!(
        new, text,
        "the example has a partition with maxTime UNLIMITED"
    );
    let p = plan_of(&text, &new);
    assert!(!p.slurm.controller_restarts);
    assert!(p.slurm.controller_reconfigures);
    // Only the ConfigMap changes: no pod template at all.
    let changed: Vec<String> = p
        .changes
        .iter()
        .map(|c| format!("{} {}", c.kind, c.name))
        .collect();
    assert_eq!(changed, ["ConfigMap research-config"]);
    assert!(
        p.slurm.node_sets_rolled.is_empty(),
        "{:?}",
        p.slurm.node_sets_rolled
    );
    let c = slurmops::cluster::load("cluster.yaml", &text).unwrap();
    let all: Vec<String> = c.spec.node_sets.iter().map(|n| n.name.clone()).collect();
    assert_eq!(p.slurm.node_sets_untouched, all);
    // Only the controller's objects (config and its pod template) change; no worker StatefulSet.
    for ch in &p.changes {
        assert!(
            !(ch.kind == "StatefulSet" && all.contains(&ch.name)),
            "worker StatefulSet {} changes",
            ch.name
        );
    }
    let text_out = slurmops::plan::format::text(&p, "test");
    assert!(
        text_out.contains("slurmctld reconfigures in place, no restart")
            && !text_out.contains("slurmctld restarts"),
        "{text_out}"
    );
    assert!(
        text_out.contains(&format!(
            "workers not restarted (configless: slurmd reloads the configuration from slurmctld): NodeSets {}",
            all.join(", ")
        )),
        "{text_out}"
    );
}

#[test]
fn a_setting_a_reconfigure_cannot_change_restarts_slurmctld_and_the_plan_names_it() {
    let (_, text) = example("examples/minimal");
    let ha = text.replace(
        "  nodeSets:\n",
        "  controller:\n    ha: {backups: 1}\n    persistence: {existingClaim: state}\n  nodeSets:\n",
    );
    let p = plan_of(&text, &ha);
    assert!(p.slurm.controller_restarts && !p.slurm.controller_reconfigures);
    assert_eq!(
        p.slurm.restart_because,
        ["SlurmctldHost (listening address)"]
    );
    let out = slurmops::plan::format::text(&p, "test");
    assert!(
        out.contains("slurmctld restarts (SlurmctldHost (listening address) changed, which a reconfigure cannot change)"),
        "{out}"
    );
}

#[test]
fn a_slurmctld_restart_says_whether_the_scheduler_goes_down() {
    // A new slurmctld image: a restart.
    let image = |text: &str| {
        text.replace(
            "  auth:\n",
            "  images: {slurmctld: \"registry.example/slurmctld:24.11-fix\"}\n  auth:\n",
        )
    };
    let (_, single) = example("examples/minimal");
    let out = slurmops::plan::format::text(&plan_of(&single, &image(&single)), "test");
    assert!(
        out.contains(
            "the scheduler is down until it is back: sbatch, srun and squeue fail meanwhile"
        ),
        "{out}"
    );
    // With a backup before and after, the controllers roll one at a time and clients wait.
    let (_, ha) = example("examples/ha");
    let p = plan_of(&ha, &image(&ha));
    assert!(p.slurm.controller_restarts, "{:?}", p.slurm);
    assert_eq!(p.slurm.backups_through_restart, 1);
    let out = slurmops::plan::format::text(&p, "test");
    assert!(
        out.contains("the StatefulSet replaces the controllers one at a time, the 1 backup first"),
        "{out}"
    );
    assert!(!out.contains("the scheduler is down"), "{out}");
    // Adding the backup is itself a restart with none running yet.
    let out = slurmops::plan::format::text(
        &plan_of(&single, &ha.replace("name: ha\n", "name: mini\n")),
        "test",
    );
    assert!(out.contains("the scheduler is down"), "{out}");
}

#[test]
fn controllers_behind_one_address_render_slurmctld_addr_an_in_control_readiness_and_a_roll_by_slurmops()
 {
    let (_, ha) = example("examples/ha");
    let one = ha.replace(
        "      backups: 1\n",
        "      backups: 1\n      serviceAddress: true\n",
    );
    assert_ne!(one, ha);
    let r = render(&load_text(&one));
    // Clients' one address: the controllers' ClusterIP Service, which sends them to Ready pods only.
    assert!(
        r.slurm["slurm.conf"].contains("\nSlurmctldAddr=ha-controller.slurm.svc.cluster.local\n"),
        "{}",
        r.slurm["slurm.conf"]
    );
    assert!(!render(&load_text(&ha)).slurm["slurm.conf"].contains("SlurmctldAddr"));
    let svc = &r.get("Service", "ha-controller").unwrap().body;
    assert!(svc["spec"]["clusterIP"].is_null(), "{svc}");
    assert!(svc["spec"]["publishNotReadyAddresses"].is_null(), "{svc}");
    // Ready only in control: the exec probe reads the heartbeat in the shared state directory.
    let sts = &r.get("StatefulSet", "ha-controller").unwrap().body;
    let main = &sts["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(main["name"], "slurmctld");
    let probe = main["readinessProbe"]["exec"]["command"][2]
        .as_str()
        .unwrap();
    assert!(
        probe.contains("heartbeat") && probe.contains("[ \"$inx\" -eq $((me - 1)) ]"),
        "{probe}"
    );
    // A standby is never Ready: the pods are made in parallel, slurmops replaces them, and one
    // Ready replica is the StatefulSet ready.
    assert_eq!(sts["spec"]["podManagementPolicy"], "Parallel");
    assert_eq!(sts["spec"]["updateStrategy"]["type"], "OnDelete");
    assert_eq!(
        sts["metadata"]["annotations"]["slurmops.dev/ready-replicas"],
        "1"
    );
    // The plan says who replaces the controllers; turning it on recreates the StatefulSet
    // (podManagementPolicy cannot change in place).
    let p = plan_of(
        &one,
        &one.replace("    ha:\n", "    ha:\n      # x\n").replace(
            "  auth:\n",
            "  images: {slurmctld: \"registry.example/slurmctld:24.11-fix\"}\n  auth:\n",
        ),
    );
    let out = format::text(&p, "test");
    assert!(out.contains("slurmops replaces the controllers one at a time, the 1 standby backup first and the controller in control last"), "{out}");
    let p = plan_of(&ha, &one);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("podManagementPolicy") && w.contains("allowRecreate")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn removing_a_node_set_deletes_its_objects_and_warns_about_draining() {
    let (_, text) = example("examples/minimal");
    let two = text.replace(
        "  partitions:\n",
        "    - {name: big, replicas: 1}\n  partitions:\n",
    );
    let p = plan_of(&two, &text);
    let deleted: Vec<_> = p
        .changes
        .iter()
        .filter(|c| c.action == Action::Delete)
        .map(|c| format!("{}/{}", c.kind, c.name))
        .collect();
    assert_eq!(deleted, vec!["PodDisruptionBudget/big", "StatefulSet/big"]);
    assert_eq!(p.slurm.node_sets_removed, vec!["big".to_string()]);
    assert!(p.warnings.iter().any(|w| w.contains("drained")));
    assert!(
        p.slurm
            .config_diffs
            .iter()
            .any(|d| d.file == "slurm.conf" && d.diff.contains("-NodeSet=big Feature=big"))
    );
}

#[test]
fn immutable_field_change_is_a_replace_with_a_warning_that_depends_on_policy() {
    let (_, text) = example("examples/minimal");
    let vct = "      volumeClaimTemplates:\n        - metadata: {name: scratch}\n          spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}\n      volumeMounts: [{name: scratch, mountPath: /scratch}]\n";
    let new = text.replace("      memory: 1Gi\n", &format!("      memory: 1Gi\n{vct}"));
    let p = plan_of(&text, &new);
    let sts = p
        .changes
        .iter()
        .find(|c| c.kind == "StatefulSet" && c.name == "cpu")
        .unwrap();
    assert_eq!(sts.action, Action::Replace);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("volumeClaimTemplates") && w.contains("apply will refuse")),
        "{:#?}",
        p.warnings
    );
    let allowed = new.replace(
        "  partitions:\n",
        "  policy: {allowRecreate: true}\n  partitions:\n",
    );
    let p = plan_of(&text, &allowed);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("orphan propagation") && w.contains("pods keep running")),
        "{:#?}",
        p.warnings
    );
}

#[test]
fn secret_values_are_masked_in_plans() {
    let (c, _) = example("examples/minimal");
    let mut r = render(&c);
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("s".into()),
            namespace: Some("slurm".into()),
            ..Default::default()
        },
        string_data: Some([("password".to_string(), "hunter2-very-secret".to_string())].into()),
        ..Default::default()
    };
    r.objects.push(Object {
        api_version: "v1".into(),
        kind: "Secret".into(),
        namespace: "slurm".into(),
        name: "s".into(),
        body: serde_json::to_value(&secret).unwrap(),
    });
    let p = plan(
        None,
        Side {
            cluster: &c,
            rendered: &r,
        },
    );
    for out in [
        format::text(&p, "x"),
        format::markdown(&p, "x"),
        format::json(&p),
    ] {
        assert!(
            !out.contains("hunter2"),
            "a secret value leaked into a plan"
        );
        assert!(out.contains("sensitive value hidden"));
    }
}

#[test]
fn autoscale_and_partition_changes_are_summarised() {
    let (_, text) = example("examples/repo");
    let new = text.replace("max: 16", "max: 32").replace(
        "    - name: all\n      nodeSets: [ALL]\n      maxTime: UNLIMITED\n",
        "",
    );
    let p = plan_of(&text, &new);
    assert_eq!(p.slurm.partitions_removed, vec!["all".to_string()]);
    assert!(
        p.slurm
            .autoscale_changes
            .iter()
            .any(|c| c.contains("max 16") && c.contains("max 32"))
    );
    // Partitions and MaxNodeCount: slurmctld reconfigures.
    assert!(!p.slurm.controller_restarts && p.slurm.controller_reconfigures);
}

fn slurmops(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

#[test]
fn cli_exit_codes_and_planning_between_git_revisions() {
    let repo = tempfile::tempdir().unwrap();
    let d = repo.path();
    let (_, text) = example("examples/minimal");
    git(d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("cluster.yaml"), &text).unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-qm", "one"]);
    std::fs::write(
        d.join("cluster.yaml"),
        text.replace("replicas: 2", "replicas: 3"),
    )
    .unwrap();
    git(d, &["commit", "-qam", "two"]);
    // The work tree is changed afterwards: --base/--head must read git objects, not files.
    std::fs::write(d.join("cluster.yaml"), "garbage: [").unwrap();

    let (code, out, _) = slurmops(
        &[
            "plan", ".", "--base", "HEAD~1", "--head", "HEAD", "--format", "json",
        ],
        d,
    );
    assert_eq!(code, 2, "changes exit 2");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["changes"][0]["action"], "update");
    assert_eq!(v["changes"][0]["kind"], "StatefulSet");
    assert_eq!(v["slurm"]["scaled"][0]["to"], 3);

    let (code, out, _) = slurmops(&["plan", ".", "--base", "HEAD", "--head", "HEAD"], d);
    assert_eq!(
        (code, out.starts_with("No changes")),
        (0, true),
        "no change exits 0"
    );

    let (code, _, err) = slurmops(&["plan", "."], d);
    assert_eq!(code, 1, "invalid work tree exits 1");
    assert!(err.contains("cluster.yaml:2:1: error: (yaml)"), "{err}");

    let (code, _, err) = slurmops(&["plan", ".", "--base", "no-such-rev"], d);
    assert_eq!(code, 1);
    assert!(err.contains("unknown revision"), "{err}");

    let (code, _, err) = slurmops(&["validate", "."], d);
    assert_eq!(code, 1);
    assert!(err.contains("nothing was changed"));
}

#[test]
fn cli_render_writes_one_file_per_object_and_the_slurm_files() {
    let out = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (code, _, _) = slurmops(
        &[
            "render",
            "examples/minimal",
            "--output-dir",
            out.path().to_str().unwrap(),
        ],
        root,
    );
    assert_eq!(code, 0);
    assert!(out.path().join("slurm/slurm.conf").exists());
    let yamls = std::fs::read_dir(out.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "yaml")
        })
        .count();
    assert_eq!(yamls, render(&example("examples/minimal").0).objects.len());
}

/// A `slurmVersion` change is planned as an in-place upgrade in Slurm's order; a downgrade or a
/// jump past the window is refused (exit 1) naming the allowed path.
#[test]
fn a_slurm_version_change_is_planned_as_an_ordered_upgrade_and_downgrades_are_refused() {
    let (_, text) = example("examples/minimal");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |name: &str, version: &str| {
        let t = text.replace(
            "slurmVersion: \"24.11\"",
            &format!("slurmVersion: \"{version}\""),
        );
        std::fs::create_dir_all(d.join(name)).unwrap();
        std::fs::write(d.join(name).join("cluster.yaml"), t).unwrap();
    };
    write("old", "24.11");
    // slurmctld's state is converted in place: with no volume for a copy, refused.
    write("new", "26.05");
    let (code, out, _) = slurmops(&["plan", "new", "--from", "old/cluster.yaml"], d);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("REFUSED: Slurm 24.11 → 26.05 converts slurmctld's state in place, which cannot be undone, and spec.backup names no volume for copies"),
        "{out}"
    );
    let t = std::fs::read_to_string(d.join("new/cluster.yaml")).unwrap();
    let t = t.replace(
        "slurmVersion: \"26.05\"",
        "slurmVersion: \"26.05\"\n  backup: {claim: slurm-copies}",
    );
    std::fs::write(d.join("new/cluster.yaml"), t).unwrap();
    let (code, out, _) = slurmops(&["plan", "new", "--from", "old/cluster.yaml"], d);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("* Slurm upgrade 24.11 → 26.05: slurmctld (a copy of its state to PersistentVolumeClaim slurm-copies (mini/slurmctld/) first, state kept: running and pending jobs stay), then slurmrestd, then workers, drain-before-replace (NodeSets cpu): never newer than slurmctld; each step waits until the one before is healthy"),
        "{out}"
    );
    let (code, md, _) = slurmops(
        &[
            "plan",
            "new",
            "--from",
            "old/cluster.yaml",
            "--format",
            "markdown",
        ],
        d,
    );
    assert_eq!(code, 2);
    assert!(
        md.contains("- Slurm upgrade 24.11 → 26.05: slurmctld"),
        "{md}"
    );
    let (code, json, _) = slurmops(
        &[
            "plan",
            "new",
            "--from",
            "old/cluster.yaml",
            "--format",
            "json",
        ],
        d,
    );
    assert_eq!(code, 2);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["slurm"]["upgrade"]["from"], "24.11");
    assert_eq!(v["slurm"]["upgrade"]["steps"].as_array().unwrap().len(), 3);

    let (code, out, err) = slurmops(&["plan", "old", "--from", "new/cluster.yaml"], d);
    assert_eq!(code, 1, "a downgrade is an error: {out}");
    assert!(
        out.contains("REFUSED: Slurm 26.05 → 24.11 is a downgrade"),
        "{out}"
    );
    assert!(err.contains("downgrade"), "{err}");
}

#[test]
fn a_user_affinity_is_added_to_the_one_worker_per_node_rule() {
    let (_, text) = example("examples/minimal");
    let with = text.replace(
        "      memory: 1Gi\n",
        "      memory: 1Gi
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{key: pool, operator: In, values: [cpu]}]
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: noisy}}
              topologyKey: kubernetes.io/hostname
",
    );
    let r = render(&load_text(&with));
    let affinity = r
        .get("StatefulSet", "cpu")
        .unwrap()
        .body
        .pointer("/spec/template/spec/affinity")
        .cloned()
        .unwrap();
    let anti = affinity
        .pointer("/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution")
        .and_then(|v| v.as_array())
        .unwrap();
    // slurmops' own rule first (one slurmd per Kubernetes node), then the user's.
    assert_eq!(anti.len(), 2, "{affinity:#}");
    assert_eq!(
        anti[0].pointer("/labelSelector/matchLabels/app.kubernetes.io~1component"),
        Some(&serde_json::json!("worker")),
        "{affinity:#}"
    );
    assert_eq!(
        anti[1].pointer("/labelSelector/matchLabels/app"),
        Some(&serde_json::json!("noisy"))
    );
    assert_eq!(
        affinity.pointer(
            "/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0/key"
        ),
        Some(&serde_json::json!("pool"))
    );
}

#[test]
fn config_files_reach_slurmctld_and_a_new_health_check_reaches_workers_without_a_restart() {
    let (_, text) = example("examples/repo");
    let r = render(&load_text(&text));
    let ctl = r.get("StatefulSet", "research-controller").unwrap();
    let sources = ctl
        .body
        .pointer("/spec/template/spec/volumes/0/projected/sources")
        .unwrap()
        .to_string();
    // Inline files come from the slurm ConfigMap, referenced ones from their own ConfigMap.
    assert_eq!(
        r.get("ConfigMap", "research-config").unwrap().body["data"]["plugstack.conf"],
        r.slurm["plugstack.conf"].as_str()
    );
    assert!(
        sources.contains(r#"{"key":"plugstack.conf","mode":288,"path":"plugstack.conf"}"#),
        "{sources}"
    );
    assert!(
        sources.contains(r#""configMap":{"items":[{"key":"oci.conf","mode":288,"path":"oci.conf"}],"name":"slurm-oci","optional":false}"#),
        "{sources}"
    );
    // The health check is not slurmctld's: only the workers mount it.
    assert!(!sources.contains("health-check.sh"));
    let worker = r.get("StatefulSet", "h100").unwrap().body.to_string();
    assert!(
        worker.contains(r#"{"key":"health-check.sh","mode":365,"path":"health-check.sh"}"#),
        "{worker}"
    );
    assert!(r.slurm["slurm.conf"].contains("HealthCheckProgram=/etc/slurm/health-check.sh\n"));

    // A new version of the script: the ConfigMap changes, no pod template does.
    let p = plan_of(
        &text,
        &text.replace(
            "reason=\"health check: nvidia-smi failed\"",
            "reason=\"GPU lost\"",
        ),
    );
    let changed: Vec<String> = p
        .changes
        .iter()
        .map(|c| format!("{} {}", c.kind, c.name))
        .collect();
    assert_eq!(changed, ["ConfigMap research-config"]);
    assert!(!p.slurm.controller_restarts && p.slurm.node_sets_rolled.is_empty());

    // A config file's new content: slurmctld reconfigures (no restart, no worker replaced), and
    // the plan shows the file's diff.
    let new = text.replace(
        "runtime_path=/run/pyxis",
        "runtime_path=/run/pyxis execute_entrypoint=0",
    );
    let p = plan_of(&text, &new);
    assert!(!p.slurm.controller_restarts && p.slurm.controller_reconfigures);
    assert!(p.slurm.node_sets_rolled.is_empty());
    let out = format::text(&p, "test");
    assert!(
        out.contains("  plugstack.conf:\n    @@ -1,2 +1,2 @@\n")
            && out.contains("\n    +optional /usr/lib/x86_64-linux-gnu/slurm/spank_pyxis.so runtime_path=/run/pyxis execute_entrypoint=0\n"),
        "{out}"
    );

    // Another referenced ConfigMap is another file: slurmctld restarts to read it.
    let p = plan_of(
        &text,
        &text.replace("name: slurm-oci", "name: slurm-oci-v2"),
    );
    assert!(p.slurm.controller_restarts);
}

#[test]
fn container_security_contexts_and_sidecars_land_where_they_belong() {
    let (_, text) = example("examples/minimal");
    let with = text
        .replace(
            "      memory: 1Gi\n",
            "      memory: 1Gi
      privileged: false
      containerSecurityContext:
        capabilities: {add: [SYS_ADMIN]}
",
        )
        .replace(
            "  nodeSets:\n",
            "  controller:
    podTemplate:
      extraContainers: [{name: log-shipper, image: fluent-bit}]
  nodeSets:\n",
        );
    let r = render(&load_text(&with));
    let worker = r.get("StatefulSet", "cpu").unwrap();
    assert_eq!(
        worker
            .body
            .pointer("/spec/template/spec/containers/0/securityContext"),
        Some(&serde_json::json!({"capabilities": {"add": ["SYS_ADMIN"]}}))
    );
    // Privileged by default, and kept with the user's additions.
    let privileged = render(&load_text(&with.replace("      privileged: false\n", "")));
    assert_eq!(
        privileged
            .get("StatefulSet", "cpu")
            .unwrap()
            .body
            .pointer("/spec/template/spec/containers/0/securityContext"),
        Some(&serde_json::json!({"capabilities": {"add": ["SYS_ADMIN"]}, "privileged": true}))
    );
    // A control-plane sidecar is held to Pod Security "restricted" like slurmctld.
    let ctl = r.get("StatefulSet", "mini-controller").unwrap();
    let containers = ctl
        .body
        .pointer("/spec/template/spec/containers")
        .and_then(|c| c.as_array())
        .unwrap();
    let names: Vec<&str> = containers
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // slurmctld, slurmops' own reconfigure sidecar, then the user's.
    assert_eq!(names, ["slurmctld", "reconfigure", "log-shipper"]);
    for sidecar in &containers[1..] {
        assert_eq!(
            sidecar["securityContext"]["allowPrivilegeEscalation"],
            false
        );
        assert_eq!(sidecar["securityContext"]["capabilities"]["drop"][0], "ALL");
    }
}

#[test]
fn slurm_metrics_get_a_scrape_service_a_service_monitor_and_a_network_path() {
    let (_, text) = example("examples/repo");
    let r = render(&load_text(&text));
    let svc = &r.get("Service", "research-metrics").unwrap().body;
    assert_eq!(
        svc["metadata"]["annotations"]["prometheus.io/scrape"],
        "true"
    );
    assert_eq!(svc["metadata"]["annotations"]["prometheus.io/port"], "6817");
    assert_eq!(
        svc["metadata"]["annotations"]["prometheus.io/path"],
        "/metrics/nodes"
    );
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 6817);
    assert_eq!(
        svc["spec"]["selector"]["app.kubernetes.io/component"],
        "controller"
    );
    let sm = &r.get("ServiceMonitor", "research-metrics").unwrap().body;
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(
        sm["spec"]["selector"]["matchLabels"],
        svc["metadata"]["labels"]
    );
    let paths: Vec<&str> = sm["spec"]["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, slurmops::render::metrics::ENDPOINTS);
    // Prometheus' namespace reaches slurmctld's port through the NetworkPolicy.
    let np = &r.get("NetworkPolicy", "research-controller").unwrap().body;
    assert_eq!(
        np["spec"]["ingress"][0]["from"][1]["namespaceSelector"]["matchExpressions"][0]["values"],
        serde_json::json!(["monitoring"])
    );
    // Where the Prometheus Operator is not installed, apply refuses before touching anything.
    let err = slurmops::apply::check_served(false, &r)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ServiceMonitor/research-metrics")
            && err.contains("monitoring.coreos.com/v1")
            && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(slurmops::apply::check_served(true, &r).is_ok());
    // Metrics off: neither object.
    let off = text.replace(
        "      enabled: true\n      serviceMonitor: {labels: {release: prometheus}}\n",
        "      enabled: false\n",
    );
    assert_ne!(off, text);
    let off = render(&load_text(&off));
    assert!(off.get("Service", "research-metrics").is_none());
    assert!(off.get("ServiceMonitor", "research-metrics").is_none());
}

/// A pull request that changes the H100 workers' pod template, under their canary: the plan
/// says which worker goes first, how it is validated and what follows, in all three formats.
#[test]
fn a_rollout_under_a_canary_is_planned_canary_first() {
    let (_, text) = example("examples/repo");
    let head_text = text.replace("dcgm-exporter:4.2.3-4.1.3", "dcgm-exporter:4.2.4-4.1.3");
    assert_ne!(head_text, text, "the edit applies to the example");
    let p = plan_of(&text, &head_text);
    let t = format::text(&p, "cluster gpu (from main)");
    assert!(
        t.contains("NodeSet h100: canary: 1 worker (an idle one first) replaced first and validated by the built-in gpu check (a job on each, timeout 10m), then 3 more workers; a failed validation, or a canary not Ready and registered within 30m, halts the rollout with the canaries drained"),
        "{t}"
    );
    golden("canary.plan.txt", &t);
    golden(
        "canary.plan.md",
        &format::markdown(&p, "cluster gpu (from main)"),
    );
    golden("canary.plan.json", &format::json(&p));
}

/// A pull request that raises a check's threshold and adds one: the plan says what each runs,
/// on how many workers, how many at once, when, and what a failure does; changing a check
/// touches no worker, adding the first that holds new workers rolls the NodeSet.
#[test]
fn active_checks_are_planned_with_their_workers_cap_schedule_and_failure() {
    let (_, text) = example("examples/gpu-checks");
    let head_text = text.replace("minValue: 350", "minValue: 380");
    assert_ne!(head_text, text, "the edit applies to the example");
    let p = plan_of(&text, &head_text);
    let t = format::text(&p, "cluster gpu (from main)");
    assert!(
        t.contains("check nccl changed: the built-in nccl check, a figure of at least 380 GB/s on NodeSet h100 (16 workers), at most 8 at once, each job up to 10m; on each new worker before it takes users' jobs, and at 0 4 * * Sun (Europe/Amsterdam) on idle workers; a failure drains the worker until the check passes again"),
        "{t}"
    );
    assert!(
        !t.contains("drained and replaced"),
        "a threshold rolls no worker:\n{t}"
    );
    golden("checks.plan.txt", &t);
    golden("checks.plan.json", &format::json(&p));
    // Against the plan's time (Friday 2026-11-27 12:00 UTC): when each changed check next runs.
    let mut timed = p.clone();
    slurmops::plan::at(&mut timed, &load_text(&head_text), 1_795_780_800);
    let t = format::text(&timed, "cluster gpu (from main)");
    assert!(
        t.contains("on idle workers; a failure drains the worker until the check passes again; its next scheduled run: Sun 2026-11-29 04:00 Europe/Amsterdam (2026-11-29T03:00:00Z)"),
        "{t}"
    );
    // The first check on a NodeSet: its new workers register drained, so the NodeSet rolls.
    let start = text.find("    activeChecks:").unwrap();
    let end = text.find("\n  nodeSets:").unwrap() + 1;
    let without = format!("{}{}", &text[..start], &text[end..]);
    let without = without.replace("  policy:\n", "");
    let p = plan_of(&without, &text);
    let t = format::text(&p, "cluster gpu (from main)");
    assert!(t.contains("check gpu-diag added: the built-in gpu check on NodeSet h100 (16 workers), at most 8 at once"), "{t}");
    assert!(t.contains("NodeSet h100: a new worker now registers drained until its checks pass; its workers are replaced for it"), "{t}");
    assert!(
        t.contains("NodeSet h100: 16 workers drained and replaced"),
        "{t}"
    );
}

/// A pull request that changes a NodeSet that waits for a maintenance window: the plan says when
/// the next window opens, counted from the plan's time, and the reservation that holds jobs back.
#[test]
fn a_rollout_waiting_for_a_window_is_planned_with_its_next_window() {
    let (_, text) = example("examples/repo");
    let windowed = |t: &str| {
        t.replace(
            "        onTimeout: wait\n",
            "        onTimeout: wait\n        window: required\n",
        )
        .replace(
            "  nodeSets:\n",
            "  policy:\n    maintenanceWindows:\n      - {schedule: \"0 2 * * Sat\", duration: 4h, timeZone: Europe/Paris}\n  nodeSets:\n",
        )
    };
    let base_text = windowed(&text);
    assert_ne!(base_text, text, "the edits apply to the example");
    let head_text = base_text.replace("dcgm-exporter:4.2.3-4.1.3", "dcgm-exporter:4.2.4-4.1.3");
    let mut p = plan_of(&base_text, &head_text);
    let head = load_text(&head_text);
    // Tuesday 2026-11-24 10:00 UTC; the window opens Saturday 02:00 in Paris (01:00 UTC).
    slurmops::plan::at(&mut p, &head, 1_795_514_400);
    let t = format::text(&p, "cluster gpu (from main)");
    assert!(
        t.contains("NodeSet h100: waits for a maintenance window (no worker drains outside one): next Sat 2026-11-28 02:00–06:00 Europe/Paris (2026-11-28T01:00:00Z – 2026-11-28T05:00:00Z, in 3d 15h 0m); reservation slurmops-maint-h100"),
        "{t}"
    );
    golden("window.plan.txt", &t);
    // Inside the window (Saturday 03:00 in Paris), the plan says until when it stays open.
    let mut inside = p.clone();
    slurmops::plan::at(&mut inside, &head, 1_795_831_200);
    let t_inside = format::text(&inside, "cluster gpu (from main)");
    assert!(
        t_inside.contains("a window is open now, until Sat 2026-11-28 06:00 Europe/Paris (2026-11-28T05:00:00Z); reservation"),
        "{t_inside}"
    );
    golden(
        "window.plan.md",
        &format::markdown(&p, "cluster gpu (from main)"),
    );
    golden("window.plan.json", &format::json(&p));
}

/// Under `policy.controlPlaneWindow: required`, a setting that restarts slurmctld is planned for
/// the next window; a reconfigure is not held.
#[test]
fn a_slurmctld_restart_under_a_control_plane_window_is_planned_for_the_next_window() {
    let (_, text) = example("examples/repo");
    let base_text = text.replace(
        "  nodeSets:\n",
        "  policy:\n    maintenanceWindows:\n      - {schedule: \"0 2 * * Sat\", duration: 4h}\n    controlPlaneWindow: required\n  nodeSets:\n",
    );
    assert_ne!(base_text, text, "the edit applies to the example");
    let plan_at = |head_text: &str| {
        let mut p = plan_of(&base_text, head_text);
        // Tuesday 2026-11-24 10:00 UTC.
        slurmops::plan::at(&mut p, &load_text(head_text), 1_795_514_400);
        p
    };
    let restart = base_text.replace(
        "      SlurmctldParameters: [cloud_reg_addrs]\n",
        "      SlurmctldParameters: [cloud_reg_addrs]\n      AuthInfo: [cred_expire=200]\n",
    );
    let p = plan_at(&restart);
    let t = format::text(&p, "cluster gpu (from main)");
    assert!(
        t.contains("slurmctld restarts only inside a maintenance window (policy.controlPlaneWindow): next Sat 2026-11-28 02:00–06:00 UTC (in 3d 16h 0m)"),
        "{t}"
    );
    let m = format::markdown(&p, "cluster gpu (from main)");
    assert!(
        m.contains("slurmctld restarts only inside a maintenance window"),
        "{m}"
    );
    let j: serde_json::Value = serde_json::from_str(&format::json(&p)).unwrap();
    assert_eq!(
        j["slurm"]["control_plane_window"]["next"],
        serde_json::json!([1_795_831_200, 1_795_845_600]),
        "{j}"
    );
    let reconfigure = base_text.replace("MinJobAge: 300", "MinJobAge: 600");
    assert_ne!(reconfigure, base_text);
    let t = format::text(&plan_at(&reconfigure), "x");
    assert!(
        t.contains("reconfigures in place") && !t.contains("maintenance window"),
        "{t}"
    );
}

/// A pull request that changes QOS, accounts and users: the plan says it in Slurm's words, in
/// the order apply makes the changes, in all three formats.
#[test]
fn an_accounting_change_is_planned_in_slurms_words() {
    let (base, text) = example("examples/repo");
    let head_text = text
        .replace("gres/gpu=16, maxWall", "gres/gpu=32, maxWall")
        .replace(
            "      - name: alice\n        accounts: [{name: vision}]\n",
            "      - name: alice\n        accounts: [{name: vision}]\n      - name: carol\n        accounts: [{name: research, limits: {maxJobs: 2}}]\n",
        )
        .replace("        adminLevel: Operator\n", "")
        .replace(
            "          - {name: vision, qos: [gpu-high], defaultQOS: gpu-high, limits: {maxJobs: 4}}\n",
            "",
        );
    assert_ne!(head_text, text, "the edits apply to the example");
    let head = load_text(&head_text);
    let (rb, rh) = (render(&base), render(&head));
    let p = plan(
        Some(Side {
            cluster: &base,
            rendered: &rb,
        }),
        Side {
            cluster: &head,
            rendered: &rh,
        },
    );
    assert!(p.has_changes(), "accounting changes are changes (exit 2)");
    let lines = p.slurm.accounting.lines();
    assert_eq!(
        lines,
        [
            "QOS gpu-high: MaxTRESPerUser gres/gpu=16 → gres/gpu=32",
            "account research: +user carol (MaxJobs=2)",
            "user bob: AdminLevel Operator → None",
            "user carol added (AdminLevel=None, DefaultAccount=research)",
            "account vision: -user bob",
        ],
        "QOS first, then associations, then user settings; removals last"
    );
    golden(
        "accounting.plan.txt",
        &format::text(&p, "cluster gpu (from main)"),
    );
    golden(
        "accounting.plan.md",
        &format::markdown(&p, "cluster gpu (from main)"),
    );
    golden("accounting.plan.json", &format::json(&p));
}

#[test]
fn on_slurm_24_11_a_windowed_cluster_gives_slurmctld_a_sidecar_that_makes_its_reservations() {
    let (_, text) = example("examples/minimal");
    let plain = render(&load_text(&text));
    let windowed_text = text
        .replace(
            "  nodeSets:\n",
            "  policy:\n    maintenanceWindows: [{schedule: \"0 2 * * Sat\", duration: 4h}]\n  nodeSets:\n",
        )
        .replace("      memory: 1Gi\n", "      memory: 1Gi\n      update: {window: required}\n");
    assert_ne!(windowed_text, text, "the edits apply to the example");
    let windowed = render(&load_text(&windowed_text));
    let sidecar = |r: &slurmops::render::Rendered| {
        let ctl = &r.get("StatefulSet", "mini-controller").unwrap().body;
        let containers = ctl["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        let c = containers
            .iter()
            .find(|c| c["name"] == "reconfigure")
            .unwrap();
        (
            c["command"][2].as_str().unwrap().to_string(),
            c["volumeMounts"].clone(),
            ctl["spec"]["template"]["spec"]["volumes"].clone(),
        )
    };
    // Without windows, or on a release whose slurmrestd makes reservations: nothing changes
    // for slurmctld (its pod template, hence no restart).
    let (script, mounts, _) = sidecar(&plain);
    assert!(!script.contains("reserve"), "{script}");
    let names: Vec<&serde_json::Value> = mounts
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["name"])
        .collect();
    assert_eq!(names, ["etc-slurm", "run-slurmctld"]);
    assert!(plain.get("ConfigMap", "mini-maintenance").is_none());
    let on_26 = render(&load_text(&windowed_text.replace("\"24.11\"", "\"26.05\"")));
    assert!(on_26.get("ConfigMap", "mini-maintenance").is_none());
    assert!(!sidecar(&on_26).0.contains("reserve"));
    // 24.11 with a window: the ConfigMap (no data of apply's), mounted read-only by the
    // sidecar only, whose script makes the reservations.
    let cm = &windowed.get("ConfigMap", "mini-maintenance").unwrap().body;
    assert!(cm.get("data").is_none(), "{cm}");
    let (script, mounts, volumes) = sidecar(&windowed);
    assert!(script.contains("scontrol create reservation"), "{script}");
    assert!(
        mounts
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "maintenance"
                && m["mountPath"] == "/etc/slurmops/maintenance"
                && m["readOnly"] == true),
        "{mounts}"
    );
    let volume = volumes
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "maintenance");
    assert_eq!(
        volume.map(|v| &v["configMap"]["name"]),
        Some(&serde_json::json!("mini-maintenance"))
    );
    let ctl = &windowed.get("StatefulSet", "mini-controller").unwrap().body;
    let main = &ctl["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(main["name"], "slurmctld");
    assert!(!main["volumeMounts"].to_string().contains("maintenance"));
}

/// At 10,000 workers (500 NodeSets of 20, 50 partitions), every rendered ConfigMap (slurm.conf,
/// gres.conf, topology, scripts) stays under the 1 MiB a ConfigMap holds, and so does the
/// ApplySet parent's copy of cluster.yaml (a cluster.yaml too large to keep is not kept).
#[test]
fn ten_thousand_workers_render_configmaps_under_a_mebibyte() {
    let text = slurmops::bench::generate(500, 20, 50, 0);
    let c = load_text(&text);
    let r = slurmops::render::render(&c);
    let mut seen = 0;
    for o in r.objects.iter().filter(|o| o.kind == "ConfigMap") {
        let size: usize = ["data", "binaryData"]
            .iter()
            .filter_map(|k| o.body.get(*k)?.as_object())
            .flat_map(|m| {
                m.iter()
                    .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            })
            .sum();
        assert!(size < 1 << 20, "ConfigMap/{} holds {size} bytes", o.name);
        seen += 1;
    }
    assert!(seen > 0, "no ConfigMap rendered");
    let kept = slurmops::apply::applyset::kept(&text);
    assert_eq!(kept, text, "a 10,000-worker cluster.yaml is kept whole");
    let huge = text.repeat(60);
    assert!(huge.len() > 1 << 20);
    assert!(slurmops::apply::applyset::kept(&huge).is_empty());
}

/// Each active check's cap is a Slurm license in slurm.conf, merged with the site's own
/// licenses; a cap changed is a reconfigure, never a restart or a roll.
#[test]
fn active_checks_declare_their_licenses_beside_the_site_s() {
    let (_, text) = example("examples/gpu-checks");
    let site = text.replace(
        "  nodeSets:\n",
        "  controller:\n    slurmConf:\n      Licenses: \"matlab:10\"\n  nodeSets:\n",
    );
    let rendered = slurmops::render::render(&load_text(&site));
    let conf = &rendered.slurm["slurm.conf"];
    let line = conf
        .lines()
        .find(|l| l.starts_with("Licenses="))
        .expect("a Licenses line");
    assert_eq!(
        line,
        "Licenses=slurmops-check-gpu-diag:8,slurmops-check-nccl:8,slurmops-check-ib:16,slurmops-check-ib-pairs:4,matlab:10"
    );
    let raised = site.replace("maxConcurrent: 4", "maxConcurrent: 6");
    let p = plan_of(&site, &raised);
    let t = format::text(&p, "cluster gpu (from main)");
    assert!(t.contains("+Licenses=slurmops-check-gpu-diag:8,slurmops-check-nccl:8,slurmops-check-ib:16,slurmops-check-ib-pairs:6,matlab:10"), "{t}");
    assert!(
        t.contains("slurmctld reconfigures in place, no restart"),
        "{t}"
    );
    assert!(
        t.contains("0 to replace") && !t.contains("drained and replaced"),
        "{t}"
    );
}

/// Scheduled copies (issue 77): adding `backup.schedule` plans one CronJob to create and
/// changes nothing else (no pod of slurmdbd's restarts); removing it plans its deletion. The
/// CronJob as rendered is golden.
#[test]
fn a_backup_schedule_is_one_cron_job_planned_like_any_object() {
    let (_, text) = example("examples/quickstart");
    let claim = text.replace(
        "  accounting:\n",
        "  backup:\n    claim: slurm-copies\n  accounting:\n",
    );
    assert_ne!(claim, text);
    let scheduled = claim.replace(
        "    claim: slurm-copies\n",
        "    claim: slurm-copies\n    schedule: {cron: \"0 3 * * *\", keep: 7}\n",
    );
    let p = plan_of(&claim, &scheduled);
    let changes: Vec<_> = p
        .changes
        .iter()
        .map(|c| format!("{:?} {}/{}", c.action, c.kind, c.name))
        .collect();
    // The database's NetworkPolicy lets the copies' pods in.
    assert_eq!(
        changes,
        [
            "Create CronJob/quick-backup",
            "Update NetworkPolicy/quick-database"
        ]
    );
    let out = format::text(&p, "x");
    assert!(out.contains("+ create CronJob slurm/quick-backup"), "{out}");
    assert!(out.contains("schedule: 0 3 * * *"), "{out}");
    let p = plan_of(&scheduled, &claim);
    let changes: Vec<_> = p
        .changes
        .iter()
        .map(|c| format!("{:?} {}/{}", c.action, c.kind, c.name))
        .collect();
    assert_eq!(
        changes,
        [
            "Update NetworkPolicy/quick-database",
            "Delete CronJob/quick-backup"
        ]
    );

    let r = render(&load_text(&scheduled));
    let cron_job = Rendered {
        objects: r
            .objects
            .iter()
            .filter(|o| o.kind == "CronJob")
            .cloned()
            .collect(),
        ..Rendered::default()
    };
    golden("backup-schedule.objects.yaml", &objects_yaml(&cron_job));
}
