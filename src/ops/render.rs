//! `render`: the Kubernetes objects (and Slurm's files) cluster.yaml renders to.

use std::path::Path;

use super::{Error, cluster_at};
use crate::render::{self, Rendered};

/// What cluster.yaml renders to: the objects and Slurm's files, and the batch jobs slurmops
/// submits to prove its workers.
pub struct Output {
    pub rendered: Rendered,
    /// File name and `sbatch` script of each active check's job on each NodeSet it covers
    /// (`check-CHECK-NODESET.sbatch`) and each canary's validation job
    /// (`canary-NODESET.sbatch`).
    pub jobs: Vec<(String, String)>,
}

/// What cluster.yaml at PATH renders to.
pub fn render(path: &Path) -> Result<Output, Error> {
    let (_, c) = cluster_at(path)?;
    Ok(Output {
        rendered: render::render(&c),
        jobs: probe_jobs(&c.spec),
    })
}

/// The batch jobs of SPEC's checks and canaries, as `sbatch` scripts (see [`Output::jobs`]).
pub fn probe_jobs(spec: &crate::cluster::types::ClusterSpec) -> Vec<(String, String)> {
    let checks = crate::controller::features::checks::jobs(spec)
        .into_iter()
        .map(|(check, set, job)| (format!("check-{check}-{set}.sbatch"), job.sbatch()));
    let canaries = crate::controller::features::canary::jobs(spec)
        .into_iter()
        .map(|(set, job, from)| {
            let text = match from {
                // The script is the ConfigMap's, read when the job is sent.
                Some(r) => job.sbatch().replacen(
                    "\n",
                    &format!(
                        "\n# The script: key {} of ConfigMap {}, read when sent\n",
                        r.key, r.name
                    ),
                    1,
                ),
                None => job.sbatch(),
            };
            (format!("canary-{set}.sbatch"), text)
        });
    checks.chain(canaries).collect()
}

/// Multi-document YAML of every rendered object, in apply order.
pub fn objects_yaml(r: &Rendered) -> String {
    r.objects
        .iter()
        .map(|o| {
            format!(
                "---\n{}",
                serde_saphyr::to_string(&o.body).expect("objects serialize")
            )
        })
        .collect()
}

/// Writes one file per object of OUT into DIR, Slurm's files under DIR/slurm and the jobs
/// under DIR/jobs; returns how many.
pub fn write_dir(dir: &Path, out: &Output) -> Result<usize, Error> {
    let r = &out.rendered;
    let write = || -> std::io::Result<usize> {
        std::fs::create_dir_all(dir.join("slurm"))?;
        let mut n = 0;
        for (i, o) in r.objects.iter().enumerate() {
            let file = dir.join(format!(
                "{:02}-{}-{}.yaml",
                i,
                o.kind.to_ascii_lowercase(),
                o.name
            ));
            std::fs::write(
                file,
                serde_saphyr::to_string(&o.body).expect("objects serialize"),
            )?;
            n += 1;
        }
        for (name, content) in r.slurm.iter().chain(r.scripts.iter()) {
            std::fs::write(dir.join("slurm").join(name), content)?;
            n += 1;
        }
        if !out.jobs.is_empty() {
            std::fs::create_dir_all(dir.join("jobs"))?;
        }
        for (name, content) in &out.jobs {
            std::fs::write(dir.join("jobs").join(name), content)?;
            n += 1;
        }
        Ok(n)
    };
    write().map_err(|e| Error::Other(format!("writing {}: {e}", dir.display())))
}
