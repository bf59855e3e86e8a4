//! The two sides of an offline plan, loaded and rendered at once. They are independent (load and
//! render are pure) and most of a plan's time is theirs: on two cores a plan between two
//! revisions takes about the longer of the two, not their sum.

use super::Side;
use crate::cluster::ClusterFile;
use crate::render::{self, Rendered};
use crate::source::Loaded;

/// One side of a plan: its cluster.yaml loaded and rendered.
pub struct Prepared {
    pub cluster: ClusterFile,
    pub rendered: Rendered,
}

impl Prepared {
    pub fn side(&self) -> Side<'_> {
        Side {
            cluster: &self.cluster,
            rendered: &self.rendered,
        }
    }
}

/// NEW and OLD loaded (by LOAD, which says what is wrong with a side) and rendered, the old side
/// on a second thread while this one does the new. NEW's problems are reported first, as when
/// the two were loaded one after the other.
pub fn prepare<E: Send>(
    new: &Loaded,
    old: Option<&Loaded>,
    load: impl Fn(&Loaded) -> Result<ClusterFile, E> + Sync,
) -> Result<(Prepared, Option<Prepared>), E> {
    let side = |l: &Loaded| {
        load(l).map(|cluster| Prepared {
            rendered: render::render(&cluster),
            cluster,
        })
    };
    let (new, old) = std::thread::scope(|s| {
        // Where no thread can be started (a pids limit), the old side is done after the new.
        let other = old.map(|o| std::thread::Builder::new().spawn_scoped(s, || side(o)).ok());
        let mine = side(new);
        let theirs = match (other, old) {
            (Some(Some(h)), _) => Some(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))),
            (_, o) => o.map(side),
        };
        (mine, theirs)
    });
    Ok((new?, old.transpose()?))
}

/// Frees NEW and OLD, OLD on a second thread: a rendered side of a large cluster is a tree of
/// hundreds of thousands of allocations, and freeing one costs about a tenth of a plan.
pub fn discard(new: Prepared, old: Option<Prepared>) {
    std::thread::scope(|s| {
        if let Some(old) = old {
            // Where no thread can be started, the closure (and OLD with it) is freed here.
            let _ = std::thread::Builder::new().spawn_scoped(s, move || drop(old));
        }
        drop(new);
    });
}
