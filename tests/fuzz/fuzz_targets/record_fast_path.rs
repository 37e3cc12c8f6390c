#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| artifact_check::fuzzing::record_fast_path(data));
