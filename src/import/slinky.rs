//! `slurmops import slinky`: the values of SchedMD's Slinky `slurm` Helm chart (1.1 to the
//! development line: `nodesets` with or without `nodesetDefaults`, `loginsets` likewise) turned
//! into a cluster.yaml. What maps: images and Slurm version, keys by Secret, slurmctld and its
//! persistence and metrics, slurmrestd, accounting, login sets, NodeSets (replicas, resources,
//! GPUs, features and weight from their node line, volumes, placement, update pace), partitions,
//! config files, prolog and epilog scripts, extra slurm.conf and slurmdbd.conf lines. What cannot
//! map (inline secrets, Slinky-only features, objects of its own) is reported with what to do.

use serde_json::{Map, Value as Json, json};

mod control;
mod generated;
mod workers;

use super::values::{P, Values};
use super::{ImportError, Imported, Outcome};

/// What the values do not say.
pub struct Options {
    /// metadata.name and metadata.namespace of the cluster.
    pub name: String,
    pub namespace: String,
    /// The Slurm release when no image tag names one.
    pub slurm_version: Option<String>,
}

/// Placeholders for what a person must name (each reported as needed).
const SLURM_KEY: &str = "replace-me-slurm-key";
const JWT_KEY: &str = "replace-me-jwt-key";

fn path<'a>(base: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(rest).copied().collect()
}

fn needs(s: &str) -> Outcome {
    Outcome::Needs(s.to_string())
}

fn ignored(s: &str) -> Outcome {
    Outcome::Ignored(s.to_string())
}

/// Imports FILES (name, text), merged in order.
pub fn import(files: &[(String, String)], o: &Options) -> Result<Imported, ImportError> {
    let mut v = Values::load(files)?;
    v.spread_defaults("nodesetDefaults", "nodesets");
    v.spread_defaults("loginsetDefaults", "loginsets");
    let mut spec = Map::new();
    let images = images(&v, o, &mut spec);
    auth(&v, &mut spec);
    // slurmctld refuses a state directory written under another ClusterName: keep Slinky's.
    let cluster_name = v
        .map_text(&["clusterName"], "spec.clusterName")
        .unwrap_or_else(|| {
            let name = format!("{}_{}", o.namespace, o.name);
            v.note(
                &["clusterName"],
                Outcome::Default(format!(
                    "Slinky names the Slurm cluster NAMESPACE_RELEASE when clusterName is unset, slurmops after metadata.name: the cluster.yaml keeps {name} (slurmctld refuses state saved under another name; --name must be the Helm release's)"
                )),
            );
            name
        });
    spec.insert("clusterName".into(), cluster_name.into());
    let secrets: Vec<Json> = v
        .map(&["imagePullSecrets"], "spec.imagePullSecrets")
        .and_then(|s| s.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|s| {
            s.get("name")
                .or(Some(s))
                .and_then(|n| n.as_str())
                .map(Json::from)
        })
        .collect();
    if !secrets.is_empty() {
        spec.insert("imagePullSecrets".into(), secrets.into());
    }
    if v.read(&["priorityClass", "enabled"]) == Some(Json::Bool(true))
        && let Some(name) = v.map_text(&["priorityClass", "name"], "spec.priorityClassName")
    {
        spec.insert("priorityClassName".into(), name.clone().into());
        if v.read(&["priorityClass", "create"]) == Some(Json::Bool(true)) {
            v.tell(
                &["priorityClass", "create"],
                Outcome::Needs(format!(
                    "slurmops references PriorityClass {name} and does not create it: keep the one Slinky made, or create it"
                )),
            );
        }
    }
    for k in ["create", "description", "value", "preemptionPolicy"] {
        v.tell(
            &["priorityClass", k],
            ignored("the PriorityClass itself is not slurmops's to make"),
        );
    }
    let mut controller = control::controller(&v);
    dcgm(&v, &mut controller);
    let mut sets = workers::node_sets(&v, &images);
    generated::keys(&v, &mut controller);
    generated::files(&v, &mut sets);
    spec.insert("controller".into(), controller.into());
    if let Some(r) = control::restapi(&v) {
        spec.insert("restapi".into(), r.into());
    }
    if let Some(a) = control::accounting(&v) {
        spec.insert("accounting".into(), a.into());
    }
    let login = control::login_sets(&v, &images);
    if !login.is_empty() {
        spec.insert("loginSets".into(), login.into());
    }
    let names: Vec<String> = sets
        .iter()
        .filter_map(|s| s["name"].as_str().map(String::from))
        .collect();
    spec.insert("nodeSets".into(), sets.into());
    spec.insert("partitions".into(), workers::partitions(&v, &names).into());

    let doc = json!({
        "apiVersion": "slurmops.dev/v1alpha1",
        "kind": "SlurmCluster",
        "metadata": {"name": o.name, "namespace": o.namespace},
        "spec": spec,
    });
    let report = v.finish(classify);
    let body = serde_saphyr::to_string(&doc)
        .map_err(|e| ImportError::Invalid(format!("cannot write YAML: {e}")))?;
    let yaml = format!(
        "# Imported from Slinky values by `slurmops import slinky`: read the report it printed\n# (every NEEDS line) before applying.\n{body}"
    );
    if let Err(problems) = crate::cluster::load("cluster.yaml", &yaml) {
        let text: Vec<String> = problems.iter().map(|d| d.to_string()).collect();
        return Err(ImportError::Invalid(format!("{}\n{yaml}", text.join("\n"))));
    }
    Ok(Imported { yaml, report })
}

/// The cluster's image defaults, as `spec.images` and `spec.slurmVersion` say them.
pub(super) struct Images {
    registry: String,
    version: String,
    flavor: String,
}

impl Images {
    /// `image` of a component (its Slinky path), unless it is the default one.
    pub(super) fn of(&self, v: &Values, at: P, program: &str) -> Option<String> {
        let repo = v.text(&path(at, &["repository"]))?;
        let tag = v
            .text(&path(at, &["tag"]))
            .unwrap_or_else(|| "latest".into());
        let digest = v.text(&path(at, &["digest"]));
        let default = format!("{}/{program}", self.registry);
        let tag_default = format!("{}-{}", self.version, self.flavor);
        if repo == default && tag == tag_default && digest.is_none() {
            v.tell(
                at,
                Outcome::Mapped("spec.slurmVersion and spec.images".into()),
            );
            return None;
        }
        v.tell(at, Outcome::Mapped("an image reference of its own".into()));
        Some(match digest {
            Some(d) => format!("{repo}:{tag}@{d}"),
            None => format!("{repo}:{tag}"),
        })
    }
}

fn images(v: &Values, o: &Options, spec: &mut Map<String, Json>) -> Images {
    // The controller's image names the release and the flavor the others follow.
    let repo = v.text(&["controller", "slurmctld", "image", "repository"]);
    let tag = v.text(&["controller", "slurmctld", "image", "tag"]);
    let (version, flavor) = match tag.as_deref().and_then(|t| t.split_once('-')) {
        Some((ver, flavor)) if crate::cluster::release::find(ver).is_some() => {
            (Some(ver.to_string()), flavor.to_string())
        }
        _ => (None, "ubuntu24.04".to_string()),
    };
    let version = version.or(o.slurm_version.clone()).unwrap_or_else(|| {
        let latest = crate::cluster::release::SUPPORTED
            .last()
            .map(|r| r.version)
            .unwrap_or("25.11");
        v.note(
            &["controller", "slurmctld", "image", "tag"],
            Outcome::Needs(format!(
                "no image tag names a Slurm release slurmops supports: wrote {latest}; say which with --slurm-version"
            )),
        );
        latest.to_string()
    });
    let registry = repo
        .as_deref()
        .and_then(|r| r.strip_suffix("/slurmctld"))
        .unwrap_or("ghcr.io/slinkyproject")
        .to_string();
    spec.insert("slurmVersion".into(), version.clone().into());
    let mut imgs = Map::new();
    imgs.insert("registry".into(), registry.clone().into());
    imgs.insert("flavor".into(), flavor.clone().into());
    if let Some(p) = v.map_text(&["imagePullPolicy"], "spec.images.pullPolicy") {
        imgs.insert("pullPolicy".into(), p.into());
    }
    let images = Images {
        registry,
        version,
        flavor,
    };
    if let Some(i) = images.of(v, &["controller", "slurmctld", "image"], "slurmctld") {
        imgs.insert("slurmctld".into(), i.into());
    }
    if let Some(i) = images.of(v, &["restapi", "slurmrestd", "image"], "slurmrestd") {
        imgs.insert("slurmrestd".into(), i.into());
    }
    if let Some(i) = images.of(v, &["accounting", "slurmdbd", "image"], "slurmdbd") {
        imgs.insert("slurmdbd".into(), i.into());
    }
    spec.insert("images".into(), imgs.into());
    images
}

fn auth(v: &Values, spec: &mut Map<String, Json>) {
    let mut auth = Map::new();
    for (slinky, ours, placeholder, key) in [
        ("slurmKey", "slurmKey", SLURM_KEY, "slurm.key"),
        ("jwtKey", "jwtKey", JWT_KEY, "jwt_hs256.key"),
    ] {
        let to = format!("spec.auth.{ours}");
        let name = v.map_text(&[slinky, "secretRef", "name"], &to);
        let k = v.map_text(&[slinky, "secretRef", "key"], &to);
        v.tell(
            &[slinky, "annotations"],
            ignored("annotations of a Secret slurmops does not make"),
        );
        let made = name.is_none();
        if made {
            let why = format!(
                "Slinky made this Secret: name it in spec.auth.{ours} (the running cluster's key must stay: kubectl get secrets -n NAMESPACE); the cluster.yaml says {placeholder}"
            );
            match v.has(&[slinky, "create"]) {
                true => v.tell(&[slinky, "create"], Outcome::Needs(why)),
                false => v.note(&[slinky], Outcome::Needs(why)),
            }
        } else {
            v.tell(&[slinky, "create"], ignored("the Secret is named"));
        }
        let mut name = name.unwrap_or_else(|| placeholder.into());
        if auth.values().any(|a| a["name"] == name.as_str()) {
            v.tell(
                &[slinky, "secretRef", "name"],
                Outcome::Needs(format!(
                    "slurmops keeps the JWT key and slurm.key in two Secrets (each is mounted only where it is needed): move this key into a Secret of its own; the cluster.yaml says {placeholder}"
                )),
            );
            name = placeholder.into();
        }
        auth.insert(
            ours.into(),
            json!({"name": name, "key": k.unwrap_or_else(|| key.into())}),
        );
    }
    if v.read(&["jwksKeys", "enabled"]) == Some(Json::Bool(true)) {
        v.tell(
            &["jwksKeys", "enabled"],
            needs("slurmops authenticates slurmrestd with the HS256 jwtKey only: JWKS is not carried over"),
        );
    }
    spec.insert("auth".into(), auth.into());
}

/// nodeSelector, tolerations, affinity and resources of a component's pod (`podSpec`) and its
/// main container's RESOURCES path, into OUT (TO: the cluster.yaml path for the report).
pub(super) fn placement(
    v: &Values,
    base: &[&str],
    resources: Option<&[&str]>,
    to: &str,
    out: &mut Map<String, Json>,
) {
    for k in ["nodeSelector", "tolerations", "affinity"] {
        if let Some(x) = v.map(&path(base, &["podSpec", k]), &format!("{to}.{k}")) {
            out.insert(k.into(), x);
        }
    }
    if let Some(r) = resources.and_then(|r| v.map(&path(base, r), &format!("{to}.resources"))) {
        out.insert("resources".into(), r);
    }
    v.tell(
        &path(base, &["podSpec", "resources"]),
        needs("pod-level resources: slurmops sets the main container's; move them there"),
    );
    v.tell(
        &path(base, &["podSpec", "initContainers"]),
        Outcome::Mapped(format!("{to}.podTemplate.initContainers")),
    );
    if let Some(i) = v.read(&path(base, &["podSpec", "initContainers"])) {
        out.entry("podTemplate").or_insert_with(|| json!({}))["initContainers"] = i;
    }
}

/// The volumes of a pod (`podSpec.volumes`) and its main CONTAINER's mounts and env, into OUT:
/// login sets and NodeSets take them alike (TO: the cluster.yaml path for the report).
pub(super) fn volumes_and_env(
    v: &Values,
    base: &[&str],
    container: &str,
    to: &str,
    out: &mut Map<String, Json>,
) {
    for (from, ours) in [
        (["podSpec", "volumes"], "volumes"),
        ([container, "volumeMounts"], "volumeMounts"),
    ] {
        if let Some(x) = v.map(&path(base, &from), &format!("{to}.{ours}")) {
            out.insert(ours.into(), x);
        }
    }
    if let Some(env) = v.map(
        &path(base, &[container, "env"]),
        &format!("{to}.podTemplate.env"),
    ) {
        out.entry("podTemplate").or_insert_with(|| json!({}))["env"] = env;
    }
}

/// `extraConf` (slurm.conf lines `Key=Value ...`) and `extraConfMap` into a settings map.
pub(super) fn conf(v: &Values, base: &[&str], to: &str) -> Map<String, Json> {
    let mut out = Map::new();
    if let Some(text) = v.map_text(&path(base, &["extraConf"]), to) {
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            for pair in line.split_whitespace() {
                if let Some((k, val)) = pair.split_once('=') {
                    let val = val.parse::<i64>().map(Json::from).unwrap_or(val.into());
                    out.insert(k.to_string(), val);
                }
            }
        }
    }
    if let Some(Json::Object(m)) = v.map(&path(base, &["extraConfMap"]), to) {
        for (k, val) in m {
            let val = match val {
                Json::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().map(String::from).unwrap_or(i.to_string()))
                    .collect::<Vec<_>>()
                    .join(",")
                    .into(),
                other => other,
            };
            out.insert(k, val);
        }
    }
    out
}

/// Slinky's DCGM integration (`vendor.nvidia.dcgm`) as the prolog and epilog it stands for:
/// each GPU of a job gets a file named after its index, holding the job id, in the directory
/// dcgm-exporter reads (`--hpc-job-mapping-dir`), so GPU metrics carry the job.
fn dcgm(v: &Values, controller: &mut Map<String, Json>) {
    let base = ["vendor", "nvidia", "dcgm"];
    if v.read(&path(&base, &["enabled"])) != Some(Json::Bool(true)) {
        return;
    }
    v.tell(
        &path(&base, &["enabled"]),
        Outcome::Mapped("spec.controller.scripts: dcgm-job-mapping prolog and epilog".into()),
    );
    v.tell(
        &path(&base, &["scriptPriority"]),
        ignored("slurmops runs the scripts in name order"),
    );
    let dir = v
        .text(&path(&base, &["jobMappingDir"]))
        .unwrap_or_else(|| "/var/lib/dcgm-exporter/job-mapping".into());
    v.note(
        &path(&base, &["jobMappingDir"]),
        Outcome::Needs(format!(
            "the GPU workers must share {dir} with dcgm-exporter: add it to each GPU NodeSet's volumes and volumeMounts (a hostPath)"
        )),
    );
    let head = format!(
        "#!/bin/bash\n# DCGM job mapping (Slinky's vendor.nvidia.dcgm): dcgm-exporter reads {dir}.\ndir={dir}\n"
    );
    let prolog = format!(
        "{head}mkdir -p \"$dir\"\nfor g in ${{SLURM_JOB_GPUS//,/ }}; do echo \"$SLURM_JOB_ID\" > \"$dir/$g\"; done\n"
    );
    let epilog = format!("{head}for g in ${{SLURM_JOB_GPUS//,/ }}; do rm -f \"$dir/$g\"; done\n");
    let scripts = controller.entry("scripts").or_insert_with(|| json!({}));
    for (kind, content) in [("prolog", prolog), ("epilog", epilog)] {
        let list = scripts
            .as_object_mut()
            .map(|m| m.entry(kind).or_insert_with(|| json!([])));
        if let Some(Json::Array(list)) = list {
            list.push(json!({"name": format!("{kind}-dcgm-job-mapping.sh"), "content": content}));
        }
    }
}

/// What nobody read: ignored when it has no effect under slurmops, else it needs a person.
fn classify(path: &[String]) -> Outcome {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["nameOverride" | "fullnameOverride" | "namespaceOverride"] => ignored(
            "Helm's naming: the cluster's name and namespace are import's --name and --namespace",
        ),
        ["asciiArt"] => ignored("cosmetic"),
        ["controller", "reconfigure" | "logfile", ..]
        | ["nodesets", _, "logfile", ..]
        | ["loginsets", _, "initconf", ..] => ignored(
            "a helper container of Slinky's: slurmops reconfigures from its own pass and logs go to stdout",
        ),
        ["controller", "inplaceReconfigure"] => {
            ignored("slurmops reconfigures in place whenever a change allows it")
        }
        [
            "controller" | "restapi" | "accounting" | "nodesets" | "loginsets",
            ..,
        ] if p.contains(&"metadata") => ignored("labels and annotations of Slinky's own objects"),
        ["controller", "metrics", ..] => {
            ignored("slurmops's ServiceMonitor (when metrics are on) scrapes Slurm's own endpoints")
        }
        ["controller" | "restapi" | "accounting", "service", ..] => {
            needs("slurmops renders this Service: add what you need with an object of your own")
        }
        ["controller" | "restapi" | "accounting", _, "args", ..]
        | ["nodesets", _, "slurmd", "args", ..] => needs(
            "extra daemon arguments: slurmops renders the command line; put settings in slurm.conf (slurmConf)",
        ),
        ["nodesets", _, "workloadDisruptionProtection"] => {
            ignored("slurmops always drains a worker before it replaces it")
        }
        ["nodesets", _, "pruneSlurmNodeRecords"] => {
            ignored("slurmops removes the node records of workers it removes")
        }
        ["nodesets", _, "partition", ..] => ignored("the NodeSet's own partition is off"),
        ["nodesets", _, "ssh", ..] => ignored("sshd in workers is off"),
        [
            "nodesets",
            _,
            "ordinalPadding" | "pinToNode" | "taintKubeNodes" | "oversubscribeNode",
        ] => ignored("off"),
        ["nodesets", _, "updateStrategy", "type"] => {
            ignored("slurmops rolls every change, draining first")
        }
        ["accounting", ..] => ignored("accounting is off"),
        ["sssd", ..] => ignored("no login set reads it"),
        ["vendor", ..] => ignored("off"),
        ["controller", "external" | "persistence" | "ha", ..]
        | ["jwksKeys", ..]
        | ["restapi", "pdb", ..]
        | ["priorityClass", ..] => ignored("off"),
        ["extraObjects", ..] => needs(
            "objects of your own: apply them yourself (slurmops manages only what it renders)",
        ),
        _ => needs("slurmops has no equivalent: carry it over by hand, or leave it"),
    }
}

#[cfg(test)]
mod tests;
