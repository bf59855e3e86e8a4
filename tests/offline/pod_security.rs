//! Pod Security Standards, "restricted" profile (Kubernetes' policy as of v1.25+, the checks
//! PodSecurity admission runs; the bed's apiserver 1.20 predates that admission plugin, so the
//! rules are checked here on the pod templates): the rendered slurmctld, slurmdbd and slurmrestd
//! pods and the daemon's own Deployment pass; privileged workers are reported, not hidden.

use serde_json::Value as Json;
use slurmops::render::render;
use slurmops::spec::load;

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

/// Every violation of the restricted profile in pod spec POD (empty: it passes).
fn violations(pod: &Json) -> Vec<String> {
    let mut out = Vec::new();
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod[host] == true {
            out.push(format!("{host} is true"));
        }
    }
    for v in pod["volumes"].as_array().into_iter().flatten() {
        let kind = v
            .as_object()
            .and_then(|o| o.keys().find(|k| *k != "name").cloned());
        if !kind.as_deref().is_some_and(|k| VOLUMES.contains(&k)) {
            out.push(format!("volume {} has type {kind:?}", v["name"]));
        }
    }
    let psc = &pod["securityContext"];
    let containers: Vec<&Json> = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| pod[*k].as_array().into_iter().flatten())
        .collect();
    for c in containers {
        let name = c["name"].as_str().unwrap_or("?");
        let sc = &c["securityContext"];
        if sc["privileged"] == true {
            out.push(format!("{name}: privileged"));
        }
        if sc["allowPrivilegeEscalation"] != false {
            out.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        let non_root = sc["runAsNonRoot"]
            .as_bool()
            .or(psc["runAsNonRoot"].as_bool());
        if non_root != Some(true) {
            out.push(format!("{name}: runAsNonRoot is not true"));
        }
        if sc["runAsUser"] == 0 || (sc["runAsUser"].is_null() && psc["runAsUser"] == 0) {
            out.push(format!("{name}: runs as UID 0"));
        }
        let seccomp = if sc["seccompProfile"].is_null() {
            &psc["seccompProfile"]
        } else {
            &sc["seccompProfile"]
        };
        if !matches!(
            seccomp["type"].as_str(),
            Some("RuntimeDefault" | "Localhost")
        ) {
            out.push(format!(
                "{name}: seccompProfile is not RuntimeDefault or Localhost"
            ));
        }
        let caps = &sc["capabilities"];
        if !caps["drop"]
            .as_array()
            .is_some_and(|d| d.iter().any(|x| x == "ALL"))
        {
            out.push(format!("{name}: capabilities do not drop ALL"));
        }
        for add in caps["add"].as_array().into_iter().flatten() {
            if add != "NET_BIND_SERVICE" {
                out.push(format!("{name}: adds capability {add}"));
            }
        }
        for p in c["ports"].as_array().into_iter().flatten() {
            if p["hostPort"].as_i64().is_some_and(|h| h != 0) {
                out.push(format!("{name}: hostPort"));
            }
        }
    }
    out
}

fn pods(text: &str) -> Vec<(String, Json)> {
    let c = load("cluster.yaml", text).unwrap_or_else(|d| panic!("{d:#?}"));
    render(&c)
        .objects
        .iter()
        .filter(|o| matches!(o.kind.as_str(), "StatefulSet" | "Deployment"))
        .map(|o| {
            (
                format!("{} {}", o.kind, o.name),
                o.body["spec"]["template"]["spec"].clone(),
            )
        })
        .collect()
}

#[test]
fn control_plane_pods_pass_the_restricted_profile() {
    for example in [
        "examples/repo/cluster.yaml",
        "examples/minimal/cluster.yaml",
        "examples/quickstart/cluster.yaml",
    ] {
        let text = std::fs::read_to_string(example).unwrap();
        let mut control_plane = 0;
        for (name, pod) in pods(&text) {
            let component = name.rsplit('-').next().unwrap_or_default();
            let is_worker = pod["containers"][0]["name"] == "slurmd";
            let is_login = pod["containers"][0]["name"] == "sshd" || name.contains("login");
            if is_worker || is_login {
                continue;
            }
            control_plane += 1;
            let v = violations(&pod);
            assert!(v.is_empty(), "{example}: {name} ({component}): {v:#?}");
        }
        assert!(control_plane >= 2, "{example}: no control-plane pods found");
    }
    // The in-cluster MariaDB is one of them.
    let quick = std::fs::read_to_string("examples/quickstart/cluster.yaml").unwrap();
    assert!(
        pods(&quick)
            .iter()
            .any(|(n, _)| n == "StatefulSet quick-mariadb")
    );
}

#[test]
fn privileged_workers_are_not_called_restricted() {
    let text = std::fs::read_to_string("examples/minimal/cluster.yaml").unwrap();
    let worker = pods(&text)
        .into_iter()
        .find(|(_, p)| p["containers"][0]["name"] == "slurmd")
        .expect("a worker StatefulSet");
    let v = violations(&worker.1);
    assert!(v.iter().any(|v| v.contains("privileged")), "{v:#?}");
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
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let v = violations(&dep["spec"]["template"]["spec"]);
    assert!(v.is_empty(), "{v:#?}");
}
