//! slurmrestd: its Deployment, Service and PodDisruptionBudget.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, ExecAction, Lifecycle, LifecycleHandler, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::components::{restart_annotation, spread};
use super::names::{Component, Names};
use super::objects::{meta, non_root, pdb, selector, service};
use super::pod::{self, PodParts};
use super::slurm::{ETC_SLURM, SLURMRESTD_PORT, SlurmFiles};
use crate::cluster::types::ClusterFile;

/// slurmrestd: a Deployment behind a Service, authenticating every request by JWT.
pub fn restapi(
    c: &ClusterFile,
    names: &Names,
    files: &SlurmFiles,
) -> Option<(Service, Deployment, PodDisruptionBudget)> {
    let s = &c.spec;
    if !s.restapi.enabled {
        return None;
    }
    let plugins = if s.accounting.enabled {
        "openapi/slurmctld,openapi/slurmdbd"
    } else {
        "openapi/slurmctld"
    };
    let etc = pod::projected(
        "etc-slurm",
        vec![
            pod::config_files(&names.config_map(), [("slurm.conf", 0o444)]),
            pod::secret_file(&s.auth.slurm_key, "slurm.key", 0o400),
        ],
    );
    let args = vec![
        "-a".into(),
        "rest_auth/jwt".into(),
        "-s".into(),
        plugins.into(),
        format!("0.0.0.0:{SLURMRESTD_PORT}"),
    ];
    let main = Container {
        env: Some(vec![
            EnvVar {
                name: "SLURM_JWT".into(),
                value: Some("daemon".into()),
                ..EnvVar::default()
            },
            EnvVar {
                name: "SLURMRESTD_SECURITY".into(),
                value: Some("disable_unshare_files,disable_unshare_sysv".into()),
                ..EnvVar::default()
            },
        ]),
        liveness_probe: Some(pod::tcp_probe(SLURMRESTD_PORT, 30)),
        volume_mounts: Some(vec![pod::mount("etc-slurm", ETC_SLURM, true)]),
        lifecycle: Some(stop_slurmrestd()),
        ..pod::daemon(
            s,
            "slurmrestd",
            pod::image(s, s.images.slurmrestd.as_ref(), "slurmrestd"),
            args,
            SLURMRESTD_PORT,
            3,
        )
    };
    let template = PodParts {
        names,
        spec: s,
        component: Component::RestApi,
        node_set: None,
        settings: &s.restapi.pod,
        main,
        init: Vec::new(),
        sidecars: Vec::new(),
        volumes: vec![etc],
        // slurmrestd asks slurmctld for everything: only ports and auth need it restarted.
        annotations: restart_annotation(files),
        pod: k8s_openapi::api::core::v1::PodSpec {
            security_context: Some(non_root(65534)),
            affinity: Some(spread(names, Component::RestApi)),
            automount_service_account_token: Some(false),
            ..Default::default()
        },
    }
    .template();
    let dep = Deployment {
        metadata: meta(names, &names.restapi(), Some(Component::RestApi), None),
        spec: Some(DeploymentSpec {
            replicas: Some(s.restapi.replicas as i32),
            selector: selector(names, Component::RestApi, None),
            template,
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    let svc = service(
        names,
        &names.restapi(),
        Component::RestApi,
        &[("slurmrestd", SLURMRESTD_PORT)],
        false,
    );
    let budget = pdb(
        names,
        &names.restapi(),
        Component::RestApi,
        None,
        names.selector(Component::RestApi, None),
        1,
    );
    Some((svc, dep, budget))
}

/// How the kubelet stops slurmrestd: it shuts down on SIGINT alone, and as its container's PID 1
/// (slurmops sets its command; Slinky's image runs it under `tini -g`) the kubelet's SIGTERM is
/// lost, so each stop would wait out the grace period and end in SIGKILL (seen on the real
/// kubelet: 30 s per pod of a rollout). The preStop hook sends it SIGINT first.
fn stop_slurmrestd() -> Lifecycle {
    Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec!["/bin/sh".into(), "-c".into(), "kill -INT 1".into()]),
            }),
            ..LifecycleHandler::default()
        }),
        ..Lifecycle::default()
    }
}
