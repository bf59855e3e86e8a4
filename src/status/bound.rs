//! The status ConfigMap stays small whatever the cluster's size: a ConfigMap holds at most 1 MiB,
//! and a status that cannot be written goes stale exactly when a large scale-in or rollout makes
//! it matter. Counts stay exact; lists keep their first entries and say how many they left out
//! (`slurmops status` prints "+N more").

use crate::controller::decide::{Omitted, Progress};

/// The most the status ConfigMap's data holds, all keys together.
pub const STATUS_BYTES: usize = 256 * 1024;
/// Of which the NodeSets' progress (`nodeSets`) may take this much.
pub const PROGRESS_BYTES: usize = 192 * 1024;
/// And each free-text key (errors, summary, held, slurm) this much.
pub const TEXT_BYTES: usize = 12 * 1024;

/// PROGRESS as the status keeps it: JSON of at most [`PROGRESS_BYTES`]. Each list keeps its
/// first entries, as many as fit (the same number for every NodeSet), with the rest counted in
/// `omitted`.
pub fn progress(progress: &[Progress]) -> String {
    let mut head = 64usize;
    loop {
        let cut: Vec<Progress> = progress.iter().map(|p| cut(p, head)).collect();
        let text = serde_json::to_string(&cut).unwrap_or_default();
        if text.len() <= PROGRESS_BYTES {
            return text;
        }
        if head == 0 {
            // Counts alone are too many (tens of thousands of NodeSets): the first NodeSets.
            let mut kept = Vec::new();
            let mut size = 2;
            for p in cut {
                let one = serde_json::to_string(&p).unwrap_or_default().len() + 1;
                if size + one > PROGRESS_BYTES {
                    break;
                }
                size += one;
                kept.push(p);
            }
            return serde_json::to_string(&kept).unwrap_or_default();
        }
        head /= 2;
    }
}

/// P with each list cut to its first HEAD entries (a waiting worker's jobs to HEAD too).
fn cut(p: &Progress, head: usize) -> Progress {
    fn keep<T: Clone>(v: &[T], head: usize, left_out: &mut usize) -> Vec<T> {
        *left_out += v.len().saturating_sub(head);
        v.iter().take(head).cloned().collect()
    }
    let mut o = p.omitted.clone();
    o.jobs += p
        .waiting
        .iter()
        .skip(head)
        .map(|w| w.jobs.len())
        .sum::<usize>();
    let mut out = Progress {
        in_flight: keep(&p.in_flight, head, &mut o.in_flight),
        waiting: keep(&p.waiting, head, &mut o.waiting),
        leaving: keep(&p.leaving, head, &mut o.leaving),
        unplaced: keep(&p.unplaced, head, &mut o.unplaced),
        ..p.clone()
    };
    for w in &mut out.waiting {
        w.jobs = keep(&w.jobs, head.max(1), &mut o.jobs);
    }
    if let Some(w) = out.window.as_mut() {
        w.workers = keep(&w.workers, head, &mut o.window);
    }
    out.omitted = o;
    out
}

/// TEXT cut to at most [`TEXT_BYTES`] on a character boundary, saying how much was left out.
pub fn text(text: &str) -> String {
    if text.len() <= TEXT_BYTES {
        return text.to_string();
    }
    let mut end = TEXT_BYTES - 64;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… {} more bytes left out (the daemon's log has all of it)",
        &text[..end],
        text.len() - end
    )
}

/// The omitted counts in words, for what `slurmops status` prints under a NodeSet.
pub fn omitted_line(o: &Omitted) -> Option<String> {
    let parts: Vec<String> = [
        ("in flight", o.in_flight),
        ("waiting", o.waiting),
        ("leaving", o.leaving),
        ("not in a block", o.unplaced),
        ("waiting for a window", o.window),
        ("jobs", o.jobs),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(what, n)| format!("{n} {what}"))
    .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "  +{} more not listed here (the status keeps the first of each list; `kubectl get pods` and `slurmops slurm nodes` list all)",
            parts.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::decide::{Holder, Waiting};
    use crate::status::configmap::Status;

    fn waiting(set: &str, n: usize, jobs: usize) -> Progress {
        Progress {
            node_set: set.into(),
            revision: "gpu-7d9f8c6b5".into(),
            replicas: n as u32,
            in_flight: (0..n).map(|i| format!("{set}-{i}")).collect(),
            waiting: (0..n)
                .map(|i| Waiting {
                    node: format!("{set}-{i}"),
                    why: "scale-in".into(),
                    jobs: (0..jobs)
                        .map(|j| Holder {
                            id: (i * 100 + j) as u64,
                            user: "someone-with-a-long-name".into(),
                            start: None,
                            end: Some(1_800_000_000),
                        })
                        .collect(),
                    since: Some(1_790_000_000),
                })
                .collect(),
            leaving: (0..n).map(|i| format!("{set}-{i}")).collect(),
            ..Progress::default()
        }
    }

    fn status_bytes(node_sets: String, errors: &str) -> usize {
        let s = Status {
            node_sets,
            errors: text(errors),
            ..Status::default()
        };
        s.to_data().iter().map(|(k, v)| k.len() + v.len()).sum()
    }

    #[test]
    fn ten_thousand_waiting_workers_fit_the_status_with_exact_counts() {
        let all = vec![waiting("gpu", 10_000, 4)];
        let unbounded = serde_json::to_string(&all).unwrap().len();
        assert!(
            unbounded > 1 << 20,
            "the scenario is larger than a ConfigMap: {unbounded}"
        );
        let kept = progress(&all);
        let errors = "x".repeat(1 << 20);
        assert!(status_bytes(kept.clone(), &errors) <= STATUS_BYTES);
        let back: Vec<Progress> = serde_json::from_str(&kept).unwrap();
        let p = &back[0];
        assert_eq!(p.waiting.len() + p.omitted.waiting, 10_000);
        assert_eq!(p.leaving.len() + p.omitted.leaving, 10_000);
        assert_eq!(p.in_flight.len() + p.omitted.in_flight, 10_000);
        assert!(!p.waiting.is_empty(), "the first waiting workers are named");
        assert_eq!(p.waiting[0].node, "gpu-0");
        let jobs: usize = p.waiting.iter().map(|w| w.jobs.len()).sum();
        assert_eq!(jobs + p.omitted.jobs, 40_000);
        let shown = crate::status::show::node_sets(&back, 1_790_000_100);
        let more = format!(
            "+{} in flight, {} waiting",
            p.omitted.in_flight, p.omitted.waiting
        );
        assert!(shown.contains(&more), "{}", &shown[shown.len() - 300..]);
    }

    #[test]
    fn five_hundred_node_sets_of_twenty_waiting_workers_fit_too() {
        let all: Vec<Progress> = (0..500)
            .map(|i| waiting(&format!("ns{i}"), 20, 2))
            .collect();
        let kept = progress(&all);
        assert!(
            status_bytes(kept.clone(), "") <= STATUS_BYTES,
            "{}",
            kept.len()
        );
        let back: Vec<Progress> = serde_json::from_str(&kept).unwrap();
        assert_eq!(back.len(), 500, "every NodeSet keeps its counts");
        assert!(
            back.iter()
                .all(|p| p.waiting.len() + p.omitted.waiting == 20)
        );
    }

    #[test]
    fn a_small_status_is_kept_whole() {
        let all = vec![waiting("gpu", 3, 2)];
        let kept: Vec<Progress> = serde_json::from_str(&progress(&all)).unwrap();
        assert_eq!(kept, all);
        assert!(!progress(&all).contains("omitted"));
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary_and_says_so() {
        let t = "é".repeat(20_000);
        let cut = text(&t);
        assert!(cut.len() <= TEXT_BYTES);
        assert!(
            cut.contains("more bytes left out"),
            "{}",
            &cut[cut.len() - 80..]
        );
        assert_eq!(text("short"), "short");
    }
}
