//! The control plane's part of a Slinky import: slurmctld (placement, persistence, backups,
//! metrics, extra slurm.conf, config files and scripts), slurmrestd, slurmdbd and login sets.

use serde_json::{Map, Value as Json, json};

use super::{Images, conf, ignored, needs, path, placement, volumes_and_env};
use crate::import::Outcome;
use crate::import::values::Values;

pub(super) fn controller(v: &Values) -> Map<String, Json> {
    let mut c = Map::new();
    if v.read(&["controller", "external"]) == Some(Json::Bool(true)) {
        v.tell(
            &["controller", "external"],
            needs("slurmops runs slurmctld itself: an external controller is not carried over"),
        );
    }
    v.tell(
        &["controller", "externalConfig"],
        ignored("used only with an external controller"),
    );
    placement(
        v,
        &["controller"],
        Some(&["slurmctld", "resources"]),
        "spec.controller",
        &mut c,
    );
    let base = ["controller", "persistence"];
    let mut p = Map::new();
    if let Some(e) = v.map(
        &path(&base, &["enabled"]),
        "spec.controller.persistence.enabled",
    ) {
        p.insert("enabled".into(), e);
    }
    if let Some(x) = v.map_text(
        &path(&base, &["existingClaim"]),
        "spec.controller.persistence.existingClaim",
    ) {
        p.insert("existingClaim".into(), x.into());
    }
    if let Some(x) = v.map_text(
        &path(&base, &["storageClassName"]),
        "spec.controller.persistence.storageClass",
    ) {
        p.insert("storageClass".into(), x.into());
    }
    if let Some(x) = v.map_text(
        &path(&base, &["resources", "requests", "storage"]),
        "spec.controller.persistence.size",
    ) {
        p.insert("size".into(), x.into());
    }
    v.tell(
        &path(&base, &["accessModes"]),
        ignored("slurmops claims ReadWriteOnce per controller, or uses existingClaim (ReadWriteMany with backups)"),
    );
    if !p.is_empty() {
        c.insert("persistence".into(), p.into());
    }
    // Backup controllers (the development line's `controller.ha`).
    if v.read(&["controller", "ha", "enabled"]) == Some(Json::Bool(true)) {
        v.tell(
            &["controller", "ha", "enabled"],
            Outcome::Mapped("spec.controller.ha".into()),
        );
        let backups = v
            .map(
                &["controller", "ha", "backups"],
                "spec.controller.ha.backups",
            )
            .unwrap_or(json!(1));
        c.insert("ha".into(), json!({"backups": backups}));
        if !v.has(&["controller", "persistence", "existingClaim"]) {
            v.note(
                &["controller", "persistence", "existingClaim"],
                needs("backup controllers share one ReadWriteMany claim: name it in spec.controller.persistence.existingClaim"),
            );
        }
    }
    let slurm_conf = conf(v, &["controller"], "spec.controller.slurmConf");
    if !slurm_conf.is_empty() {
        c.insert("slurmConf".into(), slurm_conf.into());
    }
    let base = ["controller", "metrics"];
    if v.read(&path(&base, &["enabled"])) == Some(Json::Bool(true)) {
        v.tell(
            &path(&base, &["enabled"]),
            Outcome::Mapped("spec.controller.metrics.enabled".into()),
        );
        let mut m = json!({"enabled": true});
        if v.read(&path(&base, &["serviceMonitor", "enabled"])) == Some(Json::Bool(true)) {
            let mut sm = json!({"enabled": true});
            v.tell(
                &path(&base, &["serviceMonitor", "enabled"]),
                Outcome::Mapped("spec.controller.metrics.serviceMonitor".into()),
            );
            if let Some(i) = v.map(
                &path(&base, &["serviceMonitor", "interval"]),
                "spec.controller.metrics.serviceMonitor.interval",
            ) {
                sm["interval"] = i;
            }
            if let Some(l) = v.map(
                &path(&base, &["serviceMonitor", "labels"]),
                "spec.controller.metrics.serviceMonitor.labels",
            ) {
                sm["labels"] = l;
            }
            m["serviceMonitor"] = sm;
        }
        c.insert("metrics".into(), m);
    }
    // Files and scripts: slurmctld serves them configless.
    let mut files = Map::new();
    for name in v.keys(&["configFiles"]) {
        // Files slurmops renders are taken after the NodeSets (`generated::files`).
        if super::generated::rendered(&name) {
            continue;
        }
        if let Some(content) = v.map_text(
            &["configFiles", &name],
            &format!("spec.controller.configFiles.{name}"),
        ) {
            files.insert(name.clone(), json!({"content": content}));
        }
    }
    if !files.is_empty() {
        c.insert("configFiles".into(), files.into());
    }
    let mut scripts = Map::new();
    for (slinky, ours) in [
        ("prologScripts", "prolog"),
        ("epilogScripts", "epilog"),
        ("prologSlurmctldScripts", "prologSlurmctld"),
        ("epilogSlurmctldScripts", "epilogSlurmctld"),
    ] {
        let list: Vec<Json> = v
            .keys(&[slinky])
            .into_iter()
            .filter_map(|name| {
                let content =
                    v.map_text(&[slinky, &name], &format!("spec.controller.scripts.{ours}"))?;
                Some(json!({"name": name, "content": content}))
            })
            .collect();
        if !list.is_empty() {
            scripts.insert(ours.into(), list.into());
        }
        v.tell(
            &[&format!("{}Refs", slinky.trim_end_matches('s'))],
            needs("scripts from ConfigMaps: copy each into spec.controller.scripts (name and content)"),
        );
    }
    if !scripts.is_empty() {
        c.insert("scripts".into(), scripts.into());
    }
    c
}

pub(super) fn restapi(v: &Values) -> Option<Map<String, Json>> {
    let mut r = Map::new();
    if let Some(n) = v.map(&["restapi", "replicas"], "spec.restapi.replicas") {
        r.insert("replicas".into(), n);
    }
    placement(
        v,
        &["restapi"],
        Some(&["slurmrestd", "resources"]),
        "spec.restapi",
        &mut r,
    );
    if let Some(env) = v.map(
        &["restapi", "slurmrestd", "env"],
        "spec.restapi.podTemplate.env",
    ) {
        r.entry("podTemplate").or_insert_with(|| json!({}))["env"] = env;
    }
    v.tell(
        &["restapi", "pdb"],
        ignored(
            "slurmops renders a PodDisruptionBudget keeping one slurmrestd when it runs several",
        ),
    );
    (!r.is_empty()).then_some(r)
}

pub(super) fn accounting(v: &Values) -> Option<Map<String, Json>> {
    if v.read(&["accounting", "enabled"]) != Some(Json::Bool(true)) {
        return None;
    }
    v.tell(
        &["accounting", "enabled"],
        Outcome::Mapped("spec.accounting.enabled".into()),
    );
    if v.read(&["accounting", "external"]) == Some(Json::Bool(true)) {
        v.tell(
            &["accounting", "external"],
            needs("slurmops runs slurmdbd itself: an external slurmdbd is not carried over"),
        );
    }
    v.tell(
        &["accounting", "externalConfig"],
        ignored("used only with an external slurmdbd"),
    );
    let mut a = Map::new();
    a.insert("enabled".into(), true.into());
    placement(
        v,
        &["accounting"],
        Some(&["slurmdbd", "resources"]),
        "spec.accounting",
        &mut a,
    );
    let base = ["accounting", "storageConfig"];
    let mut db = Map::new();
    for (k, ours) in [
        ("host", "host"),
        ("port", "port"),
        ("database", "name"),
        ("username", "user"),
    ] {
        if let Some(x) = v.map(
            &path(&base, &[k]),
            &format!("spec.accounting.database.{ours}"),
        ) {
            db.insert(ours.into(), x);
        }
    }
    if let Some(p) = v.map(
        &path(&base, &["passwordKeyRef"]),
        "spec.accounting.database.password",
    ) {
        db.insert("password".into(), p);
    }
    a.insert("database".into(), db.into());
    let extra = conf(v, &["accounting"], "spec.accounting.slurmdbdConf");
    if !extra.is_empty() {
        a.insert("slurmdbdConf".into(), extra.into());
    }
    Some(a)
}

pub(super) fn login_sets(v: &Values, images: &Images) -> Vec<Json> {
    let mut out: Vec<Json> = Vec::new();
    for name in v.keys(&["loginsets"]) {
        let base = ["loginsets", name.as_str()];
        let to = format!("spec.loginSets[{name}]");
        if v.read(&path(&base, &["enabled"])) == Some(Json::Bool(false)) {
            v.tell(&base, ignored("disabled"));
            continue;
        }
        v.tell(&path(&base, &["enabled"]), Outcome::Mapped(to.clone()));
        let mut l = Map::new();
        l.insert("name".into(), name.clone().into());
        if let Some(n) = v.map(&path(&base, &["replicas"]), &format!("{to}.replicas")) {
            l.insert("replicas".into(), n);
        }
        if let Some(i) = images.of(v, &path(&base, &["login", "image"]), "login") {
            l.insert("image".into(), i.into());
        }
        placement(v, &base, Some(&["login", "resources"]), &to, &mut l);
        if let Some(s) = v.map(
            &path(&base, &["login", "securityContext"]),
            &format!("{to}.containerSecurityContext"),
        ) {
            l.insert("containerSecurityContext".into(), s);
        }
        volumes_and_env(v, &base, "login", &to, &mut l);
        if let Some(t) = v.map_text(
            &path(&base, &["service", "spec", "type"]),
            &format!("{to}.service.type"),
        ) {
            l.insert("service".into(), json!({"type": t}));
        }
        v.tell(&path(&base, &["rootSshAuthorizedKeys"]), needs("inline keys: put them in a Secret and name it in loginSets[].authorizedKeys (slurmops never writes a key into cluster.yaml)"));
        v.tell(&path(&base, &["extraSshdConfig"]), needs("slurmops's login pods keep their image's sshd_config: bake these lines into the login image"));
        v.tell(
            &path(&base, &["strategy"]),
            ignored("login pods roll as a Deployment does"),
        );
        out.push(l.into());
    }
    let sssd = if out.is_empty() {
        ignored("no login set runs sssd")
    } else {
        needs("sssd.conf inline: put it in a Secret and name it in each loginSets[].sssdConf")
    };
    v.tell(&["sssd", "conf"], sssd);
    if let Some(name) = v.text(&["sssd", "secretRef", "name"]) {
        let key = v
            .text(&["sssd", "secretRef", "key"])
            .unwrap_or_else(|| "sssd.conf".into());
        v.tell(
            &["sssd", "secretRef"],
            Outcome::Mapped("spec.loginSets[].sssdConf".into()),
        );
        for l in out.iter_mut() {
            l["sssdConf"] = json!({"name": name, "key": key});
        }
    }
    out
}
