//! Pod Security Standards (the checks Pod Security Admission runs for a namespace labelled
//! `pod-security.kubernetes.io/enforce: baseline` or `restricted`; PSA is GA since 1.25, and the
//! bed's apiserver 1.20 predates it, so the rules are implemented here and applied to every pod
//! template slurmops renders: StatefulSets, Deployments, the PodTemplate of perNode workers, for
//! every example, and the daemon's Deployment from `install --print`).
//!
//! Users run Kubernetes 1.31 to 1.37; where the policy changed within that range the stricter
//! version is checked: the sysctl safe set is 1.29's (1.32 adds `net.ipv4.tcp_rmem`/`tcp_wmem`),
//! the probe and lifecycle `host` check (1.34) applies, and the later relaxations for pods with
//! `hostUsers: false` do not. Outcome: the control plane (slurmctld, slurmdbd,
//! slurmrestd, MariaDB) and the daemon pass restricted; workers pass only privileged, for being
//! privileged and nothing else; a login set passes baseline unless it asks for `privileged`.

use serde_json::{Value as Json, json};
use slurmops::cluster::load;
use slurmops::render::render;

/// Settings written into a test pod: (path, value).
type Edits = Vec<(String, Json)>;

/// Volume types the restricted profile allows.
const VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// Capabilities the baseline profile lets a container add.
const BASELINE_CAPS: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Sysctls the baseline profile calls safe (policy 1.29).
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// SELinux types the baseline profile allows ("" is the runtime's default; container_engine_t
/// since policy 1.31).
const SELINUX_TYPES: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

const APPARMOR_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Baseline,
    Restricted,
}

/// Every violation of the baseline profile by POD (`{metadata, spec}`; empty: it passes).
fn baseline(pod: &Json) -> Vec<String> {
    violations(pod, Level::Baseline)
}

/// Every violation of the restricted profile by POD: baseline's checks, with hostPath,
/// capabilities and seccomp replaced by restricted's stricter versions, as PSA overrides them.
fn restricted(pod: &Json) -> Vec<String> {
    violations(pod, Level::Restricted)
}

/// The strictest namespace level whose `enforce` admits POD.
fn level(pod: &Json) -> &'static str {
    if restricted(pod).is_empty() {
        "restricted"
    } else if baseline(pod).is_empty() {
        "baseline"
    } else {
        "privileged"
    }
}

fn violations(pod: &Json, level: Level) -> Vec<String> {
    let strict = level == Level::Restricted;
    let spec = &pod["spec"];
    let psc = &spec["securityContext"];
    // PSA (policy 1.25+) exempts Windows pods from these restricted checks.
    let windows = spec["os"]["name"] == "windows";
    let containers: Vec<&Json> = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| spec[*k].as_array().into_iter().flatten())
        .collect();
    let mut out = Vec::new();

    // Baseline.
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec[host] == true {
            out.push(format!("{host} is true"));
        }
    }
    for (key, value) in pod["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let v = value.as_str().unwrap_or_default();
        let allowed = v.is_empty() || v == "runtime/default" || v.starts_with("localhost/");
        if key.starts_with(APPARMOR_ANNOTATION) && !allowed {
            out.push(format!("annotation {key}={v}"));
        }
    }
    // The fields a pod and a container security context share.
    let context = |who: &str, sc: &Json, out: &mut Vec<String>| {
        if sc["windowsOptions"]["hostProcess"] == true {
            out.push(format!("{who}: windowsOptions.hostProcess"));
        }
        let apparmor = sc["appArmorProfile"]["type"].as_str();
        if let Some(t) = apparmor.filter(|t| !matches!(*t, "RuntimeDefault" | "Localhost")) {
            out.push(format!("{who}: appArmorProfile {t}"));
        }
        let selinux = &sc["seLinuxOptions"];
        let kind = selinux["type"].as_str().unwrap_or_default();
        if !SELINUX_TYPES.contains(&kind) {
            out.push(format!("{who}: seLinuxOptions type {kind}"));
        }
        for field in ["user", "role"] {
            if selinux[field].as_str().is_some_and(|s| !s.is_empty()) {
                out.push(format!("{who}: seLinuxOptions {field}"));
            }
        }
        if !strict && sc["seccompProfile"]["type"] == "Unconfined" {
            out.push(format!("{who}: seccompProfile Unconfined"));
        }
    };
    context("pod", psc, &mut out);
    for s in psc["sysctls"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().unwrap_or_default();
        if !SAFE_SYSCTLS.contains(&name) {
            out.push(format!("sysctl {name}"));
        }
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        let name = v["name"].as_str().unwrap_or("?");
        let kind = v.as_object().and_then(|o| o.keys().find(|k| *k != "name"));
        let kind = kind.map(String::as_str).unwrap_or("none");
        if strict && !VOLUMES.contains(&kind) {
            out.push(format!("volume {name} has type {kind}"));
        } else if !strict && kind == "hostPath" {
            out.push(format!("volume {name} is hostPath"));
        }
    }
    for c in &containers {
        let name = c["name"].as_str().unwrap_or("?");
        let sc = &c["securityContext"];
        if sc["privileged"] == true {
            out.push(format!("{name}: privileged"));
        }
        context(name, sc, &mut out);
        if let Some(m) = sc["procMount"].as_str().filter(|m| *m != "Default") {
            out.push(format!("{name}: procMount {m}"));
        }
        for add in sc["capabilities"]["add"].as_array().into_iter().flatten() {
            let cap = add.as_str().unwrap_or_default();
            let allowed = if strict {
                windows || cap == "NET_BIND_SERVICE"
            } else {
                BASELINE_CAPS.contains(&cap)
            };
            if !allowed {
                out.push(format!("{name}: adds capability {cap}"));
            }
        }
        for p in c["ports"].as_array().into_iter().flatten() {
            if let Some(h) = p["hostPort"].as_i64().filter(|h| *h != 0) {
                out.push(format!("{name}: hostPort {h}"));
            }
        }
        let probes = ["livenessProbe", "readinessProbe", "startupProbe"].map(|p| &c[p]);
        let hooks = ["postStart", "preStop"].map(|h| &c["lifecycle"][h]);
        for handler in probes.into_iter().chain(hooks) {
            for action in ["httpGet", "tcpSocket"] {
                if let Some(h) = handler[action]["host"].as_str().filter(|h| !h.is_empty()) {
                    out.push(format!("{name}: probe or lifecycle host {h}"));
                }
            }
        }
    }
    if !strict {
        return out;
    }

    // Restricted, each level checked on its own as PSA does (a container's setting does not
    // excuse a pod-level one).
    if psc["runAsNonRoot"] == false {
        out.push("pod: runAsNonRoot is false".into());
    }
    if psc["runAsUser"] == 0 {
        out.push("pod: runs as UID 0".into());
    }
    let valid_seccomp = |sc: &Json| {
        matches!(
            sc["seccompProfile"]["type"].as_str(),
            Some("RuntimeDefault" | "Localhost")
        )
    };
    if !windows && !psc["seccompProfile"].is_null() && !valid_seccomp(psc) {
        out.push("pod: seccompProfile is not RuntimeDefault or Localhost".into());
    }
    for c in &containers {
        let name = c["name"].as_str().unwrap_or("?");
        let sc = &c["securityContext"];
        if !windows && sc["allowPrivilegeEscalation"] != false {
            out.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        if sc["runAsNonRoot"] == false
            || (sc["runAsNonRoot"].is_null() && psc["runAsNonRoot"] != true)
        {
            out.push(format!("{name}: runAsNonRoot is not true"));
        }
        if sc["runAsUser"] == 0 {
            out.push(format!("{name}: runs as UID 0"));
        }
        let seccomp_ok = if sc["seccompProfile"].is_null() {
            valid_seccomp(psc)
        } else {
            valid_seccomp(sc)
        };
        if !windows && !seccomp_ok {
            out.push(format!(
                "{name}: seccompProfile is not RuntimeDefault or Localhost"
            ));
        }
        let drops_all = sc["capabilities"]["drop"]
            .as_array()
            .is_some_and(|d| d.iter().any(|x| x == "ALL"));
        if !windows && !drops_all {
            out.push(format!("{name}: capabilities do not drop ALL"));
        }
    }
    out
}

/// Every pod template the cluster.yaml TEXT renders, as ("Kind name", component, `{metadata,
/// spec}`). Panics on a pod-bearing kind it does not know, so none is skipped unseen.
fn pods(text: &str) -> Vec<(String, String, Json)> {
    let c = load("cluster.yaml", text).unwrap_or_else(|d| panic!("{d:#?}"));
    let mut out = Vec::new();
    for o in render(&c).objects {
        let template = match o.kind.as_str() {
            "StatefulSet" | "Deployment" => o.body["spec"]["template"].clone(),
            "PodTemplate" => o.body["template"].clone(),
            _ => {
                let (b, spec) = (&o.body, &o.body["spec"]);
                let pod = [&spec["template"], &b["template"], &spec["jobTemplate"]];
                let bears = pod.iter().any(|t| t.is_object()) || spec["containers"].is_array();
                assert!(!bears, "{} {} holds a pod this test skips", o.kind, o.name);
                continue;
            }
        };
        assert!(template["spec"]["containers"].is_array(), "{}", o.name);
        let component = template["metadata"]["labels"]["app.kubernetes.io/component"]
            .as_str()
            .unwrap_or_else(|| panic!("{} {} has no component label", o.kind, o.name))
            .to_string();
        out.push((format!("{} {}", o.kind, o.name), component, template));
    }
    out
}

/// The pods of COMPONENT the cluster.yaml TEXT renders.
fn pods_of(text: &str, component: &str) -> Vec<(String, Json)> {
    let pods = pods(text).into_iter().filter(|(_, c, _)| c == component);
    pods.map(|(name, _, pod)| (name, pod)).collect()
}

const EXAMPLES: &[&str] = &["repo", "minimal", "quickstart", "ha", "gpu-checks"];

/// Every example's pods, as (example, "Kind name", component, pod).
fn every_example() -> Vec<(String, String, String, Json)> {
    let mut out = Vec::new();
    for example in EXAMPLES {
        let text = std::fs::read_to_string(format!("examples/{example}/cluster.yaml")).unwrap();
        for (name, component, pod) in pods(&text) {
            out.push((example.to_string(), name, component, pod));
        }
    }
    out
}

const CONTROL_PLANE: &[&str] = &["controller", "accounting", "restapi", "database"];

#[test]
fn every_control_plane_pod_of_every_example_passes_restricted() {
    let all = every_example();
    for (example, name, component, pod) in &all {
        assert!(
            CONTROL_PLANE.contains(&component.as_str())
                || matches!(&**component, "worker" | "login"),
            "{example}: {name} has component {component}, which this test does not classify"
        );
        if CONTROL_PLANE.contains(&component.as_str()) {
            let v = restricted(pod);
            assert!(v.is_empty(), "{example}: {name} ({component}): {v:#?}");
            assert_eq!(level(pod), "restricted");
        }
    }
    let has = |example: &str, component: &str| {
        all.iter()
            .any(|(e, _, c, _)| e == example && c == component)
    };
    for example in EXAMPLES {
        assert!(has(example, "controller"), "{example}: no slurmctld");
        assert!(has(example, "restapi"), "{example}: no slurmrestd");
    }
    // slurmdbd where accounting is on; the in-cluster MariaDB is one of them.
    assert!(has("quickstart", "accounting") && has("repo", "accounting"));
    assert!(
        all.iter()
            .any(|(e, n, _, _)| e == "quickstart" && n == "StatefulSet quick-mariadb")
    );
}

#[test]
fn workers_fail_baseline_only_for_being_privileged_so_their_namespace_must_enforce_privileged() {
    let all = every_example();
    let workers: Vec<_> = all.iter().filter(|(_, _, c, _)| c == "worker").collect();
    for example in EXAMPLES {
        assert!(
            workers.iter().any(|(e, ..)| e == example),
            "{example}: no worker pod found"
        );
    }
    // quickstart's perNode workers are a PodTemplate the daemon makes pods from.
    assert!(
        workers
            .iter()
            .any(|(e, n, ..)| e == "quickstart" && n.starts_with("PodTemplate "))
    );
    for (example, name, _, pod) in workers {
        assert_eq!(
            pod["spec"]["containers"][0]["name"], "slurmd",
            "{example}: {name}"
        );
        // The exact list: examples/repo's dcgm-exporter sidecar adds nothing to it.
        assert_eq!(baseline(pod), ["slurmd: privileged"], "{example}: {name}");
        // Not called restricted either, for the same reason (among others).
        let v = restricted(pod);
        assert!(v.contains(&"slurmd: privileged".into()), "{v:#?}");
        assert_eq!(level(pod), "privileged", "{example}: {name}");
    }
}

#[test]
fn a_login_set_asking_for_privileged_fails_baseline_for_that_alone() {
    let text = std::fs::read_to_string("examples/repo/cluster.yaml").unwrap();
    let logins = pods_of(&text, "login");
    assert_eq!(logins.len(), 1, "examples/repo has one login set");
    let (name, pod) = &logins[0];
    assert_eq!(baseline(pod), ["login: privileged"], "{name}");
    assert_eq!(level(pod), "privileged");
}

#[test]
fn a_default_login_set_passes_baseline_but_not_restricted() {
    // No example has a login set with default settings: the minimal one plus `loginSets`.
    let minimal = std::fs::read_to_string("examples/minimal/cluster.yaml").unwrap();
    let text = format!("{minimal}  loginSets:\n    - name: users\n");
    let logins = pods_of(&text, "login");
    assert_eq!(logins.len(), 1);
    let (name, pod) = &logins[0];
    // Observed: sshd runs as the image's user (root) with no securityContext at all. Nothing
    // baseline forbids, yet every restricted requirement of a container is unmet: a namespace
    // holding a default login set may enforce baseline, not restricted.
    assert_eq!(baseline(pod), Vec::<String>::new(), "{name}");
    assert_eq!(
        restricted(pod),
        [
            "login: allowPrivilegeEscalation is not false",
            "login: runAsNonRoot is not true",
            "login: seccompProfile is not RuntimeDefault or Localhost",
            "login: capabilities do not drop ALL",
        ],
        "{name}"
    );
    assert_eq!(level(pod), "baseline");
}

#[test]
fn the_daemon_as_installed_passes_the_restricted_profile() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmops"))
        .args([
            "install",
            "--print",
            "--repo",
            "https://git.example/infra.git",
        ])
        .args(["--git-secret", "git", "--webhook-secret", "hook"])
        .args(["--allowed-signers", "signers"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let docs: Vec<Json> =
        serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let bearing: Vec<&Json> = docs
        .iter()
        .filter(|d| d["spec"]["template"].is_object() || d["template"].is_object())
        .collect();
    assert_eq!(bearing.len(), 1, "install --print holds one pod template");
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let v = restricted(&dep["spec"]["template"]);
    assert!(v.is_empty(), "{v:#?}");
    assert_eq!(level(&dep["spec"]["template"]), "restricted");
}

/// A pod that passes restricted: a container, an init container and an ephemeral container
/// (`main`, `init`, `debug`), non-root, RuntimeDefault, no escalation, all capabilities dropped.
fn clean_pod() -> Json {
    let c = |name: &str| {
        json!({"name": name, "image": "busybox", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}})
    };
    json!({
        "metadata": {"annotations": {"note": "x"}},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [c("main")],
            "initContainers": [c("init")],
            "ephemeralContainers": [c("debug")],
            "volumes": [{"name": "data", "emptyDir": {}}],
        }
    })
}

/// The clean pod with each VALUE set at its PATH, objects made on the way: a JSON pointer (`~1`
/// for `/`), or `pod:`, `main:`, `init:`, `debug:` for a path in that securityContext.
fn with<S: AsRef<str>>(sets: &[(S, Json)]) -> Json {
    let mut pod = clean_pod();
    for (path, value) in sets {
        let path = match path.as_ref().split_once(':') {
            Some(("pod", rest)) => format!("/spec/securityContext/{rest}"),
            Some((c, rest)) => {
                let list = match c {
                    "main" => "containers",
                    "init" => "initContainers",
                    _ => "ephemeralContainers",
                };
                format!("/spec/{list}/0/securityContext/{rest}")
            }
            None => path.as_ref().to_string(),
        };
        let mut at = &mut pod;
        for key in path.trim_start_matches('/').split('/') {
            let key = key.replace("~1", "/");
            at = match key.parse::<usize>() {
                Ok(i) if at.is_array() => {
                    let list = at.as_array_mut().unwrap();
                    list.resize(list.len().max(i + 1), json!({}));
                    &mut list[i]
                }
                _ => at.as_object_mut().unwrap().entry(key).or_insert(json!({})),
            };
        }
        *at = value.clone();
    }
    pod
}

#[test]
fn each_baseline_rule_catches_its_case_and_allows_what_baseline_allows() {
    assert_eq!(baseline(&clean_pod()), Vec::<String>::new());
    assert_eq!(restricted(&clean_pod()), Vec::<String>::new());
    let apparmor = "/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1main";
    let safe: Vec<Json> = SAFE_SYSCTLS
        .iter()
        .map(|n| json!({"name": n, "value": "1"}))
        .collect();
    #[rustfmt::skip]
    let cases: Vec<(&str, Json, &[&str])> = vec![
        ("/spec/hostNetwork", json!(true), &["hostNetwork is true"]),
        ("/spec/hostPID", json!(true), &["hostPID is true"]),
        ("/spec/hostIPC", json!(true), &["hostIPC is true"]),
        ("/spec/hostNetwork", json!(false), &[]),
        ("main:privileged", json!(true), &["main: privileged"]),
        ("init:privileged", json!(true), &["init: privileged"]),
        ("debug:privileged", json!(true), &["debug: privileged"]),
        ("main:privileged", json!(false), &[]),
        ("main:capabilities/add", json!(["SYS_ADMIN"]), &["main: adds capability SYS_ADMIN"]),
        // NET_RAW is in container runtimes' default set, not in baseline's.
        ("debug:capabilities/add", json!(["NET_RAW"]), &["debug: adds capability NET_RAW"]),
        ("init:capabilities/add", json!(BASELINE_CAPS), &[]),
        ("/spec/volumes/1", json!({"name": "host", "hostPath": {"path": "/"}}), &["volume host is hostPath"]),
        ("/spec/volumes/1", json!({"name": "nfs", "nfs": {"server": "s", "path": "/"}}), &[]),
        ("/spec/containers/0/ports", json!([{"containerPort": 80, "hostPort": 8080}]), &["main: hostPort 8080"]),
        ("/spec/ephemeralContainers/0/ports", json!([{"containerPort": 80, "hostPort": 53}]), &["debug: hostPort 53"]),
        ("/spec/initContainers/0/ports", json!([{"containerPort": 80, "hostPort": 0}]), &[]),
        (apparmor, json!("unconfined"), &["annotation container.apparmor.security.beta.kubernetes.io/main=unconfined"]),
        (apparmor, json!("runtime/default"), &[]),
        (apparmor, json!("localhost/mine"), &[]),
        ("pod:appArmorProfile/type", json!("Unconfined"), &["pod: appArmorProfile Unconfined"]),
        ("init:appArmorProfile/type", json!("Unconfined"), &["init: appArmorProfile Unconfined"]),
        ("main:appArmorProfile/type", json!("RuntimeDefault"), &[]),
        ("pod:seLinuxOptions/type", json!("spc_t"), &["pod: seLinuxOptions type spc_t"]),
        ("main:seLinuxOptions/user", json!("system_u"), &["main: seLinuxOptions user"]),
        ("debug:seLinuxOptions/role", json!("sysadm_r"), &["debug: seLinuxOptions role"]),
        ("main:seLinuxOptions", json!({"type": "container_engine_t", "level": "s0:c1"}), &[]),
        ("main:procMount", json!("Unmasked"), &["main: procMount Unmasked"]),
        ("debug:procMount", json!("Unmasked"), &["debug: procMount Unmasked"]),
        ("main:procMount", json!("Default"), &[]),
        ("pod:seccompProfile/type", json!("Unconfined"), &["pod: seccompProfile Unconfined"]),
        ("init:seccompProfile/type", json!("Unconfined"), &["init: seccompProfile Unconfined"]),
        ("main:seccompProfile", json!({"type": "Localhost", "localhostProfile": "p.json"}), &[]),
        ("pod:sysctls", json!([{"name": "kernel.msgmax", "value": "1"}]), &["sysctl kernel.msgmax"]),
        // Safe from policy 1.32 only; users run 1.31.
        ("pod:sysctls", json!([{"name": "net.ipv4.tcp_rmem", "value": "4096"}]), &["sysctl net.ipv4.tcp_rmem"]),
        ("pod:sysctls", json!(safe), &[]),
        ("pod:windowsOptions/hostProcess", json!(true), &["pod: windowsOptions.hostProcess"]),
        ("main:windowsOptions/hostProcess", json!(true), &["main: windowsOptions.hostProcess"]),
        ("/spec/containers/0/readinessProbe", json!({"tcpSocket": {"port": 22, "host": "10.0.0.1"}}), &["main: probe or lifecycle host 10.0.0.1"]),
        ("/spec/initContainers/0/lifecycle/preStop/httpGet", json!({"port": 80, "host": "node"}), &["init: probe or lifecycle host node"]),
        ("/spec/containers/0/livenessProbe", json!({"httpGet": {"port": 80, "path": "/"}}), &[]),
    ];
    for (path, value, want) in cases {
        let pod = with(&[(path, value.clone())]);
        assert_eq!(baseline(&pod), want, "{path} = {value}");
        // Restricted forbids everything baseline does.
        if !want.is_empty() {
            assert!(!restricted(&pod).is_empty(), "{path} = {value}");
        }
    }
}

#[test]
fn restricted_checks_the_pod_level_on_its_own_as_admission_does() {
    let every = |field: &str, value: Json| -> Vec<(String, Json)> {
        ["main", "init", "debug"]
            .map(|c| (format!("{c}:{field}"), value.clone()))
            .to_vec()
    };
    let and = |mut sets: Vec<(String, Json)>, path: &str, value: Json| {
        sets.push((path.to_string(), value));
        sets
    };
    let one = |path: &str, value: Json| vec![(path.to_string(), value)];
    let all_non_root = [
        every("runAsNonRoot", json!(true)),
        every("seccompProfile/type", json!("RuntimeDefault")),
    ]
    .concat();
    #[rustfmt::skip]
    let cases: Vec<(Edits, &[&str])> = vec![
        // A container's own setting does not excuse the pod's.
        (and(every("runAsUser", json!(1000)), "pod:runAsUser", json!(0)), &["pod: runs as UID 0"]),
        (and(every("seccompProfile/type", json!("RuntimeDefault")), "pod:seccompProfile/type", json!("Unconfined")),
            &["pod: seccompProfile is not RuntimeDefault or Localhost"]),
        (and(every("runAsNonRoot", json!(true)), "pod:runAsNonRoot", json!(false)), &["pod: runAsNonRoot is false"]),
        // Without the pod's setting, each container needs its own.
        (one("/spec/securityContext", json!({})), &[
            "main: runAsNonRoot is not true", "main: seccompProfile is not RuntimeDefault or Localhost",
            "init: runAsNonRoot is not true", "init: seccompProfile is not RuntimeDefault or Localhost",
            "debug: runAsNonRoot is not true", "debug: seccompProfile is not RuntimeDefault or Localhost",
        ]),
        (and(all_non_root, "/spec/securityContext", json!({})), &[]),
        (one("debug:runAsUser", json!(0)), &["debug: runs as UID 0"]),
        (one("init:runAsNonRoot", json!(false)), &["init: runAsNonRoot is not true"]),
        (one("init:allowPrivilegeEscalation", json!(true)), &["init: allowPrivilegeEscalation is not false"]),
        (one("debug:allowPrivilegeEscalation", Json::Null), &["debug: allowPrivilegeEscalation is not false"]),
        (one("main:capabilities", json!({"add": ["NET_BIND_SERVICE"]})), &["main: capabilities do not drop ALL"]),
        (one("main:capabilities/add", json!(["CHOWN"])), &["main: adds capability CHOWN"]),
        (one("main:seccompProfile/type", json!("Unconfined")), &["main: seccompProfile is not RuntimeDefault or Localhost"]),
        (one("/spec/volumes/1", json!({"name": "nfs", "nfs": {"server": "s", "path": "/"}})), &["volume nfs has type nfs"]),
        (one("/spec/volumes/1", json!({"name": "host", "hostPath": {"path": "/"}})), &["volume host has type hostPath"]),
        // A Windows pod is spared escalation, capabilities and seccomp (policy 1.25).
        (vec![("/spec/os".into(), json!({"name": "windows"})), ("pod:seccompProfile".into(), Json::Null),
            ("/spec/containers/0/securityContext".into(), json!({}))], &[]),
    ];
    for (sets, want) in cases {
        assert_eq!(restricted(&with(&sets)), want, "{sets:?}");
    }
}
