//! Checks of the file's header (apiVersion, kind, metadata) and of spec's own fields (the
//! images' sbin, network policy, backup, cluster name, Slurm version, pull secrets, auth keys,
//! restapi), handing each section to its own checks.

use super::super::diag::{Path, clip};
use super::super::release;
use super::super::types::*;
use super::Validator;
use super::kubernetes_names::is_dns_subdomain;

impl Validator {
    pub(super) fn header(&mut self, c: &ClusterFile) {
        if c.api_version != API_VERSION {
            self.err(
                Path::parse("apiVersion"),
                format!("unsupported apiVersion {:?}", c.api_version),
                format!("use {API_VERSION}"),
            );
        }
        if c.kind != KIND {
            self.err(
                Path::parse("kind"),
                format!("unsupported kind {:?}", c.kind),
                format!("use {KIND}"),
            );
        }
        // Object names are `NAME-controller-headless` and the like: keep room for the suffixes.
        self.dns_label(Path::parse("metadata.name"), "name", &c.metadata.name, 40);
        self.dns_label(
            Path::parse("metadata.namespace"),
            "namespace",
            &c.metadata.namespace,
            63,
        );
    }

    pub(super) fn spec(&mut self, s: &ClusterSpec, meta: &Metadata, p: &Path) {
        let sbin = &s.images.sbin;
        // Written as the kernel resolves it: no empty, `.` or `..` component, no trailing `/`
        // (the policy compares mount paths with it).
        let plain = sbin.len() <= 255
            && sbin.strip_prefix('/').is_some_and(|rest| {
                rest.split('/').all(|c| {
                    !c.is_empty()
                        && c != ".."
                        && c != "."
                        && c.bytes().all(|b| b.is_ascii_graphic())
                })
            });
        if !plain {
            self.err(
                p.key("images").key("sbin"),
                format!(
                    "{:?} is not an absolute directory: Slurm's daemons run by their path in it",
                    clip(sbin)
                ),
                "write the directory the images keep slurmctld and slurmd in, e.g. /usr/sbin",
            );
        }
        self.policy(&s.policy, &p.key("policy"));
        self.active_checks(s, &p.key("policy"));
        if let Some(np) = &s.network_policy {
            for (field, list) in [
                ("restapiFromNamespaces", &np.restapi_from_namespaces),
                ("metricsFromNamespaces", &np.metrics_from_namespaces),
            ] {
                let at = p.key("networkPolicy").key(field);
                for (i, ns) in list.iter().enumerate() {
                    self.dns_label(at.index(i), "namespace", ns, 63);
                }
            }
        }
        if let Some(b) = &s.backup {
            let at = p.key("backup");
            if let Some(claim) = &b.claim
                && !is_dns_subdomain(claim)
            {
                self.err(
                    at.key("claim"),
                    format!("{:?} is not a PersistentVolumeClaim name", clip(claim)),
                    "name an existing claim of the cluster's namespace (lowercase letters, digits, `-` and `.`)",
                );
            }
            match (&b.claim, b.own_copies) {
                (Some(_), true) => self.err(
                    at.key("ownCopies"),
                    "both a claim for slurmops's copies and ownCopies",
                    "keep one: claim (slurmops copies before an upgrade) or ownCopies: true (you do)",
                ),
                (None, false) => self.err(
                    at.clone(),
                    "backup names neither a claim nor ownCopies",
                    "set backup.claim to a PersistentVolumeClaim, or backup.ownCopies: true",
                ),
                _ => {}
            }
            if let Some(image) = &b.image
                && (image.is_empty()
                    || image.len() > 512
                    || !image.bytes().all(|c| c.is_ascii_graphic()))
            {
                self.err(
                    at.key("image"),
                    format!("{:?} is not an image reference", clip(image)),
                    "write a reference such as docker.io/library/mariadb:11.8",
                );
            }
            for f in crate::cluster::backup::schedule_findings(s, &at) {
                self.push(f);
            }
        }
        // Without clusterName, metadata.name (checked above, at most 40) is the ClusterName.
        if let Some(cluster_name) = s.cluster_name.as_deref() {
            if cluster_name.len() > 40 {
                self.err(
                    p.key("clusterName"),
                    format!(
                        "ClusterName is {} characters long; Slurm allows at most 40",
                        cluster_name.len()
                    ),
                    "choose a shorter spec.clusterName",
                );
            } else if cluster_name.is_empty()
                || !cluster_name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            {
                self.err(
                    p.key("clusterName"),
                    format!("ClusterName {cluster_name:?} has characters Slurm does not keep"),
                    "use lowercase letters, digits, '-' and '_'",
                );
            }
        }
        let version = release::find(&s.slurm_version);
        if release::major(&s.slurm_version).is_none() {
            self.err(
                p.key("slurmVersion"),
                format!("{:?} is not a Slurm release", s.slurm_version),
                format!("write it as YY.MM, one of {}", release::supported_list()),
            );
        } else if version.is_none() {
            self.err(
                p.key("slurmVersion"),
                format!("slurmops does not support Slurm {}", s.slurm_version),
                format!(
                    "use one of the supported releases: {}",
                    release::supported_list()
                ),
            );
        }
        for (i, name) in s.image_pull_secrets.iter().enumerate() {
            if !is_dns_subdomain(name) {
                self.err(
                    p.key("imagePullSecrets").index(i),
                    format!("{name:?} is not a valid Secret name"),
                    "use a DNS-1123 subdomain",
                );
            }
        }
        self.secret_ref(&s.auth.slurm_key, &p.key("auth").key("slurmKey"));
        self.secret_ref(&s.auth.jwt_key, &p.key("auth").key("jwtKey"));
        self.controller(&s.controller, version, &p.key("controller"));
        self.accounting(&s.accounting, &p.key("accounting"));
        if s.restapi.enabled && s.restapi.replicas == 0 {
            self.err(
                p.key("restapi").key("replicas"),
                "restapi is enabled with 0 replicas",
                "set replicas to 1 or more, or enabled: false",
            );
        }
        self.pod(&s.restapi.pod, &p.key("restapi"));
        self.login_sets(s, &p.key("loginSets"));
        self.node_sets(s, meta, &p.key("nodeSets"));
        self.partitions(s, &p.key("partitions"));
        if let Some(t) = &s.topology {
            self.topology(t, s, version, &p.key("topology"));
        }
    }
}
