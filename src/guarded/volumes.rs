//! Volumes and mounts a push adds: the allowed types only (emptyDir; the ConfigMaps, Secrets
//! and claims the install names; hostPath under its prefixes; other types it lists), no clone of
//! another volume in a claim template, and no mount over a path a rendered container executes or
//! reads configuration or keys from.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::context::{Cx, Place};
use super::str_at;

/// Paths of the images' programs, libraries, configuration, keys and Slurm's state: a mount the
/// push adds may neither cover them nor sit below or above them. Below `/dev`, devices may be
/// mounted (`/dev/shm`, `/dev/infiniband`); `/dev` itself not.
const SYSTEM: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/root",
    "/boot",
    "/proc",
    "/sys",
    "/run",
    "/var/run",
    "/var/spool/slurmd",
    "/var/spool/slurmctld",
    "/var/spool/slurm",
    "/var/lib/slurm",
    "/var/lib/mysql",
    "/var/lib/sss",
    "/var/log/slurm",
];

/// The paths mounts may not touch in a pod whose skeleton is BARE: the system's and every path
/// slurmops mounts or runs a program from there.
pub(super) fn protected(bare: Option<&Map<String, Value>>) -> Vec<String> {
    let mut out: BTreeSet<String> = SYSTEM.iter().map(|s| s.to_string()).collect();
    for list in ["containers", "initContainers"] {
        let cs = bare.and_then(|b| b.get(list)).and_then(Value::as_array);
        for c in cs.into_iter().flatten() {
            for m in c
                .get("volumeMounts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(p) = str_at(m, "mountPath") {
                    out.insert(normal(p).unwrap_or_else(|| "/".into()));
                }
            }
            // As the kernel resolves it (`/opt//x/slurmd` runs from /opt/x).
            if let Some(program) = c.pointer("/command/0").and_then(Value::as_str)
                && let Some((dir, _)) = program.rsplit_once('/')
            {
                out.insert(normal(dir).unwrap_or_else(|| "/".into()));
            }
        }
    }
    out.into_iter().collect()
}

/// P made plain: absolute, no `.`/`..`/empty components, no trailing `/`. None: not absolute or
/// climbing.
fn normal(p: &str) -> Option<String> {
    if !p.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            c => parts.push(c),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// Whether A is B or below it.
fn within(a: &str, b: &str) -> bool {
    a == b || b == "/" || a.strip_prefix(b).is_some_and(|r| r.starts_with('/'))
}

/// The volumes V of a pod at FIELD; OWN: those slurmops renders there.
pub(super) fn check(cx: &mut Cx<'_>, field: &str, v: &[Value], own: Option<&Vec<Value>>) {
    let mut names = BTreeSet::new();
    for vol in v {
        let name = str_at(vol, "name").unwrap_or_default();
        let at = format!("{field}[{name}]");
        if !names.insert(name) {
            cx.refuse(
                at,
                Some(name),
                "two volumes of this name",
                "name each volume once",
            );
            continue;
        }
        if own.is_some_and(|o| o.contains(vol)) {
            continue;
        }
        let Some(m) = vol.as_object() else {
            continue;
        };
        // slurmops's own volume of this name, whose sources the rendering added to (a config
        // file in the projected /etc/slurm): only the sources it does not render are the push's.
        let mine = own
            .into_iter()
            .flatten()
            .find(|o| str_at(o, "name") == Some(name));
        for (k, source) in m {
            if k == "name" {
                continue;
            }
            match (
                k.as_str(),
                mine.and_then(|o| o.pointer("/projected/sources")),
            ) {
                ("projected", Some(Value::Array(rendered))) => {
                    let added: Vec<Value> = source
                        .get("sources")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|s| !rendered.contains(s))
                        .cloned()
                        .collect();
                    let added = serde_json::json!({ "sources": added });
                    volume(cx, &format!("{at}.{k}"), name, k, &added);
                }
                _ => volume(cx, &format!("{at}.{k}"), name, k, source),
            }
        }
    }
}

/// Volume NAME of type KIND with SOURCE.
fn volume(cx: &mut Cx<'_>, at: &str, name: &str, kind: &str, source: &Value) {
    match kind {
        "emptyDir" => {}
        "configMap" => cx.config_map(at, str_at(source, "name").unwrap_or_default(), "a volume"),
        "secret" => cx.secret(
            at,
            str_at(source, "secretName").unwrap_or_default(),
            "a volume",
        ),
        // Its claim is checked with every claim a pod mounts (`claims_made_elsewhere`).
        "persistentVolumeClaim" => {}
        "projected" => {
            let sources = source.get("sources").and_then(Value::as_array);
            for s in sources.into_iter().flatten() {
                for (k, r) in s.as_object().into_iter().flatten() {
                    match k.as_str() {
                        "configMap" => {
                            cx.config_map(at, str_at(r, "name").unwrap_or_default(), "a volume")
                        }
                        "secret" => {
                            cx.secret(at, str_at(r, "name").unwrap_or_default(), "a volume")
                        }
                        other => refuse_type(cx, at, name, &format!("projected {other}")),
                    }
                }
            }
        }
        "hostPath" => {
            let path = str_at(source, "path").unwrap_or_default();
            let ok = normal(path).is_some_and(|p| {
                cx.g.host_paths
                    .iter()
                    .any(|a| normal(a).is_some_and(|a| within(&p, &a)))
            });
            if !ok {
                cx.refuse(
                    at,
                    Some(path),
                    format!("hostPath {path}: a pod mounting the node's filesystem there can take the node"),
                    "use a PersistentVolumeClaim, or the install allows the prefix with the daemon's --allow-host-path PREFIX (policy allowHostPaths)",
                );
            }
        }
        other if cx.g.volume_types.iter().any(|t| t == other) => {}
        other => refuse_type(cx, at, name, other),
    }
}

fn refuse_type(cx: &mut Cx<'_>, at: &str, name: &str, kind: &str) {
    cx.refuse(
        at,
        Some(name),
        format!("volume {name} is a {kind} volume: a push may add emptyDir, configMap, secret, persistentVolumeClaim and projected (of ConfigMaps and Secrets) volumes, and the types the install lists"),
        format!("the install allows the type with the daemon's --allow-volume-type {} (policy allowVolumeTypes)", kind.trim_start_matches("projected ")),
    );
}

/// The mounts V of a container at FIELD (P: where it sits); OWN: slurmops's own container's
/// mounts there; IN_OWN: the container is slurmops's.
pub(super) fn mounts(
    cx: &mut Cx<'_>,
    p: &Place<'_>,
    field: &str,
    v: &Value,
    own: Option<&Value>,
    in_own: bool,
) {
    let own: Vec<&Value> = own
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    for m in v.as_array().into_iter().flatten() {
        if own.contains(&m) {
            continue;
        }
        let name = str_at(m, "name").unwrap_or_default();
        let path = str_at(m, "mountPath").unwrap_or_default();
        let at = format!("{field}[{path}]");
        if !in_own && p.own_volumes.contains(name) {
            cx.refuse(
                &at,
                Some(name),
                format!("volume {name} is slurmops's own (Slurm's config and key, the database password, the state): a container cluster.yaml adds may not mount it"),
                "declare a volume of your own beside the container",
            );
        }
        match normal(path) {
            None => cx.refuse(
                &at,
                Some(path),
                format!("mount path {path:?} is not an absolute path without '..'"),
                "write the absolute path",
            ),
            Some(n) => {
                let hit = p
                    .protected
                    .iter()
                    .find(|q| within(&n, q) || within(q, &n) || n == "/dev");
                if let Some(q) = hit {
                    cx.refuse(
                        &at,
                        Some(path),
                        format!("a mount at {n} would cover {q}, where the pod's containers run programs or read their configuration, keys or Slurm's state"),
                        "mount it elsewhere (e.g. under /home, /data, /scratch or /tmp); no install setting allows this",
                    );
                }
            }
        }
        if m.get("subPathExpr").is_some() {
            cx.refuse(
                &at,
                Some("subPathExpr"),
                "subPathExpr expands the container's environment into the path",
                "use subPath",
            );
        }
        if let Some(sub) = str_at(m, "subPath")
            && (sub.starts_with('/') || sub.split('/').any(|c| c == ".."))
        {
            cx.refuse(
                &at,
                Some(sub),
                format!("subPath {sub:?} leaves its volume"),
                "name a path inside the volume",
            );
        }
        if str_at(m, "mountPropagation") == Some("Bidirectional") && !cx.g.privileged {
            cx.refuse(
                &at,
                Some("mountPropagation"),
                "Bidirectional propagation hands the container's mounts to the node",
                super::context::PRIVILEGED,
            );
        }
    }
}

/// A StatefulSet's claim templates: storage asked for by size, class and mode; never a clone of
/// another volume (`dataSource`, `dataSourceRef`) nor a bound one (`volumeName`, `selector`).
pub(super) fn claim_templates(cx: &mut Cx<'_>, claims: &[Value], own: Option<&Value>) {
    let own: Vec<&Value> = own
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    for c in claims {
        if own.contains(&c) {
            continue;
        }
        let name = c
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for (k, _) in c
            .get("spec")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if !matches!(
                k.as_str(),
                "accessModes" | "resources" | "storageClassName" | "volumeMode"
            ) {
                cx.refuse(
                    format!("spec.volumeClaimTemplates[{name}].spec.{k}"),
                    Some(k),
                    format!("{k}: a claim template asks for new storage by size, class and mode; {k} would bind or clone an existing volume (another cluster's state or database)"),
                    "leave it out",
                );
            }
        }
    }
}

/// Every claim the pod SPEC at AT mounts that this rendering does not make itself (OWN_CLAIMS:
/// its PersistentVolumeClaim objects): only the install's, whatever setting named it — a volume
/// the push added, or a typed one (the controllers' shared state, the copies' claim before an
/// upgrade, the scheduled copies'): a claim could be another cluster's state or home.
pub(super) fn claims_made_elsewhere(
    cx: &mut Cx<'_>,
    at: &str,
    spec: &Map<String, Value>,
    own_claims: &BTreeSet<&str>,
) {
    let volumes = spec.get("volumes").and_then(Value::as_array);
    for vol in volumes.into_iter().flatten() {
        let Some(claim) = vol
            .pointer("/persistentVolumeClaim/claimName")
            .and_then(Value::as_str)
        else {
            continue;
        };
        if own_claims.contains(claim) || cx.g.volume_claims.iter().any(|c| c == claim) {
            continue;
        }
        let name = str_at(vol, "name").unwrap_or_default();
        cx.refuse(
            format!("{at}.volumes[{name}].persistentVolumeClaim"),
            Some(claim),
            format!("PersistentVolumeClaim {claim}: pods may mount only the claims this install names (it could be another cluster's state or home)"),
            "the install allows it with the daemon's --allow-volume-claim NAME (policy allowVolumeClaims)",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_compared_as_the_kernel_resolves_them() {
        assert_eq!(normal("/etc//slurm/./").as_deref(), Some("/etc/slurm"));
        assert_eq!(normal("/data/../etc"), None);
        assert_eq!(normal("etc"), None);
        assert!(within("/etc/slurm", "/etc") && within("/etc", "/etc") && within("/x", "/"));
        assert!(!within("/etcetera", "/etc"));
    }
}
