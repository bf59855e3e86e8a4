//! Checks of what users add to the pods slurmops renders: volumes and their mounts, sidecar and
//! init containers, pod-template environment.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Volume, VolumeMount};

use super::super::diag::{Finding, Path, did_you_mean};
use super::super::types::*;
use super::Validator;
use super::kubernetes_names::{is_dns_label, is_dns_subdomain};

/// Volumes slurmops renders into worker pods: a user volume may not take their names.
pub const WORKER_VOLUMES: &[&str] = &["etc-slurm"];
/// Volumes slurmops renders into login pods.
pub const LOGIN_VOLUMES: &[&str] = &["etc-slurm", "authorized-keys", "sssd"];

impl Validator {
    pub(super) fn pod(&mut self, pod: &PodSettings, p: &Path) {
        if let Some(sa) = &pod.service_account_name
            && !is_dns_subdomain(sa)
        {
            self.err(
                p.key("serviceAccountName"),
                format!("{sa:?} is not a valid ServiceAccount name"),
                "use a DNS-1123 subdomain",
            );
        }
        if let Some(t) = &pod.pod_template {
            for (i, e) in t.env.iter().enumerate() {
                let upper = e.name.to_ascii_uppercase();
                let looks_secret = ["PASSWORD", "PASSWD", "SECRET", "TOKEN", "PRIVATE_KEY"]
                    .iter()
                    .any(|w| upper.contains(w));
                if looks_secret && e.value.as_deref().is_some_and(|v| !v.is_empty()) {
                    self.err(
                        p.key("podTemplate").key("env").index(i).key("value"),
                        format!("{} holds secret material inline", e.name),
                        "use valueFrom.secretKeyRef",
                    );
                }
            }
            let main: &[&str] = &["slurmctld", "slurmdbd", "slurmrestd", "slurmd", "login"];
            let mut names: BTreeSet<&str> = main.iter().copied().collect();
            let lists = [
                ("extraContainers", &t.extra_containers),
                ("initContainers", &t.init_containers),
            ];
            for (field, list) in lists {
                for (i, c) in list.iter().enumerate() {
                    self.container(c, &mut names, &p.key("podTemplate").key(field).index(i));
                }
            }
        }
    }

    /// A sidecar or init container: a unique DNS-1123 name and an image.
    fn container<'a>(&mut self, c: &'a Container, names: &mut BTreeSet<&'a str>, p: &Path) {
        if !is_dns_label(&c.name) || c.name.len() > 63 {
            self.err(
                p.key("name"),
                format!("{:?} is not a valid container name", c.name),
                "use lowercase letters, digits and '-' (at most 63)",
            );
        } else if !names.insert(c.name.as_str()) {
            self.err(
                p.key("name"),
                format!("container name {:?} is used twice in the pod", c.name),
                "container names must be unique within a pod, including slurmops' own",
            );
        }
        if c.image.as_deref().is_none_or(str::is_empty) {
            self.err(p.key("image"), "a container needs an image", "set image");
        }
    }

    /// User VOLUMES (plus CLAIMS, per-pod claim templates) with their MOUNTS: each mount names a
    /// volume, and no volume takes the name of one slurmops renders (RESERVED).
    pub(super) fn volumes(
        &mut self,
        volumes: &[Volume],
        claims: &[&str],
        mounts: &[VolumeMount],
        reserved: &[&str],
        p: &Path,
    ) {
        for (i, v) in volumes.iter().enumerate() {
            if reserved.contains(&v.name.as_str()) {
                self.err(
                    p.key("volumes").index(i).key("name"),
                    format!("volume name {:?} is taken by slurmops", v.name),
                    format!("rename it (taken: {})", reserved.join(", ")),
                );
            }
        }
        let names: BTreeSet<&str> = volumes
            .iter()
            .map(|v| v.name.as_str())
            .chain(claims.iter().copied())
            .collect();
        for (i, m) in mounts.iter().enumerate() {
            if !names.contains(m.name.as_str()) {
                let mut f = Finding::new(
                    p.key("volumeMounts").index(i).key("name"),
                    format!("no volume named {:?}", m.name),
                );
                f = match did_you_mean(&m.name, names.iter().copied()) {
                    Some(s) => f.hint(format!("did you mean `{s}`?")),
                    None => f.hint("declare it in volumes"),
                };
                self.push(f);
            }
        }
    }
}
