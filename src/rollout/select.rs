//! Which outdated workers to replace first (pure): not-Ready ones (nothing runs there), then idle
//! ones, then busy ones whose jobs end soonest; ties by name, so the order is stable.

use crate::slurm::Job;

#[derive(Debug, Clone)]
pub struct Candidate {
    pub pod: String,
    pub ready: bool,
    pub jobs: Vec<Job>,
}

/// The latest expected end among the worker's jobs (None: idle; unlimited jobs sort last).
fn busy_until(c: &Candidate) -> Option<i64> {
    if c.jobs.is_empty() {
        return None;
    }
    Some(
        c.jobs
            .iter()
            .map(|j| j.end_time.unwrap_or(i64::MAX))
            .max()
            .unwrap_or(i64::MAX),
    )
}

pub fn order(candidates: &[Candidate]) -> Vec<String> {
    let mut v: Vec<&Candidate> = candidates.iter().collect();
    v.sort_by(|a, b| {
        let key = |c: &Candidate| {
            (
                c.ready,
                busy_until(c).is_some(),
                busy_until(c),
                c.pod.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    v.into_iter().map(|c| c.pod.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(end: Option<i64>) -> Job {
        Job {
            id: 1,
            name: "j".into(),
            user: "u".into(),
            account: "a".into(),
            state: "RUNNING".into(),
            partition: "p".into(),
            nodes: vec![],
            end_time: end,
            start_time: None,
            state_reason: Default::default(),
            node_count: 1,
            exclusive: false,
            ..Job::default()
        }
    }

    #[test]
    fn not_ready_then_idle_then_soonest_finishing() {
        let c = |pod: &str, ready, jobs| Candidate {
            pod: pod.into(),
            ready,
            jobs,
        };
        let got = order(&[
            c("w-0", true, vec![job(Some(500))]),
            c("w-1", true, vec![]),
            c("w-2", true, vec![job(None)]),
            c("w-3", false, vec![]),
            c("w-4", true, vec![job(Some(100)), job(Some(200))]),
        ]);
        assert_eq!(got, ["w-3", "w-1", "w-4", "w-0", "w-2"]);
    }
}
