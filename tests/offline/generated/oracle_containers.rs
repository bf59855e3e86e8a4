//! The oracle's checks of a container: privilege (only a worker's `slurmd` beyond baseline),
//! host ports, env names and references, mounts, code (command, args, exec handlers) and image.

use serde_json::Value as Json;

use super::baseline::Baseline;
use super::oracle::Findings;
use super::oracle_pods::security_context;
use super::oracle_rules::{BASELINE_CAPS, env_name_ok, image_ok, normalize, sensitive_mount};
use super::rendered::{code_of, env_value, str_of};

/// A container and where it is: object ID, the pod at POD_AT, the container's path AT.
#[derive(Clone, Copy)]
struct Container<'a> {
    id: &'a str,
    pod_at: &'a str,
    at: &'a str,
    cname: &'a str,
    c: &'a Json,
}

/// Container C at AT of the pod at POD_AT in object ID.
pub(super) fn check_container(
    id: &str,
    pod_at: &str,
    at: &str,
    c: &Json,
    base: &Baseline,
    out: &mut Findings,
) {
    let ctr = Container {
        id,
        pod_at,
        at,
        cname: str_of(c, "name"),
        c,
    };
    let ours =
        base.containers
            .contains(&(id.to_string(), pod_at.to_string(), ctr.cname.to_string()));
    let worker_slurmd = ours && ctr.cname == "slurmd";
    privilege(ctr, worker_slurmd, out);
    host_ports(ctr, out);
    environment(ctr, base, out);
    mounts(ctr, base, out);
    code(ctr, base, out);
    let image = str_of(c, "image");
    if !image_ok(image) {
        out.add("image", id, format!("{at}.image"), &format!("{image:?}"));
    }
}

/// Privileged mode and capabilities beyond baseline (but on a worker's `slurmd`), the shared
/// security context checks, procMount.
fn privilege(ctr: Container, worker_slurmd: bool, out: &mut Findings) {
    let Container { id, at, c, .. } = ctr;
    if let Some(sc) = c.get("securityContext") {
        let sat = format!("{at}.securityContext");
        if !worker_slurmd {
            if sc.get("privileged").and_then(Json::as_bool) == Some(true) {
                out.add("privileged", id, format!("{sat}.privileged"), &true);
            }
            for (i, cap) in sc
                .pointer("/capabilities/add")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let name = cap.as_str().unwrap_or("");
                let bare = name.strip_prefix("CAP_").unwrap_or(name);
                if !BASELINE_CAPS.contains(&bare) {
                    out.add(
                        "capability",
                        id,
                        format!("{sat}.capabilities.add[{i}]"),
                        cap,
                    );
                }
            }
        }
        security_context(sc, &sat, id, out);
        if let Some(pm) = sc.get("procMount").and_then(Json::as_str)
            && pm != "Default"
        {
            out.add("procMount", id, format!("{sat}.procMount"), &pm);
        }
    }
}

fn host_ports(ctr: Container, out: &mut Findings) {
    let Container { id, at, c, .. } = ctr;
    for (i, p) in c
        .get("ports")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(hp) = p.get("hostPort").and_then(Json::as_i64)
            && hp != 0
        {
            out.add("hostPort", id, format!("{at}.ports[{i}].hostPort"), &hp);
        }
    }
}

/// Env names and the ConfigMaps and Secrets env values are read from, but where slurmops renders
/// the same; no envFrom.
fn environment(ctr: Container, base: &Baseline, out: &mut Findings) {
    let Container {
        id, at, cname, c, ..
    } = ctr;
    for (i, e) in c
        .get("env")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = str_of(e, "name");
        let theirs = base.env.contains(&(
            id.to_string(),
            cname.to_string(),
            name.to_string(),
            env_value(e),
        ));
        if !theirs && !env_name_ok(name) {
            out.add(
                "env-name",
                id,
                format!("{at}.env[{i}]"),
                &format!("{name}={}", env_value(e)),
            );
        }
        for r in ["configMapKeyRef", "secretKeyRef"] {
            if let Some(n) = e.pointer(&format!("/valueFrom/{r}/name")) {
                let key = format!("{r}:{}", n.as_str().unwrap_or(""));
                if !base.env_refs.contains(&key) {
                    out.add(
                        "env-ref",
                        id,
                        format!("{at}.env[{i}].valueFrom.{r}.name"),
                        n,
                    );
                }
            }
        }
    }
    if let Some(ef) = c
        .get("envFrom")
        .filter(|x| x.as_array().is_some_and(|a| !a.is_empty()))
    {
        out.add("envFrom", id, format!("{at}.envFrom"), ef);
    }
}

/// Mounts over system or Slurm directories (but slurmops' own), subPathExpr, escaping subPaths.
fn mounts(ctr: Container, base: &Baseline, out: &mut Findings) {
    let Container {
        id, at, cname, c, ..
    } = ctr;
    for (i, m) in c
        .get("volumeMounts")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mat = format!("{at}.volumeMounts[{i}]");
        let path = normalize(str_of(m, "mountPath"));
        let theirs = base.mounts.contains(&(
            id.to_string(),
            cname.to_string(),
            path.clone(),
            str_of(m, "name").to_string(),
        ));
        if sensitive_mount(&path) && !theirs {
            out.add(
                "mount-path",
                id,
                format!("{mat}.mountPath"),
                &format!(
                    "{:?} (volume {})",
                    str_of(m, "mountPath"),
                    str_of(m, "name")
                ),
            );
        }
        if let Some(x) = m.get("subPathExpr") {
            out.add("subPath", id, format!("{mat}.subPathExpr"), x);
        }
        let sp = str_of(m, "subPath");
        if sp.starts_with('/') || sp.split('/').any(|s| s == "..") {
            out.add("subPath", id, format!("{mat}.subPath"), &format!("{sp:?}"));
        }
    }
}

/// `command[0]` absolute; command, args and exec handlers as slurmops renders them, or none on a
/// container it does not render.
fn code(ctr: Container, base: &Baseline, out: &mut Findings) {
    let Container {
        id,
        pod_at,
        at,
        cname,
        c,
    } = ctr;
    if let Some(first) = c.pointer("/command/0").and_then(Json::as_str)
        && !first.starts_with('/')
    {
        out.add(
            "command-relative",
            id,
            format!("{at}.command[0]"),
            &format!("{first:?}"),
        );
    }
    let key = (id.to_string(), pod_at.to_string(), cname.to_string());
    match base.code.get(&key) {
        Some(theirs) => {
            let mine = code_of(c).to_string();
            if &mine != theirs {
                out.add(
                    "code-changed",
                    id,
                    at.to_string(),
                    &format!("{mine} (slurmops renders {theirs})"),
                );
            }
        }
        None => {
            for k in ["command", "args"] {
                if let Some(x) = c.get(k) {
                    out.add("added-code", id, format!("{at}.{k}"), x);
                }
            }
            for (k, p) in [
                ("livenessProbe", "/livenessProbe/exec"),
                ("readinessProbe", "/readinessProbe/exec"),
                ("startupProbe", "/startupProbe/exec"),
                ("lifecycle.postStart", "/lifecycle/postStart/exec"),
                ("lifecycle.preStop", "/lifecycle/preStop/exec"),
            ] {
                if let Some(x) = c.pointer(p) {
                    out.add("added-code", id, format!("{at}.{k}.exec"), x);
                }
            }
        }
    }
}
