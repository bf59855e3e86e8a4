//! What each key of a Slurm configuration file does, for the `guarded` trust level: a push may
//! put only [`KeyClass::Data`] into Slurm's files; a key that names a program, a network address,
//! environment or administrator rights needs an install allowance, and a key this table does not
//! know is refused like those (closed by default).
//!
//! The table itself ([`super::slurm_key_table`]) comes from Slurm's man5 pages and the parse
//! tables of Slurm 25.11.7, with the keys Slurm 24.11 reads and later releases dropped; its module
//! doc says which. Keys are compared without ASCII case, as Slurm's parser compares them.

pub use super::key_class::KeyClass;
use super::slurm_key_table::FILES;

/// The keys of FILE (a name like `slurm.conf`; a path is taken by its last component), or None
/// when the table does not cover that file.
fn keys_of(file: &str) -> Option<&'static [(&'static str, KeyClass)]> {
    let name = file.rsplit('/').next().unwrap_or(file);
    FILES
        .iter()
        .find(|(f, _)| *f == name)
        .map(|(_, keys)| *keys)
}

/// Whether the table covers FILE: its keys are known and [`class`] answers for them.
pub fn covers(file: &str) -> bool {
    keys_of(file).is_some()
}

/// `a` against `b` as ASCII-lowercased byte strings: the order the tables are sorted in.
fn cmp_ignore_case(a: &str, b: &str) -> std::cmp::Ordering {
    a.bytes()
        .map(|c| c.to_ascii_lowercase())
        .cmp(b.bytes().map(|c| c.to_ascii_lowercase()))
}

/// The class of KEY in config file FILE (`slurm.conf`, `slurmdbd.conf`, `cgroup.conf`, ...),
/// compared without ASCII case as Slurm reads keys. None: a key not known for that file in any
/// of Slurm 24.11, 25.11 and 26.05 as far as the table knows, or a file the table does not cover.
pub fn class(file: &str, key: &str) -> Option<KeyClass> {
    let keys = keys_of(file)?;
    keys.binary_search_by(|(k, _)| cmp_ignore_case(k, key))
        .ok()
        .map(|i| keys[i].1)
}

/// The files the table covers.
pub fn files() -> &'static [&'static str] {
    static NAMES: [&str; FILES.len()] = {
        let mut names = [""; FILES.len()];
        let mut i = 0;
        while i < FILES.len() {
            names[i] = FILES[i].0;
            i += 1;
        }
        names
    };
    &NAMES
}

/// How many keys of FILE the table holds in each class, Data first (for documentation).
pub fn counts(file: &str) -> Option<[usize; 5]> {
    let keys = keys_of(file)?;
    let mut n = [0; 5];
    for (_, c) in keys {
        n[*c as usize] += 1;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::KeyClass::*;
    use super::*;

    #[test]
    fn every_table_is_sorted_without_case_and_has_no_duplicate() {
        for (file, keys) in FILES {
            for pair in keys.windows(2) {
                assert_eq!(
                    cmp_ignore_case(pair[0].0, pair[1].0),
                    std::cmp::Ordering::Less,
                    "{file}: {} then {}",
                    pair[0].0,
                    pair[1].0
                );
            }
            for (k, c) in keys.iter() {
                assert_eq!(class(file, k), Some(*c), "{file}: {k}");
                assert!(
                    k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                    "{file}: {k}"
                );
            }
            assert_eq!(class(file, "Include"), Some(Admin), "{file}");
        }
        assert_eq!(files().len(), FILES.len());
        assert!(files().contains(&"slurm.conf"));
    }

    #[test]
    fn slurm_conf_classes() {
        let f = "slurm.conf";
        for k in [
            "Prolog",
            "Epilog",
            "mailprog",
            "RebootProgram",
            "ResumeProgram",
            "HealthCheckProgram",
            "PluginDir",
            "PlugStackConfig",
            "JobSubmitPlugins",
            "JobCompLoc",
            "SelectType",
            "TaskProlog",
            "SlurmctldPrimaryOnProg",
            "ResvProlog",
            "CertmgrType",
        ] {
            assert_eq!(class(f, k), Some(Program), "{k}");
        }
        for k in [
            "SlurmctldHost",
            "SLURMCTLDADDR",
            "ControlMachine",
            "BackupController",
            "AccountingStorageHost",
            "AccountingStoragePort",
            "SlurmdPort",
            "CommunicationParameters",
            "NodeAddr",
            "Port",
        ] {
            assert_eq!(class(f, k), Some(Address), "{k}");
        }
        for k in [
            "SlurmUser",
            "AuthType",
            "AuthAltParameters",
            "CredType",
            "StateSaveLocation",
            "SlurmctldLogFile",
            "SlurmctldParameters",
            "LaunchParameters",
            "TmpFS",
            "JobCredentialPrivateKey",
            "ClusterName",
            "include",
        ] {
            assert_eq!(class(f, k), Some(Admin), "{k}");
        }
        for k in [
            "SchedulerParameters",
            "SelectTypeParameters",
            "DebugFlags",
            "AccountingStorageEnforce",
            "PrivateData",
            "PropagateResourceLimits",
            "NodeName",
            "PartitionName",
            "NodeSet",
            "CPUs",
            "RealMemory",
            "maxtime",
            "OverSubscribe",
            "AllowAccounts",
            "Weight",
        ] {
            assert_eq!(class(f, k), Some(Data), "{k}");
        }
        assert_eq!(class(f, "NoSuchKey"), None);
        assert_eq!(class(f, ""), None);
        assert_eq!(
            class(f, "PMIxEnv"),
            None,
            "an mpi.conf key is not slurm.conf's"
        );
    }

    #[test]
    fn other_files_classes() {
        let cases: &[(&str, &str, Option<KeyClass>)] = &[
            ("slurmdbd.conf", "StorageHost", Some(Address)),
            ("slurmdbd.conf", "dbdport", Some(Address)),
            ("slurmdbd.conf", "StoragePass", Some(Admin)),
            ("slurmdbd.conf", "ArchiveScript", Some(Program)),
            ("slurmdbd.conf", "PurgeJobAfter", Some(Data)),
            ("cgroup.conf", "CgroupPlugin", Some(Program)),
            ("cgroup.conf", "CgroupMountpoint", Some(Admin)),
            ("cgroup.conf", "AllowedDevicesFile", Some(Admin)),
            ("cgroup.conf", "ConstrainRAMSpace", Some(Data)),
            ("cgroup.conf", "AllowedKmemSpace", Some(Data)),
            ("gres.conf", "AutoDetect", Some(Program)),
            ("gres.conf", "File", Some(Admin)),
            ("gres.conf", "Name", Some(Data)),
            ("gres.conf", "Count", Some(Data)),
            ("mpi.conf", "PMIXENV", Some(Environment)),
            ("mpi.conf", "PMIxTimeout", Some(Data)),
            ("acct_gather.conf", "ProfileInfluxDBHost", Some(Address)),
            ("acct_gather.conf", "EnergyIPMIPassword", Some(Admin)),
            ("acct_gather.conf", "EnergyIPMIFrequency", Some(Data)),
            ("oci.conf", "RunTimeRun", Some(Program)),
            ("oci.conf", "EnvExclude", Some(Environment)),
            ("oci.conf", "ContainerPath", Some(Admin)),
            ("oci.conf", "StdIODebug", Some(Data)),
            ("job_container.conf", "InitScript", Some(Program)),
            ("job_container.conf", "BasePath", Some(Admin)),
            ("job_container.conf", "EntireStepInNS", Some(Data)),
            ("helpers.conf", "Helper", Some(Program)),
            ("helpers.conf", "BootTime", Some(Data)),
            ("burst_buffer.conf", "GetSysState", Some(Program)),
            ("burst_buffer.conf", "StageInTimeout", Some(Data)),
            ("topology.conf", "SwitchName", Some(Data)),
            ("topology.conf", "Prolog", None),
            ("plugstack.conf", "required", None),
            ("topology.yaml", "topology", None),
            ("etc/slurm/gres.conf", "autodetect", Some(Program)),
        ];
        for (file, key, want) in cases {
            assert_eq!(class(file, key), *want, "{file}: {key}");
        }
        assert!(covers("cgroup.conf"));
        assert!(!covers("plugstack.conf"));
        assert!(!covers("job_submit.lua"));
    }

    #[test]
    fn names_and_reasons() {
        assert_eq!(Address.as_str(), "network address");
        assert!(Program.why().contains("program"));
        assert!(Data < Program && Program < Admin);
        let n = counts("mpi.conf").unwrap();
        assert_eq!(
            n.iter().sum::<usize>(),
            super::keys_of("mpi.conf").unwrap().len()
        );
    }
}
