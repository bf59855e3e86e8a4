//! What a pass talks to: the Slurm client for the target cluster (and the slurmrestd replicas
//! behind its Service), and the watches of its workers that wake the next pass.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster;
use crate::controller::observe::Scope;
use crate::controller::watch::Cache;
use crate::daemon::http::Shared;
use crate::daemon::{Config, SlurmSource, State};
use crate::k8s::Connection;
use crate::slurm::Client;
use crate::vocab::SLURM_OFF;

/// With several slurmrestd and the cluster's own Service (no `--slurmrestd-url`): SLURM sends to
/// the pods behind it, as a watch of its Endpoints holds them (`daemon::replicas`), and names the
/// one that answered. No Endpoints yet: the Service.
pub(super) fn find_replicas(
    cluster: &Connection,
    cfg: &Config,
    state: &mut State,
    c: &cluster::ClusterFile,
    slurm: &Client,
) {
    let own_service = matches!(&cfg.slurm, SlurmSource::Cluster { url: None, .. });
    if !own_service || c.spec.restapi.replicas < 2 {
        state.replicas = None;
        return;
    }
    let (ns, name) = (
        &c.metadata.namespace,
        crate::render::Names::new(c).restapi(),
    );
    let key = format!("{ns}/{name}");
    if state.replicas.as_ref().is_none_or(|f| f.key != key) {
        state.replicas = Some(crate::daemon::replicas::Follow::start(
            &cluster.client,
            ns,
            &name,
        ));
    }
    if let Some(f) = &state.replicas {
        slurm.set_replicas(f.source());
    }
}

/// How long a pass waits for a job queue refresh's first batch (`jobs/state/` and the first jobs
/// read) before it goes on with what was read before (the refresh goes on in the background; a
/// later pass takes it).
pub const QUEUE_WAIT: Duration = Duration::from_secs(5);

/// The Slurm client for cluster C: the configured one, or one minting tokens from C's JWT key
/// Secret (re-read every 10 minutes). None, with the reason in the status, when there is none.
pub(super) async fn connect(
    cluster: &Connection,
    cfg: &Config,
    state: &mut State,
    c: &cluster::ClusterFile,
) -> Option<Arc<Client>> {
    let (url, user, job_user, allow_http) = match &cfg.slurm {
        SlurmSource::Off => {
            state.status.slurm = format!(
                "{SLURM_OFF} (--no-slurm): nothing rolls; scale-ins and prunes over workers are refused"
            );
            return None;
        }
        SlurmSource::Static(client) => return Some(client.clone()),
        SlurmSource::Cluster {
            url,
            user,
            job_user,
            allow_http,
        } => (url, user, job_user, *allow_http),
    };
    let ns = &c.metadata.namespace;
    let key = format!(
        "{ns}/{}/{}/{}",
        c.spec.auth.jwt_key.name,
        c.spec.auth.jwt_key.key,
        url.as_deref().unwrap_or("")
    );
    if let Some((k, client, at)) = &state.slurm
        && *k == key
        && at.elapsed() < Duration::from_secs(600)
    {
        return Some(client.clone());
    }
    match crate::slurm::connect::from_secret(&cluster.client, c, url.clone(), user, allow_http)
        .await
    {
        Ok(mut client) => {
            if let Some(t) = state.told.connect.see(None, Instant::now()) {
                tracing::info!("Slurm connected: {t}");
            }
            client.set_queue_wait(QUEUE_WAIT);
            client.set_queue_every(cfg.interval);
            client.set_job_user(job_user);
            // The same slurmrestd with the Secret read again: what the last client read of the
            // queue and the nodes goes on (a large queue takes minutes to read job by job).
            if let Some((k, old, _)) = &state.slurm
                && *k == key
            {
                client.take_reads_from(old).await;
            }
            let client = Arc::new(client);
            state.slurm = Some((key, client.clone(), Instant::now()));
            Some(client)
        }
        Err(e) => {
            state.slurm = None;
            state.status.slurm = format!("not connected: {e}");
            let told = state.told.connect.see(Some(&e.to_string()), Instant::now());
            if let Some(t) = told {
                tracing::warn!("Slurm: {t}");
            }
            None
        }
    }
}

/// Watches the target's workers, so that a pod becoming Ready or going away wakes the next pass.
pub(super) fn watch(
    cluster: &Connection,
    shared: &Shared,
    state: &mut State,
    c: &cluster::ClusterFile,
) {
    let scope = Scope::cluster(&c.metadata.namespace, &c.metadata.name);
    if !state.cache.as_ref().is_some_and(|w| *w.scope() == scope) {
        state.cache = Some(Cache::start(
            &cluster.client,
            scope,
            shared.sync_now.clone(),
        ));
    }
    // Nodes for perNode placement, topology labels and sync's node health, from one watch,
    // started once the workers' watches have listed them: at a restart at 10,000 workers the
    // Nodes' first listing (hundreds of MB of JSON) would compete with theirs and with the
    // early pass's read of Slurm (docs/benchmarks.md, 2026-12-02).
    if let Some(cache) = state.cache.as_mut().filter(|c| !c.listing()) {
        cache.follow_nodes(
            &cluster.client,
            &crate::controller::observe::node_label_keys(c),
        );
    }
}
