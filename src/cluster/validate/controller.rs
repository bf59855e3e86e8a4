//! Checks of `spec.controller`: HA and persistence, scripts, the extra config files Slurm serves
//! configless, and the node health check.

use std::collections::BTreeSet;

use super::super::diag::Path;
use super::super::release;
use super::super::types::*;
use super::super::values::parse_quantity;
use super::Validator;

/// Config files slurmops renders itself: `controller.configFiles` may not replace them.
pub const RENDERED_FILES: &[(&str, &str)] = &[
    ("slurm.conf", "set spec.controller.slurmConf"),
    ("slurmdbd.conf", "set spec.accounting.slurmdbdConf"),
    (
        "cgroup.conf",
        "slurmops renders it for the workers' cgroups",
    ),
    ("gres.conf", "set spec.nodeSets[].gpus"),
    ("topology.conf", "set spec.topology"),
    ("topology.yaml", "set spec.topology"),
];

/// File content cluster.yaml may carry in the slurm ConfigMap, leaving room under Kubernetes'
/// 1 MiB object limit for slurm.conf and the rest.
const MAX_INLINE_BYTES: usize = 900 << 10;

impl Validator {
    pub(super) fn controller(
        &mut self,
        c: &Controller,
        version: Option<&release::Release>,
        p: &Path,
    ) {
        self.pod(&c.pod, p);
        self.slurm_conf_map(&c.slurm_conf, &p.key("slurmConf"), true);
        if let Some(ha) = &c.ha {
            if ha.backups == 0 {
                self.err(
                    p.key("ha").key("backups"),
                    "backups must be 1 or more",
                    "remove `ha` for a single controller",
                );
            }
            if !c.persistence.enabled {
                self.err(p.key("persistence").key("enabled"), "high availability needs the controllers' state on a volume they share: without persistence each controller would keep its own copy in an emptyDir, and a backup taking over would start from nothing", "set controller.persistence.enabled: true with existingClaim naming a ReadWriteMany PersistentVolumeClaim");
            } else if c.persistence.existing_claim.is_none() {
                self.err(p.key("ha"), "high availability needs a state volume shared by every controller", "set controller.persistence.existingClaim to a ReadWriteMany PersistentVolumeClaim");
            }
        }
        if c.persistence.enabled && parse_quantity(&c.persistence.size).is_none_or(|b| b <= 0.0) {
            self.err(
                p.key("persistence").key("size"),
                format!("{:?} is not a storage size", c.persistence.size),
                "write it as a quantity such as 10Gi",
            );
        }
        if let Some(r) = version.filter(|r| c.metrics.enabled && !r.openmetrics) {
            self.err(
                p.key("metrics").key("enabled"),
                format!("slurmctld metrics (metrics/openmetrics) arrived in Slurm 25.11: Slurm {} has no such plugin", r.version),
                format!("raise spec.slurmVersion to a release that has it ({}), or turn metrics off", release::SUPPORTED.iter().filter(|r| r.openmetrics).map(|r| r.version).collect::<Vec<_>>().join(", ")),
            );
        }
        if let Some(sm) = &c.metrics.service_monitor {
            let sp = p.key("metrics").key("serviceMonitor");
            if sm.enabled && !c.metrics.enabled {
                self.err(
                    sp.key("enabled"),
                    "a ServiceMonitor needs metrics on",
                    "set controller.metrics.enabled: true",
                );
            }
            if sm.interval.as_secs() == 0 {
                self.err(
                    sp.key("interval"),
                    "the scrape interval must be at least 1s",
                    "e.g. interval: 30s",
                );
            }
        }
        self.config_files(c, version, p);
        self.health_check(c, p);
        let mut names = BTreeSet::new();
        let kinds = [
            ("prolog", &c.scripts.prolog),
            ("epilog", &c.scripts.epilog),
            ("prologSlurmctld", &c.scripts.prolog_slurmctld),
            ("epilogSlurmctld", &c.scripts.epilog_slurmctld),
        ];
        for (kind, scripts) in kinds {
            for (i, s) in scripts.iter().enumerate() {
                let sp = p.key("scripts").key(kind).index(i);
                let name_ok = !s.name.is_empty()
                    && s.name.len() <= 200
                    && s.name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                    && !s.name.starts_with('.');
                if !name_ok {
                    self.err(
                        sp.key("name"),
                        format!("{:?} is not a usable file name", s.name),
                        "use letters, digits, '-', '_' and '.'",
                    );
                } else if matches!(
                    s.name.as_str(),
                    "slurm.conf" | "cgroup.conf" | "gres.conf" | "topology.conf" | "slurmdbd.conf"
                ) {
                    self.err(
                        sp.key("name"),
                        format!("{} is a Slurm config file slurmops renders", s.name),
                        "give the script another name",
                    );
                } else if !names.insert(s.name.clone()) {
                    self.err(
                        sp.key("name"),
                        format!("script name {:?} is used twice", s.name),
                        "script names must be unique across all kinds",
                    );
                }
                if !s.content.starts_with("#!") {
                    self.err(
                        sp.key("content"),
                        "a script must start with an interpreter line",
                        "begin it with #!/bin/bash",
                    );
                }
            }
        }
    }
}

impl Validator {
    /// `controller.configFiles`: names Slurm serves configless on this release, one source each.
    pub(super) fn config_files(
        &mut self,
        c: &Controller,
        version: Option<&release::Release>,
        p: &Path,
    ) {
        let served = version.map(|r| r.configless()).unwrap_or_default();
        // Looked up, not searched: a push makes both the files and the scripts many.
        let scripts: std::collections::HashSet<&str> =
            c.scripts.all().map(|sc| sc.name.as_str()).collect();
        for (name, file) in &c.config_files {
            let fp = p.key("configFiles").key(name);
            if let Some((_, how)) = RENDERED_FILES.iter().find(|(n, _)| n == name) {
                self.err_at_key(
                    fp.clone(),
                    name,
                    format!("{name} is rendered by slurmops"),
                    *how,
                );
            } else if version.is_some() && !served.contains(&name.as_str()) {
                let allowed: Vec<&str> = served
                    .iter()
                    .copied()
                    .filter(|n| !RENDERED_FILES.iter().any(|(r, _)| r == n))
                    .collect();
                self.err_at_key(
                    fp.clone(),
                    name,
                    format!(
                        "slurmctld does not serve {name:?} configless, so no slurmd would get it"
                    ),
                    format!("use one of: {}", allowed.join(", ")),
                );
            }
            if scripts.contains(name.as_str()) {
                self.err_at_key(
                    fp.clone(),
                    name,
                    format!("{name} is also the name of a script"),
                    "rename the script",
                );
            }
            self.config_file(file, &fp);
        }
        let inline: usize = c
            .config_files
            .values()
            .filter_map(|f| f.content.as_ref().map(String::len))
            .chain(c.health_check.iter().map(|h| h.program.len()))
            .sum();
        if inline > MAX_INLINE_BYTES {
            self.err(
                p.key("configFiles"),
                format!("{inline} bytes of file content would not fit the slurm ConfigMap (Kubernetes allows 1 MiB per object)"),
                "keep large files in a Secret or ConfigMap of their own and reference them (secretRef, configMapRef)",
            );
        }
    }

    fn config_file(&mut self, f: &ConfigFile, p: &Path) {
        let sources = [
            f.content.is_some(),
            f.secret_ref.is_some(),
            f.config_map_ref.is_some(),
        ];
        if sources.iter().filter(|s| **s).count() != 1 {
            self.err(
                p.clone(),
                "a config file needs exactly one of content, secretRef and configMapRef",
                "keep the one that holds the file",
            );
        }
        if let Some(r) = &f.secret_ref {
            self.secret_ref(r, &p.key("secretRef"));
        }
        if let Some(r) = &f.config_map_ref {
            let as_secret = SecretRef {
                name: r.name.clone(),
                key: r.key.clone(),
            };
            self.secret_ref(&as_secret, &p.key("configMapRef"));
        }
    }

    /// `controller.healthCheck`: a script, a positive interval, and no HealthCheck* in slurmConf.
    pub(super) fn health_check(&mut self, c: &Controller, p: &Path) {
        let Some(h) = &c.health_check else {
            return;
        };
        let hp = p.key("healthCheck");
        if !h.program.starts_with("#!") {
            self.err(
                hp.key("program"),
                "the health check must start with an interpreter line",
                "begin it with #!/bin/sh",
            );
        }
        if h.interval.as_secs() == 0 {
            self.err(
                hp.key("interval"),
                "the interval must be at least 1s",
                "e.g. interval: 5m",
            );
        }
        for key in c.slurm_conf.keys() {
            if key.to_ascii_lowercase().starts_with("healthcheck") {
                self.err(
                    p.key("slurmConf").key(key),
                    format!("{key} is set by controller.healthCheck"),
                    "set it in controller.healthCheck, or remove healthCheck",
                );
            }
        }
    }
}
