//! Every pod a rendering makes, field by field: the fields a pod may carry are listed here, each
//! with its rule; a field not listed is refused unless slurmops itself renders it so.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::context::{Cx, PRIVILEGED, Place};
use super::{Breach, containers, security, str_at, volumes};
use crate::cluster::diag::Path;
use crate::cluster::{ClusterFile, Guardrails};
use crate::render::{Object, Rendered};

/// Pod fields that only place or pace the pod: any value.
const PLACEMENT: &[&str] = &[
    "activeDeadlineSeconds",
    "affinity",
    "automountServiceAccountToken",
    "dnsConfig",
    "dnsPolicy",
    "enableServiceLinks",
    "hostname",
    "nodeSelector",
    "os",
    "overhead",
    "preemptionPolicy",
    "priority",
    "readinessGates",
    "resourceClaims",
    "restartPolicy",
    "schedulerName",
    "schedulingGates",
    "setHostnameAsFQDN",
    "shareProcessNamespace",
    "subdomain",
    "terminationGracePeriodSeconds",
    "topologySpreadConstraints",
];

/// Every pod of RENDERED (C's rendering) against BARE (its skeleton's) under G.
pub(super) fn check(
    c: &ClusterFile,
    rendered: &Rendered,
    bare: &Rendered,
    g: &Guardrails,
    out: &mut Vec<Breach>,
) {
    let own_config_maps: BTreeSet<String> = rendered
        .objects
        .iter()
        .filter(|o| o.kind == "ConfigMap")
        .map(|o| o.name.clone())
        .collect();
    let skeleton: HashMap<(&str, &str), &Object> = bare
        .objects
        .iter()
        .map(|o| ((o.kind.as_str(), o.name.as_str()), o))
        .collect();
    let mut claims: HashMap<String, String> = HashMap::new();
    let own_claims: BTreeSet<&str> = rendered
        .objects
        .iter()
        .filter(|o| o.kind == "PersistentVolumeClaim")
        .map(|o| o.name.as_str())
        .collect();
    for o in &rendered.objects {
        let bare = skeleton.get(&(o.kind.as_str(), o.name.as_str()));
        let mut cx = Cx {
            g,
            object: format!("{}/{}", o.kind, o.name),
            scope: scope(c, o),
            own_config_maps: &own_config_maps,
            out,
        };
        annotations(
            &mut cx,
            "metadata.annotations",
            o.body.pointer("/metadata/annotations"),
            bare.and_then(|b| b.body.pointer("/metadata/annotations")),
        );
        claim_names(&mut cx, o, &mut claims);
        let Some((at, spec)) = pod_spec(o) else {
            continue;
        };
        let bare_template = bare.and_then(|b| template(b));
        if let Some(meta) = template(o).and_then(|t| t.get("metadata")) {
            metadata(&mut cx, meta, bare_template.and_then(|t| t.get("metadata")));
        }
        let bare_spec = bare.and_then(|b| pod_spec(b)).map(|(_, s)| s);
        pod(&mut cx, &at, spec, bare_spec);
        volumes::claims_made_elsewhere(&mut cx, &at, spec, &own_claims);
        if let Some(Value::Array(claims)) = o.body.pointer("/spec/volumeClaimTemplates") {
            let own = bare.and_then(|b| b.body.pointer("/spec/volumeClaimTemplates"));
            volumes::claim_templates(&mut cx, claims, own);
        }
    }
}

/// The pod template of O, if it makes pods.
fn template(o: &Object) -> Option<&Value> {
    match o.kind.as_str() {
        "StatefulSet" | "Deployment" | "DaemonSet" | "ReplicaSet" | "Job" => {
            o.body.pointer("/spec/template")
        }
        "PodTemplate" => o.body.get("template"),
        "CronJob" => o.body.pointer("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// The pod spec O makes, with its path in O.
fn pod_spec(o: &Object) -> Option<(String, &Map<String, Value>)> {
    let spec = match o.kind.as_str() {
        "Pod" => o.body.get("spec"),
        _ => template(o)?.get("spec"),
    }?;
    let at = match o.kind.as_str() {
        "Pod" => "spec",
        "PodTemplate" => "template.spec",
        "CronJob" => "spec.jobTemplate.spec.template.spec",
        _ => "spec.template.spec",
    };
    Some((at.to_string(), spec.as_object()?))
}

/// The section of C that object O is rendered from, by its labels.
fn scope(c: &ClusterFile, o: &Object) -> Path {
    use crate::vocab::{LABEL_COMPONENT, LABEL_NODESET};
    let spec = Path::root().key("spec");
    let label = |k: &str| {
        o.body
            .pointer("/metadata/labels")
            .and_then(|l| str_at(l, k))
    };
    if let Some(ns) = label(LABEL_NODESET)
        && let Some(i) = c.spec.node_sets.iter().position(|n| n.name == ns)
    {
        return spec.key("nodeSets").index(i);
    }
    for (i, l) in c.spec.login_sets.iter().enumerate() {
        if o.name.ends_with(&format!("login-{}", l.name)) || o.name.ends_with(&l.name) {
            return spec.key("loginSets").index(i);
        }
    }
    match label(LABEL_COMPONENT) {
        Some("controller") => spec.key("controller"),
        Some("restapi") => spec.key("restapi"),
        Some("accounting") => spec.key("accounting"),
        Some("database") => spec.key("accounting").key("database"),
        _ => spec,
    }
}

/// A StatefulSet's claims are named `TEMPLATE-STATEFULSET-ORDINAL`: two templates whose
/// `TEMPLATE-STATEFULSET` is the same would share volumes (a worker NodeSet named `controller`
/// with a template `statesave-c` took slurmctld's state). CLAIMS: the prefixes seen, by object.
fn claim_names(cx: &mut Cx<'_>, o: &Object, claims: &mut HashMap<String, String>) {
    let templates = o
        .body
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array);
    for t in templates.into_iter().flatten() {
        let name = t
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let prefix = format!("{name}-{}", o.name);
        match claims.get(&prefix) {
            Some(other) if *other != cx.object => cx.refuse(
                format!("spec.volumeClaimTemplates[{name}]"),
                Some(name),
                format!("its claims would be named {prefix}-N, as {other}'s are: the two would share volumes"),
                "rename the claim template or the NodeSet",
            ),
            _ => {
                claims.insert(prefix, cx.object.clone());
            }
        }
    }
}

/// Whether K=V is a digest slurmops derives from what it renders — a config file's checksum,
/// the pod template's revision — and so differs from the skeleton's whenever the push adds
/// anything: it says nothing the push chose.
fn derived(k: &str, v: &Value) -> bool {
    let digest = v
        .as_str()
        .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_hexdigit()));
    digest
        && (k == crate::vocab::LABEL_REVISION
            || k.starts_with(crate::render::names::CHECKSUM_PREFIX))
}

/// Annotations at FIELD a rendering adds beyond its skeleton's (OWN): each under a prefix the
/// install allows (annotations drive other controllers: exposing a Service, injecting sidecars,
/// a runtime's settings), none under slurmops's own.
fn annotations(cx: &mut Cx<'_>, field: &str, a: Option<&Value>, own: Option<&Value>) {
    for (k, v) in a.and_then(Value::as_object).into_iter().flatten() {
        if own.and_then(|o| o.get(k)) == Some(v) {
            continue;
        }
        if derived(k, v) {
            continue;
        }
        let at = format!("{field}[{k}]");
        // Under slurmops's prefix or the ApplySet's (and its recommended labels' names).
        let ours = crate::cluster::guard_code::own_label(k);
        if ours {
            cx.refuse(
                at,
                Some(k),
                "slurmops sets and reads its own annotations: a push may not set one",
                "name your annotation under your own prefix",
            );
        } else if !cx.g.annotations.iter().any(|p| k.starts_with(p.as_str())) {
            cx.refuse(
                at,
                Some(k),
                format!("annotation {}: annotations drive other controllers (a Service exposed, a sidecar injected, a runtime's settings), and this install allows {}", crate::cluster::diag::clip(k), match cx.g.annotations.is_empty() {
                    true => "none".to_string(),
                    false => crate::cluster::diag::listed(cx.g.annotations.iter().map(String::as_str)),
                }),
                format!("the install allows a prefix with the daemon's --allow-annotation PREFIX (policy allowAnnotations), e.g. --allow-annotation {}", k.split_once('/').map_or(k.as_str(), |(p, _)| p)),
            );
        }
    }
}

/// The pod template's labels and annotations: none of slurmops's own labels changed, no
/// AppArmor annotation that unconfines a container.
fn metadata(cx: &mut Cx<'_>, meta: &Value, bare: Option<&Value>) {
    annotations(
        cx,
        "spec.template.metadata.annotations",
        meta.get("annotations"),
        bare.and_then(|b| b.get("annotations")),
    );
    if let Some(Value::Object(labels)) = meta.get("labels") {
        for (k, v) in labels {
            let own = bare.and_then(|b| b.get("labels")).and_then(|l| l.get(k));
            if crate::cluster::guard_code::own_label(k) && own != Some(v) && !derived(k, v) {
                cx.refuse(
                    format!("metadata.labels[{k}]"),
                    Some(k),
                    "slurmops sets this label itself; Services, selectors, prune and adoption rely on it",
                    "name your label under your own prefix, e.g. example.com/team",
                );
            }
        }
    }
    if let Some(Value::Object(a)) = meta.get("annotations") {
        for (k, v) in a {
            let profile = v.as_str().unwrap_or_default();
            if !cx.g.privileged
                && k.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && profile != "runtime/default"
                && !profile.starts_with("localhost/")
            {
                cx.refuse(
                    format!("metadata.annotations[{k}]"),
                    Some(k),
                    "this AppArmor profile runs the container without the runtime's confinement (beyond Pod Security baseline)",
                    PRIVILEGED,
                );
            }
        }
    }
}

/// Pod spec SPEC at AT, BARE its skeleton's.
fn pod(cx: &mut Cx<'_>, at: &str, spec: &Map<String, Value>, bare: Option<&Map<String, Value>>) {
    let own_volumes: BTreeSet<&str> = bare
        .and_then(|b| b.get("volumes"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| str_at(v, "name"))
        .collect();
    let protected = volumes::protected(bare);
    for (k, v) in spec {
        let field = format!("{at}.{k}");
        let own = bare.and_then(|b| b.get(k));
        match (k.as_str(), v) {
            ("containers" | "initContainers", Value::Array(cs)) => {
                let own_list = own.and_then(Value::as_array);
                let mut names = BTreeSet::new();
                for c in cs {
                    let name = str_at(c, "name").unwrap_or_default();
                    if !names.insert(name) {
                        cx.refuse(
                            format!("{field}[{name}]"),
                            Some(name),
                            "two containers of this name",
                            "name each container once",
                        );
                        continue;
                    }
                    let mine = own_list
                        .into_iter()
                        .flatten()
                        .find(|o| str_at(o, "name") == Some(name));
                    let place = Place {
                        at: format!("{field}[{name}]"),
                        own_volumes: &own_volumes,
                        protected: &protected,
                        slurmd: name == "slurmd"
                            && mine.is_some()
                            && cx.scope.segments().get(1)
                                == Some(&crate::cluster::diag::PathSeg::Key("nodeSets".into())),
                    };
                    containers::check(cx, &place, c, mine);
                }
            }
            ("volumes", Value::Array(vs)) => {
                volumes::check(cx, &field, vs, own.and_then(Value::as_array));
            }
            ("serviceAccountName" | "serviceAccount", Value::String(sa)) => {
                if !cx.g.service_accounts.contains(sa) {
                    cx.refuse(
                        field,
                        Some(sa),
                        format!("ServiceAccount {sa}: its token and its rights would be the pod's, reachable by Slurm users"),
                        "the install allows it with the daemon's --allow-service-account NAME (policy allowServiceAccounts)",
                    );
                }
            }
            ("tolerations", Value::Array(ts)) if !cx.g.control_plane => {
                for t in ts {
                    let key = str_at(t, "key").unwrap_or_default();
                    let all = key.is_empty() && str_at(t, "operator") == Some("Exists");
                    if all || crate::cluster::guard::CONTROL_PLANE_TAINTS.contains(&key) {
                        cx.refuse(
                            format!("{field}[{key}]"),
                            (!key.is_empty()).then_some(key),
                            "this toleration lets the pod run on control-plane nodes",
                            "name the taints of the nodes meant for it, or the install allows it with the daemon's --allow-control-plane (policy allowControlPlane)",
                        );
                    }
                }
            }
            ("tolerations", _) => {}
            ("priorityClassName", Value::String(p)) => {
                if p.starts_with("system-") {
                    cx.refuse(
                        field,
                        Some(p),
                        format!("priority class {p}: the system classes are for the cluster's own components, which it would preempt"),
                        "name a priority class of your own",
                    );
                }
            }
            ("imagePullSecrets", Value::Array(ss)) => {
                for s in ss {
                    let name = str_at(s, "name").unwrap_or_default();
                    if !cx.g.secrets.iter().any(|a| a == name) {
                        cx.refuse(
                            format!("{field}[{name}]"),
                            Some(name),
                            format!("Secret {name}: pods may name no Secret but those this install lists"),
                            "the install allows it with the daemon's --allow-secret NAME (policy allowSecrets)",
                        );
                    }
                }
            }
            ("hostNetwork" | "hostPID" | "hostIPC", Value::Bool(true)) => {
                if !cx.g.privileged && own != Some(v) {
                    cx.refuse(
                        field,
                        Some(k),
                        "the pod would share the node's namespace",
                        PRIVILEGED,
                    );
                }
            }
            ("hostNetwork" | "hostPID" | "hostIPC" | "hostUsers", _) => {}
            ("securityContext", _) => security::pod(cx, &field, v, own),
            ("runtimeClassName", Value::String(rc)) if own != Some(v) => {
                if !cx.g.runtime_classes.contains(rc) {
                    cx.refuse(
                        field,
                        Some(rc),
                        format!("RuntimeClass {rc}: it chooses the runtime, and the isolation, the pod runs with"),
                        "the install allows it with the daemon's --allow-runtime-class NAME (policy allowRuntimeClasses)",
                    );
                }
            }
            (k, _) if PLACEMENT.contains(&k) => {}
            _ if own == Some(v) => {}
            _ => cx.refuse(
                field,
                Some(k),
                format!("{k} is not a pod field a push may set under the install's guarded trust level"),
                "leave it out; a field slurmops does not list is refused, not passed (docs/trust-model.md lists what may be set)",
            ),
        }
    }
}
