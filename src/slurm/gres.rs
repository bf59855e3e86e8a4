//! GPU counts from the text slurmrestd answers (every data parser slurmops speaks writes the same
//! strings): a node's `gres` and `gres_used` (`gpu:h100:8(S:0-1)`, `gpu:h100:2(IDX:0,3)`), a
//! job's `gres_detail` entries (the same shape, per node), its TRES strings (`cpu=4,gres/gpu=2`)
//! and its per-job, per-node and per-task requests (`gres/gpu:2`, `gres/gpu:h100:1`). The text is
//! untrusted: what does not parse counts 0, and sums saturate.

/// The GPUs in a GRES list: each `gpu[:TYPE][:COUNT][(...)]` entry's COUNT (1 when none),
/// summed. Entries are comma-separated; commas inside parentheses (`IDX:0,3`) are the entry's.
pub fn gpus_in_gres(s: &str) -> u32 {
    let mut total = 0u32;
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                total = total.saturating_add(gpus_of_entry(&s[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    total.saturating_add(gpus_of_entry(&s[start..]))
}

/// One GRES entry's GPUs: `gpu`, `gpu:2`, `gpu:h100:2`, `gpu:h100:2(S:0-1)`; `gres/` or `gres:`
/// before it (a job's `tres_per_*`) and `=` for `:` before the count are taken too.
fn gpus_of_entry(entry: &str) -> u32 {
    let entry = entry.trim();
    let entry = entry.split('(').next().unwrap_or("");
    let entry = entry
        .strip_prefix("gres/")
        .or_else(|| entry.strip_prefix("gres:"))
        .unwrap_or(entry);
    let mut fields = entry.split([':', '=']);
    if fields.next() != Some("gpu") {
        return 0;
    }
    let rest: Vec<&str> = fields.collect();
    match rest.last() {
        None => 1,
        Some(last) => match count(last) {
            Some(n) => n,
            // `gpu:h100`: a type, no count.
            None if rest.len() == 1 && !last.is_empty() => 1,
            None => 0,
        },
    }
}

/// A GRES count: digits, with Slurm's k/m/g multipliers; None for anything else.
fn count(s: &str) -> Option<u32> {
    let (digits, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1_024u64),
        (i, 'm' | 'M') => (&s[..i], 1_024 * 1_024),
        (i, 'g' | 'G') => (&s[..i], 1_024 * 1_024 * 1_024),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().unwrap_or(u64::MAX);
    Some(n.saturating_mul(mult).min(u64::from(u32::MAX)) as u32)
}

/// The GPUs in a TRES string (`cpu=4,mem=1G,node=1,gres/gpu=2,gres/gpu:h100=2`): the untyped
/// `gres/gpu` when there, else the typed ones summed; None when it names no GPU.
pub fn gpus_in_tres(s: &str) -> Option<u32> {
    let mut untyped = None;
    let mut typed: Option<u32> = None;
    for (key, value) in s.split(',').filter_map(|kv| kv.trim().split_once('=')) {
        let Some(n) = count(value.trim()) else {
            continue;
        };
        if key == "gres/gpu" {
            untyped = Some(n);
        } else if key.starts_with("gres/gpu:") {
            typed = Some(typed.unwrap_or(0).saturating_add(n));
        }
    }
    untyped.or(typed)
}

/// What a job says of its GPUs, each a text slurmrestd answered (empty when absent).
#[derive(Debug, Default, Clone, Copy)]
pub struct JobGpus<'a> {
    /// Per allocated node: `gpu:h100:2(IDX:0-1)`.
    pub gres_detail: &'a [String],
    pub tres_alloc_str: &'a str,
    pub tres_req_str: &'a str,
    pub tres_per_job: &'a str,
    pub tres_per_node: &'a str,
    pub tres_per_task: &'a str,
    pub nodes: u32,
    pub tasks: u32,
}

impl JobGpus<'_> {
    /// The job's GPUs: what it was allocated (`gres_detail`, else `tres_alloc_str`), else what it
    /// asks for (`tres_req_str`, else its per-job, per-node or per-task request times its nodes
    /// or tasks). The TRES strings name GPUs only where `AccountingStorageTRES` has `gres/gpu`;
    /// the requests and `gres_detail` always do.
    pub fn count(&self) -> u32 {
        let detail = self
            .gres_detail
            .iter()
            .fold(0u32, |n, d| n.saturating_add(gpus_in_gres(d)));
        let per = |s: &str, times: u32| gpus_in_gres(s).saturating_mul(times.max(1));
        [
            Some(detail),
            gpus_in_tres(self.tres_alloc_str),
            gpus_in_tres(self.tres_req_str),
            Some(gpus_in_gres(self.tres_per_job)),
            Some(per(self.tres_per_node, self.nodes)),
            Some(per(self.tres_per_task, self.tasks)),
        ]
        .into_iter()
        .flatten()
        .find(|n| *n > 0)
        .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_s_gres_counts_its_gpus_of_every_type_and_nothing_else() {
        for (gres, gpus) in [
            ("", 0),
            ("(null)", 0),
            ("N/A", 0),
            ("gpu:h100:8(S:0-1)", 8),
            ("gpu:h100:1(IDX:0)", 1),
            ("gpu:h100:2(IDX:0,3)", 2),
            ("gpu:h100:0(IDX:N/A)", 0),
            ("gpu:4", 4),
            ("gpu", 1),
            ("gpu:h100", 1),
            ("gpu:a100:2(S:0),gpu:h100:4(S:1),shard:8,mps:100", 6),
            ("gpu:h100:2(IDX:0,3),gpu:a100:1(IDX:1)", 3),
            ("shard:h100:16", 0),
            ("gpus:4", 0),
            ("gpu:h100:x", 0),
            ("gpu:1k", 1024),
            ("gpu:99999999999999999999", u32::MAX),
            ("gpu:4294967295,gpu:4294967295", u32::MAX),
            ("gpu:h100:2(S:0-1", 2),
            // Unbalanced: the rest is inside the parenthesis.
            (")(,gpu:2", 0),
        ] {
            assert_eq!(gpus_in_gres(gres), gpus, "{gres:?}");
        }
    }

    #[test]
    fn a_tres_string_counts_the_untyped_gpus_or_else_the_typed_ones() {
        for (tres, gpus) in [
            ("cpu=1,mem=1000M,node=1,billing=1", None),
            ("", None),
            // Only some types tracked: the untyped count is the whole.
            ("cpu=8,gres/gpu=6,gres/gpu:h100=4", Some(6)),
            ("cpu=8,gres/gpu:h100=4,gres/gpu:a100=2", Some(6)),
            ("gres/gpu=x,cpu=2", None),
            ("gres/gpumem=80G", None),
        ] {
            assert_eq!(gpus_in_tres(tres), gpus, "{tres:?}");
        }
    }

    #[test]
    fn a_job_s_gpus_are_its_allocation_else_its_request() {
        let detail = vec![
            "gpu:h100:2(IDX:0-1)".to_string(),
            "gpu:h100:2(IDX:2-3)".into(),
        ];
        let running = JobGpus {
            gres_detail: &detail,
            tres_alloc_str: "cpu=8,node=2",
            tres_per_node: "gres/gpu:1",
            nodes: 2,
            ..JobGpus::default()
        };
        assert_eq!(running.count(), 4);
        let accounted = JobGpus {
            tres_alloc_str: "cpu=8,gres/gpu=3",
            ..JobGpus::default()
        };
        assert_eq!(accounted.count(), 3);
        let asks = |per_job, per_node, per_task| JobGpus {
            tres_req_str: "cpu=1,mem=1000M,node=1,billing=1",
            tres_per_job: per_job,
            tres_per_node: per_node,
            tres_per_task: per_task,
            nodes: 3,
            tasks: 5,
            ..JobGpus::default()
        };
        assert_eq!(asks("gres/gpu:6", "", "").count(), 6);
        assert_eq!(asks("", "gres/gpu:h100:2", "").count(), 6);
        assert_eq!(asks("", "gres:gpu:2", "").count(), 6);
        assert_eq!(asks("", "", "gres/gpu=1").count(), 5);
        assert_eq!(asks("", "", "").count(), 0);
        let requested = JobGpus {
            tres_req_str: "cpu=2,gres/gpu=8",
            tres_per_node: "gres/gpu:1",
            nodes: 2,
            ..JobGpus::default()
        };
        assert_eq!(requested.count(), 8);
    }
}
