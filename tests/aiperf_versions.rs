//! Every AIPerf release from 0.7.0 to 0.13.0, on the same five loads
//! against the same mock server (`fixtures/aiperf-versions/generate.sh`),
//! held to the server's ledger: the right verdict with the right cause, and
//! no finding that blames data the version never writes.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use common::*;
use serde_json::Value;

const VERSIONS: &[&str] = &[
    "0.7.0", "0.8.0", "0.9.0", "0.10.0", "0.11.0", "0.12.0", "0.13.0",
];
const SCENARIOS: &[&str] = &[
    "clean",
    "no-warmup",
    "late-warmup",
    "prefix-cache",
    "cold-tls",
];

fn dir(version: &str, scenario: &str) -> PathBuf {
    root()
        .join("fixtures/aiperf-versions")
        .join(version)
        .join(scenario)
}

fn minor(version: &str) -> u32 {
    version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .expect("minor")
}

/// A fixture's audit (JSON report) and exit code.
fn audit(version: &str, scenario: &str) -> (Value, i32) {
    let d = dir(version, scenario);
    let (report, code) = json_report(&[d.as_path()], &[]);
    (report["runs"][0].clone(), code)
}

/// What the server saw, from its ledger: every request with its phase (by
/// the run's own profiling records: the ledger holds only AIPerf's
/// requests, and a request not among the profiling records is warmup's).
struct Truth {
    /// Per request id: `profiling` or `warmup`.
    phase: HashMap<String, String>,
    /// The requests, in the ledger's order.
    requests: Vec<Value>,
    /// Every published observation: (metric, request id, time, value).
    observations: Vec<(String, String, u64, f64)>,
}

impl Truth {
    fn of(version: &str, scenario: &str) -> Truth {
        let d = dir(version, scenario);
        let profiling: HashSet<String> = jsonl(&d.join("profile_export.jsonl"))
            .iter()
            .filter(|r| {
                let m = &r["metadata"];
                m["phase_kind"].as_str().or(m["benchmark_phase"].as_str()) == Some("profiling")
            })
            .filter_map(|r| r["metadata"]["x_request_id"].as_str().map(str::to_string))
            .collect();
        let ledger = jsonl(
            &root()
                .join("fixtures/aiperf-versions")
                .join(version)
                .join(format!("{scenario}.ledger.jsonl")),
        );
        let mut t = Truth {
            phase: HashMap::new(),
            requests: Vec::new(),
            observations: Vec::new(),
        };
        for e in ledger {
            match e["event"].as_str() {
                Some("request") => {
                    let id = e["x_request_id"].as_str().expect("id").to_string();
                    let phase = if profiling.contains(&id) {
                        "profiling"
                    } else {
                        "warmup"
                    };
                    t.phase.insert(id.clone(), phase.into());
                    for o in e["observations"].as_array().expect("observations") {
                        t.observations.push((
                            o["metric"].as_str().expect("metric").into(),
                            id.clone(),
                            o["t_ns"].as_u64().expect("t"),
                            o["value"].as_f64().expect("value"),
                        ));
                    }
                    t.requests.push(e);
                }
                Some("late_observation") => t.observations.push((
                    e["metric"].as_str().expect("metric").into(),
                    e["x_request_id"].as_str().expect("id").into(),
                    e["t_ns"].as_u64().expect("t"),
                    e["value"].as_f64().expect("value"),
                )),
                _ => {}
            }
        }
        t
    }

    /// The observations of `metric` made for `phase`'s requests.
    fn of_metric(&self, metric: &str, phase: &str) -> Vec<(u64, f64)> {
        self.observations
            .iter()
            .filter(|o| o.0 == metric && self.phase[&o.1] == phase)
            .map(|o| (o.2, o.3))
            .collect()
    }

    /// When the first profiling request started (ns).
    fn profiling_first_start(&self) -> u64 {
        self.requests
            .iter()
            .filter(|r| self.phase[r["x_request_id"].as_str().expect("id")] == "profiling")
            .map(|r| r["t_start_ns"].as_u64().expect("start"))
            .min()
            .expect("a profiling request")
    }
}

fn codes(run: &Value) -> Vec<String> {
    run["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().expect("code").to_string())
        .collect()
}

/// Findings no run of any version may have: causes that are wrong here (the
/// mock server has no foreign traffic and loses nothing) and complaints
/// about data a version never writes.
#[test]
fn no_version_gets_a_false_cause_or_blames_data_it_never_writes() {
    let forbidden = [
        "unexplained-excess",
        "unexplained-deficit",
        "request-count-mismatch",
        "unknown-schema-version",
        "invalid-record",
        "summary-mismatch",
    ];
    for v in VERSIONS {
        for s in SCENARIOS {
            let (run, code) = audit(v, s);
            assert_ne!(code, 2, "{v}/{s} could not be audited");
            for c in codes(&run) {
                assert!(!forbidden.contains(&c.as_str()), "{v}/{s}: {c}");
            }
            let unknown = |m: &Value| m.as_str().unwrap_or_default().contains("enable-prompt");
            if minor(v) < 9 {
                for f in findings(&run, "cache-rate-unknown") {
                    assert!(!unknown(&f["message"]), "{v}/{s}: blames the server: {f}");
                }
            }
        }
    }
}

/// Each request-scoped metric's profiling count, held to the ledger: the
/// deviation the tool reports is what the export holds beyond the
/// profiling requests' own observations, and its cause is the right one:
/// a warmup observation published after profiling started is a late one;
/// one merely after AIPerf's profiling baseline is absorbed.
#[test]
fn every_profiling_deviation_is_sized_and_caused_as_the_ledger_says() {
    let mut checked = 0;
    for v in VERSIONS {
        for s in SCENARIOS {
            let (run, _) = audit(v, s);
            let truth = Truth::of(v, s);
            let start = truth.profiling_first_start();
            let rows = run["checks"]["phase_contamination"]["metrics"]
                .as_array()
                .expect("rows");
            for r in rows.iter().filter(|r| r["phase"] == "profiling") {
                let metric = r["metric"].as_str().expect("metric");
                let own = truth.of_metric(metric, "profiling").len() as f64;
                let found = r["found_count"].as_f64().expect("found");
                let delta = r["delta"].as_f64().expect("delta");
                assert_eq!(delta, found - own, "{v}/{s} {metric}: {r}");
                let class = r["classification"].as_str().expect("class");
                let late = truth
                    .of_metric(metric, "warmup")
                    .iter()
                    .any(|(t, _)| *t > start);
                let want = if delta == 0.0 {
                    "ok"
                } else if delta > 0.0 && late {
                    "late_warmup_observation"
                } else if delta > 0.0 {
                    "warmup_absorbed"
                } else {
                    "profiling_lost_to_warmup"
                };
                assert_eq!(class, want, "{v}/{s} {metric}: {r}");
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "{checked} rows");
}

/// The raw-scrape repair contains the truth: an exact repair equals the
/// ledger's profiling count and sum, a bounded one holds its sum within its
/// bounds.
#[test]
fn every_raw_scrape_repair_contains_the_ledgers_truth() {
    let mut repaired = 0;
    for v in VERSIONS {
        for s in SCENARIOS {
            let (run, _) = audit(v, s);
            let truth = Truth::of(v, s);
            let rows = run["checks"]["phase_contamination"]["metrics"]
                .as_array()
                .expect("rows");
            for r in rows {
                let Some(c) = r.get("corrected") else {
                    continue;
                };
                let (metric, phase) = (
                    r["metric"].as_str().expect("m"),
                    r["phase"].as_str().expect("p"),
                );
                let obs = truth.of_metric(metric, phase);
                let sum: f64 = obs.iter().map(|o| o.1).sum();
                let tol = 1e-6 * sum.abs().max(1.0);
                if c["exactness"] == "exact" {
                    assert_eq!(c["count"], obs.len(), "{v}/{s} {metric} {phase}: {c}");
                    if let Some(got) = c["sum"].as_f64() {
                        assert!(
                            (got - sum).abs() <= tol,
                            "{v}/{s} {metric} {phase}: {c} vs {sum}"
                        );
                    }
                } else if let (Some(lo), Some(hi)) = (c["sum_low"].as_f64(), c["sum_high"].as_f64())
                {
                    assert!(
                        lo - tol <= sum && sum <= hi + tol,
                        "{v}/{s} {metric} {phase}: {sum} outside {lo}..{hi}"
                    );
                }
                repaired += 1;
            }
        }
    }
    assert!(repaired > 100, "{repaired} repaired rows");
}

/// A clean run without warmup passes on every version; with a warmup, the
/// versions without a warmup split say so in an advisory.
#[test]
fn clean_runs_pass_and_old_versions_name_their_missing_split() {
    for v in VERSIONS {
        let (run, code) = audit(v, "no-warmup");
        assert_eq!(code, 0, "{v}: {:?}", codes(&run));
        let (run, _) = audit(v, "clean");
        let advisory = findings(&run, "aiperf-version-advisory");
        let says = |needle: &str| {
            advisory
                .iter()
                .any(|f| f["message"].as_str().unwrap_or_default().contains(needle))
        };
        if minor(v) < 12 {
            // What the repair of these versions stands on: profiling
            // starts once every warmup request has returned.
            let truth = Truth::of(v, "clean");
            let warmup_end = truth
                .requests
                .iter()
                .filter(|r| truth.phase[r["x_request_id"].as_str().expect("id")] == "warmup")
                .map(|r| r["t_end_ns"].as_u64().expect("end"))
                .max()
                .expect("warmup requests");
            assert!(warmup_end <= truth.profiling_first_start(), "{v}");
            assert!(says("has no warmup split"), "{v}");
            assert!(says("does not write warmup records"), "{v}");
            assert!(
                run["phases"]["warmup"]["records"].is_null(),
                "{v}: unknown, not 0"
            );
            assert_eq!(run["phases"]["warmup"]["configured_requests"], 4, "{v}");
        } else {
            assert!(says("no flush barrier"), "{v}");
        }
    }
}

/// The clients' hit rate equals the ledger's on every version that records
/// cached tokens (0.9 on), and the raw-scrape server rate holds it; before
/// 0.9 the rate is unknown, and the version is named as the reason.
#[test]
fn prefix_cache_rates_hold_the_ledgers_truth_on_every_version() {
    for v in VERSIONS {
        let (run, _) = audit(v, "prefix-cache");
        let truth = Truth::of(v, "prefix-cache");
        let (mut cached, mut prompt) = (0.0, 0.0);
        for r in &truth.requests {
            if truth.phase[r["x_request_id"].as_str().expect("id")] == "profiling" {
                cached += r["cached_tokens"].as_f64().expect("cached");
                prompt += r["prompt_tokens"].as_f64().expect("prompt");
            }
        }
        let rate = cached / prompt;
        let pc = &run["checks"]["prefix_cache"];
        if minor(v) < 9 {
            assert!(pc["client"]["hit_rate"].is_null(), "{v}");
            let f = findings(&run, "cache-rate-unknown");
            assert!(
                f.iter().any(|f| f["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("does not record them")),
                "{v}: {f:?}"
            );
        } else {
            let got = pc["client"]["hit_rate"].as_f64().expect("client rate");
            assert!((got - rate).abs() < 1e-9, "{v}: {got} vs {rate}");
        }
        let raw = &pc["server_from_raw_scrapes"];
        match raw["exactness"].as_str() {
            Some("exact") => {
                let got = raw["hit_rate"].as_f64().expect("rate");
                assert!((got - rate).abs() < 1e-9, "{v}: {got} vs {rate}");
            }
            Some(_) => {
                let (lo, hi) = (
                    raw["hit_rate_low"].as_f64().expect("low"),
                    raw["hit_rate_high"].as_f64().expect("high"),
                );
                assert!(
                    lo <= rate + 1e-9 && rate <= hi + 1e-9,
                    "{v}: {rate} outside {lo}..{hi}"
                );
            }
            None => panic!("{v}: no raw-scrape rate: {pc}"),
        }
    }
}

/// Cold requests are exactly the profiling requests that were the first on
/// their connection, on every version.
#[test]
fn cold_requests_are_the_ledgers_first_on_a_connection_on_every_version() {
    for v in VERSIONS {
        let (run, _) = audit(v, "cold-tls");
        let truth = Truth::of(v, "cold-tls");
        let mut want: Vec<String> = truth
            .requests
            .iter()
            .filter(|r| r["request_on_connection"] == 1)
            .map(|r| r["x_request_id"].as_str().expect("id").to_string())
            .filter(|id| truth.phase[id] == "profiling")
            .collect();
        let mut got: Vec<String> = run["checks"]["cold_connections"]["cold_request_ids"]
            .as_array()
            .expect("ids")
            .iter()
            .map(|x| x.as_str().expect("id").to_string())
            .collect();
        want.sort();
        got.sort();
        assert!(!want.is_empty(), "{v}");
        assert_eq!(got, want, "{v}");
        assert!(!findings(&run, "cold-connection-bias").is_empty(), "{v}");
    }
}

/// The late warmup observation of seed 000 is named as one on every version.
#[test]
fn the_late_warmup_observation_is_named_on_every_version() {
    for v in VERSIONS {
        let (run, code) = audit(v, "late-warmup");
        assert_eq!(code, 1, "{v}");
        let f = findings(&run, "late-warmup-observation");
        assert!(
            f.iter()
                .any(|f| f["metric"] == "vllm:request_prefill_time_seconds"),
            "{v}: {:?}",
            codes(&run)
        );
    }
}

/// A folder with only `profile_export_aiperf.json` gets what the summary
/// can tell (its failed requests by code, the cold requests its connection
/// figures count) and a list of what needs the other files, on every
/// version kept that way here.
#[test]
fn a_summary_only_folder_gets_the_checks_it_can_have() {
    for v in ["0.7.0", "0.11.0", "0.13.0"] {
        let (run, code) = audit(v, "summary-only");
        assert_eq!(code, 0, "{v}: warnings only: {:?}", codes(&run));
        let ledger = jsonl(
            &root()
                .join("fixtures/aiperf-versions")
                .join(v)
                .join("summary-only.ledger.jsonl"),
        );
        let failed = ledger.iter().filter(|e| e["event"] == "error").count();
        assert!(failed > 0, "{v}");
        let f = findings(&run, "request-errors");
        assert_eq!(f.len(), 1, "{v}");
        assert_eq!(f[0]["found"], failed, "{v}");
        assert!(
            f[0]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("HTTP 502"),
            "{v}: {}",
            f[0]["message"]
        );
        // Every successful request of this run is published (no warmup):
        // the ones first on their connection are the cold ones.
        let cold = ledger
            .iter()
            .filter(|e| e["event"] == "request" && e["request_on_connection"] == 1)
            .count();
        let f = findings(&run, "cold-requests-unmeasured");
        assert_eq!(f.len(), 1, "{v}");
        let effect = f[0]["effect"]
            .as_array()
            .expect("effect")
            .iter()
            .find(|e| e["quantity"] == "cold_requests")
            .expect("cold_requests")["value"]
            .as_f64()
            .expect("n");
        assert_eq!(effect, cold as f64, "{v}");
        let missing: Vec<String> = findings(&run, "missing-artifact")
            .iter()
            .map(|f| f["message"].as_str().unwrap_or_default().to_string())
            .collect();
        assert!(
            missing.iter().any(|m| m.contains("cold_connections")),
            "{v}"
        );
        assert!(
            missing.iter().any(|m| m.contains("phase_contamination")),
            "{v}"
        );
        assert!(findings(&run, "request-count-mismatch").is_empty(), "{v}");
    }
}

/// A development build's record layout (late 2025: `credit_phase`,
/// `timestamp_ns`, metrics named `ttft`; made here from a real 0.13.0
/// run's records, renamed as that layout names them) is one finding that
/// names it and what cannot be checked, not an `invalid-record` per line.
#[test]
fn a_development_build_layout_is_one_finding_not_one_per_line() {
    let tmp = tempfile::tempdir().expect("tmp");
    let run = tmp.path().join("dev-build");
    copy_dir(&dir("0.13.0", "clean"), &run);
    let records = jsonl(&run.join("profile_export.jsonl"));
    let renamed: Vec<Value> = records
        .iter()
        .map(|r| {
            let m = &r["metadata"];
            let mut metrics = r["metrics"].clone();
            let metrics = metrics.as_object_mut().expect("metrics");
            if let Some(t) = metrics.remove("time_to_first_token") {
                metrics.insert("ttft".into(), t);
            }
            serde_json::json!({
                "record_id": "",
                "metadata": {
                    "conversation_id": m["conversation_id"],
                    "turn_index": m["turn_index"],
                    "timestamp_ns": m["request_start_ns"],
                    "worker_id": m["worker_id"],
                    "record_processor_id": m["record_processor_id"],
                    "credit_phase": m["benchmark_phase"],
                    "error": null,
                },
                "metrics": metrics,
            })
        })
        .collect();
    write_jsonl(&run.join("profile_export.jsonl"), &renamed);
    let (report, code) = json_report(&[run.as_path()], &[]);
    assert_ne!(code, 2);
    let run = &report["runs"][0];
    assert!(
        findings(run, "invalid-record").is_empty(),
        "{:?}",
        codes(run)
    );
    let f = findings(run, "unsupported-layout");
    assert_eq!(f.len(), 1, "{:?}", codes(run));
    let msg = f[0]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("credit_phase") && msg.contains("cold_connections"),
        "{msg}"
    );
    assert_eq!(run["checks"]["cold_connections"]["status"], "unknown");
}

/// InferenceX exports write a scrape endpoint as a bare `host:port`: the
/// same run with its endpoints written so (in the export and the raw
/// scrapes) gets the same verdict.
#[test]
fn a_bare_host_port_endpoint_gets_the_same_verdict() {
    for s in ["late-warmup", "prefix-cache"] {
        let tmp = tempfile::tempdir().expect("tmp");
        let run = tmp.path().join(s);
        copy_dir(&dir("0.13.0", s), &run);
        for f in ["server_metrics_export.json", "server_metrics_export.jsonl"] {
            let p = run.join(f);
            let text = std::fs::read_to_string(&p).expect("read");
            let bare = regex_free_strip(&text);
            assert_ne!(bare, text, "{f} names its endpoint");
            std::fs::write(&p, bare).expect("write");
        }
        let verdict = |r: &Value| {
            let mut v: Vec<(String, String)> = r["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .map(|f| {
                    (
                        f["code"].as_str().expect("c").into(),
                        f["severity"].as_str().expect("s").into(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        let (original, code_a) = audit("0.13.0", s);
        let (bare, code_b) = json_report(&[run.as_path()], &[]);
        assert_eq!(code_a, code_b, "{s}");
        assert_eq!(verdict(&original), verdict(&bare["runs"][0]), "{s}");
    }
}

/// `http://127.0.0.1:PORT/metrics` written as `127.0.0.1:PORT`.
fn regex_free_strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("http://127.0.0.1:") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + "http://".len()..];
        let end = tail.find('"').unwrap_or(tail.len());
        out.push_str(tail[..end].trim_end_matches("/metrics"));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// agentx-harness 1.0.x (an AIPerf fork) writes warmup records with
/// `benchmark_phase` but no `phase_kind` / `phase_name` / `phase_index`,
/// and numbers its own versions: read by its files, it gets the verdict of
/// the AIPerf run it was made from.
#[test]
fn a_fork_without_phase_kind_is_read_by_its_files() {
    for s in ["clean", "late-warmup", "cold-tls"] {
        let tmp = tempfile::tempdir().expect("tmp");
        let run = tmp.path().join(s);
        copy_dir(&dir("0.13.0", s), &run);
        let records: Vec<Value> = jsonl(&run.join("profile_export.jsonl"))
            .into_iter()
            .map(|mut r| {
                let m = r["metadata"].as_object_mut().expect("metadata");
                for k in ["phase_kind", "phase_name", "phase_index"] {
                    m.remove(k);
                }
                r
            })
            .collect();
        write_jsonl(&run.join("profile_export.jsonl"), &records);
        for f in ["profile_export_aiperf.json", "server_metrics_export.json"] {
            let p = run.join(f);
            let text = std::fs::read_to_string(&p).expect("read");
            std::fs::write(&p, text.replace("\"0.13.0\"", "\"1.0.2\"")).expect("write");
        }
        let codes_of = |r: &Value| {
            let mut v: Vec<String> = codes(r)
                .into_iter()
                .filter(|c| c != "aiperf-version-advisory")
                .collect();
            v.sort();
            v
        };
        let (original, _) = audit("0.13.0", s);
        let (fork, _) = json_report(&[run.as_path()], &[]);
        let fork = &fork["runs"][0];
        assert_eq!(codes_of(&original), codes_of(fork), "{s}");
        assert_eq!(
            fork["phases"]["warmup"]["records"],
            original["phases"]["warmup"]["records"]
        );
    }
}
