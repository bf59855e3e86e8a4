//! What one apply did, object by object (created, updated, unchanged, pruned, held back, drift
//! left in place) and in API requests and slurmdbd writes: the CLI prints it, the daemon's status
//! summarises it, and a driver's later passes add to it.

use super::Requests;

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub unchanged: Vec<String>,
    /// Unchanged objects that needed a server-side dry run to tell (server normalisation).
    pub confirmed_by_dry_run: Vec<String>,
    pub recreated: Vec<String>,
    pub pruned: Vec<String>,
    /// Edited by hand and left so (detect-only mode).
    pub drifted: Vec<String>,
    /// Objects whose old shared field manager (`slurmops`) was handed to the cluster's own.
    pub handed_over: usize,
    /// Objects a Slurm upgrade or a maintenance window holds back (their live objects stay),
    /// and what they wait for.
    pub held: Vec<String>,
    pub held_for: String,
    /// When the maintenance window they wait for opens (UNIX seconds).
    pub window_opens: Option<i64>,
    /// The copy before a Slurm upgrade converts data failed: `(pod, why)`.
    pub copy_failed: Option<(String, String)>,
    pub requests: Requests,
    /// QOS, accounts and users: what changed in slurmdbd (in Slurm's words), drift reported,
    /// refusals and objects made by hand.
    pub accounting: Vec<String>,
    /// Requests that changed slurmdbd.
    pub accounting_writes: u32,
    /// The accounting step failed (nothing destructive followed): why.
    pub accounting_error: Option<String>,
    /// It failed because slurmrestd or slurmdbd did not answer: the daemon runs it again within
    /// seconds of them answering, not at the next drift re-apply.
    #[serde(skip)]
    pub accounting_pending: bool,
}

impl Report {
    /// Adds what a later apply of the same cluster.yaml did (a scale-in lowered, a removed
    /// NodeSet pruned once drained): one report for a driver's passes.
    pub fn absorb(&mut self, later: &Report) {
        for (mine, theirs) in [
            (&mut self.created, &later.created),
            (&mut self.updated, &later.updated),
            (&mut self.recreated, &later.recreated),
            (&mut self.pruned, &later.pruned),
        ] {
            for id in theirs {
                if !mine.contains(id) {
                    mine.push(id.clone());
                }
            }
        }
        self.unchanged.retain(|id| !later.updated.contains(id));
        for line in &later.accounting {
            if !self.accounting.contains(line) {
                self.accounting.push(line.clone());
            }
        }
        self.accounting_writes += later.accounting_writes;
        self.handed_over += later.handed_over;
        // What still holds is the latest pass's: an accounting step that failed in the first
        // pass (slurmdbd restarting under an upgrade) and read slurmdbd in a later one is no
        // error of the whole apply, and objects held once and applied since wait no more.
        self.accounting_error.clone_from(&later.accounting_error);
        self.accounting_pending = later.accounting_pending;
        self.held.clone_from(&later.held);
        self.held_for.clone_from(&later.held_for);
        self.window_opens = later.window_opens;
        self.copy_failed.clone_from(&later.copy_failed);
        self.requests.total += later.requests.total;
        self.requests.reads += later.requests.reads;
        self.requests.writes += later.requests.writes;
        self.requests.dry_runs += later.requests.dry_runs;
    }

    /// One line: what happened to the objects and the API requests it took.
    pub fn counts(&self) -> String {
        let mut accounting = String::new();
        if self.accounting_writes > 0 || self.accounting_error.is_some() {
            accounting = format!("; accounting: {} slurmdbd writes", self.accounting_writes);
        }
        if let Some(e) = &self.accounting_error {
            accounting.push_str(&format!(", failed: {e}"));
        }
        let objects = format!(
            "{} created, {} updated, {} unchanged, {} recreated, {} pruned, {} drifted; {} API requests ({} writes, {} dry runs)",
            self.created.len(),
            self.updated.len(),
            self.unchanged.len(),
            self.recreated.len(),
            self.pruned.len(),
            self.drifted.len(),
            self.requests.total,
            self.requests.writes,
            self.requests.dry_runs
        );
        let mut handed = String::new();
        if self.handed_over > 0 {
            handed = format!(
                "; field manager `{}` handed over to this cluster's on {} objects",
                super::LEGACY_MANAGER,
                self.handed_over
            );
        }
        objects + &handed + &accounting
    }

    /// The objects held back and what they wait for, in one line (None when nothing is held).
    pub fn held_line(&self) -> Option<String> {
        (!self.held.is_empty())
            .then(|| format!("{} (waiting for {})", self.held.join(", "), self.held_for))
    }
}

#[cfg(test)]
mod tests {
    use super::Report;

    #[test]
    fn a_driver_s_report_says_what_still_holds_after_its_last_pass() {
        // The first pass of an upgrade: later components held, accounting unreadable while the
        // pass itself restarted slurmdbd.
        let mut first = Report {
            updated: vec!["StatefulSet/c-accounting".into()],
            held: vec!["StatefulSet/c-controller".into()],
            held_for: "slurmdbd 26.05 to be Ready".into(),
            accounting_error: Some("cannot read slurmdbd, nothing changed: HTTP 502".into()),
            accounting_pending: true,
            ..Report::default()
        };
        // A later pass: the rest applied, accounting read.
        let later = Report {
            updated: vec!["StatefulSet/c-controller".into()],
            accounting_writes: 1,
            ..Report::default()
        };
        first.absorb(&later);
        assert_eq!(
            first.updated,
            ["StatefulSet/c-accounting", "StatefulSet/c-controller"]
        );
        assert_eq!(first.accounting_error, None);
        assert!(!first.accounting_pending);
        assert_eq!(first.held_line(), None);
        assert_eq!(first.accounting_writes, 1);
        // A later pass that still fails keeps the error.
        let failing = Report {
            accounting_error: Some("cannot read slurmdbd".into()),
            ..Report::default()
        };
        first.absorb(&failing);
        assert_eq!(
            first.accounting_error.as_deref(),
            Some("cannot read slurmdbd")
        );
    }
}
