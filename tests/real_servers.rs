//! The verdict on runs against servers that expose the real vLLM, SGLang,
//! TensorRT-LLM and Dynamo metric families (`sample-artifacts/servers/
//! real_server.py`), held to each mock server's ledger: what it observed,
//! for which request (by X-Request-ID), on which endpoint and series, and
//! which faults it injected.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::fs;

use common::*;
use serde_json::Value;

/// The clean controls, one per framework.
const CONTROLS: &[&str] = &["vllm-dp", "sglang-dp-attention", "trtllm", "dynamo-disagg"];

fn export(name: &str) -> Value {
    let text = fs::read_to_string(run_dir(name).join("server_metrics_export.json")).expect("read");
    serde_json::from_str(&text).expect("json")
}

fn requests(name: &str) -> Vec<Value> {
    ledger(name)
        .into_iter()
        .filter(|e| e["event"] == "request")
        .collect()
}

fn events(name: &str, kind: &str) -> Vec<Value> {
    ledger(name)
        .into_iter()
        .filter(|e| e["event"] == kind)
        .collect()
}

/// Ledger truth per (metric, phase): the number of observations (the
/// amount, for counters) the requests of each phase caused, over every
/// endpoint and series.
fn truth(name: &str) -> HashMap<(String, String), (f64, f64)> {
    let phases = phase_of(name);
    let mut out: HashMap<(String, String), (f64, f64)> = HashMap::new();
    for r in requests(name) {
        let Some(phase) = r["x_request_id"].as_str().and_then(|id| phases.get(id)) else {
            continue; // a prewarm request, before AIPerf started
        };
        for o in r["observations"].as_array().expect("observations") {
            let e = out
                .entry((o["metric"].as_str().expect("m").to_string(), phase.clone()))
                .or_default();
            e.0 += 1.0;
            e.1 += o["value"].as_f64().expect("value");
        }
    }
    out
}

/// AIPerf's figure for a family in a phase, over every endpoint and series:
/// a histogram's count, a counter's total.
fn exported(e: &Value, metric: &str, phase: &str) -> Option<f64> {
    let section = if phase == "warmup" {
        "warmup_metrics"
    } else {
        "metrics"
    };
    let fam = &e[section][metric];
    let series = fam["series"].as_array()?;
    let key = if fam["type"] == "histogram" {
        "count"
    } else {
        "total"
    };
    Some(series.iter().filter_map(|s| s["stats"][key].as_f64()).sum())
}

/// Whether AIPerf's split of every metric the ledger observed equals it.
fn splits_exactly(name: &str, except: &[&str]) -> Result<(), String> {
    let e = export(name);
    for ((metric, phase), (n, amount)) in truth(name) {
        if except.contains(&metric.as_str()) {
            continue;
        }
        let Some(found) = exported(&e, &metric, &phase) else {
            continue;
        };
        let want = if e["metrics"][&metric]["type"] == "histogram"
            || e["warmup_metrics"][&metric]["type"] == "histogram"
        {
            n
        } else {
            amount
        };
        if (found - want).abs() > 1e-6 {
            return Err(format!("{metric} {phase}: export {found}, ledger {want}"));
        }
    }
    Ok(())
}

fn rows<'a>(run: &'a Value, metric: &str) -> Vec<&'a Value> {
    run["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|m| m["metric"] == metric)
        .collect()
}

#[test]
fn the_clean_control_of_every_framework_exits_0_with_no_warning() {
    for name in CONTROLS {
        // The precondition, from the ledger: nothing crossed a boundary.
        splits_exactly(name, &[]).unwrap_or_else(|e| panic!("{name} is no control: {e}"));
        let (report, code) = json_report(&[&run_dir(name)], &["--fail-on", "warning"]);
        let run = &report["runs"][0];
        assert_eq!(code, 0, "{name}: {:#}", run["findings"]);
        for f in run["findings"].as_array().expect("findings") {
            assert_eq!(f["severity"], "info", "{name}: {f:#}");
        }
        let pc = &run["checks"]["phase_contamination"];
        assert!(pc["control_metric"].is_string(), "{name}");
        for m in pc["metrics"].as_array().expect("rows") {
            assert_eq!(m["classification"], "ok", "{name}: {m:#}");
        }
    }
}

#[test]
fn every_observer_of_a_control_is_held_to_the_ledger_count() {
    // Each observer (engine partitions summed, TP replicas apart, each
    // disaggregated worker on its own) expects each phase's requests.
    for name in CONTROLS {
        let (run, _) = sample(name);
        let phases = phase_of(name);
        let n = |p: &str| phases.values().filter(|x| x.as_str() == p).count() as u64;
        for m in run["checks"]["phase_contamination"]["metrics"]
            .as_array()
            .expect("rows")
        {
            let phase = m["phase"].as_str().expect("phase");
            assert_eq!(m["expected_count"]["min"], n(phase), "{name}: {m:#}");
            assert_eq!(
                m["found_count"].as_f64(),
                Some(n(phase) as f64),
                "{name}: {m:#}"
            );
        }
    }
}

#[test]
fn sglang_tp_replicas_are_separate_observers_and_dp_ranks_are_summed() {
    let (run, _) = sample("sglang-dp-attention");
    let e = export("sglang-dp-attention");
    let series = e["metrics"]["sglang:queue_time_seconds"]["series"]
        .as_array()
        .expect("series");
    let ranks: std::collections::BTreeSet<&str> = series
        .iter()
        .filter_map(|s| s["labels"]["tp_rank"].as_str())
        .collect();
    let dps: std::collections::BTreeSet<&str> = series
        .iter()
        .filter_map(|s| s["labels"]["dp_rank"].as_str())
        .collect();
    assert_eq!(dps.len(), 2, "DP attention with two groups");
    assert_eq!(ranks.len(), 4, "two TP ranks per group");
    let profiling: Vec<&Value> = rows(&run, "sglang:queue_time_seconds")
        .into_iter()
        .filter(|r| r["phase"] == "profiling")
        .collect();
    assert_eq!(profiling.len(), 2, "one observer per replica slot");
    for r in profiling {
        assert_eq!(r["found_count"].as_f64(), Some(12.0), "{r:#}");
        assert!(r["series"]["replica"].is_string(), "{r:#}");
    }
}

#[test]
fn trtllm_serve_histograms_are_request_scoped() {
    let (run, _) = sample("trtllm");
    let ttft = rows(&run, "trtllm_time_to_first_token_seconds");
    assert_eq!(ttft.len(), 2, "profiling and warmup");
    assert!(ttft.iter().all(|r| r["observed_at"] == "completion"));
}

#[test]
fn out_of_order_scrape_answers_are_not_resets() {
    let name = "vllm-out-of-order";
    let delayed = events(name, "delayed_scrape");
    assert!(!delayed.is_empty(), "the server delayed some answers");
    // The fixture exercises it: in arrival order some counter goes down.
    let mut scrapes = jsonl(&run_dir(name).join("server_metrics_export.jsonl"));
    scrapes.sort_by_key(|s| s["timestamp_ns"].as_u64());
    let total = |s: &Value| -> f64 {
        s["metrics"]["vllm:prompt_tokens"]
            .as_array()
            .map(|x| x.iter().filter_map(|v| v["value"].as_f64()).sum())
            .unwrap_or(0.0)
    };
    assert!(
        scrapes.windows(2).any(|w| total(&w[1]) < total(&w[0])),
        "no drop in arrival order: the fixture does not show an out-of-order answer"
    );
    assert!(events(name, "restart").is_empty());
    splits_exactly(name, &[]).expect("nothing else crossed");
    let (report, code) = json_report(&[&run_dir(name)], &[]);
    let run = &report["runs"][0];
    assert!(
        findings(run, "counter-reset").is_empty(),
        "{:#}",
        run["findings"]
    );
    assert_eq!(code, 0, "{:#}", run["findings"]);
    // Nothing crossed, and the phase check says so.
    for f in run["findings"].as_array().expect("findings") {
        if f["check"] == "phase_contamination" {
            assert_eq!(f["severity"], "info", "{f:#}");
        }
    }
}

#[test]
fn a_real_restart_is_one_error_with_the_reset_aware_lower_bound() {
    let name = "vllm-restart";
    let restarts = events(name, "restart");
    assert_eq!(restarts.len(), 1);
    let after = restarts[0]["after_ordinal"].as_u64().expect("ordinal");
    let (run, code) = sample(name);
    assert_eq!(code, 1);
    let f = findings(&run, "counter-reset");
    assert_eq!(
        f.len(),
        1,
        "one restart, one finding: {:#}",
        run["findings"]
    );
    assert_eq!(f[0]["severity"], "error");
    assert_eq!(f[0]["metric"], "vllm:prompt_tokens");
    // The ledger: the prompt tokens counted after AIPerf's profiling
    // baseline (the last scrape answered before profiling started), all of
    // them and those counted after the restart. The reset-aware bound lies
    // between: above what survived the reset, at most what was counted.
    let ps = export(name)["summary"]["phase_time_ranges"]["profiling"]["start_ns"]
        .as_u64()
        .expect("start");
    let baseline = jsonl(&run_dir(name).join("server_metrics_export.jsonl"))
        .iter()
        .filter_map(|s| s["timestamp_ns"].as_u64())
        .filter(|t| *t < ps)
        .max()
        .expect("a baseline scrape");
    let restart_ns = restarts[0]["t_ns"].as_u64().expect("t");
    let counted = |from: u64| -> f64 {
        requests(name)
            .iter()
            .flat_map(|r| r["observations"].as_array().expect("o").clone())
            .filter(|o| o["metric"] == "vllm:prompt_tokens")
            .filter(|o| o["t_ns"].as_u64().expect("t") > from)
            .map(|o| o["value"].as_f64().expect("v"))
            .sum()
    };
    let (all, after_restart) = (counted(baseline), counted(restart_ns));
    let bound = f[0]["effect"]
        .as_array()
        .expect("effect")
        .iter()
        .find(|e| e["quantity"] == "profiling_growth_lower_bound")
        .and_then(|e| e["value"].as_f64())
        .expect("lower bound");
    assert!(
        bound > after_restart && bound <= all,
        "{after_restart} < {bound} <= {all}"
    );
    let _ = after;
    assert_eq!(
        exported(&export(name), "vllm:prompt_tokens", "profiling"),
        Some(0.0)
    );
    // The reset explains every request-scoped count: no second cause.
    for code in [
        "unexplained-deficit",
        "unexplained-excess",
        "profiling-lost-to-warmup",
    ] {
        assert!(
            findings(&run, code).is_empty(),
            "{code}: {:#}",
            run["findings"]
        );
    }
    let pt = findings(&run, "prompt-token-mismatch");
    assert!(pt
        .iter()
        .all(|f| f["message"].as_str().unwrap_or("").contains("reset")));
}

/// The late observations a fault published, with the request's phase.
fn late(name: &str) -> Vec<(Value, String)> {
    let phases = phase_of(name);
    events(name, "late_observation")
        .into_iter()
        .map(|e| {
            let p = phases[e["x_request_id"].as_str().expect("id")].clone();
            (e, p)
        })
        .collect()
}

#[test]
fn a_late_observation_on_one_dp_engine_names_that_engine() {
    let name = "vllm-dp-late-engine";
    let l = late(name);
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].1, "warmup", "the fault delays a warmup request");
    let ordinal = l[0].0["ordinal"].clone();
    let engine = requests(name)
        .into_iter()
        .find(|r| r["ordinal"] == ordinal)
        .expect("request")["engine"]
        .clone();
    splits_exactly(name, &["vllm:time_to_first_token_seconds"]).expect("only the fault crossed");
    let (run, code) = sample(name);
    assert_eq!(code, 1);
    let f = findings(&run, "late-warmup-observation");
    assert_eq!(f.len(), 1, "{:#}", run["findings"]);
    assert_eq!(f[0]["metric"], "vllm:time_to_first_token_seconds");
    assert_eq!(f[0]["series"]["engine"], engine, "{:#}", f[0]);
    assert_eq!(f[0]["severity"], "error");
    let errors: Vec<&Value> = run["findings"]
        .as_array()
        .expect("f")
        .iter()
        .filter(|f| f["severity"] == "error")
        .collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
}

#[test]
fn a_late_observation_on_the_decode_worker_is_blamed_on_it_alone() {
    let name = "dynamo-late-decode";
    let l = late(name);
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].0["endpoint"], "decode");
    splits_exactly(name, &["vllm:time_to_first_token_seconds"]).expect("only the fault crossed");
    let (run, _) = sample(name);
    let f = findings(&run, "late-warmup-observation");
    assert_eq!(f.len(), 1, "{:#}", run["findings"]);
    let ep = f[0]["endpoint"].as_str().expect("endpoint");
    let ttft = rows(&run, "vllm:time_to_first_token_seconds");
    let roles: BTreeMap<&str, &str> = ttft
        .iter()
        .map(|r| {
            (
                r["endpoint"].as_str().expect("e"),
                r["role"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        roles.len(),
        2,
        "prefill and decode workers each an observer"
    );
    assert_eq!(roles[ep], "decode");
    for r in &ttft {
        let expected = if r["endpoint"] == ep {
            "late_warmup_observation"
        } else {
            "ok"
        };
        assert_eq!(r["classification"], expected, "{r:#}");
    }
    // Each worker expects every request once: no excess from summing them.
    assert!(findings(&run, "unexplained-excess").is_empty());
    // The server's hit rate comes from the prefill worker.
    let head = &run["checks"]["prefix_cache"]["server"][0];
    assert_eq!(head["role"], "prefill", "{head:#}");
}

#[test]
fn a_series_created_mid_profiling_is_found_with_its_lost_first_value() {
    let name = "sglang-lazy-series";
    let phases = phase_of(name);
    // Warmup is cold: the first cache hit, which creates the series, is a
    // profiling request's.
    let mut hits: Vec<Value> = requests(name)
        .into_iter()
        .filter(|r| r["cached_tokens"].as_f64().unwrap_or(0.0) > 0.0)
        .collect();
    hits.sort_by_key(|r| r["t_end_ns"].as_u64());
    let first = &hits[0];
    assert_eq!(
        phases[first["x_request_id"].as_str().expect("id")],
        "profiling"
    );
    let (run, code) = sample(name);
    assert_eq!(code, 1);
    let f: Vec<&Value> = findings(&run, "series-created-mid-phase")
        .into_iter()
        .filter(|f| f["metric"] == "sglang:cached_tokens")
        .collect();
    assert_eq!(f.len(), 1, "{:#}", run["findings"]);
    assert_eq!(f[0]["severity"], "error");
    let lost = f[0]["effect"][0]["value"].as_f64().expect("lost");
    // The export plus what the series' birth cost is the ledger's total.
    let t = truth(name);
    let ledger_cached = t[&("sglang:cached_tokens".to_string(), "profiling".to_string())].1;
    let exp = exported(&export(name), "sglang:cached_tokens", "profiling").expect("exported");
    assert!(
        (exp + lost - ledger_cached).abs() < 1e-6,
        "{exp} + {lost} vs {ledger_cached}"
    );
    assert!(lost >= first["cached_tokens"].as_f64().expect("cached"));
    // The hit-rate gap is explained by it.
    let gap = findings(&run, "prefix-cache-gap");
    assert!(gap.iter().all(|g| g["message"]
        .as_str()
        .unwrap_or("")
        .contains("created series")));
}
