//! Security contexts, as Pod Security "baseline" reads them on the pod: each field listed with
//! its allowed values; a field not listed is refused. Beyond baseline needs the install's
//! `--allow-privileged`.

use serde_json::Value;

use super::context::{Cx, PRIVILEGED};
use super::str_at;

use crate::cluster::guard::{BASELINE_CAPABILITIES, BASELINE_SELINUX_TYPES, BASELINE_SYSCTLS};

/// Fields of either context whose every value baseline allows.
const FREE: &[&str] = &[
    "fsGroup",
    "fsGroupChangePolicy",
    "runAsGroup",
    "runAsNonRoot",
    "runAsUser",
    "supplementalGroups",
    "supplementalGroupsPolicy",
    "seLinuxChangePolicy",
    "readOnlyRootFilesystem",
    "allowPrivilegeEscalation",
];

/// A pod's securityContext V at FIELD; OWN: the one slurmops renders there. Its fields stay
/// (a push replacing the pod's context dropped the control plane's non-root user), and no
/// `fsGroup` is added: the kubelet gives that group the pod's Secret files, slurm.key among them.
pub(super) fn pod(cx: &mut Cx<'_>, field: &str, v: &Value, own: Option<&Value>) {
    for (k, mine) in own.and_then(Value::as_object).into_iter().flatten() {
        if v.get(k) != Some(mine) {
            cx.refuse(
                format!("{field}.{k}"),
                Some(k),
                format!("slurmops renders this pod's securityContext.{k}; a push may add to the context, not change or drop what slurmops sets"),
                "leave it out of podTemplate.securityContext, or set it as slurmops does",
            );
        }
    }
    for k in ["fsGroup", "fsGroupChangePolicy"] {
        if let Some(x) = v.get(k)
            && own.and_then(|o| o.get(k)) != Some(x)
        {
            cx.refuse(
                format!("{field}.{k}"),
                Some(k),
                format!("{k}: the kubelet makes the pod's volumes, Secret files (slurm.key) included, readable by that group"),
                "leave it out; no install setting allows it",
            );
        }
    }
    fields(cx, field, v, false);
}

/// A container's securityContext V at FIELD; SLURMD: slurmd's own, whose privileges and
/// capabilities are Slurm's need (the NodeSet's `privileged`).
pub(super) fn container(cx: &mut Cx<'_>, field: &str, v: &Value, slurmd: bool) {
    fields(cx, field, v, slurmd);
}

fn fields(cx: &mut Cx<'_>, field: &str, v: &Value, slurmd: bool) {
    let Some(m) = v.as_object() else {
        return;
    };
    let privileged = cx.g.privileged;
    for (k, v) in m {
        let at = format!("{field}.{k}");
        let beyond = |what: String| (at.clone(), what);
        let refusal = match k.as_str() {
            k if FREE.contains(&k) => None,
            "privileged" | "capabilities" if slurmd => None,
            "privileged" => (v == &Value::Bool(true))
                .then(|| beyond("a privileged container is root on the node".into())),
            "capabilities" => {
                let added = v.get("add").and_then(Value::as_array);
                added
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .find(|c| !BASELINE_CAPABILITIES.contains(&c.trim_start_matches("CAP_")))
                    .map(|c| beyond(format!("capability {c} is beyond Pod Security baseline")))
            }
            "seccompProfile" | "appArmorProfile" => {
                (str_at(v, "type") == Some("Unconfined")).then(|| {
                    beyond(format!(
                        "{k} Unconfined: the container would run without the runtime's confinement"
                    ))
                })
            }
            "seLinuxOptions" => {
                let ty = str_at(v, "type").unwrap_or_default();
                let own = |f: &str| str_at(v, f).is_some_and(|s| !s.is_empty());
                (!(ty.is_empty() || BASELINE_SELINUX_TYPES.contains(&ty))
                    || own("user")
                    || own("role"))
                .then(|| {
                    beyond(
                        "these SELinux options choose a label beyond Pod Security baseline".into(),
                    )
                })
            }
            "procMount" => (v.as_str() != Some("Default"))
                .then(|| beyond("an unmasked /proc is beyond Pod Security baseline".into())),
            "windowsOptions" => (v.get("hostProcess") == Some(&Value::Bool(true)))
                .then(|| beyond("a host process container is the node's administrator".into())),
            "sysctls" => v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| str_at(s, "name"))
                .find(|n| !BASELINE_SYSCTLS.contains(n))
                .map(|n| {
                    beyond(format!(
                        "sysctl {n} is not one Pod Security baseline calls safe"
                    ))
                }),
            other => {
                cx.refuse(
                    at.clone(),
                    Some(other),
                    format!("{other} is not a securityContext field a push may set under the install's guarded trust level"),
                    "leave it out",
                );
                None
            }
        };
        if let Some((at, what)) = refusal
            && !privileged
        {
            cx.refuse(at, Some(k), what, PRIVILEGED);
        }
    }
}
