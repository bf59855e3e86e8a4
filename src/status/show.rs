//! The daemon's status as people read it (`slurmops status`, and `--watch` redrawing it): what
//! was applied, and per NodeSet the revision, workers updated / total, in flight, and each worker
//! that waits with the jobs that hold it, their users and expected ends. Pure: the caller gives
//! the time.

use super::configmap::Status;
use crate::controller::decide::{Progress, Waiting};
use crate::controller::features::canary::{CanaryProgress, CanaryStage};

fn short(c: &str) -> &str {
    c.get(..12).unwrap_or(c)
}

fn when(t: i64, now: i64) -> String {
    let at = k8s_openapi::jiff::Timestamp::from_second(t)
        .map(|x| x.to_string())
        .unwrap_or_else(|_| t.to_string());
    let d = t - now;
    if d >= 0 {
        format!("{at}, in {}", span(d))
    } else {
        format!("{at}, {} ago", span(-d))
    }
}

/// The window [O, C) in the zone Z of its schedule, and when it opens from NOW.
fn next_window((o, c): (i64, i64), z: &str, now: i64) -> String {
    match crate::cluster::window::local((o, c), z) {
        Some(local) => format!("next window {local}, opens {}", when(o, now)),
        None => format!("next window {} until {}", when(o, now), when(c, now)),
    }
}

fn span(s: i64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// The status as text, at NOW (UNIX seconds).
pub fn text(s: &Status, now: i64) -> String {
    let mut out = format!(
        "repository:   {} (branch {})\nlast seen:    {}\napplied:      {}\nresult:       {} (commit {})\nlast fetch:   {}\nlast attempt: {}\n",
        s.repository,
        s.branch,
        short(&s.last_seen_commit),
        short(&s.last_applied_commit),
        s.result,
        short(&s.result_commit),
        s.last_fetch,
        s.last_attempt
    );
    if !s.summary.is_empty() {
        out += &format!("summary:      {}\n", s.summary);
    }
    if !s.held.is_empty() {
        out += &format!("held:         {}\n", s.held);
    }
    if !s.slurm.is_empty() {
        out += &format!("slurm:        {}\n", s.slurm);
    }
    if !s.controllers.is_empty() {
        out += &format!("controllers:  {}\n", s.controllers);
    }
    if !s.slurmrestd.is_empty() {
        out += &format!("slurmrestd:   {}\n", s.slurmrestd);
    }
    if !s.errors.is_empty() {
        out += "errors:\n";
        for l in s.errors.lines() {
            out += &format!("  {l}\n");
        }
    }
    let progress = s.progress();
    if !progress.is_empty() {
        out += &node_sets(&progress, now);
    }
    out
}

/// The NodeSets' table (revision, updated / total, state, in flight, and what each waiting
/// worker waits for) at NOW.
pub fn node_sets(ps: &[Progress], now: i64) -> String {
    let width = ps
        .iter()
        .map(|p| p.node_set.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut out = format!(
        "\n{:width$}  {:12}  {:>7}  {:10}  in flight\n",
        "NodeSet", "revision", "updated", "state"
    );
    for p in ps {
        let stage = p.canary.as_ref().map(|c| c.stage);
        let state = if p.done {
            "done"
        } else if stage == Some(CanaryStage::Failed) {
            "halted"
        } else if stage == Some(CanaryStage::Validating) {
            "canary"
        } else if !p.waiting.is_empty() {
            "waiting"
        } else if !p.leaving.is_empty() {
            "scaling in"
        } else {
            "rolling"
        };
        out += &format!(
            "{:width$}  {:12}  {:>7}  {:10}  {}\n",
            p.node_set,
            short(&p.revision),
            format!("{}/{}", p.updated, p.replicas),
            state,
            if p.in_flight.is_empty() {
                "-".to_string()
            } else {
                p.in_flight.join(", ")
            }
        );
        for u in &p.unplaced {
            out += &format!("  not in a block: {u}\n");
        }
        if let Some(c) = &p.canary {
            out += &canary(c, &p.node_set);
        }
        if let Some(w) = &p.window {
            let next = match (w.opens, w.closes) {
                (Some(o), Some(c)) => match w.zone.as_deref() {
                    Some(z) => next_window((o, c), z, now),
                    None => format!("next window {} until {}", when(o, now), when(c, now)),
                },
                _ => "no window ahead in the schedule".to_string(),
            };
            out += &format!(
                "  waits for a maintenance window: {} ({next})\n",
                w.workers.join(", ")
            );
        }
        for w in &p.waiting {
            out += &format!("  {}\n", waiting(w, now));
        }
        for c in &p.checks {
            out += &format!("  {}\n", check(c, Some(now)));
        }
        if let Some(line) = super::bound::omitted_line(&p.omitted) {
            out += &line;
            out.push('\n');
        }
    }
    out
}

/// One active check on a NodeSet's workers in words: `check NAME: 7 passed, 1 failed (NODE: job
/// N: ERROR), 1 running, 0 waiting; next …`.
/// NOW: the next pass's time also counted from now (None: the time alone, as the status key
/// keeps it, so that it changes only when something does).
pub fn check(c: &crate::controller::features::checks::Summary, now: Option<i64>) -> String {
    let failures = match c.failures.is_empty() {
        true => String::new(),
        false => format!(" ({})", c.failures.join("; ")),
    };
    let next = c
        .next
        .map(|t| match now {
            Some(now) => format!("; next pass for it {}", when(t, now)),
            None => format!(
                "; next pass for it {}",
                k8s_openapi::jiff::Timestamp::from_second(t)
                    .map(|x| x.to_string())
                    .unwrap_or_else(|_| t.to_string())
            ),
        })
        .unwrap_or_default();
    format!(
        "check {}: {} passed, {} failed{failures}, {} running, {} waiting{next}",
        c.check, c.passed, c.failed, c.running, c.waiting
    )
}

/// The active checks of every NodeSet, one line each (the status key `checks`).
pub fn checks(ps: &[Progress]) -> String {
    ps.iter()
        .flat_map(|p| {
            p.checks
                .iter()
                .map(move |c| format!("{}: {}", p.node_set, check(c, None)))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One waiting worker in words: `NODE waits for job ID (USER, expected end …) [why]; draining since …`.
pub fn waiting(w: &Waiting, now: i64) -> String {
    let jobs: Vec<String> = w
        .jobs
        .iter()
        .map(|j| match j.end {
            Some(end) => format!("job {} ({}, expected end {})", j.id, j.user, when(end, now)),
            None => format!("job {} ({}, no end time)", j.id, j.user),
        })
        .collect();
    let since = w
        .since
        .map(|t| format!("; draining since {}", when(t, now)))
        .unwrap_or_default();
    let what = if jobs.is_empty() {
        "jobs to finish".to_string()
    } else {
        jobs.join(", ")
    };
    format!("{} waits for {what} [{}]{since}", w.node, w.why)
}

/// The canary of a rollout in words: its stage, canaries, jobs, and for a failure the job's
/// error, output tail and what to do.
pub fn canary(c: &CanaryProgress, node_set: &str) -> String {
    let jobs = match c.jobs.as_slice() {
        [] => String::new(),
        j => format!(
            " (job {})",
            j.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let on = if c.canaries.is_empty() {
        String::new()
    } else {
        format!(" on {}", c.canaries.join(", "))
    };
    let mut out = match c.stage {
        CanaryStage::Replacing => {
            format!("  canary: replacing the canaries{on}; the rest waits for their validation\n")
        }
        CanaryStage::Validating => format!("  canary: validating{on}{jobs}; the rest waits\n"),
        CanaryStage::Failed => format!(
            "  canary FAILED{jobs}{on}: {}\n  the rollout is halted and the canaries stay drained: push a fix or a revert, or `slurmops rollout --resume {node_set}` to proceed anyway\n",
            c.error.as_deref().unwrap_or("no error reported")
        ),
        other => format!("  canary: {other}{jobs}\n"),
    };
    if c.stage != CanaryStage::Failed
        && let Some(e) = &c.error
    {
        out += &format!("  canary waits: {e}\n");
    }
    if let Some(t) = &c.tail {
        out += "  validation output (tail):\n";
        for l in t.lines() {
            out += &format!("    | {l}\n");
        }
    }
    out
}

/// Every daemon's status of a namespace: one section per cluster (a daemon without `--cluster`
/// shows as the namespace's only one).
pub fn all(statuses: &[(Option<String>, Status)], now: i64) -> String {
    if let [(None, s)] = statuses {
        return text(s, now);
    }
    statuses
        .iter()
        .map(|(cluster, s)| {
            let name = cluster.as_deref().unwrap_or("(without --cluster)");
            format!("== cluster {name}\n{}", text(s, now))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Which of the controllers PINGS lists (in slurm.conf's order) has control: the first that
/// answers, as slurmctld hands control to the first backup up.
pub fn in_control(pings: &[crate::slurm::client::Ping]) -> Option<usize> {
    pings.iter().position(|p| p.responding)
}

/// The controllers as slurmrestd's ping saw them, primary first: the first that answers has
/// control (a backup answers pings in standby too, but Slurm's clients try the controllers in
/// order and a standby refuses them), the others answer or not.
pub fn controllers(pings: &[crate::slurm::client::Ping]) -> String {
    let active = in_control(pings);
    let each: Vec<String> = pings
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let role = match (Some(i) == active, p.responding) {
                (true, _) => "has control",
                (false, true) => "answers, standby",
                (false, false) => "does not answer",
            };
            format!("{} {role}", p.hostname)
        })
        .collect();
    match active {
        Some(_) => each.join("; "),
        None => format!("none answers: {}", each.join("; ")),
    }
}

/// Every daemon's status of a namespace as one JSON document for scripts (`slurmops status
/// --output json`, version 1): the status ConfigMap's keys, with `nodeSets` as the list it holds,
/// `errors` as a list of lines, and `cluster` (null for a daemon without `--cluster`). Keys are
/// added, never renamed or removed, within a version.
pub fn json(statuses: &[(Option<String>, Status)]) -> String {
    let items: Vec<serde_json::Value> = statuses
        .iter()
        .map(|(cluster, s)| {
            let mut item: serde_json::Map<String, serde_json::Value> = s
                .to_data()
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::String(v)))
                .collect();
            item.insert("cluster".into(), serde_json::json!(cluster));
            item.insert("nodeSets".into(), serde_json::json!(s.progress()));
            let errors: Vec<&str> = s.errors.lines().filter(|l| !l.is_empty()).collect();
            item.insert("errors".into(), serde_json::json!(errors));
            serde_json::Value::Object(item)
        })
        .collect();
    let doc = serde_json::json!({"version": 1, "statuses": items});
    serde_json::to_string_pretty(&doc).expect("JSON values serialize") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::decide::Holder;

    #[test]
    fn a_waiting_worker_names_its_jobs_users_and_expected_ends() {
        let p = vec![Progress {
            node_set: "gpu".into(),
            revision: "gpu-7d9f8c6b5".into(),
            replicas: 4,
            updated: 2,
            in_flight: vec!["gpu-0".into()],
            unplaced: vec![],
            canary: None,
            window: None,
            waiting: vec![Waiting {
                node: "gpu-0".into(),
                why: "rollout".into(),
                jobs: vec![Holder {
                    id: 4242,
                    user: "alice".into(),
                    start: None,
                    end: Some(1_000_000 + 5400),
                }],
                since: Some(1_000_000 - 90),
            }],
            leaving: vec![],
            checks: vec![crate::controller::features::checks::Summary {
                check: "nccl".into(),
                passed: 2,
                failed: 1,
                running: 1,
                waiting: 0,
                failures: vec!["gpu-3: job 77: figure 180 GB/s below 350 GB/s".into()],
                next: Some(1_000_000 + 60),
            }],
            done: false,
            omitted: Default::default(),
        }];
        let s = Status {
            result: "applied".into(),
            node_sets: serde_json::to_string(&p).unwrap(),
            ..Status::default()
        };
        let t = text(&s, 1_000_000);
        assert!(
            t.contains("gpu      gpu-7d9f8c6b      2/4  waiting     gpu-0"),
            "{t}"
        );
        assert!(
            t.contains("  check nccl: 2 passed, 1 failed (gpu-3: job 77: figure 180 GB/s below 350 GB/s), 1 running, 0 waiting; next pass for it 1970-01-12T13:47:40Z, in 1m"),
            "{t}"
        );
        assert!(
            t.contains(
                "  gpu-0 waits for job 4242 (alice, expected end 1970-01-12T15:16:40Z, in 1h30m) [rollout]; draining since 1970-01-12T13:45:10Z, 1m30s ago"
            ),
            "{t}"
        );
    }

    #[test]
    fn a_waiting_window_is_told_in_its_schedules_zone_and_when_it_opens() {
        let p = vec![Progress {
            node_set: "h100".into(),
            window: Some(crate::controller::decide::WindowWait {
                workers: vec!["h100-0".into(), "h100-1".into()],
                // Saturday 2026-11-28 02:00–06:00 in Paris.
                opens: Some(1_795_827_600),
                closes: Some(1_795_842_000),
                zone: Some("Europe/Paris".into()),
                reservation: None,
            }),
            ..Progress::default()
        }];
        let s = Status {
            node_sets: serde_json::to_string(&p).unwrap(),
            ..Status::default()
        };
        // Tuesday 2026-11-24 10:00 UTC.
        let t = text(&s, 1_795_514_400);
        assert!(
            t.contains("  waits for a maintenance window: h100-0, h100-1 (next window Sat 2026-11-28 02:00–06:00 Europe/Paris, opens 2026-11-28T01:00:00Z, in 3d15h)"),
            "{t}"
        );
    }

    #[test]
    fn the_first_controller_that_answers_has_control() {
        let ping = |h: &str, responding: bool| crate::slurm::client::Ping {
            hostname: h.into(),
            pinged: String::new(),
            responding,
            mode: String::new(),
        };
        let both = [ping("c-0", true), ping("c-1", true)];
        assert_eq!(controllers(&both), "c-0 has control; c-1 answers, standby");
        let failed_over = [ping("c-0", false), ping("c-1", true)];
        assert_eq!(
            controllers(&failed_over),
            "c-0 does not answer; c-1 has control"
        );
        let none = [ping("c-0", false), ping("c-1", false)];
        assert_eq!(
            controllers(&none),
            "none answers: c-0 does not answer; c-1 does not answer"
        );
    }
}
