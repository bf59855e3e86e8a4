//! In-place Slurm upgrades. A `slurmVersion` change reaches the components in Slurm's order:
//! slurmdbd, then slurmctld (which keeps its state), then slurmrestd and login pods, then the
//! workers (whose StatefulSets then roll drain-before-replace), each only once the one before runs
//! the new release and is Ready. Until then a later component's workload keeps its live object
//! (it is not applied, and never pruned), so no worker ever runs a newer Slurm than slurmctld.
//! Where an upgrade stands is read from the live objects (the release label of each workload's
//! pod template, and its rollout status), so any pass, after any restart, carries on.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use crate::cluster::release;
use crate::render::Object;
use crate::render::names::{LABEL_COMPONENT, LABEL_SLURM_VERSION};

/// The order components take a new release; workers come last.
const TIERS: [&[&str]; 4] = [
    &["accounting"],
    &["controller"],
    &["restapi", "login"],
    &["worker"],
];

pub(super) fn tier(o: &Json) -> Option<usize> {
    let c = o
        .pointer("/spec/template/metadata/labels")?
        .get(LABEL_COMPONENT)?
        .as_str()?;
    TIERS.iter().position(|t| t.contains(&c))
}

pub(super) fn template_version(o: &Json) -> Option<&str> {
    o.pointer("/spec/template/metadata/labels")?
        .get(LABEL_SLURM_VERSION)?
        .as_str()
}

/// The workload rolled out completely and every replica is Ready.
fn settled(o: &Json) -> bool {
    let n = |p: &str| o.pointer(p).and_then(Json::as_i64);
    let want = n("/spec/replicas").unwrap_or(1);
    let seen =
        n("/status/observedGeneration").unwrap_or(0) >= n("/metadata/generation").unwrap_or(0);
    let ready = n("/status/readyReplicas").unwrap_or(0) >= super::health::ready_wanted(o, want);
    let on_delete = o
        .pointer("/spec/updateStrategy/type")
        .and_then(Json::as_str)
        == Some("OnDelete");
    let updated = match o.get("kind").and_then(Json::as_str) {
        // Rolled pod by pod by slurmops (the controllers behind one address): the StatefulSet
        // controller never moves its currentRevision on.
        Some("StatefulSet") if on_delete => n("/status/updatedReplicas").unwrap_or(0) >= want,
        Some("StatefulSet") => {
            o.pointer("/status/currentRevision") == o.pointer("/status/updateRevision")
                && n("/status/updatedReplicas").unwrap_or(0) >= want
        }
        _ => n("/status/updatedReplicas").unwrap_or(0) >= want,
    };
    seen && ready && updated
}

/// What the upgrade holds back now.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// `Kind/name` of the desired workloads that keep their live objects this time.
    pub objects: BTreeSet<String>,
    /// What they wait for, in words (empty when nothing is held).
    pub waiting_for: String,
    /// When a maintenance window they wait for opens (UNIX seconds).
    pub opens: Option<i64>,
}

impl Held {
    /// Both holds: the objects of either, and what each waits for.
    pub fn and(mut self, other: Held) -> Held {
        self.objects.extend(other.objects);
        if !other.waiting_for.is_empty() {
            if !self.waiting_for.is_empty() {
                self.waiting_for.push_str("; ");
            }
            self.waiting_for.push_str(&other.waiting_for);
        }
        self.opens = self.opens.or(other.opens);
        self
    }
}

/// Why a live release cannot become the desired one (downgrade, too far), as apply reports it.
pub fn check(desired_version: &str, live: &[(String, Json)]) -> Result<(), String> {
    for (id, o) in live {
        if let Some(v) = template_version(o).filter(|v| *v != desired_version) {
            release::upgrade(v, desired_version)
                .map_err(|e| format!("{id} runs Slurm {v}: {e}; nothing was changed"))?;
        }
    }
    Ok(())
}

/// The desired workloads (`(id, body)`) to hold back given the live ones, for release VERSION.
pub fn held(version: &str, desired: &[&Object], live: &[(String, Json)]) -> Held {
    let behind = |o: &Json| template_version(o).is_some_and(|v| v != version);
    if !live.iter().any(|(_, o)| behind(o)) {
        return Held::default();
    }
    // The first tier not yet running VERSION everywhere, Ready.
    let pending = TIERS.iter().enumerate().position(|(t, _)| {
        live.iter()
            .filter(|(_, o)| tier(o) == Some(t))
            .any(|(_, o)| behind(o) || template_version(o) == Some(version) && !settled(o))
    });
    let Some(pending) = pending else {
        return Held::default();
    };
    let objects: BTreeSet<String> = desired
        .iter()
        .filter(|o| tier(&o.body).is_some_and(|t| t > pending))
        .map(|o| format!("{}/{}", o.kind, o.name))
        .collect();
    let waiting_for = match pending {
        0 => format!("slurmdbd {version} to be Ready"),
        1 => format!("slurmctld {version} to be Ready"),
        2 => format!("slurmrestd and login pods {version} to be Ready"),
        _ => String::new(),
    };
    Held {
        objects,
        waiting_for,
        opens: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(kind: &str, name: &str, component: &str, version: &str, settled: bool) -> Json {
        let (ready, rev) = if settled { (1, "b") } else { (0, "a") };
        json!({"kind": kind, "metadata": {"name": name, "generation": 2},
            "spec": {"replicas": 1, "template": {"metadata": {"labels": {
                LABEL_COMPONENT: component, LABEL_SLURM_VERSION: version}}}},
            "status": {"observedGeneration": 2, "readyReplicas": ready, "updatedReplicas": ready,
                "currentRevision": rev, "updateRevision": "b"}})
    }

    fn object(o: &Json) -> Object {
        Object {
            api_version: "apps/v1".into(),
            kind: o["kind"].as_str().unwrap().into(),
            namespace: "slurm".into(),
            name: o["metadata"]["name"].as_str().unwrap().into(),
            body: o.clone(),
        }
    }

    #[test]
    fn each_component_waits_for_the_one_before_to_run_the_new_release_ready() {
        let desired: Vec<Object> = [
            workload("StatefulSet", "c-accounting", "accounting", "26.05", false),
            workload("StatefulSet", "c-controller", "controller", "26.05", false),
            workload("Deployment", "c-restapi", "restapi", "26.05", false),
            workload("StatefulSet", "gpu", "worker", "26.05", false),
        ]
        .iter()
        .map(object)
        .collect();
        let desired: Vec<&Object> = desired.iter().collect();
        let live = |a: (&str, bool), c: (&str, bool), r: &str, w: &str| {
            vec![
                (
                    "StatefulSet/c-accounting".to_string(),
                    workload("StatefulSet", "c-accounting", "accounting", a.0, a.1),
                ),
                (
                    "StatefulSet/c-controller".to_string(),
                    workload("StatefulSet", "c-controller", "controller", c.0, c.1),
                ),
                (
                    "Deployment/c-restapi".to_string(),
                    workload("Deployment", "c-restapi", "restapi", r, true),
                ),
                (
                    "StatefulSet/gpu".to_string(),
                    workload("StatefulSet", "gpu", "worker", w, true),
                ),
            ]
        };
        // Everything on 24.11: only slurmdbd moves.
        let h = held(
            "26.05",
            &desired,
            &live(("24.11", true), ("24.11", true), "24.11", "24.11"),
        );
        let all_but = |keep: &[&str]| -> BTreeSet<String> {
            [
                "StatefulSet/c-controller",
                "Deployment/c-restapi",
                "StatefulSet/gpu",
                "StatefulSet/c-accounting",
            ]
            .iter()
            .filter(|i| !keep.contains(i))
            .map(|s| s.to_string())
            .collect()
        };
        assert_eq!(h.objects, all_but(&["StatefulSet/c-accounting"]));
        assert_eq!(h.waiting_for, "slurmdbd 26.05 to be Ready");
        // slurmdbd 26.05 applied but not Ready yet: still only slurmdbd.
        let h = held(
            "26.05",
            &desired,
            &live(("26.05", false), ("24.11", true), "24.11", "24.11"),
        );
        assert_eq!(h.objects, all_but(&["StatefulSet/c-accounting"]));
        // slurmdbd Ready on 26.05: slurmctld moves, the workers still wait.
        let h = held(
            "26.05",
            &desired,
            &live(("26.05", true), ("24.11", true), "24.11", "24.11"),
        );
        assert_eq!(
            h.objects,
            all_but(&["StatefulSet/c-accounting", "StatefulSet/c-controller"])
        );
        assert_eq!(h.waiting_for, "slurmctld 26.05 to be Ready");
        // slurmctld Ready on 26.05: slurmrestd moves; then the workers.
        let h = held(
            "26.05",
            &desired,
            &live(("26.05", true), ("26.05", true), "24.11", "24.11"),
        );
        assert_eq!(h.objects, BTreeSet::from(["StatefulSet/gpu".to_string()]));
        let h = held(
            "26.05",
            &desired,
            &live(("26.05", true), ("26.05", true), "26.05", "24.11"),
        );
        assert_eq!(h, Held::default());
        // Nothing behind: nothing held (a fresh cluster, or a finished upgrade).
        assert_eq!(held("26.05", &desired, &[]), Held::default());
    }

    #[test]
    fn controllers_behind_one_address_settle_with_every_pod_updated_and_one_in_control() {
        let behind = |ready: i64, updated: i64| {
            json!({"kind": "StatefulSet", "metadata": {"name": "c-controller", "generation": 2,
                    "annotations": {crate::vocab::ANNOTATION_READY_REPLICAS: "1"}},
                "spec": {"replicas": 2, "updateStrategy": {"type": "OnDelete"}},
                "status": {"observedGeneration": 2, "readyReplicas": ready, "updatedReplicas": updated,
                    "currentRevision": "a", "updateRevision": "b"}})
        };
        // The StatefulSet controller never moves currentRevision on with OnDelete: what counts
        // is every pod on the update revision, and the controller in control Ready.
        assert!(settled(&behind(1, 2)));
        assert!(!settled(&behind(1, 1)));
        assert!(!settled(&behind(0, 2)));
    }

    #[test]
    fn a_downgrade_or_a_jump_past_the_window_is_refused_naming_the_path() {
        let live = vec![(
            "StatefulSet/c-controller".to_string(),
            workload("StatefulSet", "c-controller", "controller", "26.05", true),
        )];
        let e = check("24.11", &live).unwrap_err();
        assert!(
            e.contains("StatefulSet/c-controller runs Slurm 26.05") && e.contains("downgrade"),
            "{e}"
        );
        assert!(check("26.05", &live).is_ok());
        let old = vec![(
            "StatefulSet/c-controller".to_string(),
            workload("StatefulSet", "c-controller", "controller", "23.02", true),
        )];
        let e = check("26.05", &old).unwrap_err();
        assert!(e.contains("upgrade in steps: 23.02 → 24.11 → 26.05"), "{e}");
    }
}
