//! The oracle's checks of the Slurm files, line by line where a line is not one slurmops renders
//! on its own: no program, address, user, plugin or include key, no SPANK plugin line, no line
//! that is not `Key=Value` in slurmops' own files, topology.yaml only in its template's shapes.

use std::collections::BTreeSet;

use slurmops::render::Rendered;

use super::baseline::Baseline;
use super::oracle::Findings;
use super::oracle_rules::{SLURM_CODE_KEYS, topology_line_ok};

/// Every line of R's Slurm files that the baseline lacks and the policy does not allow.
pub(super) fn slurm_files(r: &Rendered, base: &Baseline, out: &mut Findings) {
    let none = BTreeSet::new();
    for (file, text) in &r.slurm {
        let theirs = base.lines.get(file).unwrap_or(&none);
        for (n, line) in text.lines().enumerate() {
            if theirs.contains(line) {
                continue;
            }
            let field = format!("{file}:{}", n + 1);
            let t = line.trim();
            if file == "topology.yaml" {
                if !topology_line_ok(line) {
                    out.add(
                        "topology-splice",
                        "slurm files",
                        field,
                        &format!("{line:?}"),
                    );
                }
                continue;
            }
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if file == "plugstack.conf" {
                out.add("spank-plugin", "slurm files", field, &format!("{line:?}"));
                continue;
            }
            if !file.ends_with(".conf") {
                continue;
            }
            conf_line(file, field, line, t, out);
        }
    }
}

/// LINE (T trimmed, at FIELD) of the Slurm config file FILE: no key that names a program, plugin,
/// address, user or included file; in slurmops' own files, `Key=Value` only.
fn conf_line(file: &str, field: String, line: &str, t: &str, out: &mut Findings) {
    let mut flagged = false;
    for tok in t.split_whitespace() {
        let key = tok.split('=').next().unwrap_or("").to_ascii_lowercase();
        if SLURM_CODE_KEYS.contains(&key.as_str()) {
            out.add(
                "slurm-key",
                "slurm files",
                field.clone(),
                &format!("{line:?}"),
            );
            flagged = true;
            break;
        }
    }
    let first = t.split_whitespace().next().unwrap_or("");
    let shaped = first.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty()
            && k.starts_with(|c: char| c.is_ascii_alphabetic())
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    });
    let ours = matches!(
        file,
        "slurm.conf" | "slurmdbd.conf" | "cgroup.conf" | "gres.conf"
    );
    if ours && !shaped && !flagged {
        out.add("slurm-splice", "slurm files", field, &format!("{line:?}"));
    }
}
