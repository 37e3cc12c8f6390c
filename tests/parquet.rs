//! `server_metrics_export.parquet`, AIPerf's parquet raw scrapes
//! (fixtures/parquet: a real AIPerf 0.13.0 run that wrote them as JSONL and
//! as parquet, with seed 000's late warmup observation, and the engine's
//! ledger). The run is read with its JSONL removed: with the `parquet`
//! feature the parquet scrapes are read (deltas from the profiling baseline,
//! a synthetic zero scrape at the window's start): the same profiling excess
//! as the JSONL, no series looks born mid-run and nothing looks reset;
//! without the feature a finding says they were not read.

mod common;

use std::fs;

use common::*;
use serde_json::Value;

/// The fixture, copied, with its JSONL raw scrapes removed.
fn parquet_only() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().expect("tempdir");
    let dst = t.path().join("late-warmup");
    copy_dir(&root().join("fixtures/parquet/late-warmup"), &dst);
    fs::remove_file(dst.join("server_metrics_export.jsonl")).expect("remove jsonl");
    (t, dst)
}

fn report(dir: &std::path::Path) -> Value {
    json_report(&[dir], &[]).0["runs"][0].clone()
}

#[cfg(feature = "parquet")]
fn delta(f: &Value) -> Option<f64> {
    f["effect"]
        .as_array()?
        .iter()
        .find(|e| e["quantity"] == "profiling_delta")?["value"]
        .as_f64()
}

#[test]
fn the_ledger_has_the_late_warmup_observation() {
    let ledger = jsonl(&root().join("fixtures/parquet/late-warmup.ledger.jsonl"));
    let late: Vec<&Value> = ledger
        .iter()
        .filter(|e| e["event"] == "late_observation")
        .collect();
    assert_eq!(late.len(), 1);
    assert_eq!(late[0]["metric"], "vllm:request_prefill_time_seconds");
    let id = late[0]["x_request_id"].as_str().expect("id");
    let recs = jsonl(&root().join("fixtures/parquet/late-warmup/profile_export.jsonl"));
    let phase = recs
        .iter()
        .find(|r| r["metadata"]["x_request_id"] == id)
        .expect("its record")["metadata"]["benchmark_phase"]
        .clone();
    assert_eq!(phase, "warmup");
}

/// With the JSONL raw scrapes the cause is the ledger's: request 4's
/// prefill observation was published 1.5 s after profiling started. The
/// end-of-warmup scrape, answered 420 ms into profiling, counted a
/// profiling observation in its place, so warmup looks exact and no mirror
/// deficit shows; AIPerf's profiling baseline (the scrape before the first
/// profiling one) had already counted the other warmup observations, so
/// this is no absorbed warmup. The accounting names both causes: the late
/// warmup observation in profiling, and in warmup the profiling one counted
/// in its place.
#[test]
fn the_jsonl_run_names_the_late_observation() {
    let run = report(&root().join("fixtures/parquet/late-warmup"));
    let prefill: Vec<(&str, &str)> = run["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| {
            f["metrics"].as_array().is_some_and(|m| {
                m.iter()
                    .any(|m| m["metric"] == "vllm:request_prefill_time_seconds")
            })
        })
        .map(|f| {
            (
                f["code"].as_str().unwrap_or(""),
                f["severity"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let mut prefill = prefill;
    // Two causes, two findings (in no particular order): each lists the
    // prefill metric among what it moves.
    prefill.sort();
    assert_eq!(
        prefill,
        vec![
            ("counted-in-both", "warning"),
            ("late-warmup-observation", "error"),
        ]
    );
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_raw_scrapes_give_the_jsonl_finding() {
    let (_t, dir) = parquet_only();
    let run = report(&dir);
    let codes: Vec<&str> = run["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().expect("code"))
        .collect();
    for never in [
        "parquet-scrapes-not-read",
        "unreadable-file",
        "series-created-mid-phase",
        "counter-reset",
    ] {
        assert!(!codes.contains(&never), "{never}: {codes:?}");
    }
    // The same profiling excess on the same metric as with the JSONL, and
    // the same profiling-side figures. Its cause can differ: the JSONL holds
    // the scrapes before profiling (where the late observation was due), the
    // parquet does not, so it cannot be placed there.
    let both = report(&root().join("fixtures/parquet/late-warmup"));
    let excess = |r: &Value| -> Vec<(String, Option<f64>)> {
        r["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["severity"] == "error")
            .filter(|f| {
                f["metrics"].as_array().is_some_and(|m| {
                    m.iter()
                        .any(|m| m["metric"] == "vllm:request_prefill_time_seconds")
                })
            })
            .map(|f| (f["severity"].as_str().unwrap_or("").to_string(), delta(f)))
            .collect()
    };
    assert_eq!(excess(&run), vec![("error".to_string(), Some(1.0))]);
    assert_eq!(excess(&run), excess(&both));
}

/// Scrape ticks on the run's HTML timeline: the scrapes that were read.
#[cfg(feature = "parquet")]
fn scrape_ticks(dir: &std::path::Path) -> usize {
    let page = dir.with_extension("html");
    let (_, err, code) = cli(&[
        "--format",
        "html",
        "--output",
        page.to_str().expect("utf8"),
        dir.to_str().expect("utf8"),
    ]);
    assert!(code <= 1, "{err}");
    fs::read_to_string(&page)
        .expect("page")
        .matches("class=\"scrape\"")
        .count()
}

#[cfg(feature = "parquet")]
#[test]
fn the_parquet_scrapes_are_read() {
    let (_t, dir) = parquet_only();
    let with_parquet = scrape_ticks(&dir);
    fs::remove_file(dir.join("server_metrics_export.parquet")).expect("remove parquet");
    let without = scrape_ticks(&dir);
    assert_eq!(without, 0, "no raw scrapes left");
    // AIPerf's profiling-window scrapes, from the parquet, plus the
    // synthetic baseline at the window's start.
    assert!(with_parquet >= 4, "{with_parquet} scrape ticks");
}

/// Compiled in every build and run by `.ci/run` with and without the
/// feature: a build without it names the parquet scrapes it cannot read, a
/// build with it does not.
#[test]
fn the_parquet_scrapes_are_named_unread_only_without_the_feature() {
    let (_t, dir) = parquet_only();
    let run = report(&dir);
    let f = findings(&run, "parquet-scrapes-not-read");
    if cfg!(feature = "parquet") {
        assert!(f.is_empty(), "{f:?}");
        return;
    }
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["severity"], "info");
    assert_eq!(f[0]["file"], "server_metrics_export.parquet");
}

/// The fixture's parquet with one byte changed: (offset, new byte, what
/// the unreadable-file finding says). Each was found by
/// `tests/fuzz/parquet_flips.py` and made the check end with no report
/// before the parquet reader was guarded: exit 101 on a panic in one of
/// polars' worker threads, in polars' footer decoder, and on a row read
/// past a column that decoded short; exit 134 (SIGABRT) on a page header
/// whose value count turned negative, which polars takes as a size of
/// about 2^61 bytes and aborts on failing to allocate it.
#[cfg(feature = "parquet")]
const DAMAGE: [(usize, u8, &str); 4] = [
    (2463, 0x45, "the parquet reader failed (assertion failed"),
    (8444, 0x70, "the parquet reader failed (thrift bool field)"),
    (5664, 0xf3, SHORT_COLUMN),
    (62, 0xf7, "the parquet reader stopped (signal: 6 (SIGABRT)"),
];

/// What a column that decoded short says: polars' debug assertion on the
/// frame's heights in a debug build (`cargo test`), the reader's own check
/// in a release build, where that assertion is compiled out.
#[cfg(feature = "parquet")]
const SHORT_COLUMN: &str = if cfg!(debug_assertions) {
    "the parquet reader failed (assertion `left == right` failed\n  left: 3757\n right: 4284)"
} else {
    "column count has 3757 rows where the file has 4284"
};

/// A damaged parquet file is an unreadable file, never a panic nor an
/// abort: the check exits 1 with nothing on stderr (polars' messages are
/// not printed), names the file and what went wrong, and still checks the
/// records. Run from inside the run with core files allowed: the child
/// process that aborts leaves no core file there (where this machine's
/// `core_pattern`, `core`, would put one).
#[cfg(feature = "parquet")]
#[test]
fn a_damaged_parquet_file_is_a_finding_never_a_panic() {
    let (_t, dir) = parquet_only();
    let path = dir.join("server_metrics_export.parquet");
    let good = fs::read(&path).expect("parquet");
    let undamaged = report(&dir);
    let ttft = |run: &Value| {
        (run["published"].as_array()?.iter())
            .find(|p| p["metric"] == "time_to_first_token" && p["stat"] == "avg")?["value"]
            .as_f64()
    };
    let files = || {
        let mut names: Vec<_> = (fs::read_dir(&dir).expect("dir"))
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        names
    };
    let before = files();
    for (at, byte, says) in DAMAGE {
        let mut bad = good.clone();
        bad[at] = byte;
        fs::write(&path, &bad).expect("write");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -S -c \"$(ulimit -H -c)\" && exec \"$0\" --format json .")
            .arg(env!("CARGO_BIN_EXE_artifact-check"))
            .current_dir(&dir)
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            (out.status.code(), err.as_ref()),
            (Some(1), ""),
            "byte {at}"
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("json");
        let run = &report["runs"][0];
        let unreadable = findings(run, "unreadable-file");
        assert_eq!(unreadable.len(), 1, "byte {at}: {unreadable:?}");
        assert_eq!(unreadable[0]["file"], "server_metrics_export.parquet");
        let message = unreadable[0]["message"].as_str().expect("message");
        assert!(message.contains(says), "byte {at}: {message}");
        // The records were still checked: the client's TTFT is published
        // as from the undamaged file.
        assert_eq!(ttft(run), ttft(&undamaged), "byte {at}");
        assert!(ttft(run).is_some_and(|v| v.is_finite()));
        assert_eq!(files(), before, "byte {at}: a file was written in the run");
    }
}
