//! `source`: where cluster.yaml comes from — a file or directory in the work tree, a git
//! revision (so CI can plan a pull request from git objects alone), or a saved file.
//! Git is reached through the small [`Git`] trait; [`GitCli`] runs the real `git`.

use std::path::{Path, PathBuf};
use std::process::Command;

use thiserror::Error;

pub mod admit;
pub mod history;
pub mod known_hosts;
mod openpgp;
pub mod remote;
pub mod signature;

pub const FILE_NAME: &str = "cluster.yaml";

#[derive(Debug, Error)]
pub enum SourceError {
    #[error("{path}: no such file or directory (pass a cluster.yaml or a directory holding one)")]
    NotFound { path: String },
    #[error("{path}: cannot read: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: the file is not UTF-8 text")]
    NotText { path: String },
    #[error("git: {message} (is {dir} inside a git repository, and does revision {rev:?} exist?)")]
    Git {
        dir: String,
        rev: String,
        message: String,
    },
}

/// cluster.yaml text with the name diagnostics use for it.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub name: String,
    pub text: String,
}

/// `PATH` as the user gave it: the file itself, or `PATH/cluster.yaml` for a directory.
pub fn cluster_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(FILE_NAME)
    } else {
        path.to_path_buf()
    }
}

pub fn read_file(path: &Path) -> Result<Loaded, SourceError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SourceError::NotFound {
            path: shown.clone(),
        },
        _ => SourceError::Io {
            path: shown.clone(),
            source: e,
        },
    })?;
    let text = String::from_utf8(bytes).map_err(|_| SourceError::NotText {
        path: shown.clone(),
    })?;
    Ok(Loaded { name: shown, text })
}

/// Reading files at revisions of a repository.
pub trait Git {
    /// The file at `path` (relative to the current directory of the repository view) in `rev`,
    /// or None when the revision exists but has no such file.
    fn show(&self, rev: &str, path: &Path) -> Result<Option<String>, SourceError>;
}

/// The `git` program, run in the directory holding cluster.yaml.
pub struct GitCli;

impl GitCli {
    fn run(dir: &Path, args: &[&str]) -> Result<std::process::Output, String> {
        Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run git: {e}"))
    }
}

impl Git for GitCli {
    fn show(&self, rev: &str, path: &Path) -> Result<Option<String>, SourceError> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_else(|| FILE_NAME.into());
        let err = |message: String| SourceError::Git {
            dir: dir.display().to_string(),
            rev: rev.to_string(),
            message,
        };
        // Resolve the revision first, so that a typo is an error and not "no cluster.yaml there".
        let verify = Self::run(
            dir,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ],
        )
        .map_err(err)?;
        if !verify.status.success() {
            return Err(err(format!("unknown revision {rev:?}")));
        }
        let spec = format!("{rev}:./{file}");
        let exists = Self::run(dir, &["cat-file", "-e", &spec]).map_err(err)?;
        if !exists.status.success() {
            return Ok(None);
        }
        let out = Self::run(dir, &["cat-file", "blob", &spec]).map_err(err)?;
        if !out.status.success() {
            return Err(err(String::from_utf8_lossy(&out.stderr).trim().to_string()));
        }
        String::from_utf8(out.stdout)
            .map(Some)
            .map_err(|_| SourceError::NotText {
                path: format!("{rev}:{}", path.display()),
            })
    }
}

/// cluster.yaml at a revision; `Ok(None)` when the revision has none (a cluster being created).
pub fn read_revision(git: &dyn Git, rev: &str, path: &Path) -> Result<Option<Loaded>, SourceError> {
    Ok(git.show(rev, path)?.map(|text| Loaded {
        name: format!("{rev}:{}", path.display()),
        text,
    }))
}
