//! The keys of every Slurm key=value file slurmops covers, each with its [`KeyClass`], sorted by
//! their ASCII-lowercased names so that [`super::slurm_keys::class`] finds one by binary search.
//!
//! Where they come from: the parse tables (`s_p_options_t`) of Slurm 25.11.7 — the options of
//! `slurm.conf` with its `NodeName`, `PartitionName`, `NodeSet` and `DownNodes` line options
//! (src/common/read_config.c), `slurmdbd.conf` (src/slurmdbd/read_config.c), `cgroup.conf`
//! (src/interfaces/cgroup.c), `gres.conf` (src/interfaces/gres.c), `mpi.conf` (mpi/pmix),
//! `acct_gather.conf` (the energy ipmi and xcc, interconnect ofed and sysfs, profile hdf5 and
//! influxdb plugins), `oci.conf` (src/common/oci_config.c), `job_container.conf` (namespace/tmpfs),
//! `helpers.conf` (node_features/helpers), `burst_buffer.conf` (burst_buffer common) and
//! `topology.conf` (topology/tree and topology/block) — checked against the man5 pages of the same
//! release, which document no key those tables lack. `Include` (parse_config.c) is in every file.
//!
//! Kept for Slurm 24.11, which still reads them: `FrontendName` lines (`FrontendAddr`,
//! `AllowUsers`, `DenyUsers`, `DenyGroups`; front-end support went in 25.05), the kmem keys of
//! cgroup.conf and `ext_sensors.conf` (its plugin is defunct in 25.11, its man page remains). Keys
//! 25.11 keeps only to warn about (`AccountingStorageUser`, `JobCredentialPrivateKey`,
//! `GetEnvTimeout`, ...) and the old aliases (`ControlMachine`, `BackupController`, `CryptoType`,
//! `SchedulerPort`, `SlurmctldPlugstack`) are here too. No 26.05 source was at hand: a key only
//! 26.05 knows is unknown here, which refuses it.
//!
//! One namespace per file: a key that is an option of a line (`Port` of a `NodeName` line) sits
//! beside the file's top-level keys, with the stricter class where the two would differ.

use super::key_class::KeyClass::{self, Address, Admin, Data, Environment, Program};
use super::slurm_conf_keys::SLURM_CONF;

/// `slurmdbd.conf`.
pub(super) const SLURMDBD_CONF: &[(&str, KeyClass)] = &[
    ("AllowNoDefAcct", Data),
    ("AllResourcesAbsolute", Data),
    ("ArchiveDir", Admin),
    ("ArchiveEvents", Data),
    ("ArchiveJobs", Data),
    ("ArchiveResvs", Data),
    ("ArchiveScript", Program),
    ("ArchiveSteps", Data),
    ("ArchiveSuspend", Data),
    ("ArchiveTXN", Data),
    ("ArchiveUsage", Data),
    ("AuthAltParameters", Admin),
    ("AuthAltTypes", Admin),
    ("AuthInfo", Admin),
    ("AuthType", Admin),
    ("CommitDelay", Data),
    ("CommunicationParameters", Address),
    ("DbdAddr", Address),
    ("DbdBackupHost", Address),
    ("DbdHost", Address),
    ("DbdPort", Address),
    ("DebugFlags", Data),
    ("DebugLevel", Data),
    ("DebugLevelSyslog", Data),
    ("DefaultQOS", Data),
    ("DisableArchiveCommands", Admin),
    ("DisableCoordDBD", Admin),
    ("HashPlugin", Program),
    ("Include", Admin),
    ("JobPurge", Data),
    ("LogFile", Admin),
    ("LogTimeFormat", Data),
    ("MaxPurgeLimit", Data),
    ("MaxQueryTimeRange", Data),
    ("MessageTimeout", Data),
    ("Parameters", Admin),
    ("PidFile", Admin),
    ("PluginDir", Program),
    ("PrivateData", Data),
    ("PurgeEventAfter", Data),
    ("PurgeEventMonths", Data),
    ("PurgeJobAfter", Data),
    ("PurgeJobMonths", Data),
    ("PurgeResvAfter", Data),
    ("PurgeStepAfter", Data),
    ("PurgeStepMonths", Data),
    ("PurgeSuspendAfter", Data),
    ("PurgeSuspendMonths", Data),
    ("PurgeTXNAfter", Data),
    ("PurgeTXNMonths", Data),
    ("PurgeUsageAfter", Data),
    ("PurgeUsageMonths", Data),
    ("SlurmUser", Admin),
    ("StepPurge", Data),
    ("StorageBackupHost", Address),
    ("StorageHost", Address),
    ("StorageLoc", Admin),
    ("StorageParameters", Admin),
    ("StoragePass", Admin),
    ("StoragePassScript", Program),
    ("StoragePort", Address),
    ("StorageType", Program),
    ("StorageUser", Admin),
    ("TCPTimeout", Data),
    ("TLSParameters", Admin),
    ("TLSType", Program),
    ("TrackSlurmctldDown", Data),
    ("TrackWCKey", Data),
];

/// `cgroup.conf`.
pub(super) const CGROUP_CONF: &[(&str, KeyClass)] = &[
    ("AllowedDevicesFile", Admin),
    ("AllowedKmemSpace", Data),
    ("AllowedRAMSpace", Data),
    ("AllowedSwapSpace", Data),
    ("CgroupAutomount", Data),
    ("CgroupMountpoint", Admin),
    ("CgroupPlugin", Program),
    ("CgroupSlice", Admin),
    ("ConstrainCores", Data),
    ("ConstrainDevices", Data),
    ("ConstrainKmemSpace", Data),
    ("ConstrainRAMSpace", Data),
    ("ConstrainSwapSpace", Data),
    ("EnableControllers", Data),
    ("EnableExtraControllers", Data),
    ("IgnoreSystemd", Data),
    ("IgnoreSystemdOnFailure", Data),
    ("Include", Admin),
    ("MaxKmemPercent", Data),
    ("MaxRAMPercent", Data),
    ("MaxSwapPercent", Data),
    ("MemoryLimitEnforcement", Data),
    ("MemoryLimitThreshold", Data),
    ("MemorySwappiness", Data),
    ("MinKmemSpace", Data),
    ("MinRAMSpace", Data),
    ("SignalChildrenProcesses", Data),
    ("SystemdTimeout", Data),
];

/// `gres.conf`.
pub(super) const GRES_CONF: &[(&str, KeyClass)] = &[
    ("AutoDetect", Program),
    ("Cores", Data),
    ("Count", Data),
    ("CPUs", Data),
    ("File", Admin),
    ("Files", Admin),
    ("Flags", Environment),
    ("Include", Admin),
    ("Link", Admin),
    ("Links", Admin),
    ("MultipleFiles", Admin),
    ("Name", Data),
    ("NodeName", Data),
    ("Type", Data),
];

/// `mpi.conf`.
pub(super) const MPI_CONF: &[(&str, KeyClass)] = &[
    ("Include", Admin),
    ("PMIxCliTmpDirBase", Admin),
    ("PMIxCollFence", Data),
    ("PMIxDebug", Data),
    ("PMIxDirectConn", Data),
    ("PMIxDirectConnEarly", Data),
    ("PMIxDirectConnUCX", Data),
    ("PMIxDirectSameArch", Data),
    ("PMIxEnv", Environment),
    ("PMIxFenceBarrier", Data),
    ("PMIxNetDevicesUCX", Data),
    ("PMIxShareServerTopology", Data),
    ("PMIxTimeout", Data),
    ("PMIxTlsUCX", Data),
];

/// `acct_gather.conf`.
pub(super) const ACCT_GATHER_CONF: &[(&str, KeyClass)] = &[
    ("EnergyIPMIAssumeBmcOwner", Data),
    ("EnergyIPMIAuthenticationType", Admin),
    ("EnergyIPMIBridgeSensors", Data),
    ("EnergyIPMICalcAdjustment", Data),
    ("EnergyIPMICipherSuiteId", Admin),
    ("EnergyIPMIDisableAutoProbe", Admin),
    ("EnergyIPMIDiscreteReading", Data),
    ("EnergyIPMIDriverAddress", Admin),
    ("EnergyIPMIDriverDevice", Admin),
    ("EnergyIPMIDriverType", Admin),
    ("EnergyIPMIEntitySensorNames", Data),
    ("EnergyIPMIFrequency", Data),
    ("EnergyIPMIIgnoreNonInterpretableSensors", Data),
    ("EnergyIPMIIgnoreScanningDisabled", Data),
    ("EnergyIPMIInterpretOemData", Data),
    ("EnergyIPMIk_g", Admin),
    ("EnergyIPMIk_g_len", Data),
    ("EnergyIPMIPassword", Admin),
    ("EnergyIPMIPowerSensors", Data),
    ("EnergyIPMIPrivilegeLevel", Admin),
    ("EnergyIPMIProtocolVersion", Data),
    ("EnergyIPMIRegisterSpacing", Data),
    ("EnergyIPMIRereadSdrCache", Data),
    ("EnergyIPMIRetransmissionTimeout", Data),
    ("EnergyIPMISessionTimeout", Data),
    ("EnergyIPMISharedSensors", Data),
    ("EnergyIPMITimeout", Data),
    ("EnergyIPMIUsername", Admin),
    ("EnergyIPMIVariable", Data),
    ("EnergyIPMIWorkaroundFlags", Data),
    ("EnergyXCCFake", Data),
    ("Include", Admin),
    ("InfinibandOFEDPort", Data),
    ("InterconnectOFEDPort", Data),
    ("ProfileHDF5Default", Data),
    ("ProfileHDF5Dir", Admin),
    ("ProfileInfluxDBDatabase", Data),
    ("ProfileInfluxDBDefault", Data),
    ("ProfileInfluxDBFrequency", Data),
    ("ProfileInfluxDBHost", Address),
    ("ProfileInfluxDBPass", Admin),
    ("ProfileInfluxDBRTPolicy", Data),
    ("ProfileInfluxDBTimeout", Data),
    ("ProfileInfluxDBUser", Admin),
    ("SysfsInterfaces", Data),
];

/// `oci.conf`.
pub(super) const OCI_CONF: &[(&str, KeyClass)] = &[
    ("ContainerPath", Admin),
    ("CreateEnvFile", Environment),
    ("DebugFlags", Data),
    ("DisableCleanup", Admin),
    ("DisableHooks", Admin),
    ("EnvExclude", Environment),
    ("FileDebug", Data),
    ("IgnoreFileConfigJson", Admin),
    ("Include", Admin),
    ("MountSpoolDir", Admin),
    ("RunTimeCreate", Program),
    ("RunTimeDelete", Program),
    ("RunTimeEnvExclude", Environment),
    ("RunTimeKill", Program),
    ("RunTimeQuery", Program),
    ("RunTimeRun", Program),
    ("RunTimeStart", Program),
    ("SrunArgs", Program),
    ("SrunPath", Program),
    ("StdIODebug", Data),
    ("SyslogDebug", Data),
];

/// `job_container.conf`.
pub(super) const JOB_CONTAINER_CONF: &[(&str, KeyClass)] = &[
    ("AutoBasePath", Admin),
    ("BasePath", Admin),
    ("CloneNSEpilog", Program),
    ("CloneNSEpilog_Wait", Data),
    ("CloneNSScript", Program),
    ("CloneNSScript_Wait", Data),
    ("Dirs", Admin),
    ("EntireStepInNS", Data),
    ("Include", Admin),
    ("InitScript", Program),
    ("NodeName", Data),
    ("Shared", Admin),
];

/// `helpers.conf`.
pub(super) const HELPERS_CONF: &[(&str, KeyClass)] = &[
    ("AllowUserBoot", Admin),
    ("BootTime", Data),
    ("ExecTime", Data),
    ("Feature", Data),
    ("Flags", Data),
    ("Helper", Program),
    ("Include", Admin),
    ("MutuallyExclusive", Data),
    ("NodeName", Data),
];

/// `burst_buffer.conf`.
pub(super) const BURST_BUFFER_CONF: &[(&str, KeyClass)] = &[
    ("AllowUsers", Data),
    ("CreateBuffer", Program),
    ("DefaultPool", Data),
    ("DenyUsers", Data),
    ("DestroyBuffer", Program),
    ("Directive", Data),
    ("Flags", Admin),
    ("GetSysState", Program),
    ("GetSysStatus", Program),
    ("Granularity", Data),
    ("Include", Admin),
    ("OtherTimeout", Data),
    ("PollInterval", Data),
    ("Pools", Data),
    ("StageInTimeout", Data),
    ("StageOutTimeout", Data),
    ("StartStageIn", Program),
    ("StartStageOut", Program),
    ("StopStageIn", Program),
    ("StopStageOut", Program),
    ("ValidateTimeout", Data),
];

/// `topology.conf`.
pub(super) const TOPOLOGY_CONF: &[(&str, KeyClass)] = &[
    ("BlockName", Data),
    ("BlockSizes", Data),
    ("Include", Admin),
    ("LinkSpeed", Data),
    ("Nodes", Data),
    ("Switches", Data),
    ("SwitchName", Data),
];

/// `ext_sensors.conf`.
pub(super) const EXT_SENSORS_CONF: &[(&str, KeyClass)] = &[
    ("ColdDoorData", Data),
    ("EnergyPathRRD", Admin),
    ("EnergyRRA", Data),
    ("Include", Admin),
    ("JobData", Data),
    ("MaxTemp", Data),
    ("MaxWatt", Data),
    ("MinTemp", Data),
    ("MinWatt", Data),
    ("NodeData", Data),
    ("SwitchData", Data),
    ("TempPathRRD", Admin),
    ("TempRRA", Data),
];

/// Every file the table covers, by name, with its keys.
pub(super) const FILES: &[(&str, &[(&str, KeyClass)])] = &[
    ("slurm.conf", SLURM_CONF),
    ("slurmdbd.conf", SLURMDBD_CONF),
    ("cgroup.conf", CGROUP_CONF),
    ("gres.conf", GRES_CONF),
    ("mpi.conf", MPI_CONF),
    ("acct_gather.conf", ACCT_GATHER_CONF),
    ("oci.conf", OCI_CONF),
    ("job_container.conf", JOB_CONTAINER_CONF),
    ("helpers.conf", HELPERS_CONF),
    ("burst_buffer.conf", BURST_BUFFER_CONF),
    ("topology.conf", TOPOLOGY_CONF),
    ("ext_sensors.conf", EXT_SENSORS_CONF),
];
