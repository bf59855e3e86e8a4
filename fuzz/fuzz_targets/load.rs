//! Any bytes as cluster.yaml: loading must return Ok or diagnostics, never panic or hang.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(c) = slurmops::spec::load("fuzz.yaml", &text) {
        let _ = slurmops::render::render(&c);
    }
});
