//! What the test kubelet reads from a pod's containers: whether its image can be pulled, the
//! slurmd command line it starts, the preStop hook it runs.

use k8s_openapi::api::core::v1::Container;

use super::super::slurm;

/// An image no registry serves: its registry host is under `.invalid` (RFC 2606), so a real
/// kubelet could never pull it (a bad image in a test's commit).
pub(super) fn unpullable(c: &Container) -> bool {
    c.image
        .as_deref()
        .and_then(|i| i.split_once('/'))
        .is_some_and(|(host, _)| host.ends_with(".invalid"))
}

/// Where a pod's Slurm daemons run.
#[derive(Clone)]
pub(super) struct Target {
    pub instance: String,
    pub ctld_port: u16,
    /// slurmd's `--conf-server`: `localhost:PORT`, or every controller's `ADDR:PORT`.
    pub conf_server: String,
    pub release: String,
}

/// Starts the container's slurmd command line; returns the port it serves instead of 6818:
/// PREVIOUS, the port the node's earlier slurmd served, when there was one.
pub(super) fn start_slurmd(
    c: &Container,
    hostname: &str,
    t: &Target,
    previous: Option<u16>,
) -> u16 {
    let port = previous.map_or_else(slurm::slurmd_port, slurm::slurmd_port_again);
    let args = c.args.clone().unwrap_or_default();
    let mut conf = String::new();
    let mut rest: Vec<String> = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--conf" => conf = it.next().unwrap_or_default(),
            "--conf-server" => {
                it.next();
                rest.push(a);
                rest.push(t.conf_server.clone());
            }
            _ => rest.push(a),
        }
    }
    let port_s = port.to_string();
    let mut sh_args = vec!["start-slurmd", &t.instance, hostname, &port_s, &conf];
    sh_args.extend(rest.iter().map(String::as_str));
    slurm::sh_on(&t.release, &sh_args);
    port
}

/// The container's preStop exec command, with the env vars it may use (downward API
/// `metadata.name` and literal values) set through `env`.
pub(super) fn pre_stop(c: &Container, pod: &str) -> Option<Vec<String>> {
    let cmd = c
        .lifecycle
        .as_ref()?
        .pre_stop
        .as_ref()?
        .exec
        .as_ref()?
        .command
        .clone()?;
    let mut out = vec!["env".to_string()];
    for e in c.env.iter().flatten() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) => v.clone(),
            (None, Some(src))
                if src.field_ref.as_ref().map(|f| f.field_path.as_str())
                    == Some("metadata.name") =>
            {
                pod.to_string()
            }
            _ => continue,
        };
        out.push(format!("{}={value}", e.name));
    }
    out.extend(cmd);
    Some(out)
}
