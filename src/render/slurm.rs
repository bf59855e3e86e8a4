//! Slurm's own config files (slurm.conf, cgroup.conf, gres.conf, topology.yaml, slurmdbd.conf),
//! rendered from minijinja templates compiled into the binary. The values are computed here,
//! the templates only lay them out, so what a line says is testable without text matching.

use std::collections::BTreeMap;

use minijinja::{Environment, context};
use serde::Serialize;

use super::names::{HA_TAKEOVER_SECONDS, Names};
use crate::cluster::types::{ClusterFile, GpuDetect, NodeSet};
use crate::cluster::values::{SlurmValue, parse_quantity};

pub use super::names::{SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT, SLURMRESTD_PORT};
/// Where every pod finds the Slurm config and keys.
pub const ETC_SLURM: &str = "/etc/slurm";
pub const JWT_KEY_FILE: &str = "jwt_hs256.key";
/// The health check's key in the slurm ConfigMap and its file name in each worker's /etc/slurm.
pub const HEALTH_CHECK_FILE: &str = "health-check.sh";
pub const STATE_SAVE: &str = "/var/spool/slurmctld";

/// slurm.conf parameters whose value is a comma-separated list: user values are merged with
/// the generated ones instead of replacing them.
const LIST_PARAMS: &[&str] = &[
    "Licenses",
    "SlurmctldParameters",
    "SlurmdParameters",
    "AuthInfo",
    "AuthAltTypes",
    "AuthAltParameters",
    "SchedulerParameters",
    "TopologyParam",
    "PrologFlags",
    "CommunicationParameters",
    "DebugFlags",
    "LaunchParameters",
    "GresTypes",
    "TaskPlugin",
];

/// The rendered Slurm files, by file name.
pub type SlurmFiles = BTreeMap<String, String>;

#[derive(Serialize)]
struct Line {
    key: String,
    value: String,
}

fn env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_keep_trailing_newline(true);
    for (name, src) in [
        ("slurm.conf", include_str!("templates/slurm.conf.j2")),
        ("cgroup.conf", include_str!("templates/cgroup.conf.j2")),
        ("gres.conf", include_str!("templates/gres.conf.j2")),
        ("topology.yaml", include_str!("templates/topology.yaml.j2")),
        ("slurmdbd.conf", include_str!("templates/slurmdbd.conf.j2")),
    ] {
        env.add_template(name, src)
            .expect("templates compiled into the binary are valid");
    }
    env
}

fn render(env: &Environment, name: &str, ctx: minijinja::Value) -> String {
    // Templates are fixed and their inputs are plain data, so rendering cannot fail at runtime;
    // a failure here is a bug in the template that the golden tests catch.
    env.get_template(name)
        .and_then(|t| t.render(ctx))
        .expect("slurmops template renders")
}

/// Every node a NodeSet may ever have, as a Slurm hostlist (`h100-[0-15]`).
pub fn node_range(ns: &NodeSet) -> String {
    let max = ns.max_workers().max(1);
    if max == 1 {
        format!("{}-0", ns.name)
    } else {
        format!("{}-[0-{}]", ns.name, max - 1)
    }
}

/// The FUTURE node of a NodeSet that autoscales from zero (`NAME-future`): in the NodeSet through
/// its features, sized like a worker, so that Slurm accepts (and holds) the jobs its first workers
/// will run. Never a worker's name (those end in a number).
pub fn placeholder(ns: &NodeSet) -> String {
    format!("{}-future", ns.name)
}

/// The `--conf` line of a NodeSet's dynamic slurmd: its features, GPUs, size and weight.
pub fn slurmd_conf(ns: &NodeSet) -> String {
    let mut features = vec![ns.name.clone()];
    features.extend(ns.features.iter().cloned());
    let mut parts = vec![format!("Features={}", features.join(","))];
    if let Some(g) = &ns.gpus {
        parts.push(format!("Gres=gpu:{}:{}", g.type_, g.count));
    }
    if let Some(cpus) = ns
        .cpu
        .as_deref()
        .and_then(parse_quantity)
        .filter(|c| c.fract() == 0.0 && *c >= 1.0)
    {
        parts.push(format!("CPUs={cpus}"));
    }
    if let Some(bytes) = ns.memory.as_deref().and_then(parse_quantity) {
        parts.push(format!(
            "RealMemory={}",
            (bytes / (1024.0 * 1024.0)).floor()
        ));
    }
    if let Some(w) = ns.weight {
        parts.push(format!("Weight={w}"));
    }
    parts.join(" ")
}

fn merge(params: &mut Vec<(String, String)>, key: &str, value: &SlurmValue) {
    let is_list = LIST_PARAMS.iter().any(|k| k.eq_ignore_ascii_case(key));
    match params.iter_mut().find(|(k, _)| k.eq_ignore_ascii_case(key)) {
        Some((_, existing)) if is_list => {
            let mut items: Vec<String> = existing.split(',').map(str::to_string).collect();
            for item in value.items() {
                if !items.contains(&item) {
                    items.push(item);
                }
            }
            *existing = items.join(",");
        }
        Some((_, existing)) => *existing = value.render(),
        None => params.push((key.to_string(), value.render())),
    }
}

fn slurm_conf_params(c: &ClusterFile, names: &Names) -> Vec<(String, String)> {
    let s = &c.spec;
    let mut p: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: String| p.push((k.to_string(), v));
    set("ClusterName", names.cluster_name.clone());
    for host in names.controller_hosts(s) {
        set("SlurmctldHost", host);
    }
    if s.controller.ha.is_some() {
        // How long the backups wait for a silent primary before one takes control. Slurm's own
        // default (120 s) is two minutes of refused submissions; slurmConf may set another.
        set("SlurmctldTimeout", HA_TAKEOVER_SECONDS.to_string());
    }
    if s.behind_one_address() {
        // Clients' one address: the Service whose only endpoint is the controller in control.
        set("SlurmctldAddr", names.controller_address());
    }
    set("SlurmctldPort", SLURMCTLD_PORT.to_string());
    set("SlurmdPort", SLURMD_PORT.to_string());
    set("SlurmUser", "slurm".into());
    set("SlurmdUser", "root".into());
    set("StateSaveLocation", STATE_SAVE.into());
    set("SlurmdSpoolDir", "/var/spool/slurmd".into());
    set("SlurmctldPidFile", "/run/slurmctld/slurmctld.pid".into());
    set("SlurmdPidFile", "/run/slurmd/slurmd.pid".into());
    set("AuthType", "auth/slurm".into());
    set("CredType", "cred/slurm".into());
    set("AuthInfo", "use_client_ids".into());
    set("AuthAltTypes", "auth/jwt".into());
    set(
        "AuthAltParameters",
        format!("jwt_key={ETC_SLURM}/{JWT_KEY_FILE}"),
    );
    set(
        "SlurmctldParameters",
        "enable_configless,reconfig_on_restart".into(),
    );
    let max_nodes: u32 = s
        .node_sets
        .iter()
        .map(|n| n.max_workers())
        .fold(0, u32::saturating_add);
    set(
        "MaxNodeCount",
        max_nodes.saturating_mul(2).max(1024).to_string(),
    );
    set("ReturnToService", "2".into());
    set("SchedulerType", "sched/backfill".into());
    set("SelectType", "select/cons_tres".into());
    set("SelectTypeParameters", "CR_Core_Memory".into());
    set("ProctrackType", "proctrack/cgroup".into());
    set("TaskPlugin", "task/cgroup,task/affinity".into());
    set("JobAcctGatherType", "jobacct_gather/cgroup".into());
    if s.accounting.enabled {
        set(
            "AccountingStorageType",
            "accounting_storage/slurmdbd".into(),
        );
        set("AccountingStorageHost", names.accounting_host());
        set("AccountingStoragePort", SLURMDBD_PORT.to_string());
        // QOS and account limits declared in git mean nothing unless slurmctld enforces them.
        if s.accounting.manages_objects() {
            set(
                "AccountingStorageEnforce",
                "associations,limits,qos,safe".into(),
            );
        }
        if s.node_sets.iter().any(|n| n.gpus.is_some()) {
            set("AccountingStorageTRES", "gres/gpu".into());
        }
    } else {
        set("AccountingStorageType", "accounting_storage/none".into());
    }
    if s.node_sets.iter().any(|n| n.gpus.is_some()) {
        set("GresTypes", "gpu".into());
    }
    if s.node_sets
        .iter()
        .any(|n| n.imex.as_ref().is_some_and(|x| x.enabled))
    {
        set("SwitchType", "switch/nvidia_imex".into());
    }
    let release = crate::cluster::release::find(&s.slurm_version);
    // The topologies themselves are in topology.yaml (the block one the cluster default).
    if s.topology
        .as_ref()
        .and_then(|t| t.block.as_ref())
        .is_some_and(|b| b.block_as_node_rank)
        && release.is_some_and(|r| r.block_as_node_rank)
    {
        set("TopologyParam", "BlockAsNodeRank".into());
    }
    if s.controller.metrics.enabled && release.is_some_and(|r| r.openmetrics) {
        set("MetricsType", "metrics/openmetrics".into());
    }
    let scripts = &s.controller.scripts;
    // Configless Slurm ships Prolog/Epilog scripts to slurmd only when their path is relative to
    // slurm.conf's directory; the slurmctld ones run where the files are mounted.
    let kinds = [
        ("Prolog", &scripts.prolog, ""),
        ("Epilog", &scripts.epilog, ""),
        ("PrologSlurmctld", &scripts.prolog_slurmctld, "/etc/slurm/"),
        ("EpilogSlurmctld", &scripts.epilog_slurmctld, "/etc/slurm/"),
    ];
    for (key, list, dir) in kinds {
        if !list.is_empty() {
            set(
                key,
                list.iter()
                    .map(|sc| format!("{dir}{}", sc.name))
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
    }
    if let Some(h) = &s.controller.health_check {
        // A ConfigMap key mounted into each worker (not a configless file: Slurm does not ship
        // HealthCheckProgram), refreshed in place by the kubelet when it changes.
        set(
            "HealthCheckProgram",
            format!("{ETC_SLURM}/{HEALTH_CHECK_FILE}"),
        );
        set("HealthCheckInterval", h.interval.as_secs().to_string());
        let states: Vec<&str> = h.node_state.iter().map(|n| n.as_str()).collect();
        if !states.is_empty() {
            set("HealthCheckNodeState", states.join(","));
        }
    }
    // Each active check's cap, enforced by slurmctld: its jobs take one license each.
    let licenses: Vec<String> = s
        .policy
        .active_checks
        .iter()
        .map(|c| format!("{}:{}", c.license(), c.max_concurrent))
        .collect();
    if !licenses.is_empty() {
        set("Licenses", licenses.join(","));
    }
    for (k, v) in &s.controller.slurm_conf {
        merge(&mut p, k, v);
    }
    p
}

fn lines(params: Vec<(String, String)>) -> Vec<Line> {
    params
        .into_iter()
        .map(|(key, value)| Line { key, value })
        .collect()
}

/// All Slurm files of the cluster. Files that do not apply (gres.conf without GPUs, ...) are absent.
pub fn render_files(c: &ClusterFile, names: &Names) -> SlurmFiles {
    let env = env();
    let s = &c.spec;
    let mut files = SlurmFiles::new();
    let partitions: Vec<_> = s
        .partitions
        .iter()
        .map(|p| {
            let nodes = if p.node_sets.iter().any(|n| n == "ALL") { "ALL".to_string() } else { p.node_sets.join(",") };
            let mut options: Vec<(String, String)> = p.topology.iter().map(|t| ("Topology".to_string(), t.slurm_name().to_string())).collect();
            options.extend(p.options.iter().map(|(k, v)| (k.clone(), v.render())));
            let options = lines(options);
            context! { name => p.name, nodes, default => p.default, max_time => p.max_time, options }
        })
        .collect();
    let node_sets: Vec<_> = s
        .node_sets
        .iter()
        .map(|n| context! { name => n.name })
        .collect();
    let future: Vec<_> = s
        .node_sets
        .iter()
        .filter(|n| n.autoscale.as_ref().is_some_and(|a| a.min == 0))
        .map(|n| context! { name => placeholder(n), conf => slurmd_conf(n) })
        .collect();
    let slurm_conf = render(
        &env,
        "slurm.conf",
        context! { cluster_name => names.cluster_name, params => lines(slurm_conf_params(c, names)), node_sets, partitions, future },
    );
    files.insert("slurm.conf".into(), slurm_conf);
    files.insert(
        "cgroup.conf".into(),
        render(&env, "cgroup.conf", context! {}),
    );
    let gpus: Vec<_> = s
        .node_sets
        .iter()
        .filter_map(|n| n.gpus.as_ref().map(|g| (n, g)))
        .map(|(n, g)| {
            let autodetect = match g.autodetect {
                GpuDetect::Nvml => "nvml",
                GpuDetect::Files => "files",
            };
            context! { nodes => node_range(n), type => g.type_, count => g.count, autodetect }
        })
        .collect();
    if !gpus.is_empty() {
        files.insert(
            "gres.conf".into(),
            render(&env, "gres.conf", context! { gpus }),
        );
    }
    if let Some(t) = &s.topology {
        files.insert(
            "topology.yaml".into(),
            render(&env, "topology.yaml", topology_context(t)),
        );
    }
    // The user's extra files written in cluster.yaml; referenced ones are mounted from their
    // Secret or ConfigMap (components::controller).
    for (name, f) in &s.controller.config_files {
        if let Some(content) = &f.content {
            files.insert(name.clone(), content.clone());
        }
    }
    if s.accounting.enabled
        && let Some(db) = &s.accounting.database
    {
        let mut params: Vec<(String, String)> = vec![
            ("AuthType".into(), "auth/slurm".into()),
            ("AuthAltTypes".into(), "auth/jwt".into()),
            (
                "AuthAltParameters".into(),
                format!("jwt_key={ETC_SLURM}/{JWT_KEY_FILE}"),
            ),
            ("DbdHost".into(), names.accounting_pod()),
            ("DbdPort".into(), SLURMDBD_PORT.to_string()),
            ("SlurmUser".into(), "slurm".into()),
            ("PidFile".into(), "/run/slurmdbd/slurmdbd.pid".into()),
            ("StorageType".into(), "accounting_storage/mysql".into()),
            (
                "StorageHost".into(),
                db.host.clone().unwrap_or_else(|| names.database_host()),
            ),
            ("StoragePort".into(), db.port.to_string()),
            ("StorageLoc".into(), db.name.clone()),
            ("StorageUser".into(), db.user.clone()),
        ];
        for (k, v) in &s.accounting.slurmdbd_conf {
            merge(&mut params, k, v);
        }
        files.insert(
            "slurmdbd.conf".into(),
            render(
                &env,
                "slurmdbd.conf",
                context! { params => lines(params), password_secret => db.password.name },
            ),
        );
    }
    files
}

fn topology_context(t: &crate::cluster::types::Topology) -> minijinja::Value {
    use crate::cluster::types::{TOPOLOGY_BLOCK, TOPOLOGY_TREE};
    let block = t.block.as_ref().map(|b| {
        context! {
            name => TOPOLOGY_BLOCK,
            blocks => b.blocks,
            block_size => b.block_size.max(1),
            node_label => b.node_label,
        }
    });
    let tree = t.tree.as_ref().map(|tr| {
        context! {
            name => TOPOLOGY_TREE,
            switches => tr.switches,
            node_label => tr.node_label,
            default => t.block.is_none(),
        }
    });
    context! { block, tree }
}

/// A worker's `TOPOLOGY:UNIT` (its block or leaf switch in topology NAME), as slurmops sets it
/// and slurmrestd reports it.
pub fn node_topology(name: &str, unit: &str) -> String {
    format!("{name}:{unit}")
}

/// Script files shipped next to slurm.conf, by file name.
pub fn script_files(c: &ClusterFile) -> BTreeMap<String, String> {
    c.spec
        .controller
        .scripts
        .all()
        .map(|sc| (sc.name.clone(), sc.content.clone()))
        .collect()
}
