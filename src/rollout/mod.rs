//! `rollout`: replacing a NodeSet's workers without killing a job. Workers are OnDelete
//! StatefulSets, so nothing changes until slurmops deletes a pod, and slurmops deletes a pod only
//! once Slurm says its node is drained: DRAIN set and nothing allocated or completing.
//!
//! The steps themselves are the controller's (`controller::decide`): not-Ready workers first, then
//! idle, then soonest-finishing (`select`); at most `maxUnavailable` out; our drains resumed once
//! the new pod is registered; an administrator's drain kept. This module holds the rollout's
//! vocabulary — events, the report — that the controller and its drivers speak
//! (`controller::drive::roll` loops the controller's pass for `slurmops rollout`).

pub mod select;

use k8s_openapi::api::core::v1::Pod;

pub use select::{Candidate, order};

/// A callback for rollout events.
#[derive(Clone, Default)]
pub struct Observer(Option<std::sync::Arc<ObserverFn>>);

type ObserverFn = dyn Fn(&str, &Event) + Send + Sync;

impl Observer {
    pub fn new(f: impl Fn(&str, &Event) + Send + Sync + 'static) -> Observer {
        Observer(Some(std::sync::Arc::new(f)))
    }
    pub fn emit(&self, node_set: &str, e: &Event) {
        if let Some(f) = &self.0 {
            f(node_set, e)
        }
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Observer(..)"
        } else {
            "Observer(none)"
        })
    }
}

/// What happened to one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Drain {
        node: String,
        ours: bool,
    },
    Delete {
        pod: String,
        forced: bool,
    },
    Ready {
        pod: String,
    },
    Resume {
        node: String,
    },
    /// slurmops made a worker's pod (bound to NODE for a perNode NodeSet).
    Create {
        pod: String,
        node: Option<String>,
    },
    /// The worker joined its block or leaf switch (`TOPOLOGY:UNIT`).
    Block {
        node: String,
        topology: String,
    },
    /// A canary's validation job was submitted on NODES.
    CanarySubmitted {
        job: u64,
        nodes: Vec<String>,
    },
    /// A validation job was cancelled (another one failed, or its canaries changed).
    CanaryCancelled {
        job: u64,
    },
    /// A maintenance reservation was made for the workers waiting for a window.
    Reserved {
        name: String,
        nodes: Vec<String>,
        start: i64,
        /// The ConfigMap slurmctld's sidecar makes it from (Slurm 24.11); None: made through
        /// slurmrestd.
        sidecar: Option<String>,
    },
    /// The rollout is done: its maintenance reservation was given back.
    Unreserved {
        name: String,
    },
    /// A canary's verdict was recorded on the workload.
    CanaryVerdict {
        /// The Event reason: CanaryPassed, CanaryFailed, CanaryOverridden.
        reason: &'static str,
        passed: bool,
        message: String,
    },
    /// The jobs on NODE were requeued (id, user) for WHY (`runningJobs: requeue`, or its node's
    /// rule): the node set DOWN, Slurm starts them again elsewhere.
    Requeued {
        node: String,
        jobs: Vec<(u64, String)>,
        why: String,
    },
    /// A canary failed: the worker stays drained with REASON.
    CanaryHeld {
        node: String,
        reason: crate::vocab::DrainReason,
    },
    /// An active check's job was submitted.
    CheckSubmitted {
        job: u64,
        name: String,
    },
    /// An active check's job waits: slurmctld does not know its LICENSE yet.
    CheckDeferred {
        name: String,
        license: String,
    },
    /// An active check's job was cancelled.
    CheckCancelled {
        job: u64,
    },
    /// An active check's result on a worker was kept on its pod.
    Checked {
        node: String,
        check: String,
        passed: bool,
        text: String,
    },
    /// slurmrestd cannot be asked: the rollout pauses, nothing is deleted.
    SlurmUnreachable {
        error: String,
    },
    /// Slurm answers again: the rollout goes on.
    SlurmBack,
    /// Worker sync: the pod's Slurm condition now says what Slurm says.
    Condition {
        pod: String,
    },
    /// Worker sync: the busy label set (jobs run there, evictions blocked) or removed.
    Busy {
        pod: String,
        busy: bool,
    },
    /// Worker sync: drained for a problem of its Kubernetes node or a drain request (REASON).
    DrainedFor {
        node: String,
        reason: String,
    },
    /// Worker sync: the problem or the request cleared, the drain it set resumed.
    ResumedFor {
        node: String,
    },
    /// Worker sync: the problem cleared; held until the NodeSet's active checks pass.
    Rechecked {
        node: String,
    },
    /// Worker sync: Ready but never registered in Slurm within the grace: the pod deleted.
    Unregistered {
        pod: String,
    },
    /// Worker sync: drained for REASON with no job left, on a NodeSet with `remediation:
    /// replace`: the pod deleted.
    Remediated {
        pod: String,
        reason: String,
    },
    /// An operator had the NodeSet's workers drain outside its maintenance windows
    /// (`rollout --ignore-window`), in MESSAGE's words.
    WindowIgnored {
        message: String,
    },
    /// Controllers behind one address: a controller pod deleted for its StatefulSet to make it
    /// again from the new template (the standbys first, the one in control last).
    ControllerReplaced {
        pod: String,
        in_control: bool,
    },
    /// Autoscale: the replicas set FROM -> TO, WHY.
    Scaled {
        from: u32,
        to: u32,
        why: String,
    },
}

impl Event {
    /// Whether it changed something in the cluster or in Slurm (the next pass follows at once):
    /// a check job refused for a license slurmctld does not know yet did not, and waiting for
    /// the reconfigure at once would submit it again and again.
    pub fn changed(&self) -> bool {
        !matches!(
            self,
            Event::CheckDeferred { .. }
                | Event::Condition { .. }
                | Event::Busy { .. }
                | Event::WindowIgnored { .. }
        )
    }

    /// Told per pod on every change of Slurm's state (at 1,000 workers, a thousand on a first
    /// pass): counted, not logged one by one.
    pub fn quiet(&self) -> bool {
        matches!(self, Event::Condition { .. } | Event::Busy { .. })
    }
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Drain { node, ours: true } => write!(f, "draining {node}"),
            Event::Drain { node, ours: false } => {
                write!(f, "{node} already drained by someone else (left to them)")
            }
            Event::Delete { pod, forced: false } => write!(f, "{pod} drained, pod deleted"),
            Event::Delete { pod, forced: true } => {
                write!(
                    f,
                    "{pod} drain timed out, pod deleted anyway (policy force)"
                )
            }
            Event::Ready { pod } => write!(f, "{pod} replaced, Ready and registered"),
            Event::Resume { node } => write!(f, "{node} resumed"),
            Event::Block { node, topology } => write!(f, "{node} placed in {topology}"),
            Event::Create {
                pod,
                node: Some(node),
            } => write!(f, "{pod} created on Kubernetes node {node}"),
            Event::Create { pod, node: None } => write!(f, "{pod} created"),
            Event::SlurmUnreachable { error } => write!(
                f,
                "Slurm unreachable, rollout paused, nothing is deleted until it answers: {error}"
            ),
            Event::SlurmBack => write!(f, "Slurm answers again, rollout continues"),
            Event::CanaryVerdict { message, .. } => write!(f, "{message}"),
            Event::Reserved {
                name,
                nodes,
                start,
                sidecar,
            } => write!(
                f,
                "reservation {name} {} on {} from {} (the maintenance window): no job that would run into it starts there",
                match sidecar {
                    Some(cm) => format!("asked of slurmctld's sidecar (ConfigMap {cm})"),
                    None => "made".to_string(),
                },
                nodes.join(", "),
                k8s_openapi::jiff::Timestamp::from_second(*start)
                    .map(|t| t.to_string())
                    .unwrap_or_else(|_| start.to_string())
            ),
            Event::Unreserved { name } => {
                write!(f, "reservation {name} deleted: the rollout is done")
            }
            Event::CanarySubmitted { job, nodes } => write!(
                f,
                "canary validation job {job} submitted on {}",
                nodes.join(", ")
            ),
            Event::CanaryCancelled { job } => write!(f, "canary validation job {job} cancelled"),
            Event::CheckSubmitted { job, name } => write!(f, "check job {job} submitted ({name})"),
            Event::CheckDeferred { name, license } => write!(
                f,
                "check job {name} waits: slurmctld does not know license {license} yet (slurm.conf declares it; it arrives with the next reconfigure)"
            ),
            Event::CheckCancelled { job } => write!(f, "check job {job} cancelled"),
            Event::Checked {
                node,
                check,
                passed,
                text,
            } => match passed {
                true => write!(f, "{node}: check {check} passed ({text})"),
                false => write!(f, "{node}: check {check} failed ({text})"),
            },
            Event::Requeued { node, jobs, why } => {
                let jobs: Vec<String> = jobs.iter().map(|(id, u)| format!("{id} ({u})")).collect();
                write!(
                    f,
                    "{node}: job(s) {} requeued ({why}): Slurm starts them again from their beginning",
                    jobs.join(", ")
                )
            }
            Event::CanaryHeld { node, reason } => {
                write!(f, "{node} stays drained: {reason}")
            }
            Event::Condition { pod } => write!(f, "{pod}: Slurm condition updated"),
            Event::Busy { pod, busy: true } => {
                write!(f, "{pod}: labelled busy: jobs run there, evictions blocked")
            }
            Event::Busy { pod, busy: false } => {
                write!(f, "{pod}: busy label removed: no job runs there")
            }
            Event::DrainedFor { node, reason } => write!(f, "{node}: drained: {reason}"),
            Event::ResumedFor { node } => {
                write!(
                    f,
                    "{node}: resumed: the problem of its Kubernetes node cleared"
                )
            }
            Event::Rechecked { node } => write!(
                f,
                "{node}: the problem of its Kubernetes node cleared; held until its active checks pass"
            ),
            Event::Unregistered { pod } => {
                write!(f, "{pod}: replaced: Ready but never registered in Slurm")
            }
            Event::Remediated { pod, reason } => {
                write!(
                    f,
                    "{pod}: replaced: drained ({reason}) and no job left (remediation: replace)"
                )
            }
            Event::ControllerReplaced {
                pod,
                in_control: false,
            } => write!(
                f,
                "{pod}: a standby controller, deleted: its StatefulSet makes it again from the new template"
            ),
            Event::ControllerReplaced {
                pod,
                in_control: true,
            } => write!(
                f,
                "{pod}: the controller in control, deleted last (every standby runs the new template): a standby takes control until it is back"
            ),
            Event::Scaled { from, to, why } => write!(f, "scaled {from} -> {to}: {why}"),
            Event::WindowIgnored { message } => f.write_str(message),
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    pub events: Vec<Event>,
    pub replaced: Vec<String>,
}

/// The pod's Ready condition is True.
pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
