//! Semantic checks a schema cannot express: names, references between sections, limits that
//! depend on each other, and settings slurmops must own. Each check returns findings with the
//! path of the offending value, so the caller can point at it.

use std::collections::{BTreeSet, HashSet};

mod accounting;
mod active_checks;
mod canary;
mod controller;
pub use controller::RENDERED_FILES;
mod grammar;
mod pods;
pub(crate) mod secrets;
mod topology;
mod window;

use pods::{LOGIN_VOLUMES, WORKER_VOLUMES};

use super::diag::{Finding, Path, clip, did_you_mean, listed};
use super::release;
use super::types::*;
use super::values::{IntOrPercent, SlurmValue, parse_quantity};

/// slurm.conf parameters slurmops generates; setting them in `controller.slurmConf` would break
/// the cluster it renders.
pub const OWNED_SLURM_CONF: &[(&str, &str)] = &[
    ("ClusterName", "set spec.clusterName"),
    ("SlurmctldHost", "set spec.controller.ha"),
    ("SlurmctldPort", "slurmops serves slurmctld on 6817"),
    ("SlurmdPort", "slurmops serves slurmd on 6818"),
    (
        "AuthType",
        "slurmops configures auth/slurm with spec.auth.slurmKey",
    ),
    (
        "CredType",
        "slurmops configures cred/slurm with spec.auth.slurmKey",
    ),
    ("StateSaveLocation", "set spec.controller.persistence"),
    ("NodeName", "workers are NodeSets: add one to spec.nodeSets"),
    ("NodeSet", "add one to spec.nodeSets"),
    ("PartitionName", "add one to spec.partitions"),
    ("AccountingStorageType", "set spec.accounting.enabled"),
    ("AccountingStorageHost", "set spec.accounting"),
    ("TopologyPlugin", "set spec.topology"),
    ("GresTypes", "set spec.nodeSets[].gpus"),
    ("SwitchType", "set spec.nodeSets[].imex"),
];

/// Keys that carry passwords: never in git.
const SECRET_SLURM_KEYS: &[&str] = &[
    "StoragePass",
    "AccountingStoragePass",
    "JobCompPass",
    "StoragePassScript",
];

/// Names of objects slurmops renders besides the NodeSets' StatefulSets.
pub fn reserved_suffixes() -> &'static [&'static str] {
    &[
        "config",
        "scripts",
        "controller",
        "controller-headless",
        "accounting",
        "restapi",
        "workers",
        "slurmdbd",
        "applyset",
        "metrics",
        "mariadb",
    ]
}

/// Most findings kept (the rest are counted): as many as a file's diagnostics show.
const MAX_FINDINGS: usize = super::MAX_DIAGNOSTICS;
/// Longest message or hint a finding keeps.
const MAX_TEXT: usize = 1024;

/// Most entries of the lists whose entries are checked against one another (which NodeSets a
/// check covers, in which partition each sits): past them those checks are not made (a finding
/// says so), so that no file within the parser's limits makes validation quadratic.
const MAX_NODE_SETS: usize = 1_000;
const MAX_PARTITIONS: usize = 1_000;
const MAX_ACTIVE_CHECKS: usize = 100;
/// Most labels, and most annotations, of `metadata` (each is put on every rendered object: 150,000
/// labels made the rendering of one commit 400 MB).
const MAX_METADATA: usize = 256;
/// Most features of a NodeSet or of a check (Slurm features: a few per node).
const MAX_FEATURES: usize = 256;
/// Most settings of a slurm.conf or slurmdbd.conf map, and most items of one setting's list.
const MAX_SLURM_KEYS: usize = 1_000;
const MAX_SLURM_ITEMS: usize = 1_000;
/// Most extra config files (`controller.configFiles`).
const MAX_CONFIG_FILES: usize = 100;

/// The semantic findings of C: the first ones made (at most as many as diagnostics show), and
/// how many there are in all. Bounded in time and memory for any file the parser accepts.
pub fn validate(c: &ClusterFile) -> (Vec<Finding>, usize) {
    let mut v = Validator::default();
    v.header(c);
    let spec = Path::root().key("spec");
    if v.sizes(&c.spec, &spec) {
        v.spec(&c.spec, &c.metadata, &spec);
    }
    v.own_secrets(c);
    (v.out, v.total)
}

#[derive(Default)]
struct Validator {
    out: Vec<Finding>,
    /// Every finding made, kept or not.
    total: usize,
}

/// The lists checked against one another, with their bounds: (path under spec, bound, what).
const LISTS: [(&str, usize, &str); 3] = [
    ("nodeSets", MAX_NODE_SETS, "NodeSets"),
    ("partitions", MAX_PARTITIONS, "partitions"),
    ("policy.activeChecks", MAX_ACTIVE_CHECKS, "active checks"),
];

/// A finding for each of the LISTS (COUNTS: their lengths) past its bound, under SPEC.
fn lists_over(counts: [usize; 3], spec: &Path) -> Vec<Finding> {
    LISTS
        .iter()
        .zip(counts)
        .filter(|((_, max, _), n)| n > max)
        .map(|((at, max, what), n)| {
            let path = at.split('.').fold(spec.clone(), |p, k| p.key(k));
            Finding::new(path, format!("{n} {what}; slurmops takes at most {max}")).hint(
                "split the cluster, or merge entries: the rest of spec is not checked until then",
            )
        })
        .collect()
}

/// The lists of VALUE (cluster.yaml as JSON) past their bounds, told before the typed cluster is
/// made of it: 20,000 NodeSets would be tens of MB typed, only to be refused.
pub fn oversized(value: &serde_json::Value) -> Vec<Finding> {
    let spec = &value["spec"];
    let len = |at: &str| {
        at.split('.')
            .fold(spec, |v, k| &v[k])
            .as_array()
            .map_or(0, Vec::len)
    };
    let counts = [len(LISTS[0].0), len(LISTS[1].0), len(LISTS[2].0)];
    let mut out = lists_over(counts, &Path::root().key("spec"));
    for at in ["labels", "annotations"] {
        let n = value["metadata"][at].as_object().map_or(0, |m| m.len());
        if n > MAX_METADATA {
            let path = Path::root().key("metadata").key(at);
            out.push(
                Finding::new(path, format!("{n} {at}; slurmops takes at most {MAX_METADATA} (each goes on every object it renders)"))
                    .hint("keep the cluster-wide ones here, and put the others on the objects that need them"),
            );
        }
    }
    out.extend(kubernetes_metadata_limits(&value["metadata"]));
    out.extend(maps_over(spec));
    if out.is_empty() {
        out.extend(super::budget::over_budget(value));
    }
    out
}

/// The maps of SPEC (as JSON) past their bounds: the slurm.conf and slurmdbd.conf settings
/// (render merges each into the generated ones by comparison) and the extra config files
/// (Slurm serves a few configless), told before the typed cluster is made of them.
fn maps_over(spec: &serde_json::Value) -> Vec<Finding> {
    let spec_path = Path::root().key("spec");
    let mut maps: Vec<(Path, &serde_json::Value, usize, &str)> = vec![
        (
            spec_path.key("controller").key("slurmConf"),
            &spec["controller"]["slurmConf"],
            MAX_SLURM_KEYS,
            "set the parameters that differ from Slurm's defaults (`man slurm.conf` lists a few hundred in all)",
        ),
        (
            spec_path.key("accounting").key("slurmdbdConf"),
            &spec["accounting"]["slurmdbdConf"],
            MAX_SLURM_KEYS,
            "set the parameters that differ from Slurm's defaults (`man slurmdbd.conf`)",
        ),
        (
            spec_path.key("controller").key("configFiles"),
            &spec["controller"]["configFiles"],
            MAX_CONFIG_FILES,
            "Slurm serves a few files configless: keep those slurmctld serves",
        ),
    ];
    for (i, part) in spec["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        maps.push((
            spec_path.key("partitions").index(i).key("options"),
            &part["options"],
            MAX_SLURM_KEYS,
            "set the partition options that differ from Slurm's defaults (`man slurm.conf`, PARTITION CONFIGURATION)",
        ));
    }
    maps.into_iter()
        .filter_map(|(at, map, max, hint)| {
            let n = map.as_object().map_or(0, |m| m.len());
            (n > max).then(|| {
                Finding::new(at, format!("{n} entries; slurmops takes at most {max}")).hint(hint)
            })
        })
        .collect()
}

/// Kubernetes' own limits on the labels and annotations `metadata` puts on every rendered object
/// (the API server refuses an object past them): a label value of at most 63 characters, all of
/// an object's annotations at most 256 KiB.
fn kubernetes_metadata_limits(metadata: &serde_json::Value) -> Vec<Finding> {
    let mut out = Vec::new();
    let at = |k: &str| Path::root().key("metadata").key(k);
    if let Some(labels) = metadata["labels"].as_object() {
        let long = labels
            .iter()
            .find(|(_, v)| v.as_str().is_some_and(|v| v.len() > 63));
        if let Some((k, v)) = long {
            let n = v.as_str().map_or(0, str::len);
            out.push(
                Finding::new(
                    at("labels").key(k),
                    format!("a label value of {n} bytes; Kubernetes takes at most 63"),
                )
                .hint("put long text in an annotation"),
            );
        }
    }
    if let Some(annotations) = metadata["annotations"].as_object() {
        let bytes: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if bytes > 256 * 1024 {
            out.push(
                Finding::new(
                    at("annotations"),
                    format!(
                        "{bytes} bytes of annotations; Kubernetes takes at most 262144 on an object"
                    ),
                )
                .hint("keep annotations short: each goes on every object slurmops renders"),
            );
        }
    }
    out
}

/// Names a reference may name: found at once, and named in a hint by the closest or a few.
pub(super) struct Known<'a> {
    list: Vec<&'a str>,
    set: HashSet<&'a str>,
}

impl<'a> Known<'a> {
    pub(super) fn new(names: impl IntoIterator<Item = &'a str>) -> Self {
        let list: Vec<&str> = names.into_iter().collect();
        let set = list.iter().copied().collect();
        Known { list, set }
    }

    pub(super) fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }
}

/// S cut to MAX_TEXT bytes (at a character), marked when cut.
fn bounded(mut s: String) -> String {
    if s.len() > MAX_TEXT {
        s.truncate(super::diag::start(&s, MAX_TEXT).len());
        s.push('…');
    }
    s
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A non-empty Kubernetes label value (an empty one names no block).
pub(super) fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// A Kubernetes label key: an optional DNS-subdomain prefix (at most 253) and `/`, then a name
/// of 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit.
pub(super) fn is_label_key(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    prefix.is_none_or(is_dns_subdomain) && is_label_value(name)
}

/// Kinds slurmops renders, hence the kinds an ignore rule can name.
pub const RENDERED_KINDS: &[&str] = &[
    "ConfigMap",
    "Secret",
    "Service",
    "StatefulSet",
    "Deployment",
    "PodDisruptionBudget",
];

impl Validator {
    fn policy(&mut self, policy: &Policy, p: &Path) {
        self.windows(policy, p);
        for (i, rule) in policy.ignore_differences.iter().enumerate() {
            let rp = p.key("ignoreDifferences").index(i);
            if !RENDERED_KINDS.contains(&rule.kind.as_str()) {
                self.err(
                    rp.key("kind"),
                    format!("slurmops renders no {:?} objects", rule.kind),
                    format!(
                        "use one of {}{}",
                        RENDERED_KINDS.join(", "),
                        did_you_mean(&rule.kind, RENDERED_KINDS.iter().copied())
                            .map(|d| format!(" (did you mean {d:?}?)"))
                            .unwrap_or_default()
                    ),
                );
            }
            for (j, ptr) in rule.json_pointers.iter().enumerate() {
                let jp = rp.key("jsonPointers").index(j);
                if !ptr.starts_with('/') || ptr.len() < 2 {
                    self.err(
                        jp,
                        format!("{ptr:?} is not a JSON pointer"),
                        "write it like /spec/replicas",
                    );
                } else if ptr.starts_with("/metadata") || ptr == "/apiVersion" || ptr == "/kind" {
                    self.err(
                        jp,
                        format!("{ptr:?} identifies the object; it cannot be ignored"),
                        "ignore fields under /spec or /data",
                    );
                }
            }
        }
        if let Some(h) = &policy.node_health {
            self.node_health(h, &p.key("nodeHealth"));
        }
        if let Some(IntOrPercent::Percent(pct)) = &policy.max_prune
            && *pct > 100
        {
            self.err(
                p.key("maxPrune"),
                format!("{pct}% is more than everything"),
                "use at most 100%",
            );
        }
    }

    fn node_health(&mut self, h: &NodeHealth, p: &Path) {
        for (i, c) in h.conditions.iter().enumerate() {
            let cp = p.key("conditions").index(i);
            if c.type_.is_empty() || c.type_.len() > 316 || c.type_.contains(char::is_whitespace) {
                self.err(
                    cp.key("type"),
                    format!("{:?} is not a node condition type", c.type_),
                    "e.g. GpuUnhealthy, as `kubectl describe node` lists it",
                );
            }
            if !matches!(c.status.as_str(), "True" | "False" | "Unknown") {
                self.err(
                    cp.key("status"),
                    format!("{:?} is not a condition status", c.status),
                    "use \"True\", \"False\" or \"Unknown\" (quoted)",
                );
            }
        }
        for (i, t) in h.taints.iter().enumerate() {
            let tp = p.key("taints").index(i);
            if t.key.is_empty() || t.key.len() > 316 || t.key.contains(char::is_whitespace) {
                self.err(
                    tp.key("key"),
                    format!("{:?} is not a taint key", t.key),
                    "e.g. nvidia.com/gpu-unhealthy",
                );
            }
            if let Some(e) = &t.effect
                && !matches!(e.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute")
            {
                self.err(
                    tp.key("effect"),
                    format!("{e:?} is not a taint effect"),
                    "use NoSchedule, PreferNoSchedule or NoExecute, or leave it out for any",
                );
            }
        }
    }

    /// Keeps F while fewer than MAX_FINDINGS are kept (its texts bounded); counts it always.
    fn push(&mut self, mut f: Finding) {
        self.total += 1;
        if self.full() {
            return;
        }
        f.message = bounded(f.message);
        f.hint = f.hint.map(bounded);
        self.out.push(f);
    }

    /// Whether a finding made now would only be counted (a costly hint is not worth making).
    fn full(&self) -> bool {
        self.out.len() >= MAX_FINDINGS
    }

    /// When no finding more is kept, counts one without making it: true then.
    fn counted_only(&mut self) -> bool {
        let full = self.full();
        self.total += usize::from(full);
        full
    }

    fn err(&mut self, path: Path, msg: impl Into<String>, hint: impl Into<String>) {
        self.push(Finding::new(path, msg).hint(hint));
    }

    /// Whether the lists checked against one another are within their bounds (else a finding
    /// per list past its bound, and the spec is not checked further).
    fn sizes(&mut self, s: &ClusterSpec, p: &Path) -> bool {
        let counts = [
            s.node_sets.len(),
            s.partitions.len(),
            s.policy.active_checks.len(),
        ];
        let over = lists_over(counts, p);
        let mut within = over.is_empty();
        for f in over {
            self.push(f);
        }
        let features = s
            .node_sets
            .iter()
            .enumerate()
            .map(|(i, n)| (n.features.len(), p.key("nodeSets").index(i)))
            .chain(s.policy.active_checks.iter().enumerate().map(|(i, c)| {
                (
                    c.features.len(),
                    p.key("policy").key("activeChecks").index(i),
                )
            }));
        for (n, at) in features {
            if n > MAX_FEATURES {
                within = false;
                self.err(
                    at.key("features"),
                    format!("{n} features; slurmops takes at most {MAX_FEATURES}"),
                    "list the features jobs select on: the rest of spec is not checked until then",
                );
            }
        }
        within
    }

    /// A finding about the map key KEY at PATH (a name), pointed at the key, not its value.
    fn err_at_key(
        &mut self,
        path: Path,
        key: &str,
        msg: impl Into<String>,
        hint: impl Into<String>,
    ) {
        let mut f = Finding::new(path, msg).hint(hint);
        f.at_key = Some(key.to_string());
        self.push(f);
    }

    fn dns_label(&mut self, path: Path, what: &str, value: &str, max: usize) {
        if !is_dns_label(value) || value.len() > max {
            self.err(
                path,
                format!("{what} {value:?} is not a valid name"),
                format!("use at most {max} lowercase letters, digits and '-', starting and ending with a letter or digit"),
            );
        }
    }

    fn header(&mut self, c: &ClusterFile) {
        if c.api_version != API_VERSION {
            self.err(
                Path::parse("apiVersion"),
                format!("unsupported apiVersion {:?}", c.api_version),
                format!("use {API_VERSION}"),
            );
        }
        if c.kind != KIND {
            self.err(
                Path::parse("kind"),
                format!("unsupported kind {:?}", c.kind),
                format!("use {KIND}"),
            );
        }
        // Object names are `NAME-controller-headless` and the like: keep room for the suffixes.
        self.dns_label(Path::parse("metadata.name"), "name", &c.metadata.name, 40);
        self.dns_label(
            Path::parse("metadata.namespace"),
            "namespace",
            &c.metadata.namespace,
            63,
        );
    }

    fn spec(&mut self, s: &ClusterSpec, meta: &Metadata, p: &Path) {
        let sbin = &s.images.sbin;
        // Written as the kernel resolves it: no empty, `.` or `..` component, no trailing `/`
        // (the policy compares mount paths with it).
        let plain = sbin.len() <= 255
            && sbin.strip_prefix('/').is_some_and(|rest| {
                rest.split('/').all(|c| {
                    !c.is_empty()
                        && c != ".."
                        && c != "."
                        && c.bytes().all(|b| b.is_ascii_graphic())
                })
            });
        if !plain {
            self.err(
                p.key("images").key("sbin"),
                format!(
                    "{:?} is not an absolute directory: Slurm's daemons run by their path in it",
                    clip(sbin)
                ),
                "write the directory the images keep slurmctld and slurmd in, e.g. /usr/sbin",
            );
        }
        self.policy(&s.policy, &p.key("policy"));
        self.active_checks(s, &p.key("policy"));
        if let Some(np) = &s.network_policy {
            for (field, list) in [
                ("restapiFromNamespaces", &np.restapi_from_namespaces),
                ("metricsFromNamespaces", &np.metrics_from_namespaces),
            ] {
                let at = p.key("networkPolicy").key(field);
                for (i, ns) in list.iter().enumerate() {
                    self.dns_label(at.index(i), "namespace", ns, 63);
                }
            }
        }
        if let Some(b) = &s.backup {
            let at = p.key("backup");
            if let Some(claim) = &b.claim
                && !is_dns_subdomain(claim)
            {
                self.err(
                    at.key("claim"),
                    format!("{:?} is not a PersistentVolumeClaim name", clip(claim)),
                    "name an existing claim of the cluster's namespace (lowercase letters, digits, `-` and `.`)",
                );
            }
            match (&b.claim, b.own_copies) {
                (Some(_), true) => self.err(
                    at.key("ownCopies"),
                    "both a claim for slurmops's copies and ownCopies",
                    "keep one: claim (slurmops copies before an upgrade) or ownCopies: true (you do)",
                ),
                (None, false) => self.err(
                    at.clone(),
                    "backup names neither a claim nor ownCopies",
                    "set backup.claim to a PersistentVolumeClaim, or backup.ownCopies: true",
                ),
                _ => {}
            }
            if let Some(image) = &b.image
                && (image.is_empty()
                    || image.len() > 512
                    || !image.bytes().all(|c| c.is_ascii_graphic()))
            {
                self.err(
                    at.key("image"),
                    format!("{:?} is not an image reference", clip(image)),
                    "write a reference such as docker.io/library/mariadb:11.8",
                );
            }
            for f in crate::cluster::backup::schedule_findings(s, &at) {
                self.push(f);
            }
        }
        // Without clusterName, metadata.name (checked above, at most 40) is the ClusterName.
        if let Some(cluster_name) = s.cluster_name.as_deref() {
            if cluster_name.len() > 40 {
                self.err(
                    p.key("clusterName"),
                    format!(
                        "ClusterName is {} characters long; Slurm allows at most 40",
                        cluster_name.len()
                    ),
                    "choose a shorter spec.clusterName",
                );
            } else if cluster_name.is_empty()
                || !cluster_name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            {
                self.err(
                    p.key("clusterName"),
                    format!("ClusterName {cluster_name:?} has characters Slurm does not keep"),
                    "use lowercase letters, digits, '-' and '_'",
                );
            }
        }
        let version = release::find(&s.slurm_version);
        if release::major(&s.slurm_version).is_none() {
            self.err(
                p.key("slurmVersion"),
                format!("{:?} is not a Slurm release", s.slurm_version),
                format!("write it as YY.MM, one of {}", release::supported_list()),
            );
        } else if version.is_none() {
            self.err(
                p.key("slurmVersion"),
                format!("slurmops does not support Slurm {}", s.slurm_version),
                format!(
                    "use one of the supported releases: {}",
                    release::supported_list()
                ),
            );
        }
        for (i, name) in s.image_pull_secrets.iter().enumerate() {
            if !is_dns_subdomain(name) {
                self.err(
                    p.key("imagePullSecrets").index(i),
                    format!("{name:?} is not a valid Secret name"),
                    "use a DNS-1123 subdomain",
                );
            }
        }
        self.secret_ref(&s.auth.slurm_key, &p.key("auth").key("slurmKey"));
        self.secret_ref(&s.auth.jwt_key, &p.key("auth").key("jwtKey"));
        self.controller(&s.controller, version, &p.key("controller"));
        self.accounting(&s.accounting, &p.key("accounting"));
        if s.restapi.enabled && s.restapi.replicas == 0 {
            self.err(
                p.key("restapi").key("replicas"),
                "restapi is enabled with 0 replicas",
                "set replicas to 1 or more, or enabled: false",
            );
        }
        self.pod(&s.restapi.pod, &p.key("restapi"));
        self.login_sets(s, &p.key("loginSets"));
        self.node_sets(s, meta, &p.key("nodeSets"));
        self.partitions(s, &p.key("partitions"));
        if let Some(t) = &s.topology {
            self.topology(t, s, version, &p.key("topology"));
        }
    }

    fn secret_ref(&mut self, r: &SecretRef, p: &Path) {
        if !is_dns_subdomain(&r.name) {
            self.err(
                p.key("name"),
                format!("{:?} is not a valid Secret name", r.name),
                "use a DNS-1123 subdomain",
            );
        }
        let key_ok = !r.key.is_empty()
            && r.key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !key_ok {
            self.err(
                p.key("key"),
                "a Secret key may hold only letters, digits, '-', '_' and '.'",
                "check the key name in the Secret",
            );
        }
    }

    fn slurm_conf_map(
        &mut self,
        map: &std::collections::BTreeMap<String, SlurmValue>,
        p: &Path,
        owned: bool,
    ) {
        // Render merges each setting into the generated ones (the maps' lengths are bounded
        // before the cluster is typed: `oversized`), and each list item into the generated
        // items, by comparison: bounded, so that a push cannot make that quadratic.
        for (key, value) in map {
            let items = match value {
                SlurmValue::List(v) => v.len(),
                SlurmValue::Text(t) => t.matches(',').count() + 1,
                _ => 1,
            };
            if items > MAX_SLURM_ITEMS {
                self.err(
                    p.key(key),
                    format!("a list of {items} items; slurmops takes at most {MAX_SLURM_ITEMS}"),
                    "list fewer items",
                );
                continue;
            }
            let path = p.key(key);
            if SECRET_SLURM_KEYS
                .iter()
                .any(|s| s.eq_ignore_ascii_case(key))
            {
                self.err(
                    path,
                    format!("{key} would put a password in git"),
                    "reference the password as a Secret (spec.accounting.database.password)",
                );
                continue;
            }
            if owned
                && let Some((k, how)) = OWNED_SLURM_CONF
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(key))
            {
                self.err(path, format!("{k} is generated by slurmops"), *how);
                continue;
            }
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric()) {
                self.err(
                    path,
                    format!("{key:?} is not a Slurm parameter name"),
                    "use the parameter's name as in `man slurm.conf`, e.g. MaxJobCount",
                );
            }
            if let Some(problem) = grammar::word_problem(&value.render()) {
                self.err(
                    p.key(key),
                    problem,
                    "write the value as one word (a list as [a, b] or a,b)",
                );
            }
        }
    }

    fn accounting(&mut self, a: &Accounting, p: &Path) {
        self.accounting_objects(a, p);
        self.slurm_conf_map(&a.slurmdbd_conf, &p.key("slurmdbdConf"), false);
        self.pod(&a.pod, p);
        match (&a.database, a.enabled) {
            (None, true) => self.err(
                p.clone(),
                "accounting is enabled but no database is set",
                "add accounting.database with host, user and password",
            ),
            (Some(db), _) => {
                self.database_place(db, &p.key("database"));
                self.database_words(db, &p.key("database"));
                if db.port == 0 {
                    self.err(
                        p.key("database").key("port"),
                        "port 0 is not a database port",
                        "MySQL listens on 3306",
                    );
                }
                self.secret_ref(&db.password, &p.key("database").key("password"));
            }
            (None, false) => {}
        }
    }

    /// The database's host, name and user, each written into slurmdbd.conf as one word
    /// (`StorageHost=`, `StorageLoc=`, `StorageUser=`).
    fn database_words(&mut self, db: &Database, p: &Path) {
        let words = [
            ("host", db.host.as_deref(), "StorageHost"),
            ("name", Some(db.name.as_str()), "StorageLoc"),
            ("user", Some(db.user.as_str()), "StorageUser"),
        ];
        for (field, value, key) in words {
            if let Some(problem) = value.and_then(grammar::word_problem) {
                self.err(
                    p.key(field),
                    format!("{problem} (it is written into slurmdbd.conf as {key}=)"),
                    format!(
                        "write the database {field} as one word, without spaces, line breaks or '#'"
                    ),
                );
            } else if field != "host" && value.is_some_and(|v| !grammar::is_sql_name(v)) {
                // The in-cluster MariaDB's first start splices them into SQL it runs as root.
                self.err(
                    p.key(field),
                    format!(
                        "the database {field} is spliced into SQL (the in-cluster database's first start, slurmdbd's queries): letters, digits and '_' only, at most 64"
                    ),
                    format!("write the database {field} as a plain name, e.g. slurm_acct_db"),
                );
            }
        }
    }

    fn login_sets(&mut self, s: &ClusterSpec, p: &Path) {
        let mut seen = BTreeSet::new();
        for (i, l) in s.login_sets.iter().enumerate() {
            let lp = p.index(i);
            self.dns_label(lp.key("name"), "login set name", &l.name, 40);
            if !seen.insert(l.name.as_str()) {
                self.err(
                    lp.key("name"),
                    format!("login set {:?} is defined twice", l.name),
                    "names must be unique",
                );
            }
            for (field, r) in [
                ("authorizedKeys", &l.authorized_keys),
                ("sssdConf", &l.sssd_conf),
            ] {
                if let Some(r) = r {
                    self.secret_ref(r, &lp.key(field));
                }
            }
            self.pod(&l.pod, &lp);
            self.volumes(&l.volumes, &[], &l.volume_mounts, LOGIN_VOLUMES, &lp);
        }
    }

    fn node_sets(&mut self, s: &ClusterSpec, meta: &Metadata, p: &Path) {
        if s.node_sets.is_empty() {
            self.err(
                p.clone(),
                "a cluster needs at least one NodeSet",
                "add an entry to spec.nodeSets",
            );
        }
        let names: BTreeSet<&str> = s.node_sets.iter().map(|n| n.name.as_str()).collect();
        let mut seen = BTreeSet::new();
        for (i, n) in s.node_sets.iter().enumerate() {
            let np = p.index(i);
            // Pod names add `-ORDINAL`, and the StatefulSet's revision label must stay within 63.
            self.dns_label(np.key("name"), "NodeSet name", &n.name, 52);
            if !seen.insert(n.name.as_str()) {
                self.err(
                    np.key("name"),
                    format!("NodeSet {:?} is defined twice", n.name),
                    "names must be unique",
                );
            }
            if let Some(suffix) = n.name.strip_prefix(&format!("{}-", meta.name))
                && reserved_suffixes().contains(&suffix)
            {
                self.err(
                    np.key("name"),
                    format!("{:?} is the name of an object slurmops renders", n.name),
                    "choose another NodeSet name",
                );
            }
            self.node_set(n, &names, &np);
            self.canary(n, s, &np);
            self.window_mode(n, s, &np);
            self.requeue(n, &np);
        }
    }

    fn node_set(&mut self, n: &NodeSet, all: &BTreeSet<&str>, p: &Path) {
        self.pod(&n.pod, p);
        if n.update.max_unavailable.is_zero() {
            self.err(
                p.key("update").key("maxUnavailable"),
                "maxUnavailable must be more than 0, or a rollout could never start",
                "use 1 or a percentage such as 25%",
            );
        }
        if n.managed() && !n.volume_claim_templates.is_empty() {
            self.err(
                p.key("volumeClaimTemplates"),
                "a NodeSet whose pods slurmops makes (perNode or podManagement: slurmops) has no StatefulSet to make per-worker volumes",
                "use the node's own storage (a hostPath or local volume in volumes), or give replicas a number",
            );
        }
        if let Some(a) = &n.autoscale {
            let ap = p.key("autoscale");
            if a.min > a.max {
                self.err(
                    ap.key("min"),
                    format!("min {} is more than max {}", a.min, a.max),
                    "lower min or raise max",
                );
            } else if n.replicas.per_node() {
                self.err(
                    p.key("autoscale"),
                    "a perNode NodeSet follows its Kubernetes nodes and cannot autoscale",
                    "remove autoscale, or give replicas a number",
                );
            } else if n.replicas.count() < a.min || n.replicas.count() > a.max {
                self.err(
                    p.key("replicas"),
                    format!(
                        "replicas {} is outside autoscale bounds {}..{}",
                        n.replicas, a.min, a.max
                    ),
                    "set replicas between autoscale.min and autoscale.max",
                );
            }
            if a.pending_jobs_per_replica == 0 {
                self.err(
                    ap.key("pendingJobsPerReplica"),
                    "must be 1 or more",
                    "one worker per N pending jobs needs N > 0",
                );
            }
        }
        for (field, q) in [("cpu", &n.cpu), ("memory", &n.memory)] {
            if let Some(q) = q
                && parse_quantity(q).is_none_or(|v| v <= 0.0)
            {
                self.err(
                    p.key(field),
                    format!("{q:?} is not a Kubernetes quantity"),
                    if field == "cpu" {
                        "e.g. \"96\" or 500m"
                    } else {
                        "e.g. 64Gi"
                    },
                );
            }
        }
        if let Some(g) = &n.gpus {
            let gp = p.key("gpus");
            if g.count == 0 {
                self.err(
                    gp.key("count"),
                    "a GPU NodeSet needs at least one GPU per worker",
                    "remove `gpus` for a CPU NodeSet",
                );
            }
            if g.type_.is_empty()
                || !g
                    .type_
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                self.err(
                    gp.key("type"),
                    format!("{:?} is not a usable GRES type", g.type_),
                    "use a short word such as h100",
                );
            }
            if !g.resource_name.contains('/') {
                self.err(
                    gp.key("resourceName"),
                    format!("{:?} is not an extended resource name", g.resource_name),
                    "extended resources are DOMAIN/NAME, e.g. nvidia.com/gpu",
                );
            }
        }
        if let Some(x) = &n.imex
            && x.enabled
        {
            if n.gpus.is_none() {
                self.err(
                    p.key("imex"),
                    "IMEX needs GPUs on the NodeSet",
                    "add `gpus` or turn imex off",
                );
            }
            self.dns_label(
                p.key("imex").key("computeDomain"),
                "ComputeDomain",
                &x.compute_domain,
                63,
            );
        }
        for (i, f) in n.features.iter().enumerate() {
            let fp = p.key("features").index(i);
            if f.is_empty()
                || !f.bytes().all(|b| b.is_ascii_graphic())
                || f.contains([',', '&', '|', '=', '#', '"', '\'', '\\'])
            {
                self.err(
                    fp,
                    format!("feature {:?} cannot be used in Slurm", clip(f)),
                    "a feature is one word of printable characters without , & | = # \\ quotes or spaces",
                );
            } else if all.contains(f.as_str()) && f != &n.name {
                self.err(fp, format!("feature {f:?} is the name of another NodeSet, whose membership it would change"), "rename the feature");
            }
        }
        let claims: Vec<&str> = n
            .volume_claim_templates
            .iter()
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        self.volumes(&n.volumes, &claims, &n.volume_mounts, WORKER_VOLUMES, p);
        if !n.privileged
            && n.container_security_context
                .as_ref()
                .and_then(|sc| sc.privileged)
                == Some(true)
        {
            self.err(
                p.key("containerSecurityContext").key("privileged"),
                "privileged: false and containerSecurityContext.privileged: true contradict each other",
                "keep one of them",
            );
        }
        for (i, c) in n.volume_claim_templates.iter().enumerate() {
            if c.metadata.name.as_deref().is_none_or(|s| !is_dns_label(s)) {
                self.err(
                    p.key("volumeClaimTemplates")
                        .index(i)
                        .key("metadata")
                        .key("name"),
                    "a volume claim template needs a name",
                    "set metadata.name",
                );
            }
        }
    }

    fn partitions(&mut self, s: &ClusterSpec, p: &Path) {
        if s.partitions.is_empty() {
            self.err(
                p.clone(),
                "a cluster needs at least one partition",
                "add e.g. {name: all, nodeSets: [ALL], default: true}",
            );
        }
        let names = Known::new(s.node_sets.iter().map(|n| n.name.as_str()));
        let mut seen = BTreeSet::new();
        let mut defaults = 0;
        for (i, part) in s.partitions.iter().enumerate() {
            let pp = p.index(i);
            let name_ok = !part.name.is_empty()
                && part.name.len() <= 64
                && part
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !name_ok {
                self.err(
                    pp.key("name"),
                    format!("{:?} is not a usable partition name", part.name),
                    "use letters, digits, '-' and '_'",
                );
            }
            if !seen.insert(part.name.as_str()) {
                self.err(
                    pp.key("name"),
                    format!("partition {:?} is defined twice", part.name),
                    "names must be unique",
                );
            }
            defaults += usize::from(part.default);
            if part.node_sets.is_empty() {
                self.err(
                    pp.key("nodeSets"),
                    "a partition needs at least one NodeSet",
                    "list NodeSets, or [ALL]",
                );
            }
            for (j, r) in part.node_sets.iter().enumerate() {
                if r != "ALL" && !names.contains(r) {
                    self.unknown_ref(pp.key("nodeSets").index(j), "NodeSet", r, &names);
                }
            }
            if let Some(t) = part
                .max_time
                .as_deref()
                .filter(|t| !grammar::is_time_limit(t))
            {
                self.err(
                    pp.key("maxTime"),
                    format!("{t:?} is not a Slurm time limit"),
                    "use minutes, HH:MM:SS, D-HH:MM:SS or UNLIMITED",
                );
            }
            for k in part.options.keys() {
                // Compared as Slurm reads keys, without case.
                if ["Nodes", "Default", "MaxTime", "PartitionName", "Topology"]
                    .iter()
                    .any(|own| own.eq_ignore_ascii_case(k))
                {
                    self.err(
                        pp.key("options").key(k),
                        format!("{k} is set by the partition's own field"),
                        "use nodeSets, default, maxTime or topology",
                    );
                }
            }
            if let Some(kind) = part.topology
                && !s.topology.as_ref().is_some_and(|t| t.has(kind))
            {
                self.err(
                    pp.key("topology"),
                    format!("spec.topology.{} is not set", kind.key()),
                    format!(
                        "set spec.topology.{}, or remove the partition's topology",
                        kind.key()
                    ),
                );
            }
            self.slurm_conf_map(&part.options, &pp.key("options"), false);
        }
        if defaults > 1 {
            self.err(
                p.clone(),
                format!("{defaults} partitions are marked default"),
                "mark exactly one partition default: true",
            );
        }
    }

    fn unknown_ref(&mut self, path: Path, what: &str, name: &str, known: &Known) {
        if self.counted_only() {
            return;
        }
        let f = Finding::new(path, format!("no {what} named {:?}", clip(name)));
        let hint = match did_you_mean(name, known.list.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("known: {}", listed(known.list.iter().copied())),
        };
        self.push(f.hint(hint));
    }
}
