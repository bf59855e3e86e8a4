//! The controllers' roll behind one address (`controller.ha.serviceAddress`).
//!
//! There the controllers' Service sends clients only to the controller in control: a standby's
//! readiness says no (render/handback.rs, `in_control`). The StatefulSet controller's rolling
//! update waits for each replaced pod to be Ready and would stall on the first standby, so the
//! StatefulSet is `OnDelete` and a pass replaces its pods: one at a time, the standbys first
//! (highest ordinal first), then the controller in control once every standby runs the new
//! template. Nothing is replaced while no controller has control, or more than one is Ready
//! (nobody has: a failover or a start under way), or a controller pod is missing or stopping.
//!
//! `decide` is pure (table-tested, here); `observe` (`observe.rs`) reads the StatefulSet and its
//! few pods (two small reads, only for such a cluster); `act` (`act.rs`) deletes one pod, if it
//! is still the one observed.

mod act;
mod observe;

pub use self::act::act;
pub use self::observe::observe;

/// Seconds to the next pass while the roll goes on: a controller pod stopping or starting is
/// seen within them (no watch follows the controllers).
pub const ROLL_RECHECK: i64 = 3;

/// One controller pod as a pass sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CtldPod {
    pub name: String,
    pub uid: String,
    pub ordinal: u32,
    /// `controller-revision-hash`.
    pub revision: String,
    /// Ready: the controller in control (or, while nobody is, a running one).
    pub ready: bool,
    /// Its readiness is the in-control probe. A pod of a template from before
    /// `serviceAddress` was turned on is Ready whenever slurmctld listens, standby or not: its
    /// readiness says nothing of control.
    pub probed: bool,
    /// Its slurmctld container is running.
    pub running: bool,
    pub deleting: bool,
}

/// The controllers' StatefulSet and pods.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CtldView {
    pub replicas: u32,
    pub update_revision: Option<String>,
    pub pods: Vec<CtldPod>,
}

/// What the pass does with the controllers.
#[derive(Debug, Clone, PartialEq)]
pub enum Roll {
    /// Every controller runs the StatefulSet's template.
    Done,
    /// Nothing replaced now, and why.
    Wait(String),
    /// Delete this pod: its StatefulSet makes it again from the new template.
    Replace {
        pod: String,
        uid: String,
        in_control: bool,
    },
}

/// The next step of the controllers' roll.
pub fn decide(v: &CtldView) -> Roll {
    let Some(rev) = &v.update_revision else {
        return Roll::Wait(
            "the StatefulSet controller has not read the controllers' template yet".into(),
        );
    };
    if let Some(p) = v.pods.iter().find(|p| p.deleting) {
        return Roll::Wait(format!("controller pod {} is stopping", p.name));
    }
    if (v.pods.len() as u32) < v.replicas {
        return Roll::Wait(format!(
            "{} of {} controller pods exist (the StatefulSet makes the others)",
            v.pods.len(),
            v.replicas
        ));
    }
    let outdated: Vec<&CtldPod> = v.pods.iter().filter(|p| &p.revision != rev).collect();
    if outdated.is_empty() {
        return Roll::Done;
    }
    let ready: Vec<&CtldPod> = v.pods.iter().filter(|p| p.ready && p.probed).collect();
    let in_control = match ready.as_slice() {
        [one] => *one,
        // serviceAddress just turned on: the pods that run yet have a template without the
        // in-control probe, and their readiness tells nothing of control. They are replaced by
        // ordinal, the highest first, the primary last once every other one runs.
        [] if v.pods.iter().any(|p| !p.probed) => return by_ordinal(&outdated, v),
        [] => {
            return Roll::Wait(
                "no controller is Ready (none has control): none is replaced until one has".into(),
            );
        }
        _ => {
            return Roll::Wait(format!(
                "{} controllers are Ready, so none has control (a failover or a start under way): none is replaced until one has",
                ready.len()
            ));
        }
    };
    let standby = outdated
        .iter()
        .filter(|p| p.name != in_control.name)
        .max_by_key(|p| p.ordinal);
    if let Some(p) = standby {
        return Roll::Replace {
            pod: p.name.clone(),
            uid: p.uid.clone(),
            in_control: false,
        };
    }
    if let Some(p) = v
        .pods
        .iter()
        .find(|p| p.name != in_control.name && !p.running)
    {
        return Roll::Wait(format!(
            "standby {} is not running yet: {} keeps control until it is",
            p.name, in_control.name
        ));
    }
    Roll::Replace {
        pod: in_control.name.clone(),
        uid: in_control.uid.clone(),
        in_control: true,
    }
}

/// ROLL in the status's words (its `controllers` line); None once every controller runs the
/// template.
pub fn words(roll: &Roll) -> Option<String> {
    match roll {
        Roll::Done => None,
        Roll::Wait(why) => Some(format!("their roll waits: {why}")),
        Roll::Replace {
            pod,
            in_control: false,
            ..
        } => Some(format!("rolling: standby {pod} replaced")),
        Roll::Replace {
            pod,
            in_control: true,
            ..
        } => Some(format!("rolling: {pod}, which had control, replaced last")),
    }
}

/// What `plan --cluster` shows of ROLL: the pod the next pass deletes, if any.
pub fn step(roll: &Roll) -> Option<crate::plan::Step> {
    let Roll::Replace {
        pod, in_control, ..
    } = roll
    else {
        return None;
    };
    Some(crate::plan::Step {
        // A controller belongs to no NodeSet.
        node_set: String::new(),
        by: crate::plan::StepBy::Controller,
        action: "delete",
        target: pod.clone(),
        detail: match in_control {
            false => "a standby controller on the old template".into(),
            true => "the controller in control, last: every standby runs the new template, and one takes control meanwhile".into(),
        },
    })
}

/// The roll while no pod's readiness says which controller has control (their template is
/// from before `serviceAddress`): the highest outdated ordinal first, the primary (ordinal 0)
/// last, once every other controller runs.
fn by_ordinal(outdated: &[&CtldPod], v: &CtldView) -> Roll {
    let Some(next) = outdated.iter().max_by_key(|p| p.ordinal) else {
        return Roll::Done;
    };
    if next.ordinal == 0
        && let Some(p) = v.pods.iter().find(|p| p.ordinal != 0 && !p.running)
    {
        return Roll::Wait(format!(
            "{} is not running yet: the primary is replaced once it is",
            p.name
        ));
    }
    Roll::Replace {
        pod: next.name.clone(),
        uid: next.uid.clone(),
        in_control: next.ordinal == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ordinal: u32, revision: &str, ready: bool) -> CtldPod {
        CtldPod {
            name: format!("c-controller-{ordinal}"),
            uid: format!("u{ordinal}"),
            ordinal,
            revision: revision.into(),
            ready,
            probed: true,
            running: true,
            deleting: false,
        }
    }

    fn view(pods: Vec<CtldPod>) -> CtldView {
        CtldView {
            replicas: pods.len() as u32,
            update_revision: Some("new".into()),
            pods,
        }
    }

    fn replace(ordinal: u32, in_control: bool) -> Roll {
        Roll::Replace {
            pod: format!("c-controller-{ordinal}"),
            uid: format!("u{ordinal}"),
            in_control,
        }
    }

    #[test]
    fn the_standbys_are_replaced_first_highest_ordinal_first_then_the_controller_in_control() {
        let mut v = view(vec![
            pod(0, "old", true),
            pod(1, "old", false),
            pod(2, "old", false),
        ]);
        assert_eq!(decide(&v), replace(2, false));
        v.pods[2].revision = "new".into();
        assert_eq!(decide(&v), replace(1, false));
        v.pods[1].revision = "new".into();
        assert_eq!(decide(&v), replace(0, true));
        v.pods[0].revision = "new".into();
        assert_eq!(decide(&v), Roll::Done);
    }

    #[test]
    fn after_a_failover_the_primary_standing_by_goes_first_and_the_backup_in_control_last() {
        let v = view(vec![pod(0, "old", false), pod(1, "old", true)]);
        assert_eq!(decide(&v), replace(0, false));
        let v = view(vec![pod(0, "new", false), pod(1, "old", true)]);
        assert_eq!(decide(&v), replace(1, true));
    }

    #[test]
    fn nothing_is_replaced_while_nobody_or_everybody_has_control_or_a_pod_is_missing_or_stopping() {
        let none = view(vec![pod(0, "old", false), pod(1, "old", false)]);
        assert!(matches!(decide(&none), Roll::Wait(w) if w.contains("none has control")));
        let both = view(vec![pod(0, "old", true), pod(1, "old", true)]);
        assert!(matches!(decide(&both), Roll::Wait(w) if w.contains("2 controllers are Ready")));
        let mut missing = view(vec![pod(0, "old", true)]);
        missing.replicas = 2;
        assert!(matches!(decide(&missing), Roll::Wait(w) if w.contains("1 of 2 controller pods")));
        let mut stopping = view(vec![pod(0, "old", true), pod(1, "new", false)]);
        stopping.pods[1].deleting = true;
        assert!(
            matches!(decide(&stopping), Roll::Wait(w) if w.contains("c-controller-1 is stopping"))
        );
        let mut unread = view(vec![pod(0, "old", true)]);
        unread.update_revision = None;
        assert!(matches!(decide(&unread), Roll::Wait(_)));
    }

    #[test]
    fn turned_on_over_pods_whose_readiness_says_nothing_of_control_the_primary_goes_last() {
        // Both old pods Ready (their probe: slurmctld listens): the highest ordinal first.
        let mut v = view(vec![pod(0, "old", true), pod(1, "old", true)]);
        for p in &mut v.pods {
            p.probed = false;
        }
        assert_eq!(decide(&v), replace(1, false));
        // The new backup stands by (not Ready by the new probe) and is starting: the old
        // primary waits for it, then goes.
        v.pods[1] = CtldPod {
            running: false,
            ..pod(1, "new", false)
        };
        assert!(
            matches!(decide(&v), Roll::Wait(w) if w.contains("c-controller-1 is not running yet"))
        );
        v.pods[1].running = true;
        assert_eq!(decide(&v), replace(0, true));
        // Had the new backup taken control meanwhile, its probe says so: the ordinary roll.
        v.pods[1].ready = true;
        assert_eq!(decide(&v), replace(0, false));
    }

    #[test]
    fn the_status_says_where_the_roll_stands_and_nothing_once_it_is_done() {
        assert_eq!(words(&Roll::Done), None);
        assert_eq!(
            words(&replace(1, false)).as_deref(),
            Some("rolling: standby c-controller-1 replaced")
        );
        let waits = words(&Roll::Wait("no controller is Ready".into())).unwrap();
        assert_eq!(waits, "their roll waits: no controller is Ready");
        // plan --cluster: the pod the next pass deletes, in no NodeSet.
        let last = step(&replace(0, true)).unwrap();
        assert_eq!(
            (last.action, last.target.as_str(), last.node_set.as_str()),
            ("delete", "c-controller-0", "")
        );
        assert!(step(&Roll::Done).is_none());
    }

    #[test]
    fn the_controller_in_control_waits_for_every_standby_to_run() {
        let mut v = view(vec![pod(0, "old", true), pod(1, "new", false)]);
        v.pods[1].running = false;
        assert!(
            matches!(decide(&v), Roll::Wait(w) if w.contains("standby c-controller-1 is not running yet"))
        );
        v.pods[1].running = true;
        assert_eq!(decide(&v), replace(0, true));
    }
}
