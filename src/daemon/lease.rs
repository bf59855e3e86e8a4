//! Leader election over a coordination.k8s.io/v1 Lease, so several daemon replicas can run and
//! exactly one applies. The holder renews every `renew`; another replica takes over once the
//! lease is older than its duration. Every write carries the resourceVersion it read, so two
//! replicas can never both win a takeover.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

pub struct Elector {
    api: Api<Lease>,
    pods: Api<k8s_openapi::api::core::v1::Pod>,
    /// The Lease (`rbac::lease_for` the daemon's cluster).
    pub name: String,
    pub identity: String,
    pub duration: Duration,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl Elector {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: String,
        identity: String,
        duration: Duration,
    ) -> Self {
        Elector {
            api: Api::namespaced(client.clone(), namespace),
            pods: Api::namespaced(client, namespace),
            name,
            identity,
            duration,
        }
    }

    fn spec(&self, transitions: i32, acquired: Option<MicroTime>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs() as i32),
            acquire_time: acquired.or_else(|| Some(now())),
            renew_time: Some(now()),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Labels POD (this replica's own) `slurmops.dev/leader=true` when LEADING, else removes
    /// the label: the daemon's Service selects the label, so webhooks, the view and metrics reach
    /// the leader alone. False (and a warning) when the write failed; the next renewal retries.
    pub async fn label_leader(&self, pod: &str, leading: bool) -> bool {
        let value = leading.then_some("true");
        let patch =
            serde_json::json!({"metadata": {"labels": {crate::vocab::LABEL_LEADER: value}}});
        match self
            .pods
            .patch(
                pod,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(identity = %self.identity, "cannot label pod {pod} as {}: {e}", if leading { "the leader" } else { "a standby" });
                false
            }
        }
    }

    /// Acquires or renews the lease; true when this replica leads now. A lost race is `false`,
    /// not an error.
    pub async fn try_lead(&self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(0, None)),
            };
            return conflict_is_false(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let mine = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        let held = spec
            .holder_identity
            .as_deref()
            .is_some_and(|h| !h.is_empty());
        let expired = spec.renew_time.as_ref().is_none_or(|t| {
            let age = k8s_openapi::jiff::Timestamp::now().duration_since(t.0);
            let limit = spec.lease_duration_seconds.unwrap_or(15).max(1);
            age.as_secs() >= i64::from(limit)
        });
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(if mine {
            self.spec(transitions, spec.acquire_time.clone())
        } else if !held || expired {
            self.spec(transitions + 1, None)
        } else {
            return Ok(false);
        });
        conflict_is_false(
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await,
        )
    }

    /// Gives the lease up (graceful shutdown), so another replica takes over at once.
    pub async fn release(&self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await
            && let Some(spec) = lease.spec.as_mut()
            && spec.holder_identity.as_deref() == Some(self.identity.as_str())
        {
            spec.holder_identity = None;
            let _ = self
                .api
                .replace(&self.name, &PostParams::default(), &lease)
                .await;
        }
    }
}

fn conflict_is_false(r: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
    match r {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
