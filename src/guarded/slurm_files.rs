//! What a push added to the Slurm files slurmops renders: every key=value of the push's rendering
//! that the same cluster rendered without the push's free-form Slurm settings lacks, and that is
//! not data (or is unknown) and not allowed by the install.
//!
//! The files are read as Slurm's parser reads them (`slurm_syntax`).
//!
//! A pair on a line after its first (`CPUs=4` of `NodeName=a CPUs=4`) is compared together with
//! the line's first pair, so moving a skeleton's `NodeAddr=` or `File=` to another node is
//! counted as added. Pairs are compared as a multiset, keys without case, values exactly.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::slurm_keys::{self, KeyClass};
use super::slurm_syntax::{Pair, logical_lines, pairs};

/// One key a push put into a rendered Slurm file that the install does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    pub file: String,
    /// 1-based, in the full rendering: the first physical line of the (continued) line.
    pub line: usize,
    pub key: String,
    pub value: String,
    /// None: a key unknown for that file, or text Slurm cannot read as key=value.
    pub class: Option<KeyClass>,
}

/// Every key=value of FULL (file name -> text, as rendered from the push) that is not in
/// SKELETON (the same cluster rendered by slurmops with the push's free-form Slurm settings left
/// out) and is not Data, or is unknown, unless ALLOWED (the install's allowed key names,
/// case-insensitive) names it. Files whose name `slurm_keys::class` does not cover (scripts,
/// topology.yaml, plugstack.conf, lua files) are skipped: the caller checks those as code.
pub fn added(
    skeleton: &BTreeMap<String, String>,
    full: &BTreeMap<String, String>,
    allowed: &[String],
) -> Vec<Added> {
    let allowed: HashSet<String> = allowed.iter().map(|k| k.to_ascii_lowercase()).collect();
    let mut out = Vec::new();
    for (file, text) in full {
        if !slurm_keys::covers(file) {
            continue;
        }
        let mut seen = Seen::default();
        if let Some(base) = skeleton.get(file) {
            for line in logical_lines(base) {
                seen.add_line(&pairs(&line.text));
            }
        }
        for line in logical_lines(text) {
            let items = pairs(&line.text);
            for i in seen.unmatched(&items) {
                let p = &items[i];
                let class = if p.garbage {
                    None
                } else {
                    slurm_keys::class(file, p.key)
                };
                let unlisted = p.garbage || !allowed.contains(&p.key.to_ascii_lowercase());
                if class != Some(KeyClass::Data) && unlisted {
                    out.push(Added {
                        file: file.clone(),
                        line: line.number,
                        key: p.key.to_string(),
                        value: p.value.to_string(),
                        class,
                    });
                }
            }
        }
    }
    out
}

/// The skeleton's pairs, as a multiset: a line's first pair on its own, every other pair with
/// the id of its line's first pair.
#[derive(Default)]
struct Seen {
    heads: HashMap<String, u32>,
    counts: HashMap<(u32, String), usize>,
}

/// The "line" id of a line's first pair.
const TOP: u32 = u32::MAX;

impl Seen {
    fn add_line(&mut self, items: &[Pair]) {
        let Some(first) = items.first() else { return };
        let head = first.identity();
        let next = u32::try_from(self.heads.len()).unwrap_or(TOP - 1);
        let id = *self.heads.entry(head.clone()).or_insert(next);
        *self.counts.entry((TOP, head)).or_default() += 1;
        for p in &items[1..] {
            *self.counts.entry((id, p.identity())).or_default() += 1;
        }
    }

    /// The places in ITEMS (one line of the full rendering) of the pairs the skeleton does not
    /// hold, or no longer holds: each pair it holds is taken out once.
    fn unmatched(&mut self, items: &[Pair]) -> Vec<usize> {
        let Some(first) = items.first() else {
            return Vec::new();
        };
        let head = first.identity();
        let id = self.heads.get(&head).copied();
        let mut left = Vec::new();
        if !self.take(TOP, head) {
            left.push(0);
        }
        for (i, p) in items.iter().enumerate().skip(1) {
            // A line whose first pair the skeleton lacks holds nothing of the skeleton's.
            if id.is_none_or(|id| !self.take(id, p.identity())) {
                left.push(i);
            }
        }
        left
    }

    fn take(&mut self, id: u32, identity: String) -> bool {
        match self.counts.get_mut(&(id, identity)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use KeyClass::*;

    fn map(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(f, t)| (f.to_string(), t.to_string()))
            .collect()
    }

    const SKELETON: &str = "\
# slurm.conf for cluster c, rendered by slurmops from cluster.yaml. Do not edit:
# change cluster.yaml instead. Workers fetch this file from slurmctld (configless).
ClusterName=c
SlurmctldHost=c-controller-0(c-controller-0.c-controller.ns.svc.cluster.local)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=slurm
StateSaveLocation=/var/spool/slurmctld
AuthType=auth/slurm
AuthAltParameters=jwt_key=/etc/slurm/jwt.key
SlurmctldParameters=enable_configless,reconfig_on_restart
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory

# NodeSets: dynamic nodes (slurmd -Z) join a NodeSet through its feature.
NodeSet=cpu Feature=cpu
NodeSet=gpu Feature=gpu
NodeName=cpu-[0-9] State=FUTURE CPUs=4 RealMemory=8000
NodeName=gpu-[0-3] State=FUTURE CPUs=16 Gres=gpu:a100:8 Port=6818
# Partitions
PartitionName=cpu Nodes=cpu Default=YES MaxTime=1-00:00:00 State=UP
PartitionName=gpu Nodes=gpu State=UP
";

    fn slurm_conf(full: &str, allowed: &[&str]) -> Vec<Added> {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        added(
            &map(&[("slurm.conf", SKELETON)]),
            &map(&[("slurm.conf", full)]),
            &allowed,
        )
    }

    fn keys(found: &[Added]) -> Vec<(usize, &str, &str, Option<KeyClass>)> {
        found
            .iter()
            .map(|a| (a.line, a.key.as_str(), a.value.as_str(), a.class))
            .collect()
    }

    #[test]
    fn the_skeleton_itself_adds_nothing() {
        assert_eq!(slurm_conf(SKELETON, &[]), vec![]);
        // Other comments, blank lines, continued lines, another case of the key, reordered lines.
        let same = "ClusterName=c\n\n# a comment\nslurmuser=slurm   # trailing\n\
            SlurmctldHost=c-controller-0(c-controller-0.c-controller.ns.svc.cluster.local)\n\
            PartitionName=gpu \\\n  Nodes=gpu State=UP\nSlurmdPort = 6818\n";
        assert_eq!(slurm_conf(same, &[]), vec![]);
    }

    #[test]
    fn finds_a_program_key_and_an_unknown_key() {
        let full = format!(
            "{SKELETON}MailProg=/usr/bin/evil\nSchedulerParameters=bf_continue\nNoSuchKey=1\n"
        );
        let found = slurm_conf(&full, &[]);
        assert_eq!(
            keys(&found),
            vec![
                (24, "MailProg", "/usr/bin/evil", Some(Program)),
                (26, "NoSuchKey", "1", None)
            ]
        );
        assert!(found.iter().all(|a| a.file == "slurm.conf"));
    }

    #[test]
    fn a_changed_value_of_an_own_key_counts() {
        let full = SKELETON.replace("SlurmctldPort=6817", "SlurmctldPort=7000");
        assert_eq!(
            keys(&slurm_conf(&full, &[])),
            vec![(5, "SlurmctldPort", "7000", Some(Address))]
        );
        // A second copy of a line the skeleton has once is added too (multiset).
        let full = format!("{SKELETON}SlurmUser=slurm\n");
        assert_eq!(
            keys(&slurm_conf(&full, &[])),
            vec![(24, "SlurmUser", "slurm", Some(Admin))]
        );
        // A changed data value is data.
        let full = SKELETON.replace("CR_Core_Memory", "CR_Core");
        assert_eq!(slurm_conf(&full, &[]), vec![]);
    }

    #[test]
    fn allowed_keys_pass_without_case() {
        let full = format!("{SKELETON}Prolog=/etc/slurm/prolog.sh\nNoSuchKey=1\n");
        assert_eq!(keys(&slurm_conf(&full, &["prolog", "NOSUCHKEY"])), vec![]);
        assert_eq!(
            keys(&slurm_conf(&full, &["NOSUCHKEY"])),
            vec![(24, "Prolog", "/etc/slurm/prolog.sh", Some(Program))]
        );
    }

    #[test]
    fn continuation_comments_quotes_and_escapes() {
        let full = format!(
            "{SKELETON}# Prolog=/not/read\n\
             Epi\\\nlog=/bin/evil # a comment\n\
             Licenses=\"a b\"\n\
             HealthCheckInterval=60 \\# HealthCheckProgram=/x\n\
             Task\\Prolog=/bin/t\n"
        );
        assert_eq!(
            keys(&slurm_conf(&full, &[])),
            vec![
                (25, "Epilog", "/bin/evil", Some(Program)),
                (28, "#", "", None),
                (28, "HealthCheckProgram", "/x", Some(Program)),
                (29, "TaskProlog", "/bin/t", Some(Program)),
            ]
        );
        // An escaped `#` starts no comment: what follows it is read, here as text Slurm cannot parse.
        let odd = format!("{SKELETON}HealthCheckInterval=60 \\#junk\n");
        assert_eq!(keys(&slurm_conf(&odd, &[])), vec![(24, "#junk", "", None)]);
    }

    #[test]
    fn node_and_partition_line_parameters() {
        let full = SKELETON
            .replace(
                "NodeName=cpu-[0-9] State=FUTURE CPUs=4 RealMemory=8000",
                "NodeName=cpu-[0-9] State=FUTURE CPUs=8 RealMemory=8000 NodeAddr=10.0.0.1 Port=6818",
            )
            .replace(
                "PartitionName=gpu Nodes=gpu State=UP",
                "PartitionName=gpu Nodes=gpu State=UP MaxNodes=4 AllowAccounts=a,b Bogus=1",
            );
        // CPUs=8 and the partition options are data; Port=6818 is the gpu line's, not this one's.
        assert_eq!(
            keys(&slurm_conf(&full, &[])),
            vec![
                (19, "NodeAddr", "10.0.0.1", Some(Address)),
                (19, "Port", "6818", Some(Address)),
                (23, "Bogus", "1", None),
            ]
        );
        // A new node line with the skeleton's own Port value is still a new address.
        let full = format!("{SKELETON}NodeName=x Port=6818\n");
        assert_eq!(
            keys(&slurm_conf(&full, &[])),
            vec![(24, "Port", "6818", Some(Address))]
        );
    }

    #[test]
    fn include_and_text_that_is_no_key_value() {
        let full = format!("{SKELETON}include /etc/other.conf\nsomething odd\nKey\n");
        assert_eq!(
            keys(&slurm_conf(&full, &[])),
            vec![
                (24, "include", "/etc/other.conf", Some(Admin)),
                (25, "something", "", None),
                (25, "odd", "", None),
                (26, "Key", "", None),
            ]
        );
        // Garbage is refused even when an allowance names the word.
        let full = format!("{SKELETON}Prolog /bin/x\n");
        assert_eq!(
            keys(&slurm_conf(&full, &["prolog"])),
            vec![(24, "Prolog", "", None), (24, "/bin/x", "", None)]
        );
    }

    #[test]
    fn unicode_blanks_and_nul_bytes() {
        // Any whitespace ends an unquoted value, so a key behind a Unicode blank is seen.
        let full = SKELETON.replace(
            "NodeName=gpu-[0-3] State=FUTURE CPUs=16",
            "NodeName=gpu-[0-3] State=FUTURE\u{2003}NodeAddr=evil CPUs=16",
        );
        assert_eq!(
            keys(&slurm_conf(&full, &[])),
            vec![(20, "NodeAddr", "evil", Some(Address))]
        );
        // Slurm does not read past a NUL on a line.
        let full = format!("{SKELETON}SelectTypeParameters=CR_Core_Memory\0Prolog=/x\n");
        assert_eq!(
            keys(&slurm_conf(&full, &[])),
            vec![] as Vec<(usize, &str, &str, Option<KeyClass>)>,
            "the second SelectTypeParameters is data"
        );
    }

    #[test]
    fn other_files_and_files_not_covered() {
        let skeleton = map(&[
            (
                "gres.conf",
                "NodeName=g-[0-3] Name=gpu Type=a100 File=/dev/nvidia[0-7]\n",
            ),
            (
                "cgroup.conf",
                "CgroupPlugin=autodetect\nConstrainCores=yes\n",
            ),
        ]);
        let full = map(&[
            (
                "gres.conf",
                "NodeName=g-[0-3] Name=gpu Type=a100 File=/dev/nvidia[0-7]\n\
                 NodeName=x Name=gpu File=/dev/nvidia[0-7]\n",
            ),
            (
                "cgroup.conf",
                "CgroupPlugin=autodetect\nConstrainCores=yes\nConstrainRAMSpace=yes\n\
                 CgroupMountpoint=/x\n",
            ),
            ("mpi.conf", "PMIxTimeout=30\npmixenv=A=1\n"),
            ("plugstack.conf", "required /x.so\n"),
            ("job_submit.lua", "os.execute('x')\n"),
        ]);
        let found = added(&skeleton, &full, &[]);
        let got: Vec<(&str, usize, &str, Option<KeyClass>)> = found
            .iter()
            .map(|a| (a.file.as_str(), a.line, a.key.as_str(), a.class))
            .collect();
        assert_eq!(
            got,
            vec![
                ("cgroup.conf", 4, "CgroupMountpoint", Some(Admin)),
                ("gres.conf", 2, "File", Some(Admin)),
                ("mpi.conf", 2, "pmixenv", Some(Environment)),
            ]
        );
    }

    #[test]
    fn many_partition_options_stay_fast() {
        let mut line = String::from("PartitionName=p Nodes=cpu");
        for i in 0..100_000 {
            line.push_str(&format!(" MaxNodes={i}"));
        }
        line.push_str(" Prolog=/x\n");
        let full = format!("{SKELETON}{line}");
        let started = std::time::Instant::now();
        let found = slurm_conf(&full, &[]);
        assert_eq!(keys(&found), vec![(24, "Prolog", "/x", Some(Program))]);
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn reads_lines_as_slurm_does() {
        let lines = logical_lines("a=1 \\\n b=2\\\\\nc=\\#3 # x\n\\\n");
        let got: Vec<(usize, &str)> = lines.iter().map(|l| (l.number, l.text.as_str())).collect();
        assert_eq!(got, vec![(1, "a=1  b=2\\"), (3, "c=#3 "), (4, "")]);
        assert_eq!(
            pairs("Key = \"a b\" K2+=v K3=\"x\"y"),
            vec![
                Pair {
                    key: "Key",
                    op: "",
                    value: "a b",
                    garbage: false
                },
                Pair {
                    key: "K2",
                    op: "+",
                    value: "v",
                    garbage: false
                },
                Pair {
                    key: "K3",
                    op: "",
                    value: "\"x\"y",
                    garbage: false
                },
            ]
        );
    }
}
