//! The daemon's pass while its watches make their first listing of the workers (a restart, a
//! new leader): `controller::early`'s scale-out, its cost on the pass's debug line.

use std::sync::Arc;

use super::http::Shared;
use super::{Loaded, State};
use crate::controller::{self, Env};
use crate::k8s::Connection;
use crate::slurm::Client;

/// The pass while the watches make their first listing (`controller::early`): autoscale's
/// scale-outs from the StatefulSets and Slurm; true when it wrote.
pub(super) async fn pass(
    cluster: &Connection,
    shared: &Arc<Shared>,
    state: &mut State,
    t: &Loaded,
    slurm: &Arc<Client>,
    sts: &[Arc<k8s_openapi::api::apps::v1::StatefulSet>],
    fence: &controller::Fence<'_>,
) -> bool {
    let observer = crate::rollout::Observer::new(move |set, e| {
        tracing::info!(node_set = set, "{set}: {e}");
    });
    let env = Env {
        cluster,
        slurm: Some(slurm.as_ref()),
        cache: state.cache.as_ref(),
        fence,
        observer: &observer,
        registration_grace: crate::controller::decide::REGISTRATION_GRACE,
    };
    match controller::early::scale_out(&env, &t.c, slurm.as_ref(), sts).await {
        Ok(e) => {
            shared
                .metrics
                .lock()
                .expect("metrics")
                .pass_cost(&e.phases, e.slurm_traffic);
            state.cost = Some((e.phases, e.slurm_traffic, e.jobs, e.error.is_none()));
            if let Some(err) = &e.error {
                tracing::debug!("autoscale before the first listing: {err}");
            }
            !e.events.is_empty()
        }
        Err(e) => {
            tracing::warn!("autoscale before the first listing: {e}");
            false
        }
    }
}
