//! The flags of `slurmops run` made into the daemon's `Config`: secrets read and checked, the
//! repository's transport and the job user refused where unsafe, `--config FILE` expanded.

use std::path::PathBuf;

use super::RunArgs;
use crate::apply::Options;
use crate::cluster::values::Duration;
use crate::daemon::{Config, SlurmSource};
use crate::source::remote::{Auth, Remote};

/// A duration like `90s`, `10m` or `250ms` (at least 10 ms).
pub(super) fn interval(text: &str) -> Result<std::time::Duration, String> {
    let d = match text.trim().strip_suffix("ms") {
        Some(ms) => ms
            .parse::<u64>()
            .map(std::time::Duration::from_millis)
            .map_err(|_| format!("invalid duration {text:?}: write it like 250ms, 90s or 10m"))?,
        None => std::time::Duration::from_secs(Duration::parse(text)?.as_secs()),
    };
    Ok(d.max(std::time::Duration::from_millis(10)))
}

/// A secret from a file: trimmed, at most 64 KiB, not empty.
fn read_secret(path: &PathBuf, what: &str) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the {what} {shown}: {e}"))?;
    if bytes.len() > 64 << 10 {
        return Err(format!(
            "the {what} {shown} is larger than 64 KiB: is it the right file?"
        ));
    }
    let secret = bytes.trim_ascii().to_vec();
    if secret.is_empty() {
        return Err(format!(
            "the {what} {shown} is empty: an empty secret would accept anything signed with it"
        ));
    }
    Ok(secret)
}

/// Where the daemon's Slurm client comes from.
fn slurm_source(a: &RunArgs) -> Result<SlurmSource, String> {
    use crate::slurm::auth::{Credentials, KeyBytes, Secret};
    let refused = crate::slurm::client::REFUSED_JOB_USERS;
    let u = a.job_user.trim();
    if !a.no_slurm && (u.is_empty() || u == a.slurm_user || refused.contains(&u)) {
        return Err(format!(
            "--job-user {:?}: the jobs slurmops submits (checks, canaries' validations) never run as the Slurm administrator ({}) or root, nor as nobody (Slurm refuses its jobs); name an unprivileged user that slurmctld and every worker know (default {})",
            a.job_user,
            a.slurm_user,
            crate::slurm::client::DEFAULT_JOB_USER
        ));
    }
    let credentials = match (&a.slurm_jwt, &a.slurm_jwt_file, &a.slurm_jwt_key_file) {
        _ if a.no_slurm => return Ok(SlurmSource::Off),
        (Some(t), _, _) => Credentials::Token {
            token: Secret::new(t.clone()),
            user: None,
        },
        (_, Some(f), _) => Credentials::Token {
            token: Secret::new(
                String::from_utf8(read_secret(f, "Slurm JWT file")?)
                    .map_err(|_| "the Slurm JWT file is not text".to_string())?,
            ),
            user: None,
        },
        (_, _, Some(f)) => Credentials::Key {
            key: KeyBytes(read_secret(f, "Slurm JWT key file")?),
            user: a.slurm_user.clone(),
            lifetime: crate::slurm::connect::TOKEN_LIFETIME,
        },
        _ => {
            return Ok(SlurmSource::Cluster {
                url: a.slurmrestd_url.clone(),
                user: a.slurm_user.clone(),
                job_user: a.job_user.clone(),
                allow_http: a.allow_http,
            });
        }
    };
    let url = a.slurmrestd_url.clone().unwrap_or_default();
    let mut config = crate::slurm::Config::new(url, credentials);
    config.allow_http = a.allow_http;
    config.queue_wait = crate::daemon::QUEUE_WAIT;
    config.queue_every = a.interval;
    config.job_user = a.job_user.clone();
    let client = crate::slurm::Client::new(config).map_err(|e| e.to_string())?;
    Ok(SlurmSource::Static(std::sync::Arc::new(client)))
}

/// Refuses credentials for the repository over a plain-text transport, and a plain-text
/// repository beyond this host and the cluster's own Services without signature checks (whoever
/// is on the path would decide what is applied), unless allowed.
fn git_transport_ok(a: &RunArgs, auth: &Auth) -> Result<(), String> {
    let scheme = ["http://", "git://"]
        .into_iter()
        .find(|p| a.repo.starts_with(p));
    let Some(scheme) = scheme.filter(|_| !a.allow_http) else {
        return Ok(());
    };
    let url = crate::source::remote::redact(&a.repo);
    if matches!(auth, Auth::Token(_)) || url != a.repo {
        return Err(format!(
            "{url}: refusing to send git credentials over plain {scheme}; use https:// or ssh://, or allow it explicitly with --allow-http"
        ));
    }
    let signed = a.allowed_signers.is_some() || a.allowed_gpg_keys.is_some();
    let near = crate::net::stays_near(&a.repo);
    if !signed && !near {
        return Err(format!(
            "{url}: refusing to follow a repository over plain {scheme} without signature checks: anyone on the network path could change what is applied. Use https:// or ssh://, check signatures (--allowed-signers, --allowed-gpg-keys), or allow it explicitly with --allow-http"
        ));
    }
    Ok(())
}

fn allowed_signers(
    a: &RunArgs,
) -> Result<Option<crate::source::signature::AllowedSigners>, String> {
    use crate::source::signature::AllowedSigners;
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    let mut allowed = match &a.allowed_signers {
        Some(p) => AllowedSigners::parse(&p.display().to_string(), &read(p)?)?,
        None if a.allowed_gpg_keys.is_some() => AllowedSigners::default(),
        None => return Ok(None),
    };
    if let Some(p) = &a.allowed_gpg_keys {
        allowed.add_gpg(&p.display().to_string(), &read(p)?)?;
    }
    Ok(Some(allowed))
}

pub(super) fn config(a: &RunArgs) -> Result<Config, String> {
    let auth = match (&a.ssh_key, &a.known_hosts, &a.token_file) {
        (Some(key), Some(kh), _) => Auth::Ssh {
            private_key: key.clone(),
            known_hosts: kh.clone(),
        },
        (_, _, Some(t)) => Auth::Token(secrecy::SecretString::from(
            String::from_utf8(read_secret(t, "token file")?)
                .map_err(|_| "the token file is not text".to_string())?,
        )),
        _ => Auth::Anonymous,
    };
    git_transport_ok(a, &auth)?;
    let slurm = slurm_source(a)?;
    Ok(Config {
        remote: Remote {
            url: a.repo.clone(),
            branch: a.branch.clone(),
            path: a.path.clone(),
            auth,
            mirror: a.mirror.clone(),
            timeout: std::time::Duration::from_secs(a.git_timeout.as_secs().max(1)),
        },
        interval: a.interval,
        drift_interval: std::time::Duration::from_secs(a.drift_interval.as_secs().max(1)),
        listen: Some(a.listen),
        webhook_secret: match &a.webhook_secret_file {
            Some(f) => Some(secrecy::SecretSlice::from(read_secret(
                f,
                "webhook secret file",
            )?)),
            None => None,
        },
        namespace: a.namespace.clone(),
        guard: a.guard.guardrails(Some(&a.namespace))?,
        cluster: a.cluster.clone(),
        identity: a.identity.clone(),
        pod: a.pod_name.clone(),
        slurm,
        apply: Options {
            detect_only: a.detect_only,
            ..Options::default()
        },
        allowed_signers: allowed_signers(a)?,
        allow_force_push: a.allow_force_push,
        once: a.once,
        suspend: a.suspend,
        ui: !a.no_ui,
        ui_token: match &a.ui_token_file {
            Some(f) => {
                let t = read_secret(f, "UI token file")?;
                let t = String::from_utf8(t)
                    .map_err(|_| format!("{}: the UI token file is not text", f.display()))?;
                if t.trim().len() < 16 {
                    return Err(format!(
                        "{}: the UI token is shorter than 16 characters: write a longer one (e.g. `openssl rand -hex 24`)",
                        f.display()
                    ));
                }
                Some(secrecy::SecretSlice::from(t.trim().as_bytes().to_vec()))
            }
            None => None,
        },
    })
}

/// `slurmops run --config FILE` (or SLURMOPS_CONFIG): each `key: value` line of FILE becomes
/// `--key value` unless the command line already has `--key`; `key: true` becomes `--key`.
pub fn expand_config(args: Vec<String>) -> Result<Vec<String>, String> {
    if args.get(1).map(String::as_str) != Some("run") {
        return Ok(args);
    }
    let from_flag = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--config=").map(str::to_string))
        });
    let Some(path) = from_flag.or_else(|| std::env::var("SLURMOPS_CONFIG").ok()) else {
        return Ok(args);
    };
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("cannot read config {path}: {e}"))?;
    let mut out = args.clone();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // `key: value` or `key=value`, whichever separator comes first (values hold URLs).
        let Some((key, value)) = line.find([':', '=']).map(|i| (&line[..i], &line[i + 1..])) else {
            return Err(format!("{path}:{}:1: expected `key: value`", n + 1));
        };
        let (key, value) = (key.trim(), value.trim().trim_matches('"'));
        let flag = format!("--{key}");
        let given = args
            .iter()
            .any(|a| *a == flag || a.starts_with(&format!("{flag}=")));
        if given || key == "config" {
            continue;
        }
        match value {
            "true" => out.push(flag),
            "false" => {}
            v => {
                out.push(flag);
                out.push(v.to_string());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_file_lines_become_flags_the_command_line_did_not_give() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("slurmops.conf");
        std::fs::write(
            &f,
            "# daemon\nrepo: https://git.example/a.git\ninterval: 30s\nonce: true\nbranch: prod\n",
        )
        .unwrap();
        let args: Vec<String> = [
            "slurmops",
            "run",
            "--config",
            f.to_str().unwrap(),
            "--branch",
            "main",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = expand_config(args).unwrap();
        assert_eq!(
            out[4..],
            [
                "--branch",
                "main",
                "--repo",
                "https://git.example/a.git",
                "--interval",
                "30s",
                "--once"
            ]
        );
        std::fs::write(&f, "no separator here\n").unwrap();
        let args: Vec<String> = ["slurmops", "run", "--config", f.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let err = expand_config(args).unwrap_err();
        assert!(err.ends_with(":1:1: expected `key: value`"), "{err}");
    }

    fn run_args(args: &[&str]) -> RunArgs {
        use clap::FromArgMatches;
        let cmd = <RunArgs as clap::Args>::augment_args(clap::Command::new("run"));
        let m = cmd
            .try_get_matches_from(std::iter::once("run").chain(args.iter().copied()))
            .unwrap();
        RunArgs::from_arg_matches(&m).unwrap()
    }

    #[test]
    fn credentials_over_plain_text_transports_and_empty_secrets_are_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "ghp_secret\n").unwrap();
        let t = token.to_str().unwrap();
        for repo in ["http://git.example/a.git", "git://git.example/a.git"] {
            let err = config(&run_args(&["--repo", repo, "--token-file", t]))
                .err()
                .unwrap();
            assert!(err.contains("refusing to send git credentials"), "{err}");
            assert!(!err.contains("ghp_secret"));
        }
        let err = config(&run_args(&[
            "--repo",
            "http://ci:ghp_secret@git.example/a.git",
        ]))
        .err()
        .unwrap();
        assert!(
            err.contains("refusing") && !err.contains("ghp_secret"),
            "{err}"
        );
        // Unsigned over plain text beyond this host and the cluster's Services: refused, unless
        // signatures are checked or it is allowed.
        for repo in ["http://git.example/a.git", "git://10.1.2.3/a.git"] {
            let err = config(&run_args(&["--repo", repo])).err().unwrap();
            assert!(err.contains("without signature checks"), "{err}");
        }
        let signers = dir.path().join("signers");
        let key =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKQWDWLMUXfKWlDZ2T2vjStNjBmZKBz0rnetU2O76mEP";
        std::fs::write(&signers, format!("ops@example.com {key}\n")).unwrap();
        let s = signers.to_str().unwrap();
        for args in [
            &["--repo", "http://git.example/a.git", "--allowed-signers", s][..],
            &["--repo", "http://git.example/a.git", "--allow-http"],
            &["--repo", "http://127.0.0.1:3000/a.git"],
            &["--repo", "git://gitea.git.svc/a.git"],
        ] {
            config(&run_args(args)).unwrap();
        }
        // Explicitly allowed, or over https: accepted.
        config(&run_args(&[
            "--repo",
            "http://git.example/a.git",
            "--token-file",
            t,
            "--allow-http",
        ]))
        .unwrap();
        config(&run_args(&[
            "--repo",
            "https://git.example/a.git",
            "--token-file",
            t,
        ]))
        .unwrap();

        let empty = dir.path().join("empty");
        std::fs::write(&empty, " \n").unwrap();
        let err = config(&run_args(&[
            "--repo",
            "https://git.example/a.git",
            "--webhook-secret-file",
            empty.to_str().unwrap(),
        ]))
        .err()
        .unwrap();
        assert!(err.contains("is empty"), "{err}");

        // Slurm tokens: plain http only to loopback or in-cluster Services.
        let jwt = dir.path().join("jwt");
        std::fs::write(&jwt, "eyJ.x.y\n").unwrap();
        let j = jwt.to_str().unwrap();
        let slurm = |url: &str, extra: &[&str]| {
            let mut args = vec!["--repo", "https://g/a.git", "--slurmrestd-url", url];
            args.extend(["--slurm-jwt-file", j]);
            args.extend(extra);
            config(&run_args(&args)).map(|_| ())
        };
        assert!(
            slurm("http://slurmrestd.example.com:6820", &[])
                .unwrap_err()
                .contains("plain http://")
        );
        slurm("http://slurmrestd.example.com:6820", &["--allow-http"]).unwrap();
        slurm("http://127.0.0.1:6820", &[]).unwrap();
        slurm("http://c-restapi.slurm.svc:6820", &[]).unwrap();
        slurm("https://slurmrestd.example.com", &[]).unwrap();
    }
}
