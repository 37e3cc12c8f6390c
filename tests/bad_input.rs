//! Bad input, made from real sample files: every case becomes a finding or
//! error naming the file (and line and field where there is one), the rest of
//! the run is still read, and nothing panics.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::Value;

const JSONL: &str = "profile_export.jsonl";

fn audit(dir: &Path) -> (Value, i32) {
    let (report, code) = json_report(&[dir], &[]);
    (report["runs"][0].clone(), code)
}

fn parsed(run: &Value) -> u64 {
    run["checks"]["artifacts"]["records_parsed"]
        .as_u64()
        .expect("records_parsed")
}

/// A run killed mid-write: the last line is cut off.
#[test]
fn truncated_last_line_is_named_and_the_rest_is_read() {
    let (_t, dir) = copy_run("clean");
    let text = fs::read_to_string(dir.join(JSONL)).expect("read");
    let n = text.lines().count();
    let cut = text.trim_end().len() - 40;
    fs::write(dir.join(JSONL), &text[..cut]).expect("write");
    let (run, _) = audit(&dir);
    let f = findings(&run, "truncated-record");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["file"], JSONL);
    assert_eq!(f[0]["line"], n);
    assert_eq!(parsed(&run), n as u64 - 1);
    let rows = run["checks"]["phase_contamination"]["metrics"].as_array();
    assert!(
        rows.is_some_and(|r| !r.is_empty()),
        "the rest of the run is still checked"
    );
}

/// A line that is not JSON, in the middle of the file.
#[test]
fn a_line_that_is_not_json_is_an_error_with_its_line() {
    let (_t, dir) = copy_run("clean");
    let text = fs::read_to_string(dir.join(JSONL)).expect("read");
    let mut lines: Vec<&str> = text.lines().collect();
    lines[4] = "this is not json";
    fs::write(dir.join(JSONL), lines.join("\n") + "\n").expect("write");
    let (run, code) = audit(&dir);
    let f = findings(&run, "invalid-record");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["line"], 5);
    assert_eq!(f[0]["severity"], "error");
    assert_eq!(code, 1);
    assert_eq!(parsed(&run), lines.len() as u64 - 1);
}

/// A field of the wrong type, for each field the checks read.
#[test]
fn wrong_types_name_the_field() {
    let cases: &[(&[&str], Value, &str)] = &[
        (
            &["metadata", "request_start_ns"],
            Value::from("soon"),
            "metadata.request_start_ns",
        ),
        (
            &["metadata", "benchmark_phase"],
            Value::from(3),
            "metadata.benchmark_phase",
        ),
        (
            &["metadata", "was_cancelled"],
            Value::from("no"),
            "metadata.was_cancelled",
        ),
        (
            &["metadata", "turn_index"],
            Value::from(-1),
            "metadata.turn_index",
        ),
        (
            &["metrics", "time_to_first_token", "value"],
            Value::from("fast"),
            "metrics.time_to_first_token.value",
        ),
        (
            &["metrics", "http_req_connection_reused", "value"],
            Value::Bool(true),
            "metrics.http_req_connection_reused.value",
        ),
    ];
    for (path, bad, field) in cases {
        let (_t, dir) = copy_run("clean");
        let mut recs = jsonl(&dir.join(JSONL));
        let mut v = &mut recs[2];
        for key in &path[..path.len() - 1] {
            v = &mut v[*key];
        }
        v[path[path.len() - 1]] = bad.clone();
        write_jsonl(&dir.join(JSONL), &recs);
        let (run, _) = audit(&dir);
        let f = findings(&run, "invalid-record");
        assert_eq!(f.len(), 1, "{field}");
        assert_eq!(f[0]["line"], 3, "{field}");
        assert_eq!(f[0]["field"], *field);
        assert_eq!(parsed(&run), recs.len() as u64 - 1);
    }
}

/// NaN-like nulls and huge numbers do not crash; null is "absent".
#[test]
fn nulls_and_huge_numbers_are_read_without_panicking() {
    let (_t, dir) = copy_run("cold-tls");
    let mut recs = jsonl(&dir.join(JSONL));
    recs[3]["metrics"]["time_to_first_token"]["value"] = Value::Null;
    recs[4]["metrics"]["request_latency"]["value"] = serde_json::json!(1e308);
    recs[5]["metadata"]["request_end_ns"] = serde_json::json!(1u64);
    write_jsonl(&dir.join(JSONL), &recs);
    let (run, _) = audit(&dir);
    assert_eq!(parsed(&run), recs.len() as u64);
    assert_eq!(findings(&run, "invalid-timestamps").len(), 1);
}

/// Invalid UTF-8 inside a line.
#[test]
fn invalid_utf8_is_a_named_bad_line() {
    let (_t, dir) = copy_run("clean");
    let mut bytes = fs::read(dir.join(JSONL)).expect("read");
    let pos = bytes
        .iter()
        .position(|&b| b == b'x')
        .expect("an x in x_request_id");
    bytes[pos] = 0xff;
    fs::write(dir.join(JSONL), bytes).expect("write");
    let (run, _) = audit(&dir);
    let f = findings(&run, "invalid-record");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["line"], 1);
}

/// A missing records file: the checks that need it say they cannot tell.
#[test]
fn missing_records_file_is_named_and_checks_cannot_tell() {
    let (_t, dir) = copy_run("clean");
    fs::remove_file(dir.join(JSONL)).expect("rm");
    let (run, code) = audit(&dir);
    let f = findings(&run, "missing-artifact");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["file"], JSONL);
    assert_eq!(run["checks"]["cold_connections"]["status"], "unknown");
    // Expected counts fall back to the configuration; the split is still checked.
    let rows = run["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("rows");
    assert!(rows
        .iter()
        .any(|r| r["expected_count"]["source"] == "configuration"));
    assert_ne!(code, 2);
}

/// Empty files.
#[test]
fn empty_files_are_findings() {
    let (_t, dir) = copy_run("clean");
    fs::write(dir.join(JSONL), "").expect("write");
    fs::write(dir.join("server_metrics_export.json"), "").expect("write");
    let (run, _) = audit(&dir);
    let f = findings(&run, "empty-file");
    assert_eq!(f.len(), 2);
    assert_eq!(run["checks"]["phase_contamination"]["status"], "unknown");
}

/// An unknown schema version is a warning and the file is still read.
#[test]
fn unknown_schema_version_is_a_warning() {
    let (_t, dir) = copy_run("clean");
    let p = dir.join("server_metrics_export.json");
    let text = fs::read_to_string(&p).expect("read").replacen(
        "\"schema_version\": \"1.1\"",
        "\"schema_version\": \"9.0\"",
        1,
    );
    fs::write(&p, text).expect("write");
    let (run, _) = audit(&dir);
    let f = findings(&run, "unknown-schema-version");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["field"], "schema_version");
    assert!(!run["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("rows")
        .is_empty());
}

/// A summary that is not JSON: named with its line; the records still count.
#[test]
fn broken_summary_json_names_file_and_line() {
    let (_t, dir) = copy_run("clean");
    let p = dir.join("profile_export_aiperf.json");
    let text = fs::read_to_string(&p).expect("read");
    fs::write(&p, &text[..text.len() / 2]).expect("write");
    let (run, _) = audit(&dir);
    let f = findings(&run, "invalid-json");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["file"], "profile_export_aiperf.json");
    assert!(f[0]["line"].as_u64().is_some());
    assert_eq!(parsed(&run), 20);
}

/// A directory where a file should be: an `unreadable-file` error finding,
/// the run fails (exit 1: its other artifacts were read; exit 2 is for a run
/// none of whose artifacts could be read), and the good run beside it is
/// still reported.
#[test]
fn a_directory_in_place_of_a_file_is_an_error_and_other_runs_are_checked() {
    let (_t, dir) = copy_run("clean");
    fs::remove_file(dir.join(JSONL)).expect("rm");
    fs::create_dir(dir.join(JSONL)).expect("mkdir");
    let good = run_dir("prefix-cache");
    let (report, code) = json_report(&[&dir, &good], &[]);
    assert_eq!(code, 1);
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    let broken = runs
        .iter()
        .find(|r| {
            r["path"]
                .as_str()
                .unwrap_or_default()
                .starts_with(dir.to_str().expect("utf8"))
        })
        .expect("broken run");
    assert_eq!(broken["status"], "fail");
    assert_eq!(findings(broken, "unreadable-file")[0]["file"], JSONL);
    let ok = runs
        .iter()
        .find(|r| {
            r["path"]
                .as_str()
                .unwrap_or_default()
                .ends_with("prefix-cache")
        })
        .expect("good run");
    assert_ne!(ok["status"], "error");
}

/// Duplicate request ids are reported with both lines.
#[test]
fn duplicate_request_ids_name_both_lines() {
    let (_t, dir) = copy_run("clean");
    let mut recs = jsonl(&dir.join(JSONL));
    recs[7]["metadata"]["x_request_id"] = recs[2]["metadata"]["x_request_id"].clone();
    write_jsonl(&dir.join(JSONL), &recs);
    let (run, _) = audit(&dir);
    let f = findings(&run, "duplicate-request-id");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["line"], 8);
    assert!(f[0]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("line 3"));
}

/// Configured requests that were not realised are reported expected vs found.
#[test]
fn unrealised_configured_requests_are_reported() {
    let (_t, dir) = copy_run("clean");
    let recs = jsonl(&dir.join(JSONL));
    write_jsonl(&dir.join(JSONL), &recs[..recs.len() - 3]);
    let (run, _) = audit(&dir);
    let f = findings(&run, "request-count-mismatch");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["expected"], 16);
    assert_eq!(f[0]["found"], 13);
}

/// Unreadable permissions. Root reads anyway, so as root (CI) the binary
/// runs as `nobody` through `setpriv`; the run's other files stay readable.
#[cfg(unix)]
#[test]
fn unreadable_permissions_are_an_error_naming_the_file() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let (t, dir) = copy_run("clean");
    let open_up = |p: &Path, mode| fs::set_permissions(p, fs::Permissions::from_mode(mode));
    open_up(t.path(), 0o755).expect("chmod");
    for e in fs::read_dir(&dir).expect("list") {
        let p = e.expect("entry").path();
        open_up(&p, if p.is_dir() { 0o755 } else { 0o644 }).expect("chmod");
    }
    open_up(&dir, 0o755).expect("chmod");
    let p = dir.join(JSONL);
    open_up(&p, 0o000).expect("chmod");
    let bin = assert_cmd::cargo::cargo_bin("artifact-check");
    let as_root = fs::metadata(&p).expect("stat").uid() == 0;
    let mut cmd = if as_root {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        std::process::Command::new(&bin)
    };
    let out = cmd
        .args(["--format", "json"])
        .arg(&dir)
        .output()
        .expect("runs");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let run = &report["runs"][0];
    // Its other artifacts were read: a failing run, not one that could not
    // be read at all.
    assert_eq!(out.status.code(), Some(1));
    let f = findings(run, "unreadable-file");
    assert_eq!(f.len(), 1, "{run}");
    assert_eq!(f[0]["file"], JSONL);
    assert!(f[0]["message"]
        .as_str()
        .unwrap_or("")
        .contains("ermission denied"));
    // The rest of the run was still read.
    assert!(run["checks"]["artifacts"]["files_read"]
        .as_array()
        .expect("files_read")
        .iter()
        .any(|f| f == "profile_export_aiperf.json"));
}

/// A symlink out of the run directory is followed but reported.
#[cfg(unix)]
#[test]
fn symlink_out_of_the_run_is_reported() {
    let (t, dir) = copy_run("clean");
    let outside = t.path().join("elsewhere.jsonl");
    fs::rename(dir.join(JSONL), &outside).expect("move");
    std::os::unix::fs::symlink(&outside, dir.join(JSONL)).expect("symlink");
    let (run, _) = audit(&dir);
    let f = findings(&run, "symlink-outside-run");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["file"], JSONL);
    assert_eq!(parsed(&run), 20);
}

/// An export without `warmup_metrics` (AIPerf omits it when it took no
/// warmup scrape): the warmup split is unknown, never a deficit of zero.
#[test]
fn missing_warmup_metrics_is_unknown_not_zero() {
    let (_t, dir) = copy_run("clean");
    let p = dir.join("server_metrics_export.json");
    let mut export: Value =
        serde_json::from_str(&fs::read_to_string(&p).expect("read")).expect("json");
    export
        .as_object_mut()
        .expect("object")
        .remove("warmup_metrics");
    fs::write(&p, serde_json::to_string(&export).expect("ser")).expect("write");
    let (run, _) = audit(&dir);
    let rows = run["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("rows");
    // Every warmup row is there, says it cannot tell, and counts nothing:
    // a missing phase is unknown, not zero.
    let warmup: Vec<&Value> = rows.iter().filter(|r| r["phase"] == "warmup").collect();
    assert!(!warmup.is_empty(), "no warmup rows: {rows:?}");
    assert_eq!(
        warmup.len(),
        rows.iter().filter(|r| r["phase"] == "profiling").count(),
        "a warmup row per profiling row"
    );
    for r in warmup {
        assert!(r["found_count"].is_null(), "{r}");
        assert_eq!(r["classification"], "unknown", "{r}");
    }
    for code in [
        "unexplained-deficit",
        "late-warmup-observation",
        "profiling-lost-to-warmup",
    ] {
        assert!(findings(&run, code).is_empty(), "{code}");
    }
}
