//! The daemon's Prometheus metrics, kept and encoded by the Prometheus project's
//! `prometheus-client` (OpenMetrics text, label escaping, histograms): reconcile results and
//! durations, git fetch time, drift, webhooks, leadership, and the rollout — workers per NodeSet
//! and state, workers waiting on jobs, and the steps taken.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::controller::decide::Progress;
use crate::rollout::Event;
use crate::status::verdict::Verdict;

type Labels = Vec<(&'static str, String)>;

use super::label_escape::escape;

/// Counters and gauges for `/metrics`.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    reconcile_seconds: Histogram,
    fetch_seconds: Gauge<f64, AtomicU64>,
    last_applied: Gauge,
    drifted: Gauge,
    webhooks: Family<Labels, Counter>,
    leader: Gauge,
    result: Family<Labels, Gauge>,
    slurm_unreachable: Gauge,
    rollout_steps: Family<Labels, Counter>,
    rollout_workers: Family<Labels, Gauge>,
    waiting_on_jobs: Gauge,
    canary_halted: Family<Labels, Gauge>,
    check_result: Family<Labels, Gauge>,
    check_value: Family<Labels, Gauge<f64, AtomicU64>>,
    passes: Counter,
    phase_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    pass_slurm_requests: Histogram,
    pass_slurm_bytes: Histogram,
    kube_requests: Family<Labels, Counter>,
    /// Slurm's nodes, partitions and queue as the last pass read them.
    slurm: super::slurm_metrics::SlurmGauges,
    /// The request counts last added to `kube_requests`.
    kube_told: std::sync::Mutex<crate::k8s::Requests>,
    /// The first pass finished (`/readyz`).
    pub ready: bool,
    /// A standby: its last leader election was answered and another replica leads (`/readyz`).
    pub standby: bool,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::for_cluster(None)
    }
}

impl Metrics {
    /// The metrics of the daemon for CLUSTER (`--cluster`): every series carries `cluster`, so
    /// that the daemons of one namespace stay apart in Prometheus.
    pub fn for_cluster(cluster: Option<&str>) -> Metrics {
        let registry = match cluster {
            Some(c) => Registry::with_labels(
                [(
                    std::borrow::Cow::Borrowed("cluster"),
                    std::borrow::Cow::Owned(escape(c)),
                )]
                .into_iter(),
            ),
            None => Registry::default(),
        };
        let mut m = Metrics {
            registry,
            reconciles: Family::default(),
            reconcile_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            fetch_seconds: Gauge::default(),
            last_applied: Gauge::default(),
            drifted: Gauge::default(),
            webhooks: Family::default(),
            leader: Gauge::default(),
            result: Family::default(),
            slurm_unreachable: Gauge::default(),
            rollout_steps: Family::default(),
            rollout_workers: Family::default(),
            waiting_on_jobs: Gauge::default(),
            canary_halted: Family::default(),
            check_result: Family::default(),
            check_value: Family::default(),
            passes: Counter::default(),
            phase_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 16))
            }),
            pass_slurm_requests: Histogram::new(exponential_buckets(1.0, 2.0, 12)),
            pass_slurm_bytes: Histogram::new(exponential_buckets(256.0, 4.0, 12)),
            kube_requests: Family::default(),
            slurm: Default::default(),
            kube_told: Default::default(),
            ready: false,
            standby: false,
        };
        let r = &mut m.registry;
        r.register(
            "slurmops_reconcile",
            "Reconcile attempts by result (applied, invalid, refused, failed)",
            m.reconciles.clone(),
        );
        r.register(
            "slurmops_reconcile_duration_seconds",
            "Time of the reconciles that applied or failed",
            m.reconcile_seconds.clone(),
        );
        r.register(
            "slurmops_git_fetch_duration_seconds",
            "Time of the last git fetch",
            m.fetch_seconds.clone(),
        );
        r.register(
            "slurmops_last_applied_timestamp_seconds",
            "When a commit was last applied (UNIX seconds)",
            m.last_applied.clone(),
        );
        r.register(
            "slurmops_drifted_objects",
            "Objects edited by hand and left so (detect-only)",
            m.drifted.clone(),
        );
        r.register(
            "slurmops_webhooks",
            "Webhook requests by outcome (accepted, rejected, busy, replayed)",
            m.webhooks.clone(),
        );
        r.register(
            "slurmops_leader",
            "1 while this replica holds the lease",
            m.leader.clone(),
        );
        r.register(
            "slurmops_result",
            "The last attempt's result as the status says it: 1 for the current one (applied, invalid, refused, failed, fetch-failed, suspended, canary-failed), 0 for the others",
            m.result.clone(),
        );
        r.register(
            "slurmops_slurm_unreachable",
            "1 while slurmrestd does not answer and the rollout is paused (nothing deleted), 0 once it answers",
            m.slurm_unreachable.clone(),
        );
        r.register(
            "slurmops_rollout_steps",
            "Steps the passes took, by kind: the rollout's (drain, delete, resume, ready, slurm_unreachable, canary_*, check_*, ...), worker sync's (sync_drain, sync_resume, sync_recheck, sync_replace, sync_remediate, sync_condition, sync_busy_label) and autoscale's (autoscale)",
            m.rollout_steps.clone(),
        );
        r.register(
            "slurmops_check_result",
            "Each active check's last result on each worker: 1 passed, 0 failed",
            m.check_result.clone(),
        );
        r.register(
            "slurmops_check_value",
            "The figure each active check last printed on each worker (its unit is the check's)",
            m.check_value.clone(),
        );
        r.register(
            "slurmops_rollout_workers",
            "Workers per NodeSet and state (updated, in_flight, waiting, leaving) at the last pass",
            m.rollout_workers.clone(),
        );
        r.register(
            "slurmops_passes",
            "Loop iterations finished (flat while the loop is stuck; git fetches run beside them)",
            m.passes.clone(),
        );
        r.register(
            "slurmops_pass_phase_seconds",
            "Wall time of each phase of a controller pass (observe_kubernetes, observe_slurm, decide, apply, act) and of the status write after it (status)",
            m.phase_seconds.clone(),
        );
        r.register(
            "slurmops_pass_slurmrestd_requests",
            "Requests a controller pass sent to slurmrestd",
            m.pass_slurm_requests.clone(),
        );
        r.register(
            "slurmops_pass_slurmrestd_bytes",
            "Answer bytes a controller pass read from slurmrestd",
            m.pass_slurm_bytes.clone(),
        );
        r.register(
            "slurmops_kube_requests",
            "Kubernetes API requests sent, by kind: list (a whole collection), read (one object, or a watch starting), write",
            m.kube_requests.clone(),
        );
        r.register(
            "slurmops_waiting_on_jobs",
            "Workers waiting for running jobs to end before they can be replaced or removed",
            m.waiting_on_jobs.clone(),
        );
        r.register(
            "slurmops_canary_halted",
            "1 for a NodeSet whose rollout a failed canary halted (its canaries stay drained)",
            m.canary_halted.clone(),
        );
        r.register_collector(Box::new(m.slurm.clone()));
        m
    }
}

impl Metrics {
    /// Counts a finished loop iteration, with the Kubernetes API requests sent so far (SENT:
    /// every request of this process, watches' reconnections included).
    pub fn passed(&self, sent: crate::k8s::Requests) {
        self.passes.inc();
        let mut told = self.kube_told.lock().unwrap_or_else(|e| e.into_inner());
        let new = sent - *told;
        for (kind, n) in [
            ("list", new.lists),
            ("read", new.reads - new.lists),
            ("write", new.writes),
        ] {
            self.kube_requests
                .get_or_create(&vec![("kind", kind.to_string())])
                .inc_by(n as u64);
        }
        *told = sent;
    }

    /// Counts a reconcile with RESULT that took SECONDS.
    pub fn reconciled(&self, result: Verdict, seconds: f64) {
        self.reconciles
            .get_or_create(&vec![("result", escape(result.as_str()))])
            .inc();
        if result.timed() {
            self.reconcile_seconds.observe(seconds);
        }
    }

    /// Records a controller pass: the time of each phase, and what it cost slurmrestd.
    pub fn pass_cost(&self, phases: &crate::controller::Phases, slurm: crate::slurm::Traffic) {
        for (phase, d) in phases.labelled() {
            self.phase(phase, d);
        }
        self.pass_slurm_requests.observe(slurm.requests as f64);
        self.pass_slurm_bytes.observe(slurm.bytes as f64);
    }

    /// Records PHASE of a pass that took D.
    pub fn phase(&self, phase: &str, d: std::time::Duration) {
        self.phase_seconds
            .get_or_create(&vec![("phase", escape(phase))])
            .observe(d.as_secs_f64());
    }

    pub fn fetched(&self, seconds: f64) {
        self.fetch_seconds.set(seconds);
    }

    pub fn applied(&self, drifted: usize) {
        self.drifted.set(drifted as i64);
        self.last_applied
            .set(k8s_openapi::jiff::Timestamp::now().as_second());
    }

    /// Counts a webhook request by OUTCOME: accepted, rejected (no or a bad signature), busy
    /// (turned away before its body was read), replayed (a signed delivery taken before).
    pub fn webhook(&self, outcome: &str) {
        self.webhooks
            .get_or_create(&vec![("outcome", outcome.to_string())])
            .inc();
    }

    /// Sets the result gauges from the status's RESULT: 1 for it, 0 for every other (all 0
    /// before the first attempt).
    pub fn result(&self, result: Verdict) {
        for v in Verdict::ALL {
            if v != Verdict::None {
                self.result
                    .get_or_create(&vec![("result", v.as_str().to_string())])
                    .set(i64::from(v == result));
            }
        }
    }

    pub fn leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts a rollout step.
    pub fn rollout(&self, e: &Event) {
        let step = match e {
            Event::Drain { .. } => "drain",
            Event::Delete { .. } => "delete",
            Event::Resume { .. } => "resume",
            Event::Block { .. } => "block",
            Event::Create { .. } => "create",
            Event::Ready { .. } => "ready",
            Event::SlurmUnreachable { .. } => "slurm_unreachable",
            Event::SlurmBack => "slurm_back",
            Event::CanarySubmitted { .. } => "canary_submit",
            Event::CanaryCancelled { .. } => "canary_cancel",
            Event::CanaryHeld { .. } => "canary_hold",
            Event::Requeued { .. } => "requeue",
            Event::CanaryVerdict { passed: true, .. } => "canary_passed",
            Event::CanaryVerdict { passed: false, .. } => "canary_failed",
            Event::Reserved { .. } => "reserve",
            Event::Unreserved { .. } => "unreserve",
            Event::CheckSubmitted { .. } => "check_submit",
            Event::CheckCancelled { .. } => "check_cancel",
            Event::CheckDeferred { .. } => "check_deferred",
            Event::Checked { passed: true, .. } => "check_passed",
            Event::Checked { passed: false, .. } => "check_failed",
            Event::Condition { .. } => "sync_condition",
            Event::Busy { .. } => "sync_busy_label",
            Event::DrainedFor { .. } => "sync_drain",
            Event::ResumedFor { .. } => "sync_resume",
            Event::Rechecked { .. } => "sync_recheck",
            Event::Unregistered { .. } => "sync_replace",
            Event::Remediated { .. } => "sync_remediate",
            Event::ControllerReplaced { .. } => "controller_replace",
            Event::Scaled { .. } => "autoscale",
            Event::WindowIgnored { .. } => "window_ignored",
        };
        match e {
            Event::SlurmUnreachable { .. } => {
                self.slurm_unreachable.set(1);
            }
            Event::SlurmBack => {
                self.slurm_unreachable.set(0);
            }
            _ => {}
        }
        self.rollout_steps
            .get_or_create(&vec![("step", step.to_string())])
            .inc();
    }

    /// Sets the check gauges from the workers' marks as the last pass saw them (workers gone
    /// are dropped).
    pub fn checks(
        &self,
        sets: &std::collections::BTreeMap<String, crate::controller::decide::SetView>,
    ) {
        self.check_result.clear();
        self.check_value.clear();
        for w in sets.values().flat_map(|s| &s.workers) {
            for (check, m) in &w.checks {
                let labels = vec![("check", check.clone()), ("node", w.name.clone())];
                self.check_result
                    .get_or_create(&labels)
                    .set(i64::from(m.passed));
                if let Some(v) = m.value {
                    self.check_value.get_or_create(&labels).set(v);
                }
            }
        }
    }

    /// Sets the rollout gauges from the last pass (NodeSets that left are dropped).
    pub fn progress(&self, p: &[Progress]) {
        self.rollout_workers.clear();
        self.canary_halted.clear();
        let mut waiting = 0;
        for s in p {
            if let Some(c) = &s.canary {
                self.canary_halted
                    .get_or_create(&vec![("node_set", escape(&s.node_set))])
                    .set(i64::from(
                        c.stage == crate::controller::features::canary::CanaryStage::Failed,
                    ));
            }
            for (state, n) in [
                ("updated", s.updated as usize),
                ("in_flight", s.in_flight.len()),
                ("waiting", s.waiting.len()),
                ("leaving", s.leaving.len()),
            ] {
                self.rollout_workers
                    .get_or_create(&vec![
                        ("node_set", escape(&s.node_set)),
                        ("state", state.to_string()),
                    ])
                    .set(n as i64);
            }
            waiting += s.waiting.len();
        }
        self.waiting_on_jobs.set(waiting as i64);
    }

    /// Sets the Slurm families from a pass: VIEW, what it read of Slurm (None: no node); SLURM:
    /// the daemon talks to Slurm (not `--no-slurm`).
    pub fn slurm(&self, view: Option<&crate::controller::decide::SlurmView>, slurm: bool) {
        self.slurm_counted(super::slurm_metrics::observed(view, slurm));
    }

    /// As [`Metrics::slurm`], with the figures counted already (`slurm_metrics::observed`):
    /// the daemon counts them before it takes the metrics' lock, which a scrape waits for.
    pub fn slurm_counted(&self, figures: super::slurm_metrics::Observed) {
        self.slurm.set(figures.counts, figures.queue_unknown);
    }

    /// Whether a slurmctld has control (None: not known).
    pub fn slurmctld(&self, in_control: Option<bool>) {
        self.slurm.set_in_control(in_control);
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Metrics after one call of each of the daemon's recording methods: every family has a
/// sample (the reference page and the dashboard's test read them).
pub fn sampled() -> Metrics {
    let m = Metrics::default();
    m.passed(crate::k8s::Requests::default());
    m.reconciled(Verdict::Applied, 0.1);
    m.pass_cost(
        &crate::controller::Phases::default(),
        crate::slurm::Traffic::default(),
    );
    m.fetched(0.1);
    m.applied(0);
    m.webhook("accepted");
    m.leader(true);
    m.result(Verdict::Applied);
    m.rollout(&Event::SlurmBack);
    m.progress(&[Progress {
        node_set: "gpu".into(),
        canary: Some(Default::default()),
        ..Progress::default()
    }]);
    let marks = [(
        "nccl".to_string(),
        crate::controller::features::checks::Mark {
            passed: true,
            at: 0,
            job: Some(1),
            value: Some(400.0),
            text: "passed".into(),
        },
    )];
    let worker = crate::controller::decide::Worker {
        name: "gpu-0".into(),
        uid: String::new(),
        ordinal: Some(0),
        revision: String::new(),
        ready: true,
        deleting: false,
        created: None,
        host: None,
        checks: marks.into_iter().collect(),
    };
    let set = crate::controller::decide::SetView {
        name: "gpu".into(),
        replicas: 1,
        update_revision: None,
        workers: vec![worker],
        managed: false,
        canary: None,
        current_revision: None,
    };
    m.checks(&std::collections::BTreeMap::from([(
        "gpu".to_string(),
        set,
    )]));
    let mut slurm = crate::controller::decide::SlurmView::new(
        vec![crate::slurm::Node {
            name: "gpu-0".into(),
            partitions: vec!["gpu".into()],
            ..Default::default()
        }],
        vec![],
    );
    slurm.jobs_read = true;
    m.slurm(Some(&slurm), true);
    m.slurmctld(Some(true));
    m
}

/// Every metric of `/metrics` as a Markdown table (docs/reference/metrics.md): name, type, the
/// labels it carries and its help, read from what the daemon's own recording methods expose after
/// one call of each, so the page follows the code.
pub fn markdown() -> String {
    let m = sampled();
    let text = m.render();
    // (name, type, help, labels)
    let mut rows: Vec<(String, String, String, std::collections::BTreeSet<String>)> = Vec::new();
    let mut help = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').map_or("", |(_, h)| h).to_string();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            // A counter's samples are NAME_total.
            let name = match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_string(),
            };
            let help = std::mem::take(&mut help);
            rows.push((name, kind.into(), help, Default::default()));
        } else if !line.starts_with('#')
            && let (Some(row), Some((_, labels))) = (rows.last_mut(), line.split_once('{'))
        {
            for pair in labels.split("\",") {
                if let Some((k, _)) = pair.split_once('=')
                    && k != "le"
                {
                    row.3.insert(k.trim_start_matches(',').to_string());
                }
            }
        }
    }
    let mut out = String::from("| metric | type | labels | meaning |\n|---|---|---|---|\n");
    for (name, kind, help, labels) in rows {
        let labels: Vec<String> = labels.iter().map(|l| format!("`{l}`")).collect();
        out.push_str(&format!(
            "| `{name}` | {kind} | {} | {} |\n",
            labels.join(", "),
            crate::text::table_cell(&help)
        ));
    }
    out
}

#[cfg(test)]
mod tests;
