//! The batch script around every probe's script: it runs the script, and reports its exit code,
//! first error line, output tail and (a check's) figure through the job's own comment (the
//! output stays on the node). A canary's and an active check's job differ only in how the
//! script is judged ([`Judge`]).

use super::MAX_ERROR;
use crate::cluster::canary::SCRIPT_END;

/// How a probe's script is judged by its wrapper.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Judge<'a> {
    /// By its exit code alone (a canary's own script).
    ExitCode,
    /// Also by the figure it printed (`slurmops-value: X`, an active check's): it fails when the
    /// figure is below MIN (or missing); UNIT names it in the error. HOLD: a failed job keeps
    /// its worker until slurmops has drained it (the job runs as an unprivileged user and may
    /// not drain it itself; slurmops judges it from its report while it waits), at most
    /// [`HOLD_SECS`]: no user's job starts there in between.
    Figure {
        min: Option<f64>,
        unit: Option<&'a str>,
        hold: bool,
    },
}

/// The comment's tag of a job judged by its exit code (a canary's).
pub(super) const TAG_CANARY: &str = "slurmops-canary";
/// The comment's tag of a job judged by its figure (an active check's).
pub(super) const TAG_CHECK: &str = "slurmops-check";

/// The longest a failed check's job waits for slurmops to drain its worker.
pub const HOLD_SECS: u64 = 300;
const HOLD_POLL_SECS: u64 = 2;

/// The batch script of probe JOB around SCRIPT, judged as HOW says.
pub fn wrap(job: &str, script: &str, how: &Judge) -> String {
    match *how {
        Judge::ExitCode => wrapper(job, script, TAG_CANARY, "", ""),
        Judge::Figure { min, unit, hold } => {
            let unit = unit
                .map(|u| format!(" {}", shell_word(u)))
                .unwrap_or_default();
            let judge = match min {
                Some(m) => format!(
                    r#"if [ "$rc" = 0 ]; then
  if [ -z "$value" ]; then rc=1; err="printed no figure (a line slurmops-value: X), needed at least {m}{unit}"
  elif ! awk -v v="$value" -v m="{m}" 'BEGIN {{ exit !(v + 0 >= m + 0) }}'; then rc=1; err="figure $value{unit} below {m}{unit}"; fi
fi
"#
                ),
                None => String::new(),
            };
            let hold = match hold {
                true => format!(
                    r#"if [ "$rc" != 0 ] && [ -n "$SLURMD_NODENAME" ]; then
  for _ in $(seq {}); do
    scontrol show node "$SLURMD_NODENAME" 2>/dev/null | grep -q 'State=[A-Z_+]*DRAIN' && break
    sleep {HOLD_POLL_SECS}
  done
fi
"#,
                    HOLD_SECS / HOLD_POLL_SECS
                ),
                false => String::new(),
            };
            wrapper(job, script, TAG_CHECK, &judge, &hold)
        }
    }
}

/// A safe shell word of S (a unit in a message).
fn shell_word(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || "/%._-".contains(*c))
        .collect()
}

fn wrapper(job: &str, check: &str, tag: &str, judge: &str, hold: &str) -> String {
    format!(
        r#"#!/bin/bash
# {job}: run by slurmops
dir=$(mktemp -d) || exit 1
cat > "$dir/check" <<'{SCRIPT_END}'
{check}
{SCRIPT_END}
chmod +x "$dir/check"
if [ "$(head -c2 "$dir/check")" = '#!' ]; then "$dir/check"; else bash "$dir/check"; fi >"$dir/out" 2>"$dir/err"
rc=$?
clean() {{ tr -c '[:print:]\n' ' ' | tr -d ';|"'; }}
err=$(grep -m1 . "$dir/err" | clean | cut -c1-{MAX_ERROR})
[ -n "$err" ] || [ "$rc" = 0 ] || err=$(grep . "$dir/out" | tail -n1 | clean | cut -c1-{MAX_ERROR})
value=$(sed -n 's/^slurmops-value: *\([-+0-9.eE]*\).*/\1/p' "$dir/out" | tail -n1)
{judge}tail=$(cat "$dir/out" "$dir/err" | grep . | tail -n 8 | clean | cut -c1-120 | paste -sd'|')
scontrol update JobId="$SLURM_JOB_ID" Comment="{tag} rc=$rc; value: $value; error: $err; tail: $tail" >/dev/null 2>&1
rm -rf "$dir"
{hold}exit $rc
"#
    )
}
