//! A Slurm node as read: its name, state flags and what it holds.

use std::collections::BTreeSet;

/// A node's state: its base state and flags, as slurmrestd lists them (`["IDLE","DRAIN"]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeState(pub BTreeSet<String>);

impl NodeState {
    pub fn has(&self, flag: &str) -> bool {
        self.0.contains(flag)
    }

    /// Safe to take away: DRAIN set, not being undrained, nothing allocated or completing.
    pub fn is_drained(&self) -> bool {
        self.has("DRAIN")
            && !self.has("UNDRAIN")
            && !["ALLOCATED", "MIXED", "COMPLETING"]
                .iter()
                .any(|f| self.has(f))
    }

    /// Jobs may run here: ALLOCATED, MIXED or COMPLETING.
    pub fn is_busy(&self) -> bool {
        ["ALLOCATED", "MIXED", "COMPLETING"]
            .iter()
            .any(|f| self.has(f))
    }
}

impl std::fmt::Display for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Base state first, as sinfo prints it.
        let bases = [
            "IDLE",
            "ALLOCATED",
            "MIXED",
            "DOWN",
            "ERROR",
            "FUTURE",
            "UNKNOWN",
        ];
        let mut parts: Vec<&str> = bases.iter().copied().filter(|b| self.has(b)).collect();
        parts.extend(
            self.0
                .iter()
                .map(String::as_str)
                .filter(|s| !bases.contains(s)),
        );
        write!(f, "{}", parts.join("+"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    pub name: String,
    pub state: NodeState,
    pub reason: String,
    pub reason_set_by_user: String,
    pub reason_changed_at: Option<i64>,
    pub comment: String,
    pub partitions: Vec<String>,
    pub features: Vec<String>,
    pub cpus: u32,
    pub alloc_cpus: u32,
    pub address: String,
    pub port: u32,
    /// When a job last ran here (UNIX seconds; Slurm sets it at registration too).
    pub last_busy: Option<i64>,
    /// `TOPOLOGY:BLOCK` of a node in a block (v0.0.45 and later; empty before, or in no block).
    pub topology: String,
    /// GPUs configured (its `gres`) and allocated (`gres_used`).
    pub gpus: u32,
    pub alloc_gpus: u32,
}
