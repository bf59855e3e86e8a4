//! The install's guardrails as a file (`--policy FILE`), beside the `--allow-*` flags: one file
//! the platform team keeps, mounted read-only into the daemon from a ConfigMap it cannot write
//! (`slurmops install --policy CONFIGMAP`), and given as is to `validate --guardrails` and
//! `plan --guardrails` in a pull request's CI, so that both refuse the same commits. It widens
//! the safe defaults exactly as the flags do (the two add up); it is the operator's, never
//! git's, but it is still read as input: bounded, every problem at its `FILE:LINE:COL`.
//!
//! ```yaml
//! kind: Guardrails
//! clusterNamespaces: [hpc]
//! allowHostPaths: [/dev/infiniband]
//! allowSecrets: [ldap-bind]
//! ```

use super::diag::{Diagnostic, did_you_mean};
use super::yaml::{self, Node, Pos, Value};

/// Largest policy file read, in bytes.
pub const MAX_BYTES: u64 = 64 << 10;

/// What a policy file allows (each field as the flag of the same name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GuardFile {
    pub cluster_namespaces: Vec<String>,
    pub allow_host_paths: Vec<String>,
    pub allow_privileged: bool,
    pub allow_service_accounts: Vec<String>,
    pub allow_control_plane: bool,
    pub allow_secrets: Vec<String>,
    pub allow_database_hosts: Vec<String>,
    /// `trust: trusted` (the repository is the node administrator); None: not set (guarded).
    pub trusted: Option<bool>,
    pub allow_images: Vec<String>,
    pub require_digests: bool,
    pub allow_programs: Vec<String>,
    pub allow_slurm_keys: Vec<String>,
    pub allow_volume_claims: Vec<String>,
    pub allow_config_maps: Vec<String>,
    pub cluster_secrets: Vec<String>,
    pub allow_env: Vec<String>,
    pub allow_volume_types: Vec<String>,
    pub allow_slurm_admins: Vec<String>,
    pub allow_annotations: Vec<String>,
    pub allow_runtime_classes: Vec<String>,
}

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "clusterNamespaces",
    "allowHostPaths",
    "allowPrivileged",
    "allowServiceAccounts",
    "allowControlPlane",
    "allowSecrets",
    "allowDatabaseHosts",
    "trust",
    "allowImages",
    "requireDigests",
    "allowPrograms",
    "allowSlurmKeys",
    "allowVolumeClaims",
    "allowConfigMaps",
    "clusterSecrets",
    "allowEnv",
    "allowVolumeTypes",
    "allowSlurmAdmins",
    "allowAnnotations",
    "allowRuntimeClasses",
];

/// Reads the policy file at PATH: bounded in size, every problem reported.
pub fn read(path: &std::path::Path) -> Result<GuardFile, Vec<Diagnostic>> {
    use std::io::Read;
    let name = path.display().to_string();
    let whole = |message: String, hint: &str| {
        vec![Diagnostic {
            file: name.clone(),
            line: 1,
            col: 1,
            path: "(file)".into(),
            message,
            hint: Some(hint.into()),
        }]
    };
    let file = std::fs::File::open(path).map_err(|e| {
        whole(
            format!("cannot read the policy file: {e}"),
            "check --policy",
        )
    })?;
    let mut text = String::new();
    file.take(MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| {
            whole(
                format!("cannot read the policy file: {e}"),
                "it must be UTF-8 YAML",
            )
        })?;
    if text.len() as u64 > MAX_BYTES {
        return Err(whole(
            format!("the policy file is over {} KiB", MAX_BYTES >> 10),
            "a policy lists names and prefixes; is this the right file?",
        ));
    }
    parse(&name, &text)
}

/// Parses policy TEXT (FILE names it in diagnostics).
pub fn parse(file: &str, text: &str) -> Result<GuardFile, Vec<Diagnostic>> {
    let mut problems = Vec::new();
    let at = |pos: Pos, path: &str, message: String, hint: &str| Diagnostic {
        file: file.to_string(),
        line: pos.line(),
        col: pos.col(),
        path: path.to_string(),
        message,
        hint: Some(hint.to_string()),
    };
    let tree = yaml::parse(text).map_err(|e| {
        vec![at(
            e.pos,
            "(yaml)",
            e.message,
            "fix the YAML syntax of the policy file",
        )]
    })?;
    let Value::Map(entries) = &tree.value else {
        return Err(vec![at(
            tree.pos,
            "(root)",
            "a policy file is a mapping of the keys below".into(),
            &format!("keys: {}", KEYS.join(", ")),
        )]);
    };
    let mut g = GuardFile::default();
    for (k, v) in entries {
        let key = &*k.text;
        let mut list = |out: &mut Vec<String>| match strings(v) {
            Ok(items) => *out = items,
            Err(pos) => problems.push(at(
                pos,
                key,
                format!("{key} is a list of names"),
                &format!("{key}: [a, b]"),
            )),
        };
        match key {
            "apiVersion" if scalar(v) == Some("slurmops.dev/v1alpha1") => {}
            "kind" if scalar(v) == Some("Guardrails") => {}
            "apiVersion" | "kind" => problems.push(at(
                v.pos,
                key,
                format!("{key} is not this format's"),
                "apiVersion: slurmops.dev/v1alpha1, kind: Guardrails (both may be left out)",
            )),
            "clusterNamespaces" => list(&mut g.cluster_namespaces),
            "allowHostPaths" => list(&mut g.allow_host_paths),
            "allowServiceAccounts" => list(&mut g.allow_service_accounts),
            "allowSecrets" => list(&mut g.allow_secrets),
            "allowDatabaseHosts" => list(&mut g.allow_database_hosts),
            "allowImages" => list(&mut g.allow_images),
            "allowPrograms" => list(&mut g.allow_programs),
            "allowSlurmKeys" => list(&mut g.allow_slurm_keys),
            "allowVolumeClaims" => list(&mut g.allow_volume_claims),
            "allowConfigMaps" => list(&mut g.allow_config_maps),
            "clusterSecrets" => list(&mut g.cluster_secrets),
            "allowEnv" => list(&mut g.allow_env),
            "allowVolumeTypes" => list(&mut g.allow_volume_types),
            "allowSlurmAdmins" => list(&mut g.allow_slurm_admins),
            "allowAnnotations" => list(&mut g.allow_annotations),
            "allowRuntimeClasses" => list(&mut g.allow_runtime_classes),
            "trust" => match scalar(v) {
                Some("guarded") if plain(v) => g.trusted = Some(false),
                Some("trusted") if plain(v) => g.trusted = Some(true),
                _ => problems.push(at(
                    v.pos,
                    key,
                    "trust is guarded or trusted".into(),
                    "trust: guarded (the default: the guardrails hold) or trust: trusted (the repository is the node administrator)",
                )),
            },
            "allowPrivileged" | "allowControlPlane" | "requireDigests" => match scalar(v) {
                Some("true") if plain(v) => flag(&mut g, key),
                Some("false") if plain(v) => {}
                _ => problems.push(at(
                    v.pos,
                    key,
                    format!("{key} is true or false"),
                    &format!("{key}: true"),
                )),
            },
            _ => problems.push(at(
                k.pos,
                key,
                format!("unknown key {key}"),
                &did_you_mean(key, KEYS.iter().copied())
                    .map(|s| format!("did you mean {s}?"))
                    .unwrap_or_else(|| format!("keys: {}", KEYS.join(", "))),
            )),
        }
    }
    // A prefix that is not an absolute path would allow more than it says ("" allows every
    // path): refused.
    if let Some((_, v)) = entries.iter().find(|(k, _)| &*k.text == "allowHostPaths")
        && let Value::Seq(items) = &v.value
    {
        for (i, item) in items.iter().enumerate() {
            if scalar(item).is_some_and(|p| !p.is_empty() && !p.starts_with('/')) {
                problems.push(at(
                    item.pos,
                    &format!("allowHostPaths[{i}]"),
                    "a hostPath prefix is an absolute path".into(),
                    "write it from the root, as /dev/infiniband",
                ));
            }
        }
    }
    // A digest that is not one allows nothing it seems to: refused, as a prefix above.
    if let Some((_, v)) = entries.iter().find(|(k, _)| &*k.text == "allowPrograms")
        && let Value::Seq(items) = &v.value
    {
        for (i, item) in items.iter().enumerate() {
            if scalar(item).is_some_and(|d| !is_digest(d)) {
                problems.push(at(
                    item.pos,
                    &format!("allowPrograms[{i}]"),
                    "a program is allowed by its digest, sha256: and 64 lowercase hex digits"
                        .into(),
                    "copy the digest from the refusal (validate --guardrails prints it)",
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(g)
    } else {
        problems.sort_by_key(|d| (d.line, d.col));
        Err(problems)
    }
}

fn flag(g: &mut GuardFile, key: &str) {
    match key {
        "allowPrivileged" => g.allow_privileged = true,
        "requireDigests" => g.require_digests = true,
        _ => g.allow_control_plane = true,
    }
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn scalar(n: &Node) -> Option<&str> {
    match &n.value {
        Value::Scalar { text, .. } => Some(text),
        _ => None,
    }
}

fn plain(n: &Node) -> bool {
    matches!(n.value, Value::Scalar { plain: true, .. })
}

/// A list of non-empty strings; else the position of what is not one.
fn strings(n: &Node) -> Result<Vec<String>, Pos> {
    match &n.value {
        Value::Seq(items) => items
            .iter()
            .map(|i| match scalar(i) {
                Some(s) if !s.is_empty() => Ok(s.to_string()),
                _ => Err(i.pos),
            })
            .collect(),
        _ if n.is_null() => Ok(Vec::new()),
        _ => Err(n.pos),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_reads_as_the_flags_of_the_same_names() {
        let g = parse(
            "policy.yaml",
            "kind: Guardrails\nclusterNamespaces: [hpc, hpc-b]\nallowHostPaths:\n  - /dev/infiniband\nallowPrivileged: true\nallowSecrets: [ldap]\nallowDatabaseHosts: []\n",
        )
        .unwrap();
        assert_eq!(g.cluster_namespaces, ["hpc", "hpc-b"]);
        assert_eq!(g.allow_host_paths, ["/dev/infiniband"]);
        assert!(g.allow_privileged && !g.allow_control_plane);
        assert_eq!(g.allow_secrets, ["ldap"]);
        assert!(g.allow_database_hosts.is_empty());
    }

    #[test]
    fn every_problem_is_reported_at_its_position_and_nothing_is_allowed() {
        let text = "allowHostPath: [/x]\nallowPrivileged: \"true\"\nallowHostPaths: [\"\", dev]\nallowSecrets: ldap\n";
        let e = parse("p.yaml", text).unwrap_err();
        let got: Vec<_> = e
            .iter()
            .map(|d| (d.line, d.col, d.message.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (1, 1, "unknown key allowHostPath".into()),
                (2, 18, "allowPrivileged is true or false".into()),
                (3, 18, "allowHostPaths is a list of names".into()),
                (3, 22, "a hostPath prefix is an absolute path".into()),
                (4, 15, "allowSecrets is a list of names".into()),
            ],
            "{e:?}"
        );
        assert_eq!(e[0].hint.as_deref(), Some("did you mean allowHostPaths?"));
    }

    #[test]
    fn a_file_past_its_bound_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("policy.yaml");
        std::fs::write(&p, "allowSecrets: [a]\n".repeat(4000)).unwrap();
        let e = read(&p).unwrap_err();
        assert!(e[0].message.contains("over 64 KiB"), "{e:?}");
    }
}
