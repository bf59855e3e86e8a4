//! What a refresh reads, and in which order: the jobs `jobs/state/` lists, grouped by the id
//! `job/{id}` answers them for.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use super::REFRESH;

/// The id `job/{id}` answers a job of for: `12` for `12`, `12_3` (an array's task) and `12+1` (a
/// heterogeneous job's component), as `jobs/state/` writes them.
pub(super) fn base_of(id: &str) -> Option<u64> {
    let end = id.find(|c: char| !c.is_ascii_digit()).unwrap_or(id.len());
    id[..end].parse().ok().filter(|n| *n > 0)
}

/// One job id's entries in `jobs/state/`: a digest of their ids and states (changes when any
/// changes), and whether one is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Group {
    pub(super) digest: u64,
    pub(super) pending: bool,
    /// One holds nodes (running, suspended, completing): the jobs a moving worker waits for.
    pub(super) holding: bool,
}

pub(super) fn groups(states: &HashMap<String, crate::slurm::model::Word>) -> HashMap<u64, Group> {
    let mut out: HashMap<u64, Group> = HashMap::with_capacity(states.len());
    for (id, state) in states {
        let Some(base) = base_of(id) else {
            continue;
        };
        // SipHash with fixed keys: the same digest for the same entries in every refresh.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (id, state).hash(&mut h);
        let g = out.entry(base).or_insert(Group {
            digest: 0,
            pending: false,
            holding: false,
        });
        // A sum: the entries' order in the answer does not matter.
        g.digest = g.digest.wrapping_add(h.finish());
        g.pending |= state.split(',').any(|s| s == "PENDING");
        g.holding |= state
            .split(',')
            .any(|s| ["RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"].contains(&s));
    }
    out
}

/// What a refresh reads, in order (see the module's comment): GROUPS from `jobs/state/`, SEEN
/// the digest each job id was read at and when. ROOM: job ids that may still be added (the cap);
/// SWEEP: pending jobs read again at most (spread over the passes, not all at once).
pub(super) fn plan(
    groups: &HashMap<u64, Group>,
    seen: &HashMap<u64, (u64, Instant)>,
    now: Instant,
    room: usize,
    sweep: usize,
) -> Vec<u64> {
    let (mut changed, mut pending, mut holding, mut other, mut old) =
        (vec![], vec![], vec![], vec![], vec![]);
    for (id, g) in groups {
        match seen.get(id) {
            Some((d, _)) if *d != g.digest => changed.push(*id),
            Some((_, at)) if g.pending && now.saturating_duration_since(*at) >= REFRESH => {
                old.push((*at, *id))
            }
            Some(_) => {}
            None if g.pending => pending.push(*id),
            None if g.holding => holding.push(*id),
            None => other.push(*id),
        }
    }
    for v in [&mut changed, &mut pending, &mut holding, &mut other] {
        v.sort_unstable_by(|a, b| b.cmp(a));
    }
    old.sort_unstable();
    // Pending jobs (autoscale's demand) and jobs holding nodes (what moving workers wait for)
    // in turn, so that neither waits for all of the other.
    let mut turns = Vec::with_capacity(pending.len() + holding.len());
    let (mut p, mut h) = (pending.into_iter(), holding.into_iter());
    loop {
        match (p.next(), h.next()) {
            (None, None) => break,
            (a, b) => turns.extend(a.into_iter().chain(b)),
        }
    }
    let mut out = changed;
    out.extend(turns.into_iter().chain(other).take(room));
    out.extend(old.into_iter().take(sweep).map(|(_, id)| id));
    out
}

/// Pending jobs read again by a refresh ELAPSED after the last one, of PENDING read: each once
/// per [`REFRESH`], spread evenly over the refreshes (at least one).
pub(super) fn sweep(pending: usize, elapsed: Duration) -> usize {
    let share = pending as f64 * elapsed.as_secs_f64() / REFRESH.as_secs_f64();
    (share.ceil() as usize).max(1)
}
