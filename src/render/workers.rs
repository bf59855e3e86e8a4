//! slurmd workers: one StatefulSet per NodeSet. `OnDelete` so that only slurmops replaces pods
//! (after draining them in Slurm), `Parallel` so that scaling does not wait on ordinals, and pod
//! names that are the Slurm node names.
//!
//! A `replicas: perNode` NodeSet renders a PodTemplate instead: the controller creates one pod
//! per matching Kubernetes node from it (and drains a worker before its pod goes), because a
//! StatefulSet can only remove its highest ordinals and a DaemonSet deletes a pod the moment its
//! node stops matching, jobs or not. The template carries its own revision (a digest), which the
//! pods copy, so that rollouts see outdated pods as they do a StatefulSet's.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvVar, EnvVarSource, ExecAction, Lifecycle, LifecycleHandler,
    ObjectFieldSelector, PodAffinityTerm, PodAntiAffinity, PodResourceClaim, PodSpec,
    ResourceClaim, ResourceRequirements, SecurityContext, Service, Volume,
};
use k8s_openapi::api::core::v1::{PodTemplate, PodTemplateSpec};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::names::{Component, LABEL_BUSY, LABEL_REVISION, Names};
use super::objects::{meta, pdb, selector, service};
use super::pod::{self, PodParts, checksum};
use super::slurm::{ETC_SLURM, HEALTH_CHECK_FILE, SLURMD_PORT, slurmd_conf};
use crate::cluster::active_checks::{ActiveCheck, holds_new_workers};
use crate::cluster::types::{ClusterFile, NodeSet};
use crate::vocab::DrainReason;

const IMEX_CLAIM: &str = "imex-channel";

/// preStop of a worker: a dynamic node leaves Slurm with its pod, so no ghost node stays behind;
/// the replacement pod registers afresh. A node someone else drained (reason not ours) is kept,
/// so that the drain and its reason survive the pod's replacement.
const PRE_STOP: &str = r#"info=$(sinfo -h -N -n "$POD_NAME" -o '%T|%E' 2>/dev/null) || exit 0
case "$info" in
  drain*"|slurmops:"*) ;;
  drain*) echo "$POD_NAME stays in Slurm: drained by someone else ($info)"; exit 0 ;;
esac
exec scontrol delete nodename="$POD_NAME"
"#;

/// The headless Service giving every worker its stable DNS name.
pub fn workers_service(names: &Names) -> Service {
    service(
        names,
        &names.workers_service(),
        Component::Worker,
        &[("slurmd", SLURMD_PORT)],
        true,
    )
}

fn resources(ns: &NodeSet) -> Option<ResourceRequirements> {
    let mut r = ns.pod.resources.clone().unwrap_or_default();
    let mut amounts = BTreeMap::new();
    if let Some(cpu) = &ns.cpu {
        amounts.insert("cpu".to_string(), Quantity(cpu.clone()));
    }
    if let Some(mem) = &ns.memory {
        amounts.insert("memory".to_string(), Quantity(mem.clone()));
    }
    if let Some(g) = &ns.gpus {
        amounts.insert(g.resource_name.clone(), Quantity(g.count.to_string()));
    }
    for (k, v) in amounts {
        r.requests
            .get_or_insert_with(BTreeMap::new)
            .entry(k.clone())
            .or_insert_with(|| v.clone());
        r.limits
            .get_or_insert_with(BTreeMap::new)
            .entry(k)
            .or_insert(v);
    }
    if ns.imex.as_ref().is_some_and(|x| x.enabled) {
        r.claims = Some(vec![ResourceClaim {
            name: IMEX_CLAIM.into(),
            request: None,
        }]);
    }
    (r != ResourceRequirements::default()).then_some(r)
}

/// The slurmd container's securityContext: the user's, privileged as `privileged` says unless
/// it says otherwise.
fn security_context(ns: &NodeSet) -> Option<SecurityContext> {
    let mut sc = ns.container_security_context.clone().unwrap_or_default();
    if sc.privileged.is_none() && ns.privileged {
        sc.privileged = Some(true);
    }
    (sc != SecurityContext::default()).then_some(sc)
}

/// One slurmd per Kubernetes node: workers of the cluster repel each other.
fn one_per_node(names: &Names) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some(names.selector(Component::Worker, None)),
                    ..LabelSelector::default()
                }),
                topology_key: "kubernetes.io/hostname".into(),
                ..PodAffinityTerm::default()
            }]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

/// A NodeSet's workload: a StatefulSet, or the PodTemplate slurmops makes the pods from
/// (perNode, or `podManagement: slurmops`).
pub enum Workload {
    StatefulSet(Box<StatefulSet>),
    PerNode(Box<PodTemplate>),
}

pub fn node_set(c: &ClusterFile, names: &Names, ns: &NodeSet) -> (Workload, PodDisruptionBudget) {
    let template = pod_template(c, names, ns);
    let workload = if ns.managed() {
        Workload::PerNode(Box::new(per_node(names, ns, template)))
    } else {
        Workload::StatefulSet(Box::new(stateful_set(names, ns, template)))
    };
    // Voluntary evictions (kubectl drain, cluster autoscaler) must not take a worker running jobs:
    // the daemon marks busy workers, and this budget allows none of them to be evicted.
    let mut busy = names.selector(Component::Worker, Some(&ns.name));
    busy.insert(LABEL_BUSY.into(), "true".into());
    let budget = pdb(names, &ns.name, Component::Worker, Some(&ns.name), busy, 0);
    (workload, budget)
}

/// The PodTemplate of a perNode NodeSet, labelled with its revision (also in the pods' labels).
fn per_node(names: &Names, ns: &NodeSet, mut template: PodTemplateSpec) -> PodTemplate {
    let digest = checksum(&serde_json::to_string(&template).unwrap_or_default());
    let mut meta = meta(names, &ns.name, Some(Component::Worker), Some(&ns.name));
    for labels in [
        &mut meta.labels,
        &mut template.metadata.get_or_insert_default().labels,
    ] {
        labels
            .get_or_insert_default()
            .insert(LABEL_REVISION.into(), digest.clone());
    }
    PodTemplate {
        metadata: meta,
        template: Some(template),
    }
}

fn stateful_set(names: &Names, ns: &NodeSet, template: PodTemplateSpec) -> StatefulSet {
    StatefulSet {
        metadata: meta(names, &ns.name, Some(Component::Worker), Some(&ns.name)),
        spec: Some(StatefulSetSpec {
            replicas: Some(ns.replicas.count() as i32),
            service_name: Some(names.workers_service()),
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".into()),
                rolling_update: None,
            }),
            selector: selector(names, Component::Worker, Some(&ns.name)),
            template,
            volume_claim_templates: (!ns.volume_claim_templates.is_empty())
                .then(|| ns.volume_claim_templates.clone()),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

/// The `--conf` of a NodeSet's slurmd. When an active check holds its new workers, a new
/// worker's Slurm node is made drained with slurmops' reason, so that no job lands on it
/// before its checks pass (Slurm applies `State` only when it creates the node).
fn registering_conf(checks: &[ActiveCheck], ns: &NodeSet) -> String {
    let conf = slurmd_conf(ns);
    match holds_new_workers(checks, ns) {
        true => format!(
            "{conf} State=DRAIN Reason=\"{}\"",
            DrainReason::ChecksPending
        ),
        false => conf,
    }
}

fn pod_template(c: &ClusterFile, names: &Names, ns: &NodeSet) -> PodTemplateSpec {
    let s = &c.spec;
    let mut mounts = vec![pod::mount("etc-slurm", ETC_SLURM, true)];
    mounts.extend(ns.volume_mounts.iter().cloned());
    let mut etc = vec![pod::secret_file(&s.auth.slurm_key, "slurm.key", 0o400)];
    if s.controller.health_check.is_some() {
        // No checksum: the kubelet refreshes a projected file in place, and slurmd runs the
        // new version at its next interval, with no worker replaced.
        etc.push(pod::config_files(
            &names.config_map(),
            [(HEALTH_CHECK_FILE, 0o555)],
        ));
    }
    let mut volumes: Vec<Volume> = vec![pod::projected("etc-slurm", etc)];
    volumes.extend(ns.volumes.iter().cloned());
    let image = ns
        .image
        .clone()
        .unwrap_or_else(|| pod::image(s, s.images.slurmd.as_ref(), "slurmd"));
    let args = vec![
        "-D".into(),
        "-Z".into(),
        "--conf-server".into(),
        names.conf_servers(s),
        "--conf".into(),
        registering_conf(&s.policy.active_checks, ns),
    ];
    let main = Container {
        env: Some(vec![EnvVar {
            name: "POD_NAME".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.name".into(),
                    api_version: None,
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        }]),
        resources: resources(ns),
        security_context: security_context(ns),
        volume_mounts: Some(mounts),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(vec!["/bin/sh".into(), "-c".into(), PRE_STOP.into()]),
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        ..pod::daemon(s, "slurmd", image, args, SLURMD_PORT, 5)
    };
    let imex = ns.imex.as_ref().filter(|x| x.enabled).map(|x| {
        vec![PodResourceClaim {
            name: IMEX_CLAIM.into(),
            resource_claim_template_name: Some(
                x.resource_claim_template
                    .clone()
                    .unwrap_or_else(|| format!("{}-channel", x.compute_domain)),
            ),
            resource_claim_name: None,
        }]
    });
    PodParts {
        names,
        spec: s,
        component: Component::Worker,
        node_set: Some(&ns.name),
        settings: &ns.pod,
        main,
        init: Vec::new(),
        sidecars: Vec::new(),
        volumes,
        annotations: BTreeMap::new(),
        pod: PodSpec {
            affinity: Some(one_per_node(names)),
            resource_claims: imex,
            automount_service_account_token: Some(false),
            ..PodSpec::default()
        },
    }
    .template()
}
