//! Topology placement: each worker of a NodeSet in a topology (NVLink blocks, a tree of
//! switches) joins the Slurm block or leaf switch named by its Kubernetes node's label. Workers
//! are dynamic nodes, so Slurm cannot know their unit from the node name; slurmops sets the
//! registered node's topology through slurmrestd instead (no webhook, no Kubernetes credentials
//! in worker pods, where jobs run). Pure: from what a pass observed to the `SetTopology` steps
//! that are due, and what stops the others.

use std::collections::BTreeMap;

use crate::cluster::types::Placing;
use crate::controller::decide::{Action, SetView, SlurmView};
use crate::render::slurm::node_topology;

/// What placing one NodeSet's workers needs now.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub actions: Vec<Action>,
    /// Workers left out of every unit, and why (their node's label names no declared unit).
    pub unplaced: Vec<String>,
    /// Ready workers whose slurmd has not registered yet: placed by a later pass.
    pub registering: Vec<String>,
}

/// Due steps for SET in topology T. HOST_UNITS maps a Kubernetes node to its value of T's label
/// (nodes without the label are absent).
pub fn place(
    set: &SetView,
    t: &Placing,
    host_units: &BTreeMap<String, String>,
    slurm: &SlurmView,
) -> Placement {
    let mut out = Placement::default();
    if !t.node_sets.contains(&set.name) {
        return out;
    }
    for w in set.workers.iter().filter(|w| !w.deleting) {
        let Some(host) = &w.host else {
            continue;
        };
        let Some(node) = slurm.nodes.get(&w.name) else {
            // Its slurmd has not registered yet: a later pass places it.
            if w.ready {
                out.registering.push(w.name.clone());
            }
            continue;
        };
        let Some(value) = host_units.get(host) else {
            out.unplaced.push(format!(
                "{}: node {host} has no {} label; it takes single-node jobs only",
                w.name, t.node_label
            ));
            continue;
        };
        if !t.units.contains(value) {
            out.unplaced.push(format!(
                "{}: node {host} is in {} {value:?}, which spec.topology.{}.{} does not list; it takes single-node jobs only",
                w.name,
                t.unit,
                t.kind.key(),
                t.units_key,
            ));
            continue;
        }
        let topology = node_topology(t.name, value);
        if node.topology != topology {
            out.actions.push(Action::SetTopology {
                node: w.name.clone(),
                topology,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::types::BlockTopology;
    use crate::controller::decide::Worker;
    use crate::slurm::Node;

    fn worker(i: u32, host: Option<&str>) -> Worker {
        Worker {
            name: format!("gpu-{i}"),
            uid: format!("u{i}"),
            ordinal: Some(i),
            revision: "r".into(),
            ready: true,
            deleting: false,
            created: Some(0),
            host: host.map(str::to_string),
            checks: Default::default(),
        }
    }

    fn node(i: u32, topology: &str) -> Node {
        Node {
            name: format!("gpu-{i}"),
            topology: topology.into(),
            ..Node::default()
        }
    }

    #[test]
    fn registered_workers_join_the_block_their_host_names_once() {
        let t = crate::cluster::types::Topology {
            block: Some(BlockTopology {
                node_label: "nvidia.com/gpu.clique".into(),
                blocks: vec!["rack-a".into(), "rack-b".into()],
                node_sets: vec!["gpu".into()],
                block_size: 2,
                block_as_node_rank: true,
            }),
            tree: None,
        };
        let b = t.placings()[0];
        let set = SetView {
            name: "gpu".into(),
            replicas: 5,
            update_revision: Some("r".into()),
            managed: false,
            canary: None,
            current_revision: None,
            workers: vec![
                worker(0, Some("k1")),
                worker(1, Some("k2")),
                worker(2, Some("k3")),
                worker(3, None),
                worker(4, Some("k4")),
            ],
        };
        let hosts = BTreeMap::from([
            ("k1".to_string(), "rack-a".to_string()),
            ("k2".to_string(), "rack-b".to_string()),
            ("k3".to_string(), "rack-z".to_string()),
        ]);
        let slurm = SlurmView::new(
            vec![
                node(0, ""),
                node(1, "nvlink:rack-b"),
                node(2, ""),
                node(4, ""),
            ],
            vec![],
        );
        let p = place(&set, &b, &hosts, &slurm);
        // gpu-1 is in its block already; gpu-3 is not scheduled.
        assert!(p.registering.is_empty());
        assert_eq!(
            p.actions,
            vec![Action::SetTopology {
                node: "gpu-0".into(),
                topology: "nvlink:rack-a".into()
            }]
        );
        assert_eq!(p.unplaced.len(), 2, "{:?}", p.unplaced);
        assert!(p.unplaced[0].contains("gpu-2") && p.unplaced[0].contains("rack-z"));
        assert!(
            p.unplaced[1].contains("gpu-4")
                && p.unplaced[1].contains("no nvidia.com/gpu.clique label")
        );
        // A NodeSet outside the topology is left alone.
        let other = SetView {
            name: "cpu".into(),
            ..set
        };
        assert_eq!(place(&other, &b, &hosts, &slurm), Placement::default());
    }

    #[test]
    fn registered_workers_of_a_tree_join_the_leaf_switch_their_host_names() {
        let t = crate::cluster::types::Topology {
            block: None,
            tree: Some(crate::cluster::types::TreeTopology {
                node_label: "example.com/leaf-switch".into(),
                switches: vec!["leaf-1".into(), "leaf-2".into()],
                node_sets: vec!["gpu".into()],
            }),
        };
        let tree = t.placings()[0];
        let set = SetView {
            name: "gpu".into(),
            replicas: 2,
            update_revision: Some("r".into()),
            managed: false,
            canary: None,
            current_revision: None,
            workers: vec![worker(0, Some("k1")), worker(1, Some("k2"))],
        };
        let hosts = BTreeMap::from([
            ("k1".to_string(), "leaf-2".to_string()),
            ("k2".to_string(), "leaf-9".to_string()),
        ]);
        let slurm = SlurmView::new(vec![node(0, ""), node(1, "")], vec![]);
        let p = place(&set, &tree, &hosts, &slurm);
        assert_eq!(
            p.actions,
            vec![Action::SetTopology {
                node: "gpu-0".into(),
                topology: "fabric:leaf-2".into()
            }]
        );
        assert_eq!(
            p.unplaced,
            [
                "gpu-1: node k2 is in switch \"leaf-9\", which spec.topology.tree.switches does not list; it takes single-node jobs only"
            ]
        );
    }
}
