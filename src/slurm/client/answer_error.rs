//! The error a slurmrestd answer says: Slurm's errors, a refused token, or a failed HTTP status.

use reqwest::{Method, StatusCode};

use super::errno;
use crate::slurm::SlurmError;
use crate::slurm::model::{ApiMessage, Envelope};

/// The error an answer with STATUS and BYTES (to METHOD URL of slurmrestd at BASE) says, if any.
pub(super) fn answer_error(
    base: &str,
    method: &Method,
    url: &str,
    status: StatusCode,
    bytes: &[u8],
) -> Option<SlurmError> {
    let envelope: Envelope = serde_json::from_slice(bytes).unwrap_or_default();
    let failed = !status.is_success() || !envelope.errors.is_empty() || auth_refused(status);
    failed.then(|| error_of(base, method, url, status, envelope.errors, bytes))
}

/// 26.05 answers a token it cannot verify with 511 (24.11: 500 with error 1007).
fn auth_refused(status: StatusCode) -> bool {
    [
        StatusCode::UNAUTHORIZED,
        StatusCode::FORBIDDEN,
        StatusCode::NETWORK_AUTHENTICATION_REQUIRED,
    ]
    .contains(&status)
}

/// The error of a failed answer with STATUS and ERRORS (Slurm's; none: the start of BYTES says
/// what failed) to METHOD URL of slurmrestd at BASE.
pub(super) fn error_of(
    base: &str,
    method: &Method,
    url: &str,
    status: StatusCode,
    errors: Vec<ApiMessage>,
    bytes: &[u8],
) -> SlurmError {
    if auth_refused(status) || errors.iter().any(|e| e.error_number == Some(errno::AUTH)) {
        return SlurmError::Auth {
            url: base.to_string(),
            status: status.as_u16(),
            errors,
        };
    }
    SlurmError::Api {
        method: method.to_string(),
        path: url.strip_prefix(base).unwrap_or(url).to_string(),
        status: status.as_u16(),
        errors: if errors.is_empty() {
            vec![ApiMessage {
                description: Some(String::from_utf8_lossy(bytes).chars().take(300).collect()),
                ..ApiMessage::default()
            }]
        } else {
            errors
        },
    }
}
