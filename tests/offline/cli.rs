//! The command line's conventions: shell completion that a real bash runs, and a man page for
//! every command, nested ones included.

use std::process::Command;

fn slurmops(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args(args)
        .output()
        .expect("run slurmops")
}

/// The commands `slurmops --help` lists (help aside).
fn commands() -> Vec<String> {
    let out = slurmops(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    help.split("Commands:\n")
        .nth(1)
        .expect("a Commands section")
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_commands_and_flags_with_the_generated_script() {
    let out = slurmops(&["completion", "bash"]);
    assert!(out.status.success());
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), &out.stdout).unwrap();
    // As bash's programmable completion calls it: the words typed; the command, the word being
    // completed and the one before as arguments.
    let complete = |words: &str| {
        let sh = format!(
            "source {}; COMP_WORDS=({words}); n=${{#COMP_WORDS[@]}}; COMP_CWORD=$((n - 1)); _slurmops slurmops \"${{COMP_WORDS[n-1]}}\" \"${{COMP_WORDS[n-2]}}\"; echo \"${{COMPREPLY[@]}}\"",
            script.path().display()
        );
        let out = Command::new("bash").args(["-c", &sh]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(complete("slurmops pl"), "plan");
    let all = complete("slurmops ''");
    for c in commands() {
        assert!(all.split(' ').any(|w| w == c), "{c} not offered: {all}");
    }
    let flags = complete("slurmops plan --clu");
    assert!(flags.split(' ').all(|f| f.starts_with("--clu")), "{flags}");
    assert!(flags.split(' ').any(|f| f == "--cluster"), "{flags}");
    assert_eq!(complete("slurmops slurm dr"), "drain");
}

#[test]
fn zsh_and_fish_scripts_name_the_commands() {
    let zsh = String::from_utf8(slurmops(&["completion", "zsh"]).stdout).unwrap();
    assert!(zsh.starts_with("#compdef slurmops"), "{}", &zsh[..80]);
    let fish = String::from_utf8(slurmops(&["completion", "fish"]).stdout).unwrap();
    for c in commands() {
        assert!(zsh.contains(&format!("'{c}:")), "zsh lacks {c}");
        assert!(fish.contains(&format!("-a \"{c}\"")), "fish lacks {c}");
    }
    let out = slurmops(&["completion", "tcsh"]);
    assert!(!out.status.success(), "an unknown shell is refused");
}

#[test]
fn every_command_has_a_man_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = slurmops(&["man", "--output-dir", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = |name: &str| {
        std::fs::read_to_string(dir.path().join(format!("{name}.1")))
            .unwrap_or_else(|e| panic!("{name}.1: {e}"))
    };
    assert!(page("slurmops").contains(".TH slurmops 1"));
    for c in commands() {
        let p = page(&format!("slurmops-{c}"));
        assert!(p.contains(&format!(".TH slurmops-{c} 1")), "{p}");
    }
    // Nested commands too, with their own flags.
    let drain = page("slurmops-slurm-drain");
    assert!(drain.contains("\\-\\-reason"), "{drain}");
    assert!(page("slurmops-plan").contains("\\-\\-cluster"));
    // man renders them, without a warning from groff.
    for name in ["slurmops", "slurmops-plan", "slurmops-import-slinky"] {
        let file = dir.path().join(format!("{name}.1"));
        let out = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(&file)
            .env("MANWIDTH", "80")
            .output()
            .expect("man (tests/bed/packages.sh installs man-db)");
        // Bold and underline as overstrikes (`X\bX`) when not at a terminal: keep the last.
        let raw: Vec<char> = String::from_utf8_lossy(&out.stdout).chars().collect();
        let text: String = (0..raw.len())
            .filter(|&i| raw[i] != '\u{8}' && raw.get(i + 1) != Some(&'\u{8}'))
            .map(|i| raw[i])
            .collect();
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && warnings.is_empty(),
            "{name}: {warnings}"
        );
        assert!(
            text.contains("SYNOPSIS") || text.contains("Usage"),
            "{name}:\n{text}"
        );
    }
}

#[test]
fn the_plan_is_coloured_at_a_terminal_only_and_never_with_no_color() {
    let bin = env!("CARGO_BIN_EXE_slurmops");
    // At a real terminal: util-linux's `script` runs the command on a pseudo-terminal.
    let at_terminal = |no_color: bool| {
        let mut c = Command::new("script");
        c.args(["-qec", &format!("{bin} plan examples/minimal"), "/dev/null"]);
        c.env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env("TERM", "xterm");
        if no_color {
            c.env("NO_COLOR", "1");
        }
        let out = c.output().expect("run script(1)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let coloured = at_terminal(false);
    assert!(
        coloured.contains("\x1b[32m+ create ConfigMap slurm/mini-config\x1b[0m"),
        "{coloured}"
    );
    assert!(!at_terminal(true).contains('\x1b'), "NO_COLOR");
    let piped = String::from_utf8(slurmops(&["plan", "examples/minimal"]).stdout).unwrap();
    assert!(!piped.contains('\x1b'), "a pipe gets plain text");
    assert!(
        piped.contains("+ create ConfigMap slurm/mini-config\n"),
        "{piped}"
    );
}

#[test]
fn every_command_shows_an_example_in_its_help() {
    // Every command and nested command, as the man pages list them.
    let dir = tempfile::tempdir().unwrap();
    assert!(
        slurmops(&["man", "--output-dir", dir.path().to_str().unwrap()])
            .status
            .success()
    );
    let mut seen = 0;
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let Some(words) = name
            .strip_suffix(".1")
            .and_then(|n| n.strip_prefix("slurmops-"))
        else {
            continue;
        };
        let mut args: Vec<&str> = words.split('-').collect();
        args.push("--help");
        let help = String::from_utf8(slurmops(&args).stdout).unwrap();
        assert!(
            help.lines().any(|l| l.starts_with("Example"))
                && help
                    .lines()
                    .any(|l| l.starts_with("  ") && l.contains("slurmops ")),
            "slurmops {words} --help shows no example:\n{help}"
        );
        seen += 1;
    }
    assert!(seen >= commands().len(), "{seen} pages");
}

#[test]
fn validate_prints_one_json_document_for_scripts_whatever_the_verdict() {
    let json = |args: &[&str]| {
        let out = slurmops(args);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), doc)
    };
    let (code, doc) = json(&["validate", "examples/repo", "-o", "json"]);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(doc["valid"], true);
    assert_eq!(doc["version"], 1);
    assert!(doc["nodeSets"].as_u64().is_some_and(|n| n > 0), "{doc}");
    assert_eq!(doc["errors"], serde_json::json!([]));

    // An invalid file: exit 1, each problem with its position.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("examples/minimal/cluster.yaml").unwrap();
    let broken = text.replacen("replicas:", "replicaz:", 1);
    assert_ne!(broken, text);
    std::fs::write(dir.path().join("cluster.yaml"), &broken).unwrap();
    let (code, doc) = json(&["validate", dir.path().to_str().unwrap(), "--output", "json"]);
    assert_eq!(code, Some(1), "{doc}");
    assert_eq!(doc["valid"], false);
    let e = doc["errors"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["path"] == "spec.nodeSets[0].replicaz"))
        .unwrap_or_else(|| panic!("{doc}"));
    let line = broken.lines().position(|l| l.contains("replicaz")).unwrap() + 1;
    assert_eq!(e["line"], line, "{doc}");
    assert!(
        e["col"].as_u64().is_some_and(|c| c > 0)
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains("replicaz")),
        "{doc}"
    );

    // Valid but refused by the guardrails (the example asks for a privileged login container):
    // listed apart from the errors.
    let (code, doc) = json(&["validate", "examples/repo", "--guardrails", "-o", "json"]);
    assert_eq!(code, Some(1), "{doc}");
    assert_eq!(
        (&doc["valid"], &doc["errors"]),
        (&serde_json::json!(false), &serde_json::json!([])),
        "{doc}"
    );
    let refused = doc["refused"].as_array().expect("refused as a list");
    assert!(
        refused
            .iter()
            .any(|r| r["path"] == "spec.loginSets[0].containerSecurityContext.privileged"),
        "{doc}"
    );
}

/// `slurmops import slinky` on GPU overlays as people write them (tests/fixtures/slinky-overlays:
/// GKE A3 Mega and A3 Ultra shapes, a site's GPU sharing), each over the chart's own values of
/// each version: a cluster.yaml that validates (exit 2, NEEDS lines only for what has no field),
/// the GPUs in `nodeSets[].gpus`, `GresTypes` and `gres.conf` told as rendered from them, a
/// device-file gres.conf carried as `autodetect: files`.
#[test]
fn import_slinky_takes_gpu_overlays_to_a_cluster_yaml_that_validates() {
    let chart = std::path::Path::new("../shared/anchors/slinky-values");
    let overlays = std::path::Path::new("tests/fixtures/slinky-overlays");
    let tmp = tempfile::tempdir().unwrap();
    // (overlay, NodeSet, count, type, autodetect, what the report must say needs a person)
    let cases = [
        ("gke-a3-mega", "a3mega", 8, "h100", None, &[][..]),
        ("gke-a3-ultra", "a3ultra", 8, "h200", Some("files"), &[][..]),
        (
            "site-gpu-shard",
            "l40s",
            4,
            "l40s",
            None,
            &[
                "GresTypes=gpu,shard",
                "Name=shard Count=32",
                "cgroup.conf is rendered",
                "ClusterName=site",
            ][..],
        ),
    ];
    for version in ["v1.1.2", "v1.2.1", "main-2026-08-20"] {
        for (overlay, set, count, ty, detect, needed) in cases {
            let values = chart.join(format!("values-{version}.yaml"));
            let file = overlays.join(format!("{overlay}.yaml"));
            let out = slurmops(&[
                "import",
                "slinky",
                values.to_str().unwrap(),
                file.to_str().unwrap(),
            ]);
            let report = String::from_utf8_lossy(&out.stderr).to_string();
            assert_eq!(out.status.code(), Some(2), "{version} {overlay}:\n{report}");
            let written = tmp.path().join(format!("{version}-{overlay}.yaml"));
            std::fs::write(&written, &out.stdout).unwrap();
            let v = slurmops(&["validate", written.to_str().unwrap()]);
            assert!(
                v.status.success(),
                "{version} {overlay}: {}{}",
                String::from_utf8_lossy(&v.stdout),
                String::from_utf8_lossy(&v.stderr)
            );
            let doc: serde_json::Value = serde_saphyr::from_slice(&out.stdout).unwrap();
            let sets = doc["spec"]["nodeSets"].as_array().unwrap();
            let ns = sets
                .iter()
                .find(|s| s["name"] == set)
                .unwrap_or_else(|| panic!("{overlay}: no {set}"));
            assert_eq!(ns["gpus"]["count"], count, "{overlay}: {ns}");
            assert_eq!(ns["gpus"]["type"], ty, "{overlay}: {ns}");
            assert_eq!(ns["gpus"]["autodetect"].as_str(), detect, "{overlay}: {ns}");
            assert!(
                doc["spec"]["controller"]["slurmConf"]["GresTypes"].is_null(),
                "{overlay}"
            );
            assert!(
                doc["spec"]["controller"]["configFiles"]["gres.conf"].is_null(),
                "{overlay}"
            );
            let needs: Vec<&str> = report.lines().filter(|l| l.starts_with("NEEDS")).collect();
            for n in needed {
                assert!(
                    needs.iter().any(|l| l.contains(n)),
                    "{overlay}: {n} not in NEEDS:\n{report}"
                );
            }
            // Whole GPUs never need a person: the overlay's GresTypes and gres.conf are told.
            if needed.is_empty() {
                assert!(
                    !needs
                        .iter()
                        .any(|l| l.contains("gres") || l.contains("Gres")),
                    "{overlay}:\n{report}"
                );
                assert!(
                    report
                        .lines()
                        .any(|l| l.starts_with("ignored") && l.contains("GresTypes=gpu")),
                    "{overlay}:\n{report}"
                );
            }
        }
    }
}

/// `slurmops import slinky` on the Slinky chart's own values of each version (1.1.2, 1.2.1, the
/// development line): a cluster.yaml that validates on stdout, a report on stderr with every
/// setting placed, and exit 2, since the chart's defaults let Slinky make the key Secrets (a
/// person must name them). Each report line says where the setting was written.
#[test]
fn import_slinky_turns_each_chart_version_into_a_cluster_yaml_that_validates() {
    let dir = std::path::Path::new("../shared/anchors/slinky-values");
    assert!(
        dir.exists(),
        "{} is missing: the test needs ../shared",
        dir.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    for version in ["v1.1.2", "v1.2.1", "main-2026-08-20"] {
        let values = dir.join(format!("values-{version}.yaml"));
        let out = slurmops(&["import", "slinky", values.to_str().unwrap()]);
        let report = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{version}:\n{report}");
        let needs: Vec<&str> = report.lines().filter(|l| l.starts_with("NEEDS")).collect();
        assert!(
            needs.iter().any(|l| l.contains("slurmKey.create"))
                && needs.iter().any(|l| l.contains("jwtKey.create")),
            "{version}: the key Secrets are not reported as needed:\n{report}"
        );
        for l in report
            .lines()
            .filter(|l| !l.starts_with(|c: char| c.is_ascii_digit()))
        {
            let at = l.split_whitespace().nth(1).unwrap_or_default();
            assert!(
                at == "-" || at.starts_with(values.to_str().unwrap()),
                "{version}: {l}"
            );
        }
        let file = tmp.path().join(format!("{version}.yaml"));
        std::fs::write(&file, &out.stdout).unwrap();
        let v = slurmops(&["validate", file.to_str().unwrap()]);
        assert!(
            v.status.success(),
            "{version}: {}",
            String::from_utf8_lossy(&v.stdout)
        );
    }
    // A values file that is not YAML is refused at its position, nothing printed on stdout.
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(&bad, "nodesets:\n  a: [1, 2\n").unwrap();
    let out = slurmops(&["import", "slinky", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:", bad.display())) && err.contains("fix the YAML syntax"),
        "{err}"
    );
}

/// An offline plan whose side does not load names that side's file and line, the new side's first
/// (the plan is about it), and shows no plan.
#[test]
fn a_plan_names_the_side_that_does_not_load_the_new_one_first() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string("examples/repo/cluster.yaml").unwrap();
    let bad = good.replacen("spec:\n", "spec:\n  noSuchField: 1\n", 1);
    assert_ne!(good, bad, "the example has a spec");
    let (old_good, old_bad) = (dir.path().join("old.yaml"), dir.path().join("old-bad.yaml"));
    let (new_good, new_bad) = (dir.path().join("new.yaml"), dir.path().join("new-bad.yaml"));
    std::fs::write(&old_good, &good).unwrap();
    std::fs::write(&old_bad, &bad).unwrap();
    std::fs::write(&new_good, &good).unwrap();
    std::fs::write(&new_bad, &bad).unwrap();
    let plan = |new: &std::path::Path, old: &std::path::Path| {
        let out = slurmops(&[
            "plan",
            new.to_str().unwrap(),
            "--from",
            old.to_str().unwrap(),
        ]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, text) = plan(&new_good, &old_good);
    assert_eq!(code, Some(0), "the same file twice: no change\n{text}");
    for (new, old, named, not) in [
        (&new_good, &old_bad, "old-bad.yaml:", "new-bad.yaml"),
        (&new_bad, &old_good, "new-bad.yaml:", "old-bad.yaml"),
        (&new_bad, &old_bad, "new-bad.yaml:", "old-bad.yaml"),
    ] {
        let (code, text) = plan(new, old);
        assert_eq!(code, Some(1), "{text}");
        assert!(
            text.contains(named) && text.contains("noSuchField") && !text.contains(not),
            "the problem named at {named} only:\n{text}"
        );
    }
}
