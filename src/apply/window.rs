//! Control-plane steps that wait for a maintenance window (`policy.controlPlaneWindow:
//! required`): restarting slurmctld (its pod template changes: a new image, a setting a
//! reconfigure cannot change) and starting a Slurm upgrade. Outside a window the control-plane
//! workloads that would restart (for an upgrade every Slurm workload) and the ConfigMaps they
//! mount keep their live objects, so neither a restart nor an in-place reconfigure runs the new configuration
//! early. An upgrade that started inside a window carries on to its end. Pure: the caller gives
//! the time.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use super::compare::{HASH_ANNOTATION, contains};
use super::upgrade::{Held, template_version, tier};
use crate::cluster::types::ClusterFile;
use crate::cluster::window::{ControlPlaneWindow, timing, told_at, zone_of};
use crate::render::Object;
use crate::render::names::LABEL_COMPONENT;

/// What waits for the next window at NOW: DESIRED against the LIVE workloads (`(id, body)`).
pub fn held(c: &ClusterFile, desired: &[&Object], live: &[(String, Json)], now: i64) -> Held {
    let p = &c.spec.policy;
    if p.control_plane_window == ControlPlaneWindow::None {
        return Held::default();
    }
    let t = timing(&p.maintenance_windows, now);
    if t.open.is_some() {
        return Held::default();
    }
    let version = c.spec.slurm_version.as_str();
    let tiered = || live.iter().filter(|(_, o)| tier(o).is_some());
    let behind = tiered().any(|(_, o)| template_version(o).is_some_and(|v| v != version));
    let started = tiered().any(|(_, o)| template_version(o) == Some(version));
    if behind && started {
        // Started inside a window: Slurm's order finishes it.
        return Held::default();
    }
    let changed = |o: &Object| {
        let id = format!("{}/{}", o.kind, o.name);
        live.iter()
            .any(|(i, l)| *i == id && template_changed(&o.body, l))
    };
    let restarts = desired
        .iter()
        .any(|o| o.kind == "StatefulSet" && component(&o.body) == Some("controller") && changed(o));
    if !behind && !restarts {
        return Held::default();
    }
    // An upgrade holds every Slurm workload; a restart the control plane's that would restart
    // with it (slurmrestd and login pods read the same files).
    let workloads: Vec<&&Object> = desired
        .iter()
        .filter(|o| match behind {
            true => tier(&o.body).is_some(),
            false => tier(&o.body).is_some() && component(&o.body) != Some("worker") && changed(o),
        })
        .collect();
    let mounted: BTreeSet<&str> = workloads
        .iter()
        .flat_map(|o| config_maps(&o.body))
        .collect();
    let objects = workloads
        .iter()
        .map(|o| format!("{}/{}", o.kind, o.name))
        .chain(
            desired
                .iter()
                .filter(|o| o.kind == "ConfigMap" && mounted.contains(o.name.as_str()))
                .map(|o| format!("ConfigMap/{}", o.name)),
        )
        .collect();
    let what = match behind {
        true => format!("the upgrade to Slurm {version}"),
        false => "the slurmctld restart".to_string(),
    };
    let when = match t.next {
        Some(n) => {
            let zone = zone_of(&p.maintenance_windows, n, now).unwrap_or("UTC");
            format!("opens {}", told_at(n.0, zone))
        }
        None => "no window is scheduled".into(),
    };
    Held {
        objects,
        waiting_for: format!("a maintenance window for {what} ({when})"),
        opens: t.next.map(|(s, _)| s),
        copy_failed: None,
    }
}

fn component(o: &Json) -> Option<&str> {
    o.pointer("/spec/template/metadata/labels")?
        .get(LABEL_COMPONENT)?
        .as_str()
}

/// DESIRED's pod template is not what LIVE runs: applying it restarts the pods.
fn template_changed(desired: &Json, live: &Json) -> bool {
    let hash = |o: &Json| {
        o.pointer("/metadata/annotations")
            .and_then(|a| a.get(HASH_ANNOTATION))
            .cloned()
    };
    let template = |o: &Json| o.pointer("/spec/template").cloned().unwrap_or_default();
    hash(desired) != hash(live) && !contains(&template(desired), &template(live))
}

/// Names of the ConfigMaps a workload's pods mount (directly or projected).
fn config_maps(o: &Json) -> Vec<&str> {
    let volumes = o
        .pointer("/spec/template/spec/volumes")
        .and_then(Json::as_array);
    let mut out = Vec::new();
    for v in volumes.into_iter().flatten() {
        if let Some(n) = v.pointer("/configMap/name").and_then(Json::as_str) {
            out.push(n);
        }
        let sources = v.pointer("/projected/sources").and_then(Json::as_array);
        for s in sources.into_iter().flatten() {
            if let Some(n) = s.pointer("/configMap/name").and_then(Json::as_str) {
                out.push(n);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{Rendered, render};
    use serde_json::json;

    // Saturday 2026-11-28 02:00 UTC, the window's start; a Wednesday three days before it.
    const SAT_2: i64 = 1_795_831_200;
    const WED: i64 = SAT_2 - 3 * 86_400;

    fn cluster(version: &str, conf: &str, mode: &str) -> ClusterFile {
        let text = format!(
            r#"apiVersion: slurmops.dev/v1alpha1
kind: SlurmCluster
metadata: {{name: c, namespace: slurm}}
spec:
  slurmVersion: "{version}"
  auth:
    slurmKey: {{name: k, key: k}}
    jwtKey: {{name: j, key: j}}
  controller:
    slurmConf: {{{conf}}}
  nodeSets: [{{name: w, replicas: 2}}]
  partitions: [{{name: p, nodeSets: [ALL]}}]
  policy:
    maintenanceWindows: [{{schedule: "0 2 * * Sat", duration: 4h}}]
    controlPlaneWindow: {mode}
"#
        );
        crate::cluster::load("c.yaml", &text).unwrap()
    }

    /// R's objects with the hash annotation apply gives them.
    fn objects(r: &Rendered) -> Vec<Object> {
        let mut out = r.objects.clone();
        for o in &mut out {
            o.body["metadata"]["annotations"][HASH_ANNOTATION] =
                json!(super::super::compare::hash(&o.body));
        }
        out
    }

    /// The workloads of R as they run live.
    fn live(r: &Rendered) -> Vec<(String, Json)> {
        objects(r)
            .into_iter()
            .filter(|o| matches!(o.kind.as_str(), "StatefulSet" | "Deployment"))
            .map(|o| (format!("{}/{}", o.kind, o.name), o.body))
            .collect()
    }

    fn held_at(live_c: &ClusterFile, head: &ClusterFile, now: i64) -> Held {
        let desired = objects(&render(head));
        let all: Vec<&Object> = desired.iter().collect();
        held(head, &all, &live(&render(live_c)), now)
    }

    #[test]
    fn a_slurmctld_restart_outside_a_window_keeps_the_control_plane_and_its_files() {
        let base = cluster("24.11", "", "required");
        let head = cluster("24.11", "AuthInfo: [cred_expire=200]", "required");
        let h = held_at(&base, &head, WED);
        let objects: Vec<&str> = h.objects.iter().map(String::as_str).collect();
        assert_eq!(
            objects,
            [
                "ConfigMap/c-config",
                "Deployment/c-restapi",
                "StatefulSet/c-controller"
            ]
        );
        assert_eq!(h.opens, Some(SAT_2));
        assert_eq!(
            h.waiting_for,
            "a maintenance window for the slurmctld restart (opens Sat 2026-11-28 02:00 UTC)"
        );
        // Inside the window, or without controlPlaneWindow, it restarts at once.
        assert_eq!(held_at(&base, &head, SAT_2 + 60), Held::default());
        let head = cluster("24.11", "AuthInfo: [cred_expire=200]", "none");
        assert_eq!(held_at(&base, &head, WED), Held::default());
    }

    #[test]
    fn a_reconfigure_and_an_unchanged_cluster_wait_for_nothing() {
        let base = cluster("24.11", "", "required");
        assert_eq!(held_at(&base, &base, WED), Held::default());
        let head = cluster("24.11", "MinJobAge: 600", "required");
        assert_eq!(held_at(&base, &head, WED), Held::default());
    }

    #[test]
    fn an_upgrade_starts_only_in_a_window_and_then_carries_on() {
        let base = cluster("24.11", "", "required");
        let head = cluster("26.05", "", "required");
        let h = held_at(&base, &head, WED);
        assert!(h.objects.contains("StatefulSet/w"), "{h:?}");
        assert!(h.objects.contains("StatefulSet/c-controller"), "{h:?}");
        assert!(h.objects.contains("ConfigMap/c-config"), "{h:?}");
        assert!(
            h.waiting_for.contains("the upgrade to Slurm 26.05"),
            "{h:?}"
        );
        // Started in a window (the controller runs 26.05): no window holds the rest back.
        let desired = objects(&render(&head));
        let all: Vec<&Object> = desired.iter().collect();
        let new = live(&render(&head));
        let mut running = live(&render(&base));
        for (id, o) in &mut running {
            if id == "StatefulSet/c-controller" {
                *o = new.iter().find(|(i, _)| i == id).unwrap().1.clone();
            }
        }
        assert_eq!(held(&head, &all, &running, WED), Held::default());
    }
}
