//! The status's result: what happened in a pass comes to (`status::verdict`), and the small
//! words a pass's lines use.

use super::State;
use crate::status::verdict::{self, Happened, Verdict};

pub(super) fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

pub(super) fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// The daemon's current verdict.
pub(super) fn verdict(state: &State) -> Verdict {
    Verdict::parse(&state.status.result)
}

/// The one way the result changes: H happened; the status says what that came to.
pub(super) fn happen(state: &mut State, h: Happened) -> Verdict {
    let cur = verdict::Result {
        verdict: verdict(state),
        commit: state.status.result_commit.clone(),
    };
    let n = verdict::next(&cur, &h);
    state.status.result = n.verdict.as_str().to_string();
    state.status.result_commit = n.commit;
    n.verdict
}
