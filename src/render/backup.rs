//! The copies taken before a Slurm upgrade converts data in place (`spec.backup.claim`): an init
//! container in slurmdbd's pod dumps the accounting database, one in each controller pod copies
//! StateSaveLocation, both onto the claim. Each runs before its daemon starts, so it copies data
//! nobody writes (the pod it replaces has stopped), and compares the release it is about to
//! start with the one the last copy was taken for (the file `release` beside the copies): only
//! another major release takes a copy, so a restart costs nothing. A copy that fails stops its
//! pod before the daemon converts anything; the upgrade goes no further (see apply's upgrade).

use k8s_openapi::api::core::v1::{Container, EnvVar, PersistentVolumeClaimVolumeSource, Volume};

use super::database::DEFAULT_IMAGE;
use super::names::Names;
use super::pod;
use crate::cluster::release;
use crate::cluster::types::{ClusterSpec, Database};

/// The init container's name in slurmdbd's and the controllers' pods.
pub const CONTAINER: &str = "backup";
/// The claim's volume, and where the init containers mount it.
pub const VOLUME: &str = "backup";
pub const MOUNT: &str = "/var/lib/slurmops/backup";

/// The claim's volume, when copies go to one.
pub fn volume(s: &ClusterSpec) -> Option<Volume> {
    let claim = s.backup.as_ref()?.claim()?;
    Some(Volume {
        name: VOLUME.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.into(),
            read_only: None,
        }),
        ..Volume::default()
    })
}

/// Shell lines every copy starts with: `fail` says why in the pod's termination message (what
/// `kubectl describe` and slurmops's status show) and stops; `$last` is the release of the last
/// copy, and nothing is copied when it is this one.
fn preamble(what: &str, dir: &str) -> String {
    format!(
        "set -u\n\
         fail() {{ m=\"the copy of {what} before Slurm $SLURM_RELEASE starts failed: $*\"; echo \"$m\" >&2; echo \"$m\" > /dev/termination-log 2>/dev/null; exit 1; }}\n\
         dir=\"$BACKUP/$CLUSTER/{dir}\"\n\
         mkdir -p \"$dir\" || fail \"cannot make $dir on the backup claim\"\n\
         last=$(cat \"$dir/release\" 2>/dev/null)\n\
         if [ \"$last\" = \"$SLURM_RELEASE\" ]; then echo \"{what}: already copied (or nothing to copy) before Slurm $SLURM_RELEASE first started here\"; exit 0; fi\n\
         stamp=\"${{last:-earlier}}-to-$SLURM_RELEASE-$(date -u +%Y%m%dT%H%M%SZ)\"\n"
    )
}

/// The closing lines: the release copied for, written last (a copy cut short is taken again).
const RECORD: &str = "echo \"$SLURM_RELEASE\" > \"$dir/release.new\" && mv \"$dir/release.new\" \"$dir/release\" || fail \"cannot write $dir/release\"\n";

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

fn copier(
    s: &ClusterSpec,
    names: &Names,
    image: String,
    script: String,
    mut env_: Vec<EnvVar>,
) -> Container {
    let mut vars = vec![
        env("BACKUP", MOUNT),
        env("CLUSTER", &names.name),
        env("SLURM_RELEASE", &release::major_name(&s.slurm_version)),
    ];
    vars.append(&mut env_);
    Container {
        name: CONTAINER.into(),
        image: Some(image),
        image_pull_policy: Some(s.images.pull_policy.as_str().into()),
        command: Some(vec!["/bin/sh".into(), "-c".into()]),
        args: Some(vec![script]),
        env: Some(vars),
        resources: Some(super::resources::over(super::resources::COPY, None)),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(vec![pod::mount(VOLUME, MOUNT, false)]),
        ..Container::default()
    }
}

/// The controller pod's init container: STATE (mounted from the volume STATE_VOLUME) copied to
/// the claim, in the slurmctld image IMAGE.
pub fn state_copy(
    s: &ClusterSpec,
    names: &Names,
    image: String,
    state_volume: &str,
    state: &str,
) -> Option<Container> {
    s.backup.as_ref()?.claim()?;
    let mut script = preamble("slurmctld's state", "slurmctld");
    script.push_str(
        "if [ -n \"$(ls -A \"$STATE\" 2>/dev/null)\" ]; then\n\
         \x20 to=\"$dir/$stamp-$HOSTNAME\"\n\
         \x20 rm -rf \"$to.partial\"\n\
         \x20 out=$(cp -a \"$STATE/.\" \"$to.partial\" 2>&1) || fail \"cp: $out\"\n\
         \x20 mv \"$to.partial\" \"$to\" || fail \"cannot rename $to.partial\"\n\
         \x20 echo \"copied slurmctld's state ($STATE) to $to\"\n\
         fi\n",
    );
    script.push_str(RECORD);
    let mut c = copier(s, names, image, script, vec![env("STATE", state)]);
    c.volume_mounts
        .get_or_insert_with(Vec::new)
        .push(pod::mount(state_volume, state, true));
    Some(c)
}

/// The image whose mariadb-dump copies DB: `backup.image`, else the in-cluster MariaDB's image,
/// else MariaDB's own.
pub fn image(s: &ClusterSpec, db: &Database) -> String {
    s.backup
        .as_ref()
        .and_then(|b| b.image.clone())
        .or_else(|| db.in_cluster.as_ref().and_then(|ic| ic.image.clone()))
        .unwrap_or_else(|| DEFAULT_IMAGE.into())
}

/// slurmdbd's pod's init container: the accounting database DB dumped to the claim with
/// mariadb-dump, reaching it at HOST as slurmdbd does, with slurmdbd's password. It waits up to
/// 120 s for the database to answer (a new cluster's starts beside it); a database without
/// tables (slurmdbd never ran) has nothing to copy.
pub fn database_copy(
    s: &ClusterSpec,
    names: &Names,
    db: &Database,
    host: &str,
) -> Option<Container> {
    s.backup.as_ref()?.claim()?;
    let image = image(s, db);
    let mut script = preamble("the accounting database", "accounting");
    // The password reaches the clients in MYSQL_PWD, never on a command line.
    script.push_str(
        "q=\"SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '$DB_NAME'\"\n\
         i=0\n\
         ask() { mariadb -h \"$DB_HOST\" -P \"$DB_PORT\" -u \"$DB_USER\" -N -e \"$q\"; }\n\
         until tables=$(ask 2>/dev/null); do\n\
         \x20 i=$((i + 1))\n\
         \x20 [ \"$i\" -ge 60 ] && fail \"the database at $DB_HOST:$DB_PORT did not answer in 120 s: $(ask 2>&1 >/dev/null | tail -n 2)\"\n\
         \x20 sleep 2\n\
         done\n\
         tables=$(echo $tables)\n\
         if [ \"$tables\" != 0 ]; then\n\
         \x20 to=\"$dir/$stamp.sql\"\n\
         \x20 out=$(mariadb-dump -h \"$DB_HOST\" -P \"$DB_PORT\" -u \"$DB_USER\" --single-transaction --databases \"$DB_NAME\" --result-file=\"$to.partial\" 2>&1) || fail \"mariadb-dump: $out\"\n\
         \x20 mv \"$to.partial\" \"$to\" || fail \"cannot rename $to.partial\"\n\
         \x20 echo \"copied database $DB_NAME to $to\"\n\
         fi\n",
    );
    script.push_str(RECORD);
    let password = pod::secret_env("MYSQL_PWD", &db.password);
    let vars = vec![
        env("DB_HOST", host),
        env("DB_PORT", &db.port.to_string()),
        env("DB_USER", &db.user),
        env("DB_NAME", &db.name),
        password,
    ];
    Some(copier(s, names, image, script, vars))
}

#[cfg(test)]
mod tests {
    use crate::render::render;
    use serde_json::Value;

    fn cluster(backup: &str) -> crate::cluster::ClusterFile {
        let text = format!(
            "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: c, namespace: slurm}}\n\
             spec:\n  slurmVersion: \"25.11.3\"\n  auth:\n    slurmKey: {{name: k, key: k}}\n    jwtKey: {{name: j, key: j}}\n\
             {backup}\n  accounting:\n    enabled: true\n    database:\n      user: slurm\n      password: {{name: db, key: pw}}\n      inCluster: {{storage: 1Gi}}\n\
             \x20 nodeSets: [{{name: w, replicas: 2}}]\n  partitions: [{{name: p, nodeSets: [ALL]}}]\n"
        );
        crate::cluster::load("c.yaml", &text).unwrap()
    }

    /// The pod spec of StatefulSet NAME.
    fn pod(c: &crate::cluster::ClusterFile, name: &str) -> Value {
        let r = render(c);
        let o = r
            .objects
            .iter()
            .find(|o| o.kind == "StatefulSet" && o.name == name)
            .unwrap();
        o.body["spec"]["template"]["spec"].clone()
    }

    fn copier(spec: &Value) -> Option<&Value> {
        spec["initContainers"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == super::CONTAINER)
    }

    #[test]
    fn with_a_claim_slurmdbd_and_slurmctld_copy_their_data_before_they_start() {
        let c = cluster("  backup: {claim: copies}");
        let dbd = pod(&c, "c-accounting");
        let copy = copier(&dbd).expect("slurmdbd's pod copies the database");
        let script = copy["args"][0].as_str().unwrap();
        assert!(script.contains("mariadb-dump") && script.contains("--single-transaction"));
        // The copy runs before slurmdbd: after the init container that writes its config, as
        // the last init container.
        assert_eq!(dbd["initContainers"].as_array().unwrap().last(), Some(copy));
        // The password comes from the Secret, in the environment the client reads.
        let pw = copy["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "MYSQL_PWD")
            .unwrap();
        assert_eq!(pw["valueFrom"]["secretKeyRef"]["name"], "db");
        let release = copy["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "SLURM_RELEASE")
            .unwrap();
        assert_eq!(
            release["value"], "25.11",
            "the major release: a patch copies nothing"
        );
        let ctld = pod(&c, "c-controller");
        let copy = copier(&ctld).expect("the controller's pod copies the state");
        let mounts = copy["volumeMounts"].as_array().unwrap();
        assert!(
            mounts
                .iter()
                .any(|m| m["name"] == "statesave" && m["readOnly"] == true),
            "{mounts:?}"
        );
        for spec in [&dbd, &ctld] {
            let claim = spec["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == super::VOLUME)
                .unwrap();
            assert_eq!(claim["persistentVolumeClaim"]["claimName"], "copies");
            assert_eq!(spec["securityContext"]["fsGroup"], 401);
            assert_eq!(
                spec["securityContext"]["fsGroupChangePolicy"],
                "OnRootMismatch"
            );
        }
    }

    #[test]
    fn without_a_claim_no_pod_changes() {
        for backup in ["", "  backup: {ownCopies: true}"] {
            let c = cluster(backup);
            for name in ["c-accounting", "c-controller"] {
                let spec = pod(&c, name);
                assert!(copier(&spec).is_none(), "{name}");
                assert!(
                    spec["securityContext"].get("fsGroupChangePolicy").is_none(),
                    "{name}"
                );
            }
        }
    }
}
