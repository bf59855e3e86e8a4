//! What a person asks a command to do once, on purpose (`slurmops rollout --resume SET`,
//! `--ignore-window`): the first pass of the command carries it out behind the fence, before it
//! decides, and records it as a Warning Event on the NodeSet's workload — so no command writes
//! outside the pass.

use crate::cluster::ClusterFile;
use crate::cluster::window::WindowMode;
use crate::controller::observation::Observation;
use crate::controller::{Env, PassError, fenced};
use crate::rollout::Event;

/// An operator's decisions for one command run.
#[derive(Clone, Debug, Default)]
pub struct Decrees {
    /// Proceed past this NodeSet's failed canary (of its current revision).
    pub resume: Option<String>,
    /// Drain the workers of these NodeSets outside their maintenance windows.
    pub ignore_window: bool,
}

/// Carries out D over the pass's observation OBS (its record of the resumed canary replaced by
/// the one written, so this very pass decides on it). ONLY: the NodeSets the command covers.
pub(crate) async fn carry<S>(
    env: &Env<'_, S>,
    c: &ClusterFile,
    only: Option<&std::collections::BTreeSet<String>>,
    d: &Decrees,
    obs: &mut Observation,
) -> Result<(), PassError> {
    let ns = &c.metadata.namespace;
    if let Some(name) = &d.resume {
        let set = obs.sets.get_mut(name).ok_or_else(|| {
            PassError::Missing(format!(
                "NodeSet {name}: no workload in {ns} (apply cluster.yaml first)"
            ))
        })?;
        fenced(env)?;
        let (e, annotation) =
            super::canary::act::resume_canary(&env.cluster.client, ns, set).await?;
        set.canary = Some(annotation);
        env.observer.emit(name, &e);
        if let Event::CanaryVerdict {
            reason, message, ..
        } = e
        {
            note(env, c, name, reason, message).await;
        }
    }
    if d.ignore_window {
        let sets = c.spec.node_sets.iter().filter(|n| {
            n.update.window != WindowMode::None && only.is_none_or(|o| o.contains(&n.name))
        });
        for n in sets {
            let message = format!(
                "slurmops rollout --ignore-window: workers of NodeSet {} drain outside its maintenance windows (update.window: {})",
                n.name,
                n.update.window.as_str()
            );
            fenced(env)?;
            env.observer.emit(
                &n.name,
                &Event::WindowIgnored {
                    message: message.clone(),
                },
            );
            note(env, c, &n.name, crate::vocab::EVENT_WINDOW_IGNORED, message).await;
        }
    }
    Ok(())
}

/// Records an operator's decision about NodeSet SET as a Warning Event on its workload. The
/// Event is for people: failing to record it does not undo the decision.
async fn note<S>(env: &Env<'_, S>, c: &ClusterFile, set: &str, reason: &str, message: String) {
    let managed = c
        .spec
        .node_sets
        .iter()
        .any(|n| n.name == *set && n.managed());
    let note = crate::events::Note {
        involved: crate::events::node_set_ref(&c.metadata.namespace, set, managed),
        reason,
        message,
        warning: true,
    };
    let _ = crate::events::record(&env.cluster.client, note).await;
}
