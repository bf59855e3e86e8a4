//! A GitOps bed for controller tests: a repository the bed's git server serves, the daemon's
//! installed rights, the JWT key Secret, `slurmops run` against the bed's Slurm, and what tests
//! wait for (idle workers, running jobs, drains by slurmops).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams, PostParams};
use slurmops::slurm::SlurmNodes;

use super::daemon::{Daemon, Repo, applied, as_installed};
use super::slurm::{job_state, sh};
use super::{TestEnv, bed, eventually, slurm_instance};

/// The bed's JWT key as the cluster's `spec.auth.jwtKey` Secret, as a platform team creates it.
pub async fn jwt_secret(env: &TestEnv) {
    let root = std::process::Command::new("bash")
        .args(["tests/bed/slurm-chroot.sh", super::slurm_release()])
        .output()
        .unwrap();
    let root = String::from_utf8(root.stdout).unwrap();
    let key = std::fs::read(
        Path::new(root.trim()).join(format!("etc/slurm-{}/jwt_hs256.key", slurm_instance())),
    )
    .unwrap();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("slurm-jwt".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "jwt_hs256.key".to_string(),
            ByteString(key),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// A test with a repository, the daemon's installed rights and the JWT key Secret.
pub struct Bed {
    pub env: TestEnv,
    pub repo: Repo,
    pub url: String,
    pub dir: tempfile::TempDir,
    pub kubeconfig: std::path::PathBuf,
}

impl Bed {
    pub async fn new(test: &str) -> Bed {
        Bed::with(TestEnv::new(test).await).await
    }

    pub async fn with(env: TestEnv) -> Bed {
        let name = env.name("repo");
        let repo = Repo::new(&name);
        let url = format!("{}/{name}.git", bed().git.http_url);
        let dir = tempfile::tempdir().unwrap();
        let (_, kubeconfig) = as_installed(&env, &url, dir.path()).await;
        jwt_secret(&env).await;
        Bed {
            env,
            repo,
            url,
            dir,
            kubeconfig,
        }
    }

    /// `slurmops run` as installed, with the bed's slurmrestd URL.
    pub fn daemon(&self, identity: &str) -> Daemon {
        self.daemon_polling(identity, "2s")
    }

    /// As `daemon`, polling git every INTERVAL.
    pub fn daemon_polling(&self, identity: &str, interval: &str) -> Daemon {
        Daemon::start_as(
            &self.env,
            self.dir.path(),
            &self.url,
            identity,
            &[
                "--interval",
                interval,
                "--slurmrestd-url",
                &bed().slurmrestd_url,
            ],
            &self.kubeconfig,
        )
    }

    /// Pushes TEXT, starts the daemon IDENTITY and waits until the commit is applied and every
    /// worker of SETS is idle in Slurm.
    pub async fn deployed(&self, text: &str, identity: &str, sets: &[(&str, u32)]) -> Daemon {
        let c1 = self.repo.push(text, "first");
        let daemon = self.daemon(identity);
        applied(&self.env, &c1, Duration::from_secs(60)).await;
        self.idle(sets).await;
        daemon
    }

    /// name → (uid, Ready) of the NodeSet's pods that are not being deleted.
    pub async fn pods(&self, set: &str) -> BTreeMap<String, (String, bool)> {
        let lp = ListParams::default().labels(&format!("slurmops.dev/nodeset={set}"));
        Api::<Pod>::namespaced(self.env.client.clone(), &self.env.ns)
            .list(&lp)
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| {
                let ready = slurmops::rollout::pod_ready(&p);
                (
                    p.metadata.name.unwrap_or_default(),
                    (p.metadata.uid.unwrap_or_default(), ready),
                )
            })
            .collect()
    }

    /// Waits until every worker of SETS is registered and idle in Slurm.
    pub async fn idle(&self, sets: &[(&str, u32)]) {
        let s = super::slurm::client();
        for (set, n) in sets {
            for i in 0..*n {
                let node = format!("{set}-{i}");
                eventually(
                    &format!("{node} idle"),
                    Duration::from_secs(60),
                    async || {
                        let x = s.get(&node).await.ok()?;
                        (x.state.has("IDLE") && !x.state.has("NOT_RESPONDING")).then_some(())
                    },
                )
                .await;
            }
        }
    }

    /// Waits until none of the workers of SETS is drained by slurmops.
    pub async fn none_drained_by_us(&self, sets: &[(&str, u32)], within: Duration) {
        let s = super::slurm::client();
        eventually("no worker drained by slurmops", within, async || {
            for (set, n) in sets {
                for i in 0..*n {
                    let x = s.get(&format!("{set}-{i}")).await.ok()?;
                    if x.state.has("DRAIN") && x.reason.starts_with("slurmops:") {
                        return None;
                    }
                }
            }
            Some(())
        })
        .await;
    }
}

pub async fn running(job: u64) {
    eventually(
        &format!("job {job} running"),
        Duration::from_secs(30),
        async || {
            job_state(job)
                .await
                .iter()
                .any(|s| s == "RUNNING")
                .then_some(())
        },
    )
    .await;
}

pub async fn drained_by_us(node: &str, within: Duration) {
    let s = super::slurm::client();
    eventually(&format!("{node} draining"), within, async || {
        let x = s.get(node).await.ok()?;
        (x.state.has("DRAIN") && x.reason == "slurmops: rollout").then_some(())
    })
    .await;
}

pub fn scancel(job: u64) {
    sh(&["exec", slurm_instance(), "scancel", &job.to_string()]);
}
