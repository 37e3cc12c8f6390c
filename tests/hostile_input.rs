//! Hostile input made from real sample files: a record cut at every byte,
//! non-JSON numbers, out-of-range values, a 100 MB single line. The readers
//! return findings, never panic, and keep memory bounded.

mod common;

use std::fs;

use artifact_check::artifacts::records::{self, MAX_LINE_BYTES};
use artifact_check::findings::reading;
use common::*;

fn first_record_line() -> String {
    fs::read_to_string(run_dir("cold-tls").join("profile_export.jsonl"))
        .expect("read")
        .lines()
        .nth(3)
        .expect("a record")
        .to_string()
}

/// A real record cut at every byte: as the last line it is a truncation (or,
/// cut at a point that is still valid JSON, a record); followed by a good
/// line it is an invalid record, and the good line is still read.
#[test]
fn a_record_cut_at_every_byte_is_a_finding_never_a_panic() {
    let line = first_record_line();
    for cut in 1..line.len() {
        let partial = &line[..cut];
        let alone = records::read_from(&mut partial.as_bytes()).expect("in memory");
        assert_eq!(
            alone.records.len() + alone.findings.len(),
            1,
            "cut at {cut}"
        );
        if let Some(f) = alone.findings.first() {
            assert_eq!(f.line, Some(1));
            assert!(
                [reading::TRUNCATED_RECORD, reading::INVALID_RECORD].contains(&f.code),
                "{cut}: {:?}",
                f.code
            );
        }
        let text = format!("{partial}\n{line}\n");
        let with_next = records::read_from(&mut text.as_bytes()).expect("in memory");
        assert!(
            with_next.records.iter().any(|r| r.line == 2),
            "cut at {cut}: the next line is read"
        );
    }
}

/// NaN, Infinity and numbers beyond f64 and u64.
#[test]
fn non_json_numbers_and_out_of_range_values_are_findings() {
    let line = first_record_line();
    let value = |s: &str| {
        line.replacen(
            "\"time_to_first_token\":{\"value\":",
            &format!("\"time_to_first_token\":{{\"value\":{s},\"x\":"),
            1,
        )
    };
    for bad in ["NaN", "Infinity", "-Infinity", "1e999"] {
        let text = format!("{}\n", value(bad));
        let r = records::read_from(&mut text.as_bytes()).expect("in memory");
        assert_eq!(r.records.len() + r.findings.len(), 1, "{bad}");
    }
    let ts = line.replacen(
        "\"request_start_ns\":",
        "\"request_start_ns\":99999999999999999999999,\"x\":",
        1,
    );
    let r = records::read_from(&mut format!("{ts}\n").as_bytes()).expect("in memory");
    assert_eq!(r.findings.len(), 1);
    assert_eq!(
        r.findings[0].field.as_deref(),
        Some("metadata.request_start_ns")
    );
    let neg = line.replacen("\"request_start_ns\":", "\"request_start_ns\":-5,\"x\":", 1);
    let r = records::read_from(&mut format!("{neg}\n").as_bytes()).expect("in memory");
    assert_eq!(r.findings.len(), 1);
}

/// A 100 MB single line between good lines: skipped with a finding naming
/// it, without buffering it whole; the lines around it are read.
#[test]
fn a_100_mb_line_is_skipped_and_named() {
    let line = first_record_line();
    let mut data = Vec::with_capacity(100 << 20);
    data.extend_from_slice(line.as_bytes());
    data.push(b'\n');
    data.extend_from_slice(b"{\"metadata\":\"");
    data.resize(data.len() + (100 << 20), b'x');
    data.extend_from_slice(b"\"}\n");
    data.extend_from_slice(line.as_bytes());
    data.push(b'\n');
    data.extend_from_slice(b"not json\n");
    assert!(data.len() > MAX_LINE_BYTES);
    let parallel = records::read_from(&mut &data[..]).expect("in memory");
    // Also on a rayon worker, where a run is read on the calling thread.
    let sequential = rayon::scope(|_| records::read_from(&mut &data[..])).expect("in memory");
    // A file, its blocks read by position (`records::read_file`), off and on
    // a worker.
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join(records::FILE);
    std::fs::write(&path, &data).expect("written");
    let file = records::read(&path).expect("reads");
    let file_on_worker = rayon::scope(|_| records::read(&path)).expect("reads");
    for r in [parallel, sequential, file, file_on_worker] {
        assert_eq!(r.lines, 4);
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.records[1].line, 3);
        assert_eq!(r.findings.len(), 2);
        assert_eq!(r.findings[0].code, reading::OVERSIZED_LINE);
        assert_eq!(r.findings[0].line, Some(2));
        assert!(r.findings[0].message.starts_with("line 2 "));
        // Lines after the skipped one keep their numbers.
        assert_eq!(r.findings[1].code, reading::INVALID_RECORD);
        assert_eq!(r.findings[1].line, Some(4));
        assert!(r.findings[1].message.starts_with("line 4: "));
    }
}

/// Out-of-order records (AIPerf writes in completion order) and records
/// with the end before the start are read; the latter are named.
#[test]
fn out_of_order_and_backwards_timestamps() {
    let (_t, dir) = copy_run("clean");
    let path = dir.join("profile_export.jsonl");
    let mut recs = jsonl(&path);
    recs.reverse();
    let start = recs[0]["metadata"]["request_start_ns"]
        .as_u64()
        .expect("start");
    recs[0]["metadata"]["request_end_ns"] = serde_json::json!(start - 1);
    write_jsonl(&path, &recs);
    let (report, code) = json_report(&[&dir], &[]);
    let run = &report["runs"][0];
    assert_ne!(code, 2);
    assert_eq!(run["checks"]["artifacts"]["records_parsed"], 20);
    assert_eq!(findings(run, "invalid-timestamps").len(), 1);
}

const ARTIFACTS: &[&str] = &[
    "profile_export.jsonl",
    "server_metrics_export.json",
    "server_metrics_export.jsonl",
    "profile_export_aiperf.json",
    "phase_manifest.json",
];

/// Every sample artifact truncated in the middle, in one run: nothing panics
/// and each file is named.
#[test]
fn every_artifact_truncated_at_once() {
    let (_t, dir) = copy_run("prefix-cache");
    for name in ARTIFACTS {
        let p = dir.join(name);
        let bytes = fs::read(&p).expect("read");
        fs::write(&p, &bytes[..bytes.len() / 3]).expect("write");
    }
    let (report, _) = json_report(&[&dir], &[]);
    let files: Vec<&str> = report["runs"][0]["findings"]
        .as_array()
        .expect("f")
        .iter()
        .filter_map(|f| f["file"].as_str())
        .collect();
    for name in ARTIFACTS {
        assert!(files.contains(name), "{name} not named: {files:?}");
    }
}
