//! `artifact-check compare` on fixtures/compare: two repeats of one
//! configuration and a run with the engine's inter-token gap planted at
//! 3 ms instead of 2 ms (real AIPerf 0.13.0 runs; the engine ledgers say
//! what each run's engine did), and on sample runs that must not be
//! compared as they are.

mod common;

use common::*;
use serde_json::Value;

fn compare(a: &str, b: &str, extra: &[&str]) -> (Value, i32) {
    let mut args = vec!["compare", a, b, "--format", "json"];
    args.extend_from_slice(extra);
    let (out, err, code) = cli(&args);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    (v, code)
}

fn fixture(name: &str) -> String {
    format!("fixtures/compare/{name}")
}

fn row<'a>(c: &'a Value, metric: &str, stat: &str) -> &'a Value {
    c["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["metric"] == metric && r["stat"] == stat)
        .unwrap_or_else(|| panic!("no row {metric} {stat}"))
}

/// The engine's mean inter-token gap (s), from its ledger (what was
/// planted): each request's observed decode time over its gaps.
fn planted_itl(name: &str) -> f64 {
    let gaps: Vec<f64> = jsonl(&root().join(format!("fixtures/compare/{name}.ledger.jsonl")))
        .iter()
        .filter(|e| e["event"] == "request")
        .filter_map(|e| {
            let decode = e["observations"]
                .as_array()?
                .iter()
                .find(|o| o["metric"] == "vllm:request_decode_time_seconds")?["value"]
                .as_f64()?;
            let n = e["completion_tokens"].as_f64()?;
            (n > 1.0).then(|| decode / (n - 1.0))
        })
        .collect();
    assert!(
        !gaps.is_empty(),
        "{name}: the ledger has the engine's decode times"
    );
    gaps.iter().sum::<f64>() / gaps.len() as f64
}

#[test]
fn rows_carry_the_contract_fields() {
    let (c, code) = compare(&fixture("repeat-a"), &fixture("repeat-b"), &[]);
    assert_eq!(code, 0);
    for r in c["rows"].as_array().expect("rows") {
        for key in [
            "metric",
            "stat",
            "a",
            "b",
            "difference",
            "interval",
            "significant",
        ] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
    }
    for metric in [
        "time_to_first_token",
        "inter_token_latency",
        "request_latency",
        "output_token_throughput",
        "request_throughput",
    ] {
        row(&c, metric, "mean");
    }
    assert!(c["interval_method"]
        .as_str()
        .expect("method")
        .contains("bootstrap"));
}

#[test]
fn two_repeats_of_one_configuration_show_no_difference() {
    let (c, code) = compare(
        &fixture("repeat-a"),
        &fixture("repeat-b"),
        &["--fail-on-regression", "5"],
    );
    assert_eq!(code, 0, "{c}");
    let beyond: Vec<&Value> = c["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["significant"] == true)
        .collect();
    assert!(beyond.is_empty(), "repeats differ beyond noise: {beyond:?}");
    assert!(
        c["findings"].as_array().expect("findings").is_empty(),
        "{}",
        c["findings"]
    );
    // Both engines ran the same gap.
    let (a, b) = (planted_itl("repeat-a"), planted_itl("repeat-b"));
    assert!((a - b).abs() < 1e-4, "{a} vs {b}");
}

#[test]
fn a_planted_latency_shift_is_beyond_noise_and_a_regression() {
    let (a, b) = (planted_itl("repeat-a"), planted_itl("slower-decode"));
    assert!(b > a * 1.3, "the ledger's planted shift: {a} -> {b}");
    let (c, code) = compare(
        &fixture("repeat-a"),
        &fixture("slower-decode"),
        &["--fail-on-regression", "5"],
    );
    assert_eq!(code, 1);
    for metric in ["inter_token_latency", "request_latency"] {
        let r = row(&c, metric, "mean");
        assert_eq!(r["significant"], true, "{r}");
        let [lo, _] = [
            r["interval"][0].as_f64().expect("lo"),
            r["interval"][1].as_f64().expect("hi"),
        ];
        assert!(lo > 0.0, "{metric}: B slower");
    }
    // TTFT does not depend on the inter-token gap: not beyond noise.
    assert_eq!(row(&c, "time_to_first_token", "mean")["significant"], false);
    let regressions: Vec<&Value> = c["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] == "compare-regression")
        .collect();
    assert!(regressions
        .iter()
        .any(|f| f["field"] == "inter_token_latency.mean"));
    assert!(regressions.iter().all(|f| f["severity"] == "error"));
    // Without --fail-on-regression the difference is shown, not failed.
    let (_, code) = compare(&fixture("repeat-a"), &fixture("slower-decode"), &[]);
    assert_eq!(code, 0);
}

/// A run whose compared numbers are biased (cold-tls: cold requests in
/// another share than A's, a drain tail) makes the comparison unsafe; one
/// whose only error is a server histogram compare does not use
/// (late-warmup) does not, though its configuration and cold share do.
#[test]
fn comparing_with_a_contaminated_or_different_run_warns() {
    let codes = |c: &Value| -> Vec<String> {
        c["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| f["code"].as_str().expect("code").to_string())
            .collect()
    };
    let (c, code) = compare(
        "sample-artifacts/runs/clean",
        "sample-artifacts/runs/cold-tls",
        &[],
    );
    assert_eq!(code, 0, "warnings do not fail at the default level");
    assert!(
        codes(&c).contains(&"compare-contaminated".into()),
        "{:?}",
        codes(&c)
    );
    let f = &c["findings"][0];
    assert!(
        f["message"]
            .as_str()
            .expect("m")
            .contains("time_to_first_token p99"),
        "{f}"
    );
    // Cleaned of cold requests and tails, nothing compared is biased.
    let (c, _) = compare(
        "sample-artifacts/runs/clean",
        "sample-artifacts/runs/cold-tls",
        &["--exclude-cold", "--steady-state"],
    );
    assert!(
        !codes(&c).contains(&"compare-contaminated".into()),
        "{:?}",
        codes(&c)
    );
    let (c, code) = compare(
        "sample-artifacts/runs/clean",
        "sample-artifacts/runs/late-warmup",
        &[],
    );
    assert_eq!(code, 0);
    let codes = codes(&c);
    assert!(!codes.contains(&"compare-contaminated".into()), "{codes:?}");
    assert!(
        codes.contains(&"compare-config-differs".into()),
        "{codes:?}"
    );
    assert!(
        codes.contains(&"compare-cold-share-differs".into()),
        "{codes:?}"
    );
    let (_, code) = compare(
        "sample-artifacts/runs/clean",
        "sample-artifacts/runs/late-warmup",
        &["--fail-on", "warning"],
    );
    assert_eq!(code, 1);
}

#[test]
fn the_same_runs_give_the_same_intervals_and_outputs_render() {
    let (a, _) = compare(&fixture("repeat-a"), &fixture("slower-decode"), &[]);
    let (b, _) = compare(&fixture("repeat-a"), &fixture("slower-decode"), &[]);
    assert_eq!(a, b, "seeded");
    for format in ["table", "markdown", "json"] {
        let (out, err, code) = cli(&[
            "compare",
            &fixture("repeat-a"),
            &fixture("slower-decode"),
            "--format",
            format,
        ]);
        assert_eq!(code, 0, "{err}");
        insta::assert_snapshot!(format!("compare.{format}"), out);
    }
}

#[test]
fn a_folder_that_is_not_a_run_is_a_usage_error() {
    let (_, err, code) = cli(&["compare", "fixtures/compare", &fixture("repeat-a")]);
    assert_eq!(code, 2);
    assert!(err.contains("not an AIPerf run directory"), "{err}");
}
