//! `spec.backup`: the copies slurmops takes before what cannot be undone. A Slurm upgrade to
//! another major release converts slurmdbd's database and slurmctld's state in place (SchedMD's
//! upgrade guide: back up both first); with a claim named here, each component's pod copies its
//! data there before the new release starts on it, and the upgrade goes no further until the
//! copy is made. With a `schedule` besides, a CronJob also copies the accounting database to the
//! claim on that schedule and keeps the newest `keep` of those copies.

use super::backup_settings::{MAX_KEEP, Schedule};

/// The five fields of a cron schedule: name, lowest and highest value, names taken for values.
const CRON_FIELDS: [(&str, u32, u32, &[&str]); 5] = [
    ("minute", 0, 59, &[]),
    ("hour", 0, 23, &[]),
    ("day of month", 1, 31, &[]),
    (
        "month",
        1,
        12,
        &[
            "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
        ],
    ),
    (
        "day of week",
        0,
        6,
        &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
    ),
];

/// One value of a cron field: a number within LO..=HI, or one of NAMES (case-insensitive).
fn cron_value(v: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u32, String> {
    if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
        return Ok(i as u32 + lo);
    }
    match v.parse::<u32>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        Ok(_) => Err(format!("{v} is outside {lo}-{hi}")),
        Err(_) => Err(format!("{v:?} is not a number")),
    }
}

/// Why FIELD (one field of a cron schedule, as Kubernetes's parser reads it: lists of `*`, `?`,
/// values and ranges, each with an optional `/STEP`) does not fit within LO..=HI.
fn cron_field(field: &str, lo: u32, hi: u32, names: &[&str]) -> Result<(), String> {
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (item, None),
        };
        if let Some(s) = step
            && !s.parse::<u32>().is_ok_and(|n| n >= 1)
        {
            return Err(format!("the step {s:?} is not a number of 1 or more"));
        }
        if range == "*" || range == "?" {
            continue;
        }
        match range.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (cron_value(a, lo, hi, names)?, cron_value(b, lo, hi, names)?);
                if a > b {
                    return Err(format!("the range {range} runs backwards"));
                }
            }
            None => {
                cron_value(range, lo, hi, names)?;
            }
        }
    }
    Ok(())
}

/// Why CRON is not a schedule of five fields Kubernetes's CronJob takes (None: it is).
pub fn cron_problem(cron: &str) -> Option<String> {
    let fields: Vec<&str> = cron.split_whitespace().collect();
    if fields.len() != 5 {
        return Some(format!(
            "{:?} has {} fields; a schedule has 5: minute, hour, day of month, month, day of week",
            super::diag::clip(cron),
            fields.len()
        ));
    }
    fields
        .iter()
        .zip(CRON_FIELDS)
        .find_map(|(f, (what, lo, hi, names))| {
            cron_field(f, lo, hi, names)
                .err()
                .map(|e| format!("{what} {f:?}: {e}"))
        })
}

/// The findings of S's `backup.schedule` (at AT, `spec.backup`): a cron schedule of five fields,
/// `keep` from 1 to 1000, a claim to write to and an accounting database to copy.
pub fn schedule_findings(
    s: &super::types::ClusterSpec,
    at: &super::Path,
) -> Vec<super::diag::Finding> {
    use super::diag::Finding;
    let Some(sched) = s.backup.as_ref().and_then(|b| b.schedule.as_ref()) else {
        return Vec::new();
    };
    let p = at.key("schedule");
    let mut out = Vec::new();
    if let Some(why) = cron_problem(&sched.cron) {
        out.push(
            Finding::new(p.key("cron"), why)
                .hint("write five fields, e.g. \"0 3 * * *\" (every day at 03:00) or \"30 */6 * * *\" (every 6 hours)"),
        );
    }
    if !(1..=MAX_KEEP).contains(&sched.keep) {
        out.push(
            Finding::new(
                p.key("keep"),
                format!("keep {} copies: it must be 1 to {MAX_KEEP}", sched.keep),
            )
            .hint("keep at least the newest copy, e.g. keep: 7"),
        );
    }
    if s.backup.as_ref().is_some_and(|b| b.claim.is_none()) {
        out.push(
            Finding::new(p.clone(), "scheduled copies are written to spec.backup.claim, and none is set")
                .hint("set backup.claim to a PersistentVolumeClaim (instead of ownCopies), or remove backup.schedule"),
        );
    }
    if !(s.accounting.enabled && s.accounting.database.is_some()) {
        out.push(
            Finding::new(p, "scheduled copies are of the accounting database, and this cluster has none")
                .hint("set spec.accounting.enabled: true with accounting.database, or remove backup.schedule"),
        );
    }
    out
}

/// The schedule of S's scheduled copies, when they are taken (a claim, accounting with a
/// database: what validation asks of a schedule).
pub fn scheduled(s: &super::types::ClusterSpec) -> Option<&Schedule> {
    let b = s.backup.as_ref()?;
    b.claim()?;
    s.accounting
        .database
        .as_ref()
        .filter(|_| s.accounting.enabled)?;
    b.schedule.as_ref()
}

/// What an upgrade to another major release converts in place, in the spec S: the accounting
/// database (accounting on) and slurmctld's state (on a volume: without one it does not outlive
/// a restart anyway).
pub fn converted(s: &super::types::ClusterSpec) -> Vec<&'static str> {
    let mut out = Vec::new();
    if s.accounting.enabled && s.accounting.database.is_some() {
        out.push("slurmdbd's database");
    }
    if s.controller.persistence.enabled {
        out.push("slurmctld's state");
    }
    out
}

/// Why S may not move from release FROM to TO (another major release) as it stands: it converts
/// data in place and names no volume for the copies.
pub fn refusal(s: &super::types::ClusterSpec, from: &str, to: &str) -> Option<String> {
    if !super::release::converts(from, to) {
        return None;
    }
    let data = converted(s);
    let covered = s
        .backup
        .as_ref()
        .is_some_and(|b| b.claim.is_some() || b.own_copies);
    (!covered && !data.is_empty()).then(|| {
        format!(
            "Slurm {from} → {to} converts {} in place, which cannot be undone, and spec.backup names no volume for copies: set spec.backup.claim to a PersistentVolumeClaim (slurmops copies them there before each converts), or spec.backup.ownCopies: true if you take your own",
            data.join(" and ")
        )
    })
}

#[cfg(test)]
mod tests {
    fn load(backup: &str, accounting: bool) -> Result<(), Vec<crate::cluster::Diagnostic>> {
        let acct = match accounting {
            true => {
                "  accounting:\n    enabled: true\n    database:\n      user: slurm\n      password: {name: db, key: pw}\n      inCluster: {storage: 1Gi}\n"
            }
            false => "",
        };
        let text = format!(
            "apiVersion: slurmops.dev/v1alpha1\nkind: SlurmCluster\nmetadata: {{name: c, namespace: slurm}}\n\
             spec:\n  slurmVersion: \"25.11\"\n  auth:\n    slurmKey: {{name: k, key: k}}\n    jwtKey: {{name: j, key: j}}\n\
             {backup}{acct}  nodeSets: [{{name: w, replicas: 2}}]\n  partitions: [{{name: p, nodeSets: [ALL]}}]\n"
        );
        crate::cluster::load("c.yaml", &text).map(|_| ())
    }

    #[test]
    fn cron_schedules_are_read_as_kubernetes_reads_them() {
        for ok in [
            "0 3 * * *",
            "*/15 * * * *",
            "30 2 1-15/2 JAN-jun MON,wed",
            "0 0 ? * 0",
        ] {
            assert_eq!(super::cron_problem(ok), None, "{ok}");
        }
        for bad in [
            "@daily",
            "0 3 * *",
            "0 3 * * 7",
            "0 24 * * *",
            "0 3 * * SUNDAY",
            "*/0 * * * *",
        ] {
            assert!(super::cron_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_schedule_needs_a_claim_accounting_and_a_cron_of_five_fields() {
        let sched = "    schedule: {cron: \"0 3 * * *\", keep: 7}\n";
        load(&format!("  backup:\n    claim: copies\n{sched}"), true).unwrap();
        let err = |backup: String, accounting: bool| {
            let e = load(&backup, accounting).expect_err("refused");
            assert_eq!(e.len(), 1, "{e:#?}");
            e[0].path.clone()
        };
        assert_eq!(
            err(format!("  backup:\n    ownCopies: true\n{sched}"), true),
            "spec.backup.schedule"
        );
        assert_eq!(
            err(format!("  backup:\n    claim: copies\n{sched}"), false),
            "spec.backup.schedule"
        );
        assert_eq!(
            err(
                "  backup:\n    claim: copies\n    schedule: {cron: \"0 3 * *\", keep: 7}\n".into(),
                true
            ),
            "spec.backup.schedule.cron"
        );
        assert_eq!(
            err(
                "  backup:\n    claim: copies\n    schedule: {cron: \"0 3 * * *\", keep: 0}\n"
                    .into(),
                true
            ),
            "spec.backup.schedule.keep"
        );
    }
}
