//! The slurmrestd data parsers slurmops speaks, and what each version can do.

/// slurmrestd data parsers slurmops speaks, newest first (the probing order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DataParser {
    V0045,
    V0044,
    V0043,
    V0042,
}

impl DataParser {
    pub const ALL: [DataParser; 4] = [
        DataParser::V0045,
        DataParser::V0044,
        DataParser::V0043,
        DataParser::V0042,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DataParser::V0045 => "v0.0.45",
            DataParser::V0044 => "v0.0.44",
            DataParser::V0043 => "v0.0.43",
            DataParser::V0042 => "v0.0.42",
        }
    }

    pub fn parse(s: &str) -> Option<DataParser> {
        DataParser::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Every name, newest first, for messages and the CLI.
    pub fn names() -> Vec<&'static str> {
        DataParser::ALL
            .into_iter()
            .map(DataParser::as_str)
            .collect()
    }

    /// Creates reservations (`POST reservation`): v0.0.43 on (Slurm 25.05 and later).
    pub fn creates_reservations(self) -> bool {
        !matches!(self, DataParser::V0042)
    }

    /// Reports a node's topology (`topology` in the node, `topology_str` in an update).
    pub fn has_node_topology(self) -> bool {
        matches!(
            self,
            DataParser::V0043 | DataParser::V0044 | DataParser::V0045
        )
    }
}
