//! Every published number's verdict held to the mock servers' ledgers, on
//! every sample and fixture run that has one (real AIPerf runs against
//! `sample-artifacts/servers/`):
//! - a client statistic cold requests can reach: `biased` by cold requests
//!   only, its `corrected` is the statistic over the requests the ledger saw
//!   arrive on a reused connection; `trusted`, it is within the threshold
//!   of that (unless the run proved the cold requests' difference is not
//!   their connection's, an info finding);
//! - `prefill_throughput_per_user` avg biased by caching: `corrected` is the
//!   mean over the uncached tokens the ledger says the server prefilled;
//! - a server figure (count, sum): `biased`, its corrected value or bounds
//!   hold the ledger's observations of the phase's requests; `trusted`, it
//!   equals them;
//! - the server hit rate: within the gap tolerance of the ledger's cached
//!   over prompt tokens of the profiling requests.
//!
//! A statistic moved by the opening wave or the drain tail is held to the
//! steady-state rule (`tests/steady_state.rs`), not to a ledger: the ledger
//! has no "steady" truth.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use common::*;
use serde_json::Value;

/// Every run with a ledger: (run directory, ledger file).
fn runs_with_ledgers() -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let dirs = |d: PathBuf| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map(|r| r.filter_map(|e| Some(e.ok()?.path())).collect())
            .unwrap_or_default();
        v.retain(|p| p.is_dir());
        v.sort();
        v
    };
    for run in dirs(root().join("sample-artifacts/runs")) {
        let name = run.file_name().expect("name").to_string_lossy().to_string();
        let ledger = root().join(format!("sample-artifacts/ledgers/{name}.jsonl"));
        if ledger.exists() {
            out.push((run, ledger));
        }
    }
    let mut parents = vec![root().join("fixtures/accounting")];
    parents.extend(dirs(root().join("fixtures/aiperf-versions")));
    for parent in parents {
        for run in dirs(parent) {
            let ledger = run.with_extension("ledger.jsonl");
            if ledger.exists() && run.join("profile_export.jsonl").exists() {
                out.push((run, ledger));
            }
        }
    }
    out
}

/// numpy's linear percentile.
fn percentile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let h = (v.len() - 1) as f64 * q / 100.0;
    let (lo, hi) = (h.floor() as usize, (h.ceil() as usize).min(v.len() - 1));
    v[lo] + (v[hi] - v[lo]) * (h - lo as f64)
}

fn stat_of(v: &[f64], stat: &str) -> f64 {
    match stat {
        "avg" => v.iter().sum::<f64>() / v.len() as f64,
        s => percentile(v, s[1..].parse().expect("pNN")),
    }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-12)
}

/// One run's ledger read against its records.
struct Truth {
    /// Ledger request events by id.
    requests: HashMap<String, Value>,
    /// The successful profiling records.
    profiling: Vec<Value>,
    /// Per (metric, endpoint role) the profiling requests' observations:
    /// count and sum.
    server: HashMap<(String, String), (u64, f64)>,
    /// Cached and prompt tokens of the profiling requests the server
    /// finished.
    tokens: (f64, f64),
}

impl Truth {
    /// A request with a record takes its record's phase. One without: in a
    /// run that records warmup, a request cut at the end of a duration run
    /// (profiling when it arrived after profiling began); in an older run
    /// whose records are profiling only, a warmup request.
    fn of(run: &std::path::Path, ledger: &std::path::Path) -> Truth {
        let records = jsonl(&run.join("profile_export.jsonl"));
        let phase_of = |r: &Value| {
            let m = &r["metadata"];
            m["phase_kind"]
                .as_str()
                .or(m["benchmark_phase"].as_str())
                .unwrap_or("profiling")
                .to_string()
        };
        let phase: HashMap<String, String> = records
            .iter()
            .filter_map(|r| {
                Some((
                    r["metadata"]["x_request_id"].as_str()?.to_string(),
                    phase_of(r),
                ))
            })
            .collect();
        let records_warmup = phase.values().any(|p| p == "warmup");
        let starts = |only: Option<&str>| {
            records
                .iter()
                .filter(|r| only.is_none_or(|p| phase_of(r) == p))
                .filter_map(|r| r["metadata"]["request_start_ns"].as_u64())
                .min()
                .unwrap_or(u64::MAX)
        };
        let (first, first_profiling) = (starts(None), starts(Some("profiling")));
        let mut t = Truth {
            requests: HashMap::new(),
            profiling: records
                .iter()
                .filter(|r| phase_of(r) == "profiling" && r["error"].is_null())
                .cloned()
                .collect(),
            server: HashMap::new(),
            tokens: (0.0, 0.0),
        };
        for e in jsonl(ledger) {
            let Some(observations) = ledger_observations(&e) else {
                continue;
            };
            let id = e["x_request_id"].as_str().unwrap_or("").to_string();
            let start = e["t_start_ns"].as_u64().unwrap_or(u64::MAX);
            let p = match phase.get(&id) {
                Some(p) => p.clone(),
                None if !records_warmup => "warmup".into(),
                // The ledger's clock starts the request after the client did.
                None if start + 50_000_000 < first => continue,
                None if start >= first_profiling => "profiling".into(),
                None => "warmup".into(),
            };
            if p != "profiling" {
                continue;
            }
            if e["event"] == "request" {
                if e["aborted"].is_null() {
                    t.tokens.0 += e["cached_tokens"].as_f64().unwrap_or(0.0);
                    t.tokens.1 += e["prompt_tokens"].as_f64().unwrap_or(0.0);
                }
                t.requests.insert(id.clone(), e.clone());
            }
            for o in &observations {
                let key = (
                    o["metric"].as_str().unwrap_or("").to_string(),
                    o["endpoint"].as_str().unwrap_or("server").to_string(),
                );
                let slot = t.server.entry(key).or_default();
                slot.0 += 1;
                slot.1 += o["value"].as_f64().unwrap_or(0.0);
            }
        }
        t
    }

    /// The values of `metric` over the successful profiling records the
    /// ledger saw on a reused connection; `None` when a record has no
    /// ledger line or no connection order.
    fn warm_values(&self, metric: &str) -> Option<Vec<f64>> {
        let mut out = Vec::new();
        for r in &self.profiling {
            let e = self.requests.get(r["metadata"]["x_request_id"].as_str()?)?;
            let nth = e["request_on_connection"].as_u64()?;
            if let Some(v) = r["metrics"][metric]["value"].as_f64() {
                if nth > 1 {
                    out.push(v);
                }
            }
        }
        Some(out)
    }

    /// `prefill_throughput_per_user` over the tokens the server did not
    /// have cached, averaged over the successful profiling records.
    fn uncached_prefill(&self) -> Option<f64> {
        let mut v = Vec::new();
        for r in &self.profiling {
            let e = self.requests.get(r["metadata"]["x_request_id"].as_str()?)?;
            let Some(tput) = r["metrics"]["prefill_throughput_per_user"]["value"].as_f64() else {
                continue;
            };
            let prompt = e["prompt_tokens"].as_f64()?;
            if prompt > 0.0 {
                v.push(tput * (prompt - e["cached_tokens"].as_f64()?) / prompt);
            }
        }
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// The statistics a connection's setup time reaches.
const COLD_REACHES: [&str; 4] = [
    "time_to_first_token",
    "request_latency",
    "prefill_throughput_per_user",
    "e2e_output_token_throughput",
];

fn causes(p: &Value) -> Vec<&str> {
    p["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| c.as_str().expect("code"))
        .collect()
}

/// Whether the run proved a metric's cold/warm difference is not the
/// connection's (an info `cold-connection-bias` naming it).
fn harmless_cold(run: &Value, metric: &str) -> bool {
    run["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .any(|f| {
            f["code"] == "cold-connection-bias"
                && f["severity"] == "info"
                && f["metrics"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|m| m["metric"] == metric))
        })
}

#[test]
fn every_published_number_holds_the_ledgers_truth() {
    let pairs = runs_with_ledgers();
    assert!(pairs.len() >= 30, "{} runs with ledgers", pairs.len());
    let mut held: HashMap<&str, usize> = HashMap::new();
    let mut failures = Vec::new();
    for (dir, ledger) in &pairs {
        let (report, _) = json_report(&[dir.as_path()], &[]);
        let run = &report["runs"][0];
        let truth = Truth::of(dir, ledger);
        let rows = run["checks"]["phase_contamination"]["metrics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let name = dir
            .strip_prefix(root())
            .unwrap_or(dir)
            .display()
            .to_string();
        for p in run["published"].as_array().expect("published") {
            let (metric, stat) = (p["metric"].as_str().unwrap(), p["stat"].as_str().unwrap());
            let verdict = p["verdict"].as_str().unwrap();
            let value = p["value"].as_f64().expect("a published value");
            let corrected = p["corrected"].as_f64();
            let (lo, hi) = (p["corrected_low"].as_f64(), p["corrected_high"].as_f64());
            let mut fail = |what: String| failures.push(format!("{name}: {metric} {stat}: {what}"));
            if p["endpoint"].is_null() && COLD_REACHES.contains(&metric) && stat != "client" {
                let Some(warm) = truth.warm_values(metric).filter(|w| !w.is_empty()) else {
                    continue;
                };
                let t = stat_of(&warm, stat);
                match verdict {
                    "biased" if causes(p) == ["cold-connection-bias"] => {
                        *held.entry("cold biased").or_default() += 1;
                        if !corrected.is_some_and(|c| close(c, t, 1e-9)) {
                            fail(format!("corrected {corrected:?}, ledger warm-only {t}"));
                        }
                    }
                    "trusted" if !harmless_cold(run, metric) => {
                        *held.entry("cold trusted").or_default() += 1;
                        if (value - t).abs() / t.abs() > 0.05 + 1e-9 {
                            fail(format!("trusted {value}, ledger warm-only {t}"));
                        }
                    }
                    _ => {}
                }
            }
            if metric == "prefill_throughput_per_user"
                && stat == "avg"
                && causes(p) == ["prefill-throughput-overstated"]
            {
                *held.entry("prefill biased").or_default() += 1;
                let t = truth.uncached_prefill().expect("ledger tokens");
                if !corrected.is_some_and(|c| close(c, t, 1e-9)) {
                    fail(format!("corrected {corrected:?}, ledger uncached {t}"));
                }
            }
            if metric == "prefix_cache_hit_rate" && stat == "server" && truth.tokens.1 > 0.0 {
                let t = truth.tokens.0 / truth.tokens.1;
                let within = |x: f64| (x - t).abs() <= 0.01 + 1e-9;
                match verdict {
                    "trusted" => {
                        *held.entry("hit rate trusted").or_default() += 1;
                        if !within(value) {
                            fail(format!("trusted {value}, ledger {t}"));
                        }
                    }
                    "biased" => {
                        *held.entry("hit rate biased").or_default() += 1;
                        let inside = lo
                            .zip(hi)
                            .is_some_and(|(l, h)| l - 0.01 <= t && t <= h + 0.01);
                        if !(corrected.is_some_and(within) || inside) {
                            fail(format!(
                                "corrected {corrected:?} [{lo:?}, {hi:?}], ledger {t}"
                            ));
                        }
                    }
                    _ => {}
                }
            }
            if let Some(ep) = p["endpoint"]
                .as_str()
                .filter(|_| stat == "count" || stat == "sum")
            {
                // The row of this figure gives its endpoint's role; a role
                // several profiling rows share is not one ledger figure.
                let series = p["series"].as_str().unwrap_or("{}");
                let of = |r: &&Value| {
                    r["metric"] == metric
                        && r["phase"] == "profiling"
                        && labels(&r["series"]) == series
                };
                let Some(row) = rows.iter().filter(of).find(|r| r["endpoint"] == ep) else {
                    fail("no phase row".into());
                    continue;
                };
                let role = row["role"].as_str().unwrap_or("server");
                let shared = rows
                    .iter()
                    .filter(|r| r["metric"] == metric && r["phase"] == "profiling")
                    .filter(|r| r["role"].as_str().unwrap_or("server") == role)
                    .count();
                if shared != 1 {
                    continue;
                }
                let (n, sum) = truth
                    .server
                    .get(&(metric.to_string(), role.to_string()))
                    .copied()
                    .unwrap_or_default();
                let t = if stat == "count" { n as f64 } else { sum };
                let tol = 1e-6;
                match verdict {
                    "trusted" => {
                        *held.entry("server trusted").or_default() += 1;
                        if !close(value, t, tol) {
                            fail(format!("trusted {value}, ledger {t}"));
                        }
                    }
                    "biased" => {
                        *held.entry("server biased").or_default() += 1;
                        let inside = lo.is_some_and(|l| l - tol * t.abs() <= t)
                            && hi.is_none_or(|h| t <= h + tol * t.abs())
                            && lo.is_some();
                        if !(corrected.is_some_and(|c| close(c, t, tol)) || inside) {
                            fail(format!(
                                "published {value}, corrected {corrected:?} [{lo:?}, {hi:?}], \
                                 ledger {t} ({:?})",
                                causes(p)
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // Every kind was exercised.
    for kind in [
        "cold biased",
        "cold trusted",
        "prefill biased",
        "hit rate trusted",
        "hit rate biased",
        "server trusted",
        "server biased",
    ] {
        assert!(
            held.get(kind).copied().unwrap_or(0) > 0,
            "no {kind}: {held:?}"
        );
    }
}

/// A row's series as the published figure spells it.
fn labels(series: &Value) -> String {
    let parts: Vec<String> = series
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| format!("{k}=\"{}\"", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    format!("{{{}}}", parts.join(","))
}

/// The sample runs' findings: none over 10 at warning or above unless it
/// has that many distinct causes (one finding per root cause).
#[test]
fn no_sample_run_repeats_one_cause() {
    let (report, _) = json_report(&[run_dir("").as_path()], &[]);
    for run in report["runs"].as_array().expect("runs") {
        let loud: Vec<&Value> = run["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["severity"] != "info")
            .collect();
        let causes: HashSet<(String, String)> = loud
            .iter()
            .map(|f| {
                (
                    f["code"].as_str().unwrap_or("").to_string(),
                    f["endpoint"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        assert!(
            loud.len() <= 10 || loud.len() == causes.len(),
            "{}: {} findings for {} causes",
            run["path"],
            loud.len(),
            causes.len()
        );
        // One cause, one finding: no two at warning or above share code,
        // endpoint, file and series unless each has its own line.
        let mut seen = HashSet::new();
        for f in &loud {
            if f["line"].is_null() {
                let key = (
                    f["code"].to_string(),
                    f["endpoint"].to_string(),
                    f["file"].to_string(),
                    f["series"].to_string(),
                );
                assert!(seen.insert(key), "{}: repeated {}", run["path"], f["code"]);
            }
        }
    }
}
