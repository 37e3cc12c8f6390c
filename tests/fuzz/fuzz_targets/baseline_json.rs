#![no_main]
use libfuzzer_sys::fuzz_target;

macro_rules! run_file {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!("../../../sample-artifacts/runs/late-warmup/", $name)) as &[u8],
        )
    };
}

// A real run (every artifact of the sample run late-warmup) audited under
// what each input sets.
const FILES: &[(&str, &[u8])] = &[
    run_file!("profile_export.jsonl"),
    run_file!("profile_export_aiperf.json"),
    run_file!("server_metrics_export.json"),
    run_file!("server_metrics_export.jsonl"),
    run_file!("phase_manifest.json"),
    run_file!("inputs.json"),
];

fuzz_target!(|data: &[u8]| artifact_check::fuzzing::baseline_json(data, FILES));
