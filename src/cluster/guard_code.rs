//! Guardrails on the code a commit makes run, not only on pod fields (issue 54): under the
//! install's `guarded` trust level (the default), a commit may not choose
//!
//! - an image outside the install's allowed repositories (by default the images slurmops
//!   renders: `ghcr.io/slinkyproject` and `docker.io/library/mariadb`), nor one without a
//!   digest when the install requires digests: an image runs in slurmd's privileged container;
//! - code Slurm runs as root or as its administrator that the install has not reviewed: the
//!   health check, prolog and epilog scripts, canary and active check scripts, and the config
//!   files that name programs or plugins (plugstack.conf, oci.conf, helpers.conf, the Lua
//!   files, job_container.conf, namespace.yaml), inline (the install lists its digest) or from
//!   a ConfigMap the install names;
//! - a slurm.conf or slurmdbd.conf key that names a program, a plugin directory or where
//!   credentials go (`StorageHost`, `AccountingStoragePass`, `SlurmUser`, ...), unless the
//!   install allows that key;
//! - a PersistentVolumeClaim or ConfigMap the install does not name, mounted anywhere (another
//!   cluster's state volume, an `authorized_keys` file);
//! - a volume slurmops renders (the Slurm config with its key, the database password) in a
//!   container slurmops did not render;
//! - a label slurmops sets (`app.kubernetes.io/name`, `instance`, `component`, `managed-by`,
//!   `slurmops.dev/*`, `applyset.kubernetes.io/*`), on which Services, selectors, prune and
//!   adoption rely.
//!
//! Under `trusted` none of this is checked: the repository is the node administrator.

use serde_json::{Map, Value};
use sha2::Digest;

use super::diag::{Finding, Path};
use super::guardrails::Guardrails;

use super::guard_images::{default_images, image_finding};

use super::types::ClusterFile;

/// Config files that hold no program, plugin or script: any other one is code.
const DATA_FILES: &[&str] = &[
    "acct_gather.conf",
    "cgroup.conf",
    "gres.conf",
    "mpi.conf",
    "topology.conf",
    "topology.yaml",
];

/// slurm.conf and slurmdbd.conf keys that name a program, load site code or decide where
/// credentials and Slurm's own traffic go (compared without case, as Slurm reads them).
const GUARDED_KEYS: &[&str] = &[
    // Programs Slurm runs, as root or as SlurmUser.
    "Prolog",
    "Epilog",
    "PrologSlurmctld",
    "EpilogSlurmctld",
    "TaskProlog",
    "TaskEpilog",
    "SrunProlog",
    "SrunEpilog",
    "HealthCheckProgram",
    "MailProg",
    "RebootProgram",
    "ResumeProgram",
    "SuspendProgram",
    "ResumeFailProgram",
    "UnkillableStepProgram",
    "SlurmctldPrimaryOnProg",
    "SlurmctldPrimaryOffProg",
    "ResvProlog",
    "ResvEpilog",
    "ArchiveScript",
    // Site code loaded into Slurm's daemons and clients.
    "PluginDir",
    "PlugStackConfig",
    "JobSubmitPlugins",
    "CliFilterPlugins",
    "PrEpPlugins",
    "JobCompType",
    "JobCompLoc",
    "BurstBufferType",
    "NodeFeaturesPlugins",
    // Where credentials and Slurm's traffic go; who the daemons run as.
    "StorageHost",
    "StorageBackupHost",
    "StoragePort",
    "StorageUser",
    "StoragePass",
    "StorageLoc",
    "StorageParameters",
    "StorageType",
    "ArchiveDir",
    "AccountingStorageHost",
    "AccountingStorageBackupHost",
    "AccountingStorageExternalHost",
    "AccountingStoragePort",
    "AccountingStoragePass",
    "AccountingStorageUser",
    "AccountingStorageType",
    "JobCompHost",
    "JobCompPass",
    "JobCompPort",
    "JobCompUser",
    "JobCompParams",
    "AuthType",
    "AuthAltTypes",
    "AuthAltParameters",
    "AuthInfo",
    "CredType",
    "DbdHost",
    "DbdBackupHost",
    "DbdAddr",
    "SlurmctldHost",
    "ControlMachine",
    "BackupController",
    "SlurmUser",
    "SlurmdUser",
    "FederationParameters",
];

/// Whether K is a label slurmops sets and selects, prunes or adopts on: the recommended labels
/// it sets, and every label under its own prefix and the ApplySet's (a pod or object carrying
/// another set's `applyset.kubernetes.io/part-of` would be pruned by that set's apply). Other
/// recommended labels (`app.kubernetes.io/part-of`, `version`) are the user's.
pub fn own_label(k: &str) -> bool {
    use crate::vocab::{
        LABEL_APPLYSET_PART_OF, LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME,
        LABEL_NODESET,
    };
    let under = |l: &str| {
        l.split_once('/')
            .is_some_and(|(p, _)| k.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
    };
    [
        LABEL_NAME,
        LABEL_INSTANCE,
        LABEL_COMPONENT,
        LABEL_MANAGED_BY,
    ]
    .contains(&k)
        || under(LABEL_NODESET)
        || under(LABEL_APPLYSET_PART_OF)
}

/// Every way C (SPEC: its spec as JSON) makes code run that the install G did not allow.
pub(super) fn check(g: &Guardrails, c: &ClusterFile, spec: &Value, out: &mut Vec<Finding>) {
    let root = Path::root().key("spec");
    default_images(g, c, &root, out);
    let mut w = Walk { g, out };
    w.value(spec, &root, &[]);
    w.labels(
        &c.metadata.labels,
        &Path::root().key("metadata").key("labels"),
    );
}

/// The `sha256:HEX` digest an install lists to allow code it reviewed.
pub fn digest(code: &str) -> String {
    let d = sha2::Sha256::digest(code.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

struct Walk<'a> {
    g: &'a Guardrails,
    out: &'a mut Vec<Finding>,
}

impl Walk<'_> {
    /// V at AT, under the keys ABOVE (innermost last).
    fn value(&mut self, v: &Value, at: &Path, above: &[&str]) {
        match v {
            Value::Object(m) => self.object(m, at, above),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.value(item, &at.index(i), above);
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, m: &Map<String, Value>, at: &Path, above: &[&str]) {
        let parent = above.last().copied().unwrap_or_default();
        for (k, child) in m {
            let here = at.key(k);
            let mut deeper = above.to_vec();
            deeper.push(k);
            match (k.as_str(), child) {
                ("labels", Value::Object(l)) => {
                    let l = l
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect();
                    self.labels(&l, &here);
                    continue;
                }
                ("annotations" | "nodeSelector" | "options", _) => continue,
                ("slurmConf" | "slurmdbdConf", Value::Object(keys)) => {
                    self.slurm_keys(keys, &here);
                    continue;
                }
                ("configFiles", Value::Object(files)) => {
                    self.config_files(files, &here);
                    continue;
                }
                ("image", Value::String(image)) => {
                    image_finding(self.g, image, here.clone(), "image", "image", self.out);
                }
                ("images", Value::Object(images)) if above.is_empty() => {
                    for (program, image) in images {
                        if let Value::String(image) = image
                            && !matches!(
                                program.as_str(),
                                "registry" | "flavor" | "pullPolicy" | "sbin"
                            )
                        {
                            image_finding(
                                self.g,
                                image,
                                here.key(program),
                                &format!("{program}'s image"),
                                &format!("images.{program}"),
                                self.out,
                            );
                        }
                    }
                    continue;
                }
                ("program", Value::String(code)) if parent == "healthCheck" => self.code(
                    code,
                    here.clone(),
                    "the health check: slurmd runs it as root on every worker, on a timer",
                ),
                ("content", Value::String(code)) if above.contains(&"scripts") => self.code(
                    code,
                    here.clone(),
                    &format!("this {parent} script: Slurm runs it as root"),
                ),
                ("script", Value::String(code)) => self.code(
                    code,
                    here.clone(),
                    "this job script: slurmops submits it as its Slurm user, by default the Slurm administrator",
                ),
                // Every reference to a ConfigMap whose text runs or is mounted (a canary's
                // `configMapRef` too): only the install's.
                ("scriptRef" | "configMap" | "configMapRef", Value::Object(r)) => {
                    if let Some(Value::String(name)) = r.get("name") {
                        self.config_map(name, here.key("name"));
                    }
                }
                ("persistentVolumeClaim", Value::Object(c)) => {
                    if let Some(Value::String(name)) = c.get("claimName") {
                        self.claim(name, here.key("claimName"));
                    }
                }
                ("existingClaim", Value::String(name)) => self.claim(name, here.clone()),
                ("podTemplate", Value::Object(t)) => {
                    let declared: Vec<&str> = m
                        .get("volumes")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.get("name")?.as_str())
                        .collect();
                    self.containers(t, &here, &declared);
                }
                _ => {}
            }
            self.value(child, &here, &deeper);
        }
    }

    /// Inline CODE at AT (WHAT runs it): allowed when the install lists its digest.
    fn code(&mut self, code: &str, at: Path, what: &str) {
        let d = digest(code);
        if !self.g.programs.contains(&d) {
            self.out.push(
                Finding::new(
                    at,
                    format!("{what}; this install has not reviewed this code ({d})"),
                )
                .hint(format!(
                    "once reviewed, the install allows exactly this code with the daemon's --allow-program {d} (policy allowPrograms)"
                )),
            );
        }
    }

    fn config_map(&mut self, name: &str, at: Path) {
        if !self.g.config_maps.iter().any(|c| c == name) {
            self.out.push(
                Finding::new(
                    at,
                    format!(
                        "ConfigMap {name}: pods may mount, and Slurm may run, only the ConfigMaps this install names (one could hold root's authorized_keys or another cluster's files)"
                    ),
                )
                .hint(
                    "the install allows it with the daemon's --allow-config-map NAME (policy allowConfigMaps)",
                ),
            );
        }
    }

    fn claim(&mut self, name: &str, at: Path) {
        if !self.g.volume_claims.iter().any(|c| c == name) {
            self.out.push(
                Finding::new(
                    at,
                    format!(
                        "PersistentVolumeClaim {name}: pods may mount only the claims this install names (it could be another cluster's state or home)"
                    ),
                )
                .hint(
                    "the install allows it with the daemon's --allow-volume-claim NAME (policy allowVolumeClaims)",
                ),
            );
        }
    }

    /// Labels L at AT: none of slurmops's own.
    fn labels(&mut self, l: &std::collections::BTreeMap<String, String>, at: &Path) {
        for k in l.keys() {
            if own_label(k) {
                self.out.push(
                    Finding::new(
                        at.key(k),
                        format!(
                            "label {}: slurmops sets this label itself; Services, selectors, prune and adoption rely on it",
                            super::diag::clip(k)
                        ),
                    )
                    .hint("name your label under your own prefix, e.g. example.com/team"),
                );
            }
        }
    }

    fn slurm_keys(&mut self, keys: &Map<String, Value>, at: &Path) {
        for k in keys.keys() {
            let Some(known) = GUARDED_KEYS.iter().find(|g| g.eq_ignore_ascii_case(k)) else {
                continue;
            };
            if self.g.slurm_keys.iter().any(|a| a.eq_ignore_ascii_case(k)) {
                continue;
            }
            self.out.push(
                Finding::new(
                    at.key(k),
                    format!(
                        "{known} names a program, site code or where credentials go: the install decides it, not a commit"
                    ),
                )
                .hint(format!(
                    "leave it to slurmops, or the install allows it with the daemon's --allow-slurm-key {known} (policy allowSlurmKeys)"
                )),
            );
        }
    }

    fn config_files(&mut self, files: &Map<String, Value>, at: &Path) {
        for (name, f) in files {
            if DATA_FILES.contains(&name.as_str()) {
                continue;
            }
            let here = at.key(name);
            if let Some(Value::String(code)) = f.get("content") {
                self.code(
                    code,
                    here.key("content"),
                    &format!(
                        "{}: it names programs or plugins Slurm runs as root",
                        super::diag::clip(name)
                    ),
                );
            }
            if let Some(Value::String(cm)) = f.get("configMapRef").and_then(|r| r.get("name")) {
                self.config_map(cm, here.key("configMapRef").key("name"));
            }
        }
    }

    /// The containers cluster.yaml adds in pod template T (at AT): each may mount only the
    /// volumes DECLARED beside it in cluster.yaml, never one slurmops renders.
    fn containers(&mut self, t: &Map<String, Value>, at: &Path, declared: &[&str]) {
        // Looked up, not searched: the volumes and the mounts are as many as a push makes.
        let declared: std::collections::HashSet<&str> = declared.iter().copied().collect();
        for list in ["extraContainers", "initContainers"] {
            let Some(Value::Array(cs)) = t.get(list) else {
                continue;
            };
            for (i, c) in cs.iter().enumerate() {
                let mounts = c.get("volumeMounts").and_then(Value::as_array);
                for (j, m) in mounts.into_iter().flatten().enumerate() {
                    let Some(name) = m.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    if !declared.contains(name) {
                        self.out.push(
                            Finding::new(
                                at.key(list).index(i).key("volumeMounts").index(j).key("name"),
                                format!(
                                    "volume {}: a container cluster.yaml adds may mount only the volumes cluster.yaml declares beside it, never one slurmops renders (Slurm's config and key, the database password)",
                                    super::diag::clip(name)
                                ),
                            )
                            .hint("declare the volume in this component's volumes, or run the program in slurmops's own container"),
                        );
                    }
                }
            }
        }
    }
}
