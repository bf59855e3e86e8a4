//! The slurmops binary: see the library's `cli` module.

fn main() {
    std::process::exit(slurmops::cli::main());
}
