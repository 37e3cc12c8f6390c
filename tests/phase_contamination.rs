//! phase_contamination on real AIPerf 0.13.0 output, held to the mock
//! server's ground-truth ledger.

mod common;

use std::collections::HashMap;
use std::fs;

use common::*;
use serde_json::{json, Value};

fn rows<'a>(run: &'a Value, metric: &str) -> Vec<&'a Value> {
    run["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .filter(|m| m["metric"] == metric)
        .collect()
}

fn row<'a>(run: &'a Value, metric: &str, phase: &str) -> &'a Value {
    rows(run, metric)
        .into_iter()
        .find(|m| m["phase"] == phase)
        .expect("row")
}

/// Ground truth: per (metric, phase), the count and sum of the observations
/// the server published for the requests of that phase.
fn ledger_truth(name: &str) -> HashMap<(String, String), (u64, f64)> {
    ledger_values(name)
        .into_iter()
        .map(|(k, v)| (k, (v.len() as u64, v.iter().sum())))
        .collect()
}

/// Ground truth: per (metric, phase), the values of the observations the
/// server published for the requests of that phase.
fn ledger_values(name: &str) -> HashMap<(String, String), Vec<f64>> {
    let phases = phase_of(name);
    let mut truth: HashMap<(String, String), Vec<f64>> = HashMap::new();
    for e in ledger(name) {
        let obs: Vec<(String, f64, String)> = match e["event"].as_str() {
            Some("request") => {
                let id = e["x_request_id"].as_str().unwrap_or_default();
                e["observations"]
                    .as_array()
                    .expect("observations")
                    .iter()
                    .map(|o| {
                        (
                            o["metric"].as_str().expect("metric").to_string(),
                            o["value"].as_f64().expect("value"),
                            id.to_string(),
                        )
                    })
                    .collect()
            }
            Some("late_observation") => vec![(
                e["metric"].as_str().expect("metric").to_string(),
                e["value"].as_f64().expect("value"),
                e["x_request_id"].as_str().expect("id").to_string(),
            )],
            _ => continue,
        };
        for (metric, value, id) in obs {
            let phase = phases.get(&id).cloned().unwrap_or_else(|| "unknown".into());
            truth.entry((metric, phase)).or_default().push(value);
        }
    }
    truth
}

/// Cumulative buckets of `values` over the bounds `les` (`value <= le`, as
/// the server counts), `+Inf` last.
fn bucketed(values: &[f64], les: &[f64]) -> Vec<(f64, f64)> {
    les.iter()
        .map(|le| (*le, values.iter().filter(|v| **v <= *le).count() as f64))
        .collect()
}

/// Prometheus' histogram_quantile, written out here independently of the
/// crate's: the rank's bucket, linear inside it from its lower bound (0 for
/// the first), the highest finite bound for a rank in +Inf.
fn prom_quantile(q: f64, b: &[(f64, f64)]) -> f64 {
    let total = b.last().expect("+Inf").1;
    let rank = q * total;
    let i = b.iter().position(|x| x.1 >= rank).expect("bucket");
    if i == b.len() - 1 {
        return b[i - 1].0;
    }
    let (lo, below) = if i == 0 { (0.0, 0.0) } else { b[i - 1] };
    lo + (b[i].0 - lo) * (rank - below) / (b[i].1 - below)
}

/// The bucket bounds a metric is exported with, ascending, `+Inf` last.
fn export_les(run: &str, metric: &str) -> Vec<f64> {
    let export: Value = serde_json::from_str(
        &fs::read_to_string(run_dir(run).join("server_metrics_export.json")).expect("export"),
    )
    .expect("json");
    let mut les: Vec<f64> = export["metrics"][metric]["series"][0]["buckets"]
        .as_object()
        .expect("buckets")
        .keys()
        .map(|k| {
            if k == "+Inf" {
                f64::INFINITY
            } else {
                k.parse().expect("le")
            }
        })
        .collect();
    les.sort_by(f64::total_cmp);
    les
}

fn stats_of(p: &Value) -> [f64; 3] {
    ["p50", "p90", "p99"].map(|k| p[k].as_f64().expect(k))
}

/// The seed reproducer: 6/0 prefill observations for 5/1 requests are a late
/// warmup observation, sized, with TTFT as the control.
#[test]
fn late_warmup_observation_is_found_sized_and_controlled() {
    let (run, code) = sample("late-warmup");
    assert_eq!(code, 1, "an error finding fails the run");
    let f = findings(&run, "late-warmup-observation");
    assert_eq!(f.len(), 1);
    let f = f[0];
    assert_eq!(f["severity"], "error");
    assert_eq!(f["metric"], "vllm:request_prefill_time_seconds");
    assert!(f["message"]
        .as_str()
        .unwrap_or_default()
        .starts_with("1 warmup observation(s)"));
    assert_eq!(f["expected"], json!({"profiling": 5, "warmup": 1}));
    assert_eq!(f["found"], json!({"profiling": 6.0, "warmup": 0.0}));
    let effect = |q: &str| {
        f["effect"]
            .as_array()
            .expect("effect")
            .iter()
            .find(|e| e["quantity"] == q)
            .expect(q)["value"]
            .as_f64()
            .expect("number")
    };
    assert_eq!(effect("profiling_delta"), 1.0);
    assert_eq!(effect("warmup_delta"), -1.0);
    assert_eq!(effect("profiling_count_inflation"), 20.0);
    assert_eq!(
        run["checks"]["phase_contamination"]["control_metric"],
        "vllm:time_to_first_token_seconds"
    );
    let p = row(&run, "vllm:request_prefill_time_seconds", "profiling");
    assert_eq!(p["classification"], "late_warmup_observation");
    assert_eq!(
        row(&run, "vllm:time_to_first_token_seconds", "profiling")["classification"],
        "ok"
    );

    // Ground truth: the ledger's late observation belongs to the warmup
    // request and was published after the warmup window closed.
    let late: Vec<Value> = ledger("late-warmup")
        .into_iter()
        .filter(|e| e["event"] == "late_observation")
        .collect();
    assert_eq!(late.len(), 1);
    let id = late[0]["x_request_id"].as_str().expect("id");
    assert_eq!(phase_of("late-warmup")[id], "warmup");
    let export: Value = serde_json::from_str(
        &fs::read_to_string(run_dir("late-warmup").join("server_metrics_export.json"))
            .expect("read"),
    )
    .expect("json");
    let warmup_end = export["summary"]["phase_time_ranges"]["warmup"]["end_ns"]
        .as_u64()
        .expect("end");
    assert!(late[0]["t_ns"].as_u64().expect("t") > warmup_end);
}

/// With the raw scrapes, the split is repaired to the true 5 / 1, and the
/// repaired sums hold the ledger's truth within their bounds.
#[test]
fn raw_scrapes_repair_the_reproducer_to_five_and_one() {
    let (run, _) = sample("late-warmup");
    assert_eq!(
        run["checks"]["phase_contamination"]["repaired_from_raw_scrapes"],
        true
    );
    let truth = ledger_truth("late-warmup");
    for phase in ["profiling", "warmup"] {
        let c = &row(&run, "vllm:request_prefill_time_seconds", phase)["corrected"];
        let (n, sum) = truth[&(
            "vllm:request_prefill_time_seconds".to_string(),
            phase.to_string(),
        )];
        assert_eq!(c["count"], n, "{phase}");
        let (lo, hi) = (
            c["sum_low"].as_f64().expect("low"),
            c["sum_high"].as_f64().expect("high"),
        );
        assert!(
            lo - 1e-9 <= sum && sum <= hi + 1e-9,
            "{phase}: {sum} outside [{lo}, {hi}]"
        );
        assert!(c["exactness"] == "exact" || c["exactness"] == "bounded");
    }
    assert_eq!(
        row(&run, "vllm:request_prefill_time_seconds", "profiling")["corrected"]["count"],
        5
    );
    assert_eq!(
        row(&run, "vllm:request_prefill_time_seconds", "warmup")["corrected"]["count"],
        1
    );
}

/// Without server_metrics_export.jsonl the finding stands and nothing is
/// repaired from scrapes; the accounting still corrects the count to the
/// profiling requests the server observed (the ledger's), the sum only
/// bounded.
#[test]
fn without_raw_scrapes_the_finding_stands_unrepaired() {
    let (_t, dir) = copy_run("late-warmup");
    fs::remove_file(dir.join("server_metrics_export.jsonl")).expect("rm");
    let (report, code) = json_report(&[&dir], &[]);
    let run = &report["runs"][0];
    assert_eq!(code, 1);
    assert_eq!(findings(run, "late-warmup-observation").len(), 1);
    assert_eq!(
        run["checks"]["phase_contamination"]["repaired_from_raw_scrapes"],
        false
    );
    let corrected = &row(run, "vllm:request_prefill_time_seconds", "profiling")["corrected"];
    let truth = ledger_truth("late-warmup");
    let key = (
        "vllm:request_prefill_time_seconds".to_string(),
        "profiling".to_string(),
    );
    assert_eq!(corrected["count"], truth[&key].0, "{corrected}");
    // The sum's bounds hold the ledger's.
    let sum = truth[&key].1;
    assert!(corrected["sum_low"]
        .as_f64()
        .is_some_and(|lo| lo <= sum + 1e-9));
    assert!(corrected["sum_high"]
        .as_f64()
        .is_some_and(|hi| hi >= sum - 1e-9));
    assert_eq!(corrected["exactness"], "bounded");
    assert!(corrected["sum"].is_null());
}

/// A clean run: no error; the windows still overlap, which is a warning that
/// counts the profiling requests that started before warmup closed.
#[test]
fn clean_run_has_no_warning_and_the_overlap_is_verified_harmless() {
    let (run, code) = sample("clean");
    assert_eq!(code, 0);
    assert!(run["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .all(|f| f["severity"] == "info"));
    for m in run["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("rows")
    {
        assert_eq!(m["classification"], "ok", "{m}");
    }
    let export: Value = serde_json::from_str(
        &fs::read_to_string(run_dir("clean").join("server_metrics_export.json")).expect("read"),
    )
    .expect("json");
    let we = export["summary"]["phase_time_ranges"]["warmup"]["end_ns"]
        .as_u64()
        .expect("we");
    let ps = export["summary"]["phase_time_ranges"]["profiling"]["start_ns"]
        .as_u64()
        .expect("ps");
    assert!(we > ps, "every AIPerf 0.13.0 run seen so far overlaps");
    let started = records("clean")
        .iter()
        .filter(|r| r["metadata"]["benchmark_phase"] == "profiling")
        .filter(|r| r["metadata"]["request_start_ns"].as_u64().expect("start") < we)
        .count();
    let w = &run["checks"]["phase_contamination"]["windows"];
    assert_eq!(w["profiling_started_before_warmup_closed"], started);
    let f = findings(&run, "phase-window-overlap");
    assert_eq!(f.len(), 1);
    // Every count splits exactly: the overlap is verified harmless.
    assert_eq!(f[0]["severity"], "info");
    assert!(f[0]["message"]
        .as_str()
        .unwrap_or_default()
        .contains(&format!("{started} profiling request(s) started")));
}

/// The clean run's repair is exact and equals the ledger, metric by metric.
#[test]
fn clean_run_repair_is_exact_and_equals_the_ledger() {
    let (run, _) = sample("clean");
    let truth = ledger_truth("clean");
    let mut checked = 0;
    for m in run["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("rows")
    {
        let c = &m["corrected"];
        assert_eq!(c["exactness"], "exact", "{m}");
        let key = (
            m["metric"].as_str().expect("m").to_string(),
            m["phase"].as_str().expect("p").to_string(),
        );
        let (n, sum) = truth[&key];
        assert_eq!(c["count"], n, "{key:?}");
        if let Some(s) = c["sum"].as_f64() {
            assert!(
                (s - sum).abs() < 1e-6 * sum.max(1.0),
                "{key:?}: {s} vs {sum}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 10);
}

/// Two scrape endpoints, one without traffic: the idle one is noted, its
/// series are idle observers (no rows, no deficit), and every row is the
/// busy endpoint's.
#[test]
fn endpoint_without_traffic_is_noted_not_failed() {
    let (run, code) = sample("clean");
    assert_eq!(code, 0);
    let p = &run["checks"]["phase_contamination"];
    let idle = p["endpoints_without_traffic"].as_array().expect("list");
    assert_eq!(idle.len(), 1);
    let rows = p["metrics"].as_array().expect("rows");
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|m| m["endpoint"] != idle[0]));
    assert!(findings(&run, "unexplained-deficit").is_empty());
}

/// The boundary race: profiling observations published before the
/// end-of-warmup scrape are counted in warmup; e2e (observed at
/// completion) is the control. On a real vLLM engine every family observed
/// at arrival, scheduling or first token races it: TTFT among them, each
/// finding held to the ledger.
#[test]
fn ttft_lost_to_warmup_is_found_with_e2e_as_control() {
    let (run, code) = sample("boundary-race");
    assert_eq!(code, 1);
    let f = findings(&run, "profiling-lost-to-warmup");
    assert!(f.iter().any(|x| x["metrics"].as_array().is_some_and(|m| m
        .iter()
        .any(|m| m["metric"] == "vllm:time_to_first_token_seconds"))));
    assert_eq!(
        run["checks"]["phase_contamination"]["control_metric"],
        "vllm:e2e_request_latency_seconds"
    );
    let export: Value = serde_json::from_str(
        &fs::read_to_string(run_dir("boundary-race").join("server_metrics_export.json"))
            .expect("read"),
    )
    .expect("json");
    let we = export["summary"]["phase_time_ranges"]["warmup"]["end_ns"]
        .as_u64()
        .expect("we");
    let phases = phase_of("boundary-race");
    let truth = ledger_truth("boundary-race");
    for x in &f {
        let metric = x["metric"].as_str().expect("metric");
        let p = row(&run, metric, "profiling");
        let w = row(&run, metric, "warmup");
        let lost = -p["delta"].as_f64().expect("delta");
        assert!(lost >= 1.0, "{metric}");
        assert_eq!(w["delta"].as_f64(), Some(lost), "{metric}");
        // Ground truth: at least that many profiling observations were
        // published before the warmup window closed.
        let early = ledger("boundary-race")
            .iter()
            .filter(|e| e["event"] == "request")
            .filter(|e| phases[e["x_request_id"].as_str().expect("id")] == "profiling")
            .flat_map(|e| e["observations"].as_array().expect("obs").clone())
            .filter(|o| o["metric"] == metric)
            .filter(|o| o["t_ns"].as_u64().expect("t") < we)
            .count();
        assert!(
            early as f64 >= lost,
            "{metric}: {early} early observations for {lost} lost"
        );
        if metric != "vllm:time_to_first_token_seconds" {
            continue;
        }
        // The repair puts the true per-phase counts back.
        for (phase, r) in [("profiling", p), ("warmup", w)] {
            let (n, _) = truth[&(metric.to_string(), phase.to_string())];
            assert_eq!(r["corrected"]["count"], n, "{phase}");
        }
    }
}

/// Overlapping windows double-count: warmup holds more observations than it
/// had requests while profiling is right; the profiling observations made
/// by AIPerf's end-of-warmup scrape account for the excess, so it is
/// `counted-in-both`, and only warmup figures are affected: a warning.
#[test]
fn warmup_excess_from_overlap_is_counted_in_both_and_a_warning() {
    let (run, _) = sample("cold-tls");
    let f = findings(&run, "counted-in-both");
    assert!(!f.is_empty());
    assert!(findings(&run, "unexplained-excess").is_empty());
    for x in &f {
        assert_eq!(x["severity"], "warning");
        assert!(x["message"]
            .as_str()
            .unwrap_or_default()
            .contains("end-of-warmup scrape"));
    }
    let p = row(&run, "vllm:time_to_first_token_seconds", "profiling");
    assert_eq!(p["classification"], "ok");
    let w = row(&run, "vllm:time_to_first_token_seconds", "warmup");
    assert_eq!(w["classification"], "counted_in_both");
    assert_eq!(w["corrected"]["count"], w["expected_count"]["min"]);
    // The ledger: the warmup excess is profiling requests whose first token
    // came before the end-of-warmup scrape; they are profiling's too.
    let truth = ledger_truth("cold-tls");
    let key = (
        "vllm:time_to_first_token_seconds".to_string(),
        "profiling".to_string(),
    );
    assert_eq!(p["found_count"].as_f64(), Some(truth[&key].0 as f64));
}

/// A run whose warmup window overlaps profiling is flagged that way whether
/// or not any count is off.
#[test]
fn overlap_is_flagged_whether_or_not_counts_are_off() {
    for name in [
        "clean",
        "late-warmup",
        "boundary-race",
        "cold-tls",
        "prefix-cache",
    ] {
        let (run, _) = sample(name);
        let o = run["checks"]["phase_contamination"]["windows"]["overlap_ms"].as_f64();
        if o.is_some_and(|o| o > 0.0) {
            assert_eq!(findings(&run, "phase-window-overlap").len(), 1, "{name}");
        }
    }
}

/// Seed 001: a counter whose profiling timeslices start long before
/// profiling (a wrongly tagged baseline scrape) is flagged with how early.
#[test]
fn counter_timeslices_starting_before_profiling_are_flagged() {
    let (_t, dir) = copy_run("prefix-cache");
    let p = dir.join("server_metrics_export.json");
    let mut export: Value =
        serde_json::from_str(&fs::read_to_string(&p).expect("read")).expect("json");
    let start = export["summary"]["phase_time_ranges"]["profiling"]["start_ns"]
        .as_u64()
        .expect("start");
    let early = start - 1_674_000_000_000;
    let series = &mut export["metrics"]["vllm:prompt_tokens"]["series"][0];
    series["timeslices"] = json!([
        {"start_ns": early, "end_ns": start, "total": 254.0, "rate": 0.15},
        {"start_ns": start, "end_ns": start + 1_000_000_000, "total": 6083.0, "rate": 6083.0}
    ]);
    fs::write(&p, serde_json::to_string(&export).expect("ser")).expect("write");
    let (report, _) = json_report(&[&dir], &[]);
    let f = findings(&report["runs"][0], "counter-window-early");
    assert_eq!(f.len(), 1);
    assert!(
        f[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("1674.000 s before"),
        "{}",
        f[0]
    );
    // The warmup request ran in between: its increments are absorbed.
    assert_eq!(f[0]["severity"], "error");
    // No fixed slack: a slice that starts 1 ms early, after every warmup
    // request had finished, absorbed nothing.
    let warmup_end = records("prefix-cache")
        .iter()
        .filter(|r| r["metadata"]["benchmark_phase"] == "warmup")
        .map(|r| r["metadata"]["request_end_ns"].as_u64().expect("end"))
        .max()
        .expect("a warmup request");
    assert!(
        warmup_end + 1_000_000 < start,
        "the fixture's warmup ends before"
    );
    export["metrics"]["vllm:prompt_tokens"]["series"][0]["timeslices"][0]["start_ns"] =
        json!(start - 1_000_000);
    fs::write(&p, serde_json::to_string(&export).expect("ser")).expect("write");
    let (report, _) = json_report(&[&dir], &[]);
    let f = findings(&report["runs"][0], "counter-window-early");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["severity"], "info", "{}", f[0]);
}

/// A cumulative value that goes down between raw scrapes is named with its
/// lines, and no repair is attempted across it. At the last scrape, with one
/// family falling and the process start time unchanged, nothing confirms a
/// reset: a warning, not an error.
#[test]
fn a_counter_reset_in_the_raw_scrapes_is_named() {
    let (_t, dir) = copy_run("clean");
    let p = dir.join("server_metrics_export.jsonl");
    let mut scrapes = jsonl(&p);
    // The last scrape of the endpoint that had the traffic.
    let busy = |s: &Value| {
        s["metrics"]["vllm:e2e_request_latency_seconds"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["count"].as_f64().unwrap_or(0.0) > 0.0))
    };
    let last = scrapes.iter().rposition(busy).expect("a busy scrape");
    for s in scrapes[last]["metrics"]["vllm:e2e_request_latency_seconds"]
        .as_array_mut()
        .expect("samples")
    {
        s["count"] = json!(0);
    }
    write_jsonl(&p, &scrapes);
    let (report, _) = json_report(&[&dir], &[]);
    let run = &report["runs"][0];
    let f = findings(run, "counter-reset");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["line"], last + 1);
    assert_eq!(f[0]["metric"], "vllm:e2e_request_latency_seconds");
    assert_eq!(f[0]["severity"], "warning");
    assert!(f[0]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("without evidence of a reset"));
    assert!(row(run, "vllm:e2e_request_latency_seconds", "profiling")
        .get("corrected")
        .is_none());
}

/// phase_manifest.json counts that disagree with the records are named.
#[test]
fn manifest_counts_are_held_to_the_records() {
    let (_t, dir) = copy_run("clean");
    let p = dir.join("phase_manifest.json");
    let text = fs::read_to_string(&p).expect("read").replacen(
        "\"successful_request_count\": 16",
        "\"successful_request_count\": 15",
        1,
    );
    fs::write(&p, text).expect("write");
    let (report, _) = json_report(&[&dir], &[]);
    let f: Vec<&Value> = findings(&report["runs"][0], "summary-mismatch")
        .into_iter()
        .filter(|f| f["file"] == "phase_manifest.json")
        .collect();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["expected"], 16);
    assert_eq!(f[0]["found"], 15);
}

/// An exact repair carries the phase's own buckets: on the clean run they are
/// the ledger's observations bucketed with the export's bounds, and the
/// percentiles estimated from them are Prometheus' (zero bias: nothing crossed).
#[test]
fn exact_repair_buckets_and_percentiles_equal_the_ledger() {
    let (run, _) = sample("clean");
    let truth = ledger_values("clean");
    let mut checked = 0;
    for m in rows_all(&run) {
        let Some(buckets) = m["corrected"]["buckets"].as_object() else {
            continue;
        };
        let metric = m["metric"].as_str().expect("metric");
        let key = (
            metric.to_string(),
            m["phase"].as_str().expect("phase").to_string(),
        );
        let les = export_les("clean", metric);
        let want = bucketed(&truth[&key], &les);
        let got: Vec<(f64, f64)> = les
            .iter()
            .map(|le| {
                let k = if le.is_infinite() {
                    "+Inf".to_string()
                } else {
                    le.to_string()
                };
                (*le, buckets[&k].as_f64().expect("count"))
            })
            .collect();
        assert_eq!(got, want, "{key:?}");
        let p = stats_of(&m["corrected"]["percentiles"]);
        for (got, q) in p.iter().zip([0.5, 0.9, 0.99]) {
            let want = prom_quantile(q, &want);
            assert!(
                (got - want).abs() < 1e-9 * want.abs().max(1.0),
                "{key:?} q{q}: {got} vs {want}"
            );
        }
        assert_eq!(stats_of(&m["percentile_bias_pct"]), [0.0; 3], "{key:?}");
        checked += 1;
    }
    assert!(checked >= 10, "{checked}");
}

/// An excess without an exact repair bounds the true percentiles: the
/// ledger's observations of the phase, bucketed, estimate inside the bounds,
/// and the finding carries the worst-case bias of the published estimate.
#[test]
fn excess_observations_bound_the_true_percentiles() {
    // Every excess the raw scrapes could not repair exactly, on every
    // sample run.
    let mut checked = 0;
    for run_name in RUNS {
        let (run, _) = sample(run_name);
        for m in rows_all(&run) {
            let bounds = &m["true_percentile_bounds"];
            if bounds.is_null() || m["delta"].as_f64().is_none_or(|d| d < 1.0) {
                continue;
            }
            let metric = m["metric"].as_str().expect("metric");
            let phase = m["phase"].as_str().expect("phase");
            let Some(values) =
                ledger_values(run_name).remove(&(metric.to_string(), phase.to_string()))
            else {
                continue;
            };
            let truth = bucketed(&values, &export_les(run_name, metric));
            let (low, high) = (stats_of(&bounds["low"]), stats_of(&bounds["high"]));
            for (i, q) in [0.5, 0.9, 0.99].into_iter().enumerate() {
                let t = prom_quantile(q, &truth);
                assert!(
                    low[i] - 1e-12 <= t && t <= high[i] + 1e-12,
                    "{run_name} {metric} {phase} q{q}: {t} outside [{}, {}]",
                    low[i],
                    high[i]
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 1, "no excess to bound");
    // The late warmup observation's finding: the p-estimate bias it can cause.
    let (run, _) = sample("late-warmup");
    let f = findings(&run, "late-warmup-observation");
    let effects = f[0]["effect"].as_array().expect("effects");
    let worst = effects
        .iter()
        .find(|e| {
            e["quantity"]
                .as_str()
                .is_some_and(|q| q.ends_with("_bias_up_to"))
        })
        .expect("a percentile bias effect");
    // The worst bias the found percentiles can have over any true value
    // inside the bounds the test above holds to the ledger.
    let m = row(&run, "vllm:request_prefill_time_seconds", "profiling");
    let found = stats_of(&m["found_percentiles"]);
    let low = stats_of(&m["true_percentile_bounds"]["low"]);
    let high = stats_of(&m["true_percentile_bounds"]["high"]);
    let (mut name, mut want) = ("", 0.0f64);
    for (i, q) in ["p50", "p90", "p99"].into_iter().enumerate() {
        for bound in [low[i], high[i]] {
            let b = (found[i] - bound) / bound * 100.0;
            if bound != 0.0 && b.abs() >= want.abs() {
                (name, want) = (q, b);
            }
        }
    }
    assert_eq!(worst["quantity"], format!("profiling_{name}_bias_up_to"));
    assert!(
        (worst["value"].as_f64().expect("value") - want).abs() < 1e-9,
        "{worst}"
    );
}

fn rows_all(run: &Value) -> Vec<&Value> {
    run["checks"]["phase_contamination"]["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .collect()
}

/// AIPerf 0.12 and later take a phase's baseline to be the scrape stored
/// just before the first one tagged with the phase, whatever its time: the
/// `warmup-absorbed` (or `out-of-order-baseline`) finding names that scrape. Retagging the baseline of
/// prefix-cache-boundary (line 3) as profiling moves AIPerf's baseline to
/// line 2, which the finding then names, though line 3 is still the last
/// scrape answered before profiling started.
#[test]
fn the_absorbed_baseline_is_the_scrape_before_the_first_tagged_profiling() {
    let (_t, dir) = copy_run("prefix-cache-boundary");
    let named = |dir: &std::path::Path| -> Vec<String> {
        let (report, _) = json_report(&[dir], &[]);
        let run = &report["runs"][0];
        // Line 3 was answered out of order (the seed 001 pattern): the
        // same movement under the name of its reason.
        let mut f = findings(run, "warmup-absorbed");
        f.extend(findings(run, "out-of-order-baseline"));
        f.into_iter()
            .map(|f| f["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let before = named(&dir);
    assert!(!before.is_empty());
    assert!(before
        .iter()
        .all(|m| m.contains("baseline is the scrape at line 3,")));
    let p = dir.join("server_metrics_export.jsonl");
    let mut scrapes = jsonl(&p);
    assert_eq!(scrapes[2]["benchmark_phase"], "warmup");
    assert_eq!(scrapes[3]["benchmark_phase"], "profiling");
    scrapes[2]["benchmark_phase"] = json!("profiling");
    write_jsonl(&p, &scrapes);
    let after = named(&dir);
    assert!(!after.is_empty());
    assert!(
        after
            .iter()
            .all(|m| m.contains("baseline is the scrape at line 2,")),
        "{after:?}"
    );
}
