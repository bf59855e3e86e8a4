//! The oracle (no slurmops policy code): every admitted rendering is held to Kubernetes' Pod
//! Security "baseline" and to what the default policy allows, given what slurmops renders on its
//! own (the baseline). This file walks the objects and checks what belongs to an object as a
//! whole (slurmops' own labels, annotations that unconfine a pod, claim templates' sources); the
//! pods, their containers and the Slurm files have files of their own.

use serde_json::Value as Json;
use slurmops::render::{self, Rendered};

use super::baseline::Baseline;
use super::oracle_files::slurm_files;
use super::oracle_pods::check_pod;
use super::oracle_rules::managed_label;
use super::rendered::{label_maps, object_id, pod_specs, walk_objects};

/// One thing the default policy does not allow, found in an admitted rendering.
pub(super) struct Violation {
    pub(super) class: &'static str,
    pub(super) object: String,
    pub(super) field: String,
    pub(super) value: String,
}

/// The violations found so far, in the order found.
#[derive(Default)]
pub(super) struct Findings(Vec<Violation>);

impl Findings {
    /// Records that FIELD of OBJECT holds VALUE, which CLASS of the policy does not allow.
    pub(super) fn add(
        &mut self,
        class: &'static str,
        object: &str,
        field: String,
        value: &dyn std::fmt::Display,
    ) {
        self.0.push(Violation {
            class,
            object: object.to_string(),
            field,
            value: format!("{value}"),
        })
    }
}

/// Every way R (admitted) goes beyond the default policy, given what slurmops renders itself.
pub(super) fn oracle(r: &Rendered, base: &Baseline) -> Vec<Violation> {
    let mut out = Findings::default();
    for o in &r.objects {
        let id = object_id(o);
        managed_labels(o, &id, base, &mut out);
        unconfining_annotations(o, &id, &mut out);
        claim_sources(o, &id, &mut out);
        for (pod_at, pod) in pod_specs(&o.body) {
            check_pod(&id, &pod_at, pod, base, &mut out);
        }
    }
    slurm_files(r, base, &mut out);
    out.0
}

/// slurmops' own labels on O (ID), wherever they sit: as slurmops renders them.
fn managed_labels(o: &render::Object, id: &str, base: &Baseline, out: &mut Findings) {
    for (at, labels) in label_maps(&o.body) {
        let theirs = base.labels.get(&(id.to_string(), at.clone()));
        for (k, val) in labels {
            let same = match theirs.and_then(|t| t.get(k)) {
                // A digest of the pod template slurmops computes: it differs with the template.
                Some(_) if k == "slurmops.dev/revision" => val.as_str().is_some_and(|s| {
                    s.len() == 16
                        && s.chars()
                            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
                }),
                t => t == Some(val),
            };
            if managed_label(k) && !same {
                out.add(
                    "managed-label",
                    id,
                    format!("{at}.{k}"),
                    &format!(
                        "{val} (slurmops renders {})",
                        theirs
                            .and_then(|t| t.get(k))
                            .map_or("none".into(), Json::to_string)
                    ),
                );
            }
        }
    }
}

/// Annotations of a pod, or of its template, in O (ID) that unconfine it (AppArmor, seccomp).
fn unconfining_annotations(o: &render::Object, id: &str, out: &mut Findings) {
    walk_objects(&o.body, String::new(), &mut |at, m| {
        // A pod's, or its template's: where the annotations apply.
        let pod = o.kind == "Pod" || m.get("spec").and_then(|s| s.get("containers")).is_some();
        let Some(ann) = m
            .get("metadata")
            .and_then(|md| md.get("annotations"))
            .and_then(Json::as_object)
            .filter(|_| pod)
        else {
            return;
        };
        for (k, val) in ann {
            let s = val.as_str().unwrap_or("");
            if (k.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && s != "runtime/default"
                && !s.starts_with("localhost/"))
                || (k.starts_with("seccomp.security.alpha.kubernetes.io/")
                    && s.eq_ignore_ascii_case("unconfined"))
            {
                out.add(
                    "unconfined",
                    id,
                    format!("{at}.metadata.annotations.{k}"),
                    val,
                );
            }
        }
    });
}

/// Claim templates of O (ID) that bind existing data or volumes.
fn claim_sources(o: &render::Object, id: &str, out: &mut Findings) {
    for (i, t) in o
        .body
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        for k in ["dataSource", "dataSourceRef", "volumeName"] {
            if let Some(x) = t.get("spec").and_then(|s| s.get(k)) {
                out.add(
                    "claim-source",
                    id,
                    format!("spec.volumeClaimTemplates[{i}].spec.{k}"),
                    x,
                );
            }
        }
    }
}
