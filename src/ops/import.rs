//! `import`: another tool's cluster description in, a cluster.yaml and a report out.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::Error;
use crate::import::Imported;
use crate::import::slinky::{self, Options};

/// The Slinky chart values files VALUES, merged in order, imported with O.
pub fn slinky(values: &[PathBuf], o: &Options) -> Result<Imported, Error> {
    let mut files = Vec::new();
    for p in values {
        files.push((p.display().to_string(), read(p)?));
    }
    slinky::import(&files, o).map_err(|e| Error::Other(e.to_string()))
}

/// The file at P, refused past the size any cluster.yaml may have.
fn read(p: &Path) -> Result<String, Error> {
    let limit = crate::cluster::yaml::MAX_BYTES;
    let mut text = String::new();
    std::fs::File::open(p)
        .and_then(|f| f.take(limit as u64 + 1).read_to_string(&mut text))
        .map_err(|e| Error::Other(format!("{}: {e}", p.display())))?;
    if text.len() > limit {
        return Err(Error::Other(format!(
            "{}: larger than {limit} bytes; a values file is a few hundred lines",
            p.display()
        )));
    }
    Ok(text)
}
