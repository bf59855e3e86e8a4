//! A user's session end to end (issue 34): the login pod slurmops renders from a LoginSet, run by
//! the test kubelet as a login image runs it (sssd with the rendered sssd.conf Secret, sackd
//! configless against the bed's slurmctld, sshd in front), and an ordinary user of an LDAP
//! directory (Debian's slapd on 127.0.0.1) logging in over ssh to run `sinfo`, `srun hostname`
//! and a batch job that completes on the cluster's worker. The user is known only through SSSD:
//! the Slurm chroot's /etc/passwd has no such user. Their home directory (with their
//! authorized_keys) is made by the test in the chroot, as the shared home volume a LoginSet mounts
//! would hold it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use slurmops::slurm::SlurmNodes;

use crate::support::kubelet::Event;
use crate::support::slurm::{job_state, sh_on, slurmd_port};
use crate::support::{TestEnv, bed, cluster_head, eventually, slurm_release};

const UID: u32 = 5001;

fn chroot(release: &str) -> PathBuf {
    let out = Command::new("bash")
        .args(["tests/bed/slurm-chroot.sh", release])
        .output()
        .unwrap();
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The directory: the user `dana` (uid 5001) and their group.
fn directory_ldif(user: &str) -> String {
    format!(
        "dn: dc=slurmops,dc=test\nobjectClass: dcObject\nobjectClass: organization\ndc: slurmops\no: slurmops test\n\n\
         dn: ou=People,dc=slurmops,dc=test\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: ou=Groups,dc=slurmops,dc=test\nobjectClass: organizationalUnit\nou: Groups\n\n\
         dn: uid={user},ou=People,dc=slurmops,dc=test\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\n\
         uid: {user}\ncn: {user}\nsn: User\nuidNumber: {UID}\ngidNumber: {UID}\nhomeDirectory: /home/{user}\nloginShell: /bin/bash\n\n\
         dn: cn={user},ou=Groups,dc=slurmops,dc=test\nobjectClass: posixGroup\ncn: {user}\ngidNumber: {UID}\n"
    )
}

/// The sssd.conf a platform team writes for an LDAP directory (here without TLS, on loopback).
fn sssd_conf(ldap_port: u16) -> String {
    format!(
        "[sssd]\nconfig_file_version = 2\nservices = nss\ndomains = LDAP\n\n\
         [nss]\nfilter_users = root,slurm\nfilter_groups = root,slurm\n\n\
         [domain/LDAP]\nid_provider = ldap\nauth_provider = none\nldap_uri = ldap://127.0.0.1:{ldap_port}\n\
         ldap_search_base = dc=slurmops,dc=test\nldap_schema = rfc2307\nldap_id_use_start_tls = false\n\
         cache_credentials = false\nentry_cache_timeout = 5\n"
    )
}

/// The test's slapd instance, stopped when dropped (when the test fails too).
struct Directory(String);

impl Drop for Directory {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .args(["tests/bed/slurm.sh", "stop", &self.0])
            .status();
    }
}

/// (exit status 0, stdout, stderr) of COMMAND run over ssh as USER.
fn ssh(
    key: &Path,
    known_hosts: &Path,
    port: u16,
    user: &str,
    command: &str,
) -> (bool, String, String) {
    let out = Command::new("ssh")
        .arg("-i")
        .arg(key)
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
        .args(["-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"])
        .args(["-o", "ConnectTimeout=10", "-o", "IdentitiesOnly=yes"])
        .args(["-p", &port.to_string()])
        .arg(format!("{user}@127.0.0.1"))
        .arg(command)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// On the releases whose chroot has SSSD: Debian's frozen forky snapshot (26.05) carries none.
on_slurm_releases! {
async fn a_user_logs_in_over_ssh_and_runs_srun_and_a_batch_job_that_completes() {
    let env = TestEnv::new("login").await;
    let release = slurm_release();
    let root = chroot(release);
    let user = "dana";
    // The directory, from the 24.11 chroot (as MariaDB), on a port of its own.
    let ldap_port = slurmd_port();
    let work = tempfile::tempdir().unwrap();
    let ldif = work.path().join("directory.ldif");
    std::fs::write(&ldif, directory_ldif(user)).unwrap();
    let ldap = Directory(format!("ldap-{}", env.suffix));
    sh_on("24.11", &["start-slapd", &ldap.0, &ldap_port.to_string(), ldif.to_str().unwrap()]);
    assert!(
        !std::fs::read_to_string(root.join("etc/passwd")).unwrap().contains(&format!("{user}:")),
        "the chroot's /etc/passwd knows {user}: the test would not prove SSSD"
    );
    // The user's key, and their home as the shared home volume holds it.
    let key = work.path().join("id_ed25519");
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(status.success());
    let home = root.join(format!("home/{user}"));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::copy(key.with_extension("pub"), home.join(".ssh/authorized_keys")).unwrap();
    let chown = Command::new("chown")
        .args(["-R", &format!("{UID}:{UID}")])
        .arg(&home)
        .status()
        .unwrap();
    assert!(chown.success());

    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sssd"},
        "stringData": {"sssd.conf": sssd_conf(ldap_port)},
    }))
    .unwrap();
    Api::<Secret>::namespaced(env.client.clone(), &env.ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let w = env.name("lw");
    let yaml = cluster_head("c", &env.ns)
        + &format!(
            "  loginSets:\n    - {{name: l, replicas: 1, sssdConf: {{name: sssd, key: sssd.conf}}}}\n  nodeSets:\n    - {{name: {w}, replicas: 1, cpu: \"1\", memory: 256Mi}}\n  partitions:\n    - {{name: all, nodeSets: [ALL], default: true}}\n"
        );
    let c = slurmops::cluster::load("cluster.yaml", &yaml).unwrap_or_else(|d| panic!("{d:?}"));
    let cluster = slurmops::k8s::Connection::connect(Some(&bed().kubeconfig_admin), None)
        .await
        .unwrap();
    let opts = slurmops::apply::Options::default();
    slurmops::apply::apply(&cluster, &c, &yaml, &slurmops::render::render(&c), &opts, &slurmops::apply::NoSlurm)
        .await
        .unwrap();
    let worker = format!("{w}-0");
    let s = crate::support::slurm::client();
    eventually(&format!("{worker} idle"), Duration::from_secs(60), async || {
        let n = s.get(&worker).await.ok()?;
        (n.state.has("IDLE") && !n.state.has("NOT_RESPONDING")).then_some(())
    })
    .await;
    let port = eventually("the login pod's sshd", Duration::from_secs(60), async || {
        env.kubelet.events().iter().find_map(|e| match e {
            Event::LoginStarted { port, .. } => Some(*port),
            _ => None,
        }).filter(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_ok())
    })
    .await;
    // The login image's host key, pinned.
    let host_key = std::fs::read_to_string(root.join("etc/ssh/ssh_host_ed25519_key.pub")).unwrap();
    let known_hosts = work.path().join("known_hosts");
    std::fs::write(&known_hosts, format!("[127.0.0.1]:{port} {host_key}")).unwrap();

    // A key the user never authorized is refused.
    let other = work.path().join("other");
    assert!(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(&other).status().unwrap().success());
    let (ok, _, said) = ssh(&other, &known_hosts, port, user, "true");
    assert!(!ok && said.contains("Permission denied"), "{said}");

    // SSSD may need a moment for its first lookup: the login is tried until it answers.
    let session = format!(
        "id -un && id -u && sinfo -h -N -o %N && cd ~ && sbatch --parsable -w {worker} -o job.out --wrap hostname && srun -N1 -w {worker} hostname"
    );
    let said = eventually("dana's session", Duration::from_secs(60), async || {
        let (ok, said, err) = ssh(&key, &known_hosts, port, user, &session);
        if !ok {
            eprintln!("ssh as {user}: {said}{err}");
        }
        ok.then_some(said)
    })
    .await;
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.first(), Some(&user), "{said}");
    assert_eq!(lines.get(1), Some(&"5001"), "{said}");
    assert!(lines.contains(&worker.as_str()), "sinfo lists no {worker}:\n{said}");
    // sbatch's job id, then srun's output: the worker's hostname (the pod's).
    let (job, srun) = match lines.as_slice() {
        [.., job, srun] => (job.trim().parse::<u64>().unwrap_or_else(|_| panic!("no job id:\n{said}")), *srun),
        _ => panic!("{said}"),
    };
    assert_eq!(srun, worker, "srun hostname:\n{said}");
    eventually(&format!("job {job} COMPLETED"), Duration::from_secs(60), async || {
        job_state(job).await.iter().any(|s| s == "COMPLETED").then_some(())
    })
    .await;
    let out = std::fs::read_to_string(home.join("job.out")).unwrap_or_default();
    assert_eq!(out.trim(), worker, "the batch job's output in {user}'s home");

    drop(env.kubelet);
    drop(ldap);
    let _ = std::fs::remove_dir_all(&home);
}; slurm_24_11 "24.11", slurm_25_11 "25.11"
}
