//! `spec.topology`: the network topologies Slurm schedules by (NVLink blocks, a tree of
//! switches) and how slurmops places workers in them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::serde_defaults::yes;

/// Network topologies for topology-aware scheduling, in Slurm's topology.yaml: NVLink blocks
/// (`block`, Slurm's topology `nvlink`), a tree of switches (`tree`, topology `fabric`), or both,
/// each NodeSet in at most one. The block one is the cluster's default when both are set; a
/// partition names another with `topology`. Slurm 25.11 and later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Topology {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockTopology>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeTopology>,
}

/// A partition's topology (`partitions[].topology`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TopologyKind {
    Block,
    Tree,
}

/// Tree topology (a fabric of switches): Slurm places a job under as few switches as it can, under
/// one leaf switch when it fits there. Each leaf switch is declared in Slurm's topology.yaml under
/// one root switch; a worker joins the leaf switch its Kubernetes node's label names once its
/// slurmd has registered (slurmops sets the node's topology through slurmrestd).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TreeTopology {
    /// Kubernetes node label naming the leaf switch of the node a worker runs on (a rack's, or an
    /// InfiniBand leaf switch's, as the fabric's discovery labels it).
    pub node_label: String,
    /// The leaf switches: values of `nodeLabel`, each a Slurm switch of the same name.
    pub switches: Vec<String>,
    /// NodeSets placed in the tree.
    pub node_sets: Vec<String>,
}

/// Block topology (NVLink domains): nodes of one block share a fast interconnect. Slurm 25.11 and
/// later. Each block is declared in Slurm's topology.yaml; a worker joins the block its Kubernetes
/// node's label names once its slurmd has registered (slurmops sets the node's topology through
/// slurmrestd). Until then, and on a node whose label names no listed block, the worker takes
/// single-node jobs only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockTopology {
    /// Kubernetes node label naming the block of the node a worker runs on,
    /// e.g. `nvidia.com/gpu.clique`.
    pub node_label: String,
    /// The blocks: values of `nodeLabel`, one per NVLink domain. Each is a Slurm block of the
    /// same name.
    pub blocks: Vec<String>,
    /// NodeSets placed in blocks.
    pub node_sets: Vec<String>,
    /// Nodes per block (e.g. 18 trays of a GB200 NVL72 rack).
    pub block_size: u32,
    /// TopologyParam=BlockAsNodeRank: order node ranks by block.
    #[serde(default = "yes")]
    pub block_as_node_rank: bool,
}

/// One topology whose workers slurmops places in Slurm: its name there, what its units are, the
/// Kubernetes node label naming a node's unit, the units declared, and its NodeSets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placing<'a> {
    pub kind: TopologyKind,
    /// Slurm's name of the topology (a worker's topology is `NAME:UNIT`).
    pub name: &'static str,
    /// What a unit is: `block` or `switch`.
    pub unit: &'static str,
    /// The key listing the units: `blocks` or `switches`.
    pub units_key: &'static str,
    pub node_label: &'a str,
    pub units: &'a [String],
    pub node_sets: &'a [String],
}

/// Slurm's names of the topologies slurmops renders.
pub const TOPOLOGY_BLOCK: &str = "nvlink";
pub const TOPOLOGY_TREE: &str = "fabric";

impl TopologyKind {
    /// Slurm's name of it.
    pub fn slurm_name(self) -> &'static str {
        match self {
            TopologyKind::Block => TOPOLOGY_BLOCK,
            TopologyKind::Tree => TOPOLOGY_TREE,
        }
    }

    /// Its key in `spec.topology`.
    pub fn key(self) -> &'static str {
        match self {
            TopologyKind::Block => "block",
            TopologyKind::Tree => "tree",
        }
    }
}

impl Topology {
    /// Each topology set, the block one first.
    pub fn placings(&self) -> Vec<Placing<'_>> {
        let block = self.block.iter().map(|b| Placing {
            kind: TopologyKind::Block,
            name: TOPOLOGY_BLOCK,
            unit: "block",
            units_key: "blocks",
            node_label: &b.node_label,
            units: &b.blocks,
            node_sets: &b.node_sets,
        });
        let tree = self.tree.iter().map(|t| Placing {
            kind: TopologyKind::Tree,
            name: TOPOLOGY_TREE,
            unit: "switch",
            units_key: "switches",
            node_label: &t.node_label,
            units: &t.switches,
            node_sets: &t.node_sets,
        });
        block.chain(tree).collect()
    }

    /// The cluster's default topology: the block one when set, else the tree.
    pub fn default_kind(&self) -> TopologyKind {
        match self.block {
            Some(_) => TopologyKind::Block,
            None => TopologyKind::Tree,
        }
    }

    /// Whether KIND is set.
    pub fn has(&self, kind: TopologyKind) -> bool {
        match kind {
            TopologyKind::Block => self.block.is_some(),
            TopologyKind::Tree => self.tree.is_some(),
        }
    }
}
