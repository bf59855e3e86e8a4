use super::*;
use crate::apply::rbac;
use serde_json::Value as Json;

pub(crate) fn install() -> Install {
    Install {
        namespace: "slurmops".into(),
        cluster_namespaces: vec!["slurm".into()],
        cluster: None,
        image: "img".into(),
        repo: "https://git.example/infra.git".into(),
        branch: "main".into(),
        path: String::new(),
        replicas: 2,
        git_secret: None,
        webhook_secret: None,
        ui_token_secret: None,
        node_reader: true,
        jwt_secrets: vec!["slurm-jwt".into()],
        job_user: None,
        allowed_signers: None,
        allowed_gpg_keys: None,
        network_policy: true,
        reachable_from: Vec::new(),
        guard: Widened::default(),
        workers: 1000,
        jobs: 50_000,
    }
}

#[test]
fn the_memory_limit_follows_the_workers_as_measured() {
    assert_eq!(memory_limit_mib(0, 0), 256);
    let small = memory_limit_mib(1000, 50_000);
    let large = memory_limit_mib(10_000, 50_000);
    assert!(memory_limit_mib(1000, 100_000) > small);
    // Half again over the measured peak, at every size.
    for (w, limit) in [(1000, small), (10_000, large)] {
        let peak =
            PEAK_BASE_MIB + PEAK_PER_THOUSAND_MIB * w / 1000 + 5 * PEAK_PER_TEN_THOUSAND_JOBS_MIB;
        assert!(
            limit * 2 >= peak * 3 && limit % 64 == 0,
            "{w}: {limit} for {peak}"
        );
    }
    let objs = objects(&Install {
        workers: 10_000,
        ..install()
    });
    let dep = &find(&objs, "Deployment")[0];
    let limit = &dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"];
    assert_eq!(limit, &serde_json::json!(format!("{large}Mi")));
}

fn find<'a>(objs: &'a [Json], kind: &str) -> Vec<&'a Json> {
    objs.iter().filter(|o| o["kind"] == kind).collect()
}

#[test]
fn the_role_reads_one_secret_and_one_lease_by_name_and_writes_no_secret() {
    let objs = objects(&install());
    let in_clusters = find(&objs, "Role")
        .into_iter()
        .filter(|r| r["metadata"]["namespace"] == "slurm");
    for role in in_clusters {
        let rules = role["rules"].as_array().unwrap();
        let on = |res: &str| -> Vec<&Json> {
            rules
                .iter()
                .filter(|r| r["resources"].as_array().unwrap().iter().any(|x| x == res))
                .collect()
        };
        let secrets = on("secrets");
        assert_eq!(secrets.len(), 1);
        assert_eq!(secrets[0]["verbs"], serde_json::json!(["get"]));
        assert_eq!(
            secrets[0]["resourceNames"],
            serde_json::json!(["slurm-jwt"])
        );
        for lease in on("leases") {
            let verbs = lease["verbs"].as_array().unwrap();
            assert!(
                verbs == &[serde_json::json!("create")]
                    || lease["resourceNames"] == serde_json::json!([rbac::LEASE]),
                "{lease}"
            );
        }
    }
    let mut no_slurm = install();
    no_slurm.jwt_secrets.clear();
    let objs = objects(&no_slurm);
    assert!(objs.iter().all(|o| !o.to_string().contains("\"secrets\"")));
    let args = &find(&objs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(args.as_array().unwrap().iter().any(|a| a == "--no-slurm"));
}

#[test]
fn where_no_cluster_lives_the_daemon_holds_its_lease_status_and_events_and_makes_no_pod() {
    let objs = objects(&install());
    let home: Vec<&Json> = find(&objs, "Role")
        .into_iter()
        .filter(|r| r["metadata"]["namespace"] == "slurmops")
        .collect();
    assert_eq!(home.len(), 1);
    for rule in home[0]["rules"].as_array().unwrap() {
        let resources = rule["resources"].to_string();
        let verbs = rule["verbs"].to_string();
        let named = !rule["resourceNames"].is_null();
        let ok = match resources.as_str() {
            r#"["leases"]"# | r#"["configmaps"]"# => verbs == r#"["create"]"# || named,
            r#"["events"]"# => true,
            // The leader's label on its own pod: no pod is made, read or deleted there.
            r#"["pods"]"# => verbs == r#"["patch"]"#,
            _ => false,
        };
        assert!(ok, "{rule}");
    }
    // The Service selects the leader's label: a request never reaches a standby.
    let service = &find(&objs, "Service")[0]["spec"]["selector"];
    assert_eq!(service[crate::vocab::LABEL_LEADER], "true");
    assert_eq!(service["app.kubernetes.io/name"], "slurmops");
    let env = find(&objs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
        .to_string();
    assert!(env.contains(r#""fieldPath":"metadata.name""#), "{env}");
    let args = find(&objs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        .to_string();
    assert!(
        args.contains("--cluster-namespace=slurm")
            && !args.contains("--cluster-namespace=slurmops"),
        "{args}"
    );
    // Installed for its own namespace (the default): the workload Role there, told to apply there.
    let own = objects(&Install {
        cluster_namespaces: Vec::new(),
        ..install()
    });
    let roles = find(&own, "Role");
    assert_eq!(roles.len(), 1);
    assert!(roles[0].to_string().contains("\"pods\""));
    let args = find(&own, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        .to_string();
    assert!(args.contains("--cluster-namespace=slurmops"), "{args}");
}

#[test]
fn replicas_spread_and_a_pdb_keeps_one_up_and_signers_come_from_config_maps() {
    let i = install();
    assert!(!i.verifies_signatures());
    let objs = objects(&i);
    let pdb = find(&objs, "PodDisruptionBudget");
    assert_eq!(pdb[0]["spec"]["maxUnavailable"], 1);
    let pod = &find(&objs, "Deployment")[0]["spec"]["template"]["spec"];
    assert_eq!(
        pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
            ["topologyKey"],
        "kubernetes.io/hostname"
    );

    let signed = Install {
        allowed_signers: Some("signers".into()),
        allowed_gpg_keys: Some("gpg-keys".into()),
        guard: Widened {
            policy: Some("guardrails".into()),
            ..Widened::default()
        },
        ..install()
    };
    assert!(signed.verifies_signatures());
    let objs = objects(&signed);
    let pod = &find(&objs, "Deployment")[0]["spec"]["template"]["spec"];
    let args = pod["containers"][0]["args"].to_string();
    assert!(args.contains("--allowed-signers=/etc/slurmops/signers/allowed_signers"));
    assert!(args.contains("--allowed-gpg-keys=/etc/slurmops/gpg/allowed_gpg_keys"));
    assert!(args.contains("--policy=/etc/slurmops/policy/policy.yaml"));
    let volumes = pod["volumes"].to_string();
    assert!(volumes.contains("\"name\":\"signers\"") && volumes.contains("\"gpg-keys\""));
    assert!(volumes.contains("\"guardrails\""), "{volumes}");
}

#[test]
fn a_daemon_per_cluster_gets_its_own_names_lease_and_pods() {
    let a = Install {
        cluster: Some("a".into()),
        ..install()
    };
    let objs = objects(&a);
    for o in &objs {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        assert!(name.starts_with("slurmops-a"), "{name}");
    }
    let dep = &find(&objs, "Deployment")[0];
    assert_eq!(
        dep["spec"]["selector"]["matchLabels"][crate::vocab::LABEL_CLUSTER],
        "a"
    );
    assert!(
        dep["spec"]["template"]["spec"]["containers"][0]["args"]
            .to_string()
            .contains("--cluster=a")
    );
    let roles = find(&objs, "Role");
    let leases: Vec<&Json> = roles[0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["resources"] == serde_json::json!(["leases"]) && r.get("resourceNames").is_some()
        })
        .collect();
    assert_eq!(
        leases[0]["resourceNames"],
        serde_json::json!(["slurmops-leader-a"])
    );
    // The one-per-namespace install keeps its names and selector.
    let one = objects(&install());
    assert_eq!(find(&one, "Deployment")[0]["metadata"]["name"], "slurmops");
    assert!(
        find(&one, "Deployment")[0]["spec"]["selector"]["matchLabels"]
            .get(crate::vocab::LABEL_CLUSTER)
            .is_none()
    );
}

#[test]
fn the_daemon_s_port_is_reachable_from_pods_only_and_only_its_port() {
    use crate::render::network::reach::{Network, Pod, Source};
    let policies = |i: &Install| -> Vec<_> {
        find(&objects(i), "NetworkPolicy")
            .into_iter()
            .map(|o| serde_json::from_value(o.clone()).unwrap())
            .collect()
    };
    let per_cluster = Install {
        cluster: Some("c".into()),
        ..install()
    };
    // Its pods, as the Deployment labels them (a daemon per cluster's carry the cluster).
    let pod_of = |i: &Install| {
        let objs = objects(i);
        let labels = &find(&objs, "Deployment")[0]["spec"]["template"]["metadata"]["labels"];
        Pod {
            namespace: i.namespace.clone(),
            labels: serde_json::from_value(labels.clone()).unwrap(),
            ..Pod::default()
        }
    };
    let anywhere = Source::Pod(Pod::new("ingress", &[("app", "proxy")]));
    let outside = Source::Outside("203.0.113.7".parse().unwrap());
    for i in [install(), per_cluster] {
        let net = Network::new(policies(&i));
        let daemon = pod_of(&i);
        assert!(net.allows(&anywhere, &daemon, 8080, "TCP"), "{}", i.name());
        assert!(!net.allows(&anywhere, &daemon, 9090, "TCP"));
        assert!(!net.allows(&outside, &daemon, 8080, "TCP"));
    }
    // Namespaces named: those alone.
    let named = Install {
        reachable_from: vec!["monitoring".into()],
        ..install()
    };
    let net = Network::new(policies(&named));
    let daemon = pod_of(&named);
    let from = |ns: &str| Source::Pod(Pod::new(ns, &[]));
    assert!(net.allows(&from("monitoring"), &daemon, 8080, "TCP"));
    assert!(!net.allows(&from("ingress"), &daemon, 8080, "TCP"));
    // Turned off: none.
    let off = Install {
        network_policy: false,
        ..install()
    };
    assert!(policies(&off).is_empty());
}
