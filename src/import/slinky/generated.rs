//! What Slinky's values set by hand that slurmops generates itself: slurm.conf keys
//! (`GresTypes`, `ClusterName`, ...) and config files (`gres.conf`, `cgroup.conf`, topology).
//! Validation refuses them in cluster.yaml, so each is left out of it and reported: GPU
//! settings that `spec.nodeSets[].gpus` says already are told so (and `gres.conf`'s device
//! files become `gpus.autodetect: files`), anything else needs a person. GPU overlays (GKE's A3
//! Mega and Ultra, a site's `GresTypes` and `gres.conf`) import to a file that validates.

use serde_json::{Map, Value as Json};

use super::{ignored, needs};
use crate::cluster::validate::{OWNED_SLURM_CONF, RENDERED_FILES};
use crate::import::Outcome;
use crate::import::values::Values;

/// Whether slurmops renders config file NAME itself.
pub(super) fn rendered(name: &str) -> bool {
    RENDERED_FILES.iter().any(|(n, _)| *n == name)
}

/// Takes the slurm.conf keys slurmops generates out of CONTROLLER's `slurmConf`.
pub(super) fn keys(v: &Values, controller: &mut Map<String, Json>) {
    let Some(Json::Object(conf)) = controller.get_mut("slurmConf") else {
        return;
    };
    let owned: Vec<(String, &str, &str)> = conf
        .keys()
        .filter_map(|k| {
            OWNED_SLURM_CONF
                .iter()
                .find(|(o, _)| o.eq_ignore_ascii_case(k))
                .map(|(o, how)| (k.clone(), *o, *how))
        })
        .collect();
    for (key, name, how) in owned {
        let value = conf.remove(&key).unwrap_or_default();
        let value = value.as_str().map_or(value.to_string(), str::to_string);
        let in_map = ["controller", "extraConfMap", key.as_str()];
        let at: &[&str] = match v.has(&in_map) {
            true => &in_map,
            false => &["controller", "extraConf"],
        };
        let outcome = if name == "GresTypes" {
            let other: Vec<&str> = value
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("gpu"))
                .collect();
            match other.is_empty() {
                true => ignored(
                    "GresTypes=gpu: slurmops writes it from spec.nodeSets[].gpus (each NodeSet's Gres=gpu:TYPE:N)",
                ),
                false => Outcome::Needs(format!(
                    "GresTypes={value}: slurmops writes GresTypes from spec.nodeSets[].gpus, GPUs only; {} has no field in cluster.yaml and is not carried over",
                    other.join(",")
                )),
            }
        } else {
            Outcome::Needs(format!(
                "{name}={value}: slurmops generates {name} ({how}); not carried over"
            ))
        };
        match v.has(at) {
            true => v.tell(at, outcome),
            false => v.note(at, outcome),
        }
    }
    if conf.is_empty() {
        controller.remove("slurmConf");
    }
}

/// Reports each config file of the values that slurmops renders; `gres.conf` is read against
/// the NodeSets' GPUs (SETS).
pub(super) fn files(v: &Values, sets: &mut [Json]) {
    for name in v.keys(&["configFiles"]) {
        let Some((_, how)) = RENDERED_FILES.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        let at = ["configFiles", name.as_str()];
        let outcome = match (name.as_str(), v.text(&at)) {
            ("gres.conf", Some(text)) => gres(&text, sets),
            _ => Outcome::Needs(format!(
                "{name} is rendered by slurmops ({how}); not carried over: compare it with `slurmops render`"
            )),
        };
        v.tell(&at, outcome);
    }
}

/// What a gres.conf says that `spec.nodeSets[].gpus` does not, and the autodetection it asks
/// for, applied to the GPU NodeSets of SETS.
fn gres(text: &str, sets: &mut [Json]) -> Outcome {
    let mut files = false;
    let mut nvml = false;
    let mut other = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<(String, &str)> = line
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .map(|(k, val)| (k.to_ascii_lowercase(), val))
            .collect();
        let get = |k: &str| words.iter().find(|(w, _)| w == k).map(|(_, val)| *val);
        match (get("autodetect"), get("name")) {
            (Some(a), _) if a.eq_ignore_ascii_case("nvml") => nvml = true,
            (Some(a), None) if a.eq_ignore_ascii_case("off") => files = true,
            (_, Some(n)) if n.eq_ignore_ascii_case("gpu") => files |= get("file").is_some(),
            _ => other.push(line.to_string()),
        }
    }
    let gpu_sets: Vec<&mut Json> = sets
        .iter_mut()
        .filter(|s| s.get("gpus").is_some())
        .collect();
    if !other.is_empty() {
        return Outcome::Needs(format!(
            "gres.conf is rendered by slurmops from spec.nodeSets[].gpus (GPUs only); these lines have no field and are not carried over: {}",
            other.join(" | ")
        ));
    }
    if gpu_sets.is_empty() {
        return needs(
            "gres.conf names GPUs but no NodeSet says how many (Gres=gpu:TYPE:N in its node line): set spec.nodeSets[].gpus",
        );
    }
    if files && !nvml {
        for s in gpu_sets {
            s["gpus"]["autodetect"] = "files".into();
        }
        return Outcome::Mapped(
            "spec.nodeSets[].gpus.autodetect: files (slurmops renders gres.conf from the GPUs' device files)"
                .into(),
        );
    }
    ignored("slurmops renders gres.conf from spec.nodeSets[].gpus (AutoDetect=nvml, its default)")
}
