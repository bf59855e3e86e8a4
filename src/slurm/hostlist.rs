//! Slurm hostlist expressions (`node[1-3,7]`, `rack[1-2]-gpu[01-04]`): slurmrestd reports the
//! nodes of a job this way, and people read them this way in plans.

use std::collections::BTreeMap;

/// Most names one expression may expand to: a bracket bomb is refused, not allocated.
pub const MAX_EXPANSION: usize = 1_000_000;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid hostlist {expr:?}: {what}")]
pub struct HostlistError {
    pub expr: String,
    pub what: String,
}

/// Expands a hostlist expression into node names, in order.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let err = |what: &str| HostlistError {
        expr: expr.to_string(),
        what: what.to_string(),
    };
    let mut out = Vec::new();
    for entry in split_top_level(expr).map_err(|w| err(&w))? {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let mut names = vec![String::new()];
        let mut rest = entry;
        while let Some(open) = rest.find('[') {
            let close = rest[open..].find(']').ok_or_else(|| err("unclosed '['"))? + open;
            let prefix = &rest[..open];
            let values = ranges(&rest[open + 1..close]).map_err(|w| err(&w))?;
            if names.len().saturating_mul(values.len()) + out.len() > MAX_EXPANSION {
                return Err(err(&format!("expands to more than {MAX_EXPANSION} names")));
            }
            names = names
                .iter()
                .flat_map(|n| values.iter().map(move |v| format!("{n}{prefix}{v}")))
                .collect();
            rest = &rest[close + 1..];
        }
        if rest.contains(']') {
            return Err(err("']' without '['"));
        }
        out.extend(names.into_iter().map(|n| n + rest));
    }
    Ok(out)
}

fn split_top_level(expr: &str) -> Result<Vec<&str>, String> {
    let (mut depth, mut start, mut parts) = (0usize, 0, Vec::new());
    for (i, c) in expr.char_indices() {
        match c {
            '[' if depth > 0 => return Err("nested '['".into()),
            '[' => depth = 1,
            ']' => depth = 0,
            ',' if depth == 0 => {
                parts.push(&expr[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&expr[start..]);
    Ok(parts)
}

/// `1-3,07,10-11` → ["1","2","3","07","10","11"], keeping each range's zero padding.
fn ranges(body: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in body.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let width = lo.len();
        let parse = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("{part:?} is not a number or a range"))
        };
        let (a, b) = (parse(lo)?, parse(hi)?);
        if b < a {
            return Err(format!("range {part:?} runs backwards"));
        }
        if b - a >= MAX_EXPANSION as u64 {
            return Err(format!("range {part:?} is larger than {MAX_EXPANSION}"));
        }
        out.extend((a..=b).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

/// Compresses node names into the shortest usual hostlist: names sharing a prefix and a numeric
/// suffix of the same width are grouped (`w-3`, `w-1`, `w-2`, `w-7` → `w-[1-3,7]`).
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    let mut by_prefix: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut plain: Vec<String> = Vec::new();
    for name in names {
        let name = name.as_ref();
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, num) = name.split_at(name.len() - digits);
        if digits == 0 || digits > 18 {
            plain.push(name.to_string());
        } else {
            by_prefix.entry(prefix.into()).or_default().push(num.into());
        }
    }
    // A zero-padded number fixes its width; unpadded numbers of that width join it (08, 09, 10).
    let mut groups: BTreeMap<(String, usize), Vec<u64>> = BTreeMap::new();
    for (prefix, nums) in by_prefix {
        let padded: Vec<usize> = nums
            .iter()
            .filter(|n| n.len() > 1 && n.starts_with('0'))
            .map(String::len)
            .collect();
        for n in nums {
            let width = if padded.contains(&n.len()) {
                n.len()
            } else {
                0
            };
            let value = n.parse().unwrap_or(0);
            groups
                .entry((prefix.clone(), width))
                .or_default()
                .push(value);
        }
    }
    let mut parts: Vec<String> = plain;
    for ((prefix, width), mut nums) in groups {
        nums.sort_unstable();
        nums.dedup();
        if nums.len() == 1 {
            parts.push(format!("{prefix}{:0width$}", nums[0]));
            continue;
        }
        let mut spans: Vec<String> = Vec::new();
        let mut i = 0;
        while i < nums.len() {
            let mut j = i;
            while j + 1 < nums.len() && nums[j + 1] == nums[j] + 1 {
                j += 1;
            }
            spans.push(if i == j {
                format!("{:0width$}", nums[i])
            } else {
                format!("{:0width$}-{:0width$}", nums[i], nums[j])
            });
            i = j + 1;
        }
        parts.push(format!("{prefix}[{}]", spans.join(",")));
    }
    parts.sort();
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_ranges_lists_padding_and_several_brackets() {
        assert_eq!(
            expand("node[1-3,7]").unwrap(),
            ["node1", "node2", "node3", "node7"]
        );
        assert_eq!(expand("gpu[08-10]").unwrap(), ["gpu08", "gpu09", "gpu10"]);
        assert_eq!(
            expand("r[1-2]-n[1-2],login").unwrap(),
            ["r1-n1", "r1-n2", "r2-n1", "r2-n2", "login"]
        );
        assert_eq!(expand("w-abc12-0").unwrap(), ["w-abc12-0"]);
        assert_eq!(expand("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn refuses_malformed_and_huge_expressions() {
        for bad in ["n[1-", "n]1", "n[a-b]", "n[3-1]", "n[[1]]", "n[0-99999999]"] {
            assert!(expand(bad).is_err(), "{bad} was accepted");
        }
        let bomb = "a[1-1000]b[1-1000]c[1-1000]";
        assert!(expand(bomb).unwrap_err().what.contains("more than"));
    }

    #[test]
    fn compress_groups_by_prefix_and_width_and_round_trips() {
        assert_eq!(compress(&["w-3", "w-1", "w-2", "w-7"]), "w-[1-3,7]");
        assert_eq!(
            compress(&["gpu08", "gpu09", "gpu10", "cpu-0"]),
            "cpu-0,gpu[08-10]"
        );
        assert_eq!(compress(&["login"]), "login");
        for names in [
            vec!["a-1", "a-2", "b-5", "x"],
            vec!["n1", "n10", "n2", "n11"],
        ] {
            let mut expanded = expand(&compress(&names)).unwrap();
            expanded.sort();
            let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            want.sort();
            assert_eq!(expanded, want);
        }
    }
}
