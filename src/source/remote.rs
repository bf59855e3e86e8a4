//! A remote git repository the daemon follows, fetched in-process with libgit2 into a local bare
//! mirror: over HTTP(S) (optionally with a token) or SSH with a private key and **pinned host
//! keys** (a known_hosts file; a host key it does not list is refused). cluster.yaml is read from
//! the fetched commit's tree, never from a work tree. Force-pushes are fetched (`+` refspec) and
//! told apart ([`history`]): the daemon applies them only when the install allows.
//!
//! The server is untrusted: a fetch is shallow (the tip only; the history once, when a tip's
//! lineage needs it), every socket has libgit2's connect
//! and read timeouts, the whole transfer has a deadline, a refused credential is not offered
//! again, and cluster.yaml's size is read from the object header before its content. Credentials
//! in the URL never reach an error, a log line or the status ([`redact`]).

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use git2::{CertificateCheckStatus, Cred, FetchOptions, RemoteCallbacks, Repository};

use super::FILE_NAME;
use super::history::{self, Lineage, Walk};
use super::known_hosts::Verdict;

/// libgit2's depth for "fetch the whole history of a shallow mirror" (GIT_FETCH_DEPTH_UNSHALLOW).
const UNSHALLOW: i32 = i32::MAX;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("git fetch {url} (branch {branch}): {message}")]
    Fetch {
        url: String,
        branch: String,
        message: String,
    },
    #[error(
        "git fetch {url}: the SSH host key of {host} (SHA256:{fingerprint}) {}; refusing to connect",
        if *revoked { format!("is marked @revoked in {known_hosts}") } else { format!("is not pinned in {known_hosts}. If the key is right, add it to that file") }
    )]
    HostKey {
        url: String,
        host: String,
        fingerprint: String,
        known_hosts: String,
        revoked: bool,
    },
    #[error("{url} at {commit}: no {path} in the commit's tree")]
    NoClusterFile {
        url: String,
        commit: String,
        path: String,
    },
    #[error("git mirror {dir}: {message}")]
    Mirror { dir: String, message: String },
    #[error(
        "{url} at {commit}: {path} is {size} bytes; cluster.yaml may be at most {max} bytes (not read)",
        max = crate::cluster::yaml::MAX_BYTES
    )]
    TooLarge {
        url: String,
        commit: String,
        path: String,
        size: usize,
    },
}

/// Most time a connection to the git server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default for how long the git server may stay silent while an answer is awaited.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// A whole fetch may take this many read timeouts (checked between the chunks the server sends).
pub const DEADLINE_READS: u32 = 6;

/// URL without credentials (`https://user:token@host/x` → `https://host/x`): what errors, logs
/// and the status may show.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        // scp-like `user@host:path`: the user name is not a secret.
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => format!("{scheme}://{host}{path}"),
        Some((_user, host)) if scheme.starts_with("http") => format!("{scheme}://{host}{path}"),
        _ => url.to_string(),
    }
}

/// MESSAGE with URL's credentials (if any) cut out: libgit2 may quote the URL.
fn redact_in(message: &str, url: &str) -> String {
    let shown = redact(url);
    if shown == url {
        message.to_string()
    } else {
        message.replace(url, &shown)
    }
}

/// libgit2's socket timeouts, set once for the process (a global of the C library): the first
/// fetch's READ timeout holds for the process (a daemon follows one repository).
fn set_timeouts(read: Duration) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let millis = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX).max(1);
    ONCE.call_once(|| {
        // SAFETY: libgit2 reads these two integers when it opens a socket; git2 initialises the
        // library first. `Once` makes this the only write, before the first fetch of the process,
        // so no thread reads them while they change.
        #[allow(unsafe_code)]
        let set = unsafe {
            git2::opts::set_server_connect_timeout_in_milliseconds(millis(
                CONNECT_TIMEOUT.min(read),
            ))
            .and_then(|()| git2::opts::set_server_timeout_in_milliseconds(millis(read)))
        };
        if let Err(e) = set {
            tracing::warn!("cannot set git server timeouts: {}", e.message());
        }
    });
}

/// How to authenticate.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    #[default]
    Anonymous,
    /// HTTPS token (sent as the password; user `x-access-token` unless the URL names one).
    Token(secrecy::SecretString),
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
    /// How long the server may stay silent ([`READ_TIMEOUT`] by default); a whole fetch may take
    /// [`DEADLINE_READS`] times that.
    pub timeout: Duration,
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
    /// Where it stands to the last applied commit (`fetch_after`).
    pub lineage: Lineage,
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

    /// The URL as errors, logs and the status show it (no credentials).
    pub fn shown_url(&self) -> String {
        redact(&self.url)
    }

    /// Most time a whole fetch may take.
    pub fn deadline(&self) -> Duration {
        self.timeout * DEADLINE_READS
    }

    /// Fetches the tip of the branch (blocking, at most [`Remote::deadline`]) and reads
    /// cluster.yaml there.
    pub fn fetch(&self) -> Result<Fetched, RemoteError> {
        self.fetch_after("")
    }

    /// As `fetch`, and where the tip stands to LAST, the last applied commit ("" for none). The
    /// mirror is shallow: when the tip's history stops short of LAST, the branch's history is
    /// fetched once (later fetches bring only what is new) and walked again.
    pub fn fetch_after(&self, last: &str) -> Result<Fetched, RemoteError> {
        set_timeouts(self.timeout);
        let repo = self.open_mirror()?;
        // One deadline for the whole fetch, the history's included (`/healthz` counts on it).
        let until = Instant::now() + self.deadline();
        self.transfer(&repo, 1, until)?;
        let mut fetched = self.read(&repo)?;
        fetched.lineage = self.lineage(&repo, &fetched.commit, last, until)?;
        Ok(fetched)
    }

    fn lineage(
        &self,
        repo: &Repository,
        tip: &str,
        last: &str,
        until: Instant,
    ) -> Result<Lineage, RemoteError> {
        if last.is_empty() || last == tip {
            return Ok(Lineage::Unchecked);
        }
        let rewritten = Lineage::Rewritten {
            last: last.to_string(),
        };
        // The status ConfigMap is read back as written, or tampered with: a last applied commit
        // that is no commit id names nothing to descend from.
        let is_id = |s: &str| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit());
        if !is_id(last) {
            return Ok(Lineage::Unchecked);
        }
        let (Ok(tip), Ok(last)) = (git2::Oid::from_str(tip), git2::Oid::from_str(last)) else {
            return Ok(rewritten);
        };
        let mirror_err = |e: git2::Error| RemoteError::Mirror {
            dir: self.mirror.display().to_string(),
            message: e.message().to_string(),
        };
        let walk = || {
            let odb = repo.odb().map_err(mirror_err)?;
            history::walk(&odb, tip, last, history::MAX_COMMITS).map_err(mirror_err)
        };
        let mut walked = walk()?;
        if walked == Walk::Missing {
            self.transfer(repo, UNSHALLOW, until)?;
            walked = walk()?;
        }
        Ok(match walked {
            Walk::Found => Lineage::Descends,
            _ => rewritten,
        })
    }

    /// Fetches the branch into the mirror, DEPTH commits deep (local repositories in full),
    /// giving up at UNTIL.
    fn transfer(&self, repo: &Repository, depth: i32, until: Instant) -> Result<(), RemoteError> {
        let deadline = until.saturating_duration_since(Instant::now());
        let refused: RefCell<Option<RemoteError>> = RefCell::new(None);
        let mut cb = RemoteCallbacks::new();
        let auth = self.auth.clone();
        let tries = Cell::new(0u32);
        cb.credentials(move |_url, user, _allowed| {
            // libgit2 asks again after the server refused a credential: give up instead.
            tries.set(tries.get() + 1);
            if tries.get() > 1 {
                return Err(git2::Error::from_str(
                    "the server refused the credentials (check the token or SSH key and its access to the repository)",
                ));
            }
            match &auth {
                Auth::Anonymous => Cred::default(),
                Auth::Token(t) => Cred::userpass_plaintext(
                    user.unwrap_or("x-access-token"),
                    secrecy::ExposeSecret::expose_secret(t),
                ),
                Auth::Ssh { private_key, .. } => {
                    Cred::ssh_key(user.unwrap_or("git"), None, private_key, None)
                }
            }
        });
        let started = Instant::now();
        let late = std::rc::Rc::new(Cell::new(false));
        let late_in_cb = late.clone();
        cb.transfer_progress(move |_| {
            let in_time = started.elapsed() < deadline;
            late_in_cb.set(!in_time);
            in_time
        });
        if let Auth::Ssh { known_hosts, .. } = &self.auth {
            let known_hosts = known_hosts.clone();
            let url = self.shown_url();
            let port = ssh_port(&self.url);
            let refused = &refused;
            cb.certificate_check(move |cert, host| {
                let Some(hash) = cert.as_hostkey().and_then(|k| k.hash_sha256()) else {
                    return Err(git2::Error::from_str("no SSH host key to check"));
                };
                let text = std::fs::read_to_string(&known_hosts).map_err(|e| {
                    git2::Error::from_str(&format!(
                        "cannot read known_hosts {}: {e}",
                        known_hosts.display()
                    ))
                })?;
                let shown = known_hosts.display().to_string();
                match super::known_hosts::check(&shown, &text, host, port, hash) {
                    Ok(Verdict::Pinned) => Ok(CertificateCheckStatus::CertificateOk),
                    Ok(verdict) => {
                        *refused.borrow_mut() = Some(RemoteError::HostKey {
                            url: url.clone(),
                            host: host.to_string(),
                            fingerprint: base64::engine::general_purpose::STANDARD_NO_PAD
                                .encode(hash),
                            known_hosts: shown,
                            revoked: verdict == Verdict::Revoked,
                        });
                        Err(git2::Error::from_str("SSH host key not pinned"))
                    }
                    Err(e) => Err(git2::Error::from_str(&e)),
                }
            });
        }
        let mut fo = FetchOptions::new();
        fo.remote_callbacks(cb);
        // The tip is enough, its history only to tell a force-push (libgit2's local transport
        // cannot fetch shallow).
        if !self.url.starts_with("file://") && !Path::new(&self.url).exists() {
            fo.depth(depth);
        }
        if matches!(self.auth, Auth::Token(_)) {
            // A redirect would carry the token to wherever it points.
            fo.follow_redirects(git2::RemoteRedirect::None);
        }
        let refspec = format!("+refs/heads/{}:{}", self.branch, self.tracking_ref());
        let fetched = repo
            .remote_anonymous(&self.url)
            .and_then(|mut r| r.fetch(&[&refspec], Some(&mut fo), None));
        drop(fo);
        if let Some(e) = refused.into_inner() {
            return Err(e);
        }
        fetched.map_err(|e| RemoteError::Fetch {
            url: self.shown_url(),
            branch: self.branch.clone(),
            message: if late.get() {
                format!(
                    "gave up after {}s (the transfer's deadline)",
                    deadline.as_secs()
                )
            } else {
                // The server's own words: escaped for terminals.
                crate::text::clean(redact_in(e.message(), &self.url))
            },
        })
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
            url: self.shown_url(),
            commit: id.clone(),
            path: path.clone(),
        };
        let entry = commit
            .tree()
            .map_err(mirror_err)?
            .get_path(Path::new(&path))
            .map_err(|_| missing())?;
        // The size from the object's header: a huge blob is refused before it is read.
        let (size, kind) = repo
            .odb()
            .and_then(|odb| odb.read_header(entry.id()))
            .map_err(mirror_err)?;
        if kind != git2::ObjectType::Blob {
            return Err(missing());
        }
        if size > crate::cluster::yaml::MAX_BYTES {
            return Err(RemoteError::TooLarge {
                url: self.shown_url(),
                commit: id.clone(),
                path,
                size,
            });
        }
        let blob = repo.find_blob(entry.id()).map_err(|_| missing())?;
        let text = String::from_utf8(blob.content().to_vec()).map_err(|_| RemoteError::Mirror {
            dir: self.mirror.display().to_string(),
            message: format!("{path} at {id} is not UTF-8 text"),
        })?;
        let signature = repo
            .extract_signature(&commit.id(), None)
            .ok()
            .map(|(sig, data)| (sig.to_vec(), data.to_vec()));
        Ok(Fetched {
            name: format!(
                "{}@{}:{path}",
                self.shown_url(),
                id.get(..12).unwrap_or(&id)
            ),
            commit: id,
            text,
            signature,
            lineage: Lineage::Unchecked,
        })
    }
}

/// The SSH port of URL (`ssh://[user@]host:PORT/...`; 22 otherwise, scp-like URLs included).
fn ssh_port(url: &str) -> u16 {
    url.strip_prefix("ssh://")
        .and_then(|rest| rest.split('/').next())
        .map(|authority| authority.rsplit_once('@').map_or(authority, |(_, h)| h))
        .and_then(|host| host.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or(22)
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn credentials_are_cut_from_urls() {
        assert_eq!(
            redact("https://x-access-token:ghp_abc@github.com/o/r.git"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            redact("https://ghp_abc@github.com/o/r.git"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            redact("http://u:p@127.0.0.1:8080/a@b.git"),
            "http://127.0.0.1:8080/a@b.git"
        );
        // A user name alone is not a secret in SSH URLs.
        assert_eq!(redact("ssh://git@host/r.git"), "ssh://git@host/r.git");
        assert_eq!(redact("git@host:o/r.git"), "git@host:o/r.git");
        assert_eq!(redact("https://host/r.git"), "https://host/r.git");
    }
}
