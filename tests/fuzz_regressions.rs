//! Every input the fuzzers found a crash with (tests/fuzz/regressions/<target>/)
//! is replayed through the same entry point; none may panic. Also a smoke
//! over the sample runs' own files, so the harness itself is exercised.

mod common;

use std::fs;

use artifact_check::fuzzing;
use common::*;

fn replay(target: &str, entry: &dyn Fn(&[u8])) -> usize {
    let dir = root().join("tests/fuzz/regressions").join(target);
    let mut n = 0;
    if let Ok(entries) = fs::read_dir(&dir) {
        for e in entries {
            let path = e.expect("entry").path();
            let data = fs::read(&path).expect("read");
            entry(&data);
            n += 1;
        }
    }
    n
}

fn summary_bytes() -> Vec<u8> {
    fs::read(run_dir("late-warmup").join("profile_export_aiperf.json")).expect("summary")
}

#[test]
fn fuzz_regressions_do_not_panic() {
    let summary = summary_bytes();
    let mut total = 0;
    total += replay("records_jsonl", &fuzzing::records_jsonl);
    total += replay("record_fast_path", &fuzzing::record_fast_path);
    total += replay("server_metrics_json", &fuzzing::server_metrics_json);
    total += replay("summary_json", &fuzzing::summary_json);
    total += replay("scrapes_jsonl", &fuzzing::scrapes_jsonl);
    total += replay("whole_run", &|d| fuzzing::whole_run(d, &summary));
    eprintln!("replayed {total} regression input(s)");
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
