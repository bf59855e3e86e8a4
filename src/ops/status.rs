//! `status`: the daemons' status ConfigMaps, read once or again and again.

use std::path::Path;

use super::{Error, connect, runtime};
use crate::status::configmap::{self, Status};

/// Whose status, where.
pub struct Where<'a> {
    pub kubeconfig: Option<&'a Path>,
    pub context: Option<&'a str>,
    /// The namespace the daemons run in.
    pub namespace: &'a str,
    /// Only the daemon of this cluster (None: every daemon of the namespace).
    pub cluster: Option<&'a str>,
}

/// The statuses, each with the cluster it is for.
pub type Statuses = Vec<(Option<String>, Status)>;

/// Reads W's statuses and hands them to SHOW; again after the pause SHOW returns, until it
/// returns None.
pub fn follow(
    w: &Where<'_>,
    mut show: impl FnMut(&Statuses) -> Option<std::time::Duration>,
) -> Result<(), Error> {
    runtime().block_on(async {
        let cluster = connect(w.kubeconfig, w.context).await?;
        loop {
            let all = read(&cluster.client, w.namespace, w.cluster)
                .await
                .map_err(Error::Other)?;
            match show(&all) {
                Some(pause) => tokio::time::sleep(pause).await,
                None => return Ok(()),
            }
        }
    })
}

/// The statuses to show: CLUSTER's daemon's, or every daemon's of NAMESPACE.
async fn read(
    client: &kube::Client,
    namespace: &str,
    cluster: Option<&str>,
) -> Result<Statuses, String> {
    let all = match cluster {
        Some(c) => configmap::read(client, namespace, Some(c))
            .await
            .map_err(|e| e.to_string())?
            .map(|s| vec![(Some(c.to_string()), s)])
            .unwrap_or_default(),
        None => configmap::read_all(client, namespace)
            .await
            .map_err(|e| e.to_string())?,
    };
    if all.is_empty() {
        let which = cluster.map_or(String::new(), |c| format!(" for cluster {c}"));
        return Err(format!(
            "no status{which} in namespace {namespace} (is the daemon running there?)"
        ));
    }
    Ok(all)
}
