//! The plan is the controller, dry-run: `plan --cluster` observes and decides exactly as a pass
//! does and shows the decisions instead of acting on them. The object survey (`apply::drift`)
//! runs over the objects the pass would apply (`Preview::rendered`), the decisions of NodeSets
//! whose workload it changes are settled as the pass settles them, and what remains is the next
//! pass's worker steps, the nodes the change drains and the canaries it takes first, all from the
//! one observation.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::applying::{changed_node_sets, held, settle};
use super::decide::{Action, Decision};
use super::observation::Observation;
use crate::plan::{JobOnNode, NodeDrain, Plan, Step};
use crate::render::Rendered;

/// What the next pass would do, without doing it.
pub struct Preview {
    pub decisions: BTreeMap<String, Decision>,
    /// Worker sync and autoscale on the same observation.
    pub upkeep: super::upkeep::Upkeep,
    pub observation: Observation,
    /// Controllers behind one address: their roll's next step.
    pub controllers: Option<super::features::controllers_roll::Roll>,
}

impl Preview {
    /// The objects the pass would apply: the rendered ones, with the StatefulSets of scale-ins
    /// that are not safe yet kept at their live replicas.
    pub fn rendered<'r>(&self, r: &'r Rendered) -> std::borrow::Cow<'r, Rendered> {
        held(r, &self.decisions)
    }

    /// Settles the decisions of NodeSets whose workload the apply changes (object ids such as
    /// `StatefulSet/NAME`): as in `pass`, their workers move on the pass after.
    pub fn settle<'a>(&mut self, changed_ids: impl IntoIterator<Item = &'a String>) {
        settle(&mut self.decisions, &changed_node_sets(changed_ids));
    }

    /// The worker steps of the next pass, in the order the pass takes them.
    pub fn steps(&self) -> Vec<Step> {
        let mut out = Vec::new();
        for (set, d) in &self.decisions {
            let step = |action, target: &str, detail: String| Step {
                node_set: set.clone(),
                by: crate::plan::StepBy::Controller,
                action,
                target: target.to_string(),
                detail,
            };
            for a in &d.actions {
                out.push(match a {
                    Action::Drain { node, reason } => step("drain", node, reason.words()),
                    Action::Delete { pod, forced, .. } => step(
                        "delete",
                        pod,
                        match forced {
                            true => "drain timed out, forced".into(),
                            false => "drained".into(),
                        },
                    ),
                    Action::Resume { node } => step("resume", node, String::new()),
                    Action::SetTopology { node, topology } => {
                        step("topology", node, topology.clone())
                    }
                    Action::Submit { job, .. } => step(
                        "submit",
                        &job.name,
                        format!("canary validation on {}", job.nodes.join(", ")),
                    ),
                    Action::CheckSubmit { job } => step(
                        "check",
                        &job.name,
                        format!("active check on {}", job.nodes.join(", ")),
                    ),
                    Action::CheckCancel { job } => {
                        step("cancel", &format!("job {job}"), "active check".into())
                    }
                    Action::Mark { pod, check, mark } => {
                        step("mark", pod, format!("{check}: {}", mark.condition().2))
                    }
                    Action::Cancel { job } => step("cancel", &format!("job {job}"), String::new()),
                    Action::Hold { node, reason } => step("hold", node, reason.words()),
                    Action::Requeue { node, jobs } => step(
                        "requeue",
                        node,
                        super::decide::requeued_words(jobs, self.observation.now),
                    ),
                    Action::Reserve { request, .. } => step(
                        "reserve",
                        &request.name,
                        format!("on {}", request.nodes.join(", ")),
                    ),
                    Action::Unreserve { name, .. } => step("unreserve", name, String::new()),
                });
            }
            for (pod, node) in &d.create {
                let detail = node
                    .as_ref()
                    .map(|n| format!("on Kubernetes node {n}"))
                    .unwrap_or_default();
                out.push(step("create", pod, detail));
            }
        }
        out.extend(super::upkeep::steps(&self.upkeep));
        out.extend(
            self.controllers
                .as_ref()
                .and_then(super::features::controllers_roll::step),
        );
        out
    }

    /// Every node the change drains, sooner or later, with the jobs running there now: the
    /// workers of NodeSets PLAN rolls, those outdated in a rollout under way, and those leaving.
    pub fn drains(&self, plan: &Plan) -> Vec<NodeDrain> {
        let rolled: BTreeSet<&str> = plan
            .slurm
            .node_sets_rolled
            .iter()
            .map(|r| r.node_set.as_str())
            .collect();
        let Ok(view) = &self.observation.slurm else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, d) in &self.decisions {
            let Some(set) = self.observation.sets.get(name) else {
                continue;
            };
            let mut nodes: Vec<&str> = set
                .workers
                .iter()
                .filter(|w| !w.deleting)
                .filter(|w| {
                    rolled.contains(name.as_str())
                        || d.progress.leaving.contains(&w.name)
                        || set
                            .update_revision
                            .as_ref()
                            .is_some_and(|r| *r != w.revision)
                })
                .map(|w| w.name.as_str())
                .collect();
            nodes.sort();
            nodes.dedup();
            for node in nodes {
                let jobs = view
                    .jobs_on(node)
                    .into_iter()
                    .map(|j| JobOnNode {
                        id: j.id,
                        user: j.user.to_string(),
                        end_time: j.end_time,
                    })
                    .collect();
                out.push(NodeDrain {
                    node: node.to_string(),
                    node_set: name.clone(),
                    jobs,
                });
            }
        }
        out
    }

    /// Names the canaries of each rollout PLAN shows: those the controller takes first, by its
    /// own order (not Ready, then idle, then soonest-finishing) over the observed workers.
    pub fn name_canaries(&self, plan: &mut Plan) {
        let Ok(view) = &self.observation.slurm else {
            return;
        };
        for r in &mut plan.slurm.node_sets_rolled {
            let (Some(canary), Some(set)) =
                (r.canary.as_mut(), self.observation.sets.get(&r.node_set))
            else {
                continue;
            };
            let candidates: Vec<crate::rollout::Candidate> = set
                .workers
                .iter()
                .filter(|w| !w.deleting)
                .map(|w| crate::rollout::Candidate {
                    ready: w.ready,
                    jobs: view.jobs_on(&w.name),
                    pod: w.name.clone(),
                })
                .collect();
            canary.nodes = crate::rollout::order(&candidates)
                .into_iter()
                .take(canary.replicas as usize)
                .collect();
        }
    }

    /// For each rollout that waits for a window: the pending jobs of the partitions holding its
    /// NodeSet, and those its reservation keeps off the workers now (their time limits would
    /// still run when the window opens).
    pub fn pending_held_back(&self, c: &crate::cluster::ClusterFile, plan: &mut Plan) {
        let Ok(view) = &self.observation.slurm else {
            return;
        };
        // The pending jobs by partition, read once; the counts once per distinct partitions and
        // window (hundreds of NodeSets share a few), so that this costs O(jobs), not jobs ×
        // NodeSets.
        let mut by_partition: HashMap<&str, Vec<&crate::slurm::Job>> = HashMap::new();
        for j in view.jobs().iter().filter(|j| j.has_state("PENDING")) {
            for p in j.partition.split(',') {
                by_partition.entry(p).or_default().push(j);
            }
        }
        // (partitions, (now, window start)) → (held back, pending).
        type Key = (Vec<String>, Option<(i64, i64)>);
        let mut counted: HashMap<Key, (usize, usize)> = HashMap::new();
        for r in &mut plan.slurm.node_sets_rolled {
            let Some(w) = r.window.as_mut() else {
                continue;
            };
            let partitions: Vec<String> = c
                .spec
                .partitions
                .iter()
                .filter(|x| x.node_sets.iter().any(|n| *n == r.node_set || n == "ALL"))
                .map(|x| x.name.clone())
                .collect();
            let at = w.now.zip(w.next.map(|(start, _)| start));
            let (held_back, pending) =
                *counted.entry((partitions.clone(), at)).or_insert_with(|| {
                    // A job pending in two of these partitions counts once.
                    let pending: BTreeMap<u64, &crate::slurm::Job> = partitions
                        .iter()
                        .flat_map(|p| by_partition.get(p.as_str()).into_iter().flatten())
                        .map(|j| (j.id, *j))
                        .collect();
                    let held_back = match at {
                        Some((now, start)) => pending
                            .values()
                            .filter(|j| {
                                j.time_limit.is_none_or(|m| {
                                    now.saturating_add(m.saturating_mul(60)) > start
                                })
                            })
                            .count(),
                        None => pending.len(),
                    };
                    (held_back, pending.len())
                });
            w.pending = Some(crate::plan::PendingJobs {
                held_back,
                pending,
                partitions,
            });
        }
    }
}
