//! Slurm's state on `/metrics`, on every Slurm release, from what a pass already read: Slurm's
//! nodes (every pass reads them), the job queue (only when a pass needed it, and only when it
//! read every job), and slurmrestd's ping of the controllers (a pass pings only with backups).
//! Nothing here asks Slurm anything.
//!
//! The node and partition families are named as SlinkyProject/slurm-exporter names them
//! (`internal/collector/node.go`, `partition.go`: gauges whose names end in `_total`), so that
//! Slinky's dashboards and alerts read them unchanged; slurmops' own are `slurmops_*`. Every
//! family is bounded by partitions (a few), never by nodes or jobs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::label_escape::escape;
use crate::controller::decide::SlurmView;
use crate::controller::observation::SlurmUnknown;
use crate::slurm::client::Ping;
use crate::slurm::{Job, Node, SlurmError};
use crate::vocab::{DRAINED_BY, drained_by};

/// Slurm's base node states, in Slinky's precedence: a node counts in the first it has. Each
/// with its family's word (`slurm_nodes_WORD_total`).
pub const BASE_STATES: [(&str, &str); 7] = [
    ("ALLOCATED", "allocated"),
    ("DOWN", "down"),
    ("ERROR", "error"),
    ("FUTURE", "future"),
    ("IDLE", "idle"),
    ("MIXED", "mixed"),
    ("UNKNOWN", "unknown"),
];

/// Slurm's node flags Slinky counts: a node counts in each it has.
pub const FLAGS: [(&str, &str); 8] = [
    ("COMPLETING", "completing"),
    ("DRAIN", "drain"),
    ("FAIL", "fail"),
    ("MAINTENANCE", "maintenance"),
    ("NOT_RESPONDING", "notresponding"),
    ("PLANNED", "planned"),
    ("REBOOT_REQUESTED", "rebootrequested"),
    ("RESERVED", "reserved"),
];

/// Nodes by state.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeCounts {
    pub total: u64,
    /// By [`BASE_STATES`].
    pub base: [u64; 7],
    /// By [`FLAGS`].
    pub flags: [u64; 8],
}

impl NodeCounts {
    fn add(&mut self, n: &Node) {
        self.total += 1;
        if let Some(i) = BASE_STATES.iter().position(|(s, _)| n.state.has(s)) {
            self.base[i] += 1;
        }
        for (i, (f, _)) in FLAGS.iter().enumerate() {
            self.flags[i] += u64::from(n.state.has(f));
        }
    }
}

/// One partition's nodes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PartitionNodes {
    pub nodes: NodeCounts,
    pub cpus: u64,
    pub cpus_alloc: u64,
    pub cpus_idle: u64,
    pub gpus: u64,
    pub gpus_alloc: u64,
}

/// One partition's jobs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PartitionJobs {
    pub jobs: u64,
    pub pending: u64,
    pub running: u64,
    /// CPUs of the jobs holding nodes (running, suspended, completing), as Slinky counts them.
    pub cpus_alloc: u64,
    /// CPUs and GPUs of the pending jobs (what they ask for) and of the running ones.
    pub cpus: [u64; 2],
    pub gpus: [u64; 2],
}

/// The `state` label of [`PartitionJobs::cpus`] and `gpus`.
const JOB_STATES: [&str; 2] = ["pending", "running"];

/// Slurm's state as one pass read it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub nodes: NodeCounts,
    /// By the partitions the nodes list.
    pub partitions: BTreeMap<String, PartitionNodes>,
    /// By the same partitions; None: the pass did not read every job.
    pub jobs: Option<BTreeMap<String, PartitionJobs>>,
    /// Drained and draining nodes by who drained them ([`DRAINED_BY`]).
    pub drained: [u64; crate::vocab::DRAINED_BY.len()],
}

/// The counts of NODES and, when the whole queue was read, of JOBS. A job counts in each
/// partition it names (a pending job may name several) that a node lists; jobs of other
/// partitions are not counted (the series stay bounded by Slurm's partitions).
pub fn counts<'a>(nodes: impl IntoIterator<Item = &'a Node>, jobs: Option<&[Arc<Job>]>) -> Counts {
    let mut c = Counts::default();
    for n in nodes {
        c.nodes.add(n);
        if n.state.has("DRAIN") {
            c.drained[drained_by(&n.reason)] += 1;
        }
        for p in &n.partitions {
            let p = c.partitions.entry(p.clone()).or_default();
            p.nodes.add(n);
            p.cpus += u64::from(n.cpus);
            p.cpus_alloc += u64::from(n.alloc_cpus);
            p.cpus_idle += u64::from(n.cpus.saturating_sub(n.alloc_cpus));
            p.gpus += u64::from(n.gpus);
            p.gpus_alloc += u64::from(n.alloc_gpus);
        }
    }
    c.jobs = jobs.map(|jobs| {
        let mut by: BTreeMap<String, PartitionJobs> = c
            .partitions
            .keys()
            .map(|p| (p.clone(), PartitionJobs::default()))
            .collect();
        for j in jobs {
            let state = match (j.has_state("PENDING"), j.has_state("RUNNING")) {
                (true, _) => Some(0),
                (_, true) => Some(1),
                _ => None,
            };
            for p in j.partition.split(',') {
                let Some(p) = by.get_mut(p.trim()) else {
                    continue;
                };
                p.jobs += 1;
                if let Some(s) = state {
                    p.pending += u64::from(s == 0);
                    p.running += u64::from(s == 1);
                    p.cpus[s] += u64::from(j.cpus);
                    p.gpus[s] += u64::from(j.gpus);
                }
                if j.holds_nodes() {
                    p.cpus_alloc += u64::from(j.cpus);
                }
            }
        }
        by
    });
    c
}

/// What a pass observed of Slurm, counted: the node, partition and job figures (None: no
/// nodes read) and whether the queue was needed and unknown (None: Slurm not connected).
pub struct Observed {
    pub counts: Option<Counts>,
    pub queue_unknown: Option<bool>,
}

/// Counts VIEW, the pass's observation of Slurm (SLURM: it is connected).
pub fn observed(view: Option<&SlurmView>, slurm: bool) -> Observed {
    Observed {
        counts: view.map(of_view),
        queue_unknown: slurm.then(|| view.is_some_and(|v| v.jobs_error.is_some())),
    }
}

/// The counts of what a pass read: the jobs only when it read every one.
pub fn of_view(v: &SlurmView) -> Counts {
    let complete = v.jobs_read && v.jobs_error.is_none();
    counts(v.nodes.values(), complete.then(|| v.jobs()))
}

/// Whether a slurmctld has control, from a pass: PINGS (slurmrestd's ping of the controllers,
/// asked only with backups), else whether the pass READ Slurm's nodes, else its ERROR. None: not
/// known (slurmrestd did not answer, or failed otherwise than for slurmctld).
pub fn in_control(
    pings: Option<&Result<Vec<Ping>, SlurmError>>,
    read: bool,
    error: Option<&SlurmUnknown>,
) -> Option<bool> {
    if let Some(Ok(pings)) = pings {
        return Some(crate::status::show::in_control(pings).is_some());
    }
    if read {
        return Some(true);
    }
    let failed = match (pings, error) {
        (Some(Err(e)), _) => Some(e),
        (_, Some(SlurmUnknown::Failed(e))) => Some(&**e),
        _ => None,
    };
    failed.filter(|e| ctld_silent(e)).map(|_| false)
}

/// slurmrestd answered that it could not reach slurmctld (a communication error number).
fn ctld_silent(e: &SlurmError) -> bool {
    use crate::slurm::client::errno::{COMMUNICATIONS, SLURMCTLD_COMMUNICATIONS};
    COMMUNICATIONS
        .chain(SLURMCTLD_COMMUNICATIONS)
        .any(|n| e.has_errno(n))
}

/// What the Slurm families show: the last pass's.
#[derive(Debug, Default)]
struct Shown {
    /// None: no pass read Slurm's nodes (or the last did not).
    counts: Option<Counts>,
    in_control: Option<bool>,
    queue_unknown: Option<bool>,
}

/// The Slurm families, encoded at each scrape from the last pass's [`Counts`]: a family whose
/// figures are not known is left out, not left stale.
#[derive(Debug, Default, Clone)]
pub struct SlurmGauges(Arc<Mutex<Shown>>);

impl SlurmGauges {
    fn shown(&self) -> std::sync::MutexGuard<'_, Shown> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pass's Slurm: its VIEW (None: it read no node), and whether the queue it needed is
    /// not known (None: the daemon has no Slurm, `--no-slurm`).
    pub fn set(&self, counts: Option<Counts>, queue_unknown: Option<bool>) {
        let mut s = self.shown();
        s.counts = counts;
        s.queue_unknown = queue_unknown;
    }

    pub fn set_in_control(&self, v: Option<bool>) {
        self.shown().in_control = v;
    }
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

/// One gauge family: NAME, HELP, its samples (labels, value).
fn family(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: &[(Labels, u64)],
) -> Result<(), std::fmt::Error> {
    let gauge = |v: u64| ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
    let mut f = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    match samples {
        // Unlabelled: `NAME VALUE` (a family's labels, even none, are written in braces).
        [(labels, v)] if labels.is_empty() => gauge(*v).encode(f),
        _ => samples
            .iter()
            .try_for_each(|(labels, v)| gauge(*v).encode(f.encode_family(labels)?)),
    }
}

impl Collector for SlurmGauges {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.shown();
        if let Some(c) = &s.counts {
            encode_counts(&mut e, c)?;
        }
        if let Some(v) = s.in_control {
            family(
                &mut e,
                "slurmops_slurmctld_in_control",
                "1 while a slurmctld has control (with backups: slurmrestd's ping; else: the pass read Slurm's nodes), 0 while slurmrestd answers that none does; absent while not known (slurmrestd does not answer)",
                &[(vec![], u64::from(v))],
            )?;
        }
        if let Some(v) = s.queue_unknown {
            family(
                &mut e,
                "slurmops_slurm_queue_unknown",
                "1 while the last pass needed Slurm's job queue and could not read all of it (the slurm_partition_jobs_* families are then absent), 0 otherwise",
                &[(vec![], u64::from(v))],
            )?;
        }
        Ok(())
    }
}

/// Labels of partition P, and of P and `state` S.
fn part(p: &str) -> Labels<'_> {
    vec![("partition", p)]
}

fn part_state<'a>(p: &'a str, s: &'a str) -> Labels<'a> {
    vec![("partition", p), ("state", s)]
}

fn encode_counts(e: &mut DescriptorEncoder, c: &Counts) -> Result<(), std::fmt::Error> {
    // Partition names are Slurm's configuration: escaped all the same.
    let parts: Vec<(String, &PartitionNodes)> =
        c.partitions.iter().map(|(p, n)| (escape(p), n)).collect();
    family(
        e,
        "slurm_nodes_total",
        "Total number of nodes",
        &[(vec![], c.nodes.total)],
    )?;
    let per_part = |f: &dyn Fn(&PartitionNodes) -> u64| -> Vec<(Labels, u64)> {
        parts.iter().map(|(p, n)| (part(p), f(n))).collect()
    };
    family(
        e,
        "slurm_partition_nodes_total",
        "Total number of slurm nodes in the partition",
        &per_part(&|n| n.nodes.total),
    )?;
    for (i, (_, word)) in BASE_STATES.iter().enumerate() {
        let help = format!("Number of nodes in {word} state (one base state per node)");
        family(
            e,
            &format!("slurm_nodes_{word}_total"),
            &help,
            &[(vec![], c.nodes.base[i])],
        )?;
        let name = format!("slurm_partition_nodes_{word}_total");
        family(e, &name, &help, &per_part(&|n| n.nodes.base[i]))?;
    }
    for (i, (_, word)) in FLAGS.iter().enumerate() {
        let help = format!("Number of nodes with the {word} flag");
        family(
            e,
            &format!("slurm_nodes_{word}_total"),
            &help,
            &[(vec![], c.nodes.flags[i])],
        )?;
        let name = format!("slurm_partition_nodes_{word}_total");
        family(e, &name, &help, &per_part(&|n| n.nodes.flags[i]))?;
    }
    for (word, help, f) in [
        (
            "cpus",
            "CPUs of the partition's nodes",
            (|n| n.cpus) as fn(&PartitionNodes) -> u64,
        ),
        (
            "cpus_alloc",
            "Allocated CPUs of the partition's nodes",
            |n| n.cpus_alloc,
        ),
        (
            "cpus_idle",
            "CPUs of the partition's nodes not allocated",
            |n| n.cpus_idle,
        ),
    ] {
        family(
            e,
            &format!("slurm_partition_nodes_{word}_total"),
            help,
            &per_part(&f),
        )?;
    }
    let gpus: Vec<(Labels, u64)> = parts
        .iter()
        .flat_map(|(p, n)| {
            [
                (part_state(p, "total"), n.gpus),
                (part_state(p, "alloc"), n.gpus_alloc),
            ]
        })
        .collect();
    family(
        e,
        "slurmops_partition_gpus",
        "GPUs of the partition's nodes (their gres), by state: total, alloc (their gres_used)",
        &gpus,
    )?;
    let drained: Vec<(Labels, u64)> = DRAINED_BY
        .iter()
        .zip(c.drained)
        .map(|(by, n)| (vec![("by", *by)], n))
        .collect();
    family(
        e,
        "slurmops_slurm_drained_nodes",
        "Slurm nodes drained or draining, by who drained them: slurmops' reasons (rollout, scale_in, autoscale, removed, node_left, checks_pending, canary_failed, check_failed, requested, cordoned, node_problem, slurmops_other) or admin (a reason not slurmops')",
        &drained,
    )?;
    if let Some(jobs) = &c.jobs {
        encode_jobs(e, jobs)?;
    }
    Ok(())
}

fn encode_jobs(
    e: &mut DescriptorEncoder,
    jobs: &BTreeMap<String, PartitionJobs>,
) -> Result<(), std::fmt::Error> {
    let parts: Vec<(String, &PartitionJobs)> = jobs.iter().map(|(p, j)| (escape(p), j)).collect();
    for (name, help, f) in [
        (
            "slurm_partition_jobs_total",
            "Total number of jobs in the partition (from a pass that read the whole queue)",
            (|j| j.jobs) as fn(&PartitionJobs) -> u64,
        ),
        (
            "slurm_partition_jobs_pending_total",
            "Number of jobs in Pending state in the partition",
            |j| j.pending,
        ),
        (
            "slurm_partition_jobs_running_total",
            "Number of jobs in Running state in the partition",
            |j| j.running,
        ),
        (
            "slurm_partition_jobs_cpus_alloc_total",
            "Number of allocated CPUs among jobs in the partition",
            |j| j.cpus_alloc,
        ),
    ] {
        let samples: Vec<(Labels, u64)> = parts.iter().map(|(p, j)| (part(p), f(j))).collect();
        family(e, name, help, &samples)?;
    }
    for (name, help, f) in [
        (
            "slurmops_partition_job_cpus",
            "CPUs of the partition's jobs by state: pending (asked for), running (allocated)",
            (|j| j.cpus) as fn(&PartitionJobs) -> [u64; 2],
        ),
        (
            "slurmops_partition_job_gpus",
            "GPUs of the partition's jobs by state: pending (asked for), running (allocated)",
            |j| j.gpus,
        ),
    ] {
        let samples: Vec<(Labels, u64)> = parts
            .iter()
            .flat_map(|(p, j)| {
                let v = f(j);
                JOB_STATES
                    .iter()
                    .zip(v)
                    .map(|(s, n)| (part_state(p, s), n))
                    .collect::<Vec<_>>()
            })
            .collect();
        family(e, name, help, &samples)?;
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests;
