#![no_main]
use libfuzzer_sys::fuzz_target;

const SUMMARY: &[u8] =
    include_bytes!("../../../sample-artifacts/runs/late-warmup/profile_export_aiperf.json");

fuzz_target!(|data: &[u8]| artifact_check::fuzzing::whole_run(data, SUMMARY));
