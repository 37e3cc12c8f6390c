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

/// The files of the clean sample run that `scrape_numbers` takes, as in
/// its fuzz target: (name, contents) pairs.
fn clean_run_files() -> Vec<(&'static str, Vec<u8>)> {
    let clean = run_dir("clean");
    [
        "profile_export.jsonl",
        "profile_export_aiperf.json",
        "server_metrics_export.json",
        "server_metrics_export.jsonl",
        "phase_manifest.json",
    ]
    .into_iter()
    .map(|n| (n, fs::read(clean.join(n)).expect("sample file")))
    .collect()
}

/// The files of the sample run late-warmup that the settings targets
/// (config, claims, baseline) audit, as in their fuzz targets.
fn late_warmup_files() -> Vec<(&'static str, Vec<u8>)> {
    let dir = run_dir("late-warmup");
    [
        "profile_export.jsonl",
        "profile_export_aiperf.json",
        "server_metrics_export.json",
        "server_metrics_export.jsonl",
        "phase_manifest.json",
        "inputs.json",
    ]
    .into_iter()
    .map(|n| (n, fs::read(dir.join(n)).expect("sample file")))
    .collect()
}

#[test]
fn fuzz_regressions_replay_without_a_broken_invariant() {
    let summary = summary_bytes();
    let owned = clean_run_files();
    let files: Vec<(&str, &[u8])> = owned.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let owned_late = late_warmup_files();
    let late: Vec<(&str, &[u8])> = owned_late.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let targets: [Target; 10] = [
        ("records_jsonl", &fuzzing::records_jsonl),
        ("record_fast_path", &fuzzing::record_fast_path),
        ("server_metrics_json", &fuzzing::server_metrics_json),
        ("summary_json", &fuzzing::summary_json),
        ("scrapes_jsonl", &fuzzing::scrapes_jsonl),
        ("whole_run", &|d| fuzzing::whole_run(d, &summary)),
        ("scrape_numbers", &|d| fuzzing::scrape_numbers(d, &files)),
        ("config_toml", &|d| fuzzing::config_toml(d, &late)),
        ("claims_toml", &|d| fuzzing::claims_toml(d, &late)),
        ("baseline_json", &|d| fuzzing::baseline_json(d, &late)),
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

/// The numbers target with inputs that set many numbers of a real scrapes
/// file to each kind of extreme value (2^64 - k, 1e300-like floats, ...).
#[test]
fn extreme_scrape_numbers_keep_every_invariant() {
    let owned = clean_run_files();
    let files: Vec<(&str, &[u8])> = owned.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for kind in 0..4u8 {
        let mut input = Vec::new();
        for _ in 0..60 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let b = state.to_le_bytes();
            input.extend_from_slice(&[b[0], b[1], kind, 0xff, 0xff, b[2], b[3], 0xff, 0x7f]);
        }
        fuzzing::scrape_numbers(&input, &files);
    }
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

/// The settings targets on what users write: a configuration with every
/// kind of key, `artifact-check config`'s own output, claims of every kind,
/// and sample runs' JSON reports as baselines.
#[test]
fn settings_entry_points_accept_real_settings() {
    let owned = late_warmup_files();
    let files: Vec<(&str, &[u8])> = owned.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let config = r#"
fail-on = "warning"
ignore = ["cold-connection-bias"]
[[scoped-ignore]]
code = "phase-contamination"
metric = "vllm:*"
run = "late-*"
reason = "known"
[phase-contamination]
request-scoped-metrics = { "x:y" = "arrival" }
"#;
    fuzzing::config_toml(config.as_bytes(), &files);
    let (defaults, _, code) = cli(&["config"]);
    assert_eq!(code, 0, "{defaults}");
    fuzzing::config_toml(defaults.as_bytes(), &files);
    let claims = r#"
[[claim]]
name = "ttft_p99_ms"
value = 152.0
tolerance-pct = 5.0
[[claim]]
name = "prefix_cache_hit_rate"
value = 0.5
tolerance = 0.05
over = "steady-state"
[[claim]]
name = "request_throughput"
value = 10
tolerance-pct = 10
"#;
    fuzzing::claims_toml(claims.as_bytes(), &files);
    for run in ["clean", "late-warmup", "prefix-cache", "vllm-restart"] {
        let (report, _, _) = cli(&[
            run_dir(run).to_str().expect("utf-8 path"),
            "--format",
            "json",
        ]);
        assert!(report.starts_with('{'), "{report}");
        fuzzing::baseline_json(report.as_bytes(), &files);
    }
}
