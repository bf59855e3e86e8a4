//! The Slurm releases slurmops supports and what each can do: the one table every version gate
//! (validation, rendering, upgrade planning) reads. Each entry was checked against that release's
//! own daemons, plugins and man pages in the test bed's chroots (24.11 from Debian trixie, 25.11
//! built from SchedMD's source, 26.05 from forky), not from memory. 25.05 is the one release
//! accepted without running it here (no Debian suite carries it and its source is not on this
//! machine): its entry comes from 25.11's changelog of 25.05 and its data parsers' samples, and
//! `proven` says so.

/// One supported Slurm release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// `YY.MM`.
    pub version: &'static str,
    /// Run on real daemons by the test suite (every Slurm-facing test of the bed, or the subset
    /// docs/testing.md names); false: accepted on its version gates and data parsers alone.
    pub proven: bool,
    /// slurmrestd data parsers it serves, newest first.
    pub parsers: &'static [&'static str],
    /// Topologies of dynamic nodes (topology.yaml's blocks and tree): blocks and leaf switches
    /// declared without nodes, and a node's block or switch set after it registered
    /// (`topology_str` of a node update, REST v0.0.43 and later; "Add ability for dynamic nodes
    /// to join topology" and leaf switches without child nodes in 25.05's changelog). 24.11
    /// refuses blocks whose nodes are unknown at slurmctld start ("Block not contains any
    /// nodes"). Proven on 25.11 and 26.05 by the bed's topology tests.
    pub block_topology: bool,
    /// `TopologyParam=BlockAsNodeRank` (slurm.conf(5) of 26.05; absent from 24.11's).
    pub block_as_node_rank: bool,
    /// `MetricsType=metrics/openmetrics` (the plugin arrived in Slurm 25.11; of the releases
    /// here, 26.05 ships metrics_openmetrics.so and 24.11 does not).
    pub openmetrics: bool,
    /// slurmrestd creates and deletes reservations (`POST`/`DELETE reservation`, data parser
    /// v0.0.43, Slurm 25.05). 24.11's slurmrestd only lists them: there slurmctld's own sidecar
    /// makes a maintenance window's reservation with `scontrol`.
    pub rest_reservations: bool,
    /// Files slurmctld serves configless besides slurm.conf and those of every release
    /// (`CONFIGLESS`): the lists compiled into each release's libslurmfull (`strings` of each
    /// chroot's library).
    pub configless_added: &'static [&'static str],
}

/// Files every supported release's slurmctld serves configless besides slurm.conf.
const CONFIGLESS: &[&str] = &[
    "acct_gather.conf",
    "cgroup.conf",
    "cli_filter.lua",
    "gres.conf",
    "helpers.conf",
    "job_container.conf",
    "mpi.conf",
    "oci.conf",
    "plugstack.conf",
    "scrun.lua",
    "topology.conf",
];

/// Every release slurmops supports, oldest first.
pub const SUPPORTED: &[Release] = &[
    Release {
        version: "24.11",
        proven: true,
        parsers: &["v0.0.42", "v0.0.41", "v0.0.40"],
        block_topology: false,
        block_as_node_rank: false,
        openmetrics: false,
        rest_reservations: false,
        configless_added: &[],
    },
    // From 25.11's CHANGELOG/slurm-25.05.md: data parser v0.0.43 and reservations through it
    // arrived, v0.0.40 was deprecated (still served), topology.yaml joined the configless files.
    Release {
        version: "25.05",
        proven: false,
        parsers: &["v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40"],
        block_topology: false,
        block_as_node_rank: false,
        openmetrics: false,
        rest_reservations: true,
        configless_added: &["topology.yaml"],
    },
    // Built from slurm-25.11.7 (tests/bed/slurm-chroot.sh): data_parser v0.0.41 to v0.0.44,
    // metrics_openmetrics.so, BlockAsNodeRank in slurm.conf(5), namespace.yaml and topology.yaml
    // in fetch_config.c; a node's topology through slurmrestd (`topology_str` of v0.0.44's
    // node update, `topology` of its node).
    Release {
        version: "25.11",
        proven: true,
        parsers: &["v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41"],
        block_topology: true,
        block_as_node_rank: true,
        openmetrics: true,
        rest_reservations: true,
        configless_added: &["namespace.yaml", "topology.yaml"],
    },
    Release {
        version: "26.05",
        proven: true,
        parsers: &["v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42"],
        block_topology: true,
        block_as_node_rank: true,
        openmetrics: true,
        rest_reservations: true,
        configless_added: &["namespace.yaml", "topology.yaml"],
    },
];

impl Release {
    /// Every file this release's slurmctld serves configless besides slurm.conf, sorted.
    pub fn configless(&self) -> Vec<&'static str> {
        let mut all: Vec<&'static str> = CONFIGLESS
            .iter()
            .chain(self.configless_added)
            .copied()
            .collect();
        all.sort_unstable();
        all
    }
}

/// Slurm upgrades in place from at most this many major releases back (24.11 and later; Slurm's
/// upgrade guide). Majors come every six months: YY.05 and YY.11.
pub const UPGRADE_WINDOW: u32 = 3;

/// `YY.MM` of a version written `YY.MM` or `YY.MM.P`; None when it is not one.
pub fn major(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let year = parts.next()?.parse().ok()?;
    let month = parts.next()?.parse().ok()?;
    match parts.next() {
        None => Some((year, month)),
        Some(p) if p.parse::<u32>().is_ok() && parts.next().is_none() => Some((year, month)),
        _ => None,
    }
}

/// Whether moving from release FROM to TO converts data in place: another major release
/// (slurmdbd's database and slurmctld's state take the new release's format on its first start).
pub fn converts(from: &str, to: &str) -> bool {
    match (major(from), major(to)) {
        (Some(a), Some(b)) => a != b,
        _ => from != to,
    }
}

/// The major release (`YY.MM`) of VERSION, as written when it is not one.
pub fn major_name(version: &str) -> String {
    major(version).map_or_else(|| version.to_string(), |(y, m)| format!("{y}.{m:02}"))
}

/// The supported release VERSION (`YY.MM` or `YY.MM.P`) belongs to.
pub fn find(version: &str) -> Option<&'static Release> {
    let (y, m) = major(version)?;
    SUPPORTED.iter().find(|r| major(r.version) == Some((y, m)))
}

/// The supported releases, for messages: `24.11, 26.05`.
pub fn supported_list() -> String {
    SUPPORTED
        .iter()
        .map(|r| r.version)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Position of a major release in Slurm's six-monthly sequence (YY.05, YY.11).
fn ordinal((year, month): (u32, u32)) -> u32 {
    year * 2 + u32::from(month > 6)
}

/// Why a change of Slurm release cannot be applied in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpgradeRefusal {
    /// Slurm state and daemons do not go back to an older release.
    Downgrade { from: String, to: String },
    /// Further than the window allows; `via` is a supported path, one step at a time.
    TooFar {
        from: String,
        to: String,
        via: Vec<String>,
    },
}

impl std::fmt::Display for UpgradeRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpgradeRefusal::Downgrade { from, to } => write!(
                f,
                "Slurm {from} → {to} is a downgrade: slurmctld's and slurmdbd's state cannot go back to an older release; keep slurmVersion at {from} (or rebuild the cluster from empty)"
            ),
            UpgradeRefusal::TooFar { from, to, via } => write!(
                f,
                "Slurm {from} → {to} skips more than {UPGRADE_WINDOW} major releases, which Slurm cannot upgrade in place; upgrade in steps: {}",
                via.join(" → ")
            ),
        }
    }
}

/// Whether the cluster may go from release FROM to TO in place (both are known versions).
/// Same major release (a patch change): Ok.
pub fn upgrade(from: &str, to: &str) -> Result<(), UpgradeRefusal> {
    let (Some(a), Some(b)) = (major(from), major(to)) else {
        return Ok(());
    };
    let refuse_from = format!("{}.{:02}", a.0, a.1);
    let refuse_to = format!("{}.{:02}", b.0, b.1);
    if ordinal(b) < ordinal(a) {
        return Err(UpgradeRefusal::Downgrade {
            from: refuse_from,
            to: refuse_to,
        });
    }
    if ordinal(b) - ordinal(a) > UPGRADE_WINDOW {
        // Supported stops, each within the window of the previous one.
        let mut via = vec![refuse_from.clone()];
        let mut at = ordinal(a);
        while ordinal(b) - at > UPGRADE_WINDOW {
            let next = SUPPORTED
                .iter()
                .filter_map(|r| major(r.version))
                .filter(|m| ordinal(*m) > at && ordinal(*m) - at <= UPGRADE_WINDOW)
                .max_by_key(|m| ordinal(*m));
            let Some(next) = next else { break };
            at = ordinal(next);
            via.push(format!("{}.{:02}", next.0, next.1));
        }
        via.push(refuse_to.clone());
        return Err(UpgradeRefusal::TooFar {
            from: refuse_from,
            to: refuse_to,
            via,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_releases_are_found_by_major_or_patch_version() {
        assert_eq!(find("24.11").unwrap().version, "24.11");
        assert_eq!(find("26.05.5").unwrap().version, "26.05");
        assert_eq!(find("25.11.7").unwrap().version, "25.11");
        assert!(find("24.05").is_none());
        assert!(find("26").is_none());
        assert_eq!(supported_list(), "24.11, 25.05, 25.11, 26.05");
        let unproven: Vec<&str> = SUPPORTED
            .iter()
            .filter(|r| !r.proven)
            .map(|r| r.version)
            .collect();
        assert_eq!(unproven, ["25.05"]);
    }

    #[test]
    fn upgrades_go_forward_within_three_majors() {
        assert_eq!(upgrade("24.11", "26.05"), Ok(()));
        assert_eq!(upgrade("24.11.5", "24.11.6"), Ok(()));
        assert!(matches!(
            upgrade("26.05", "24.11"),
            Err(UpgradeRefusal::Downgrade { .. })
        ));
        let far = upgrade("23.11", "26.05").unwrap_err();
        assert_eq!(
            far,
            UpgradeRefusal::TooFar {
                from: "23.11".into(),
                to: "26.05".into(),
                via: vec!["23.11".into(), "25.05".into(), "26.05".into()]
            }
        );
        assert!(far.to_string().contains("23.11 → 25.05 → 26.05"), "{far}");
        assert_eq!(upgrade("24.11", "25.11"), Ok(()));
        assert_eq!(upgrade("25.11", "26.05"), Ok(()));
    }
}
