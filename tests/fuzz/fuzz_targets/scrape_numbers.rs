#![no_main]
use libfuzzer_sys::fuzz_target;

macro_rules! run_file {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!("../../../sample-artifacts/runs/clean/", $name)) as &[u8],
        )
    };
}

const FILES: &[(&str, &[u8])] = &[
    run_file!("profile_export.jsonl"),
    run_file!("profile_export_aiperf.json"),
    run_file!("server_metrics_export.json"),
    run_file!("server_metrics_export.jsonl"),
    run_file!("phase_manifest.json"),
];

fuzz_target!(|data: &[u8]| artifact_check::fuzzing::scrape_numbers(data, FILES));
