//! Every input the fuzzers found a crash with (tests/fuzz/regressions/<target>/)
//! is replayed through the same entry point, which checks the invariants of
//! `artifact_check::fuzzing` (a panic is a failure). Also the sample runs'
//! own files, so the harness itself is exercised on real input.

mod common;

use std::fs;

use artifact_check::fuzzing;
use common::*;

/// A fuzz target's name and its entry point.
type Target<'a> = (&'static str, &'a dyn Fn(&[u8]));

fn summary_bytes() -> Vec<u8> {
    fs::read(run_dir("late-warmup").join("profile_export_aiperf.json")).expect("summary")
}

#[test]
fn fuzz_regressions_replay_without_a_broken_invariant() {
    let summary = summary_bytes();
    let targets: [Target; 6] = [
        ("records_jsonl", &fuzzing::records_jsonl),
        ("record_fast_path", &fuzzing::record_fast_path),
        ("server_metrics_json", &fuzzing::server_metrics_json),
        ("summary_json", &fuzzing::summary_json),
        ("scrapes_jsonl", &fuzzing::scrapes_jsonl),
        ("whole_run", &|d| fuzzing::whole_run(d, &summary)),
    ];
    let dir = root().join("tests/fuzz/regressions");
    let mut replayed = 0;
    for entry in fs::read_dir(&dir).expect("tests/fuzz/regressions exists") {
        let target_dir = entry.expect("entry").path();
        let name = target_dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        let (_, replay) = targets
            .iter()
            .find(|(t, _)| *t == name)
            .unwrap_or_else(|| panic!("regressions/{name} is no fuzz target"));
        for input in fs::read_dir(&target_dir).expect("list") {
            let path = input.expect("entry").path();
            replay(&fs::read(&path).expect("read"));
            replayed += 1;
        }
    }
    assert!(replayed > 0, "no regression input under {}", dir.display());
}

#[test]
fn entry_points_accept_the_sample_files() {
    for run in ["clean", "late-warmup", "prefix-cache"] {
        let dir = run_dir(run);
        let read = |n: &str| fs::read(dir.join(n)).expect(n);
        fuzzing::records_jsonl(&read("profile_export.jsonl"));
        fuzzing::record_fast_path(&read("profile_export.jsonl"));
        fuzzing::server_metrics_json(&read("server_metrics_export.json"));
        fuzzing::summary_json(&read("profile_export_aiperf.json"));
        fuzzing::scrapes_jsonl(&read("server_metrics_export.jsonl"));
        let mut joined = read("profile_export.jsonl");
        joined.push(0);
        joined.extend(read("server_metrics_export.json"));
        joined.push(0);
        joined.extend(read("server_metrics_export.jsonl"));
        fuzzing::whole_run(&joined, &summary_bytes());
    }
}
