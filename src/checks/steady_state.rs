//! Check `steady_state`: the opening wave and the drain tail, and what they
//! do to the published numbers.
//!
//! What it checks: `model::steady` finds the wave (by its effect on TTFT,
//! connection time taken off) and the tail (the requests that ran mostly
//! after the last one was sent). For TTFT, ITL, request latency and per-user
//! output throughput (mean, p50, p90, p99), and for output-token and request
//! throughput, it compares every successful profiling record (what AIPerf
//! publishes) with the steady ones only, in percent, and tests the wave's
//! and the tail's difference from steady state against noise (Welch's t,
//! 95 %).
//!
//! Why it matters: the numbers were measured right, but a p99 set by the
//! server's first requests, or an ITL lowered by the last ones running
//! alone, describes the start and the end of the run, not the service.

use std::sync::Arc;

use serde::Serialize;

use super::{Check, CheckOutput, CheckReport, CheckStatus, Ctx, Detail};
use crate::artifacts::records::{self, Metric, Record, RequestRef};
use crate::config::SteadySettings;
use crate::findings::{Finding, Moved, Over, Unit, MAX_LISTED_IDS};
use crate::model::steady::{Per, Rate, SteadyState};
use crate::results::published::{Figure, Looked, QUOTED_STATS, THROUGHPUTS};
use crate::stats::{self, DiffInterval, Stat};
use rayon::prelude::*;

/// The check.
pub const CHECK: Check = Check {
    name: "steady_state",
    codes: &[CODES],
    run,
    timeline: false,
};

crate::define_codes! { "steady_state";
    RAMP_UP_BIAS => ("ramp-up-bias", Warning,
        "The opening wave (the run's start, not its steady service) moves a published statistic by more than the threshold"),
    DRAIN_TAIL_BIAS => ("drain-tail-bias", Warning,
        "The drain tail (the last requests running at falling concurrency) moves a published statistic by more than the threshold"),
}

/// The per-request metrics compared.
const METRICS: &[Metric] = &[
    Metric::TimeToFirstToken,
    Metric::InterTokenLatency,
    Metric::RequestLatency,
    Metric::OutputTokenThroughputPerUser,
];

/// One (metric, statistic) row: all profiling records vs steady state.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Metric tag, or `output_token_throughput` / `request_throughput`.
    pub metric: &'static str,
    /// The statistic (`mean` for the throughputs: over their window).
    pub stat: Stat,
    /// Over every successful profiling record (as AIPerf publishes it).
    pub all: Option<f64>,
    /// Over the steady records (throughputs: over the steady window).
    pub steady: Option<f64>,
    /// `(all - steady) / steady x 100`.
    pub bias_pct: Option<f64>,
}

/// The opening wave.
#[derive(Debug, Clone, Serialize)]
pub struct Wave {
    /// Its requests.
    pub requests: usize,
    /// Their `x_request_id`s, in arrival order: the first
    /// [`MAX_LISTED_IDS`].
    pub request_ids: Vec<RequestRef>,
    /// Its requests beyond those listed (written when nonzero).
    #[serde(skip_serializing_if = "crate::findings::none_unlisted")]
    pub request_ids_unlisted: usize,
    /// Seconds from the first profiling request's start to the last wave
    /// request's.
    pub started_within_s: f64,
    /// Median of the basis value less DNS + connect (ms): wave, steady.
    pub median_ms: f64,
    /// The steady median (ms).
    pub steady_median_ms: f64,
    /// Of its requests, those that paid DNS or connect.
    pub paid_connection: usize,
    /// Mean DNS + connect of its requests (ms).
    pub connection_ms_mean: f64,
    /// Mean of the rest of the basis value (ms): waiting at the run's start,
    /// in the server (start, queueing) or the load generator.
    pub server_ms_mean: f64,
    /// mean(wave) - mean(steady) of the basis value, Welch 95 %.
    pub minus_steady: Option<DiffInterval>,
    /// Whether the difference is larger than noise.
    pub larger_than_noise: bool,
}

/// The drain tail.
#[derive(Debug, Clone, Serialize)]
pub struct Tail {
    /// Its requests.
    pub requests: usize,
    /// Their `x_request_id`s, in arrival order: the first
    /// [`MAX_LISTED_IDS`].
    pub request_ids: Vec<RequestRef>,
    /// Its requests beyond those listed (written when nonzero).
    #[serde(skip_serializing_if = "crate::findings::none_unlisted")]
    pub request_ids_unlisted: usize,
    /// Requests in flight when the last one was sent.
    pub inflight_at_drain: usize,
    /// The metric its difference is tested on (`inter_token_latency`, or
    /// `request_latency` without it).
    pub metric: Metric,
    /// Its mean of that metric, and the steady mean.
    pub mean: Option<f64>,
    /// The steady records' mean.
    pub steady_mean: Option<f64>,
    /// mean(tail) - mean(steady), Welch 95 %.
    pub minus_steady: Option<DiffInterval>,
    /// Whether the difference is larger than noise (`null`: too few).
    pub larger_than_noise: Option<bool>,
}

/// Figures of the `steady_state` check.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// What was found from the request times.
    #[serde(flatten)]
    pub state: SteadyState,
    /// Successful profiling records in the steady state.
    pub steady_records: usize,
    /// The opening wave, when there is one.
    pub wave: Option<Wave>,
    /// The drain tail, when it holds requests.
    pub tail: Option<Tail>,
    /// All vs steady, per metric and statistic.
    pub metrics: Vec<Row>,
    /// Thresholds in force.
    pub bias_pct: f64,
}

impl CheckReport for Report {
    /// Each statistic it compared over the steady state, vouched for; with
    /// no steady state found, the ones it would have, could not tell.
    fn figures(&self, reason: Option<&str>) -> Vec<Figure> {
        if let Some(r) = reason {
            let metrics = [
                "time_to_first_token",
                "request_latency",
                "inter_token_latency",
                "output_token_throughput_per_user",
            ];
            let client = metrics.iter().flat_map(|m| {
                QUOTED_STATS.iter().map(move |s| {
                    Figure::client(*m, *s, Looked::CannotTell(format!("steady state: {r}")))
                })
            });
            let runs = THROUGHPUTS.iter().map(|t| {
                Figure::client(*t, "avg", Looked::CannotTell(format!("steady state: {r}")))
            });
            return client.chain(runs).collect();
        }
        self.metrics
            .iter()
            .map(|x| {
                let looked = if x.steady.is_some() {
                    Looked::Vouches
                } else {
                    Looked::CannotTell("no steady-state value to compare it with".into())
                };
                Figure::client(x.metric, x.stat.aiperf(), looked)
            })
            .collect()
    }

    fn summary(&self, reason: Option<&str>) -> String {
        if let Some(r) = reason {
            return format!("cannot tell: {r}");
        }
        let wave = self.wave.as_ref().map_or("no opening wave".into(), |w| {
            format!(
                "opening wave of {} (median {:.1} ms vs {:.1} ms steady)",
                w.requests, w.median_ms, w.steady_median_ms
            )
        });
        let tail = self.tail.as_ref().map_or("no drain tail".into(), |t| {
            format!("drain tail of {}", t.requests)
        });
        format!(
            "{wave}; {tail}; {} of {} records steady",
            self.steady_records, self.state.records
        )
    }

    fn details(&self, status: CheckStatus) -> Vec<Detail> {
        if !matches!(status, CheckStatus::Warn | CheckStatus::Fail) {
            return Vec::new();
        }
        let f = |v: Option<f64>| v.map_or("n/a".into(), |x| format!("{x:.4}"));
        let rows = self
            .metrics
            .iter()
            .map(|r| {
                vec![
                    r.metric.to_string(),
                    r.stat.as_str().to_string(),
                    f(r.all),
                    f(r.steady),
                    r.bias_pct.map_or("n/a".into(), |b| format!("{b:+.1} %")),
                ]
            })
            .collect();
        vec![Detail {
            header: vec!["metric", "stat", "all", "steady", "bias"],
            rows,
        }]
    }
}

/// Runs the check.
pub fn run(ctx: &Ctx) -> CheckOutput {
    let s = &ctx.settings.steady;
    let Some(records) = ctx.records() else {
        return CheckOutput {
            report: Arc::new(empty(s)),
            findings: Vec::new(),
            cannot_tell: Some(format!("{} was not read", records::FILE)),
        };
    };
    let state = ctx.model.steady(records).clone();
    let mut report = empty(s);
    if let Some(reason) = state.reason.clone().filter(|_| state.basis.is_none()) {
        report.state = state;
        return CheckOutput {
            report: Arc::new(report),
            findings: Vec::new(),
            cannot_tell: Some(reason),
        };
    }
    let window = ctx.model.profiling.server_window_ns;
    let mut split = Split::of(records, &state, window);
    report.steady_records = split.steady;
    // The noise tests first: they sum the columns in file order, which
    // the selections of `rows` do not keep.
    report.wave = wave(&split, &state);
    report.tail = tail(&split, &state);
    report.metrics = rows(&mut split);
    let mut findings = Vec::new();
    findings.extend(ramp_finding(&report, s));
    findings.extend(drain_finding(&report, s));
    report.state = state;
    CheckOutput {
        report: Arc::new(report),
        findings,
        cannot_tell: None,
    }
}

fn empty(s: &SteadySettings) -> Report {
    Report {
        state: SteadyState::default(),
        steady_records: 0,
        wave: None,
        tail: None,
        metrics: Vec::new(),
        bias_pct: s.bias_pct,
    }
}

/// The successful profiling records, gathered in one walk: each compared
/// metric's values over all of them and over the steady ones (file order),
/// the wave's and the tail's records, and the throughputs.
struct Split<'a> {
    /// Successful profiling records, and the steady ones among them.
    all: usize,
    steady: usize,
    /// Per [`METRICS`] entry: its values over all, over the steady ones.
    values_all: Vec<Vec<f64>>,
    values_steady: Vec<Vec<f64>>,
    wave: Vec<&'a Record>,
    tail: Vec<&'a Record>,
    /// The first start among all.
    first_start: Option<u64>,
    /// Per throughput of `THROUGHPUT_ROWS`: over the whole window, over the
    /// steady window.
    rates: Vec<(Option<f64>, Option<f64>)>,
}

/// The run-level throughputs compared, as the rows name them.
const THROUGHPUT_ROWS: [(&str, Per); 2] = [
    ("output_token_throughput", Per::Tokens),
    ("request_throughput", Per::Requests),
];

impl<'a> Split<'a> {
    fn of(records: &'a [Record], st: &SteadyState, window: Option<(u64, u64)>) -> Split<'a> {
        let pick = |ix: &[usize]| ix.iter().map(|&i| &records[i]).collect::<Vec<_>>();
        let ok = || {
            (records.iter().enumerate())
                .filter(|(_, r)| r.phase == records::Phase::Profiling && r.is_success())
        };
        // Without the profiling window, the span of the records (a walk of
        // its own: the rates below need it first).
        let span = window.or_else(|| {
            let a = ok().map(|(_, r)| r.request_start_ns).min()?;
            let b = ok().map(|(_, r)| r.request_end_ns).max()?;
            Some((a, b))
        });
        let mut rates: Vec<(Rate, Rate)> = THROUGHPUT_ROWS
            .iter()
            .map(|&(_, per)| {
                (
                    Rate::new(span, per, false),
                    Rate::new(st.window_ns, per, true),
                )
            })
            .collect();
        let mut split = Split {
            all: 0,
            steady: 0,
            // Sized for every record up front (reserved, not touched):
            // grown by doubling they would be copied at every step.
            values_all: (METRICS.iter())
                .map(|_| Vec::with_capacity(records.len()))
                .collect(),
            values_steady: (METRICS.iter())
                .map(|_| Vec::with_capacity(records.len()))
                .collect(),
            wave: pick(&st.wave),
            tail: pick(&st.tail),
            first_start: None,
            rates: Vec::new(),
        };
        for (i, r) in ok() {
            let steady = !st.excludes(i);
            split.all += 1;
            split.steady += usize::from(steady);
            let t = r.request_start_ns;
            split.first_start = Some(split.first_start.map_or(t, |f| f.min(t)));
            for (k, &m) in METRICS.iter().enumerate() {
                if let Some(v) = r.values.get(m) {
                    split.values_all[k].push(v);
                    if steady {
                        split.values_steady[k].push(v);
                    }
                }
            }
            for (whole, part) in &mut rates {
                whole.add(r);
                part.add(r);
            }
        }
        split.rates = rates
            .iter()
            .map(|(w, p)| (w.finish(), p.finish()))
            .collect();
        split
    }

    /// The steady records' values of `m` (file order), if compared.
    fn steady_values(&self, m: Metric) -> &[f64] {
        METRICS
            .iter()
            .position(|&x| x == m)
            .map_or(&[], |k| &self.values_steady[k])
    }
}

/// The ids a report lists of `rs` ([`MAX_LISTED_IDS`]).
fn listed(rs: &[&Record]) -> Vec<RequestRef> {
    rs.iter()
        .take(MAX_LISTED_IDS)
        .map(|r| r.request_ref())
        .collect()
}

fn values(rs: &[&Record], m: Metric) -> Vec<f64> {
    rs.iter().filter_map(|r| r.values.get(m)).collect()
}

/// All vs steady for every metric and statistic, then the throughputs;
/// takes the columns (the selections reorder them).
fn rows(split: &mut Split) -> Vec<Row> {
    let columns: Vec<(Metric, Vec<f64>, Vec<f64>)> = METRICS
        .iter()
        .zip(std::mem::take(&mut split.values_all))
        .zip(std::mem::take(&mut split.values_steady))
        .filter(|((_, a), _)| !a.is_empty())
        .map(|((&m, a), b)| (m, a, b))
        .collect();
    let summaries: Vec<(Metric, stats::Summary, stats::Summary)> = columns
        .into_par_iter()
        .map(|(m, mut a, mut b)| {
            (
                m,
                stats::Summary::of_values(&mut a),
                stats::Summary::of_values(&mut b),
            )
        })
        .collect();
    let mut out = Vec::new();
    for (m, sa, sb) in summaries {
        for stat in Stat::ALL.iter().copied() {
            let (all, steady) = (sa.get(stat), sb.get(stat));
            out.push(Row {
                metric: m.tag(),
                stat,
                all,
                steady,
                bias_pct: stats::bias_pct(all, steady),
            });
        }
    }
    for (&(name, _), &(all, steady)) in THROUGHPUT_ROWS.iter().zip(&split.rates) {
        if all.is_some() {
            out.push(Row {
                metric: name,
                stat: Stat::Mean,
                all,
                steady,
                bias_pct: stats::bias_pct(all, steady),
            });
        }
    }
    out
}

fn noise(a: &[f64], b: &[f64]) -> Option<DiffInterval> {
    stats::welch_interval(a, b, 0.95)
}

fn wave(split: &Split, st: &SteadyState) -> Option<Wave> {
    let basis = st.basis?;
    if split.wave.is_empty() {
        return None;
    }
    let paid = |r: &Record| crate::model::connection::setup_ms(r).unwrap_or(0.0);
    let n = split.wave.len() as f64;
    let connection: f64 = split.wave.iter().map(|r| paid(r)).sum::<f64>() / n;
    let total: f64 = values(&split.wave, basis).iter().sum::<f64>() / n;
    let first = split.first_start?;
    let last = split.wave.iter().map(|r| r.request_start_ns).max()?;
    let minus_steady = noise(&values(&split.wave, basis), split.steady_values(basis));
    Some(Wave {
        requests: split.wave.len(),
        request_ids: listed(&split.wave),
        request_ids_unlisted: split.wave.len().saturating_sub(MAX_LISTED_IDS),
        started_within_s: last.saturating_sub(first) as f64 / 1e9,
        median_ms: st.wave_median_ms?,
        steady_median_ms: st.steady_median_ms?,
        paid_connection: split.wave.iter().filter(|r| paid(r) > 0.0).count(),
        connection_ms_mean: connection,
        server_ms_mean: total - connection,
        // With one wave request (or no spread) the robust rule that found it
        // is the noise test: it is more than 3 robust SDs above steady.
        larger_than_noise: minus_steady.is_none_or(|d| d.excludes_zero()),
        minus_steady,
    })
}

fn tail(split: &Split, st: &SteadyState) -> Option<Tail> {
    if split.tail.is_empty() {
        return None;
    }
    let metric = if split
        .values_all
        .get(
            METRICS
                .iter()
                .position(|&m| m == Metric::InterTokenLatency)?,
        )
        .is_some_and(|v| !v.is_empty())
    {
        Metric::InterTokenLatency
    } else {
        Metric::RequestLatency
    };
    let (t, s) = (values(&split.tail, metric), split.steady_values(metric));
    let minus_steady = noise(&t, s);
    Some(Tail {
        requests: split.tail.len(),
        request_ids: listed(&split.tail),
        request_ids_unlisted: split.tail.len().saturating_sub(MAX_LISTED_IDS),
        inflight_at_drain: st.inflight_at_drain,
        metric,
        mean: stats::mean(&t),
        steady_mean: stats::mean(s),
        larger_than_noise: minus_steady.map(|d| d.excludes_zero()),
        minus_steady,
    })
}

/// The rows of `metrics` whose bias exceeds the threshold.
fn beyond<'a>(r: &'a Report, metrics: &[&str], stats: &[Stat], limit: f64) -> Vec<&'a Row> {
    r.metrics
        .iter()
        .filter(|x| metrics.contains(&x.metric) && stats.contains(&x.stat))
        .filter(|x| x.bias_pct.is_some_and(|b| b.abs() > limit))
        .collect()
}

fn sizes(rows: &[&Row]) -> String {
    rows.iter()
        .map(|x| {
            format!(
                "{} {} {:+.1} %",
                x.metric,
                x.stat.as_str(),
                x.bias_pct.unwrap_or(f64::NAN)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn ramp_finding(r: &Report, s: &SteadySettings) -> Option<Finding> {
    let w = r.wave.as_ref()?;
    let moved = beyond(
        r,
        &["time_to_first_token", "request_latency"],
        &[Stat::Mean, Stat::P90, Stat::P99],
        s.bias_pct,
    );
    if moved.is_empty() || !w.larger_than_noise {
        return None;
    }
    let basis = r.state.basis.map_or("time_to_first_token", Metric::tag);
    let interval = w.minus_steady.as_ref().map_or(String::new(), |d| {
        format!(
            " (wave minus steady mean {:+.1} ms, 95 % Welch interval {:+.1} to {:+.1} ms)",
            d.diff, d.low, d.high
        )
    });
    let conn = if w.paid_connection > 0 {
        format!(
            "; {} of them opened a connection, but DNS + connect is only {:.1} ms of their \
             {:.1} ms mean: the rest, {:.1} ms, is not the network but time they waited at the \
             run's start (the server's start or queueing, or the load generator's own start \
             of the phase)",
            w.paid_connection,
            w.connection_ms_mean,
            w.connection_ms_mean + w.server_ms_mean,
            w.server_ms_mean
        )
    } else {
        String::new()
    };
    let mut f = Finding::new(
        RAMP_UP_BIAS,
        format!(
            "the opening wave: the first {} profiling request(s) (started within {:.2} s) had \
             a median {basis} of {:.1} ms against {:.1} ms in steady state ({:.1}x){interval}{conn}; \
             they move {}. Publish the steady-state figures (`artifact-check clean \
             --steady-state`) or warm the server up until its first requests are served at \
             steady speed",
            w.requests,
            w.started_within_s,
            w.median_ms,
            w.steady_median_ms,
            w.median_ms / w.steady_median_ms,
            sizes(&moved)
        ),
    )
    .file(records::FILE)
    .field(format!("metrics.{basis}"))
    .expected_found(
        format!("steady-state {basis} median {:.1} ms", w.steady_median_ms),
        format!("{} request(s) at median {:.1} ms", w.requests, w.median_ms),
    )
    .effect("wave_requests", w.requests as f64, Unit::Count);
    f = with_biases(f, &moved);
    Some(f.effect("wave_connection_ms_mean", w.connection_ms_mean, Unit::Ms))
}

fn drain_finding(r: &Report, s: &SteadySettings) -> Option<Finding> {
    let t = r.tail.as_ref()?;
    let moved = beyond(
        r,
        &[
            "inter_token_latency",
            "output_token_throughput_per_user",
            "output_token_throughput",
            "request_throughput",
        ],
        &[Stat::Mean, Stat::P50, Stat::P90, Stat::P99],
        s.bias_pct,
    );
    if moved.is_empty() || t.larger_than_noise != Some(true) {
        return None;
    }
    let d = t.minus_steady.as_ref()?;
    let mut f = Finding::new(
        DRAIN_TAIL_BIAS,
        format!(
            "the drain tail: after the last profiling request was sent, {} request(s) in flight \
             finished with nothing replacing them; the {} that ran mostly after that had a mean \
             {} of {:.3} against {:.3} in steady state (tail minus steady {:+.3}, 95 % Welch \
             interval {:+.3} to {:+.3}); they move {}. The published figures mix the service at \
             full load with its end at falling load",
            t.inflight_at_drain,
            t.requests,
            t.metric.tag(),
            t.mean.unwrap_or(f64::NAN),
            t.steady_mean.unwrap_or(f64::NAN),
            d.diff,
            d.low,
            d.high,
            sizes(&moved)
        ),
    )
    .file(records::FILE)
    .field(format!("metrics.{}", t.metric.tag()))
    .expected_found(
        format!("steady-state mean {:.3}", t.steady_mean.unwrap_or(f64::NAN)),
        format!(
            "{} tail request(s) at mean {:.3}",
            t.requests,
            t.mean.unwrap_or(f64::NAN)
        ),
    )
    .effect("tail_requests", t.requests as f64, Unit::Count);
    f = with_biases(f, &moved);
    Some(f)
}

/// Each moved statistic's bias as an effect of `f`.
fn with_biases(mut f: Finding, moved: &[&Row]) -> Finding {
    for x in moved {
        f = f
            .effect(
                bias_quantity(x),
                x.bias_pct.unwrap_or(f64::NAN),
                Unit::Percent,
            )
            .moves(Moved::new(x.metric, x.stat.aiperf(), x.all, x.steady).over(Over::SteadyState));
    }
    f
}

/// `<metric>_<stat>_bias` as a static effect name.
fn bias_quantity(x: &Row) -> &'static str {
    macro_rules! names {
        ($($m:literal),*) => {
            match (x.metric, x.stat) {
                $(
                    ($m, Stat::Mean) => concat!($m, "_mean_bias"),
                    ($m, Stat::P50) => concat!($m, "_p50_bias"),
                    ($m, Stat::P90) => concat!($m, "_p90_bias"),
                    ($m, Stat::P99) => concat!($m, "_p99_bias"),
                )*
                _ => "bias",
            }
        };
    }
    names!(
        "time_to_first_token",
        "inter_token_latency",
        "request_latency",
        "output_token_throughput_per_user",
        "output_token_throughput",
        "request_throughput"
    )
}
