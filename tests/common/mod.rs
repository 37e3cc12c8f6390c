//! Helpers shared by the integration tests: run the binary, read the sample
//! runs and their ground-truth ledgers independently of the crate's readers.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// The committed sample runs.
pub const RUNS: &[&str] = &[
    "boundary-race",
    "clean",
    "cold-tls",
    "dynamo-disagg",
    "dynamo-late-decode",
    "late-warmup",
    "prefix-cache",
    "prefix-cache-boundary",
    "sglang-dp-attention",
    "sglang-lazy-series",
    "trtllm",
    "vllm-dp",
    "vllm-dp-late-engine",
    "vllm-out-of-order",
    "vllm-restart",
];

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn run_dir(name: &str) -> PathBuf {
    root().join("sample-artifacts/runs").join(name)
}

/// Runs the binary from the repository root (relative paths are the
/// repository's; no test changes the process's directory, which parallel
/// tests share); returns (stdout, stderr, exit code).
pub fn cli(args: &[&str]) -> (String, String, i32) {
    let out = Command::cargo_bin("artifact-check")
        .expect("binary builds")
        .current_dir(root())
        .args(args)
        .env_remove("NO_COLOR")
        .output()
        .expect("binary runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Runs the binary with `--format json` on `paths`; returns (report, exit code).
pub fn json_report(paths: &[&Path], extra: &[&str]) -> (Value, i32) {
    let mut args: Vec<String> = vec!["--format".into(), "json".into()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (stdout, stderr, code) = cli(&refs);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}); stderr: {stderr}; stdout: {stdout}"));
    (report, code)
}

/// The report of one sample run.
pub fn sample(name: &str) -> (Value, i32) {
    let (r, code) = json_report(&[&run_dir(name)], &[]);
    (r["runs"][0].clone(), code)
}

pub fn jsonl(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .expect("readable")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect()
}

/// Writes records as JSON lines (each line ends in a newline).
pub fn write_jsonl(path: &Path, records: &[Value]) {
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    fs::write(path, text).expect("write");
}

/// Raw records of a sample run (independent of the crate's reader).
pub fn records(name: &str) -> Vec<Value> {
    jsonl(&run_dir(name).join("profile_export.jsonl"))
}

/// The server's ground-truth ledger of a sample run.
pub fn ledger(name: &str) -> Vec<Value> {
    jsonl(
        &root()
            .join("sample-artifacts/ledgers")
            .join(format!("{name}.jsonl")),
    )
}

/// x_request_id -> benchmark_phase, from the records.
pub fn phase_of(name: &str) -> HashMap<String, String> {
    records(name)
        .iter()
        .map(|r| {
            (
                r["metadata"]["x_request_id"]
                    .as_str()
                    .expect("id")
                    .to_string(),
                r["metadata"]["benchmark_phase"]
                    .as_str()
                    .expect("phase")
                    .to_string(),
            )
        })
        .collect()
}

pub fn metric(r: &Value, tag: &str) -> Option<f64> {
    r["metrics"][tag]["value"].as_f64()
}

pub fn is_profiling_ok(r: &Value) -> bool {
    r["metadata"]["benchmark_phase"] == "profiling"
        && r.get("error").is_none()
        && r["metadata"]["was_cancelled"] != true
}

/// Copies a sample run into a temporary directory (to mutate it).
pub fn copy_run(name: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().expect("tempdir");
    let dst = t.path().join(name);
    copy_dir(&run_dir(name), &dst);
    (t, dst)
}

pub fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).expect("mkdir");
    for e in fs::read_dir(src).expect("list") {
        let e = e.expect("entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            fs::copy(e.path(), &to).expect("copy");
        }
    }
}

/// Findings of a run report with a given code.
pub fn findings<'a>(run: &'a Value, code: &str) -> Vec<&'a Value> {
    run["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] == code)
        .collect()
}

/// numpy linear percentile, written out again for the tests.
pub fn percentile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = q / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

/// A Python interpreter that can import every one of `modules` (PyPI
/// packages a test needs: `duckdb`, `jsonschema`): the one in
/// `ARTIFACT_CHECK_TEST_PYTHON` (`.ci/run` sets it), else `python3`; or why
/// there is none, for the test's "skipped" message.
/// A test's external tool is missing: in CI (`CI` or
/// `ARTIFACT_CHECK_REQUIRE_TOOLS` set and not `0`/`false`; `.ci/run` sets
/// it, and CI installs every tool) that is a failure, elsewhere the test
/// says it skips what needs the tool.
pub fn missing_tool(why: &str) {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    if set("CI") || set("ARTIFACT_CHECK_REQUIRE_TOOLS") {
        panic!("in CI a missing test tool fails the test instead of skipping it: {why}");
    }
    eprintln!("skipped (not in CI): {why}");
}

pub fn test_python(modules: &[&str]) -> Result<String, String> {
    let python = std::env::var("ARTIFACT_CHECK_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let import = format!("import {}", modules.join(", "));
    match std::process::Command::new(&python)
        .args(["-c", &import])
        .output()
    {
        Ok(o) if o.status.success() => Ok(python),
        Ok(_) => Err(format!(
            "{python} cannot `{import}` (pip install {})",
            modules.join(" ")
        )),
        Err(e) => Err(format!("{python}: {e}")),
    }
}

/// Runs `python -c script args...` in `dir` with `input` on its standard
/// input; its standard output, or a panic naming `what` with its stderr.
pub fn run_python(
    python: &str,
    script: &str,
    args: &[&std::ffi::OsStr],
    dir: &Path,
    input: &[u8],
    what: &str,
) -> Vec<u8> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("input written");
    let out = child.wait_with_output().expect("python finishes");
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The observations a mock server's ledger event records: a request's own
/// (those published late are their own `late_observation` line), or the
/// late one; `None` for any other event.
pub fn ledger_observations(e: &Value) -> Option<Vec<Value>> {
    match e["event"].as_str() {
        Some("request") => Some(
            e["observations"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|o| o["late"] != true)
                .cloned()
                .collect(),
        ),
        Some("late_observation") => Some(vec![e.clone()]),
        _ => None,
    }
}
