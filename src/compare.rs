//! `artifact-check compare A B`: two runs audited and cleaned the same way
//! (the same settings and exclusions), then their published statistics side
//! by side with the difference B - A, its 95 % interval and whether it is
//! beyond noise. Per-request statistics and the hit rate: a moving-block
//! bootstrap (the requests in start order resampled in blocks of
//! max(concurrency, sqrt(n)) consecutive requests, since requests in flight
//! together share the server's state; seeded, so the same runs give the same
//! interval). Throughputs: Welch's interval over 10 equal time slices of
//! each run's window (a throughput is a rate over time, not a mean over
//! requests); and a warning for every reason the comparison is
//! unsafe: a contaminated run, different AIPerf versions or configurations,
//! very different cold-request shares.

use std::path::Path;

use rayon::prelude::*;

use crate::artifacts::records::{Metric, Phase, Record};
use crate::config::Settings;
use crate::findings::{Finding, Severity, Unit};
use crate::model::connection::Temperature;
use crate::model::selection::{self, Exclusions};
pub use crate::results::comparison::{Comparison, Row, Setup};
use crate::results::published::Verdict;
use crate::stats::{self, Stat};

crate::define_codes! { "compare";
    COMPARE_REGRESSION => ("compare-regression", Error,
        "B is worse than A beyond noise and beyond --fail-on-regression"),
    COMPARE_IMPOSSIBLE_VALUES => ("compare-impossible-values", Error,
        "A run's profiling records hold values no AIPerf writes for a compared metric: its statistics are over the other records only, so no regression in them can be ruled out"),
    COMPARE_CONTAMINATED => ("compare-contaminated", Warning,
        "A compared number of a run is not to be trusted (biased or wrong for a cause the comparison's cleaning does not remove): so is the difference"),
    COMPARE_CONFIG_DIFFERS => ("compare-config-differs", Warning,
        "The runs differ in AIPerf version or configuration: the difference is not the server's alone"),
    COMPARE_COLD_SHARE_DIFFERS => ("compare-cold-share-differs", Warning,
        "The runs' shares of cold-connection requests differ by more than 10 points"),
}

/// The per-request metrics compared (those both runs have).
const METRICS: &[Metric] = &[
    Metric::TimeToFirstToken,
    Metric::InterTokenLatency,
    Metric::RequestLatency,
    Metric::OutputTokenThroughputPerUser,
];

/// Cold shares further apart than this (points) make a comparison unsafe.
const COLD_SHARE_PP: f64 = 10.0;
/// Realised mean input or output lengths further apart than this (%).
const LENGTH_PCT: f64 = 5.0;

/// How the runs are compared.
#[derive(Debug, Clone)]
pub struct Options {
    /// Records dropped from both (warmup and failed ones always).
    pub exclusions: Exclusions,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Bootstrap seed.
    pub seed: u64,
    /// A difference for the worse beyond noise and beyond this (%) is a
    /// regression (an error).
    pub fail_on_regression_pct: Option<f64>,
}

struct Side {
    report: crate::RunReport,
    /// Compared metrics with values refused as impossible in profiling
    /// records, and how many: their statistics are over the other records
    /// only.
    refused: Vec<(Metric, u64)>,
    kept: Vec<Record>,
    window: Option<(u64, u64)>,
    setup: Setup,
}

fn side(dir: &Path, settings: &Settings, ex: Exclusions) -> Result<Side, String> {
    // Read once: audited, then its records cleaned.
    let run = crate::artifacts::load(dir);
    let model = crate::model::RunModel::build(&run, settings);
    let report = crate::audit_with_model(
        dir,
        &run,
        &model,
        settings,
        &crate::RunOptions::default(),
        &[],
    );
    let refused = (run.records.as_ref())
        .map(|r| r.refused_in_profiling(METRICS))
        .unwrap_or_default();
    let records = run.records.map(|r| r.records).ok_or_else(|| {
        format!(
            "{}: {} could not be read: a comparison needs the per-request records",
            dir.display(),
            crate::artifacts::records::FILE
        )
    })?;
    let steady = ex.steady_state.then(|| model.steady(&records));
    let sel = selection::select_with(&records, &model.temperatures, ex, steady);
    let mut kept: Vec<Record> = sel
        .kept
        .into_iter()
        .filter(|r| r.is_success())
        .cloned()
        .collect();
    // Start order: the bootstrap's blocks are requests that ran together.
    kept.sort_by_key(|r| (r.request_start_ns, r.line));
    let endpoint = run
        .summary
        .as_ref()
        .and_then(|s| s.input_config.as_ref())
        .and_then(|c| c.endpoint.clone());
    let profiling: Vec<&Record> = records
        .iter()
        .filter(|r| r.phase == Phase::Profiling)
        .collect();
    let cold = records
        .iter()
        .zip(&model.temperatures)
        .filter(|(r, t)| r.phase == Phase::Profiling && **t == Temperature::Cold)
        .count();
    let mean = |m: Metric| {
        stats::mean(
            &kept
                .iter()
                .filter_map(|r| r.values.get(m))
                .collect::<Vec<_>>(),
        )
    };
    let phase = report.phases.get("profiling");
    let setup = Setup {
        aiperf_version: report.aiperf_version.clone(),
        concurrency: phase.and_then(|p| p.concurrency),
        streaming: endpoint.as_ref().and_then(|e| e.streaming).or_else(|| {
            Some(
                kept.iter()
                    .any(|r| r.values.get(Metric::TimeToFirstToken).is_some()),
            )
        }),
        endpoint_type: endpoint.as_ref().and_then(|e| e.kind.clone()),
        endpoints: endpoint.as_ref().map(|e| e.urls.len()).filter(|n| *n > 0),
        input_tokens_mean: mean(Metric::InputSequenceLength),
        output_tokens_mean: mean(Metric::OutputSequenceLength),
        cold_share: (!profiling.is_empty()).then(|| cold as f64 / profiling.len() as f64),
        records: kept.len(),
        error_findings: report.count(Severity::Error),
    };
    Ok(Side {
        window: phase.and_then(|p| p.server_window_ns),
        report,
        refused,
        kept,
        setup,
    })
}

/// A statistic of some records (indices into `rs`).
type StatFn<'a> = Box<dyn Fn(&[&Record]) -> Option<f64> + Sync + 'a>;

fn record_stat(m: Metric, s: Stat) -> StatFn<'static> {
    Box::new(move |rs: &[&Record]| {
        let mut v: Vec<f64> = rs.iter().filter_map(|r| r.values.get(m)).collect();
        if v.is_empty() {
            return None;
        }
        stats::Summary::of_values(&mut v).get(s)
    })
}

fn throughput(window: Option<(u64, u64)>, per: crate::model::steady::Per) -> StatFn<'static> {
    Box::new(move |rs: &[&Record]| crate::model::steady::rate(rs, window, per, false))
}

fn hit_rate() -> StatFn<'static> {
    Box::new(|rs: &[&Record]| crate::model::cache::client_rate(rs.iter().copied()).hit_rate)
}

/// Block length of the moving-block bootstrap: max(concurrency, sqrt(n)),
/// at most half the requests.
fn block_len(n: usize, concurrency: usize) -> usize {
    let root = (n as f64).sqrt().ceil() as usize;
    concurrency.max(root).clamp(1, (n / 2).max(1))
}

/// Whether `n` requests put at least 5 beyond the percentile `stat`.
fn tail_known(stat: Stat, n: usize) -> bool {
    let beyond = match stat {
        Stat::Mean | Stat::P50 => 0.5,
        Stat::P90 => 0.1,
        Stat::P99 => 0.01,
    };
    n as f64 * beyond >= 5.0
}

/// Time slices of a throughput's interval.
const SLICES: u64 = 10;

/// Welch's 95 % interval of b - a over each run's throughput in
/// [`SLICES`] equal slices of its window.
fn slice_interval(
    a: &[&Record],
    b: &[&Record],
    wa: Option<(u64, u64)>,
    wb: Option<(u64, u64)>,
    per: crate::model::steady::Per,
) -> Option<[f64; 2]> {
    let rates = |rs: &[&Record], w: Option<(u64, u64)>| -> Option<Vec<f64>> {
        let (lo, hi) = w?;
        let step = hi.checked_sub(lo)? / SLICES;
        (step > 0).then(|| {
            (0..SLICES)
                .filter_map(|k| {
                    let s = (lo + k * step, lo + (k + 1) * step);
                    crate::model::steady::rate(rs, Some(s), per, true)
                })
                .collect()
        })
    };
    let d = stats::welch_interval(&rates(b, wb)?, &rates(a, wa)?, 0.95)?;
    Some([d.low, d.high])
}

/// The statistic's block-bootstrap distribution of b - a: its 2.5th and
/// 97.5th percentiles. Records are in start order.
fn interval<'r>(
    a: &[&'r Record],
    b: &[&'r Record],
    fa: &StatFn,
    fb: &StatFn,
    opts: &Options,
    salt: u64,
    concurrency: usize,
) -> Option<[f64; 2]> {
    if a.len() < 2 || b.len() < 2 || opts.resamples < 20 {
        return None;
    }
    let diffs: Vec<f64> = (0..opts.resamples)
        .into_par_iter()
        .filter_map(|i| {
            let mut rng = fastrand::Rng::with_seed(opts.seed ^ salt.rotate_left(17) ^ (i as u64));
            let mut pick = |rs: &[&'r Record]| -> Vec<&'r Record> {
                let n = rs.len();
                let block = block_len(n, concurrency);
                let mut out = Vec::with_capacity(n + block);
                while out.len() < n {
                    let at = rng.usize(..=n - block);
                    out.extend_from_slice(&rs[at..at + block]);
                }
                out.truncate(n);
                out
            };
            let (ra, rb) = (pick(a), pick(b));
            Some(fb(&rb)? - fa(&ra)?)
        })
        .collect();
    if diffs.len() < opts.resamples / 2 {
        return None;
    }
    let s = stats::sorted(diffs);
    Some([stats::percentile(&s, 2.5)?, stats::percentile(&s, 97.5)?])
}

/// One statistic to compare: how to compute it on each run.
struct Spec {
    metric: &'static str,
    stat: Stat,
    fa: StatFn<'static>,
    fb: StatFn<'static>,
    higher_is_better: bool,
    /// A throughput (interval over time slices) and what it counts.
    per: Option<crate::model::steady::Per>,
}

/// Every statistic compared, in report order.
fn specs(sa: &Side, sb: &Side) -> Vec<Spec> {
    use crate::model::steady::Per;
    let mut out = Vec::new();
    for &m in METRICS {
        for &stat in Stat::ALL {
            out.push(Spec {
                metric: m.tag(),
                stat,
                fa: record_stat(m, stat),
                fb: record_stat(m, stat),
                higher_is_better: m == Metric::OutputTokenThroughputPerUser,
                per: None,
            });
        }
    }
    for (metric, per) in [
        ("output_token_throughput", Per::Tokens),
        ("request_throughput", Per::Requests),
    ] {
        out.push(Spec {
            metric,
            stat: Stat::Mean,
            fa: throughput(sa.window, per),
            fb: throughput(sb.window, per),
            higher_is_better: true,
            per: Some(per),
        });
    }
    out.push(Spec {
        metric: "prefix_cache_hit_rate",
        stat: Stat::Mean,
        fa: hit_rate(),
        fb: hit_rate(),
        higher_is_better: true,
        per: None,
    });
    out
}

/// One statistic of both runs with its interval; `None` when neither run
/// has it.
fn row(
    spec: &Spec,
    salt: u64,
    (ka, kb): (&[&Record], &[&Record]),
    (sa, sb): (&Side, &Side),
    opts: &Options,
    concurrency: usize,
) -> Option<Row> {
    let (va, vb) = ((spec.fa)(ka), (spec.fb)(kb));
    if va.is_none() && vb.is_none() {
        return None;
    }
    let (iv, method) = match spec.per {
        Some(per) => (
            slice_interval(ka, kb, sa.window, sb.window, per),
            "welch_95_time_slices",
        ),
        None => (
            interval(ka, kb, &spec.fa, &spec.fb, opts, salt, concurrency),
            "block_bootstrap_95",
        ),
    };
    Some(Row {
        metric: spec.metric,
        stat: spec.stat,
        a: va,
        b: vb,
        difference: va.zip(vb).map(|(x, y)| y - x),
        difference_pct: stats::bias_pct(vb, va),
        // A bootstrap cannot tell a tail percentile with fewer than 5
        // requests beyond it in either run (p99 of 80 requests is nearly
        // the maximum): shown, not judged.
        significant: iv
            .filter(|_| tail_known(spec.stat, ka.len().min(kb.len())))
            .map(|[lo, hi]| lo > 0.0 || hi < 0.0),
        interval: iv,
        method,
        higher_is_better: spec.higher_is_better,
        unit: unit_of(spec.metric, sa).or_else(|| unit_of(spec.metric, sb)),
    })
}

/// Compares run `b` with run `a`.
pub fn compare(
    a: &Path,
    b: &Path,
    settings: &Settings,
    opts: &Options,
) -> Result<Comparison, String> {
    let (sa, sb) = rayon::join(
        || side(a, settings, opts.exclusions),
        || side(b, settings, opts.exclusions),
    );
    let (sa, sb) = (sa?, sb?);
    let (ka, kb): (Vec<&Record>, Vec<&Record>) =
        (sa.kept.iter().collect(), sb.kept.iter().collect());
    let concurrency = sa.setup.concurrency.max(sb.setup.concurrency).unwrap_or(1) as usize;
    let rows: Vec<Row> = specs(&sa, &sb)
        .iter()
        .enumerate()
        .filter_map(|(i, spec)| row(spec, i as u64, (&ka, &kb), (&sa, &sb), opts, concurrency))
        .collect();
    let mut findings = unsafe_findings(&sa, &sb, &rows, opts.exclusions);
    findings.extend(regressions(&rows, opts.fail_on_regression_pct));
    let fail_on = settings.fail_on;
    let exit_code = i32::from(findings.iter().any(|f| f.severity >= fail_on));
    Ok(Comparison {
        a: a.display().to_string(),
        b: b.display().to_string(),
        interval_method: "per-request statistics and hit rate: moving-block bootstrap, 95 % \
                          (block_bootstrap_95); throughputs: Welch's t over 10 time slices, \
                          95 % (welch_95_time_slices)",
        resamples: opts.resamples,
        exclude_cold: opts.exclusions.cold,
        steady_state: opts.exclusions.steady_state,
        setup: [sa.setup, sb.setup],
        rows,
        findings,
        exit_code,
    })
}

/// A metric's unit as a run's published numbers give it.
fn unit_of(metric: &str, s: &Side) -> Option<String> {
    s.report
        .published
        .iter()
        .find(|p| p.metric == metric && p.endpoint.is_none())
        .and_then(|p| p.unit.clone())
}

/// Every reason the two runs should not be compared as they are.
fn unsafe_findings(a: &Side, b: &Side, rows: &[Row], ex: Exclusions) -> Vec<Finding> {
    let mut out = impossible_values(a, b);
    out.extend(contaminated(a, b, rows, ex));
    out.extend(config_differs(&a.setup, &b.setup));
    out.extend(cold_share_differs(&a.setup, &b.setup));
    out
}

/// A run whose records hold impossible values of a compared metric: those
/// statistics are unknown (not computed without the values), so a gate
/// cannot say there is no regression in them.
fn impossible_values(a: &Side, b: &Side) -> Vec<Finding> {
    let mut out = Vec::new();
    for (name, s) in [("A", a), ("B", b)] {
        if s.refused.is_empty() {
            continue;
        }
        let named: Vec<String> = s
            .refused
            .iter()
            .map(|(m, n)| format!("{} in {n} record(s)", m.tag()))
            .collect();
        let most = s.refused.iter().map(|&(_, n)| n).max().unwrap_or(0);
        out.push(
            Finding::new(
                COMPARE_IMPOSSIBLE_VALUES,
                format!(
                    "run {name} ({}): its profiling records hold values no AIPerf writes ({}); \
                     they are kept out, so its statistics of these metrics are over the other \
                     records only (or none) and no regression in them can be ruled out; audit it \
                     (`artifact-check {}`)",
                    s.report.path,
                    named.join(", "),
                    s.report.path
                ),
            )
            .file(s.report.path.clone())
            .effect("records", most as f64, Unit::Count),
        );
    }
    out
}

/// A compared number one run publishes that is not to be trusted, for a
/// cause the comparison's cleaning does not remove: `(metric stat, codes)`.
fn untrusted_compared(
    s: &Side,
    rows: &[Row],
    ex: Exclusions,
    cold_alike: bool,
) -> Vec<(String, Vec<&'static str>)> {
    use crate::findings::Over;
    let removed = |code: crate::findings::Code, metric: &str, stat: &str| {
        // Every figure the cause moves here is over records the cleaning
        // drops (cold requests with --exclude-cold, the opening wave and the
        // drain tail with --steady-state).
        let moved: Vec<&crate::findings::Moved> = s
            .report
            .findings
            .iter()
            .filter(|f| f.code == code)
            .flat_map(|f| &f.metrics)
            .filter(|m| m.metric == metric && m.stat == stat)
            .collect();
        !moved.is_empty()
            && moved.iter().all(|m| match m.over {
                // Cold requests in like shares bias both runs alike (unlike
                // shares are `compare-cold-share-differs`).
                Some(Over::WarmOnly) => ex.cold || cold_alike,
                Some(Over::SteadyState) => ex.steady_state,
                None => false,
            })
    };
    let mut out = Vec::new();
    for r in rows {
        let stat = r.stat.aiperf();
        let Some(p) = s
            .report
            .published
            .iter()
            .find(|p| p.endpoint.is_none() && p.metric == r.metric && p.stat == stat)
        else {
            continue;
        };
        let unsafe_ = matches!(p.verdict, Verdict::Biased | Verdict::Wrong)
            || (p.verdict == Verdict::CannotTell && !p.causes.is_empty());
        let codes: Vec<&'static str> = p
            .causes
            .iter()
            .filter(|c| !removed(**c, r.metric, stat))
            .map(|c| c.as_str())
            .collect();
        if unsafe_ && !codes.is_empty() {
            out.push((format!("{} {stat}", r.metric), codes));
        }
    }
    out
}

/// A run whose compared numbers are not to be trusted (a server-side error
/// compare does not use is no reason, nor cold requests in like shares in
/// both runs).
fn contaminated(a: &Side, b: &Side, rows: &[Row], ex: Exclusions) -> Vec<Finding> {
    let mut out = Vec::new();
    let cold_alike = cold_share_differs(&a.setup, &b.setup).is_none();
    for (name, s) in [("A", a), ("B", b)] {
        let bad = untrusted_compared(s, rows, ex, cold_alike);
        if bad.is_empty() {
            continue;
        }
        let mut codes: Vec<&str> = bad.iter().flat_map(|(_, c)| c.iter().copied()).collect();
        codes.sort_unstable();
        codes.dedup();
        let numbers: Vec<&str> = bad.iter().map(|(n, _)| n.as_str()).collect();
        out.push(
            Finding::new(
                COMPARE_CONTAMINATED,
                format!(
                    "run {name} ({}): {} compared number(s) are not to be trusted ({}; {}), \
                     and neither is a difference taken from them; audit it (`artifact-check \
                     {}`), and compare with the cleaning that removes the cause \
                     (--exclude-cold, --steady-state) where there is one",
                    s.report.path,
                    numbers.len(),
                    crate::text::clip(&numbers.join(", "), 120),
                    codes.join(", "),
                    s.report.path
                ),
            )
            .file(s.report.path.clone())
            .effect("untrusted_numbers", numbers.len() as f64, Unit::Count),
        );
    }
    out
}

/// A different version or configuration.
fn config_differs(x: &Setup, y: &Setup) -> Option<Finding> {
    let mut differs = Vec::new();
    let mut field = |name: &str, p: String, q: String| {
        if p != q {
            differs.push(format!("{name} {p} vs {q}"));
        }
    };
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
    field("AIPerf", opt(&x.aiperf_version), opt(&y.aiperf_version));
    let num = |v: Option<u64>| v.map_or("?".into(), |n| n.to_string());
    field("concurrency", num(x.concurrency), num(y.concurrency));
    let b = |v: Option<bool>| v.map_or("?".into(), |b| b.to_string());
    field("streaming", b(x.streaming), b(y.streaming));
    field(
        "endpoint type",
        opt(&x.endpoint_type),
        opt(&y.endpoint_type),
    );
    let n = |v: Option<usize>| v.map_or("?".into(), |n| n.to_string());
    field("endpoints", n(x.endpoints), n(y.endpoints));
    for (name, p, q) in [
        (
            "mean input tokens",
            x.input_tokens_mean,
            y.input_tokens_mean,
        ),
        (
            "mean output tokens",
            x.output_tokens_mean,
            y.output_tokens_mean,
        ),
    ] {
        if stats::bias_pct(q, p).is_some_and(|d| d.abs() > LENGTH_PCT) {
            differs.push(format!(
                "{name} {:.1} vs {:.1}",
                p.unwrap_or(0.0),
                q.unwrap_or(0.0)
            ));
        }
    }
    (!differs.is_empty()).then(|| {
        Finding::new(
            COMPARE_CONFIG_DIFFERS,
            format!(
                "the runs differ in {}: the difference is not the server's alone",
                differs.join(", ")
            ),
        )
    })
}

/// Very different shares of cold-connection requests.
fn cold_share_differs(x: &Setup, y: &Setup) -> Option<Finding> {
    let (p, q) = (x.cold_share?, y.cold_share?);
    let pp = (q - p) * 100.0;
    (pp.abs() > COLD_SHARE_PP).then(|| {
        Finding::new(
            COMPARE_COLD_SHARE_DIFFERS,
            format!(
                "cold-connection requests are {:.1} % of A's profiling requests and \
                         {:.1} % of B's ({pp:+.1} pp): TTFT and latency differ by connection \
                         setup as well; compare with --exclude-cold",
                p * 100.0,
                q * 100.0
            ),
        )
        .effect("cold_share_difference", pp, Unit::Pp)
    })
}

/// Differences for the worse, beyond noise and beyond `pct`.
fn regressions(rows: &[Row], pct: Option<f64>) -> Vec<Finding> {
    let Some(limit) = pct else {
        return Vec::new();
    };
    rows.iter()
        .filter(|r| r.significant == Some(true))
        .filter_map(|r| {
            let d = r.difference_pct?;
            let worse = if r.higher_is_better { -d } else { d };
            (worse > limit).then(|| {
                let iv = r.interval.unwrap_or([f64::NAN; 2]);
                Finding::new(
                    COMPARE_REGRESSION,
                    format!(
                        "{} {}: B {:.4} vs A {:.4} ({d:+.1} %, {} interval of B - A {:+.4} to \
                         {:+.4}): worse beyond noise and beyond the {limit} % allowed",
                        r.metric,
                        r.stat.as_str(),
                        r.b.unwrap_or(f64::NAN),
                        r.a.unwrap_or(f64::NAN),
                        r.method,
                        iv[0],
                        iv[1]
                    ),
                )
                .field(format!("{}.{}", r.metric, r.stat.as_str()))
                .effect("difference_pct", d, Unit::Percent)
            })
        })
        .collect()
}
