//! The upstream wire frame decoder: parse, round trip, alert checks.
//! The body is `exo::fuzzing::wire_frame`, shared with tests/fuzz_corpus.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| exo::fuzzing::wire_frame(data));
