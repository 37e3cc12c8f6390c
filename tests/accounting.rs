//! The phase check's accounting held to the mock server's ledgers: every
//! row's causes sum to its deviation (or name the remainder), and on the
//! accounting fixtures (real AIPerf 0.13.0 runs, `fixtures/accounting/`)
//! every cause is named and sized as the ledger says and the corrected
//! counts hold the truth.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    root().join("fixtures/accounting").join(name)
}

fn lines(path: &Path) -> Vec<Value> {
    jsonl(path)
}

/// A fixture's ledger: the mock server's record of what it saw.
fn fixture_ledger(name: &str) -> Vec<Value> {
    lines(&root().join(format!("fixtures/accounting/{name}.ledger.jsonl")))
}

/// Ground truth from a fixture's ledger: per (metric, endpoint role,
/// phase), the observations the server made for the requests of that phase
/// (role `server` on a single-endpoint deployment). A request with a record
/// takes its record's phase; one without (cut at the end of a duration run)
/// is a profiling request when it arrived after the first profiling record
/// started, and one before every record (a smoke test before AIPerf
/// started) belongs to no phase.
fn truth(name: &str) -> HashMap<(String, String, String), u64> {
    let dir = fixture(name);
    let records = lines(&dir.join("profile_export.jsonl"));
    let mut phase: HashMap<String, String> = HashMap::new();
    let (mut first_start, mut profiling_start) = (u64::MAX, u64::MAX);
    for r in &records {
        let m = &r["metadata"];
        let p = m["benchmark_phase"]
            .as_str()
            .unwrap_or("profiling")
            .to_string();
        let start = m["request_start_ns"].as_u64().unwrap_or(u64::MAX);
        first_start = first_start.min(start);
        if p == "profiling" {
            profiling_start = profiling_start.min(start);
        }
        phase.insert(m["x_request_id"].as_str().unwrap_or("").to_string(), p);
    }
    let mut out = HashMap::new();
    for e in fixture_ledger(name) {
        // A late observation is its own ledger line (and marked `late` in
        // its request's line if that was written after it).
        let Some(observations) = ledger_observations(&e) else {
            continue;
        };
        let id = e["x_request_id"].as_str().unwrap_or("");
        let start = e["t_start_ns"].as_u64().unwrap_or(u64::MAX);
        let p = match phase.get(id) {
            Some(p) => p.clone(),
            // The ledger's clock starts the request after the client did.
            None if start + 50_000_000 < first_start => continue,
            None if start >= profiling_start => "profiling".to_string(),
            None => "warmup".to_string(),
        };
        for o in &observations {
            let role = o["endpoint"].as_str().unwrap_or("server").to_string();
            let key = (
                o["metric"].as_str().unwrap_or("").to_string(),
                role,
                p.clone(),
            );
            *out.entry(key).or_default() += 1;
        }
    }
    out
}

/// A row's key in [`truth`].
fn key(row: &Value) -> (String, String, String) {
    (
        row["metric"].as_str().unwrap_or("").to_string(),
        row["role"].as_str().unwrap_or("server").to_string(),
        row["phase"].as_str().unwrap_or("").to_string(),
    )
}

fn rows(run: &Value) -> &Vec<Value> {
    run["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("metrics")
}

fn causes(row: &Value) -> Vec<(String, i64)> {
    row["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| {
            (
                c["cause"].as_str().unwrap().to_string(),
                c["count"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Every compared row of every sample and fixture run: the causes' counts
/// sum to the row's deviation; what no cause holds is named unexplained.
#[test]
fn on_every_run_the_causes_sum_to_each_rows_deviation() {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for base in ["sample-artifacts/runs", "fixtures"] {
        collect_runs(&root().join(base), &mut dirs);
    }
    assert!(dirs.len() > 40, "{} runs", dirs.len());
    let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let (report, _) = json_report(&refs, &[]);
    let mut checked = 0;
    for run in report["runs"].as_array().expect("runs") {
        let Some(metrics) = run["checks"]["phase_contamination"]["metrics"].as_array() else {
            continue;
        };
        for row in metrics {
            let Some(delta) = row["delta"].as_f64() else {
                continue;
            };
            let sum: i64 = causes(row).iter().map(|c| c.1).sum();
            assert_eq!(sum, delta.round() as i64, "{}: {row}", run["path"]);
            for c in row["causes"].as_array().unwrap() {
                let (n, lo) = (c["count"].as_i64().unwrap(), c["low"].as_i64().unwrap());
                assert!(lo <= n, "{c}");
                if let Some(hi) = c["high"].as_i64() {
                    assert!(n <= hi, "{c}");
                }
            }
            let class = row["classification"].as_str().unwrap();
            match causes(row).iter().filter(|c| c.1 != 0).count() {
                0 => assert_eq!(class, "ok", "{row}"),
                1 => assert_eq!(class, causes(row)[0].0, "{row}"),
                _ => assert_eq!(class, "mixed", "{row}"),
            }
            checked += 1;
        }
    }
    assert!(checked > 500, "{checked} rows");
}

fn collect_runs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.join("profile_export.jsonl").exists() && p.join("server_metrics_export.json").exists()
        {
            out.push(p);
        } else if p.is_dir() {
            collect_runs(&p, out);
        }
    }
}

/// Holds every row of a fixture to its ledger: no unexplained cause, and
/// the corrected count (or its bounds) holds the observations the server
/// made for the phase's requests; `expect_clean`: the profiling numbers
/// being right about what the server saw, the run has no error.
fn holds_to_the_ledger(name: &str, expect_clean: bool) -> Value {
    let truth = truth(name);
    let (report, code) = json_report(&[&fixture(name)], &["--fail-on", "error"]);
    let run = report["runs"][0].clone();
    if expect_clean {
        assert_eq!(code, 0, "{name}: {:#}", run["findings"]);
    }
    let mut held = 0;
    for row in rows(&run) {
        let (metric, _, phase) = key(row);
        for (cause, n) in causes(row) {
            assert!(
                !cause.starts_with("unexplained"),
                "{name} {metric} {phase}: {cause} {n}"
            );
        }
        let Some(t) = truth.get(&key(row)).copied() else {
            continue;
        };
        held += 1;
        let c = &row["corrected"];
        if c.is_null() {
            // Nothing moved it: the export is the truth.
            assert_eq!(
                row["found_count"].as_f64(),
                Some(t as f64),
                "{name} {metric} {phase}: {row}"
            );
            continue;
        }
        let lo = c["count_low"].as_u64().or(c["count"].as_u64()).unwrap();
        let hi = c["count_high"]
            .as_u64()
            .or(c["count"].as_u64())
            .unwrap_or(u64::MAX);
        assert!(
            lo <= t && t <= hi,
            "{name} {metric} {phase}: truth {t} outside {c}"
        );
    }
    assert!(held > 10, "{name}: {held} rows held to the ledger");
    run
}

fn row<'a>(run: &'a Value, metric: &str, phase: &str) -> &'a Value {
    rows(run)
        .iter()
        .find(|r| r["metric"] == metric && r["phase"] == phase)
        .expect("row")
}

/// `--request-cancellation-rate` on vLLM: a request cancelled in decode
/// had its TTFT observed; one cancelled in prefill did not, and neither
/// made finished-request statistics. The profiling TTFT row's excess is
/// exactly the decode-cancelled ones, `failed_request`, info.
#[test]
fn cancellations_are_counted_as_vllm_counts_them() {
    let run = holds_to_the_ledger("cancel-vllm", true);
    let ledger = fixture_ledger("cancel-vllm");
    let aborted = |stage: &str| {
        ledger
            .iter()
            .filter(|e| e["event"] == "request" && e["aborted"] == stage)
            .count() as i64
    };
    assert!(
        aborted("decode") > 0 && aborted("prefill") > 0,
        "both stages exercised"
    );
    let ttft = row(&run, "vllm:time_to_first_token_seconds", "profiling");
    assert_eq!(
        causes(ttft),
        vec![("failed_request".to_string(), aborted("decode"))]
    );
    // Completion-time families: vLLM makes no statistics for an abort.
    let e2e = row(&run, "vllm:e2e_request_latency_seconds", "profiling");
    assert_eq!(e2e["classification"], "ok", "{e2e}");
    let f = findings(&run, "failed-request-observed");
    assert!(!f.is_empty() && f.iter().all(|f| f["severity"] == "info"));
}

/// `--benchmark-duration`: the requests in flight when the grace period
/// ended are in no record; the log counts them, the server observed their
/// TTFT in profiling. The row names them `request_without_record` (and the
/// boundary race's counted-in-both in warmup), corrected to the ledger.
#[test]
fn requests_cut_at_the_grace_period_are_accounted_for() {
    let run = holds_to_the_ledger("duration-grace", true);
    let records = lines(&fixture("duration-grace").join("profile_export.jsonl"));
    let recorded: std::collections::HashSet<&str> = records
        .iter()
        .filter_map(|r| r["metadata"]["x_request_id"].as_str())
        .collect();
    let ledger = fixture_ledger("duration-grace");
    let cut = ledger
        .iter()
        .filter(|e| e["event"] == "request")
        .filter(|e| !recorded.contains(e["x_request_id"].as_str().unwrap_or("")))
        .filter(|e| {
            e["observations"].as_array().is_some_and(|o| {
                o.iter()
                    .any(|o| o["metric"] == "vllm:time_to_first_token_seconds")
            })
        })
        .count() as i64;
    assert!(cut > 0, "the run cut requests at the grace period");
    let ttft = row(&run, "vllm:time_to_first_token_seconds", "profiling");
    assert_eq!(
        causes(ttft),
        vec![("request_without_record".to_string(), cut)],
        "{ttft}"
    );
    assert!(findings(&run, "unexplained-excess").is_empty());
    // Without the log the count is only bounded by the concurrency: the
    // accounting still closes, nothing unexplained.
    let (_t, dir) = copy_fixture("duration-grace");
    std::fs::remove_dir_all(dir.join("logs")).expect("rm logs");
    let (report, _) = json_report(&[&dir], &[]);
    let ttft = row(
        &report["runs"][0],
        "vllm:time_to_first_token_seconds",
        "profiling",
    );
    assert!(
        causes(ttft).iter().all(|c| !c.0.starts_with("unexplained")),
        "{ttft}"
    );
}

/// The server's profiling prompt tokens beyond the successful records' are
/// exactly those the ledger shows it counted for requests without success,
/// and the prompt-token finding says so as info.
#[test]
fn prompt_tokens_of_unsuccessful_requests_explain_the_counter() {
    for name in ["cancel-vllm", "duration-grace"] {
        let dir = fixture(name);
        let records = lines(&dir.join("profile_export.jsonl"));
        let ok: std::collections::HashSet<&str> = records
            .iter()
            .filter(|r| r["error"].is_null())
            .filter_map(|r| r["metadata"]["x_request_id"].as_str())
            .collect();
        let warmup: std::collections::HashSet<&str> = records
            .iter()
            .filter(|r| r["metadata"]["benchmark_phase"] == "warmup")
            .filter_map(|r| r["metadata"]["x_request_id"].as_str())
            .collect();
        let ledger = fixture_ledger(name);
        let counted: f64 = ledger
            .iter()
            .filter(|e| e["event"] == "request")
            .filter(|e| {
                let id = e["x_request_id"].as_str().unwrap_or("");
                !ok.contains(id) && !warmup.contains(id)
            })
            .flat_map(|e| e["observations"].as_array().cloned().unwrap_or_default())
            .filter(|o| o["metric"] == "vllm:prompt_tokens")
            .map(|o| o["value"].as_f64().unwrap_or(0.0))
            .sum();
        assert!(counted > 0.0, "{name}: the server counted some");
        let (report, _) = json_report(&[&dir], &[]);
        let f = findings(&report["runs"][0], "prompt-token-mismatch");
        assert_eq!(f.len(), 1, "{name}");
        assert_eq!(f[0]["severity"], "info", "{name}: {}", f[0]["message"]);
        let diff = f[0]["effect"]
            .as_array()
            .and_then(|e| e.iter().find(|e| e["quantity"] == "difference"))
            .and_then(|e| e["value"].as_f64());
        assert_eq!(diff, Some(counted), "{name}");
    }
}

/// A disaggregated deployment whose end-of-warmup scrapes race the first
/// profiling requests: each endpoint's rows hold its own observations (the
/// prefill worker completes its requests at the first token, so its
/// completion-time families race the scrape too), nothing unexplained, no
/// error.
#[test]
fn a_disaggregated_run_is_held_to_each_workers_instants() {
    let run = holds_to_the_ledger("dynamo-race", true);
    let roles: std::collections::BTreeSet<&str> = rows(&run)
        .iter()
        .filter_map(|r| r["role"].as_str())
        .collect();
    assert_eq!(
        roles.into_iter().collect::<Vec<_>>(),
        ["decode", "frontend", "prefill"]
    );
    for r in rows(&run).iter().filter(|r| r["role"] == "prefill") {
        if r["metric"] == "vllm:e2e_request_latency_seconds" {
            assert_eq!(r["observed_at"], "first_token", "{r}");
        }
    }
}

/// Two causes on one metric: the last warmup request's TTFT published 1 s
/// late on engine 1, while the first profiling first tokens came before
/// the end-of-warmup scrape. Summed over the engines profiling is off by
/// the difference; the accounting names both, each sized as the ledger
/// says, and names no engine (their nets cancel on one).
#[test]
fn a_late_observation_and_the_boundary_race_are_both_named() {
    let run = holds_to_the_ledger("vllm-dp-late-race", false);
    let metric = "vllm:time_to_first_token_seconds";
    let ledger = fixture_ledger("vllm-dp-late-race");
    let late = ledger
        .iter()
        .filter(|e| e["event"] == "late_observation" && e["metric"] == metric)
        .count() as i64;
    assert_eq!(late, 1);
    let truth = truth("vllm-dp-late-race");
    let p = row(&run, metric, "profiling");
    let t = truth[&key(p)] as i64;
    let found = p["found_count"].as_f64().unwrap() as i64;
    // profiling = truth + late - lost.
    let lost = t - found + late;
    assert!(lost > 0, "the race showed");
    let mut got = causes(p);
    got.sort();
    let mut want = vec![
        ("late_warmup_observation".to_string(), late),
        ("profiling_lost_to_warmup".to_string(), -lost),
    ];
    want.sort();
    assert_eq!(got, want, "{p}");
    let named: Vec<&Value> = findings(&run, "late-warmup-observation");
    assert_eq!(named.len(), 1);
    assert!(
        named[0]["series"].is_null()
            || named[0]["series"].as_object().is_some_and(|s| s.is_empty()),
        "{}",
        named[0]
    );
    assert_eq!(named[0]["severity"], "error");
}

/// Scrapes answered out of order across the boundary: AIPerf's profiling
/// baseline is a scrape the server answered 400 ms late, holding an older
/// state than the scrapes stored before it, so profiling counts the warmup
/// observations made after that state: `out_of_order_baseline`, sized as
/// the ledger says, beside the boundary race's counted-in-both in warmup.
#[test]
fn an_out_of_order_baseline_is_named_and_sized() {
    let run = holds_to_the_ledger("vllm-out-of-order-boundary", false);
    let ledger = fixture_ledger("vllm-out-of-order-boundary");
    assert!(ledger.iter().any(|e| e["event"] == "delayed_scrape"));
    let truth = truth("vllm-out-of-order-boundary");
    for metric in [
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
    ] {
        let p = row(&run, metric, "profiling");
        let excess = p["found_count"].as_f64().unwrap() as i64 - truth[&key(p)] as i64;
        assert!(excess > 0, "{p}");
        assert_eq!(
            causes(p),
            vec![("out_of_order_baseline".to_string(), excess)],
            "{p}"
        );
    }
    assert!(!findings(&run, "out-of-order-baseline").is_empty());
    assert!(findings(&run, "warmup-absorbed").is_empty());
}

/// A restart during profiling on a 2-engine vLLM: every request-scoped row
/// of profiling names the reset (with the boundary race beside it where it
/// showed), corrected to the profiling requests the server observed.
#[test]
fn a_restart_is_accounted_for_per_metric() {
    let run = holds_to_the_ledger("vllm-dp-restart", false);
    assert_eq!(findings(&run, "counter-reset").len(), 1);
    let ledger = fixture_ledger("vllm-dp-restart");
    assert!(ledger.iter().any(|e| e["event"] == "restart"));
    for r in rows(&run).iter().filter(|r| r["phase"] == "profiling") {
        assert!(causes(r).iter().any(|c| c.0 == "reset" && c.1 < 0), "{r}");
        assert!(
            r["corrected"]["sum_high"].is_null(),
            "lost values are unbounded: {r}"
        );
    }
}

/// A late warmup observation on a disaggregated deployment's prefill
/// worker: named on that worker's row only, sized as the ledger's late
/// observations, every other row of every endpoint held to the ledger.
#[test]
fn a_late_observation_on_a_prefill_worker_is_named_there() {
    let run = holds_to_the_ledger("dynamo-late-prefill", false);
    let metric = "vllm:request_prefill_time_seconds";
    let ledger = fixture_ledger("dynamo-late-prefill");
    let late = ledger
        .iter()
        .filter(|e| e["event"] == "late_observation" && e["metric"] == metric)
        .count() as i64;
    assert_eq!(late, 1);
    let moved: Vec<&Value> = rows(&run)
        .iter()
        .filter(|r| r["classification"] != "ok")
        .collect();
    assert!(!moved.is_empty());
    for r in moved {
        assert_eq!(r["role"], "prefill", "{r}");
        assert_eq!(r["metric"], metric, "{r}");
        assert!(causes(r).contains(&(
            "late_warmup_observation".to_string(),
            if r["phase"] == "profiling" {
                late
            } else {
                -late
            }
        )));
    }
}

fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().expect("tempdir");
    let dst = t.path().join(name);
    copy_dir(&fixture(name), &dst);
    (t, dst)
}

/// Counts no server makes (±1e308 on every series of the export) go
/// through the accounting without overflow or panic: the run is audited
/// (exit 1, its findings), not abandoned (exit 2).
#[test]
fn impossible_counts_do_not_break_the_accounting() {
    for count in [1e308, -1e308] {
        let (_t, dir) = copy_run("late-warmup");
        let p = dir.join("server_metrics_export.json");
        let mut export: Value =
            serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
        for fam in export["metrics"]
            .as_object_mut()
            .expect("metrics")
            .values_mut()
        {
            for s in fam["series"].as_array_mut().into_iter().flatten() {
                if s["stats"]["count"].is_number() {
                    s["stats"]["count"] = serde_json::json!(count);
                }
            }
        }
        std::fs::write(&p, export.to_string()).expect("write");
        let (out, err, code) = cli(&[dir.to_str().expect("utf8"), "--format", "json"]);
        assert_eq!(code, 1, "{count}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        let report: Value = serde_json::from_str(&out).expect("json report");
        assert!(!rows(&report["runs"][0]).is_empty());
    }
}
