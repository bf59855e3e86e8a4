//! A login set: its Deployment (sackd + sshd) and the Service users reach it by.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, EnvVar, Service, VolumeMount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::names::{Component, LABEL_LOGIN_SET, Names};
use super::objects::{meta, service};
use super::pod::{self, PodParts};
use super::slurm::ETC_SLURM;
use crate::cluster::types::{ClusterFile, LoginSet};

/// A login set: sackd (configless client) + sshd, reachable through its Service.
pub fn login(c: &ClusterFile, names: &Names, l: &LoginSet) -> (Service, Deployment) {
    let s = &c.spec;
    let name = names.login(&l.name);
    let mut mounts = vec![pod::mount("etc-slurm", ETC_SLURM, true)];
    let mut volumes = vec![pod::projected(
        "etc-slurm",
        vec![pod::secret_file(&s.auth.slurm_key, "slurm.key", 0o400)],
    )];
    if let Some(keys) = &l.authorized_keys {
        volumes.push(pod::projected(
            "authorized-keys",
            vec![pod::secret_file(keys, "authorized_keys", 0o400)],
        ));
        // The file alone (subPath): a projected volume's directory is world-writable (1777), and
        // sshd refuses every key under a directory others may write (StrictModes), so a volume
        // over /root/.ssh would let no one in. Found on the real kubelet; the file is read at
        // each login; a changed Secret reaches a login pod when it restarts (subPath is not updated).
        mounts.push(VolumeMount {
            sub_path: Some("authorized_keys".into()),
            ..pod::mount("authorized-keys", "/root/.ssh/authorized_keys", true)
        });
    }
    if let Some(sssd) = &l.sssd_conf {
        volumes.push(pod::projected(
            "sssd",
            vec![pod::secret_file(sssd, "sssd.conf", 0o600)],
        ));
        mounts.push(pod::mount("sssd", "/etc/sssd", true));
    }
    volumes.extend(l.volumes.iter().cloned());
    mounts.extend(l.volume_mounts.iter().cloned());
    let main = Container {
        name: "login".into(),
        image: Some(
            l.image
                .clone()
                .unwrap_or_else(|| pod::image(s, s.images.login.as_ref(), "login")),
        ),
        image_pull_policy: Some(s.images.pull_policy.as_str().into()),
        env: Some(vec![EnvVar {
            name: "SACKD_OPTIONS".into(),
            value: Some(format!("--conf-server={}", names.conf_servers(s))),
            ..EnvVar::default()
        }]),
        ports: Some(vec![pod::port("ssh", 22)]),
        readiness_probe: Some(pod::tcp_probe(22, 5)),
        liveness_probe: Some(pod::tcp_probe(22, 60)),
        volume_mounts: Some(mounts),
        security_context: l.container_security_context.clone(),
        ..Container::default()
    };
    let mut template = PodParts {
        names,
        spec: s,
        component: Component::Login,
        node_set: None,
        settings: &l.pod,
        main,
        init: Vec::new(),
        sidecars: Vec::new(),
        volumes,
        annotations: BTreeMap::new(),
        pod: k8s_openapi::api::core::v1::PodSpec {
            automount_service_account_token: Some(false),
            ..Default::default()
        },
    }
    .template();
    if let Some(m) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        m.insert(LABEL_LOGIN_SET.into(), l.name.clone());
    }
    let mut sel = names.selector(Component::Login, None);
    sel.insert(LABEL_LOGIN_SET.into(), l.name.clone());
    let dep = Deployment {
        metadata: meta(names, &name, Some(Component::Login), None),
        spec: Some(DeploymentSpec {
            replicas: Some(l.replicas as i32),
            selector: LabelSelector {
                match_labels: Some(sel.clone()),
                ..LabelSelector::default()
            },
            template,
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    let mut svc = service(
        names,
        &name,
        Component::Login,
        &[("ssh", l.service.port)],
        false,
    );
    if let Some(spec) = svc.spec.as_mut() {
        spec.type_ = Some(l.service.type_.as_str().into());
        spec.selector = Some(sel);
        if let Some(p) = spec.ports.as_mut().and_then(|p| p.first_mut()) {
            p.target_port = Some(IntOrString::Int(22));
        }
    }
    if !l.service.annotations.is_empty() {
        svc.metadata.annotations = Some(l.service.annotations.clone());
    }
    (svc, dep)
}
