//! The edge to the Kubernetes API: a kube client that counts every request it sends (so "a no-op
//! apply writes nothing" is measured, not assumed), discovery of what the server serves, and
//! typed-by-table access to the kinds slurmops renders.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;

/// The Kubernetes API cannot be reached or understood: what was tried, and why it failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConnectError(pub String);

/// Deadline of one Kubernetes API request (connect has kube's own 30 s).
pub const API_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Requests sent, counted (a long-running daemon keeps counters, not a list that grows).
#[derive(Debug, Default)]
pub struct RequestLog(Mutex<Requests>);

/// Requests by kind of effect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Requests {
    pub total: usize,
    pub reads: usize,
    /// Reads of a whole collection (LIST, not a watch): what a pass from watch caches avoids.
    pub lists: usize,
    /// LISTs of every pod or every Node in one answer (no `limit`): a read the size of the
    /// cluster, which a daemon pass never sends (its watches list in pages, once).
    pub fleet_lists: usize,
    /// PATCH/POST/PUT/DELETE that may change stored state (dry runs excluded).
    pub writes: usize,
    pub dry_runs: usize,
}

impl std::ops::Sub for Requests {
    type Output = Requests;
    fn sub(self, before: Requests) -> Requests {
        Requests {
            total: self.total.saturating_sub(before.total),
            reads: self.reads.saturating_sub(before.reads),
            lists: self.lists.saturating_sub(before.lists),
            fleet_lists: self.fleet_lists.saturating_sub(before.fleet_lists),
            writes: self.writes.saturating_sub(before.writes),
            dry_runs: self.dry_runs.saturating_sub(before.dry_runs),
        }
    }
}

impl RequestLog {
    fn record(&self, method: &http::Method, uri: &http::Uri) {
        let dry_run = uri.query().is_some_and(|q| q.contains("dryRun=All"));
        let mut r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        r.total += 1;
        if method == http::Method::GET {
            r.reads += 1;
            if is_list(uri) {
                r.lists += 1;
                if is_fleet_list(uri) {
                    r.fleet_lists += 1;
                }
            }
        } else if dry_run {
            r.dry_runs += 1;
        } else {
            r.writes += 1;
        }
    }

    pub fn summary(&self) -> Requests {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether a GET of URI reads a whole collection (`/api/v1/namespaces/NS/pods`,
/// `/apis/apps/v1/statefulsets`, `/api/v1/nodes`), not one object and not a watch.
fn is_list(uri: &http::Uri) -> bool {
    if uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
    {
        return false;
    }
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return false,
    };
    match rest {
        ["namespaces", _ns, kind] => !kind.is_empty(),
        [_kind] => true,
        _ => false,
    }
}

/// Whether the collection read URI (see `is_list`) is of pods or Nodes and unpaged.
fn is_fleet_list(uri: &http::Uri) -> bool {
    let paged = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p.starts_with("limit=")));
    !paged && (uri.path().ends_with("/pods") || uri.path().ends_with("/nodes"))
}

/// tower layer recording each request in a [`RequestLog`].
#[derive(Clone)]
pub struct Counting(pub Arc<RequestLog>);

impl<S> tower::Layer<S> for Counting {
    type Service = CountingService<S>;
    fn layer(&self, inner: S) -> CountingService<S> {
        CountingService {
            inner,
            log: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct CountingService<S> {
    inner: S,
    log: Arc<RequestLog>,
}

impl<S, B> tower::Service<http::Request<B>> for CountingService<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        self.log.record(req.method(), req.uri());
        self.inner.call(req)
    }
}

/// A connection to one cluster, with what discovery found.
pub struct Connection {
    pub client: kube::Client,
    pub log: Arc<RequestLog>,
    /// `policy/v1` where served, else `policy/v1beta1` (Kubernetes < 1.21).
    pub pdb_api_version: String,
    /// `batch/v1` where it serves CronJobs (Kubernetes >= 1.21), else `batch/v1beta1` (1.20).
    pub cron_job_api_version: String,
    /// fieldValidation=Strict is honoured (Kubernetes >= 1.25).
    pub strict_validation: bool,
    pub server_version: String,
    /// Dynamic Resource Allocation (`resource.k8s.io`) is served: pods may carry resourceClaims.
    pub dra: bool,
    /// The Prometheus Operator's `monitoring.coreos.com/v1` (ServiceMonitor) is served.
    pub service_monitors: bool,
}

impl Connection {
    /// Connects with a kubeconfig (KUBECONFIG / ~/.kube/config when None, or in-cluster).
    pub async fn connect(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Connection, ConnectError> {
        let opts = KubeConfigOptions {
            context: context.map(str::to_string),
            ..KubeConfigOptions::default()
        };
        let config = match kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path).map_err(|e| {
                    ConnectError(format!("cannot read kubeconfig {}: {e}", path.display()))
                })?;
                kube::Config::from_custom_kubeconfig(kc, &opts)
                    .await
                    .map_err(|e| e.to_string())
            }
            None if context.is_some() => kube::Config::from_kubeconfig(&opts)
                .await
                .map_err(|e| e.to_string()),
            None => kube::Config::infer().await.map_err(|e| e.to_string()),
        }
        .map_err(|e| ConnectError(format!("kubeconfig: {e}")))?;
        // Every request has a deadline: a Kubernetes API server that accepts and never answers
        // fails the call (and the pass) instead of hanging it. Watches end server-side before it
        // (`controller::watch`).
        let mut config = config;
        config.read_timeout = Some(API_TIMEOUT);
        config.write_timeout = Some(API_TIMEOUT);
        config.reset_reader_on_write = true;
        // No retry beneath slurmops' own: kube's default retries 429/503/504 fifteen times with a
        // backoff up to 1,000 s, which holds a pass (or `apply`) for minutes on an overloaded API.
        // Writes are retried a bounded number of times by apply; a pass that fails is the next
        // pass's to redo.
        config.default_retry = false;
        let log = Arc::new(RequestLog::default());
        let client = kube::client::ClientBuilder::try_from(config)
            .map_err(|e| ConnectError(format!("kube client: {e}")))?
            .with_layer(&Counting(log.clone()))
            .build();
        let version = client
            .apiserver_version()
            .await
            .map_err(|e| ConnectError(format!("cannot reach the Kubernetes API: {e}")))?;
        let minor: u32 = version
            .minor
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(0);
        let groups = client
            .list_api_groups()
            .await
            .map_err(|e| ConnectError(format!("API discovery failed: {e}")))?;
        let policy_v1 = groups.groups.iter().any(|g| {
            g.name == "policy" && g.versions.iter().any(|v| v.group_version == "policy/v1")
        });
        // batch/v1 is served on every release (Jobs), CronJobs at it from 1.21; batch/v1beta1's
        // CronJobs are gone from 1.25.
        let batch_v1beta1 = groups.groups.iter().any(|g| {
            g.name == "batch"
                && g.versions
                    .iter()
                    .any(|v| v.group_version == "batch/v1beta1")
        });
        let cron_job_api_version = cron_job_api_version(&version.major, minor, batch_v1beta1);
        let dra = groups.groups.iter().any(|g| g.name == "resource.k8s.io");
        let service_monitors = groups.groups.iter().any(|g| {
            g.name == "monitoring.coreos.com"
                && g.versions
                    .iter()
                    .any(|v| v.group_version == "monitoring.coreos.com/v1")
        });
        Ok(Connection {
            dra,
            service_monitors,
            client,
            log,
            pdb_api_version: if policy_v1 {
                "policy/v1"
            } else {
                "policy/v1beta1"
            }
            .into(),
            cron_job_api_version,
            strict_validation: version.major == "1" && minor >= 25,
            server_version: version.git_version,
        })
    }

    /// The API for KIND (one slurmops renders) at API_VERSION in NAMESPACE.
    pub fn api(&self, api_version: &str, kind: &str, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &resource(api_version, kind))
    }

    pub async fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<DynamicObject>, kube::Error> {
        let lp = ListParams::default().labels(selector);
        Ok(self
            .api(api_version, kind, namespace)
            .list(&lp)
            .await?
            .items)
    }

    pub async fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DynamicObject>, kube::Error> {
        self.api(api_version, kind, namespace).get_opt(name).await
    }

    /// Server-side apply of BODY under MANAGER.
    pub async fn apply(
        &self,
        body: &serde_json::Value,
        manager: &str,
        force: bool,
        dry_run: bool,
    ) -> Result<DynamicObject, kube::Error> {
        let (api_version, kind, ns, name) = ident(body);
        let mut pp = PatchParams::apply(manager);
        pp.force = force;
        pp.dry_run = dry_run;
        if self.strict_validation {
            pp.field_validation = Some(kube::api::ValidationDirective::Strict);
        }
        self.api(&api_version, &kind, &ns)
            .patch(&name, &pp, &Patch::Apply(body))
            .await
    }

    /// Removes the (map, key) entries KEYS from the object named by BODY (a JSON merge patch:
    /// keys another manager owns, which server-side apply leaves in place).
    pub async fn remove_keys(
        &self,
        body: &serde_json::Value,
        manager: &str,
        keys: &[(String, String)],
    ) -> Result<DynamicObject, kube::Error> {
        let (api_version, kind, ns, name) = ident(body);
        let mut patch = serde_json::Map::new();
        for (map, key) in keys {
            let entry = patch
                .entry(map.clone())
                .or_insert_with(|| serde_json::json!({}));
            entry[key] = serde_json::Value::Null;
        }
        let pp = PatchParams {
            field_manager: Some(manager.into()),
            ..PatchParams::default()
        };
        self.api(&api_version, &kind, &ns)
            .patch(&name, &pp, &Patch::Merge(serde_json::Value::Object(patch)))
            .await
    }

    /// A JSON merge patch of the object NAME under MANAGER.
    pub async fn merge_patch(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        manager: &str,
        patch: &serde_json::Value,
    ) -> Result<DynamicObject, kube::Error> {
        let pp = PatchParams {
            field_manager: Some(manager.into()),
            ..PatchParams::default()
        };
        self.api(api_version, kind, namespace)
            .patch(name, &pp, &Patch::Merge(patch))
            .await
    }

    pub async fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        dp: &DeleteParams,
    ) -> Result<(), kube::Error> {
        match self
            .api(api_version, kind, namespace)
            .delete(name, dp)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The apiVersion CronJobs are sent at, on Kubernetes MAJOR.MINOR, which serves
/// `batch/v1beta1` or not (BATCH_V1BETA1): `batch/v1` from 1.21, where CronJob is GA.
pub fn cron_job_api_version(major: &str, minor: u32, batch_v1beta1: bool) -> String {
    match batch_v1beta1 && major == "1" && minor < 21 {
        true => "batch/v1beta1",
        false => "batch/v1",
    }
    .into()
}

/// apiVersion, kind, namespace and name of a JSON object.
pub fn ident(body: &serde_json::Value) -> (String, String, String, String) {
    let s = |p: &str| {
        body.pointer(p)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    (
        s("/apiVersion"),
        s("/kind"),
        s("/metadata/namespace"),
        s("/metadata/name"),
    )
}

/// The API resource of a kind slurmops renders (plural names are fixed, no discovery needed).
pub fn resource(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let plural = match kind {
        "ConfigMap" => "configmaps",
        "Secret" => "secrets",
        "Service" => "services",
        "StatefulSet" => "statefulsets",
        "Deployment" => "deployments",
        "PodDisruptionBudget" => "poddisruptionbudgets",
        "NetworkPolicy" => "networkpolicies",
        "Pod" => "pods",
        "PodTemplate" => "podtemplates",
        "ServiceMonitor" => "servicemonitors",
        "CronJob" => "cronjobs",
        other => return ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, other)),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_list_is_a_collection_read_and_not_a_watch_or_one_object() {
        let list = |u: &str| super::is_list(&u.parse().unwrap());
        assert!(list("/api/v1/namespaces/slurm/pods?labelSelector=a%3Db"));
        assert!(list("/apis/apps/v1/namespaces/slurm/statefulsets"));
        assert!(list("/api/v1/nodes"));
        assert!(!list("/api/v1/nodes?watch=true&resourceVersion=5"));
        let fleet = |p: &str| super::is_fleet_list(&p.parse().unwrap());
        assert!(fleet("/api/v1/namespaces/ns/pods?labelSelector=a%3Db"));
        assert!(fleet("/api/v1/nodes"));
        assert!(!fleet("/api/v1/nodes?limit=100"));
        assert!(!fleet(
            "/api/v1/namespaces/ns/pods?labelSelector=a&limit=100&continue=x"
        ));
        assert!(!fleet("/apis/apps/v1/namespaces/ns/statefulsets"));
        assert!(!list("/api/v1/namespaces/slurm/pods/gpu-0"));
        assert!(!list("/api/v1/nodes/n1"));
        assert!(!list(
            "/apis/coordination.k8s.io/v1/namespaces/slurm/leases/slurmops"
        ));
        assert!(!list("/version"));
    }

    #[test]
    fn cron_jobs_go_at_v1beta1_only_where_v1_does_not_serve_them() {
        let v = super::cron_job_api_version;
        // 1.20 (the bed's): batch/v1 serves Jobs only.
        assert_eq!(v("1", 20, true), "batch/v1beta1");
        // 1.21 to 1.24 serve both; 1.25 and later v1 only.
        assert_eq!(v("1", 21, true), "batch/v1");
        assert_eq!(v("1", 33, false), "batch/v1");
        assert_eq!(v("1", 19, false), "batch/v1");
    }
}
