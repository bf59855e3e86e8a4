//! `plan --cluster`: the work tree's cluster.yaml against the live cluster. With Slurm, the
//! controller's own pass, dry-run: what it observes and decides now, the objects it would apply
//! (scale-ins not yet safe held, as the pass holds them), and its worker steps.

use std::path::Path;

use super::{Error, cluster_at, connect, runtime, token_client};
use crate::apply::{self, Options};
use crate::controller::{Env, Target};
use crate::plan::Plan;
use crate::render;
use crate::rollout::Observer;

/// Where the live side is.
pub struct Live<'a> {
    pub path: &'a Path,
    pub kubeconfig: Option<&'a Path>,
    pub context: Option<&'a str>,
    /// slurmrestd's URL and a JWT: with them, the controller's pass previewed.
    pub slurm: Option<(&'a str, &'a str)>,
}

/// The plan against the live cluster, and what it is against in words.
pub fn plan(l: &Live<'_>) -> Result<(Plan, String), Error> {
    let (loaded, c) = cluster_at(l.path)?;
    let r = render::render(&c);
    let p = runtime().block_on(async {
        let cluster = connect(l.kubeconfig, l.context).await?;
        let last = apply::applyset::last_applied(&cluster, &c).await?;
        let base = last.as_ref().map(|b| (b, render::render(b)));
        let base = base.as_ref().map(|(b, br)| (*b, br));
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let Some((url, token)) = l.slurm else {
            let mut p = apply::drift(&cluster, &c, &r, &r, base).await?;
            crate::plan::at(&mut p, &c, now);
            return Ok::<_, Error>(p);
        };
        let client = token_client(url, token)?;
        let observer = Observer::default();
        let env = Env {
            cluster: &cluster,
            slurm: Some(&client),
            cache: None,
            fence: &|| false,
            observer: &observer,
            registration_grace: crate::controller::decide::REGISTRATION_GRACE,
        };
        let opts = Options::default();
        let t = Target {
            c: &c,
            text: &loaded.text,
            rendered: &r,
            apply: Some(&opts),
            scope: Default::default(),
            fresh: true,
            decrees: None,
        };
        let mut preview = crate::controller::preview(&env, &t).await?;
        if let Err(e) = &preview.observation.slurm {
            return Err(Error::Other(format!(
                "Slurm's state is unknown, so the controller would do nothing destructive: {e}"
            )));
        }
        let mut p = apply::drift(&cluster, &c, &r, &preview.rendered(&r), base).await?;
        crate::plan::at(&mut p, &c, now);
        let changed: Vec<String> = p
            .changes
            .iter()
            .filter(|ch| ch.action != crate::plan::Action::Delete)
            .map(|ch| format!("{}/{}", ch.kind, ch.name))
            .collect();
        preview.settle(&changed);
        p.slurm.next_pass = preview.steps();
        p.slurm.drains = preview.drains(&p);
        preview.name_canaries(&mut p);
        preview.pending_held_back(&c, &mut p);
        // Live: slurmdbd's objects, not the last applied revision's.
        p.slurm.accounting = crate::accounting::observe(&client, &c, last.as_ref()).await?;
        Ok(p)
    })?;
    let target = format!(
        "cluster {} (live, namespace {})",
        c.metadata.name, c.metadata.namespace
    );
    Ok((p, target))
}
