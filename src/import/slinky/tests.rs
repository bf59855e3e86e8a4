//! The import of Slinky's chart values, run on whole values files: what maps, what is reported
//! and how.

use super::*;

fn run(files: &[&str]) -> Imported {
    let files: Vec<(String, String)> = files
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("values{i}.yaml"), t.to_string()))
        .collect();
    let o = Options {
        name: "slurm".into(),
        namespace: "slurm".into(),
        slurm_version: None,
    };
    import(&files, &o).unwrap()
}

fn load(i: &Imported) -> crate::cluster::ClusterFile {
    crate::cluster::load("cluster.yaml", &i.yaml).unwrap()
}

#[test]
fn a_gpu_overlay_maps_to_a_nodeset_of_the_same_size_and_a_partition() {
    let i = run(&[r#"
slurmKey: {secretRef: {name: keys, key: slurm.key}}
jwtKey: {secretRef: {name: jwt, key: jwt.key}}
controller:
  slurmctld:
    image: {repository: ghcr.io/slinkyproject/slurmctld, tag: 25.11-ubuntu24.04}
  extraConf: |
    MaxJobCount=200000 MinJobAge=300
nodesets:
  h100:
    replicas: 16
    slurmd:
      image: {repository: ghcr.io/slinkyproject/slurmd, tag: 25.11-ubuntu24.04}
      resources:
        limits: {cpu: "96", memory: 1800Gi, nvidia.com/gpu: 8}
    extraConf: Features=h100,ib Weight=10 Gres=gpu:h100:8
    updateStrategy: {rollingUpdate: {maxUnavailable: 2}}
partitions:
  gpu: {nodesets: [h100], configMap: {Default: "YES", MaxTime: "2-00:00:00"}}
"#]);
    let c = load(&i).spec;
    assert_eq!(c.slurm_version, "25.11");
    assert_eq!(c.auth.slurm_key.name, "keys");
    let n = &c.node_sets[0];
    assert_eq!(n.name, "h100");
    assert_eq!(
        (n.cpu.as_deref(), n.memory.as_deref()),
        (Some("96"), Some("1800Gi"))
    );
    let g = n.gpus.as_ref().unwrap();
    assert_eq!((g.count, g.type_.as_str()), (8, "h100"));
    assert_eq!(n.features, ["h100", "ib"]);
    assert_eq!(n.weight, Some(10));
    assert_eq!(n.image, None, "the default image is spec.images'");
    let p = &c.partitions[0];
    assert_eq!(
        (p.name.as_str(), p.default, p.max_time.as_deref()),
        ("gpu", true, Some("2-00:00:00"))
    );
    assert!(!i.needs_person(), "{}", i.report_text());
    assert!(i.yaml.contains("MaxJobCount: 200000"), "{}", i.yaml);
}

#[test]
fn a_nodeset_keeps_its_env_beside_its_init_containers() {
    let i = run(&[
        "nodesets: {cpu: {slurmd: {env: [{name: A, value: b}]}, podSpec: {initContainers: [{name: i, image: busybox}]}}}\n",
    ]);
    let c = load(&i).spec;
    let t = c.node_sets[0].pod.pod_template.as_ref().expect(&i.yaml);
    assert_eq!(t.env[0].name, "A", "{}", i.yaml);
    assert_eq!(t.init_containers[0].name, "i", "{}", i.yaml);
}

#[test]
fn dcgm_becomes_the_job_mapping_prolog_and_epilog() {
    let i = run(&[
        "vendor: {nvidia: {dcgm: {enabled: true, jobMappingDir: /run/dcgm}}}\nnodesets: {gpu: {}}\n",
    ]);
    let scripts = load(&i).spec.controller.scripts;
    let prolog = &scripts.prolog[0];
    assert_eq!(prolog.name, "prolog-dcgm-job-mapping.sh");
    assert!(prolog.content.contains("dir=/run/dcgm") && prolog.content.contains("SLURM_JOB_GPUS"));
    assert!(scripts.epilog[0].content.contains("rm -f"));
    let text = i.report_text();
    assert!(
        text.lines()
            .any(|l| l.starts_with("NEEDS") && l.contains("/run/dcgm")),
        "{text}"
    );
}

#[test]
fn one_secret_for_both_keys_needs_a_person() {
    let i = run(&[
        "slurmKey: {secretRef: {name: keys, key: a}}\njwtKey: {secretRef: {name: keys, key: b}}\nnodesets: {cpu: {}}\n",
    ]);
    let c = load(&i).spec;
    assert_eq!(
        (c.auth.slurm_key.name.as_str(), c.auth.jwt_key.name.as_str()),
        ("keys", JWT_KEY)
    );
    let text = i.report_text();
    assert!(
        text.lines()
            .any(|l| l.starts_with("NEEDS") && l.contains("jwtKey.secretRef.name")),
        "{text}"
    );
}

#[test]
fn inline_secrets_and_unknown_settings_need_a_person() {
    let i = run(&[
        "controller: {slurmctld: {image: {repository: r/slurmctld, tag: 24.11-rocky9}}}\nnodesets: {cpu: {replicas: 2}}\nloginsets: {login: {rootSshAuthorizedKeys: \"ssh-ed25519 AAAA\"}}\nsomethingNew: 1\n",
    ]);
    assert!(i.needs_person());
    let text = i.report_text();
    for want in [
        "slurmKey",
        "jwtKey",
        "rootSshAuthorizedKeys",
        "somethingNew",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("NEEDS") && l.contains(want)),
            "{want} not reported as needed:\n{text}"
        );
    }
    // The placeholder is valid cluster.yaml: the file validates as it is.
    assert_eq!(load(&i).spec.auth.slurm_key.name, SLURM_KEY);
    assert!(text.contains("values0.yaml:4:"), "{text}");
}
