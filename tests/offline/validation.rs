//! One test per class of cluster.yaml error: the message, the position and the hint a user
//! gets, and that every problem is reported at once.

use slurmops::cluster::{Diagnostic, load};

const VALID: &str = include_str!("../../examples/minimal/cluster.yaml");

fn errors(text: &str) -> Vec<Diagnostic> {
    load("cluster.yaml", text).expect_err("this input must be rejected")
}

/// The minimal example with `from` replaced by `to` (which must occur exactly once).
fn with(from: &str, to: &str) -> String {
    assert_eq!(
        VALID.matches(from).count(),
        1,
        "{from:?} must occur once in the minimal example"
    );
    VALID.replace(from, to)
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .expect("needle in text")
        + 1
}

/// The error of E at PATH.
fn at<'a>(e: &'a [Diagnostic], path: &str) -> &'a Diagnostic {
    e.iter()
        .find(|d| d.path == path)
        .unwrap_or_else(|| panic!("no error at {path}: {e:#?}"))
}

fn one(text: &str) -> Diagnostic {
    let e = errors(text);
    assert_eq!(e.len(), 1, "expected one error, got {e:#?}");
    e.into_iter().next().unwrap()
}

#[test]
fn the_examples_are_valid() {
    for f in [
        "examples/repo/cluster.yaml",
        "examples/minimal/cluster.yaml",
        "examples/quickstart/cluster.yaml",
        "examples/ha/cluster.yaml",
    ] {
        let text = std::fs::read_to_string(f).unwrap();
        if let Err(e) = load(f, &text) {
            panic!("{f}: {e:#?}");
        }
    }
}

#[test]
fn unknown_field_points_at_the_key_and_suggests_the_right_name() {
    let text = with(
        "      replicas: 2\n",
        "      replicas: 2\n      replcas: 3\n",
    );
    let d = one(&text);
    assert_eq!((d.line, d.col), (line_of(&text, "replcas"), 7));
    assert_eq!(d.path, "spec.nodeSets[0].replcas");
    assert!(d.message.contains("unknown field `replcas`"));
    assert_eq!(d.hint.as_deref(), Some("did you mean `replicas`?"));
    assert_eq!(
        d.to_string(),
        format!(
            "cluster.yaml:{}:7: error: spec.nodeSets[0].replcas: unknown field `replcas` (did you mean `replicas`?)",
            d.line
        )
    );
}

#[test]
fn wrong_type_names_expected_and_found() {
    let text = with("memory: 1Gi", "memory: 1Gi\n      weight: two");
    let d = one(&text);
    assert_eq!(d.line, line_of(&text, "weight: two"));
    assert!(d.message.contains("expected integer"), "{d}");
    // A count or a word: both are named.
    let text = with("replicas: 2", "replicas: two");
    let d = one(&text);
    assert_eq!(d.line, line_of(&text, "replicas: two"));
    assert!(d.message.contains("expected an integer or perNode"), "{d}");
}

#[test]
fn quoted_number_gets_a_hint() {
    let d = one(&with("memory: 1Gi", "memory: 1Gi\n      weight: \"2\""));
    assert_eq!(d.hint.as_deref(), Some("remove the quotes"));
}

#[test]
fn missing_required_field_points_at_its_parent() {
    let text = with("      replicas: 2\n", "");
    let d = one(&text);
    assert_eq!(d.path, "spec.nodeSets[0]");
    assert!(d.message.contains("missing required field `replicas`"));
    assert_eq!(d.line, line_of(&text, "- name: cpu"));
}

#[test]
fn a_required_field_set_to_null_is_reported_where_it_stands() {
    for (null, kind) in [
        ("~", "an integer or perNode"),
        ("null", "an integer or perNode"),
        ("", "an integer or perNode"),
    ] {
        let text = with("      replicas: 2\n", &format!("      replicas: {null}\n"));
        let d = one(&text);
        assert_eq!(d.path, "spec.nodeSets[0].replicas", "{d}");
        assert_eq!((d.line, d.col), (line_of(&text, "replicas:"), 7), "{d}");
        assert!(d.message.contains("required but has no value"), "{d}");
        assert_eq!(d.hint.as_deref(), Some(format!("give it {kind}").as_str()));
    }
    let text = with("  partitions:\n", "  partitions: null\n  x:\n");
    let e = errors(&text);
    assert!(
        e.iter().any(|d| d.path == "spec.partitions"
            && d.line == line_of(&text, "partitions: null")
            && d.hint.as_deref() == Some("give it a list")),
        "{e:#?}"
    );
}

#[test]
fn inline_secret_is_refused_without_echoing_it() {
    let text = with(
        "slurmKey: {name: slurm-auth, key: slurm.key}",
        "slurmKey: c3VwZXItc2VjcmV0LWtleQ==",
    );
    let d = one(&text);
    assert_eq!(d.path, "spec.auth.slurmKey");
    assert!(d.message.contains("inline secret"));
    assert!(
        !d.to_string().contains("c3VwZXItc2VjcmV0"),
        "a secret must never be printed: {d}"
    );
}

#[test]
fn password_in_slurm_conf_is_refused() {
    let text = with(
        "  nodeSets:\n",
        "  controller:\n    slurmConf: {StoragePass: hunter2}\n  nodeSets:\n",
    );
    let d = one(&text);
    assert_eq!(d.path, "spec.controller.slurmConf.StoragePass");
    assert!(d.message.contains("password in git"));
    assert!(!d.to_string().contains("hunter2"));
}

/// Issue 33: a value from git that reaches slurm.conf cannot add a setting git never named (a
/// space or a line break starts another `Key=Value`) nor cut the line (`#`).
#[test]
fn values_that_would_inject_settings_into_slurm_conf_are_refused_where_they_stand() {
    let text = with(
        "      default: true\n",
        "      default: true\n      maxTime: \"1:00:00 AllowAccounts=root\"\n      options: {OverSubscribe: \"NO PrologSlurmctld=/tmp/x\"}\n",
    );
    let text = text.replace(
        "  nodeSets:\n",
        "  controller:\n    slurmConf: {MailProg: \"/bin/true\\nPrologSlurmctld=/tmp/x\", ClusterName2: \"a#b\"}\n  nodeSets:\n",
    );
    let e = errors(&text);
    let max = at(&e, "spec.partitions[0].maxTime");
    assert!(max.message.contains("not a Slurm time limit"), "{max}");
    assert_eq!(max.line, line_of(&text, "maxTime:"));
    let opt = at(&e, "spec.partitions[0].options.OverSubscribe");
    assert!(opt.message.contains("spaces"), "{opt}");
    let mail = at(&e, "spec.controller.slurmConf.MailProg");
    assert!(mail.message.contains("one line"), "{mail}");
    let hash = at(&e, "spec.controller.slurmConf.ClusterName2");
    assert!(hash.message.contains("'#'"), "{hash}");
    // A feature with a line break.
    let d = one(&with(
        "      replicas: 2\n",
        "      replicas: 2\n      features: [\"gpu\\nx\"]\n",
    ));
    assert!(d.path.ends_with("features[0]"), "{d}");
}

/// Issue 33: diagnostics quote cluster.yaml's keys and values; a value carrying terminal
/// sequences (a title change, a screen clear) prints escaped, in CI logs and the status alike.
#[test]
fn diagnostics_print_terminal_sequences_from_cluster_yaml_escaped() {
    let e = errors(&with(
        "      replicas: 2\n",
        "      replicas: 2\n      \"rep\\e]0;owned\\a\\e[2J\": 1\n",
    ));
    let shown: Vec<String> = e.iter().map(ToString::to_string).collect();
    let d = shown
        .iter()
        .find(|d| d.contains("owned"))
        .unwrap_or_else(|| panic!("the key is not quoted: {shown:#?}"));
    assert!(!d.contains('\u{1b}') && !d.contains('\u{7}'), "{d:?}");
    assert!(d.contains("\\u{1b}]0;owned\\u{7}\\u{1b}[2J"), "{d}");
}

/// Issue 33: the JWT key (mint a token for any user), slurm.key and the database password are
/// mounted by slurmops where they are needed; named anywhere else (a config file configless
/// serves to every node, a worker's volume, a login sidecar's env) they reach Slurm users.
#[test]
fn the_clusters_own_secrets_cannot_be_handed_to_worker_login_or_config_files() {
    let text = with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      volumes:\n        - {name: k, secret: {secretName: slurm-auth}}\n        - {name: ok, secret: {secretName: scratch-creds}}\n        - name: p\n          projected: {sources: [{secret: {name: slurm-jwt}}]}\n      podTemplate:\n        env:\n          - {name: T, valueFrom: {secretKeyRef: {name: slurm-jwt, key: jwt_hs256.key}}}\n",
    );
    let text = text.replace(
        "  nodeSets:\n",
        "  controller:\n    configFiles:\n      oci.conf: {secretRef: {name: slurm-jwt, key: jwt_hs256.key}}\n  nodeSets:\n",
    );
    let e = errors(&text);
    let own: Vec<&Diagnostic> = e
        .iter()
        .filter(|d| d.message.contains("holds the cluster's"))
        .collect();
    let paths: Vec<&str> = own.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(own.len(), 4, "{e:#?}");
    assert!(
        paths
            .iter()
            .any(|p| p.ends_with("volumes[0].secret.secretName")),
        "{paths:?}"
    );
    assert!(
        paths.iter().any(|p| p.ends_with("sources[0].secret.name")),
        "{paths:?}"
    );
    assert!(
        paths.iter().any(|p| p.ends_with("secretKeyRef.name")),
        "{paths:?}"
    );
    assert!(paths.iter().any(|p| p.contains("configFiles")), "{paths:?}");
    let vol = own
        .iter()
        .find(|d| d.path.ends_with("volumes[0].secret.secretName"))
        .unwrap();
    assert_eq!(vol.line, line_of(&text, "secretName: slurm-auth"));
    assert!(vol.message.contains("slurm.key"), "{vol}");
    // Another Secret is the user's business; the examples' own references stay valid.
    assert!(
        !e.iter().any(|d| d.message.contains("scratch-creds")),
        "{e:#?}"
    );
}

#[test]
fn invalid_names_are_dns_1123() {
    let d = one(&with("name: mini", "name: Mini_Cluster"));
    assert_eq!(d.path, "metadata.name");
    assert!(d.hint.unwrap().contains("lowercase"));
}

#[test]
fn cluster_name_longer_than_40_is_refused() {
    let d = one(&with(
        "slurmVersion",
        &format!("clusterName: {}\n  slurmVersion", "c".repeat(41)),
    ));
    assert_eq!(d.path, "spec.clusterName");
    assert!(d.message.contains("at most 40"));
}

#[test]
fn duplicate_names_are_refused() {
    let text = with(
        "  partitions:\n",
        "    - {name: cpu, replicas: 1}\n  partitions:\n",
    );
    let d = one(&text);
    assert!(d.message.contains("defined twice"), "{d}");
    assert_eq!(d.path, "spec.nodeSets[1].name");
}

#[test]
fn unresolved_reference_suggests_a_known_name() {
    let d = one(&with("nodeSets: [ALL]", "nodeSets: [cpus]"));
    assert_eq!(d.path, "spec.partitions[0].nodeSets[0]");
    assert!(d.message.contains("no NodeSet named \"cpus\""));
    assert_eq!(d.hint.as_deref(), Some("did you mean `cpu`?"));
}

#[test]
fn max_unavailable_must_be_positive() {
    let d = one(&with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      update: {maxUnavailable: 0%}\n",
    ));
    assert_eq!(d.path, "spec.nodeSets[0].update.maxUnavailable");
}

#[test]
fn autoscale_bounds_must_hold_replicas() {
    let d = one(&with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      autoscale: {min: 3, max: 8}\n",
    ));
    assert_eq!(d.path, "spec.nodeSets[0].replicas");
    assert!(d.message.contains("outside autoscale bounds 3..8"));
    let d = one(&with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      autoscale: {min: 3, max: 1}\n",
    ));
    assert!(d.message.contains("min 3 is more than max 1"));
}

#[test]
fn per_node_is_a_word_of_its_own_and_excludes_autoscale_and_claim_templates() {
    let text = with("replicas: 2", "replicas: pernode");
    let d = one(&text);
    assert_eq!(d.path, "spec.nodeSets[0].replicas");
    assert_eq!(d.line, line_of(&text, "replicas: pernode"));
    assert!(d.message.contains("perNode"), "{}", d.message);
    let per_node = with("replicas: 2", "replicas: perNode");
    assert!(load("cluster.yaml", &per_node).is_ok());
    let scaled = per_node.replace(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      autoscale: {min: 0, max: 8}\n",
    );
    let d = one(&scaled);
    assert_eq!(d.path, "spec.nodeSets[0].autoscale");
    assert!(d.message.contains("cannot autoscale"), "{}", d.message);
    let claims = per_node.replace(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      volumeClaimTemplates: [{metadata: {name: scratch}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}]\n",
    );
    let d = one(&claims);
    assert_eq!(d.path, "spec.nodeSets[0].volumeClaimTemplates");
}

#[test]
fn backup_controllers_need_one_shared_state_volume() {
    let ha = "  controller:\n    ha: {backups: 1}\n";
    let text = with("  nodeSets:\n", &format!("{ha}  nodeSets:\n"));
    let e = one(&text);
    assert_eq!(e.path, "spec.controller.ha");
    assert!(e.message.contains("shared by every controller"), "{e:?}");
    assert!(
        e.hint.as_deref().unwrap_or("").contains("ReadWriteMany"),
        "{e:?}"
    );
    // Persistence off would give each controller an emptyDir of its own: two copies of the state.
    let off = "    persistence: {enabled: false, existingClaim: state}\n";
    let e = one(&with("  nodeSets:\n", &format!("{ha}{off}  nodeSets:\n")));
    assert_eq!(e.path, "spec.controller.persistence.enabled");
    assert!(e.message.contains("its own copy in an emptyDir"), "{e:?}");
    let on = "    persistence: {existingClaim: state}\n";
    load(
        "cluster.yaml",
        &with("  nodeSets:\n", &format!("{ha}{on}  nodeSets:\n")),
    )
    .unwrap();
}

#[test]
fn imex_needs_gpus() {
    let d = one(&with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      imex: {computeDomain: nvl}\n",
    ));
    assert_eq!(d.path, "spec.nodeSets[0].imex");
    assert!(d.message.contains("IMEX needs GPUs"));
}

#[test]
fn partitions_must_not_be_empty() {
    let d = one(&with("nodeSets: [ALL]", "nodeSets: []"));
    assert!(d.message.contains("at least one NodeSet"));
}

#[test]
fn bad_duration_and_enum_values() {
    let text = with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      update: {drainTimeout: 10 minutes, onTimeout: kill}\n",
    );
    let e = errors(&text);
    assert_eq!(e.len(), 2, "{e:#?}");
    assert!(
        e.iter()
            .any(|d| d.path.ends_with("drainTimeout") && d.message.contains("invalid duration"))
    );
    assert!(e.iter().any(|d| d.path.ends_with("onTimeout") && d.message.contains("not one of: wait, force")));
}

#[test]
fn slurm_settings_slurmops_owns_are_refused() {
    let d = one(&with(
        "  nodeSets:\n",
        "  controller:\n    slurmConf: {ClusterName: other}\n  nodeSets:\n",
    ));
    assert!(d.message.contains("generated by slurmops"));
    assert_eq!(d.hint.as_deref(), Some("set spec.clusterName"));
}

#[test]
fn block_topology_on_24_11_is_refused_with_the_reason() {
    let d = one(&with(
        "  partitions:\n",
        "  topology:\n    block: {nodeLabel: nvidia.com/gpu.clique, blocks: [r1], nodeSets: [cpu], blockSize: 2}\n  partitions:\n",
    ));
    assert!(
        d.message.contains("needs Slurm 25.11 or later"),
        "{}",
        d.message
    );
    assert!(d.message.contains("24.11 refuses blocks"), "{}", d.message);
    assert_eq!(
        d.hint.as_deref(),
        Some("raise spec.slurmVersion to \"25.11\" or later, or remove spec.topology")
    );
}

/// A tree of switches beside the blocks: leaf switches are label values listed once, a NodeSet
/// is in one topology, and a partition names a topology that is set.
#[test]
fn a_tree_topology_s_switches_nodesets_and_partitions_are_checked() {
    let topo = "  topology:\n    block: {nodeLabel: l, blocks: [r1], nodeSets: [cpu], blockSize: 2}\n    tree: {nodeLabel: sw, switches: [s1, s1, fabric-root], nodeSets: [cpu]}\n  partitions:\n";
    let text = with("  partitions:\n", topo).replace("\"24.11\"", "\"25.11\"");
    let ds = slurmops::cluster::load("cluster.yaml", &text).unwrap_err();
    let msgs: Vec<&str> = ds.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        msgs,
        [
            "switch \"s1\" is listed twice",
            "\"fabric-root\" is the name of the tree's root switch",
            "NodeSet \"cpu\" is in the block topology too"
        ],
        "{ds:?}"
    );
    let topo = "  topology:\n    block: {nodeLabel: l, blocks: [r1], nodeSets: [cpu], blockSize: 2}\n  partitions:\n";
    let text = with("  partitions:\n", topo)
        .replace("\"24.11\"", "\"25.11\"")
        .replace(
            "      default: true\n",
            "      default: true\n      topology: tree\n",
        );
    let ds = slurmops::cluster::load("cluster.yaml", &text).unwrap_err();
    assert_eq!(ds.len(), 1, "{ds:?}");
    assert_eq!(ds[0].message, "spec.topology.tree is not set");
}

#[test]
fn an_unsupported_slurm_release_names_the_supported_ones() {
    let d = one(&with("slurmVersion: \"24.11\"", "slurmVersion: \"24.05\""));
    assert_eq!(d.message, "slurmops does not support Slurm 24.05");
    assert_eq!(
        d.hint.as_deref(),
        Some("use one of the supported releases: 24.11, 25.05, 25.11, 26.05")
    );
    assert_eq!((d.line, d.col), (10, 17), "{d:?}");
}

#[test]
fn blocks_must_be_label_values_listed_once_and_metrics_need_25_11_or_later() {
    let topo = "  topology:\n    block: {nodeLabel: l, blocks: [r1, r1, \"-bad\"], nodeSets: [cpu], blockSize: 2}\n  partitions:\n";
    let text = with("  partitions:\n", topo).replace("\"24.11\"", "\"26.05\"");
    let ds = slurmops::cluster::load("cluster.yaml", &text).unwrap_err();
    let msgs: Vec<&str> = ds.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        msgs,
        [
            "block \"r1\" is listed twice",
            "\"-bad\" is not a Kubernetes label value"
        ],
        "{ds:?}"
    );
    let d = one(&with(
        "  partitions:\n",
        "  controller:\n    metrics: {enabled: true}\n  partitions:\n",
    ));
    assert!(
        d.message
            .contains("arrived in Slurm 25.11: Slurm 24.11 has no such plugin"),
        "{}",
        d.message
    );
    assert_eq!(
        d.hint.as_deref(),
        Some(
            "raise spec.slurmVersion to a release that has it (25.11, 26.05), or turn metrics off"
        )
    );
}

#[test]
fn every_error_is_reported_at_once_sorted_by_position() {
    let text = with("name: mini", "name: Mini")
        .replace(
            "      replicas: 2\n",
            "      replicas: 2\n      colour: red\n",
        )
        .replace("nodeSets: [ALL]", "nodeSets: [nope]");
    let e = errors(&text);
    assert_eq!(e.len(), 3, "{e:#?}");
    assert!(e.windows(2).all(|w| w[0].line <= w[1].line));
}

#[test]
fn yaml_syntax_error_has_a_position() {
    let d = one("apiVersion: slurmops.dev/v1alpha1\nkind: [unclosed\n");
    assert_eq!(d.path, "(yaml)");
    assert!(d.line >= 2);
}

#[test]
fn hostile_inputs_fail_cleanly() {
    let bomb = {
        let mut s = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            s.push_str(&format!(
                "a{i}: &a{i} [{}]\n",
                vec![
                    if i == 1 {
                        "*a".to_string()
                    } else {
                        format!("*a{}", i - 1)
                    };
                    10
                ]
                .join(", ")
            ));
        }
        s
    };
    let cases: Vec<Vec<u8>> = vec![
        bomb.into_bytes(),
        "[".repeat(100_000).into_bytes(),
        vec![0xff, 0xfe, 0x00, 0x12, 0x80],
        "a: b\n".repeat(1_000_000).into_bytes(),
        b"--- !!binary |\n  AAAA\n".to_vec(),
        b"".to_vec(),
    ];
    for case in cases {
        let text = String::from_utf8_lossy(&case);
        let e = errors(&text);
        assert!(!e.is_empty());
    }
}

#[test]
fn ignore_rules_must_name_a_rendered_kind_and_a_field_pointer() {
    let text = format!(
        "{VALID}  policy:\n    ignoreDifferences:\n      - {{kind: StatefulSett, jsonPointers: [/spec/replicas]}}\n      - {{kind: ConfigMap, jsonPointers: [data, /metadata/labels]}}\n"
    );
    let e = errors(&text);
    assert_eq!(e.len(), 3, "{e:#?}");
    assert_eq!(e[0].path, "spec.policy.ignoreDifferences[0].kind");
    assert!(e[0].hint.as_deref().unwrap().contains("StatefulSet"));
    assert_eq!(e[0].line, line_of(&text, "StatefulSett"));
    assert_eq!(
        e[1].path,
        "spec.policy.ignoreDifferences[1].jsonPointers[0]"
    );
    assert!(e[1].message.contains("not a JSON pointer"));
    assert!(e[2].message.contains("identifies the object"));
}

/// The minimal example with CONTROLLER as its `spec.controller` section.
fn with_controller(controller: &str) -> String {
    with(
        "  nodeSets:\n",
        &format!("  controller:\n{controller}  nodeSets:\n"),
    )
}

#[test]
fn config_files_are_the_ones_slurm_serves_configless_with_one_source_each() {
    let text = with_controller(
        "    configFiles:
      nhc.conf: {content: \"* || check_fs_free /scratch 10%\"}
      gres.conf: {content: \"AutoDetect=off\"}
      oci.conf: {content: \"x\", secretRef: {name: oci, key: oci.conf}}
      plugstack.conf: {configMapRef: {name: spank, key: plugstack.conf}}
",
    );
    let e = errors(&text);
    assert_eq!(e.len(), 3, "{e:#?}");
    let nhc = e
        .iter()
        .find(|d| d.path == "spec.controller.configFiles.nhc.conf")
        .unwrap();
    assert_eq!((nhc.line, nhc.col), (line_of(&text, "nhc.conf"), 7));
    assert!(
        nhc.message
            .contains("does not serve \"nhc.conf\" configless"),
        "{nhc}"
    );
    // The hint lists what 24.11 serves, without the files slurmops renders.
    let hint = nhc.hint.as_deref().unwrap();
    assert!(
        hint.contains("plugstack.conf") && hint.contains("oci.conf"),
        "{hint}"
    );
    assert!(
        !hint.contains("gres.conf") && !hint.contains("namespace.yaml"),
        "{hint}"
    );
    let gres = e.iter().find(|d| d.path.ends_with("gres.conf")).unwrap();
    assert!(gres.message.contains("rendered by slurmops"), "{gres}");
    assert_eq!(gres.hint.as_deref(), Some("set spec.nodeSets[].gpus"));
    let oci = e.iter().find(|d| d.path.ends_with("oci.conf")).unwrap();
    assert!(
        oci.message
            .contains("exactly one of content, secretRef and configMapRef")
    );

    // namespace.yaml is served from 26.05 on.
    let ns =
        with_controller("    configFiles:\n      namespace.yaml: {content: \"defaults: {}\"}\n");
    assert!(
        one(&ns)
            .message
            .contains("does not serve \"namespace.yaml\"")
    );
    load(
        "cluster.yaml",
        &ns.replace("slurmVersion: \"24.11\"", "slurmVersion: \"26.05\""),
    )
    .expect("26.05 serves namespace.yaml");
}

#[test]
fn a_health_check_needs_a_script_and_owns_the_health_check_settings() {
    let text = with_controller(
        "    slurmConf:
      HealthCheckInterval: 60
    healthCheck:
      interval: 0s
      program: \"nvidia-smi -L\"
",
    );
    let e = errors(&text);
    assert_eq!(e.len(), 3, "{e:#?}");
    assert!(
        e.iter()
            .any(|d| d.path == "spec.controller.healthCheck.program"
                && d.hint.as_deref() == Some("begin it with #!/bin/sh"))
    );
    assert!(
        e.iter()
            .any(|d| d.path == "spec.controller.healthCheck.interval")
    );
    assert!(e.iter().any(
        |d| d.path == "spec.controller.slurmConf.HealthCheckInterval"
            && d.message.contains("set by controller.healthCheck")
    ));
    let bad_state = with_controller(
        "    healthCheck:\n      program: \"#!/bin/sh\"\n      nodeState: [BUSY]\n",
    );
    assert_eq!(
        one(&bad_state).path,
        "spec.controller.healthCheck.nodeState[0]"
    );
}

#[test]
fn inline_files_larger_than_a_config_map_are_refused() {
    let big = "#".repeat(1 << 20);
    let text = with_controller(&format!(
        "    configFiles:\n      plugstack.conf: {{content: \"{big}\"}}\n"
    ));
    let d = one(&text);
    assert_eq!(d.path, "spec.controller.configFiles");
    assert!(d.message.contains("1 MiB"), "{d}");
    assert!(d.hint.as_deref().unwrap().contains("secretRef"));
}

#[test]
fn pod_additions_name_their_volumes_and_containers_properly() {
    let text = with(
        "      memory: 1Gi\n",
        "      memory: 1Gi
      privileged: false
      containerSecurityContext: {privileged: true}
      volumes:
        - {name: etc-slurm, emptyDir: {}}
      podTemplate:
        extraContainers:
          - {name: slurmd, image: busybox}
          - {name: Exporter, image: busybox}
          - {name: tail}
  loginSets:
    - name: users
      volumes: [{name: home, persistentVolumeClaim: {claimName: home}}]
      volumeMounts: [{name: hmoe, mountPath: /home}]
",
    );
    let e = errors(&text);
    let find = |path: &str| {
        e.iter()
            .find(|d| d.path == path)
            .unwrap_or_else(|| panic!("no error at {path}: {e:#?}"))
    };
    assert!(
        find("spec.nodeSets[0].containerSecurityContext.privileged")
            .message
            .contains("contradict")
    );
    assert!(
        find("spec.nodeSets[0].volumes[0].name")
            .message
            .contains("taken by slurmops")
    );
    assert!(
        find("spec.nodeSets[0].podTemplate.extraContainers[0].name")
            .message
            .contains("used twice")
    );
    assert!(
        find("spec.nodeSets[0].podTemplate.extraContainers[1].name")
            .message
            .contains("not a valid container name")
    );
    assert_eq!(
        find("spec.nodeSets[0].podTemplate.extraContainers[2].image").message,
        "a container needs an image"
    );
    let mount = find("spec.loginSets[0].volumeMounts[0].name");
    assert_eq!(mount.hint.as_deref(), Some("did you mean `home`?"));
    assert_eq!(e.len(), 6, "{e:#?}");
}

#[test]
fn node_health_rules_use_kubernetes_words() {
    let text = with(
        "      default: true\n",
        "      default: true
  policy:
    nodeHealth:
      conditions: [{type: GpuUnhealthy, status: yes}, {type: Ready, status: \"False\"}]
      taints: [{key: nvidia.com/gpu-xid, effect: NoRun}, {key: gpu-lost}]
",
    );
    let e = errors(&text);
    assert_eq!(e.len(), 2, "{e:#?}");
    assert_eq!(e[0].path, "spec.policy.nodeHealth.conditions[0].status");
    assert!(e[0].hint.as_deref().unwrap().contains("\"True\""));
    assert_eq!(e[1].path, "spec.policy.nodeHealth.taints[0].effect");
    assert!(e[1].message.contains("\"NoRun\" is not a taint effect"));
}

/// Accounting objects: each reference checked with its position and a suggestion, TRES, times
/// and flags parsed as Slurm writes them, cycles in the account tree named.
#[test]
fn accounting_objects_are_checked_with_positions_and_suggestions() {
    let repo = std::fs::read_to_string("examples/repo/cluster.yaml").unwrap();
    let bad = repo
        .replace("flags: [DenyOnLimit]", "flags: [DenyOnLimits]")
        .replace("maxTRESPerUser: gres/gpu=16", "maxTRESPerUser: gpu=16")
        .replace("maxWall: \"12:00:00\"", "maxWall: \"12 hours\"")
        .replace("qos: [normal, gpu-high]", "qos: [normal, gpu-hihg]")
        .replace("        parent: research\n", "        parent: vision\n")
        .replace("accounts: [{name: vision}]", "accounts: [{name: visoin}]");
    let e = load("cluster.yaml", &bad).expect_err("rejected");
    let find = |path: &str| {
        e.iter()
            .find(|d| d.path == path)
            .unwrap_or_else(|| panic!("no error at {path}: {e:#?}"))
    };
    let f = find("spec.accounting.qos[0].flags[0]");
    assert!(
        f.hint.as_deref() == Some("did you mean `DenyOnLimit`?"),
        "{f:?}"
    );
    assert_eq!(f.line, line_of(&bad, "DenyOnLimits"));
    assert!(
        find("spec.accounting.qos[0].limits.maxTRESPerUser")
            .message
            .contains("unknown TRES type \"gpu\"")
    );
    assert!(
        find("spec.accounting.qos[0].limits.maxWall")
            .message
            .contains("not a Slurm time")
    );
    let q = find("spec.accounting.accounts[0].qos[1]");
    assert_eq!(
        (q.message.as_str(), q.hint.as_deref()),
        (
            "no QOS named \"gpu-hihg\"",
            Some("did you mean `gpu-high`?")
        )
    );
    assert!(
        find("spec.accounting.accounts[1].parent")
            .message
            .contains("cycle: vision → vision")
    );
    let u = find("spec.accounting.users[0].accounts[0].name");
    assert_eq!(u.hint.as_deref(), Some("did you mean `vision`?"));
    assert_eq!(u.line, line_of(&bad, "visoin"));

    let disabled = repo.replacen(
        "  accounting:\n    enabled: true",
        "  accounting:\n    enabled: false",
        1,
    );
    let e = load("cluster.yaml", &disabled).expect_err("objects need accounting");
    assert!(
        e.iter()
            .any(|d| d.path == "spec.accounting.enabled" && d.message.contains("not enabled")),
        "{e:#?}"
    );
}

/// The database is an external host or the in-cluster MariaDB, and that one gets the memory
/// slurmdbd wants of it.
#[test]
fn the_database_is_a_host_or_in_cluster_with_enough_memory() {
    let quick = std::fs::read_to_string("examples/quickstart/cluster.yaml").unwrap();
    let both = quick.replace(
        "      user: slurm\n",
        "      user: slurm\n      host: db.example\n",
    );
    let e = load("cluster.yaml", &both).expect_err("both");
    assert!(
        e.iter()
            .any(|d| d.path == "spec.accounting.database.inCluster"
                && d.message.contains("both a host and inCluster")),
        "{e:#?}"
    );
    let neither = quick.replace(
        "      inCluster:\n        storage: 20Gi\n",
        "      noCluster:\n        storage: 20Gi\n",
    );
    assert!(load("cluster.yaml", &neither).is_err());
    let small = quick.replace("limits: {memory: 3Gi}", "limits: {memory: 1Gi}");
    let e = load("cluster.yaml", &small).expect_err("too little memory");
    let d = e
        .iter()
        .find(|d| d.path == "spec.accounting.database.inCluster.resources.limits.memory")
        .unwrap_or_else(|| panic!("{e:#?}"));
    assert!(d.message.contains("3Gi or more"), "{d:?}");
    assert_eq!(d.line, line_of(&small, "limits: {memory: 1Gi}"));
}

#[test]
fn a_canary_needs_one_script_a_real_time_limit_and_canaries() {
    let text = with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      update:\n        canary:\n          replicas: 0\n          readyTimeout: 0s\n          validate: {builtin: gpu, script: \"nvidia-smi\", timeout: 30s}\n",
    );
    let e = errors(&text);
    let at = |path: &str| at(&e, path);
    let r = at("spec.nodeSets[0].update.canary.replicas");
    assert_eq!(r.line, line_of(&text, "replicas: 0"));
    assert!(r.message.contains("validates nothing"), "{r}");
    let v = at("spec.nodeSets[0].update.canary.validate");
    assert!(
        v.message
            .contains("exactly one of builtin, script, configMapRef and check"),
        "{v}"
    );
    let t = at("spec.nodeSets[0].update.canary.validate.timeout");
    assert!(
        t.message
            .contains("shorter than Slurm's smallest time limit"),
        "{t}"
    );
    let ready = at("spec.nodeSets[0].update.canary.readyTimeout");
    assert_eq!(ready.line, line_of(&text, "readyTimeout: 0s"));
    assert!(
        ready
            .message
            .contains("fails every canary before its pod can start"),
        "{ready}"
    );
    assert_eq!(e.len(), 4, "{e:#?}");
    // A built-in name that does not exist is named with the ones that do.
    let text = with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      update: {canary: {replicas: 1, validate: {builtin: nvidia}}}\n",
    );
    let e = errors(&text);
    let d = e
        .iter()
        .find(|d| d.path == "spec.nodeSets[0].update.canary.validate.builtin")
        .unwrap_or_else(|| panic!("{e:#?}"));
    assert_eq!(d.line, line_of(&text, "builtin: nvidia"));
    assert!(
        d.message.contains("hostname") && d.message.contains("nccl"),
        "{d}"
    );
}

#[test]
fn maintenance_windows_parse_and_exist_when_something_waits_for_one() {
    let text = with(
        "  partitions:\n",
        "  policy:\n    maintenanceWindows:\n      - {schedule: \"0 2 * * 6\", duration: 4h}\n      - {schedule: \"0 2 * *\", duration: 30s, timeZone: Mars/Olympus}\n  partitions:\n",
    );
    let e = errors(&text);
    let at = |path: &str| at(&e, path);
    let d = at("spec.policy.maintenanceWindows[0].schedule");
    assert_eq!(d.line, line_of(&text, "0 2 * * 6"));
    assert!(
        d.hint.as_deref().unwrap_or("").contains("days by name"),
        "{d}"
    );
    assert!(
        at("spec.policy.maintenanceWindows[1].schedule")
            .message
            .contains("has 4 fields")
    );
    let d = at("spec.policy.maintenanceWindows[1].duration");
    assert!(d.message.contains("cannot hold a rollout step"), "{d}");
    // Waiting for a window that is never defined.
    let text = with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      update: {window: required}\n",
    )
    .replace(
        "  partitions:\n",
        "  policy: {controlPlaneWindow: required}\n  partitions:\n",
    );
    let e = errors(&text);
    let paths: Vec<&str> = e.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.nodeSets[0].update.window",
            "spec.policy.controlPlaneWindow"
        ],
        "{e:#?}"
    );
    assert!(
        e[1].message
            .contains("slurmctld restarts wait for a maintenance window"),
        "{}",
        e[1]
    );
    assert_eq!(e[1].line, line_of(&text, "controlPlaneWindow"));
    // A control plane either waits or does not: `preferred` is a NodeSet's word.
    let text = with(
        "  partitions:\n",
        "  policy: {controlPlaneWindow: preferred}\n  partitions:\n",
    );
    let d = one(&text);
    assert!(
        d.message.contains("none") && d.message.contains("required"),
        "{d}"
    );
}

/// `slurmops CMD ARGS examples/repo/cluster.yaml`, with no environment.
fn on_the_example(cmd: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .arg(cmd)
        .args(args)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/repo/cluster.yaml"
        ))
        .env_clear()
        .output()
        .unwrap()
}

/// Issue 34: the releases between the two Debian carries validate: 25.11 (run on the bed, built
/// from source) plainly, 25.05 (gates and data parsers only) with a note that says so.
#[test]
fn the_quickstart_validates_on_slurm_25_05_and_25_11() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/quickstart/cluster.yaml"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (release, note) in [("25.11", false), ("25.05", true)] {
        let file = dir.path().join(format!("{release}.yaml"));
        std::fs::write(
            &file,
            text.replace(
                "slurmVersion: \"24.11\"",
                &format!("slurmVersion: \"{release}\""),
            ),
        )
        .unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
            .arg("validate")
            .arg(&file)
            .env_clear()
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{release}: {err}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(": valid ("),
            "{release}"
        );
        assert_eq!(
            err.contains(&format!(
                "note: Slurm {release} is accepted on its version gates and data parsers alone"
            )),
            note,
            "{release}: {err}"
        );
    }
}

/// The digests of the repository example's prolog, epilog, plugstack.conf and health check.
const REPO_PROGRAMS: [&str; 4] = [
    "sha256:2e03ebd067bbae0add4d35fd98669fbd4975653e7fd07761ed12cdbd8188d22f",
    "sha256:b410e301d55b4f2f4439f9d20ad0bfa6dc940e132e0052378f6b3d99b675a0d4",
    "sha256:9c2264ab57025f55a13d927075863e263cbab99216ac0ff6307be2a6345d88d7",
    "sha256:3a90e532dec5cd66251aeb89a4cc20e779d788d13cdf63593c590e14523ccded",
];

/// Issue 33: a pull request's CI refuses what the daemon will refuse. `validate --guardrails`
/// and `plan --guardrails` check the daemon's safe defaults, widened by the same flags as the
/// install's; the repository example asks for ServiceAccounts and a privileged login container
/// (enroot), so it needs them.
#[test]
fn validate_and_plan_with_guardrails_refuse_what_the_daemon_refuses_and_the_same_flags_widen_it() {
    for (cmd, ok) in [("validate", 0), ("plan", 2)] {
        let run = |args: &[&str]| on_the_example(cmd, args);
        let out = run(&[]);
        assert_eq!(
            out.status.code(),
            Some(ok),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = run(&["--guardrails"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        let text = include_str!("../../examples/repo/cluster.yaml");
        let login_sa = line_of(text, "serviceAccountName: slurm-login");
        assert!(
            err.contains(&format!("cluster.yaml:{login_sa}:"))
                && err.contains("spec.loginSets[0].serviceAccountName")
                && err.contains("--allow-service-account"),
            "{cmd}: {err}"
        );
        assert!(
            err.contains("spec.loginSets[0].containerSecurityContext.privileged")
                && err.contains("--allow-privileged"),
            "{cmd}: {err}"
        );
        // Secrets beyond the cluster's own, and the host the database password goes to.
        let pull = line_of(text, "imagePullSecrets: [ghcr-pull]");
        assert!(
            err.contains(&format!("cluster.yaml:{pull}:"))
                && err.contains("Secret ghcr-pull")
                && err.contains("--allow-secret"),
            "{cmd}: {err}"
        );
        assert!(
            err.contains("spec.loginSets[0].sssdConf.name: Secret login-sssd"),
            "{cmd}: {err}"
        );
        assert!(
            err.contains("spec.accounting.database.host") && err.contains("--allow-database-host"),
            "{cmd}: {err}"
        );
        // A ConfigMap reference is no Secret (it is refused as a ConfigMap the install does not
        // name, issue 54).
        assert!(!err.contains("Secret slurm-oci"), "{cmd}: {err}");
        assert!(err.contains("ConfigMap slurm-oci"), "{cmd}: {err}");
        let out = run(&[
            "--guardrails",
            "--allow-privileged",
            "--allow-service-account=slurmctld,slurm-login,slurm-worker",
            "--allow-secret=ghcr-pull,login-ssh,login-sssd",
            "--allow-database-host=mariadb.databases.svc.cluster.local",
            // The code it runs (issue 54): images, the reviewed scripts, the claim, oci.conf's
            // ConfigMap.
            "--allow-image=ghcr.io/slinkyproject,nvcr.io/nvidia/k8s/dcgm-exporter",
            &format!("--allow-program={}", REPO_PROGRAMS.join(",")),
            "--allow-volume-claim=lustre-home",
            "--allow-config-map=slurm-oci",
            // Issue 76: Slurm keys beyond data, and a Slurm operator from git.
            "--allow-slurm-key=SlurmctldParameters,PriorityType",
            "--allow-slurm-admin=bob",
            "--allow-annotation=service.beta.kubernetes.io/",
        ]);
        assert_eq!(
            out.status.code(),
            Some(ok),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Issue 33: the guardrails as a policy file, the one the install mounts into the daemon
/// (`install --policy`), given as is to a pull request's CI: it widens as the flags do, the two
/// add up, and a policy file with a mistake refuses everything, at its position.
#[test]
fn a_policy_file_widens_the_guardrails_as_the_flags_do_and_a_broken_one_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    let run = |cmd: &str, args: &[&str]| {
        let policy = policy.to_str().unwrap();
        let mut all = vec!["--guardrails", "--policy", policy];
        all.extend(args);
        let out = on_the_example(cmd, &all);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    std::fs::write(
        &policy,
        "kind: Guardrails\n\
         allowServiceAccounts: [slurmctld, slurm-login, slurm-worker]\n\
         allowSecrets: [ghcr-pull, login-ssh, login-sssd]\n\
         allowDatabaseHosts: [mariadb.databases.svc.cluster.local]\n\
         allowImages: [ghcr.io/slinkyproject, nvcr.io/nvidia/k8s/dcgm-exporter]\n\
         allowVolumeClaims: [lustre-home]\n\
         allowConfigMaps: [slurm-oci]\n\
         allowSlurmKeys: [SlurmctldParameters, PriorityType]\n\
         allowSlurmAdmins: [bob]\n\
         allowAnnotations: [service.beta.kubernetes.io/]\n"
            .to_string()
            + &format!("allowPrograms: [{}]\n", REPO_PROGRAMS.join(", ")),
    )
    .unwrap();
    // The file alone lacks the privileged login container; the flag adds it.
    let (code, err) = run("validate", &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("containerSecurityContext.privileged")
            && !err.contains("serviceAccountName")
            && !err.contains("Secret ghcr-pull"),
        "{err}"
    );
    for (cmd, ok) in [("validate", 0), ("plan", 2)] {
        let (code, err) = run(cmd, &["--allow-privileged"]);
        assert_eq!(code, Some(ok), "{cmd}: {err}");
    }
    std::fs::write(&policy, "allowPrivileged: yes\nallowSecret: [ghcr-pull]\n").unwrap();
    for cmd in ["validate", "plan"] {
        let (code, err) = run(cmd, &["--allow-privileged"]);
        assert_eq!(code, Some(1), "{cmd}: {err}");
        assert!(
            err.contains("policy.yaml:1:18: error: allowPrivileged: allowPrivileged is true or false")
                && err.contains("policy.yaml:2:1: error: allowSecret: unknown key allowSecret (did you mean allowSecrets?)")
                && err.contains("2 problems in the policy file; nothing was checked"),
            "{cmd}: {err}"
        );
    }
}

/// Active checks: each mistake is reported at its position, with how to fix it, all at once.
#[test]
fn active_checks_are_refused_with_their_positions() {
    let text = with(
        "  partitions:\n",
        "  policy:\n    activeChecks:\n      - {name: gpu, builtin: gpu, level: 7}\n      - {name: gpu, script: 'true', builtin: ib}\n      - {name: Bad_Name, script: 'true', nodeSets: [h200], maxConcurrent: 0, schedule: \"0 3 * * 0\"}\n      - {name: idle, script: 'true', onRegister: false, timeout: 1s}\n      - {name: nvl, script: 'true', features: [nvlink]}\n  partitions:\n",
    );
    let e = errors(&text);
    let at = |path: &str| at(&e, path);
    let d = at("spec.policy.activeChecks[0].level");
    assert_eq!(d.line, line_of(&text, "level: 7"));
    assert!(d.message.contains("no level 7"), "{d}");
    assert!(
        at("spec.policy.activeChecks[1]")
            .message
            .contains("exactly one of builtin and script")
    );
    assert!(
        at("spec.policy.activeChecks[1].name")
            .message
            .contains("a second check is named \"gpu\"")
    );
    assert!(
        at("spec.policy.activeChecks[2].name")
            .message
            .contains("cannot name a check")
    );
    let d = at("spec.policy.activeChecks[2].nodeSets[0]");
    assert!(d.message.contains("no NodeSet is named \"h200\""), "{d}");
    assert!(
        at("spec.policy.activeChecks[2].maxConcurrent")
            .message
            .contains("lets no check run")
    );
    let d = at("spec.policy.activeChecks[2].schedule");
    assert!(
        d.hint.as_deref().unwrap_or("").contains("days by name"),
        "{d}"
    );
    assert!(
        at("spec.policy.activeChecks[3]")
            .message
            .contains("never runs")
    );
    assert!(
        at("spec.policy.activeChecks[3].timeout")
            .message
            .contains("too short")
    );
    let d = at("spec.policy.activeChecks[4].features");
    assert!(d.message.contains("covers no NodeSet"), "{d}");
}

/// A check across nodes: scheduled only, a built-in that runs across nodes, and blocks only
/// where there is block topology.
#[test]
fn checks_across_nodes_are_refused_where_they_cannot_run() {
    let text = with(
        "  partitions:\n",
        "  policy:\n    activeChecks:\n      - {name: a, builtin: gpu, span: pair, schedule: '0 3 * * *'}\n      - {name: b, builtin: ib, span: block, onRegister: false, schedule: '0 3 * * *'}\n      - {name: c, builtin: nccl, span: pair, onRegister: false, schedule: '0 3 * * *'}\n  partitions:\n",
    );
    let e = errors(&text);
    let at = |path: &str| at(&e, path);
    let d = at("spec.policy.activeChecks[0].onRegister");
    assert!(d.message.contains("cannot hold a new worker"), "{d}");
    assert_eq!(d.line, line_of(&text, "name: a,"));
    let d = at("spec.policy.activeChecks[0].span");
    assert!(
        d.message
            .contains("built-in gpu check does not run across nodes"),
        "{d}"
    );
    let spans: Vec<&str> = e
        .iter()
        .filter(|d| d.path == "spec.policy.activeChecks[1].span")
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        spans
            .iter()
            .any(|m| m.contains("built-in ib check does not run across nodes as span block")),
        "{spans:?}"
    );
    assert!(
        spans.iter().any(|m| m.contains("is not in block topology")),
        "{spans:?}"
    );
    assert!(
        e.iter()
            .all(|d| !d.path.starts_with("spec.policy.activeChecks[2]")),
        "nccl across a pair is fine: {e:#?}"
    );
}

/// A mapping that misses a field inside an optional one names the field, not "expected a
/// mapping, found a mapping".
#[test]
fn a_field_missing_in_an_optional_mapping_is_named() {
    let text = with(
        "      replicas: 2\n",
        "      replicas: 2\n      gpus: {count: 4}\n",
    );
    let d = one(&text);
    assert_eq!(d.path, "spec.nodeSets[0].gpus");
    assert!(d.message.contains("missing required field `type`"), "{d}");
}

/// A canary validated by an active check: the check exists, and the canaries take it as it runs
/// (one job each for a check of one node, one across them all for a check across nodes).
#[test]
fn a_canary_validated_by_a_check_names_one_that_exists_and_takes_it_as_it_runs() {
    let canary = |validate: &str| {
        with(
            "      memory: 1Gi\n",
            &format!(
                "      memory: 1Gi\n      update:\n        canary: {{replicas: 2, validate: {validate}}}\n"
            ),
        )
    };
    let d = one(&canary("{check: nccl}"));
    assert_eq!(d.path, "spec.nodeSets[0].update.canary.validate.check");
    assert!(
        d.message.contains("no active check is named \"nccl\""),
        "{d}"
    );
    assert!(
        d.hint
            .as_deref()
            .unwrap_or("")
            .contains("spec.policy.activeChecks"),
        "{d}"
    );
    let checks = "  policy:\n    activeChecks:\n      - {name: pairs, script: 'true', span: pair, onRegister: false, schedule: '0 3 * * *'}\n      - {name: quick, script: 'true'}\n  partitions:\n";
    let text = canary("{check: pairs}").replace("  partitions:\n", checks);
    let d = one(&text);
    assert_eq!(d.path, "spec.nodeSets[0].update.canary.validate.nodes");
    assert!(
        d.message
            .contains("nodes: allCanaries: it runs across nodes"),
        "{d}"
    );
    let fine = canary("{check: pairs, nodes: allCanaries}").replace("  partitions:\n", checks);
    assert!(load("cluster.yaml", &fine).is_ok());
    let fine = canary("{check: quick}").replace("  partitions:\n", checks);
    assert!(load("cluster.yaml", &fine).is_ok());
    let both = canary("{check: quick, builtin: hostname}").replace("  partitions:\n", checks);
    assert!(
        one(&both)
            .message
            .contains("exactly one of builtin, script, configMapRef and check")
    );
}

/// Every rendered object carries `metadata`'s labels and annotations: what Kubernetes refuses on
/// an object (a label value past 63 characters, annotations past 256 KiB) and a count that would
/// multiply into every object (150,000 labels made one commit's rendering 400 MB) are errors at
/// their place, before anything is rendered.
#[test]
fn labels_and_annotations_past_kubernetes_limits_or_too_many_are_refused_where_they_stand() {
    let long = with(
        "  namespace: slurm\n",
        &format!(
            "  namespace: slurm\n  labels: {{team: {}}}\n",
            "x".repeat(64)
        ),
    );
    let e = one(&long);
    assert_eq!(e.path, "metadata.labels.team", "{e}");
    assert!(e.message.contains("at most 63"), "{e}");
    assert_eq!(e.line, line_of(&long, "labels:"), "{e}");

    let many: String = (0..257).map(|i| format!("    k{i}: v\n")).collect();
    let many = with(
        "  namespace: slurm\n",
        &format!("  namespace: slurm\n  labels:\n{many}"),
    );
    let e = one(&many);
    assert_eq!(e.path, "metadata.labels", "{e}");
    assert!(
        e.message
            .starts_with("257 labels; slurmops takes at most 256"),
        "{e}"
    );

    let big = with(
        "  namespace: slurm\n",
        &format!(
            "  namespace: slurm\n  annotations: {{note: {}}}\n",
            "x".repeat(300 * 1024)
        ),
    );
    let e = one(&big);
    assert_eq!(e.path, "metadata.annotations", "{e}");
    assert!(e.message.contains("at most 262144"), "{e}");

    // At the limits, valid.
    let fine: String = (0..256)
        .map(|i| format!("    k{i}: {}\n", "v".repeat(63)))
        .collect();
    load(
        "cluster.yaml",
        &with(
            "  namespace: slurm\n",
            &format!("  namespace: slurm\n  labels:\n{fine}"),
        ),
    )
    .expect("256 labels of 63 characters are valid");
}

/// `update.requeue` says which jobs a rollout requeues; with `runningJobs: wait` (the default) it
/// would do nothing, which is refused at its line. With `runningJobs: requeue` it is valid.
#[test]
fn requeue_selectors_without_running_jobs_requeue_are_refused_at_their_line() {
    let text = with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      update:\n        requeue: {after: 2h, partitions: [batch]}\n",
    );
    let d = one(&text);
    assert_eq!(d.path, "spec.nodeSets[0].update.requeue", "{d}");
    assert_eq!(d.line, line_of(&text, "requeue:"));
    assert!(d.message.contains("its runningJobs is wait"), "{d}");
    assert!(
        d.hint
            .as_deref()
            .unwrap_or("")
            .contains("runningJobs: requeue"),
        "{d}"
    );
    let fine = text.replace(
        "      update:\n",
        "      update:\n        runningJobs: requeue\n",
    );
    load("cluster.yaml", &fine).expect("runningJobs: requeue with its selectors is valid");
    // A word it does not know is refused, not read as wait.
    let e = errors(&fine.replace("runningJobs: requeue", "runningJobs: kill"));
    assert!(
        e.iter()
            .any(|d| d.path == "spec.nodeSets[0].update.runningJobs"),
        "{e:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 76: values spliced into Slurm's text are checked as the type they are, at their
// position; and what a file costs past the parser is bounded before it is typed or rendered.
// ---------------------------------------------------------------------------------------------

/// The minimal example on Slurm 25.11 with TOPOLOGY (a `spec.topology` block) before partitions.
fn with_topology(topology: &str) -> String {
    with("  partitions:\n", &format!("{topology}  partitions:\n")).replace("\"24.11\"", "\"25.11\"")
}

#[test]
fn a_node_label_that_would_add_lines_to_topology_yaml_is_refused_at_its_line() {
    let text = with_topology(
        "  topology:\n    block:\n      nodeLabel: \"nvidia.com/gpu.clique\\n- topology: evil\"\n      blocks: [r1]\n      nodeSets: [cpu]\n      blockSize: 2\n",
    );
    let d = one(&text);
    assert_eq!(d.path, "spec.topology.block.nodeLabel", "{d}");
    assert_eq!(d.line, line_of(&text, "nodeLabel:"));
    assert!(d.message.contains("not a Kubernetes label key"), "{d}");
    assert!(
        d.hint
            .as_deref()
            .unwrap_or("")
            .contains("e.g. nvidia.com/gpu.clique"),
        "{d}"
    );
    for bad in ["rack label", "a/b/c", "-rack", "bad_prefix/rack", "rack:x"] {
        let text = with_topology(&format!(
            "  topology:\n    tree:\n      nodeLabel: \"{bad}\"\n      switches: [s1]\n      nodeSets: [cpu]\n"
        ));
        let d = one(&text);
        assert_eq!(d.path, "spec.topology.tree.nodeLabel", "{bad}: {d}");
    }
    for good in [
        "rack",
        "topology.kubernetes.io/zone",
        "example.com/leaf_switch.1",
    ] {
        let text = with_topology(&format!(
            "  topology:\n    tree:\n      nodeLabel: {good}\n      switches: [s1]\n      nodeSets: [cpu]\n"
        ));
        load("cluster.yaml", &text).unwrap_or_else(|e| panic!("{good}: {e:#?}"));
    }
}

#[test]
fn a_block_or_switch_that_would_add_lines_to_topology_yaml_is_refused_at_its_line() {
    for (kind, units, rest) in [
        ("block", "blocks", "      blockSize: 2\n"),
        ("tree", "switches", ""),
    ] {
        for bad in [
            "a\\n- topology: evil",
            "a\\\"b",
            "a,b",
            "a b",
            "a:b",
            "a=b",
            "a#b",
        ] {
            let text = with_topology(&format!(
                "  topology:\n    {kind}:\n      nodeLabel: rack\n      {units}:\n        - r1\n        - \"{bad}\"\n      nodeSets: [cpu]\n{rest}"
            ));
            let d = one(&text);
            assert_eq!(
                d.path,
                format!("spec.topology.{kind}.{units}[1]"),
                "{bad}: {d}"
            );
            assert_eq!(
                d.line,
                line_of(&text, &format!("- \"{bad}\"")),
                "{bad}: {d}"
            );
            assert!(d.message.contains("is not a Kubernetes label value"), "{d}");
            assert!(
                d.hint.as_deref().unwrap_or("").contains("topology.yaml"),
                "{d}"
            );
        }
    }
}

#[test]
fn database_words_written_into_slurmdbd_conf_are_one_word() {
    let accounting = |db: &str| {
        with(
            "  partitions:\n",
            &format!(
                "  accounting:\n    enabled: true\n    database:\n{db}      password: {{name: slurm-db, key: password}}\n  partitions:\n"
            ),
        )
    };
    load(
        "cluster.yaml",
        &accounting("      host: db.example.com\n      user: slurm\n"),
    )
    .expect("a host and a user of one word each are valid");
    for (field, db) in [
        (
            "host",
            "      host: \"db\\nPluginDir=/tmp/evil\"\n      user: slurm\n",
        ),
        (
            "user",
            "      host: db\n      user: \"slurm DbdHost=evil\"\n",
        ),
        (
            "name",
            "      host: db\n      user: slurm\n      name: \"acct#x\"\n",
        ),
    ] {
        let text = accounting(db);
        let d = one(&text);
        assert_eq!(d.path, format!("spec.accounting.database.{field}"), "{d}");
        assert_eq!(d.line, line_of(&text, &format!("      {field}: ")), "{d}");
        assert!(d.message.contains("slurmdbd.conf"), "{d}");
    }
}

#[test]
fn a_feature_with_a_quote_is_refused_at_its_line() {
    let text = with(
        "      memory: 1Gi\n",
        "      memory: 1Gi\n      features: [ok, \"a\\\"b\"]\n",
    );
    let d = one(&text);
    assert_eq!(d.path, "spec.nodeSets[0].features[1]", "{d}");
    assert_eq!(d.line, line_of(&text, "features:"));
}

#[test]
fn metadata_copied_onto_every_object_past_the_budget_is_refused_at_metadata() {
    let sets: String = (0..999)
        .map(|i| format!("    - {{name: set-{i}, replicas: 1}}\n"))
        .collect();
    let text = with(
        "  namespace: slurm\n",
        &format!(
            "  namespace: slurm\n  annotations:\n    big: {}\n",
            "x".repeat(200 << 10)
        ),
    )
    .replace("  nodeSets:\n", &format!("  nodeSets:\n{sets}"));
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e:#?}");
    let d = &e[0];
    assert_eq!(d.path, "metadata.annotations", "{d}");
    assert_eq!(d.line, line_of(&text, "  annotations:") + 1, "{d}");
    assert!(d.message.contains("at most 16.0 MiB"), "{d}");
    assert!(d.hint.as_deref().unwrap_or("").contains("short"), "{d}");
}

#[test]
fn bare_volumes_past_the_budget_are_refused_at_their_list() {
    let vols: String = (0..5000)
        .map(|i| format!("        - {{name: v{i}}}\n"))
        .collect();
    let text = with(
        "      memory: 1Gi\n",
        &format!("      memory: 1Gi\n      volumes:\n{vols}"),
    );
    let d = one(&text);
    assert_eq!(d.path, "spec.nodeSets[0].volumes", "{d}");
    assert!(d.message.contains("at most 16.0 MiB"), "{d}");
}

#[test]
fn lists_render_merges_or_parses_item_by_item_are_bounded() {
    let keys: String = (0..1001).map(|i| format!("      K{i}: v\n")).collect();
    let text = with(
        "  partitions:\n",
        &format!("  controller:\n    slurmConf:\n{keys}  partitions:\n"),
    );
    let d = one(&text);
    assert_eq!(d.path, "spec.controller.slurmConf", "{d}");
    assert!(d.message.contains("at most 1000"), "{d}");
    let items = vec!["a"; 1001].join(",");
    let text = with(
        "  partitions:\n",
        &format!(
            "  controller:\n    slurmConf:\n      SlurmctldParameters: \"{items}\"\n  partitions:\n"
        ),
    );
    let d = one(&text);
    assert_eq!(
        d.path, "spec.controller.slurmConf.SlurmctldParameters",
        "{d}"
    );
    let tres: String = (0..1000).map(|i| format!(",gres/g{i}=1")).collect();
    let text = with(
        "  partitions:\n",
        &format!(
            "  accounting:\n    enabled: true\n    database: {{host: db, user: u, password: {{name: slurm-db, key: p}}}}\n    qos:\n      - name: q\n        limits: {{maxTRESPerJob: \"cpu=1{tres}\"}}\n  partitions:\n"
        ),
    );
    let d = one(&text);
    assert_eq!(d.path, "spec.accounting.qos[0].limits.maxTRESPerJob", "{d}");
    assert!(d.message.contains("at most 4096"), "{d}");
}

/// Scheduled copies (issue 77): a cron schedule of five fields Kubernetes takes, `keep` of at
/// least one, a claim to write to and an accounting database to copy — each refused at its line.
#[test]
fn a_backup_schedule_is_checked_at_its_line() {
    let db = "  accounting:\n    enabled: true\n    database:\n      user: slurm\n      password: {name: slurm-db, key: password}\n      inCluster: {storage: 1Gi}\n";
    let text = |backup: &str, accounting: &str| {
        with(
            "  nodeSets:\n",
            &format!("  backup:\n{backup}{accounting}  nodeSets:\n"),
        )
    };
    let good = "    claim: slurm-copies\n    schedule: {cron: \"30 2 * * MON-FRI\", keep: 7}\n";
    load("cluster.yaml", &text(good, db)).unwrap_or_else(|e| panic!("{e:#?}"));

    for (cron, words) in [
        ("0 3 * *", "has 4 fields; a schedule has 5"),
        ("0 3 * * * *", "has 6 fields"),
        ("0 25 * * *", "hour \"25\": 25 is outside 0-23"),
        ("61 * * * *", "minute \"61\": 61 is outside 0-59"),
        ("0 3 * * 7", "day of week \"7\": 7 is outside 0-6"),
        ("0 3 * JAM *", "month \"JAM\": \"JAM\" is not a number"),
        ("*/0 * * * *", "the step \"0\" is not a number of 1 or more"),
        ("0 5-2 * * *", "the range 5-2 runs backwards"),
    ] {
        let t = text(
            &format!("    claim: slurm-copies\n    schedule: {{cron: \"{cron}\", keep: 7}}\n"),
            db,
        );
        let d = one(&t);
        assert_eq!(d.path, "spec.backup.schedule.cron", "{cron}");
        assert_eq!(d.line, line_of(&t, "schedule:"), "{cron}");
        assert!(d.message.contains(words), "{cron}: {}", d.message);
        assert!(
            d.hint.as_deref().unwrap_or("").contains("\"0 3 * * *\""),
            "{d:?}"
        );
    }

    let t = text(
        "    claim: slurm-copies\n    schedule:\n      cron: \"0 3 * * *\"\n      keep: 0\n",
        db,
    );
    let d = one(&t);
    assert_eq!(d.path, "spec.backup.schedule.keep");
    assert_eq!((d.line, d.col), (line_of(&t, "keep: 0"), 13));
    assert!(d.message.contains("it must be 1 to 1000"), "{}", d.message);

    // Only ownCopies: nowhere to write them.
    let t = text(
        "    ownCopies: true\n    schedule: {cron: \"0 3 * * *\", keep: 7}\n",
        db,
    );
    let d = one(&t);
    assert_eq!(d.path, "spec.backup.schedule");
    assert_eq!(d.line, line_of(&t, "schedule:"));
    assert!(
        d.message
            .contains("scheduled copies are written to spec.backup.claim, and none is set"),
        "{}",
        d.message
    );
    // No accounting database: nothing to copy.
    let d = one(&text(good, ""));
    assert_eq!(d.path, "spec.backup.schedule");
    assert!(
        d.message
            .contains("scheduled copies are of the accounting database"),
        "{}",
        d.message
    );
    // Unknown fields are refused as everywhere.
    let d = one(&text(
        "    claim: slurm-copies\n    schedule: {cron: \"0 3 * * *\", keep: 7, retain: 3}\n",
        db,
    ));
    assert!(
        d.message.contains("unknown field `retain`"),
        "{}",
        d.message
    );
}
