//! The pure heart of a pass: from what was observed (a NodeSet's StatefulSet and pods, Slurm's
//! nodes and jobs) to the steps that are safe **now**, and a description of what waits and why.
//! No IO, no clock (the caller passes `now`), deterministic, table-tested.
//!
//! Nothing here remembers anything: whether a worker is being replaced is read from the cluster
//! (its pod's revision) and from Slurm (a drain reason slurmops set, and since when). That is what
//! lets a restarted daemon, or a new leader, carry on exactly where the last one stopped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::gate::Gate;
use crate::rollout::{Candidate, order};
use crate::slurm::{Job, Jobs, Node, Nodes};
pub use crate::vocab::DrainReason;

/// A drain slurmops set for a rollout, scale-in, removal or a failed canary (not a cordon,
/// autoscale, an active check or a hand drain through `slurmops slurm drain`): the controller may
/// resume it once the worker is wanted again.
pub fn controller_drain(n: &Node) -> bool {
    n.state.has("DRAIN") && DrainReason::parse(&n.reason).is_some_and(|r| r.is_controllers())
}

/// One worker pod as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    pub name: String,
    pub uid: String,
    pub ordinal: Option<u32>,
    /// `controller-revision-hash` of the pod.
    pub revision: String,
    pub ready: bool,
    pub deleting: bool,
    /// Pod creation (UNIX seconds).
    pub created: Option<i64>,
    /// The Kubernetes node the pod runs on, once scheduled.
    pub host: Option<String>,
    /// Each active check's last result on this pod (its `checks.slurmops.dev/` conditions).
    pub checks: BTreeMap<String, super::mark::Mark>,
}

/// A NodeSet's StatefulSet as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetView {
    pub name: String,
    /// `spec.replicas` of the live StatefulSet.
    pub replicas: u32,
    /// The update revision, once the StatefulSet controller saw the current generation.
    pub update_revision: Option<String>,
    pub workers: Vec<Worker>,
    /// Pods slurmops makes and deletes itself (a perNode NodeSet's), not a StatefulSet's.
    pub managed: bool,
    /// The canary record of the workload (`slurmops.dev/canary`): the last verdict, raw.
    pub canary: Option<String>,
    /// The revision every worker ran before the update began (a StatefulSet's
    /// `currentRevision`): rolling back to it needs no canary.
    pub current_revision: Option<String>,
}

/// What git wants of the NodeSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// In cluster.yaml with this many replicas (workers at or above it leave).
    Replicas(u32),
    /// The live replicas stay: an autoscaled NodeSet (autoscale drains its own scale-ins), or a
    /// rollout-only pass.
    Current,
    /// Gone from cluster.yaml: every worker leaves, then the StatefulSet is pruned.
    Removed,
    /// A NodeSet whose pods slurmops makes: exactly these workers (made or to be made); every
    /// other one leaves, drained with WHY (node left, scale-in).
    Only {
        keep: BTreeSet<String>,
        why: DrainReason,
    },
}

impl Want {
    /// Whether worker W leaves.
    pub fn leaves(&self, w: &Worker) -> bool {
        match self {
            Want::Replicas(t) => w.ordinal.is_none_or(|i| i >= *t),
            Want::Removed => true,
            Want::Current => false,
            Want::Only { keep, .. } => !keep.contains(&w.name),
        }
    }
}

/// The NodeSet's `update` policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub max_unavailable: u32,
    /// Seconds a drain may wait for jobs before `force` deletes the pod anyway.
    pub drain_timeout: Option<i64>,
    pub force: bool,
    /// Seconds a Ready worker may stay unknown to Slurm before it is replaced.
    pub registration_grace: i64,
    /// What the rollout's canary lets it do.
    pub gate: Gate,
    /// What the maintenance windows let it do.
    pub window: WindowGate,
}

/// Whether a maintenance window lets the rollout drain workers now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WindowGate {
    /// No window asked for, or one is open.
    #[default]
    Open,
    /// Outside a window: no worker is drained for the rollout, but idle ones when IDLE_MAY_ROLL
    /// (`window: preferred`). Workers already draining go on; drained ones are replaced.
    Closed { idle_may_roll: bool },
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            max_unavailable: 1,
            drain_timeout: None,
            force: false,
            registration_grace: super::drive::REGISTRATION_GRACE,
            gate: Gate::Open,
            window: WindowGate::Open,
        }
    }
}

/// Slurm as read once for the pass, with the jobs indexed once (by the nodes they hold, by id,
/// canary jobs by name), so that a pass costs O(workers + jobs), not workers × jobs.
#[derive(Debug, Default)]
pub struct SlurmView {
    /// Shared with the Slurm client's kept node list and queue: a pass copies neither.
    pub nodes: Nodes,
    jobs: Jobs,
    /// Node name → indexes in `jobs` of the jobs holding it (running, suspended, completing).
    on: HashMap<String, Vec<usize>>,
    /// Job id → its index in `jobs`.
    by_id: HashMap<u64, usize>,
    /// A canary job's name → the index of the newest job of that name (a retried submission
    /// may have made two).
    canaries: HashMap<String, usize>,
    /// The job queue was needed and could not be read (too large, too slow): the nodes are
    /// known, the jobs are not. Rollouts go on from node states; what needs the jobs themselves
    /// (autoscale, canary verdicts) waits, and says why.
    pub jobs_error: Option<String>,
    /// Check jobs read again this pass, by id: they replace the kept queue's records.
    fresh: HashMap<u64, std::sync::Arc<Job>>,
    /// Job records handed out to the pass's decisions so far: what decide reads of the queue,
    /// which must stay O(workers + jobs) (a test checks it at 10,000 workers and 50,000 jobs).
    handed: AtomicUsize,
}

impl Clone for SlurmView {
    fn clone(&self) -> SlurmView {
        SlurmView {
            nodes: self.nodes.clone(),
            jobs: self.jobs.clone(),
            on: self.on.clone(),
            by_id: self.by_id.clone(),
            canaries: self.canaries.clone(),
            jobs_error: self.jobs_error.clone(),
            fresh: self.fresh.clone(),
            handed: AtomicUsize::new(self.handed()),
        }
    }
}

impl SlurmView {
    pub fn new(nodes: Vec<Node>, jobs: Vec<Job>) -> SlurmView {
        let nodes = nodes.into_iter().map(|n| (n.name.clone(), n)).collect();
        let jobs = jobs.into_iter().map(std::sync::Arc::new).collect();
        SlurmView::shared(std::sync::Arc::new(nodes), jobs)
    }

    /// The view of NODES and JOBS as the Slurm client keeps them: the jobs indexed, nothing
    /// copied.
    pub fn shared(nodes: Nodes, jobs: Jobs) -> SlurmView {
        let mut on: HashMap<String, Vec<usize>> = Default::default();
        let mut by_id = HashMap::with_capacity(jobs.len());
        let mut canaries: HashMap<String, usize> = Default::default();
        for (i, j) in jobs.iter().enumerate() {
            by_id.insert(j.id, i);
            if j.name.starts_with(crate::vocab::CANARY_JOB_PREFIX)
                || j.name.starts_with(crate::vocab::CHECK_JOB_PREFIX)
            {
                let newest = canaries.entry(j.name.clone()).or_insert(i);
                if jobs[*newest].id < j.id {
                    *newest = i;
                }
            }
            if !j.holds_nodes() {
                continue;
            }
            for n in &j.nodes {
                let held = on.entry(n.clone()).or_default();
                // A node listed twice in one job is held once.
                if held.last() != Some(&i) {
                    held.push(i);
                }
            }
        }
        SlurmView {
            nodes,
            jobs,
            on,
            by_id,
            canaries,
            jobs_error: None,
            fresh: HashMap::new(),
            handed: AtomicUsize::new(0),
        }
    }

    /// Only jobs of Slurm user SUBMITTER (the one slurmops submits as) count as canary jobs: a
    /// job any Slurm user names like one can neither pass nor fail a canary. None (the user is
    /// not known): every job of that name counts.
    pub fn canaries_of(mut self, submitter: Option<&str>) -> SlurmView {
        if let Some(user) = submitter {
            self.canaries.clear();
            for (i, j) in self.jobs.iter().enumerate() {
                let ours = j.name.starts_with(crate::vocab::CANARY_JOB_PREFIX)
                    || j.name.starts_with(crate::vocab::CHECK_JOB_PREFIX);
                if j.user == user && ours {
                    let newest = self.canaries.entry(j.name.clone()).or_insert(i);
                    if self.jobs[*newest].id < j.id {
                        *newest = i;
                    }
                }
            }
        }
        self
    }

    /// Slurm's NODES, with the job queue unknown for WHY.
    pub fn without_jobs(nodes: Nodes, why: String) -> SlurmView {
        SlurmView {
            jobs_error: Some(why),
            ..SlurmView::shared(nodes, Vec::new().into())
        }
    }

    fn hand(&self, n: usize) {
        self.handed.fetch_add(n, Ordering::Relaxed);
    }

    /// Job records handed out so far (each call of `jobs` counts them all).
    pub fn handed(&self) -> usize {
        self.handed.load(Ordering::Relaxed)
    }

    /// Every job Slurm listed.
    pub fn jobs(&self) -> &[std::sync::Arc<Job>] {
        self.hand(self.jobs.len());
        &self.jobs
    }

    /// Job ID, when Slurm listed it.
    pub fn job(&self, id: u64) -> Option<&Job> {
        self.hand(1);
        self.by_id.get(&id).map(|i| &*self.jobs[*i])
    }

    /// The newest canary job named NAME (see `canary::job_name`).
    pub fn canary_job(&self, name: &str) -> Option<&Job> {
        self.hand(1);
        self.canaries.get(name).map(|i| &*self.jobs[*i])
    }

    /// The newest job of each name starting with PREFIX that slurmops submitted (an active
    /// check's jobs: `slurmops-check:CHECK:`).
    pub fn check_jobs(&self, prefix: &str) -> Vec<&Job> {
        let jobs: Vec<&Job> = self
            .canaries
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(_, i)| {
                let kept = &*self.jobs[*i];
                self.fresh.get(&kept.id).map_or(kept, |j| &**j)
            })
            .collect();
        self.hand(jobs.len());
        jobs
    }

    /// Our running check jobs with no report in the kept queue yet (at most MAX): a report is a
    /// comment, which `jobs/state/` does not follow.
    pub fn unreported_checks(&self, max: usize) -> Vec<u64> {
        self.canaries
            .iter()
            .filter(|(name, _)| name.starts_with(crate::vocab::CHECK_JOB_PREFIX))
            .map(|(_, i)| &*self.jobs[*i])
            .filter(|j| j.has_state("RUNNING") && j.comment.is_empty())
            .map(|j| j.id)
            .take(max)
            .collect()
    }

    /// Jobs read again this pass (`unreported_checks`), in place of the kept ones.
    pub fn refresh_checks(&mut self, jobs: Vec<Job>) {
        self.fresh = jobs
            .into_iter()
            .map(|j| (j.id, std::sync::Arc::new(j)))
            .collect();
    }

    /// The nodes and the jobs, taken apart.
    pub fn into_parts(self) -> (Nodes, Jobs) {
        (self.nodes, self.jobs)
    }

    /// Jobs holding NODE (running, suspended, completing).
    pub fn jobs_on(&self, node: &str) -> Vec<Job> {
        let on = self.on.get(node).map(Vec::as_slice).unwrap_or_default();
        self.hand(on.len());
        on.iter().map(|i| Job::clone(&self.jobs[*i])).collect()
    }

    /// Whether a job holds NODE: one of the jobs read says so, or Slurm's node state does
    /// (ALLOCATED, MIXED, COMPLETING): a pass that read no jobs still knows a busy node.
    pub fn busy(&self, node: &str) -> bool {
        self.on.get(node).is_some_and(|v| !v.is_empty())
            || self.nodes.get(node).is_some_and(|n| n.state.is_busy())
    }
}

/// A step that is safe now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// DRAIN with `slurmops: REASON`.
    Drain { node: String, reason: DrainReason },
    /// Delete the pod (uid precondition): its node is drained, unknown to Slurm, or forced.
    Delete {
        pod: String,
        uid: String,
        forced: bool,
    },
    /// RESUME a drain the controller set, for a worker that is wanted as it is.
    Resume { node: String },
    /// Put the worker's Slurm node in the block of its Kubernetes node (`TOPOLOGY:BLOCK`).
    SetTopology { node: String, topology: String },
    /// Submit a canary's validation job (its script read from the ConfigMap FROM, when set).
    Submit {
        job: crate::slurm::JobRequest,
        from: Option<crate::cluster::canary::ScriptRef>,
    },
    /// Submit an active check's job.
    CheckSubmit { job: crate::slurm::JobRequest },
    /// Cancel an active check's job (past its timeout, or waiting on a worker that failed).
    CheckCancel { job: u64 },
    /// Keep an active check's result on the worker's pod (its condition).
    Mark {
        pod: String,
        check: String,
        mark: super::mark::Mark,
    },
    /// Cancel a validation job that no longer decides anything.
    Cancel { job: u64 },
    /// DRAIN with `slurmops: REASON`, replacing a reason of ours (a failed canary).
    Hold { node: String, reason: DrainReason },
    /// Reserve the workers that wait for a maintenance window, for the window.
    Reserve {
        request: crate::slurm::ReservationRequest,
        /// The ConfigMap slurmctld's sidecar makes it from (slurmrestd cannot); None: slurmrestd.
        sidecar: Option<String>,
    },
    /// Give a maintenance reservation back (SIDECAR: as `Reserve`).
    Unreserve {
        name: String,
        sidecar: Option<String>,
    },
}

/// A job that holds a worker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    pub id: u64,
    pub user: String,
    /// Expected end (UNIX seconds), when Slurm knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<i64>,
}

/// A worker that waits for jobs to end before it can go.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Waiting {
    pub node: String,
    /// Why it goes: rollout, scale-in, NodeSet removed.
    pub why: String,
    pub jobs: Vec<Holder>,
    /// Draining since (UNIX seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
}

/// Where a NodeSet stands: what `slurmops status` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    pub node_set: String,
    /// The StatefulSet's update revision (empty until its controller saw the change).
    pub revision: String,
    pub replicas: u32,
    /// Workers on the update revision and Ready.
    pub updated: u32,
    /// Workers out of service for this NodeSet's work: draining, deleted, starting.
    pub in_flight: Vec<String>,
    /// Workers that wait for jobs (the jobs, their users and expected ends).
    pub waiting: Vec<Waiting>,
    /// Workers leaving for a scale-in or removal.
    pub leaving: Vec<String>,
    /// Workers in no block although their NodeSet is in block topology, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unplaced: Vec<String>,
    /// The rollout's canary, when the NodeSet has one and a rollout needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<super::gate::CanaryProgress>,
    /// Workers whose rollout waits for a maintenance window, and when the next one opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowWait>,
    /// Active checks on its workers (`policy.activeChecks`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<super::mark::Summary>,
    pub done: bool,
    /// Entries left out of the lists above to keep the status ConfigMap small (see
    /// `status::bound`): the counts stay exact.
    #[serde(default, skip_serializing_if = "Omitted::is_empty")]
    pub omitted: Omitted,
}

/// How many entries of each list of a `Progress` the status left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Omitted {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waiting: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub leaving: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unplaced: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub window: usize,
    /// Jobs left out of the waiting workers' lists, all together.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub jobs: usize,
}

impl Omitted {
    pub fn is_empty(&self) -> bool {
        *self == Omitted::default()
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Workers held back until a maintenance window opens.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowWait {
    pub workers: Vec<String>,
    /// The next window (UNIX seconds), when the schedule names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closes: Option<i64>,
    /// The time zone of the schedule that names that window (status tells the window in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The Slurm reservation that holds jobs back ahead of the window, or why there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

/// The outcome for one NodeSet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub actions: Vec<Action>,
    pub progress: Progress,
    /// Scale-in not yet safe: the StatefulSet keeps this many replicas for now.
    pub hold_replicas: Option<u32>,
    /// Removed NodeSet whose workers are not all drained: its StatefulSet is not pruned yet.
    pub keep: bool,
    /// Pods to make now (slurmops-made NodeSets): (pod, the Kubernetes node it is bound to).
    pub create: Vec<(String, Option<String>)>,
    /// A canary verdict to keep on the workload once the actions are done.
    pub record: Option<super::gate::Record>,
}

/// The workers of a NodeSet in ordinal order.
fn sorted(set: &SetView) -> Vec<&Worker> {
    let mut ws: Vec<&Worker> = set.workers.iter().collect();
    ws.sort_by_key(|w| (w.ordinal, w.name.clone()));
    ws
}

/// Decides the NodeSet's next steps. NOW is UNIX seconds.
pub fn decide(
    set: &SetView,
    want: &Want,
    policy: &Policy,
    slurm: &SlurmView,
    now: i64,
) -> Decision {
    let mut d = Decision {
        progress: Progress {
            node_set: set.name.clone(),
            revision: set.update_revision.clone().unwrap_or_default(),
            replicas: set.replicas,
            ..Progress::default()
        },
        ..Decision::default()
    };
    let target = match want {
        Want::Replicas(n) => Some(*n),
        Want::Removed => Some(0),
        Want::Current => None,
        Want::Only { keep, .. } => Some(keep.len() as u32),
    };
    let why = match want {
        Want::Removed => DrainReason::Removed,
        Want::Only { why, .. } => why.clone(),
        _ => DrainReason::ScaleIn,
    };
    let (mut leaving, staying): (Vec<&Worker>, Vec<&Worker>) =
        sorted(set).into_iter().partition(|w| want.leaves(w));
    // The highest ordinals first, as the StatefulSet removes them.
    leaving.reverse();
    let all_gone = leave(set, &leaving, &why, slurm, &mut d);
    if !all_gone || (set.managed && !leaving.is_empty()) {
        match want {
            Want::Removed => d.keep = true,
            // slurmops deletes a perNode NodeSet's pods itself: no StatefulSet to hold.
            _ if set.managed => {}
            _ => d.hold_replicas = Some(set.replicas),
        }
    }
    let expected = set.replicas.min(target.unwrap_or(set.replicas));
    match (&set.update_revision, policy.gate) {
        // A failed canary: nothing rolls, the updated workers are only counted.
        (Some(rev), Gate::Halt) => {
            d.progress.updated = staying
                .iter()
                .filter(|w| w.revision == *rev && w.ready && !w.deleting)
                .count() as u32;
        }
        (Some(rev), _) => roll(&staying, expected, rev, policy, slurm, now, &mut d),
        (None, _) => {}
    }
    let settled = staying.len() as u32 == expected && d.progress.updated == expected;
    d.progress.done = set.update_revision.is_some()
        && d.actions.is_empty()
        && d.progress.waiting.is_empty()
        && d.progress.in_flight.is_empty()
        && leaving.is_empty()
        && settled;
    d
}

/// Workers that leave: drain them; true when every one is drained or unknown to Slurm (nothing
/// can run there), so the StatefulSet may lose them. slurmops deletes a drained worker of its own
/// (perNode) pods itself.
fn leave(
    set: &SetView,
    leaving: &[&Worker],
    why: &DrainReason,
    slurm: &SlurmView,
    d: &mut Decision,
) -> bool {
    let mut all = true;
    for w in leaving {
        d.progress.leaving.push(w.name.clone());
        let gone = slurm
            .nodes
            .get(&w.name)
            .is_none_or(|n| n.state.is_drained());
        if set.managed && gone && !w.deleting {
            d.actions.push(delete(w, false));
        }
        let Some(n) = slurm.nodes.get(&w.name) else {
            continue;
        };
        if n.state.is_drained() {
            continue;
        }
        all = false;
        if !n.state.has("DRAIN") {
            d.actions.push(Action::Drain {
                node: w.name.clone(),
                reason: why.clone(),
            });
        }
        d.progress.waiting.push(waiting(&w.name, why, n, slurm));
    }
    all
}

fn waiting(node: &str, why: &DrainReason, n: &Node, slurm: &SlurmView) -> Waiting {
    Waiting {
        node: node.to_string(),
        why: why.words(),
        jobs: slurm
            .jobs_on(node)
            .iter()
            .map(|j| Holder {
                id: j.id,
                user: j.user.clone(),
                end: j.end_time,
            })
            .collect(),
        since: n
            .state
            .has("DRAIN")
            .then_some(n.reason_changed_at)
            .flatten(),
    }
}

/// The rollout of the staying workers onto REV.
fn roll(
    staying: &[&Worker],
    expected: u32,
    rev: &str,
    p: &Policy,
    slurm: &SlurmView,
    now: i64,
    d: &mut Decision,
) {
    // A missing pod is out, and comes back on REV (the StatefulSet recreates deleted pods from
    // its update revision).
    let missing = (expected as usize).saturating_sub(staying.len());
    let mut out = missing;
    let mut candidates = Vec::new();
    for w in staying {
        let node = slurm.nodes.get(&w.name);
        if w.deleting {
            out += 1;
            d.progress.in_flight.push(w.name.clone());
            continue;
        }
        if w.revision == *rev {
            updated(w, node, matches!(p.gate, Gate::Limit(_)), d);
            if !w.ready {
                out += 1;
            }
            continue;
        }
        // Outdated.
        let Some(n) = node else {
            // Unknown to Slurm: nothing can run there when slurmd is not up, or when it never
            // registered within the grace.
            let age = w.created.map_or(0, |c| now - c);
            let jobs = slurm.jobs_on(&w.name);
            if !jobs.is_empty() || slurm.jobs_error.is_some() {
                // Unknown as a node, yet a job holds it (Slurm's answers disagree), or the jobs
                // could not be read: wait.
                continue;
            }
            if !w.ready || age > p.registration_grace {
                out += 1;
                d.progress.in_flight.push(w.name.clone());
                d.actions.push(delete(w, false));
            }
            continue;
        };
        if n.state.has("DRAIN") {
            out += 1;
            d.progress.in_flight.push(w.name.clone());
            if n.state.is_drained() {
                if DrainReason::parse(&n.reason).is_none() {
                    // Someone else's drain: said once (drain leaves their reason alone) before the
                    // pod goes.
                    d.actions.push(Action::Drain {
                        node: w.name.clone(),
                        reason: DrainReason::Rollout,
                    });
                }
                d.actions.push(delete(w, false));
            } else if timed_out(n, p, now) {
                d.actions.push(delete(w, true));
            } else {
                d.progress
                    .waiting
                    .push(waiting(&w.name, &DrainReason::Rollout, n, slurm));
            }
            continue;
        }
        if !w.ready {
            out += 1;
        }
        candidates.push(Candidate {
            pod: w.name.clone(),
            ready: w.ready,
            jobs: slurm.jobs_on(&w.name),
        });
    }
    let mut room = (p.max_unavailable.max(1) as usize).saturating_sub(out);
    // Under a canary, at most that many workers leave the old revision until it is validated:
    // those on REV, in flight, and deleted ones not recreated yet.
    let mut canary_room = match p.gate {
        Gate::Limit(n) => (n as usize)
            .saturating_sub(d.progress.updated as usize + d.progress.in_flight.len() + missing),
        _ => usize::MAX,
    };
    for pod in order(&candidates) {
        if canary_room == 0 {
            break;
        }
        let c = candidates.iter().find(|c| c.pod == pod);
        let ready = c.is_some_and(|c| c.ready);
        let may = match p.window {
            WindowGate::Open => true,
            WindowGate::Closed { idle_may_roll } => {
                idle_may_roll && c.is_some_and(|c| c.jobs.is_empty())
            }
        };
        if !may {
            d.progress
                .window
                .get_or_insert_with(WindowWait::default)
                .workers
                .push(pod);
            continue;
        }
        canary_room -= 1;
        // A worker that is not Ready is out already: draining it costs no room.
        if ready {
            if room == 0 {
                continue;
            }
            room -= 1;
        }
        d.progress.in_flight.push(pod.clone());
        d.actions.push(Action::Drain {
            node: pod,
            reason: DrainReason::Rollout,
        });
    }
}

/// An updated worker: counted when Ready; a drain the controller set is resumed once its slurmd
/// answers (replaced and registered, or a change that was reverted before its pod went). HOLD:
/// a canary not validated yet keeps it (the canary resumes it once its job is submitted).
fn updated(w: &Worker, node: Option<&Node>, hold: bool, d: &mut Decision) {
    if !w.ready {
        d.progress.in_flight.push(w.name.clone());
        return;
    }
    let Some(n) = node else {
        d.progress.updated += 1;
        return;
    };
    if controller_drain(n) {
        if !hold && !n.state.has("NOT_RESPONDING") {
            d.actions.push(Action::Resume {
                node: w.name.clone(),
            });
        }
        d.progress.in_flight.push(w.name.clone());
        return;
    }
    d.progress.updated += 1;
}

fn timed_out(n: &Node, p: &Policy, now: i64) -> bool {
    p.force
        && p.drain_timeout
            .zip(n.reason_changed_at)
            .is_some_and(|(t, since)| now - since > t)
}

fn delete(w: &Worker, forced: bool) -> Action {
    Action::Delete {
        pod: w.name.clone(),
        uid: w.uid.clone(),
        forced,
    }
}

#[cfg(test)]
pub(crate) mod tests;
