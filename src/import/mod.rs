//! `slurmops import`: another tool's description of a Slurm cluster turned into a cluster.yaml,
//! with a report of what became of every setting. Teams adopting slurmops run Slinky today, with
//! Helm values files written by many hands; nobody should have to carry them over field by field.
//!
//! Pure: text in, cluster.yaml text and a report out. The input is read through the same bounded,
//! positioned YAML parser as cluster.yaml, so a report line and an error both say `file:line:col`.
//! Every non-empty setting of the input ends in the report: mapped (and where to), ignored (and
//! why it does not matter here), or needing a person (and what to do).

pub mod slinky;
mod values;

pub use values::Values;

/// What became of one setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Carried over to this cluster.yaml path.
    Mapped(String),
    /// Has no effect under slurmops, for this reason.
    Ignored(String),
    /// A person must act: why, and what to do.
    Needs(String),
    /// A default of the source that slurmops does not share, and what the import did about it.
    Default(String),
}

/// One line of the report: the setting (its path in the merged input, where it was written) and
/// its outcome. `at` is empty for a default nobody wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub at: String,
    pub path: String,
    pub outcome: Outcome,
}

/// The imported cluster.yaml and its report.
#[derive(Debug)]
pub struct Imported {
    pub yaml: String,
    pub report: Vec<Entry>,
}

impl Imported {
    /// Something needs a person (the command exits 2).
    pub fn needs_person(&self) -> bool {
        self.report
            .iter()
            .any(|e| matches!(e.outcome, Outcome::Needs(_)))
    }

    /// The report as people read it: one line per setting, then the counts.
    pub fn report_text(&self) -> String {
        let mut out = String::new();
        let (mut mapped, mut ignored, mut needs, mut defaults) = (0, 0, 0, 0);
        for e in &self.report {
            let (tag, text) = match &e.outcome {
                Outcome::Mapped(to) => {
                    mapped += 1;
                    ("mapped ", format!("→ {to}"))
                }
                Outcome::Ignored(why) => {
                    ignored += 1;
                    ("ignored", why.clone())
                }
                Outcome::Needs(why) => {
                    needs += 1;
                    ("NEEDS  ", why.clone())
                }
                Outcome::Default(what) => {
                    defaults += 1;
                    ("default", what.clone())
                }
            };
            let at = if e.at.is_empty() { "-" } else { &e.at };
            out.push_str(&format!("{tag} {at} {}: {text}\n", e.path));
        }
        out.push_str(&format!(
            "{mapped} settings mapped, {ignored} ignored, {defaults} defaults that differ, {needs} need a person{}\n",
            if needs > 0 {
                " (NEEDS lines above; the cluster.yaml holds a placeholder where one is needed)"
            } else {
                ""
            }
        ));
        out
    }
}

/// Why the input could not be imported at all.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{file}:{line}:{col}: {message} (fix the YAML syntax)")]
    Yaml {
        file: String,
        line: usize,
        col: usize,
        message: String,
    },
    #[error("{file}:{line}:{col}: a values file is a mapping of settings, found {found}")]
    NotAMap {
        file: String,
        line: usize,
        col: usize,
        found: &'static str,
    },
    /// The import made a cluster.yaml that does not validate: a bug of the import.
    #[error(
        "the imported cluster.yaml does not validate (a bug of `slurmops import`; please report it with the values files):\n{0}"
    )]
    Invalid(String),
}
