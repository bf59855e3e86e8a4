//! In-place Slurm upgrades. A `slurmVersion` change reaches the components in Slurm's order:
//! slurmdbd, then slurmctld (which keeps its state), then slurmrestd and login pods, then the
//! workers (whose StatefulSets then roll drain-before-replace), each only once the one before runs
//! the new release and is Ready. Until then a later component's workload keeps its live object
//! (it is not applied, and never pruned), so no worker ever runs a newer Slurm than slurmctld.
//! Where an upgrade stands is read from the live objects (the release label of each workload's
//! pod template, and its rollout status), so any pass, after any restart, carries on.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use crate::cluster::types::ClusterSpec;
use crate::cluster::{backup, release};
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
    /// The copy before a conversion failed, and the upgrade waits on it: `(pod, why)`.
    pub copy_failed: Option<(String, String)>,
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
        self.copy_failed = self.copy_failed.or(other.copy_failed);
        self
    }
}

/// Why a live release cannot become the desired one of SPEC (downgrade, too far, or data
/// converted in place with no copy to go back to), as apply reports it.
pub fn check(spec: &ClusterSpec, live: &[(String, Json)]) -> Result<(), String> {
    let desired_version = spec.slurm_version.as_str();
    for (id, o) in live {
        if let Some(v) = template_version(o).filter(|v| *v != desired_version) {
            release::upgrade(v, desired_version)
                .map_err(|e| format!("{id} runs Slurm {v}: {e}; nothing was changed"))?;
            // slurmdbd and slurmctld not moved yet: their data is still the old release's.
            if tier(o).is_some_and(|t| t <= 1)
                && let Some(why) = backup::refusal(spec, v, desired_version)
            {
                return Err(format!("{id} runs Slurm {v}: {why}; nothing was changed"));
            }
        }
    }
    Ok(())
}

/// The workload of slurmdbd or slurmctld (of LIVE) that has taken release VERSION and is not
/// Ready on it yet: where a copy is taken now, before its daemon starts.
pub fn converting<'a>(version: &str, live: &'a [(String, Json)]) -> Option<&'a Json> {
    live.iter().map(|(_, o)| o).find(|o| {
        tier(o).is_some_and(|t| t <= 1) && template_version(o) == Some(version) && !settled(o)
    })
}

/// A copy that failed in the pods of a workload (LIVE: its pods), from the `backup` init
/// container's termination message: `(pod, message)`.
pub fn copy_failed(pods: &[Json]) -> Option<(String, String)> {
    pods.iter().find_map(|p| {
        let name = p.pointer("/metadata/name")?.as_str()?;
        let st = p
            .pointer("/status/initContainerStatuses")?
            .as_array()?
            .iter()
            .find(|c| {
                c.get("name").and_then(Json::as_str) == Some(crate::render::backup::CONTAINER)
            })?;
        // Failed now, or failed before and waiting out the kubelet's back-off.
        let failed = |t: &Json| {
            t.get("exitCode")
                .and_then(Json::as_i64)
                .is_some_and(|c| c != 0)
        };
        let t = [
            st.pointer("/state/terminated"),
            st.pointer("/lastState/terminated"),
        ]
        .into_iter()
        .flatten()
        .find(|t| failed(t))?;
        if st.pointer("/state/terminated").is_some_and(|t| !failed(t)) {
            return None;
        }
        let message = t
            .get("message")
            .and_then(Json::as_str)
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .unwrap_or("it exited with an error (no message)");
        // The last line says why; a message is bounded (the kubelet keeps 4 KiB).
        let line = message.lines().last().unwrap_or(message);
        let line: String = line.chars().take(400).collect();
        Some((name.to_string(), line))
    })
}

/// The desired workloads (`(id, body)`) to hold back given the live ones, for release VERSION;
/// COPY_FAILED: a copy that failed in the pods of the tier the upgrade stands at (`(pod,
/// message)`), which the upgrade then waits on.
pub fn held(
    version: &str,
    desired: &[&Object],
    live: &[(String, Json)],
    copy_failed: Option<&(String, String)>,
) -> Held {
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
    let waiting_for = match (pending, copy_failed) {
        (0 | 1, Some((pod, why))) => format!(
            "{why} (pod {pod}); the upgrade stops here, nothing converted, until a copy is made: fix the claim or the database and the kubelet retries it"
        ),
        (0, None) => format!("slurmdbd {version} to be Ready"),
        (1, None) => format!("slurmctld {version} to be Ready"),
        (2, _) => format!("slurmrestd and login pods {version} to be Ready"),
        _ => String::new(),
    };
    Held {
        objects,
        waiting_for,
        opens: None,
        copy_failed: copy_failed.filter(|_| pending <= 1).cloned(),
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
            None,
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
            None,
        );
        assert_eq!(h.objects, all_but(&["StatefulSet/c-accounting"]));
        // slurmdbd Ready on 26.05: slurmctld moves, the workers still wait.
        let h = held(
            "26.05",
            &desired,
            &live(("26.05", true), ("24.11", true), "24.11", "24.11"),
            None,
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
            None,
        );
        assert_eq!(h.objects, BTreeSet::from(["StatefulSet/gpu".to_string()]));
        let h = held(
            "26.05",
            &desired,
            &live(("26.05", true), ("26.05", true), "26.05", "24.11"),
            None,
        );
        assert_eq!(h, Held::default());
        // Nothing behind: nothing held (a fresh cluster, or a finished upgrade).
        assert_eq!(held("26.05", &desired, &[], None), Held::default());
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

    /// The spec of a cluster on VERSION with BACKUP (a `backup:` value, or "" for none).
    fn spec(version: &str, backup: &str) -> ClusterSpec {
        let text = format!(
            "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: c, namespace: slurm}}\n\
             spec:\n  slurmVersion: \"{version}\"\n  auth:\n    slurmKey: {{name: k, key: k}}\n    jwtKey: {{name: j, key: j}}\n\
             {backup}\n  nodeSets: [{{name: w, replicas: 2}}]\n  partitions: [{{name: p, nodeSets: [ALL]}}]\n"
        );
        crate::cluster::load("c.yaml", &text).unwrap().spec
    }

    #[test]
    fn a_downgrade_or_a_jump_past_the_window_is_refused_naming_the_path() {
        let live = vec![(
            "StatefulSet/c-controller".to_string(),
            workload("StatefulSet", "c-controller", "controller", "26.05", true),
        )];
        let e = check(&spec("24.11", ""), &live).unwrap_err();
        assert!(
            e.contains("StatefulSet/c-controller runs Slurm 26.05") && e.contains("downgrade"),
            "{e}"
        );
        assert!(check(&spec("26.05", ""), &live).is_ok());
        let old = vec![(
            "StatefulSet/c-controller".to_string(),
            workload("StatefulSet", "c-controller", "controller", "23.02", true),
        )];
        let e = check(&spec("26.05", "  backup: {ownCopies: true}"), &old).unwrap_err();
        assert!(e.contains("upgrade in steps: 23.02 → 24.11 → 26.05"), "{e}");
    }

    #[test]
    fn an_upgrade_that_converts_state_without_a_copy_is_refused_before_anything_moves() {
        let on = |component: &str, name: &str, v: &str| {
            vec![(
                format!("StatefulSet/{name}"),
                workload("StatefulSet", name, component, v, true),
            )]
        };
        let e = check(
            &spec("25.11", ""),
            &on("controller", "c-controller", "24.11"),
        )
        .unwrap_err();
        assert!(
            e.contains("converts slurmctld's state in place") && e.contains("spec.backup.claim"),
            "{e}"
        );
        for backup in ["  backup: {claim: copies}", "  backup: {ownCopies: true}"] {
            assert!(
                check(
                    &spec("25.11", backup),
                    &on("controller", "c-controller", "24.11")
                )
                .is_ok()
            );
        }
        // A patch release converts nothing; slurmctld already moved: nothing left to convert.
        assert!(
            check(
                &spec("24.11.6", ""),
                &on("controller", "c-controller", "24.11.1")
            )
            .is_ok()
        );
        assert!(check(&spec("25.11", ""), &on("worker", "w", "24.11")).is_ok());
    }

    #[test]
    fn a_failed_copy_is_read_from_its_init_container_and_stops_the_upgrade_naming_why() {
        let pod = |state: Json, last: Json| {
            json!({"metadata": {"name": "c-accounting-0"}, "status": {"initContainerStatuses": [
                {"name": "slurmdbd-conf", "state": {"terminated": {"exitCode": 0}}},
                {"name": "backup", "state": state, "lastState": last}]}})
        };
        let why = "the copy of the accounting database before Slurm 25.11 starts failed: mariadb-dump: Access denied";
        let crashing = pod(
            json!({"waiting": {"reason": "CrashLoopBackOff"}}),
            json!({"terminated": {"exitCode": 1, "message": format!("{why}\n")}}),
        );
        let failed = copy_failed(&[crashing]).unwrap();
        assert_eq!(failed, ("c-accounting-0".to_string(), why.to_string()));
        // Running again, or done: nothing failed now.
        let done = pod(
            json!({"terminated": {"exitCode": 0}}),
            json!({"terminated": {"exitCode": 1, "message": why}}),
        );
        assert_eq!(copy_failed(&[done]), None);
        assert_eq!(copy_failed(&[pod(json!({"running": {}}), json!({}))]), None);
        let desired: Vec<Object> = [workload(
            "StatefulSet",
            "c-controller",
            "controller",
            "25.11",
            false,
        )]
        .iter()
        .map(object)
        .collect();
        let desired: Vec<&Object> = desired.iter().collect();
        let live = vec![
            (
                "StatefulSet/c-accounting".to_string(),
                workload("StatefulSet", "c-accounting", "accounting", "25.11", false),
            ),
            (
                "StatefulSet/c-controller".to_string(),
                workload("StatefulSet", "c-controller", "controller", "24.11", true),
            ),
        ];
        assert_eq!(
            converting("25.11", &live).and_then(|o| o.pointer("/metadata/name")),
            Some(&json!("c-accounting"))
        );
        let h = held("25.11", &desired, &live, Some(&failed));
        assert!(h.objects.contains("StatefulSet/c-controller"));
        assert!(
            h.waiting_for.starts_with(why) && h.waiting_for.contains("the upgrade stops here"),
            "{}",
            h.waiting_for
        );
    }
}
