//! The baseline: what slurmops renders on its own for the same typed settings, i.e. the rendering
//! of the admitted file with its free-form parts removed (pod templates, volumes, volume mounts
//! and claim templates, container security contexts, service accounts, slurmConf, slurmdbdConf,
//! partitions' options, configFiles, scripts, the health check, metadata's labels and
//! annotations). The oracle allows what is the same as there.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value as Json};
use slurmops::render::Rendered;

use super::oracle_rules::normalize;
use super::rendered::{code_of, containers, env_value, label_maps, object_id, pod_specs, str_of};

/// DOC without its free-form parts (see the module documentation).
pub(super) fn strip(doc: &Json) -> Json {
    let mut d = doc.clone();
    const COMPONENT: &[&str] = &[
        "podTemplate",
        "volumes",
        "volumeMounts",
        "volumeClaimTemplates",
        "containerSecurityContext",
        "serviceAccountName",
    ];
    let drop = |v: &mut Json, keys: &[&str]| {
        if let Some(o) = v.as_object_mut() {
            for k in keys {
                o.remove(*k);
            }
        }
    };
    if let Some(m) = d.get_mut("metadata") {
        drop(m, &["labels", "annotations"]);
    }
    if let Some(spec) = d.get_mut("spec") {
        if let Some(c) = spec.get_mut("controller") {
            drop(c, COMPONENT);
            drop(c, &["slurmConf", "configFiles", "scripts", "healthCheck"]);
        }
        if let Some(a) = spec.get_mut("accounting") {
            drop(a, COMPONENT);
            drop(a, &["slurmdbdConf"]);
        }
        if let Some(r) = spec.get_mut("restapi") {
            drop(r, COMPONENT);
        }
        for list in ["nodeSets", "loginSets"] {
            if let Some(a) = spec.get_mut(list).and_then(Json::as_array_mut) {
                for x in a {
                    drop(x, COMPONENT);
                }
            }
        }
        if let Some(a) = spec.get_mut("partitions").and_then(Json::as_array_mut) {
            for x in a {
                drop(x, &["options"]);
            }
        }
    }
    d
}

/// What the oracle allows because slurmops renders it itself.
#[derive(Default)]
pub(super) struct Baseline {
    /// (object, pod path, container) of the containers slurmops renders.
    pub(super) containers: BTreeSet<(String, String, String)>,
    /// Their command, args and exec handlers, as JSON text.
    pub(super) code: BTreeMap<(String, String, String), String>,
    /// (object, container, env name, env entry as JSON text).
    pub(super) env: BTreeSet<(String, String, String, String)>,
    /// ConfigMaps and Secrets env values are read from.
    pub(super) env_refs: BTreeSet<String>,
    /// (object, container, normalized mountPath, volume).
    pub(super) mounts: BTreeSet<(String, String, String, String)>,
    /// (object, where in it) -> its labels.
    pub(super) labels: BTreeMap<(String, String), Map<String, Json>>,
    /// Slurm files -> their lines.
    pub(super) lines: BTreeMap<String, BTreeSet<String>>,
}

impl Baseline {
    pub(super) fn of(r: &Rendered) -> Baseline {
        let mut b = Baseline::default();
        for o in &r.objects {
            let id = object_id(o);
            for (at, labels) in label_maps(&o.body) {
                b.labels.insert((id.clone(), at), labels.clone());
            }
            for (pod_at, pod) in pod_specs(&o.body) {
                for (_, c) in containers(pod) {
                    b.add_container(&id, &pod_at, c);
                }
            }
        }
        for (name, text) in &r.slurm {
            b.lines
                .insert(name.clone(), text.lines().map(String::from).collect());
        }
        b
    }

    /// Container C of the pod at POD_AT in object ID: its name, code, env and mounts.
    fn add_container(&mut self, id: &str, pod_at: &str, c: &Json) {
        let name = str_of(c, "name").to_string();
        self.containers
            .insert((id.to_string(), pod_at.to_string(), name.clone()));
        self.code.insert(
            (id.to_string(), pod_at.to_string(), name.clone()),
            code_of(c).to_string(),
        );
        for e in c.get("env").and_then(Json::as_array).into_iter().flatten() {
            self.env.insert((
                id.to_string(),
                name.clone(),
                str_of(e, "name").to_string(),
                env_value(e),
            ));
            for r in ["configMapKeyRef", "secretKeyRef"] {
                if let Some(n) = e.pointer(&format!("/valueFrom/{r}/name")) {
                    self.env_refs
                        .insert(format!("{r}:{}", n.as_str().unwrap_or("")));
                }
            }
        }
        for m in c
            .get("volumeMounts")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            self.mounts.insert((
                id.to_string(),
                name.clone(),
                normalize(str_of(m, "mountPath")),
                str_of(m, "name").to_string(),
            ));
        }
    }
}
