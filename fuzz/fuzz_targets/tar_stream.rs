//! The `exo fs cp` tar walker: chunked like the input says, every path checked.
//! The body is `exo::fuzzing::tar_stream`, shared with tests/fuzz_corpus.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| exo::fuzzing::tar_stream(data));
