//! Guardrails owned by the install, never by git: what a commit may ask for however it is
//! written, checked after validation and reported the same way (each finding at its
//! `FILE:LINE:COL`, with the install setting that would allow it), so that a refused commit
//! changes nothing. The daemon takes them from its flags (`slurmops install` sets them) and is
//! safe by default; `validate` and `plan` check none unless given.
//!
//! - The namespaces a cluster may live in. The daemon's own namespace holds its git token,
//!   webhook secret and ServiceAccount token; a commit naming it would mount them into pods
//!   Slurm users reach.
//! - Node root: what cluster.yaml adds to pods (volumes, containers, pod settings of any
//!   component) may not mount the node's filesystem outside listed prefixes, share its
//!   namespaces, run privileged or with capabilities beyond Pod Security "baseline", run as
//!   a ServiceAccount not listed, or tolerate the control plane's taints. slurmd's own container
//!   (a NodeSet's `privileged`, on by default for cgroup job containment, and its
//!   `containerSecurityContext`) is what Slurm itself needs and is not checked here. The rules
//!   walk every field, so a new field of a pod is covered without a rule of its own.

use serde_json::Value;

use super::diag::{Finding, Path, PathSeg};
pub use super::guardrails::{DEFAULT_CLUSTER_SECRETS, Guardrails};
use super::types::ClusterFile;

/// Capabilities Pod Security "baseline" allows a container to add.
pub const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// SELinux types Pod Security "baseline" allows.
pub const BASELINE_SELINUX_TYPES: &[&str] = &[
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// Sysctls Pod Security "baseline" calls safe.
pub const BASELINE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// Taints of control-plane nodes (a pod tolerating them may run there).
pub const CONTROL_PLANE_TAINTS: &[&str] = &[
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

/// A NodeSet's settings of the slurmd container: Slurm's own need, not checked.
const SLURMD: &[&str] = &["privileged", "containerSecurityContext"];

/// Keys whose maps are the user's own words (labels, Slurm settings), not pod fields.
const FREE_MAPS: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "slurmConf",
    "slurmdbdConf",
    "options",
    "configFiles",
];

impl Guardrails {
    /// Every way C asks for more than the install allows.
    pub fn check(&self, c: &ClusterFile) -> Vec<Finding> {
        let mut out = Vec::new();
        if let Some(allowed) = &self.namespaces
            && !allowed.contains(&c.metadata.namespace)
        {
            out.push(
                Finding::new(
                    Path::root().key("metadata").key("namespace"),
                    format!(
                        "namespace {} is not one this install applies into ({})",
                        c.metadata.namespace,
                        allowed.join(", ")
                    ),
                )
                .hint(
                    "name one of those, or install the daemon for this namespace too (slurmops install --cluster-namespace, the daemon's --cluster-namespace)",
                ),
            );
        }
        if self.pods
            && let Ok(spec) = serde_json::to_value(&c.spec)
        {
            self.walk(&spec, &Path::root().key("spec"), &mut out);
            super::guard_code::check(self, c, &spec, &mut out);
        }
        if self.pods {
            self.secrets(c, &mut out);
            self.admins(c, &mut out);
        }
        out
    }

    /// Slurm rights from git: accounts-as-code makes a user an administrator or operator only
    /// where the install allows that user (an operator can drain any node, hold or cancel any
    /// job; an administrator is root in Slurm).
    fn admins(&self, c: &ClusterFile, out: &mut Vec<Finding>) {
        let users = Path::root().key("spec").key("accounting").key("users");
        for (i, u) in c.spec.accounting.users.iter().enumerate() {
            if !u.admin_level.is_none() && !self.slurm_admins.contains(&u.name) {
                out.push(
                    Finding::new(
                        users.index(i).key("adminLevel"),
                        format!(
                            "adminLevel {} for {}: Slurm's rights (drain any node, act on anyone's jobs{}) are the install's to give, not a commit's",
                            u.admin_level.as_str(),
                            super::diag::clip(&u.name),
                            match u.admin_level {
                                super::types::AdminLevel::Administrator => ", change Slurm's accounts",
                                _ => "",
                            }
                        ),
                    )
                    .hint(format!(
                        "leave it out, or the install allows it with the daemon's --allow-slurm-admin {} (policy allowSlurmAdmins)",
                        u.name
                    )),
                );
            }
        }
    }

    /// Secrets named beyond the cluster's own, and the database host its password goes to.
    fn secrets(&self, c: &ClusterFile, out: &mut Vec<Finding>) {
        let spec = Path::root().key("spec");
        let db = spec.key("accounting").key("database");
        let mut own = vec![
            (
                &c.spec.auth.jwt_key.name,
                spec.key("auth").key("jwtKey").key("name"),
            ),
            (
                &c.spec.auth.slurm_key.name,
                spec.key("auth").key("slurmKey").key("name"),
            ),
        ];
        if let Some(d) = &c.spec.accounting.database {
            own.push((&d.password.name, db.key("password").key("name")));
        }
        // The cluster's own are the ones the install assigned to it: naming another (the
        // daemon's git token, another cluster's key) would mount it into every Slurm pod.
        let assigned: Vec<&str> = match self.cluster_secrets.is_empty() {
            true => DEFAULT_CLUSTER_SECRETS.to_vec(),
            false => self.cluster_secrets.iter().map(String::as_str).collect(),
        };
        for (name, at) in &own {
            if !assigned.contains(&name.as_str()) {
                out.push(
                    Finding::new(
                        at.clone(),
                        format!(
                            "Secret {name} as the cluster's own: slurmops mounts it into Slurm's pods, and this install assigned this cluster {}",
                            super::diag::listed(assigned.iter().copied())
                        ),
                    )
                    .hint(format!(
                        "name one of those, or the install assigns it with the daemon's --cluster-secret {name} (policy clusterSecrets)"
                    )),
                );
            }
        }
        if let Some(d) = &c.spec.accounting.database
            && let Some(host) = d.host.as_ref().filter(|h| !self.database_hosts.contains(h))
        {
            out.push(
                Finding::new(
                    db.key("host"),
                    format!(
                        "database host {host}: slurmdbd sends it the database password, and this install lists no such host"
                    ),
                )
                .hint(
                    "the install allows it with the daemon's --allow-database-host HOST (slurmops install --allow-database-host)",
                ),
            );
        }
        let Ok(tree) = serde_json::to_value(c) else {
            return;
        };
        let mut found = Vec::new();
        super::validate::secrets::references(&tree, &Path::root(), None, &mut found);
        for (name, at) in found {
            // The cluster's own, at home or (refused by validation) elsewhere.
            if own.iter().any(|(n, _)| **n == name) || self.secrets.contains(&name) {
                continue;
            }
            out.push(
                Finding::new(
                    at,
                    format!(
                        "Secret {name}: pods and config files may name no Secret but the cluster's own and those this install lists (a Secret named here reaches pods Slurm users run in, or every node)"
                    ),
                )
                .hint(
                    "the install allows it with the daemon's --allow-secret NAME (slurmops install --allow-secret)",
                ),
            );
        }
    }

    fn walk(&self, v: &Value, at: &Path, out: &mut Vec<Finding>) {
        match v {
            Value::Object(m) => {
                let node_set = matches!(
                    at.segments(),
                    [PathSeg::Key(s), PathSeg::Key(n), PathSeg::Index(_)] if s == "spec" && n == "nodeSets"
                );
                for (k, child) in m {
                    // slurmd's own container: what Slurm needs (cgroups), named in the NodeSet.
                    if node_set && SLURMD.contains(&k.as_str()) {
                        continue;
                    }
                    let here = at.key(k);
                    self.field(k, child, &here, out);
                    if !FREE_MAPS.contains(&k.as_str()) {
                        self.walk(child, &here, out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.walk(item, &at.index(i), out);
                }
            }
            _ => {}
        }
    }

    /// Field K with value V at AT: a finding when the install does not allow it.
    fn field(&self, k: &str, v: &Value, at: &Path, out: &mut Vec<Finding>) {
        const PRIVILEGED: &str = "the install allows it with the daemon's --allow-privileged (slurmops install --allow-privileged)";
        let mut refuse = |path: Path, what: String, hint: &str| {
            out.push(Finding::new(path, what).hint(hint));
        };
        match (k, v) {
            ("hostPath", Value::Object(h)) => {
                let path = h.get("path").and_then(Value::as_str).unwrap_or_default();
                if !self.host_paths.iter().any(|p| under(path, p)) {
                    refuse(
                        at.key("path"),
                        format!(
                            "hostPath {path}: a pod mounting the node's filesystem there can take the node ({})",
                            match self.host_paths.is_empty() {
                                true => "this install allows no hostPath".to_string(),
                                false => format!("allowed under: {}", self.host_paths.join(", ")),
                            }
                        ),
                        "use a PersistentVolumeClaim, or the install allows the prefix with the daemon's --allow-host-path PREFIX (slurmops install --allow-host-path)",
                    );
                }
            }
            ("hostNetwork" | "hostPID" | "hostIPC", Value::Bool(true)) if !self.privileged => {
                refuse(
                    at.clone(),
                    format!("{k}: the pod would share the node's namespace"),
                    PRIVILEGED,
                );
            }
            ("privileged", Value::Bool(true)) if !self.privileged => {
                refuse(
                    at.clone(),
                    "a privileged container is root on the node".into(),
                    PRIVILEGED,
                );
            }
            ("capabilities", Value::Object(c)) if !self.privileged => {
                let added = c.get("add").and_then(Value::as_array);
                for (i, cap) in added.into_iter().flatten().enumerate() {
                    let name = cap.as_str().unwrap_or_default();
                    let bare = name.trim_start_matches("CAP_");
                    if !BASELINE_CAPABILITIES.contains(&bare) {
                        refuse(
                            at.key("add").index(i),
                            format!("capability {name} is beyond Pod Security baseline"),
                            PRIVILEGED,
                        );
                    }
                }
            }
            ("annotations", Value::Object(a)) if !self.privileged => {
                for (key, v) in a {
                    let profile = v.as_str().unwrap_or_default();
                    if key.starts_with("container.apparmor.security.beta.kubernetes.io/")
                        && profile != "runtime/default"
                        && !profile.starts_with("localhost/")
                    {
                        refuse(
                            at.key(key),
                            format!(
                                "AppArmor profile {}: the container would run without the runtime's confinement (beyond Pod Security baseline)",
                                super::diag::clip(profile)
                            ),
                            PRIVILEGED,
                        );
                    }
                }
            }
            ("gitRepo", Value::Object(_)) => refuse(
                at.clone(),
                "a gitRepo volume runs git on the node as root (Pod Security baseline forbids it)"
                    .into(),
                "clone the repository in an init container into an emptyDir",
            ),
            ("hostPort", Value::Number(n)) if !self.privileged && n.as_u64() != Some(0) => {
                refuse(
                    at.clone(),
                    format!(
                        "hostPort {n}: the pod would take a port of the node's own network (beyond Pod Security baseline)"
                    ),
                    PRIVILEGED,
                );
            }
            ("seccompProfile" | "appArmorProfile", Value::Object(p))
                if !self.privileged
                    && p.get("type").and_then(Value::as_str) == Some("Unconfined") =>
            {
                refuse(
                    at.key("type"),
                    format!(
                        "{k} Unconfined: the container would run without the runtime's confinement (beyond Pod Security baseline)"
                    ),
                    PRIVILEGED,
                );
            }
            ("seLinuxOptions", Value::Object(o)) if !self.privileged => {
                let ty = o.get("type").and_then(Value::as_str).unwrap_or_default();
                let own = |f: &str| {
                    o.get(f)
                        .and_then(Value::as_str)
                        .is_some_and(|v| !v.is_empty())
                };
                if !(ty.is_empty() || BASELINE_SELINUX_TYPES.contains(&ty))
                    || own("user")
                    || own("role")
                {
                    refuse(
                        at.clone(),
                        "these SELinux options choose a label beyond Pod Security baseline (a type other than container_t and its kin, or a user or role)".into(),
                        PRIVILEGED,
                    );
                }
            }
            ("procMount", Value::String(p)) if !self.privileged && p != "Default" => refuse(
                at.clone(),
                format!("procMount {p}: /proc unmasked (beyond Pod Security baseline)"),
                PRIVILEGED,
            ),
            ("windowsOptions", Value::Object(o))
                if !self.privileged && o.get("hostProcess") == Some(&Value::Bool(true)) =>
            {
                refuse(
                    at.key("hostProcess"),
                    "a host process container is the node's administrator".into(),
                    PRIVILEGED,
                );
            }
            ("sysctls", Value::Array(items)) if !self.privileged => {
                for (i, s) in items.iter().enumerate() {
                    let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
                    if !BASELINE_SYSCTLS.contains(&name) {
                        refuse(
                            at.index(i).key("name"),
                            format!(
                                "sysctl {}: not one Pod Security baseline calls safe",
                                super::diag::clip(name)
                            ),
                            PRIVILEGED,
                        );
                    }
                }
            }
            ("priorityClassName", Value::String(p)) if p.starts_with("system-") => refuse(
                at.clone(),
                format!(
                    "priority class {p}: the system classes are for the cluster's own components, which it would preempt"
                ),
                "name a priority class of your own",
            ),
            ("serviceAccountName", Value::String(sa)) if !self.service_accounts.contains(sa) => {
                refuse(
                    at.clone(),
                    format!(
                        "ServiceAccount {sa}: its token and its rights would be the pod's, reachable by Slurm users"
                    ),
                    "the install allows it with the daemon's --allow-service-account NAME (slurmops install --allow-service-account)",
                );
            }
            ("tolerations", Value::Array(ts)) if !self.control_plane => {
                for (i, t) in ts.iter().enumerate() {
                    let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
                    let all = key.is_empty()
                        && t.get("operator").and_then(Value::as_str) == Some("Exists");
                    if all || CONTROL_PLANE_TAINTS.contains(&key) {
                        refuse(
                            at.index(i),
                            "this toleration lets the pod run on control-plane nodes".into(),
                            "name the taints of the nodes meant for it, or the install allows it with the daemon's --allow-control-plane (slurmops install --allow-control-plane)",
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

/// PATH is PREFIX or below it (`/data` holds `/data/x`, not `/database`).
fn under(path: &str, prefix: &str) -> bool {
    if path.split('/').any(|c| c == "..") {
        return false;
    }
    let prefix = prefix.trim_end_matches('/');
    let path = path.trim_end_matches('/');
    path == prefix || path.starts_with(&format!("{prefix}/")) || prefix.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The repository example asks for a ServiceAccount per component and a privileged login
    /// container (enroot), and one volume here adds the rest of node root.
    fn asking() -> ClusterFile {
        let text = include_str!("../../examples/repo/cluster.yaml").replacen(
            "      # Users stage data on the same /home the workers mount.\n      volumes:\n        - name: shared\n          persistentVolumeClaim: {claimName: lustre-home}\n      volumeMounts:",
            "      volumes:\n        - name: shared\n          persistentVolumeClaim: {claimName: lustre-home}\n        - {name: root, hostPath: {path: /}}\n        - {name: data, hostPath: {path: /data/../etc}}\n        - {name: scratch, hostPath: {path: /scratch/x}}\n      podTemplate:\n        hostNetwork: true\n        labels: {privileged: \"true\"}\n        extraContainers:\n          - {name: s, image: s, securityContext: {capabilities: {add: [SYS_ADMIN, CHOWN]}}}\n      tolerations:\n        - {key: node-role.kubernetes.io/control-plane, operator: Exists}\n        - {operator: Exists}\n      volumeMounts:",
            1,
        );
        crate::cluster::load("cluster.yaml", &text).expect("valid")
    }

    fn paths(g: &Guardrails) -> Vec<String> {
        g.check(&asking())
            .iter()
            .map(|f| f.path.to_string())
            .collect()
    }

    #[test]
    fn by_default_nothing_of_node_root_passes_and_each_allowance_lets_its_own_through() {
        let safe = Guardrails::safe(vec!["slurm".into()]);
        let all = paths(&safe);
        let login = "spec.loginSets[0]";
        for want in [
            "spec.controller.serviceAccountName".to_string(),
            format!("{login}.serviceAccountName"),
            format!("{login}.containerSecurityContext.privileged"),
            format!("{login}.volumes[1].hostPath.path"),
            format!("{login}.volumes[2].hostPath.path"),
            format!("{login}.volumes[3].hostPath.path"),
            format!("{login}.podTemplate.hostNetwork"),
            format!("{login}.podTemplate.extraContainers[0].securityContext.capabilities.add[0]"),
            format!("{login}.tolerations[0]"),
            format!("{login}.tolerations[1]"),
            // Secrets beyond the cluster's own, and the database host.
            "spec.imagePullSecrets[0]".to_string(),
            format!("{login}.sssdConf.name"),
            format!("{login}.authorizedKeys.name"),
            "spec.accounting.database.host".to_string(),
        ] {
            assert!(all.contains(&want), "{want} not refused: {all:#?}");
        }
        // slurmd's own privileges (on by default) are Slurm's need.
        assert!(
            !all.iter()
                .any(|p| p.starts_with("spec.nodeSets") && p.ends_with(".privileged")),
            "{all:#?}"
        );
        // The cluster's own Secrets where slurmops mounts them are no finding (ConfigMaps are
        // the code guardrails' concern, guard_code).
        assert!(
            !all.iter()
                .any(|p| p.starts_with("spec.auth") || p.contains("accounting.database.password")),
            "{all:#?}"
        );
        // CHOWN is baseline; a label named `privileged` is the user's own word.
        assert!(
            !all.iter()
                .any(|p| p.ends_with("add[1]") || p.contains("labels")),
            "{all:#?}"
        );

        let widened = Guardrails {
            host_paths: vec!["/scratch".into(), "/data".into()],
            privileged: true,
            service_accounts: vec![
                "slurmctld".into(),
                "slurm-login".into(),
                "slurm-worker".into(),
            ],
            control_plane: true,
            secrets: vec!["ghcr-pull".into(), "login-ssh".into(), "login-sssd".into()],
            database_hosts: vec!["mariadb.databases.svc.cluster.local".into()],
            // What the example runs (guard_code's rules, issue 54).
            images: vec![
                "ghcr.io/slinkyproject".into(),
                "nvcr.io/nvidia/k8s/dcgm-exporter".into(),
                "s".into(),
            ],
            programs: {
                let c = asking().spec.controller;
                let mut code: Vec<String> = c.scripts.all().map(|s| s.content.clone()).collect();
                code.extend(c.config_files.values().filter_map(|f| f.content.clone()));
                code.extend(c.health_check.map(|h| h.program));
                code.iter()
                    .map(|c| super::super::guard_code::digest(c))
                    .collect()
            },
            volume_claims: vec!["lustre-home".into()],
            config_maps: vec!["slurm-oci".into()],
            slurm_admins: vec!["bob".into()],
            ..safe.clone()
        };
        // `/` is under no listed prefix; `/data/../etc` climbs out of /data.
        assert_eq!(
            paths(&widened),
            vec![
                format!("{login}.volumes[1].hostPath.path"),
                format!("{login}.volumes[2].hostPath.path"),
            ]
        );
        // `validate` and `plan` without a policy check none of it.
        assert!(paths(&Guardrails::default()).is_empty());
    }
}
