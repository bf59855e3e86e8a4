//! The test kubelet's login pods: what a login image (Slinky's) runs from the pod slurmops
//! renders — sssd when the pod mounts an sssd.conf, sackd with the pod's `SACKD_OPTIONS`, and sshd
//! in front — started in the Slurm chroot by `tests/bed/slurm.sh start-login`, in one namespace
//! whose hostname is the pod's. The pod's Secret volumes are read from the apiserver, as a kubelet
//! projects them, and mounted where the pod mounts them. Test-host differences only: sackd's
//! `--conf-server` points at the bed's slurmctld, and sshd listens on a port of its own on
//! 127.0.0.1 instead of the pod's 22.

use std::os::unix::fs::PermissionsExt;

use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use kube::api::Api;

use super::slurm;

/// The pod's login container, when it has one.
pub fn container(pod: &Pod) -> Option<Container> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "login")
        .cloned()
}

/// Starts the login pod's processes in INSTANCE (release RELEASE, slurmctld on CTLD_PORT);
/// returns sshd's port. Err when a mounted Secret cannot be read yet (tried again later).
pub async fn start(
    secrets: &Api<Secret>,
    pod: &Pod,
    c: &Container,
    hostname: &str,
    instance: &str,
    release: &str,
    ctld_port: u16,
) -> Result<u16, String> {
    let files = tempfile::tempdir().map_err(|e| e.to_string())?;
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    for m in c.volume_mounts.iter().flatten() {
        // A directory (sssd's), or one file of the volume (subPath: root's authorized_keys).
        let (at, only) = match &m.sub_path {
            Some(sub) => match m.mount_path.rsplit_once('/') {
                Some((dir, file)) if file == sub => (dir, Some(sub.as_str())),
                _ => continue,
            },
            None => (m.mount_path.as_str(), None),
        };
        if !matches!(at, "/etc/sssd" | "/root/.ssh") {
            continue;
        }
        let Some(projected) = volumes
            .iter()
            .find(|v| v.name == m.name)
            .and_then(|v| v.projected.clone())
        else {
            continue;
        };
        let dir = files.path().join(at.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        for source in projected.sources.iter().flatten() {
            let Some(s) = &source.secret else { continue };
            let secret = secrets
                .get(&s.name)
                .await
                .map_err(|e| format!("Secret {}: {e}", s.name))?;
            let data = secret.data.unwrap_or_default();
            for item in s.items.iter().flatten() {
                if only.is_some_and(|f| f != item.path) {
                    continue;
                }
                let value = data
                    .get(&item.key)
                    .ok_or_else(|| format!("Secret {} has no key {}", s.name, item.key))?;
                let path = dir.join(&item.path);
                std::fs::write(&path, &value.0).map_err(|e| e.to_string())?;
                let mode = item.mode.or(projected.default_mode).unwrap_or(0o644) as u32;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    let sackd: Vec<String> = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "SACKD_OPTIONS")
        .and_then(|e| e.value.clone())
        .unwrap_or_default()
        .split_whitespace()
        .map(|a| match a.strip_prefix("--conf-server=") {
            Some(_) => format!("--conf-server=localhost:{ctld_port}"),
            None => a.to_string(),
        })
        .collect();
    let port = slurm::slurmd_port();
    let (hostname, instance, release) = (
        hostname.to_string(),
        instance.to_string(),
        release.to_string(),
    );
    tokio::task::spawn_blocking(move || {
        let dir = files.path().to_string_lossy().into_owned();
        let port_s = port.to_string();
        let mut args = vec!["start-login", &instance, &hostname, &port_s, &dir];
        args.extend(sackd.iter().map(String::as_str));
        slurm::sh_on(&release, &args);
    })
    .await
    .map_err(|e| e.to_string())?;
    Ok(port)
}

/// Stops the login pod HOSTNAME's processes.
pub fn stop(instance: &str, hostname: &str) {
    slurm::sh(&["stop-login", instance, hostname]);
}
