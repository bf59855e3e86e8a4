//! Slurm names as they may stand in a slurmrestd URL: never escaped, so anything else is refused.

use crate::slurm::SlurmError;

/// A node name as one URL path segment; names that would escape it are refused.
pub(super) fn segment(name: &str) -> Result<&str, SlurmError> {
    plain_name(name, "node")
}

/// NAME, a Slurm name of WHAT (node, account, ...), as it may stand in a URL path or query:
/// Slurm names never need escaping, so anything else is refused.
pub fn plain_name<'a>(name: &'a str, what: &str) -> Result<&'a str, SlurmError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(name)
    } else {
        Err(SlurmError::Config(format!(
            "{name:?} is not a Slurm {what} name (letters, digits, '-', '_', '.')"
        )))
    }
}
