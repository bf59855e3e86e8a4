//! The oracle's checks of a pod spec: host namespaces, service accounts, the pod's security
//! context and sysctls, volume types; then each container's (oracle_containers).

use serde_json::Value as Json;

use super::baseline::Baseline;
use super::oracle::Findings;
use super::oracle_containers::check_container;
use super::oracle_rules::{SAFE_SYSCTLS, SELINUX_TYPES, VOLUME_TYPES};
use super::rendered::{containers, str_of};

/// The pod spec POD at POD_AT in object ID, and its containers.
pub(super) fn check_pod(id: &str, pod_at: &str, pod: &Json, base: &Baseline, out: &mut Findings) {
    let f = |rest: &str| format!("{pod_at}.{rest}");
    for k in ["hostNetwork", "hostPID", "hostIPC", "hostUsers"] {
        let bad = if k == "hostUsers" {
            false
        } else {
            pod.get(k).and_then(Json::as_bool) == Some(true)
        };
        if bad {
            out.add("host-namespace", id, f(k), &true);
        }
    }
    for k in ["serviceAccountName", "serviceAccount"] {
        if let Some(sa) = pod.get(k).filter(|s| !s.is_null()) {
            out.add("service-account", id, f(k), sa);
        }
    }
    if let Some(sc) = pod.get("securityContext") {
        security_context(sc, &f("securityContext"), id, out);
        for (i, s) in sc
            .get("sysctls")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let n = str_of(s, "name");
            if !SAFE_SYSCTLS.contains(&n) {
                out.add(
                    "sysctl",
                    id,
                    f(&format!("securityContext.sysctls[{i}].name")),
                    &n,
                );
            }
        }
    }
    volumes(id, pod_at, pod, out);
    for (c_at, c) in containers(pod) {
        check_container(id, pod_at, &f(&c_at), c, base, out);
    }
}

/// POD's volumes: no hostPath, no type but the allowed ones, projected only from ConfigMaps and
/// Secrets.
fn volumes(id: &str, pod_at: &str, pod: &Json, out: &mut Findings) {
    let f = |rest: &str| format!("{pod_at}.{rest}");
    for (i, vol) in pod
        .get("volumes")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = f(&format!("volumes[{i}]"));
        for (k, src) in vol.as_object().into_iter().flatten() {
            if k == "name" {
                continue;
            }
            if k == "hostPath" {
                out.add("hostPath", id, format!("{at}.hostPath"), src);
            } else if !VOLUME_TYPES.contains(&k.as_str()) {
                out.add("volume-type", id, format!("{at}.{k}"), src);
            } else if k == "projected" {
                for (j, s) in src
                    .get("sources")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    for sk in s.as_object().into_iter().flatten().map(|(k, _)| k) {
                        if sk != "configMap" && sk != "secret" {
                            out.add(
                                "volume-type",
                                id,
                                format!("{at}.projected.sources[{j}].{sk}"),
                                &s[sk],
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The checks a pod's and a container's securityContext share.
pub(super) fn security_context(sc: &Json, at: &str, id: &str, out: &mut Findings) {
    for k in ["seccompProfile", "appArmorProfile"] {
        if let Some(t) = sc.get(k).and_then(|p| p.get("type")).and_then(Json::as_str)
            && t == "Unconfined"
        {
            out.add("unconfined", id, format!("{at}.{k}.type"), &t);
        }
    }
    if let Some(se) = sc.get("seLinuxOptions") {
        let t = str_of(se, "type");
        if !SELINUX_TYPES.contains(&t) {
            out.add("selinux", id, format!("{at}.seLinuxOptions.type"), &t);
        }
        for k in ["user", "role"] {
            if let Some(x) = se.get(k).and_then(Json::as_str)
                && !x.is_empty()
            {
                out.add("selinux", id, format!("{at}.seLinuxOptions.{k}"), &x);
            }
        }
    }
    if sc
        .pointer("/windowsOptions/hostProcess")
        .and_then(Json::as_bool)
        == Some(true)
    {
        out.add(
            "hostProcess",
            id,
            format!("{at}.windowsOptions.hostProcess"),
            &true,
        );
    }
}
