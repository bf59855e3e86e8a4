//! Slurm's own spellings of TRES lists, times and QOS flags (accounting), parsed from
//! cluster.yaml and written back in one canonical form, so that what git says and what slurmdbd
//! answers compare equal when they mean the same thing (`mem=64G` and 65536 MB are one value).

/// One TRES limit: `cpu`, `mem` (in MB), `node`, `gres/gpu`, `gres/gpu:h100`, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tres {
    /// `cpu`, `mem`, `gres`, `license`, ...
    pub kind: String,
    /// The part after `/`: `gpu` in `gres/gpu` (empty for `cpu`).
    pub name: String,
    pub count: u64,
}

/// TRES kinds Slurm tracks without a name.
const PLAIN: &[&str] = &["cpu", "mem", "energy", "node", "billing", "vmem", "pages"];
/// TRES kinds that need a name (`gres/gpu`).
const NAMED: &[&str] = &["gres", "license", "fs", "ic", "bb"];

/// Parses `cpu=16,mem=64G,gres/gpu=8`; the error says what is wrong in Slurm's terms.
pub fn parse_tres(text: &str) -> Result<Vec<Tres>, String> {
    let mut out: Vec<Tres> = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("{text:?} has an empty TRES entry"));
        }
        let Some((what, count)) = item.split_once('=') else {
            return Err(format!(
                "{item:?} is not TYPE=COUNT (e.g. cpu=16, gres/gpu=8)"
            ));
        };
        let (kind, name) = match what.split_once('/') {
            Some((k, n)) => (k.trim(), n.trim()),
            None => (what.trim(), ""),
        };
        if PLAIN.contains(&kind) && !name.is_empty() || NAMED.contains(&kind) && name.is_empty() {
            return Err(format!(
                "{what:?} is not a TRES: write {} or gres/NAME (e.g. gres/gpu)",
                PLAIN.join(", ")
            ));
        }
        if !PLAIN.contains(&kind) && !NAMED.contains(&kind) {
            return Err(format!(
                "unknown TRES type {kind:?}: use {}, or {}/NAME",
                PLAIN.join(", "),
                NAMED.join("/NAME, ")
            ));
        }
        let count = if kind == "mem" {
            parse_mem_mb(count.trim())
        } else {
            count.trim().parse::<u64>().ok()
        }
        .ok_or_else(|| format!("{item:?}: {count:?} is not a count"))?;
        if out.iter().any(|t| t.kind == kind && t.name == name) {
            return Err(format!("{what:?} appears twice in {text:?}"));
        }
        out.push(Tres {
            kind: kind.into(),
            name: name.into(),
            count,
        });
    }
    Ok(out)
}

/// `64G` → 65536 (MB), `512M`/`512` → 512, `1T` → 1048576.
fn parse_mem_mb(s: &str) -> Option<u64> {
    let (num, mult) = match s.char_indices().last()? {
        (i, 'K' | 'k') => (s.get(..i)?, 0),
        (i, 'M' | 'm') => (s.get(..i)?, 1),
        (i, 'G' | 'g') => (s.get(..i)?, 1024),
        (i, 'T' | 't') => (s.get(..i)?, 1024 * 1024),
        _ => (s, 1),
    };
    let n: u64 = num.parse().ok()?;
    if mult == 0 {
        return Some(n.div_ceil(1024));
    }
    n.checked_mul(mult)
}

/// The canonical text: Slurm's order (cpu, mem, energy, node, billing, then by name), memory
/// in the largest whole unit.
pub fn tres_text(list: &[Tres]) -> String {
    let rank = |t: &Tres| {
        PLAIN
            .iter()
            .position(|k| *k == t.kind)
            .unwrap_or(PLAIN.len())
    };
    let mut sorted: Vec<&Tres> = list.iter().collect();
    sorted.sort_by(|a, b| (rank(a), &a.kind, &a.name).cmp(&(rank(b), &b.kind, &b.name)));
    let items: Vec<String> = sorted
        .iter()
        .map(|t| {
            let what = if t.name.is_empty() {
                t.kind.clone()
            } else {
                format!("{}/{}", t.kind, t.name)
            };
            let count = if t.kind == "mem" {
                mem_text(t.count)
            } else {
                t.count.to_string()
            };
            format!("{what}={count}")
        })
        .collect();
    items.join(",")
}

fn mem_text(mb: u64) -> String {
    if mb > 0 && mb.is_multiple_of(1024 * 1024) {
        format!("{}T", mb / (1024 * 1024))
    } else if mb > 0 && mb.is_multiple_of(1024) {
        format!("{}G", mb / 1024)
    } else {
        format!("{mb}M")
    }
}

/// Slurm's time formats (`90`, `30:00`, `4:00:00`, `2-00:00:00`, `1-12`) → minutes.
pub fn parse_minutes(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "{text:?} is not a Slurm time: write minutes (90), HH:MM:SS (4:00:00) or D-HH:MM:SS (2-00:00:00)"
        )
    };
    let t = text.trim();
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().map_err(|_| bad())?, Some(r)),
        None => (0, None),
    };
    let nums = |s: &str| -> Result<Vec<u64>, String> {
        s.split(':')
            .map(|p| p.parse::<u64>().map_err(|_| bad()))
            .collect()
    };
    let secs = match rest {
        // D-H, D-H:M, D-H:M:S
        Some(r) => match nums(r)?.as_slice() {
            [h] => h * 3600,
            [h, m] => h * 3600 + m * 60,
            [h, m, s] => h * 3600 + m * 60 + s,
            _ => return Err(bad()),
        },
        // M, M:S, H:M:S
        None => match nums(t)?.as_slice() {
            [m] => m * 60,
            [m, s] => m * 60 + s,
            [h, m, s] => h * 3600 + m * 60 + s,
            _ => return Err(bad()),
        },
    };
    Ok(days * 24 * 60 + secs.div_ceil(60))
}

/// Minutes as sacctmgr shows them: `01:30:00`, `2-00:00:00`.
pub fn minutes_text(minutes: u64) -> String {
    let (d, h, m) = (minutes / 1440, minutes % 1440 / 60, minutes % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:00")
    } else {
        format!("{h:02}:{m:02}:00")
    }
}

/// QOS flags: sacctmgr's spelling and slurmrestd's.
pub const QOS_FLAGS: &[(&str, &str)] = &[
    ("DenyOnLimit", "DENY_LIMIT"),
    ("EnforceUsageThreshold", "ENFORCE_USAGE_THRESHOLD"),
    ("NoDecay", "NO_DECAY"),
    ("NoReserve", "NO_RESERVE"),
    ("OverPartQOS", "OVERRIDE_PARTITION_QOS"),
    ("PartitionMaxNodes", "PARTITION_MAXIMUM_NODE"),
    ("PartitionMinNodes", "PARTITION_MINIMUM_NODE"),
    ("PartitionTimeLimit", "PARTITION_TIME_LIMIT"),
    ("RequiresReservation", "REQUIRED_RESERVATION"),
    ("UsageFactorSafe", "USAGE_FACTOR_SAFE"),
    ("Relative", "RELATIVE"),
];

/// sacctmgr's name of a flag slurmrestd reports (unknown flags keep their REST name).
pub fn flag_from_rest(rest: &str) -> String {
    QOS_FLAGS
        .iter()
        .find(|(_, r)| *r == rest)
        .map_or(rest, |(s, _)| s)
        .to_string()
}

pub fn flag_to_rest(flag: &str) -> Option<&'static str> {
    QOS_FLAGS
        .iter()
        .find(|(s, _)| s.eq_ignore_ascii_case(flag))
        .map(|(_, r)| *r)
}

/// A sorted, comma-joined list (QOS, flags, preempt): order never matters to Slurm.
pub fn list_text<S: AsRef<str>>(items: &[S]) -> String {
    let mut v: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    v.sort_unstable();
    v.dedup();
    v.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tres_round_trips_in_slurm_order_with_memory_in_whole_units() {
        let t = parse_tres("gres/gpu=8, mem=64G,cpu=16").unwrap();
        assert_eq!(tres_text(&t), "cpu=16,mem=64G,gres/gpu=8");
        assert_eq!(t[1].count, 65536);
        assert_eq!(tres_text(&parse_tres("mem=1536").unwrap()), "mem=1536M");
    }

    #[test]
    fn bad_tres_say_what_to_write() {
        assert!(
            parse_tres("gpu=8")
                .unwrap_err()
                .contains("unknown TRES type \"gpu\"")
        );
        assert!(parse_tres("gres=8").unwrap_err().contains("gres/NAME"));
        assert!(parse_tres("cpu=x").unwrap_err().contains("not a count"));
        assert!(parse_tres("cpu=1,cpu=2").unwrap_err().contains("twice"));
        assert!(parse_tres("cpu").unwrap_err().contains("TYPE=COUNT"));
    }

    #[test]
    fn times_follow_slurm_formats() {
        assert_eq!(parse_minutes("90").unwrap(), 90);
        assert_eq!(parse_minutes("4:00:00").unwrap(), 240);
        assert_eq!(parse_minutes("2-00:00:00").unwrap(), 2880);
        assert_eq!(parse_minutes("1-12").unwrap(), 2160);
        assert_eq!(minutes_text(2880), "2-00:00:00");
        assert_eq!(minutes_text(90), "01:30:00");
        assert!(parse_minutes("2 days").is_err());
    }
}
