//! `render`: the Kubernetes objects (and Slurm's files) cluster.yaml renders to.

use std::path::Path;

use super::{Error, cluster_at};
use crate::render::{self, Rendered};

/// The objects cluster.yaml at PATH renders to.
pub fn render(path: &Path) -> Result<Rendered, Error> {
    let (_, c) = cluster_at(path)?;
    Ok(render::render(&c))
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

/// Writes one file per object of R into DIR, and Slurm's files under DIR/slurm; returns how
/// many.
pub fn write_dir(dir: &Path, r: &Rendered) -> Result<usize, Error> {
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
        Ok(n)
    };
    write().map_err(|e| Error::Other(format!("writing {}: {e}", dir.display())))
}
