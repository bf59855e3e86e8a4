//! Slurm's node list: kept and asked again with `update_time` (304 while nothing changed),
//! parsed as it arrives (never the whole 23 MB answer of 10,000 nodes in memory), and a whole
//! list's request, when it runs past a pass's deadline, waited for by the next pass rather than
//! sent again.

use std::time::Duration;

use reqwest::Method;

use super::super::model::{DataParser, Node, NodesWire};
use super::super::{Nodes, SlurmError};
use super::Client;
use super::answer::{Listed, Parsed};

/// A whole node list's request in flight, and when it was sent.
pub(super) struct WholeNodes {
    task: tokio::task::JoinHandle<Result<Parsed<NodesWire>, SlurmError>>,
    since: std::time::Instant,
}

/// How long a whole node list's request may run across passes: slurmrestd 24.11 answers 10,000
/// nodes (23 MB) in about 2 s when idle, and took over 10 s while it also built a queue of
/// 50,000 jobs.
pub const WHOLE_NODES_TIMEOUT: Duration = Duration::from_secs(120);

/// The last node list, with slurmctld's `last_update` to ask again with.
pub(super) struct KeptNodes {
    last_update: i64,
    nodes: Nodes,
}

impl Client {
    /// Every node, by name. The list is kept and asked for again with `update_time`: while no
    /// node changed, slurmrestd answers 304 with no body, and the kept list is shared, not copied.
    pub async fn nodes(&self) -> Result<Nodes, SlurmError> {
        let mut kept = self.kept_nodes.lock().await;
        let path = match &*kept {
            Some(k) => format!("nodes/?update_time={}", k.last_update),
            None => "nodes/".to_string(),
        };
        let p = self.parser().await?;
        let answer = match kept.is_some() {
            false => self.whole_nodes(p).await?,
            true => {
                let url = format!("{}/slurm/{}/{path}", self.base, p.as_str());
                match self
                    .send_url_within(Method::GET, url, None, self.config.timeout, None)
                    .await
                {
                    // Slurm 24.11 and 25.11 ask for the partitions with the same update_time
                    // once a node changed, and fail when no partition did ("Unable to query
                    // partitions"): ask again without it. 26.05 answers the conditional read.
                    Err(SlurmError::Api { .. }) => self.whole_nodes(p).await?,
                    other => other?,
                }
            }
        };
        let w = match (answer, &*kept) {
            (Parsed(Some(w)), _) => w,
            (Parsed(None), Some(k)) => return Ok(k.nodes.clone()),
            (Parsed(None), None) => {
                return Err(self.parse_error(&path, "no node list in the answer".into()));
            }
        };
        let nodes: Nodes = std::sync::Arc::new(
            w.nodes
                .into_iter()
                .map(|n| {
                    let n = Node::from(n);
                    (n.name.clone(), n)
                })
                .collect(),
        );
        if let Some(last_update) = w.last_update.filter(|t| *t > 0) {
            *kept = Some(KeptNodes {
                last_update,
                nodes: nodes.clone(),
            });
        }
        Ok(nodes)
    }

    /// The whole node list (`nodes/`), within this client's deadline: a request that runs past
    /// it goes on, up to `WHOLE_NODES_TIMEOUT`, and the next call waits for its answer
    /// (`StillAnswering` meanwhile) rather than send another.
    async fn whole_nodes(&self, p: DataParser) -> Result<Parsed<NodesWire>, SlurmError> {
        let mut slot = self.whole_nodes.lock().await;
        let mut w = match slot.take() {
            Some(w) => w,
            None => {
                let url = format!("{}/slurm/{}/nodes/", self.base, p.as_str());
                let client = self.clone();
                let task = tokio::spawn(async move {
                    client
                        .send_url_within(Method::GET, url, None, WHOLE_NODES_TIMEOUT, None)
                        .await
                });
                let since = std::time::Instant::now();
                WholeNodes { task, since }
            }
        };
        match tokio::time::timeout(self.config.timeout, &mut w.task).await {
            Ok(done) => done
                .unwrap_or_else(|e| Err(SlurmError::Config(format!("reading the node list: {e}")))),
            Err(_) => {
                let secs = w.since.elapsed().as_secs();
                *slot = Some(w);
                Err(SlurmError::StillAnswering {
                    url: self.base.clone(),
                    path: "nodes/".into(),
                    secs,
                })
            }
        }
    }
}

impl Listed for NodesWire {
    fn errors(&mut self) -> Vec<crate::slurm::model::ApiMessage> {
        std::mem::take(&mut self.errors)
    }
}

#[cfg(test)]
mod tests;
