//! prefix_cache on real AIPerf 0.13.0 output, held to the mock server's
//! per-request ledger of prompt and cached tokens.

mod common;

use std::fs;

use common::*;
use serde_json::Value;

fn pc(run: &Value) -> &Value {
    &run["checks"]["prefix_cache"]
}

/// The server's truth over the profiling requests: (cached, prompt) tokens.
fn ledger_tokens(name: &str, phase: &str) -> (f64, f64) {
    let phases = phase_of(name);
    ledger(name)
        .iter()
        .filter(|e| e["event"] == "request")
        .filter(|e| {
            phases
                .get(e["x_request_id"].as_str().unwrap_or_default())
                .map(String::as_str)
                == Some(phase)
        })
        .fold((0.0, 0.0), |(c, p), e| {
            (
                c + e["cached_tokens"].as_f64().expect("cached"),
                p + e["prompt_tokens"].as_f64().expect("prompt"),
            )
        })
}

fn counter_total(name: &str, metric: &str) -> f64 {
    let export: Value = serde_json::from_str(
        &fs::read_to_string(run_dir(name).join("server_metrics_export.json")).expect("read"),
    )
    .expect("json");
    export["metrics"][metric]["series"]
        .as_array()
        .expect("series")
        .iter()
        .map(|s| s["stats"]["total"].as_f64().expect("total"))
        .sum()
}

/// The client rate is the server ledger's truth, exactly; the server rate is
/// the counters' ratio over the profiling window; the gap is in points.
#[test]
fn client_rate_equals_the_ledger_and_server_rate_is_the_counter_ratio() {
    for name in ["prefix-cache", "prefix-cache-boundary"] {
        let (run, _) = sample(name);
        let (cached, prompt) = ledger_tokens(name, "profiling");
        let c = &pc(&run)["client"];
        assert_eq!(c["cached_tokens"].as_f64(), Some(cached), "{name}");
        assert_eq!(c["prompt_tokens"].as_f64(), Some(prompt), "{name}");
        assert_eq!(c["hit_rate"].as_f64(), Some(cached / prompt), "{name}");
        assert_eq!(c["coverage"].as_f64(), Some(1.0));
        let head = &pc(&run)["server"][0];
        assert_eq!(head["framework"], "vllm");
        let hits = counter_total(name, "vllm:prefix_cache_hits");
        let queries = counter_total(name, "vllm:prefix_cache_queries");
        assert_eq!(head["numerator"].as_f64(), Some(hits));
        assert_eq!(head["denominator"].as_f64(), Some(queries));
        assert_eq!(head["hit_rate"].as_f64(), Some(hits / queries));
        let gap = pc(&run)["gap_pp"].as_f64().expect("gap");
        assert!((gap - (hits / queries - cached / prompt) * 100.0).abs() < 1e-9);
        // A vLLM engine exposes vLLM's cache counters only: one formula.
        assert!(pc(&run)["server"]
            .as_array()
            .expect("s")
            .iter()
            .all(|s| s["framework"] == "vllm"));
        // The warmup request was a cold miss.
        let w = &pc(&run)["client_warmup"];
        assert_eq!(w["hit_rate"].as_f64(), Some(0.0));
    }
}

/// When the warmup request's tokens land in the profiling counters (the
/// seed 001 pattern), the gap is reported in points, the prompt-token totals
/// are compared, and the difference is attributed to that request.
#[test]
fn boundary_crossing_gap_is_explained_by_the_crossing_request() {
    let name = "prefix-cache-boundary";
    let (run, code) = sample(name);
    let gap = pc(&run)["gap_pp"].as_f64().expect("gap");
    assert!(gap < -1.0, "server reads low: {gap}");
    assert_eq!(code, 1);
    let f = findings(&run, "prefix-cache-gap");
    assert_eq!(f.len(), 1);
    let (_, client_prompt) = ledger_tokens(name, "profiling");
    let server_prompt = counter_total(name, "vllm:prompt_tokens");
    let diff = pc(&run)["prompt_token_difference"].as_f64().expect("diff");
    assert_eq!(diff, server_prompt - client_prompt);
    // The difference is the warmup request's prompt tokens, and it is named.
    let (_, warmup_prompt) = ledger_tokens(name, "warmup");
    assert_eq!(diff, warmup_prompt);
    let warmup_id = records(name)
        .iter()
        .find(|r| r["metadata"]["benchmark_phase"] == "warmup")
        .map(|r| {
            r["metadata"]["x_request_id"]
                .as_str()
                .expect("id")
                .to_string()
        })
        .expect("warmup record");
    let explained = pc(&run)["explanations"].as_array().expect("e");
    assert!(
        explained
            .iter()
            .any(|e| e.as_str().unwrap_or_default().contains(&warmup_id)),
        "{explained:?}"
    );
    // Without that request the server agrees with the clients.
    let adjusted = pc(&run)["server_adjusted"]["hit_rate"]
        .as_f64()
        .expect("adjusted");
    let client = pc(&run)["client"]["hit_rate"].as_f64().expect("client");
    assert!((adjusted - client).abs() < 1e-12);
    assert_eq!(findings(&run, "prompt-token-mismatch").len(), 1);
}

/// Streaming run: the uncached prefill throughput is reported next to
/// AIPerf's, and cache-hit requests show the larger overstatement; a miss
/// is not overstated at all (the share is the server's own count, so a
/// client tokenizer that counts differently does not look like caching).
#[test]
fn prefill_throughput_over_uncached_tokens_and_hits_overstate_more() {
    let (run, _) = sample("prefix-cache");
    let groups = pc(&run)["prefill_throughput"].as_array().expect("groups");
    let g = |n: &str| groups.iter().find(|g| g["group"] == n).expect(n);
    let (hit, miss) = (g("hit"), g("miss"));
    assert!(hit["records"].as_u64().expect("n") > 0 && miss["records"].as_u64().expect("n") > 0);
    let (oh, om) = (
        hit["overstatement_pct"].as_f64().expect("oh"),
        miss["overstatement_pct"].as_f64().expect("om"),
    );
    assert!(oh > om, "hit {oh} vs miss {om}");
    assert!(om.abs() < 1e-9, "a cache miss prefilled every token: {om}");
    // Recompute the hit group's uncached mean independently: AIPerf's
    // figure scaled by the uncached share of the server's usage counts.
    let recs = records("prefix-cache");
    let hits: Vec<f64> = recs
        .iter()
        .filter(|r| is_profiling_ok(r))
        .filter(|r| metric(r, "usage_prompt_cache_read_tokens").unwrap_or(0.0) > 0.0)
        .map(|r| {
            let p = metric(r, "usage_prompt_tokens").expect("p");
            let c = metric(r, "usage_prompt_cache_read_tokens").expect("c");
            metric(r, "prefill_throughput_per_user").expect("published") * (p - c) / p
        })
        .collect();
    let mean = hits.iter().sum::<f64>() / hits.len() as f64;
    assert!((hit["uncached_mean"].as_f64().expect("u") - mean).abs() < 1e-6 * mean);
    assert!(!findings(&run, "prefill-throughput-overstated").is_empty());
}

/// A run without cached-token fields: the client rate is unknown, not 0 %.
#[test]
fn no_cached_token_field_means_unknown_not_zero() {
    let (run, _) = sample("cold-tls");
    assert!(pc(&run)["client"]["hit_rate"].is_null());
    assert_eq!(pc(&run)["client"]["coverage"].as_f64(), Some(0.0));
    assert!(pc(&run)["gap_pp"].is_null());
    assert_eq!(pc(&run)["status"], "unknown");
}

/// A run without cache counters: the server rate is unknown and the client
/// rate is still reported.
#[test]
fn no_cache_counters_means_server_unknown_client_still_reported() {
    let (_t, dir) = copy_run("prefix-cache");
    let path = dir.join("server_metrics_export.json");
    let mut export: Value =
        serde_json::from_str(&fs::read_to_string(&path).expect("read")).expect("json");
    for section in ["metrics", "warmup_metrics"] {
        let m = export[section].as_object_mut().expect("section");
        m.retain(|k, _| {
            !k.contains("prefix_cache") && !k.contains("cached_tokens") && !k.contains("sglang")
        });
    }
    fs::write(&path, serde_json::to_string_pretty(&export).expect("ser")).expect("write");
    let (report, _) = json_report(&[&dir], &[]);
    let p = &report["runs"][0]["checks"]["prefix_cache"];
    assert_eq!(p["server"].as_array().expect("server").len(), 0);
    assert!(p["client"]["hit_rate"].as_f64().is_some());
    assert!(p["gap_pp"].is_null());
    let unknown = findings(&report["runs"][0], "cache-rate-unknown");
    assert!(unknown.iter().any(|f| f["message"]
        .as_str()
        .unwrap_or_default()
        .starts_with("server hit rate unknown")));
    assert!(p["reason"]
        .as_str()
        .unwrap_or_default()
        .contains("no server-side cache counters"));
}

/// AIPerf's own overall_usage_prompt_cache_read_pct agrees with the records.
#[test]
fn aiperf_overall_pct_agrees_with_the_records() {
    let (run, _) = sample("prefix-cache");
    let a = pc(&run)["aiperf_overall"].as_f64().expect("aiperf");
    let c = pc(&run)["client"]["hit_rate"].as_f64().expect("client");
    assert!((a - c).abs() < 1e-3, "{a} vs {c}");
    assert!(findings(&run, "client-cache-mismatch").is_empty());
}

/// From the raw scrapes, the headline rate over the requests that really were
/// profiling: exact when no scrape interval mixes the phases (and then the
/// ledger's own rate), bounded otherwise with the ledger's rate inside. On the
/// seed-001 pattern the clients' rate is inside the bounds, so the -3.3 pp gap
/// is the phase split and nothing else.
#[test]
fn raw_scrapes_recompute_the_server_rate_over_the_true_profiling_requests() {
    let (run, _) = sample("prefix-cache");
    let raw = &pc(&run)["server_from_raw_scrapes"];
    let (cached, prompt) = ledger_tokens("prefix-cache", "profiling");
    assert_eq!(raw["exactness"], "exact", "{raw}");
    let rate = raw["hit_rate"].as_f64().expect("rate");
    assert!(
        (rate - cached / prompt).abs() < 1e-12,
        "{rate} vs {}",
        cached / prompt
    );

    let (run, _) = sample("prefix-cache-boundary");
    let raw = &pc(&run)["server_from_raw_scrapes"];
    let (cached, prompt) = ledger_tokens("prefix-cache-boundary", "profiling");
    let truth = cached / prompt;
    assert_eq!(raw["exactness"], "bounded", "{raw}");
    assert!(raw["hit_rate"].is_null());
    let (lo, hi) = (
        raw["hit_rate_low"].as_f64().expect("low"),
        raw["hit_rate_high"].as_f64().expect("high"),
    );
    assert!(
        lo - 1e-12 <= truth && truth <= hi + 1e-12,
        "{truth} outside [{lo}, {hi}]"
    );
    assert!(lo < hi);
    // The published (AIPerf-split) server rate, with the warmup request's
    // uncached prompt tokens counted in profiling, reads below the truth.
    let published = pc(&run)["server"][0]["hit_rate"].as_f64().expect("server");
    assert!(published < truth, "{published} vs {truth}");
    let gap = findings(&run, "prefix-cache-gap");
    let after = gap[0]["effect"]
        .as_array()
        .expect("effects")
        .iter()
        .find(|e| e["quantity"] == "gap_after_raw_scrape_attribution")
        .expect("effect");
    assert_eq!(after["value"], 0.0);
}
