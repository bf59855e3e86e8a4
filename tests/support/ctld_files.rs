//! The controller pod's mounted configuration, as a kubelet keeps it, for a test's own Slurm
//! (`OwnSlurm`): the slurm ConfigMap the pod projects into /etc/slurm is followed, and each new
//! version is written into the instance's config directory with the test host's overlay, then
//! its `..data` link moved, as the kubelet updates a projected volume. The pod's `reconfigure`
//! sidecar runs its own command line against that directory.

use k8s_openapi::api::core::v1::{ConfigMap, PodSpec};
use kube::Api;

use super::kubelet::OwnSlurm;
use super::slurm;

/// The ConfigMap version last written into the instance's config directory.
pub struct Materialized {
    pub config_map: String,
    pub version: String,
}

/// The ConfigMap a pod of SPEC projects into its `etc-slurm` volume (slurm.conf and the other files).
pub fn config_map_of(spec: &PodSpec) -> Option<String> {
    let volumes = spec.volumes.as_ref()?;
    let etc = volumes.iter().find(|v| v.name == "etc-slurm")?;
    etc.projected
        .as_ref()?
        .sources
        .as_ref()?
        .iter()
        .find_map(|s| s.config_map.as_ref().map(|c| c.name.clone()))
}

/// What the ConfigMap holds now: (resourceVersion, data).
async fn current(
    api: &Api<ConfigMap>,
    name: &str,
) -> Option<(String, std::collections::BTreeMap<String, String>)> {
    let cm = api.get_opt(name).await.ok()??;
    Some((cm.metadata.resource_version?, cm.data.unwrap_or_default()))
}

/// Remembers the version of the ConfigMap its slurmctld started with.
pub async fn started(api: &Api<ConfigMap>, spec: &PodSpec) -> Option<Materialized> {
    let config_map = config_map_of(spec)?;
    let (version, _) = current(api, &config_map).await?;
    Some(Materialized {
        config_map,
        version,
    })
}

/// Writes a new version of the ConfigMap into OWN's config directory; true when it did.
pub async fn refresh(api: &Api<ConfigMap>, own: &OwnSlurm, m: &mut Materialized) -> bool {
    let Some((version, data)) = current(api, &m.config_map).await else {
        return false;
    };
    if version == m.version {
        return false;
    }
    let (instance, port) = (own.instance.clone(), own.ctld_port);
    let written = tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (name, content) in slurm::overlay_files(data, &instance, port) {
            std::fs::write(dir.path().join(name), content).expect("write a config file");
        }
        slurm::sh(&["refresh-conf", &instance, &dir.path().to_string_lossy()]);
    })
    .await;
    if written.is_ok() {
        m.version = version;
    }
    written.is_ok()
}

/// Starts the pod's `reconfigure` sidecar (its command line, in the chroot of RELEASE) next to
/// OWN's slurmctld; false when the pod has none.
pub fn start_sidecar(spec: &PodSpec, own: &OwnSlurm, release: &str) -> bool {
    let Some(c) = spec.containers.iter().find(|c| c.name == "reconfigure") else {
        return false;
    };
    let mut args = vec![
        "start-sidecar".to_string(),
        own.instance.clone(),
        c.name.clone(),
    ];
    args.extend(c.command.clone().unwrap_or_default());
    args.extend(c.args.clone().unwrap_or_default());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    slurm::sh_on(release, &args);
    true
}
