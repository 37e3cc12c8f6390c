//! The `steady_state` check on the fixtures of fixtures/steady-state: real
//! AIPerf 0.13.0 runs against the vLLM mock engine with a cold stage,
//! batched prefill and decode slowing with load, each held to the engine's
//! ledger (which requests passed the cold stage, when each one ran on the
//! server), never to numbers copied from a report.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use common::*;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    root().join("fixtures/steady-state").join(name)
}

fn report(name: &str, extra: &[&str]) -> Value {
    json_report(&[&fixture(name)], extra).0["runs"][0].clone()
}

/// The engine's ledger of a fixture: its request lines by X-Request-ID.
fn ledger_requests(name: &str) -> HashMap<String, Value> {
    jsonl(&root().join(format!("fixtures/steady-state/{name}.ledger.jsonl")))
        .into_iter()
        .filter(|e| e["event"] == "request")
        .filter_map(|e| Some((e["x_request_id"].as_str()?.to_string(), e)))
        .collect()
}

/// The fixture's records, raw.
fn fixture_records(name: &str) -> Vec<Value> {
    jsonl(&fixture(name).join("profile_export.jsonl"))
}

fn ids(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .expect("ids")
        .iter()
        .map(|x| x.as_str().expect("id").to_string())
        .collect()
}

/// The profiling requests that passed the engine's cold stage.
fn cold_stage_profiling(name: &str) -> BTreeSet<String> {
    let ledger = ledger_requests(name);
    fixture_records(name)
        .iter()
        .filter(|r| is_profiling_ok(r))
        .filter_map(|r| r["metadata"]["x_request_id"].as_str())
        .filter(|id| {
            ledger
                .get(*id)
                .is_some_and(|e| e.get("cold_stage_s").is_some())
        })
        .map(String::from)
        .collect()
}

fn effect(f: &Value, quantity: &str) -> Option<f64> {
    f["effect"]
        .as_array()?
        .iter()
        .find(|e| e["quantity"] == quantity)?["value"]
        .as_f64()
}

#[test]
fn the_opening_wave_is_the_cold_stage_with_warm_and_with_cold_connections() {
    for name in ["wave-warm", "wave-cold", "wave-rate"] {
        let run = report(name, &[]);
        let truth = cold_stage_profiling(name);
        assert!(
            !truth.is_empty(),
            "{name}: the cold stage reached profiling"
        );
        let wave = &run["checks"]["steady_state"]["wave"];
        assert_eq!(
            ids(&wave["request_ids"]),
            truth,
            "{name}: the wave is the cold stage"
        );
        let ramp = findings(&run, "ramp-up-bias");
        assert_eq!(ramp.len(), 1, "{name}");
        assert_eq!(ramp[0]["severity"], "warning");
        // Sized: the p90 and p99 of TTFT over all records against steady.
        for q in [
            "time_to_first_token_p90_bias",
            "time_to_first_token_p99_bias",
        ] {
            assert!(effect(ramp[0], q).is_some_and(|b| b > 5.0), "{name}: {q}");
        }
        // The bias is what the records say: p99 over all vs over the rest.
        let recs: Vec<Value> = fixture_records(name)
            .into_iter()
            .filter(is_profiling_ok)
            .collect();
        let ttft = |keep: &dyn Fn(&Value) -> bool| {
            let v: Vec<f64> = recs
                .iter()
                .filter(|r| keep(r))
                .filter_map(|r| metric(r, "time_to_first_token"))
                .collect();
            percentile(&v, 99.0)
        };
        let all = ttft(&|_| true);
        let tail = ids(&run["checks"]["steady_state"]["tail"]["request_ids"]);
        let steady = ttft(&|r| {
            let id = r["metadata"]["x_request_id"].as_str().unwrap_or("");
            !truth.contains(id) && !tail.contains(id)
        });
        let want = (all - steady) / steady * 100.0;
        let got = effect(ramp[0], "time_to_first_token_p99_bias").expect("p99 bias");
        assert!((got - want).abs() < 1e-6, "{name}: {got} vs {want}");
    }
}

#[test]
fn cold_wave_requests_are_split_into_connection_and_server_time() {
    let run = report("wave-cold", &[]);
    let wave = &run["checks"]["steady_state"]["wave"];
    let n = wave["requests"].as_u64().expect("n");
    assert_eq!(
        wave["paid_connection"].as_u64(),
        Some(n),
        "all opened connections"
    );
    let conn = wave["connection_ms_mean"].as_f64().expect("conn");
    let server = wave["server_ms_mean"].as_f64().expect("server");
    // The ledger's cold stage alone is far more than any connect.
    let ledger = ledger_requests("wave-cold");
    let stage: f64 = ids(&wave["request_ids"])
        .iter()
        .map(|id| ledger[id]["cold_stage_s"].as_f64().expect("stage") * 1e3)
        .sum::<f64>()
        / n as f64;
    assert!(
        conn > 0.0 && conn * 10.0 < server,
        "{conn} ms vs {server} ms"
    );
    assert!(
        server >= stage,
        "server part {server} ms holds the cold stage {stage} ms"
    );
    assert!(findings(&run, "ramp-up-bias")[0]["message"]
        .as_str()
        .expect("message")
        .contains("not the network"));
    // cold_connections does not take the wave's blame: its TTFT finding is
    // info (the connection time alone is within tolerance).
    for f in findings(&run, "cold-connection-bias") {
        assert_eq!(f["severity"], "info", "{}", f["message"]);
    }
}

#[test]
fn a_warmup_that_absorbed_the_wave_leaves_no_ramp() {
    let truth = cold_stage_profiling("wave-absorbed");
    assert!(
        truth.is_empty(),
        "the ledger puts the whole cold stage in warmup"
    );
    let run = report("wave-absorbed", &[]);
    assert!(findings(&run, "ramp-up-bias").is_empty());
    assert!(run["checks"]["steady_state"]["wave"].is_null());
}

#[test]
fn the_drain_tail_is_found_with_its_itl_and_throughput_bias() {
    let name = "drain-tail";
    let run = report(name, &[]);
    let c = &run["checks"]["steady_state"];
    let tail = &c["tail"];
    let drain = findings(&run, "drain-tail-bias");
    assert_eq!(drain.len(), 1);
    assert_eq!(tail["metric"], "inter_token_latency");
    // Faster decode at falling load: the tail's ITL below steady, beyond noise.
    assert!(tail["mean"].as_f64() < tail["steady_mean"].as_f64());
    assert_eq!(tail["larger_than_noise"], true);
    assert!(effect(drain[0], "tail_requests").is_some_and(|n| n >= 1.0));
    // Per-user throughput over all records is above the steady state.
    let row = c["metrics"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["metric"] == "output_token_throughput_per_user" && r["stat"] == "mean")
        .expect("row");
    assert!(row["bias_pct"].as_f64().is_some_and(|b| b > 0.0));
    // The tail, by the engine's clock: each tail request generated mostly
    // after the last profiling request reached the engine, and every other
    // steady request mostly before it (a 10 % margin for the two clocks).
    let ledger = ledger_requests(name);
    let profiling: Vec<Value> = fixture_records(name)
        .into_iter()
        .filter(is_profiling_ok)
        .collect();
    let id = |r: &Value| {
        r["metadata"]["x_request_id"]
            .as_str()
            .expect("id")
            .to_string()
    };
    let last = profiling
        .iter()
        .map(|r| ledger[&id(r)]["t_start_ns"].as_u64().expect("start"))
        .max()
        .expect("requests");
    let share = |e: &Value| {
        let a = e["t_first_token_ns"].as_u64().expect("first");
        let b = e["t_end_ns"].as_u64().expect("end");
        b.saturating_sub(last.max(a)) as f64 / (b - a).max(1) as f64
    };
    let tail_ids = ids(&tail["request_ids"]);
    let wave_ids = c["wave"]["request_ids"]
        .as_array()
        .map(|_| ids(&c["wave"]["request_ids"]))
        .unwrap_or_default();
    for r in &profiling {
        let s = share(&ledger[&id(r)]);
        if tail_ids.contains(&id(r)) {
            assert!(
                s >= 0.4,
                "tail request {} ran {s:.2} after the last start",
                id(r)
            );
        } else if !wave_ids.contains(&id(r)) {
            assert!(
                s <= 0.6,
                "steady request {} ran {s:.2} after the last start",
                id(r)
            );
        }
    }
}

#[test]
fn one_cold_first_request_at_concurrency_1_is_left_to_cold_connections() {
    let run = report("c1-cold-first", &[]);
    assert!(findings(&run, "ramp-up-bias").is_empty());
    assert!(run["checks"]["steady_state"]["wave"].is_null());
    let cold = findings(&run, "cold-connection-bias");
    assert!(cold.iter().any(|f| f["severity"] == "warning"), "{cold:?}");
    // One request opened its connection (the first); the rest reused it.
    let opened: Vec<Value> = fixture_records("c1-cold-first")
        .into_iter()
        .filter(|r| is_profiling_ok(r) && metric(r, "http_req_connection_reused") == Some(0.0))
        .collect();
    assert_eq!(opened.len(), 1);
    assert_eq!(run["checks"]["cold_connections"]["cold"].as_u64(), Some(1));
}

/// No clean control (a `clean` or `no-warmup` run of any version) has an
/// opening wave, and a wave that is found does not name the server as its
/// cause: the client's records cannot tell the server's start from the load
/// generator's (prefix-cache-boundary's first profiling requests waited in
/// AIPerf at the phase start; its ledger shows the server answering them at
/// its steady speed).
#[test]
fn no_clean_control_has_an_opening_wave_and_a_wave_is_not_blamed_on_the_server() {
    let paths = [
        root().join("sample-artifacts"),
        root().join("fixtures/aiperf-versions"),
    ];
    let refs: Vec<&std::path::Path> = paths.iter().map(|p| p.as_path()).collect();
    let (r, _) = json_report(&refs, &[]);
    for run in r["runs"].as_array().expect("runs") {
        let path = run["path"].as_str().expect("path");
        let waves = findings(run, "ramp-up-bias");
        if run["status"] == "pass" || path.ends_with("/clean") || path.ends_with("/no-warmup") {
            assert!(waves.is_empty(), "{path}: {waves:?}");
        }
        for w in waves {
            let text = w["message"].as_str().unwrap_or_default();
            assert!(!text.contains("is the server's"), "{path}: {text}");
        }
    }
}

#[test]
fn clean_steady_state_drops_the_wave_and_the_tail() {
    let t = tempfile::tempdir().expect("tempdir");
    let out = t.path().join("clean");
    let run = fixture("wave-warm");
    let (_, err, code) = cli(&[
        "clean",
        run.to_str().expect("utf8"),
        "--out",
        out.to_str().expect("utf8"),
        "--steady-state",
    ]);
    assert_eq!(code, 0, "{err}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).expect("summary"))
            .expect("json");
    let report = report("wave-warm", &[]);
    let c = &report["checks"]["steady_state"];
    assert_eq!(summary["steady_state"], true);
    assert_eq!(
        summary["dropped_by_reason"]["opening_wave"].as_u64(),
        c["wave"]["requests"].as_u64()
    );
    let steady_p99 = c["metrics"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["metric"] == "time_to_first_token" && r["stat"] == "p99")
        .expect("row")["steady"]
        .as_f64();
    assert_eq!(
        summary["metrics"]["time_to_first_token"]["p99"].as_f64(),
        steady_p99
    );
}

#[test]
fn claims_can_be_held_to_the_steady_state() {
    let report_ = report("wave-warm", &[]);
    let row = |m: &str| {
        report_["checks"]["steady_state"]["metrics"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|r| r["metric"] == m && r["stat"] == "p99")
            .expect("row")["steady"]
            .as_f64()
            .expect("steady")
    };
    let steady = row("time_to_first_token");
    let t = tempfile::tempdir().expect("tempdir");
    let claims = t.path().join("claims.toml");
    std::fs::write(
        &claims,
        format!(
            "[[claim]]\nname = \"ttft_p99_ms\"\nvalue = {steady}\ntolerance-pct = 1\nover = \"steady-state\"\n\n\
             [[claim]]\nname = \"ttft_p99_ms\"\nvalue = {steady}\ntolerance-pct = 1\n"
        ),
    )
    .expect("write");
    let run = report("wave-warm", &["--expect", claims.to_str().expect("utf8")]);
    let claims = run["claims"].as_array().expect("claims");
    assert_eq!(claims[0]["within"], true, "{:?}", claims[0]);
    // Over every record (the wave kept) the steady figure is far off.
    assert_eq!(claims[1]["within"], false, "{:?}", claims[1]);
}
