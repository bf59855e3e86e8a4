//! `accounting`: QOS, accounts and users as code. cluster.yaml's `spec.accounting` becomes
//! Slurm's own words (`model`), is compared with what slurmdbd holds (`diff`, pure, shared by
//! the plan and apply) and reconciled through slurmrestd's slurmdb endpoints (`rest`).
//!
//! A pass reads slurmdbd and the jobs once, decides, and makes the changes in dependency order.
//! It fails closed: if slurmdbd cannot be read, nothing is written. Objects made by hand are
//! never removed unless `policy.accounting.prune` says so, and an account is never removed
//! while jobs use it.

pub mod diff;
pub mod model;
pub mod rest;

use crate::cluster::ClusterFile;
use crate::slurm::{Client, SlurmError};

pub use diff::{BusyJob, Change, Diff, Mode, Op};

/// What one accounting pass found and did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub diff: Diff,
    /// Requests that changed slurmdbd.
    pub writes: u32,
    /// The change Slurm refused, which stopped the pass (later changes may depend on it).
    pub failed: Option<(Change, String)>,
}

/// The narrow seam between a pass and slurmdbd (through slurmrestd).
pub trait SlurmAccounts: Send + Sync {
    /// Brings slurmdbd to C's accounting objects (see [`reconcile`]).
    fn reconcile_accounting(
        &self,
        c: &ClusterFile,
        last: Option<&ClusterFile>,
    ) -> impl std::future::Future<Output = Result<Outcome, SlurmError>> + Send;
}

impl SlurmAccounts for Client {
    async fn reconcile_accounting(
        &self,
        c: &ClusterFile,
        last: Option<&ClusterFile>,
    ) -> Result<Outcome, SlurmError> {
        reconcile(self, c, last).await
    }
}

impl Outcome {
    /// What a report shows: the changes made (or refused), drift, objects made by hand.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = self.diff.lines();
        if let Some((ch, e)) = &self.failed {
            lines.push(format!(
                "FAILED: {}: Slurm refused it: {e}; the changes after it wait for the next pass",
                ch.key
            ));
        }
        lines
    }
}

/// Slurm's ClusterName for C (the associations slurmops manages are this cluster's).
pub fn cluster_name(c: &ClusterFile) -> String {
    c.spec
        .cluster_name
        .clone()
        .unwrap_or_else(|| c.metadata.name.clone())
}

pub fn mode(c: &ClusterFile) -> Mode {
    Mode {
        prune: c.spec.policy.accounting.prune,
        detect_only: c.spec.policy.detect_drift_only,
    }
}

/// What the last applied revision asked for (None: unknown).
fn last_desired(last: Option<&ClusterFile>) -> Option<model::Objects> {
    last.filter(|l| l.spec.accounting.enabled)
        .map(|l| model::desired(&l.spec.accounting))
}

/// What one look at slurmdbd finds: the diff, with what it was made from.
struct Looked {
    diff: Diff,
    desired: model::Objects,
    current: model::Objects,
}

/// Reads slurmdbd and the jobs once and diffs them against C (None: nothing to manage). LAST is
/// the last applied revision, which tells hand edits from changes in git.
async fn look(
    s: &Client,
    c: &ClusterFile,
    last: Option<&ClusterFile>,
) -> Result<Option<Looked>, SlurmError> {
    let Some(current) = read_current(s, c).await? else {
        return Ok(None);
    };
    let desired = model::desired(&c.spec.accounting);
    let busy = rest::busy(s).await?;
    let last = last_desired(last);
    let cluster = cluster_name(c);
    let inputs = diff::Inputs {
        cluster: &cluster,
        desired: &desired,
        current: &current,
        last: last.as_ref(),
        busy: &busy,
    };
    let diff = diff::diff(&inputs, mode(c));
    Ok(Some(Looked {
        diff,
        desired,
        current,
    }))
}

/// The diff of slurmdbd against C, read live (nothing written); empty without accounting.
pub async fn observe(
    s: &Client,
    c: &ClusterFile,
    last: Option<&ClusterFile>,
) -> Result<Diff, SlurmError> {
    Ok(look(s, c, last).await?.map(|l| l.diff).unwrap_or_default())
}

/// slurmdbd's objects for C; None when there is nothing to manage (accounting off, or no
/// objects declared and slurmrestd without the slurmdb endpoints).
async fn read_current(s: &Client, c: &ClusterFile) -> Result<Option<model::Objects>, SlurmError> {
    if !c.spec.accounting.enabled {
        return Ok(None);
    }
    match rest::read(s, &cluster_name(c)).await {
        Ok(cur) => Ok(Some(cur)),
        Err(SlurmError::Api { status: 404, .. }) if !c.spec.accounting.manages_objects() => {
            Ok(None)
        }
        Err(SlurmError::Api { status: 404, .. }) => Err(SlurmError::Config(format!(
            "slurmrestd at {} does not serve the slurmdb endpoints: run it with `-s openapi/slurmctld,openapi/slurmdbd` (slurmops renders it so when spec.accounting.enabled) and AccountingStorageType=accounting_storage/slurmdbd",
            s.url()
        ))),
        Err(e) => Err(e),
    }
}

/// Brings slurmdbd to C's accounting objects. Does nothing without accounting; when C declares
/// no objects and slurmrestd does not serve the slurmdb endpoints, there is nothing to do
/// either (objects slurmops made earlier are removed once slurmdbd can be read).
pub async fn reconcile(
    s: &Client,
    c: &ClusterFile,
    last: Option<&ClusterFile>,
) -> Result<Outcome, SlurmError> {
    let Some(Looked {
        diff,
        desired,
        current,
    }) = look(s, c, last).await?
    else {
        return Ok(Outcome::default());
    };
    let cluster = cluster_name(c);
    let mut out = Outcome::default();
    for ch in diff.to_make() {
        match rest::write(s, &cluster, ch, &desired, &current).await {
            Ok(n) => out.writes += n,
            Err(e) => {
                out.failed = Some((ch.clone(), e.to_string()));
                break;
            }
        }
    }
    out.diff = diff;
    Ok(out)
}
