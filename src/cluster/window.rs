//! Maintenance windows (`policy.maintenanceWindows`) and when they are open: a cron schedule of
//! window starts, a duration and a time zone. Pure: every question takes the time (UNIX seconds)
//! from the caller. The schedule is parsed by `jiff-cron`; cluster.yaml writes the usual five
//! fields (minute hour day-of-month month day-of-week), days of the week by name.

use std::str::FromStr;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use jiff_cron::Schedule;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::values::Duration;

/// When disruptive steps may run: a window opens at each time SCHEDULE names and stays open
/// for DURATION.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaintenanceWindow {
    /// Cron: minute hour day-of-month month day-of-week, e.g. `0 2 * * Sat` (days by name).
    pub schedule: String,
    pub duration: Duration,
    /// IANA time zone of the schedule (default UTC), e.g. `Europe/Paris`.
    #[serde(default = "utc")]
    pub time_zone: String,
}

fn utc() -> String {
    "UTC".into()
}

/// Whether a NodeSet's rollout waits for a maintenance window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum WindowMode {
    /// Roll whenever (the default).
    #[default]
    None,
    /// Drain no worker outside a window.
    Required,
    /// Idle workers may roll outside a window; busy ones wait for one.
    Preferred,
}

impl WindowMode {
    /// As cluster.yaml spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            WindowMode::None => "none",
            WindowMode::Required => "required",
            WindowMode::Preferred => "preferred",
        }
    }
}

/// Whether slurmctld restarts and Slurm upgrades wait for a maintenance window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ControlPlaneWindow {
    /// Restart and upgrade whenever a commit asks (the default).
    #[default]
    None,
    /// Restart slurmctld, and start an upgrade, only inside a window; an upgrade started in one
    /// carries on to its end.
    Required,
}

/// A parsed cron schedule and its time zone.
pub type Cron = (Schedule, TimeZone);

/// SCHEDULE (the five usual fields, days of the week by name) in time zone ZONE, or what is wrong.
pub fn parse_cron(schedule: &str, zone: &str) -> Result<Cron, String> {
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "{:?} has {} fields; a schedule has 5: minute hour day-of-month month day-of-week",
            schedule,
            fields.len()
        ));
    }
    if fields[4].chars().any(|c| c.is_ascii_digit()) {
        return Err(format!(
            "day-of-week {:?} is written with numbers, which mean different days in different cron dialects",
            fields[4]
        ));
    }
    let schedule = Schedule::from_str(&format!("0 {}", schedule))
        .map_err(|e| format!("{:?} is not a cron schedule: {e}", schedule))?;
    let tz = TimeZone::get(zone).map_err(|_| format!("{:?} is not an IANA time zone", zone))?;
    Ok((schedule, tz))
}

/// One window, as UNIX seconds: [start, end).
pub type Span = (i64, i64);

impl MaintenanceWindow {
    /// The parsed schedule and time zone, or what is wrong with them.
    pub fn parsed(&self) -> Result<Cron, String> {
        parse_cron(&self.schedule, &self.time_zone)
    }

    /// The window open at NOW (if any) and the next one to open after NOW (empty: the schedule
    /// names no future time, or does not parse).
    fn around(&self, now: i64) -> Vec<Span> {
        let Ok((schedule, tz)) = self.parsed() else {
            return Vec::new();
        };
        let d = self.duration.as_secs() as i64;
        let first_after = |t: i64| {
            let z = Timestamp::from_second(t).ok()?.to_zoned(tz.clone());
            Some(schedule.after(z).next()?.timestamp().as_second())
        };
        // The first start after NOW - DURATION is open now when it is not after NOW.
        let open = first_after(now.saturating_sub(d).saturating_sub(1)).filter(|s| *s <= now);
        open.into_iter()
            .chain(first_after(now))
            .map(|s| (s, s.saturating_add(d)))
            .collect()
    }
}

/// Where the windows stand at NOW.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// The window open now (the one that closes last, when several are).
    pub open: Option<Span>,
    /// The next window to open after NOW.
    pub next: Option<Span>,
}

/// Where WINDOWS stand at NOW.
pub fn timing(windows: &[MaintenanceWindow], now: i64) -> Timing {
    let spans: Vec<Span> = windows.iter().flat_map(|w| w.around(now)).collect();
    Timing {
        open: spans
            .iter()
            .filter(|(s, e)| *s <= now && now < *e)
            .max_by_key(|(_, e)| *e)
            .copied(),
        next: spans
            .iter()
            .filter(|(s, _)| *s > now)
            .min_by_key(|(s, _)| *s)
            .copied(),
    }
}

/// The time zone of the window among WINDOWS that opens at SPAN's start (open at NOW or the
/// next after it), so that a window can be told in the zone its schedule is written in.
pub fn zone_of(windows: &[MaintenanceWindow], span: Span, now: i64) -> Option<&str> {
    windows
        .iter()
        .find(|w| w.around(now).contains(&span))
        .map(|w| w.time_zone.as_str())
}

const DAY: &str = "%a %Y-%m-%d %H:%M";

fn zoned(t: i64, zone: &str) -> Option<jiff::Zoned> {
    Some(
        Timestamp::from_second(t)
            .ok()?
            .to_zoned(TimeZone::get(zone).ok()?),
    )
}

/// SPAN in ZONE as a schedule reads: `Sat 2026-11-28 02:00–06:00 Europe/Paris`, the end's day
/// too when it is another (`Fri 2026-11-27 22:00 – Sat 2026-11-28 02:00 UTC`); None when the
/// zone or the times are not valid.
pub fn local(span: Span, zone: &str) -> Option<String> {
    let (s, e) = (zoned(span.0, zone)?, zoned(span.1, zone)?);
    let end = if s.date() == e.date() {
        format!("–{}", e.strftime("%H:%M"))
    } else {
        format!(" – {}", e.strftime(DAY))
    };
    Some(format!("{}{end} {zone}", s.strftime(DAY)))
}

/// T in ZONE, and in UTC too where ZONE is another: `Sat 2026-11-28 06:00 Europe/Paris
/// (2026-11-28T05:00:00Z)`; UNIX seconds when T or ZONE is not valid.
pub fn told_at(t: i64, zone: &str) -> String {
    let Ok(utc) = Timestamp::from_second(t) else {
        return t.to_string();
    };
    match zoned(t, zone) {
        Some(z) if zone == "UTC" => format!("{} UTC", z.strftime(DAY)),
        Some(z) => format!("{} {zone} ({utc})", z.strftime(DAY)),
        None => utc.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(schedule: &str, duration: u64, tz: &str) -> MaintenanceWindow {
        MaintenanceWindow {
            schedule: schedule.into(),
            duration: Duration::from_secs(duration),
            time_zone: tz.into(),
        }
    }

    fn at(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().as_second()
    }

    #[test]
    fn a_weekly_window_is_open_inside_and_next_outside_in_its_time_zone() {
        let sat = w("0 2 * * Sat", 4 * 3600, "Europe/Paris");
        // Saturday 2026-11-28 02:00 in Paris is 01:00 UTC.
        let t = timing(std::slice::from_ref(&sat), at("2026-11-24T10:00:00Z"));
        assert_eq!(t.open, None);
        assert_eq!(
            t.next,
            Some((at("2026-11-28T01:00:00Z"), at("2026-11-28T05:00:00Z")))
        );
        let t = timing(std::slice::from_ref(&sat), at("2026-11-28T04:59:59Z"));
        assert_eq!(
            t.open,
            Some((at("2026-11-28T01:00:00Z"), at("2026-11-28T05:00:00Z")))
        );
        assert_eq!(t.next.map(|n| n.0), Some(at("2026-12-05T01:00:00Z")));
        assert_eq!(timing(&[sat], at("2026-11-28T05:00:00Z")).open, None);
    }

    #[test]
    fn schedules_that_mislead_are_refused() {
        assert!(
            w("0 2 * * 6", 60, "UTC")
                .parsed()
                .unwrap_err()
                .contains("numbers")
        );
        assert!(
            w("0 2 * *", 60, "UTC")
                .parsed()
                .unwrap_err()
                .contains("5: minute")
        );
        assert!(w("0 25 * * *", 60, "UTC").parsed().is_err());
        assert!(
            w("0 2 * * *", 60, "Mars/Olympus")
                .parsed()
                .unwrap_err()
                .contains("IANA")
        );
    }

    #[test]
    fn a_window_is_told_in_the_zone_its_schedule_is_written_in() {
        let sat = w("0 2 * * Sat", 4 * 3600, "Europe/Paris");
        let night = w("0 22 * * Fri", 4 * 3600, "UTC");
        let ws = [night, sat];
        let now = at("2026-11-24T10:00:00Z");
        let next = timing(&ws, now).next.unwrap();
        // Friday 22:00 UTC opens first; Saturday 02:00 in Paris (01:00 UTC) after it.
        assert_eq!(zone_of(&ws, next, now), Some("UTC"));
        assert_eq!(
            local(next, "UTC").unwrap(),
            "Fri 2026-11-27 22:00 – Sat 2026-11-28 02:00 UTC"
        );
        let paris = (at("2026-11-28T01:00:00Z"), at("2026-11-28T05:00:00Z"));
        assert_eq!(zone_of(&ws, paris, now), Some("Europe/Paris"));
        assert_eq!(
            local(paris, "Europe/Paris").unwrap(),
            "Sat 2026-11-28 02:00–06:00 Europe/Paris"
        );
        assert_eq!(zone_of(&ws, (0, 1), now), None);
        assert_eq!(local(paris, "Mars/Olympus"), None);
        assert_eq!(
            told_at(paris.1, "Europe/Paris"),
            "Sat 2026-11-28 06:00 Europe/Paris (2026-11-28T05:00:00Z)"
        );
        assert_eq!(told_at(paris.1, "UTC"), "Sat 2026-11-28 05:00 UTC");
        assert_eq!(told_at(i64::MAX, "UTC"), i64::MAX.to_string());
    }
}
