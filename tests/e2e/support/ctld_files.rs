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
    start_sidecar_on(spec, &own.instance, release)
}

fn start_sidecar_on(spec: &PodSpec, instance: &str, release: &str) -> bool {
    let Some(c) = spec.containers.iter().find(|c| c.name == "reconfigure") else {
        return false;
    };
    let mut args = vec![
        "start-sidecar".to_string(),
        instance.to_string(),
        c.name.clone(),
    ];
    args.extend(c.command.clone().unwrap_or_default());
    args.extend(c.args.clone().unwrap_or_default());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // slurmctld's /run/slurmctld (its authentication socket) is the sidecar's only when the pod
    // mounts one volume there in both containers; else the sidecar has a /run/slurmctld of its
    // own, as a container does.
    let run = |c: &k8s_openapi::api::core::v1::Container| {
        c.volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == "/run/slurmctld")
            .map(|m| m.name.clone())
    };
    let shared = spec
        .containers
        .iter()
        .find(|c| c.name == "slurmctld")
        .and_then(run);
    let own = if shared.is_some() && shared == run(c) {
        ""
    } else {
        "1"
    };
    slurm::run(
        &args,
        &[("SLURM_RELEASE", release), ("BED_SIDECAR_OWN_RUN", own)],
    )
    .unwrap_or_else(|e| panic!("test bed failed: {e}"));
    true
}

/// The `reconfigure` sidecar of cluster CLUSTER's controller pod, run against the bed's shared
/// Slurm instance, with a kubelet's copy of the ConfigMap `CLUSTER-maintenance` in its
/// maintenance directory (kept up to date every second): the part of a controller pod a test
/// on the shared instance needs where slurmctld's sidecar makes the reservations (Slurm 24.11).
/// Stopped, and its directory emptied, on drop.
pub struct SharedSidecar {
    instance: String,
    dir: std::path::PathBuf,
    follow: tokio::task::JoinHandle<()>,
}

impl SharedSidecar {
    pub async fn start(client: &kube::Client, ns: &str, cluster: &str) -> SharedSidecar {
        use k8s_openapi::api::apps::v1::StatefulSet;
        let sts: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
        let controller = sts.get(&format!("{cluster}-controller")).await.unwrap();
        let spec = controller.spec.and_then(|s| s.template.spec).unwrap();
        let instance = super::slurm_instance().to_string();
        let dir = std::path::PathBuf::from(slurm::sh(&["maintenance-dir", &instance]).trim());
        mirror(&dir, &Default::default());
        let (i, release) = (instance.clone(), super::slurm_release());
        let started = tokio::task::spawn_blocking(move || start_sidecar_on(&spec, &i, release));
        assert!(
            started.await.unwrap(),
            "the controller pod has a reconfigure sidecar"
        );
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let (name, d) = (format!("{cluster}-maintenance"), dir.clone());
        let follow = tokio::spawn(async move {
            loop {
                if let Ok(Some(cm)) = cms.get_opt(&name).await {
                    mirror(&d, &cm.data.unwrap_or_default());
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
        SharedSidecar {
            instance,
            dir,
            follow,
        }
    }

    /// What the sidecar printed.
    pub fn output(&self) -> String {
        let out = self.dir.with_file_name("sidecar-reconfigure.out");
        std::fs::read_to_string(out).unwrap_or_default()
    }
}

/// DIR holds one file per key of DATA, and nothing else (each written whole, then renamed).
fn mirror(dir: &std::path::Path, data: &std::collections::BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !data.contains_key(&name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    for (k, v) in data {
        let path = dir.join(k);
        if std::fs::read_to_string(&path).ok().as_ref() != Some(v) {
            let tmp = dir.join(format!(".new-{k}"));
            std::fs::write(&tmp, v).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
    }
}

impl Drop for SharedSidecar {
    fn drop(&mut self) {
        self.follow.abort();
        slurm::sh(&["stop-sidecar", &self.instance, "reconfigure"]);
        mirror(&self.dir, &Default::default());
    }
}
