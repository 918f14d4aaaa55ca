//! The fleet YAML loader: every type `exo::fleet::load` reads, then lint and plan.
//! The body is `exo::fuzzing::fleet_yaml`, shared with tests/fuzz_corpus.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| exo::fuzzing::fleet_yaml(data));
