//! What slurmops asks of slurmrestd beyond the node list and the job queue (`nodes`, `queue`):
//! ping, one node, node updates, jobs submitted and cancelled, reservations.

use reqwest::Method;

use super::names::segment;
use super::ping::{Ping, PingsWire};
use super::{Client, DEFAULT_JOB_USER, JOB_USER_ENV, REFUSED_JOB_USERS, errno};
use crate::slurm::SlurmError;
use crate::slurm::model::{
    JobRequest, Node, NodesWire, Reservation, ReservationRequest, ReservationsWire,
};

impl Client {
    pub async fn ping(&self) -> Result<Vec<Ping>, SlurmError> {
        let w: PingsWire = self.get("ping/").await?;
        Ok(w.pings)
    }

    /// One node; `UnknownNode` when Slurm does not know it.
    pub async fn node(&self, name: &str) -> Result<Node, SlurmError> {
        let path = format!("node/{}", segment(name)?);
        let w: NodesWire = match self.get(&path).await {
            Ok(w) => w,
            // slurmrestd 24.11 answers an unknown node with HTTP 200 and an error of number 0
            // ("Failure to query node"), the same as other failures. Only the full node list
            // tells them apart: absent there means unknown; anything else keeps the error.
            Err(e @ SlurmError::Api { .. }) => {
                return match self.nodes().await {
                    Ok(all) if !all.contains_key(name) => Err(SlurmError::UnknownNode(name.into())),
                    _ => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        w.nodes
            .into_iter()
            .map(Node::from)
            .find(|n| n.name == name)
            .ok_or_else(|| SlurmError::UnknownNode(name.into()))
    }

    /// Sets node state (`DRAIN`, `RESUME`, ...) with a reason.
    pub async fn update_node(
        &self,
        name: &str,
        state: &str,
        reason: Option<&str>,
    ) -> Result<(), SlurmError> {
        let mut body = serde_json::json!({"state": [state]});
        if let Some(r) = reason {
            body["reason"] = r.into();
        }
        let p = self.parser().await?;
        let path = format!("node/{}", segment(name)?);
        self.send(p, Method::POST, &path, Some(body)).await?;
        Ok(())
    }

    /// Puts node NAME in TOPOLOGY (`TOPOLOGY:UNIT`, a block or leaf switch topology.yaml
    /// declares). Needs data parser v0.0.43 or later (Slurm 25.05), the first to carry a node's
    /// topology.
    pub async fn set_topology(&self, name: &str, topology: &str) -> Result<(), SlurmError> {
        let p = self.parser().await?;
        if !p.has_node_topology() {
            return Err(SlurmError::Config(format!(
                "setting node {name:?}'s topology needs slurmrestd data parser v0.0.43 or later (Slurm 25.05); slurmrestd at {} speaks {}",
                self.base,
                p.as_str()
            )));
        }
        let path = format!("node/{}", segment(name)?);
        let body = serde_json::json!({ "topology_str": topology });
        self.send(p, Method::POST, &path, Some(body)).await?;
        Ok(())
    }

    /// Submits a batch job as the job user (`Config::job_user`, never the administrator whose
    /// token this client holds), then gives it the top priority with that token (Slurm keeps a
    /// priority only from an operator); its id. A job whose priority could not be set is
    /// cancelled and the error returned: a later pass submits it again.
    pub async fn submit(&self, job: &JobRequest) -> Result<u64, SlurmError> {
        #[derive(serde::Deserialize)]
        struct Submitted {
            job_id: Option<u64>,
        }
        let user = self.job_user()?;
        let p = self.parser().await?;
        self.jobs_changed().await;
        let url = format!("{}/slurm/{}/job/submit", self.base, p.as_str());
        let body: Vec<u8> = self
            .send_url_within(
                Method::POST,
                url,
                Some(job.body()),
                self.config.timeout,
                Some(user),
            )
            .await?;
        let s: Submitted = serde_json::from_slice(&body)
            .map_err(|e| self.parse_error("job/submit", e.to_string()))?;
        let id = s
            .job_id
            .ok_or_else(|| self.parse_error("job/submit", "no job_id in the answer".into()))?;
        let priority = serde_json::json!({ "priority": JobRequest::priority() });
        if let Err(e) = self
            .send(p, Method::POST, &format!("job/{id}"), Some(priority))
            .await
        {
            let _ = self.cancel(id).await;
            return Err(e);
        }
        Ok(id)
    }

    /// The user jobs are submitted as, when it is not the administrator this client's token
    /// speaks for (nor root): jobs slurmops submits never hold the administrator's rights.
    pub fn job_user(&self) -> Result<&str, SlurmError> {
        let u = self.config.job_user.as_str();
        let admin = self.credentials_user();
        if u.is_empty() || REFUSED_JOB_USERS.contains(&u) || admin.as_deref() == Some(u) {
            return Err(SlurmError::Config(format!(
                "the jobs slurmops submits (checks, canaries' validations) cannot run as {u:?} (the Slurm administrator, root, or nobody, whose jobs Slurm refuses); name an unprivileged user that exists on slurmctld and every worker with --job-user (or {JOB_USER_ENV}; default {DEFAULT_JOB_USER})"
            )));
        }
        Ok(u)
    }

    /// Cancels job ID (a job already ended is no error).
    pub async fn cancel(&self, id: u64) -> Result<(), SlurmError> {
        let p = self.parser().await?;
        self.jobs_changed().await;
        match self
            .send(p, Method::DELETE, &format!("job/{id}"), None)
            .await
        {
            Ok(_) => Ok(()),
            Err(SlurmError::Api { errors, .. })
                if errors.iter().any(|e| {
                    matches!(
                        e.error_number,
                        Some(errno::ALREADY_DONE | errno::INVALID_JOB_ID)
                    )
                }) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Creates reservation R (data parser v0.0.43 on; Slurm 24.11 cannot).
    pub async fn create_reservation(&self, r: &ReservationRequest) -> Result<(), SlurmError> {
        let p = self.parser().await?;
        if !p.creates_reservations() {
            return Err(SlurmError::Config(format!(
                "creating a reservation needs slurmrestd data parser v0.0.43 or later (Slurm 25.05+); slurmrestd at {} speaks {}",
                self.base,
                p.as_str()
            )));
        }
        self.send(p, Method::POST, "reservation", Some(r.body()))
            .await?;
        Ok(())
    }

    /// Deletes reservation NAME (gone already is no error).
    pub async fn delete_reservation(&self, name: &str) -> Result<(), SlurmError> {
        let p = self.parser().await?;
        let path = format!("reservation/{}", segment(name)?);
        match self.send(p, Method::DELETE, &path, None).await {
            Ok(_) => Ok(()),
            Err(_) if self.reservations().await?.iter().all(|r| r.name != name) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub async fn reservations(&self) -> Result<Vec<Reservation>, SlurmError> {
        let w: ReservationsWire = self.get("reservations/").await?;
        w.reservations
            .into_iter()
            .map(|r| {
                Reservation::try_from(r)
                    .map_err(|e| self.parse_error("reservations/", e.to_string()))
            })
            .collect()
    }
}
