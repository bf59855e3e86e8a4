//! What the default policy allows, as the oracle knows it (no slurmops policy code): Pod
//! Security "baseline" capabilities and sysctls, SELinux types, volume types, mount paths, env
//! names, images, program-valued Slurm keys, slurmops' own labels and the shapes of topology.yaml.

/// A mount path with `.`, `..`, repeated and trailing slashes resolved.
pub(super) fn normalize(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for s in p.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

const SENSITIVE_DIRS: &[&str] = &[
    "/bin", "/sbin", "/usr", "/lib", "/lib64", "/etc", "/root", "/proc", "/sys", "/dev", "/run",
    "/var/run", "/boot",
];

pub(super) fn sensitive_mount(p: &str) -> bool {
    p == "/"
        || SENSITIVE_DIRS
            .iter()
            .any(|d| p == *d || p.starts_with(&format!("{d}/")))
        || p.starts_with("/var/spool/slurm")
        || p == "/var/lib/mysql"
        || p.starts_with("/var/lib/mysql/")
}

pub(super) const BASELINE_CAPS: &[&str] = &[
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

pub(super) const SAFE_SYSCTLS: &[&str] = &[
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

pub(super) const SELINUX_TYPES: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

pub(super) const VOLUME_TYPES: &[&str] = &[
    "emptyDir",
    "configMap",
    "secret",
    "persistentVolumeClaim",
    "projected",
];

/// Whether NAME may be set on a container the default policy has not reviewed.
pub(super) fn env_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return false;
    }
    const EXACT: &[&str] = &[
        "PATH",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "PS4",
        "PROMPT_COMMAND",
        "GLIBC_TUNABLES",
        "RUBYOPT",
        "NODE_OPTIONS",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "HOME",
        "SHELL",
    ];
    const PREFIXES: &[&str] = &[
        "LD_", "SLURM", "SACKD", "PMI", "OMPI", "NVIDIA_", "CUDA_", "NCCL_", "__NV", "MALLOC_",
        "PYTHON", "PERL5", "OPENSSL_",
    ];
    !(EXACT.contains(&name)
        || name.ends_with("PATH")
        || PREFIXES.iter().any(|p| name.starts_with(p)))
}

pub(super) fn image_ok(image: &str) -> bool {
    let under = |prefix: &str, sep: &[char]| {
        image
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(sep))
    };
    let clean = !image.contains("..")
        && !image
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\\');
    clean
        && ((image.starts_with("ghcr.io/slinkyproject/")
            && image.len() > "ghcr.io/slinkyproject/".len())
            || under("docker.io/library/mariadb", &[':', '@']))
}

/// Keys of Slurm's config files that name programs, plugins, addresses, users or included files.
pub(super) const SLURM_CODE_KEYS: &[&str] = &[
    "prolog",
    "epilog",
    "prologslurmctld",
    "epilogslurmctld",
    "taskprolog",
    "taskepilog",
    "srunprolog",
    "srunepilog",
    "healthcheckprogram",
    "mailprog",
    "rebootprogram",
    "resumeprogram",
    "suspendprogram",
    "plugindir",
    "plugstackconfig",
    "jobsubmitplugins",
    "slurmctldaddr",
    "slurmctldhost",
    "accountingstoragehost",
    "storagehost",
    "dbdhost",
    "slurmuser",
    "authtype",
    "pmixenv",
    "include",
    // oci.conf and helpers.conf run programs too.
    "runtimerun",
    "runtimecreate",
    "runtimestart",
    "runtimekill",
    "runtimedelete",
    "runtimequery",
    "helper",
];

const MANAGED_LABELS: &[&str] = &[
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
];

pub(super) fn managed_label(k: &str) -> bool {
    MANAGED_LABELS.contains(&k)
        || k.starts_with("slurmops.dev/")
        || k.starts_with("applyset.kubernetes.io/")
}

/// Whether LINE of topology.yaml has a shape its template writes.
pub(super) fn topology_line_ok(line: &str) -> bool {
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let quoted = |s: &str, list: bool| {
        s.len() >= 2
            && s.starts_with('"')
            && s.ends_with('"')
            && s[1..s.len() - 1].chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || (list && c == ',')
            })
    };
    if line.is_empty() || line == "#" || line.starts_with("# ") {
        return true;
    }
    if let Some(n) = line.strip_prefix("- topology: ") {
        return word(n);
    }
    if let Some(v) = line.strip_prefix("  cluster_default: ") {
        return v == "true" || v == "false";
    }
    if let Some(v) = line.strip_prefix("    block_sizes: [") {
        return v
            .strip_suffix(']')
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    }
    if let Some(v) = line.strip_prefix("      - block: ") {
        return quoted(v, false);
    }
    if let Some(v) = line.strip_prefix("      - switch: ") {
        return quoted(v, false);
    }
    if let Some(v) = line.strip_prefix("        children: ") {
        return quoted(v, true);
    }
    matches!(
        line,
        "  block:" | "    blocks:" | "  tree:" | "    switches:"
    )
}
