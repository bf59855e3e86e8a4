//! A remote git repository the daemon follows, fetched in-process with libgit2 into a local bare
//! mirror: over HTTP(S) (optionally with a token) or SSH with a private key and **pinned host
//! keys** (a known_hosts file; a host key it does not list is refused). cluster.yaml is read from
//! the fetched commit's tree, never from a work tree. Force-pushes are followed (`+` refspec).

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use base64::Engine;
use git2::{CertificateCheckStatus, Cred, FetchOptions, RemoteCallbacks, Repository};
use sha2::{Digest, Sha256};

use super::FILE_NAME;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("git fetch {url} (branch {branch}): {message}")]
    Fetch {
        url: String,
        branch: String,
        message: String,
    },
    #[error(
        "git fetch {url}: the SSH host key of {host} (SHA256:{fingerprint}) is not pinned in {known_hosts}; refusing to connect. If the key is right, add it to that file"
    )]
    HostKey {
        url: String,
        host: String,
        fingerprint: String,
        known_hosts: String,
    },
    #[error("{url} at {commit}: no {path} in the commit's tree")]
    NoClusterFile {
        url: String,
        commit: String,
        path: String,
    },
    #[error("git mirror {dir}: {message}")]
    Mirror { dir: String, message: String },
}

/// How to authenticate.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    #[default]
    Anonymous,
    /// HTTPS token (sent as the password; user `x-access-token` unless the URL names one).
    Token(String),
    /// SSH private key file and the known_hosts file pinning the server's host keys.
    Ssh {
        private_key: PathBuf,
        known_hosts: PathBuf,
    },
}

/// A repository to follow.
#[derive(Debug, Clone)]
pub struct Remote {
    pub url: String,
    pub branch: String,
    /// Directory inside the repository holding cluster.yaml ("" for the root).
    pub path: String,
    pub auth: Auth,
    /// Where the local bare mirror lives.
    pub mirror: PathBuf,
}

/// cluster.yaml at a fetched commit.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub commit: String,
    /// Name used in diagnostics: `URL@SHORT:PATH/cluster.yaml`.
    pub name: String,
    pub text: String,
    /// The commit's raw signature and signed data, if it is signed.
    pub signature: Option<(Vec<u8>, Vec<u8>)>,
}

impl Remote {
    fn file_path(&self) -> String {
        let dir = self.path.trim_matches('/');
        if dir.is_empty() {
            FILE_NAME.to_string()
        } else {
            format!("{dir}/{FILE_NAME}")
        }
    }

    fn tracking_ref(&self) -> String {
        format!("refs/remotes/origin/{}", self.branch)
    }

    fn open_mirror(&self) -> Result<Repository, RemoteError> {
        let err = |e: git2::Error| RemoteError::Mirror {
            dir: self.mirror.display().to_string(),
            message: e.message().to_string(),
        };
        if self.mirror.join("HEAD").exists() {
            Repository::open_bare(&self.mirror).map_err(err)
        } else {
            Repository::init_bare(&self.mirror).map_err(err)
        }
    }

    /// Fetches the branch (blocking) and reads cluster.yaml at its tip.
    pub fn fetch(&self) -> Result<Fetched, RemoteError> {
        let repo = self.open_mirror()?;
        let refused: RefCell<Option<RemoteError>> = RefCell::new(None);
        let mut cb = RemoteCallbacks::new();
        let auth = self.auth.clone();
        cb.credentials(move |_url, user, _allowed| match &auth {
            Auth::Anonymous => Cred::default(),
            Auth::Token(t) => Cred::userpass_plaintext(user.unwrap_or("x-access-token"), t),
            Auth::Ssh { private_key, .. } => {
                Cred::ssh_key(user.unwrap_or("git"), None, private_key, None)
            }
        });
        if let Auth::Ssh { known_hosts, .. } = &self.auth {
            let known_hosts = known_hosts.clone();
            let url = self.url.clone();
            let refused = &refused;
            cb.certificate_check(move |cert, host| {
                let Some(hash) = cert.as_hostkey().and_then(|k| k.hash_sha256()) else {
                    return Err(git2::Error::from_str("no SSH host key to check"));
                };
                match pinned(&known_hosts, host, hash) {
                    Ok(true) => Ok(CertificateCheckStatus::CertificateOk),
                    Ok(false) => {
                        *refused.borrow_mut() = Some(RemoteError::HostKey {
                            url: url.clone(),
                            host: host.to_string(),
                            fingerprint: base64::engine::general_purpose::STANDARD_NO_PAD
                                .encode(hash),
                            known_hosts: known_hosts.display().to_string(),
                        });
                        Err(git2::Error::from_str("SSH host key not pinned"))
                    }
                    Err(e) => Err(git2::Error::from_str(&e)),
                }
            });
        }
        let mut fo = FetchOptions::new();
        fo.remote_callbacks(cb);
        let refspec = format!("+refs/heads/{}:{}", self.branch, self.tracking_ref());
        let fetched = repo
            .remote_anonymous(&self.url)
            .and_then(|mut r| r.fetch(&[&refspec], Some(&mut fo), None));
        drop(fo);
        if let Some(e) = refused.into_inner() {
            return Err(e);
        }
        fetched.map_err(|e| RemoteError::Fetch {
            url: self.url.clone(),
            branch: self.branch.clone(),
            message: e.message().to_string(),
        })?;
        self.read(&repo)
    }

    /// cluster.yaml at the tip of the fetched branch.
    fn read(&self, repo: &Repository) -> Result<Fetched, RemoteError> {
        let mirror_err = |e: git2::Error| RemoteError::Mirror {
            dir: self.mirror.display().to_string(),
            message: e.message().to_string(),
        };
        let commit = repo
            .find_reference(&self.tracking_ref())
            .and_then(|r| r.peel_to_commit())
            .map_err(mirror_err)?;
        let id = commit.id().to_string();
        let path = self.file_path();
        let missing = || RemoteError::NoClusterFile {
            url: self.url.clone(),
            commit: id.clone(),
            path: path.clone(),
        };
        let blob = commit
            .tree()
            .map_err(mirror_err)?
            .get_path(Path::new(&path))
            .map_err(|_| missing())?
            .to_object(repo)
            .and_then(|o| o.peel_to_blob())
            .map_err(|_| missing())?;
        let text = String::from_utf8(blob.content().to_vec()).map_err(|_| RemoteError::Mirror {
            dir: self.mirror.display().to_string(),
            message: format!("{path} at {id} is not UTF-8 text"),
        })?;
        let signature = repo
            .extract_signature(&commit.id(), None)
            .ok()
            .map(|(sig, data)| (sig.to_vec(), data.to_vec()));
        Ok(Fetched {
            name: format!("{}@{}:{path}", self.url, &id[..12]),
            commit: id,
            text,
            signature,
        })
    }
}

/// Whether KNOWN_HOSTS pins a key with SHA-256 HASH for HOST (plain `host` or `[host]:port`
/// patterns; hashed entries are not supported and say so).
fn pinned(known_hosts: &Path, host: &str, hash: &[u8; 32]) -> Result<bool, String> {
    let text = std::fs::read_to_string(known_hosts)
        .map_err(|e| format!("cannot read known_hosts {}: {e}", known_hosts.display()))?;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(hosts), Some(_kind), Some(key)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if hosts.starts_with('|') {
            return Err(format!(
                "{}: hashed known_hosts entries are not supported; list hosts in plain text",
                known_hosts.display()
            ));
        }
        let matches = hosts.split(',').any(|h| {
            h == host
                || h.strip_prefix('[')
                    .and_then(|r| r.split_once("]:"))
                    .is_some_and(|(name, _port)| name == host)
        });
        let Ok(blob) = base64::engine::general_purpose::STANDARD.decode(key) else {
            continue;
        };
        if matches && Sha256::digest(&blob).as_slice() == hash {
            return Ok(true);
        }
    }
    Ok(false)
}
