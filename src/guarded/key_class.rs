//! The classes of a Slurm file's keys, from harmless to most powerful.

/// What a key of a Slurm file does, from harmless to most powerful (the derived order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyClass {
    /// Scheduling parameters, limits, timeouts, node and partition definitions.
    Data,
    /// Names a program, script or plugin Slurm runs or loads.
    Program,
    /// A host, port or address Slurm sends traffic or credentials to.
    Address,
    /// Sets environment of jobs or daemons.
    Environment,
    /// Credentials, users and rights, authentication, paths on the node, daemon parameters.
    Admin,
}

impl KeyClass {
    /// The class's name, as a refusal prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyClass::Data => "data",
            KeyClass::Program => "program",
            KeyClass::Address => "network address",
            KeyClass::Environment => "environment",
            KeyClass::Admin => "admin",
        }
    }

    /// Why a key of this class needs an install allowance: one short clause.
    pub fn why(self) -> &'static str {
        match self {
            KeyClass::Data => "is data",
            KeyClass::Program => {
                "names a program, script or plugin Slurm runs or loads, as root or as SlurmUser"
            }
            KeyClass::Address => "names an address Slurm sends traffic or credentials to",
            KeyClass::Environment => "sets the environment of jobs or Slurm's daemons",
            KeyClass::Admin => {
                "sets credentials, users, rights or paths on the node Slurm writes or reads"
            }
        }
    }
}
