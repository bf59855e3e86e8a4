//! Environment variables a push adds to a container: a name the install's rule allows (never a
//! search path, loader, shell, Slurm, MPI, runtime or GPU-runtime variable, whatever the rule
//! says), a literal value or one from a ConfigMap or Secret the install allows. A name set twice
//! is refused (the last wins, so a second one would override slurmops's own).

use std::collections::BTreeSet;

use serde_json::Value;

use super::context::Cx;
use super::str_at;

/// Names no install rule allows: they choose the code a program loads or runs, where it sends
/// traffic, or the configuration Slurm, MPI and the GPU runtime read (compared without case).
const NEVER_EXACT: &[&str] = &[
    "ENV",
    "BASH_ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "PS4",
    "PROMPT_COMMAND",
    "HOME",
    "SHELL",
    "GLIBC_TUNABLES",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "RES_OPTIONS",
    "NODE_OPTIONS",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "RUBYOPT",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "FTP_PROXY",
];

/// Prefixes of names no install rule allows.
const NEVER_PREFIX: &[&str] = &[
    // Loader and libc.
    "LD_",
    "DYLD_",
    "MALLOC_",
    "RESOLV_",
    // Shell.
    "BASH_",
    // Slurm, its commands and plugins.
    "SLURM",
    "SACKD",
    "SPANK_",
    "SBATCH_",
    "SALLOC_",
    "SRUN_",
    "SQUEUE_",
    "SINFO_",
    "SACCT",
    "SCONTROL_",
    "SPRIO_",
    "SSHARE_",
    "SSTAT_",
    "SCANCEL_",
    "SREPORT_",
    "SBCAST_",
    "SATTACH_",
    "STRIGGER_",
    "MUNGE",
    // MPI and fabrics.
    "PMI",
    "OMPI_",
    "OPAL_",
    "PRTE_",
    "MPICH_",
    "I_MPI_",
    "HYDRA_",
    "UCX_",
    "UCC_",
    "HCOLL_",
    "FI_",
    "NCCL_",
    // Container and GPU runtimes.
    "NVIDIA_",
    "CUDA_",
    "__NV",
    "__GL",
    "NV_",
    "ROCR_",
    "HIP_",
    "HSA_",
    "ENROOT_",
    "PYXIS_",
    "APPTAINER",
    "SINGULARITY",
    "KUBERNETES_",
    // Interpreters.
    "PYTHON",
    "PERL",
    "RUBY",
    "LUA_",
    // TLS, Kerberos, git.
    "OPENSSL_",
    "SSL_",
    "GNUTLS_",
    "KRB5",
    "GIT_",
];

/// Why NAME is never allowed, if it is not.
pub fn never(name: &str) -> Option<&'static str> {
    let up = name.to_ascii_uppercase();
    if up.ends_with("PATH") || up.ends_with("LIB") {
        return Some("a search path: it decides which program or library is found");
    }
    if NEVER_EXACT.contains(&up.as_str()) || NEVER_PREFIX.iter().any(|p| up.starts_with(p)) {
        return Some(
            "a loader, shell, interpreter, proxy, Slurm, MPI or runtime variable: it chooses the code a program loads, where its traffic goes or the configuration it reads",
        );
    }
    None
}

/// Whether the install's RULES allow NAME (`NAME`, or `PREFIX*`).
pub fn allowed(rules: &[String], name: &str) -> bool {
    rules.iter().any(|r| match r.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => r == name,
    })
}

fn identifier(name: &str) -> bool {
    let mut b = name.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The env list V at FIELD; OWN: slurmops's own container's list there.
pub(super) fn check(cx: &mut Cx<'_>, field: &str, v: &Value, own: Option<&Value>) {
    let own: Vec<&Value> = own
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let mut seen = BTreeSet::new();
    for e in v.as_array().into_iter().flatten() {
        let name = str_at(e, "name").unwrap_or_default();
        let at = format!("{field}[{name}]");
        if !seen.insert(name) {
            cx.refuse(
                at,
                Some(name),
                format!("{name} is set twice: the last one wins, over slurmops's own"),
                "set each variable once",
            );
            continue;
        }
        if own.contains(&e) {
            continue;
        }
        if let Some(why) = never(name)
            .or((!identifier(name)).then_some("not a plain variable name (letters, digits and _)"))
        {
            cx.refuse(
                at,
                Some(name),
                format!("{name}: {why}; no install setting allows it"),
                "configure the program in its own file, or build it into the image",
            );
            continue;
        }
        if !allowed(&cx.g.env, name) {
            cx.refuse(
                at.clone(),
                Some(name),
                format!("environment variable {name}: this install's rule allows {}", describe(&cx.g.env)),
                format!("the install allows it with the daemon's --allow-env {name} (or a prefix, --allow-env 'PREFIX*'; policy allowEnv)"),
            );
        }
        if let Some(from) = e.get("valueFrom") {
            source(cx, &at, from);
        }
    }
}

fn describe(rules: &[String]) -> String {
    match rules.is_empty() {
        true => "none".into(),
        false => crate::cluster::diag::listed(rules.iter().map(String::as_str)),
    }
}

/// Where an env var's value comes from: the pod's own fields, or a ConfigMap or Secret the
/// install allows.
fn source(cx: &mut Cx<'_>, at: &str, from: &Value) {
    let Some(m) = from.as_object() else {
        return;
    };
    for (k, r) in m {
        let name = str_at(r, "name").unwrap_or_default();
        match k.as_str() {
            "fieldRef" | "resourceFieldRef" => {}
            "configMapKeyRef" => cx.config_map(at, name, "a value"),
            "secretKeyRef" => cx.secret(at, name, "a value"),
            other => cx.refuse(
                format!("{at}.valueFrom.{other}"),
                Some(other),
                format!("{other} is not a source a push may take a value from"),
                "use value, fieldRef, or a ConfigMap or Secret the install allows",
            ),
        }
    }
}

/// `envFrom` V at FIELD: every key of the source becomes a variable, names nobody checks, so
/// only from a ConfigMap or Secret the install allows (it vouches for their keys).
pub(super) fn from(cx: &mut Cx<'_>, field: &str, v: &Value, own: Option<&Value>) {
    if own == Some(v) {
        return;
    }
    for e in v.as_array().into_iter().flatten() {
        if let Some(r) = e.get("configMapRef") {
            let name = str_at(r, "name").unwrap_or_default();
            if !cx.g.config_maps.iter().any(|c| c == name) {
                config_map_from(cx, field, name);
            }
        } else if let Some(r) = e.get("secretRef") {
            cx.secret(field, str_at(r, "name").unwrap_or_default(), "environment");
        } else {
            cx.refuse(
                field,
                Some("envFrom"),
                "an envFrom source other than a ConfigMap or a Secret",
                "name the variables in env",
            );
        }
    }
}

fn config_map_from(cx: &mut Cx<'_>, field: &str, name: &str) {
    cx.refuse(
        field,
        Some(name),
        format!("ConfigMap {name} as environment: every key would become a variable, under names nobody checks"),
        "name the variables in env, or the install allows the ConfigMap with the daemon's --allow-config-map NAME (policy allowConfigMaps)",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_paths_loaders_slurm_and_runtime_variables_are_never_allowed() {
        for name in [
            "PATH",
            "LD_PRELOAD",
            "ld_library_path",
            "PYTHONPATH",
            "PERL5LIB",
            "SLURM_CONF",
            "SlurmD_x",
            "BASH_ENV",
            "ENV",
            "NVIDIA_VISIBLE_DEVICES",
            "CUDA_VISIBLE_DEVICES",
            "NCCL_NET_PLUGIN",
            "PMIX_MCA_x",
            "GLIBC_TUNABLES",
            "http_proxy",
            "KUBERNETES_SERVICE_HOST",
            "OMPI_MCA_plm",
        ] {
            assert!(never(name).is_some(), "{name}");
        }
        for name in ["TZ", "TEAM", "OMP_NUM_THREADS", "MY_SETTING"] {
            assert!(never(name).is_none(), "{name}");
        }
        let rules = vec!["TZ".to_string(), "SITE_*".into()];
        assert!(allowed(&rules, "TZ") && allowed(&rules, "SITE_X"));
        assert!(!allowed(&rules, "TZX") && !allowed(&rules, "SITE"));
        assert!(identifier("_A1") && !identifier("1A") && !identifier("A-B") && !identifier(""));
    }
}
