//! Checks of maintenance windows: schedules that parse as the five usual cron fields, known time
//! zones, and NodeSets that wait for a window only when there is one.

use super::super::diag::Path;
use super::super::types::*;
use super::super::window::{ControlPlaneWindow, WindowMode};
use super::Validator;

impl Validator {
    pub(super) fn windows(&mut self, policy: &Policy, p: &Path) {
        if policy.control_plane_window != ControlPlaneWindow::None
            && policy.maintenance_windows.is_empty()
        {
            self.err(
                p.key("controlPlaneWindow"),
                "slurmctld restarts wait for a maintenance window, and policy.maintenanceWindows has none",
                "add a window to policy.maintenanceWindows, or set controlPlaneWindow: none",
            );
        }
        for (i, w) in policy.maintenance_windows.iter().enumerate() {
            let wp = p.key("maintenanceWindows").index(i);
            if let Err(e) = w.parsed() {
                let (field, hint) = if e.contains("time zone") {
                    ("timeZone", "e.g. UTC or Europe/Paris")
                } else {
                    (
                        "schedule",
                        "five fields, days by name, e.g. \"0 2 * * Sat\" (02:00 every Saturday)",
                    )
                };
                self.err(wp.key(field), e, hint);
            }
            if w.duration.as_secs() < 60 {
                self.err(
                    wp.key("duration"),
                    format!("a window of {} cannot hold a rollout step", w.duration),
                    "use 1m or more, e.g. 4h",
                );
            }
        }
    }

    pub(super) fn window_mode(&mut self, n: &NodeSet, s: &ClusterSpec, p: &Path) {
        if n.update.window != WindowMode::None && s.policy.maintenance_windows.is_empty() {
            self.err(
                p.key("update").key("window"),
                format!(
                    "NodeSet {:?} waits for a maintenance window, and policy.maintenanceWindows has none",
                    n.name
                ),
                "add a window to policy.maintenanceWindows, or set window: none",
            );
        }
    }

    /// `update.requeue` says which jobs `runningJobs: requeue` requeues: set with `wait`, it
    /// would do nothing, which a reader would not guess.
    pub(super) fn requeue(&mut self, n: &NodeSet, p: &Path) {
        let u = &n.update;
        if u.running_jobs == RunningJobs::Wait && u.requeue != Requeue::default() {
            self.err(
                p.key("update").key("requeue"),
                format!(
                    "NodeSet {:?} says which jobs to requeue, and its runningJobs is wait: no job is requeued",
                    n.name
                ),
                "add runningJobs: requeue to update, or remove requeue",
            );
        }
    }
}
