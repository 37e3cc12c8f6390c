//! Check `cold_connections`: which requests paid for DNS and connect, and
//! what they do to the published numbers.
//!
//! What it checks: every record is `cold` (`http_req_connection_reused` is 0,
//! or `http_req_dns_lookup` / `http_req_connecting` exceed their thresholds),
//! `warm` (connection reused and under the thresholds) or `unknown` (the
//! fields are absent: older AIPerf, other transports; unknown is never
//! counted as warm). For the key per-request metrics it computes count, mean,
//! p50, p90 and p99 over all successful profiling records (as AIPerf does)
//! and over warm ones only, the bias of each published statistic in percent,
//! and whether the cold/warm difference of means is larger than noise
//! (Welch's t interval).
//!
//! Why it matters: AIPerf counts connection setup inside TTFT, latency and
//! prefill throughput, so short or low-concurrency runs publish numbers that
//! describe the network setup, not the server.

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

use super::{Check, CheckOutput, CheckReport, CheckStatus, Ctx, Detail};
use crate::artifacts::records::{self, Metric, Phase, Record, RequestRef};
use crate::config::ColdSettings;
use crate::findings::{Finding, Moved, Severity, Unit};
use crate::model::connection::setup_ms;
use crate::stats::{self, DiffInterval};

/// The check.
pub const CHECK: Check = Check {
    name: "cold_connections",
    codes: &[CODES],
    run,
    timeline: false,
};

crate::define_codes! { "cold_connections";
    COLD_CONNECTION_BIAS => ("cold-connection-bias", Warning,
        "Cold-connection requests move a published statistic by more than the threshold"),
    ALL_CONNECTIONS_COLD => ("all-connections-cold", Warning,
        "Every profiling request opened a new connection; there is no warm baseline"),
    CONNECTION_FIELDS_MISSING => ("connection-fields-missing", Info,
        "Records lack the HTTP connection fields; cold requests cannot be told apart"),
    COLD_REQUESTS_UNMEASURED => ("cold-requests-unmeasured", Warning,
        "Without records, the summary's connection figures say cold requests are in the published statistics"),
}

/// The per-request metrics whose bias is reported: the published ones.
pub use crate::model::selection::PUBLISHED as KEY_METRICS;

/// The statistics reported for each metric.
pub use crate::stats::Stat;

pub use crate::model::connection::{temperature, Temperature};

mod columns;
mod report;

use columns::{Part, Scratch, Walk};

/// Counts per temperature for one phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Records of the phase.
    pub records: usize,
    /// Cold records.
    pub cold: usize,
    /// Warm records.
    pub warm: usize,
    /// Records without connection fields.
    pub unknown: usize,
    /// Records that are the first turn of their session (`turn_index` 0).
    pub first_turns: usize,
}

closed_set! {
    /// The test that tells a difference from noise.
    pub enum NoiseTest {
        /// Welch's t, 95 % interval of the difference of means.
        WelchT95 => "welch_t_95",
    }
}

/// Whether a difference is larger than noise.
#[derive(Debug, Clone, Serialize)]
pub struct Noise {
    /// The test used.
    pub test: NoiseTest,
    /// Interval of mean(cold) - mean(warm); `null` when it cannot be computed.
    pub cold_minus_warm: Option<DiffInterval>,
    /// True when the interval excludes zero; `null` when unknown.
    pub larger_than_noise: Option<bool>,
    /// Why it is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One (metric, statistic) row.
#[derive(Debug, Clone, Serialize)]
pub struct MetricStat {
    /// Metric tag as in the records.
    pub metric: Metric,
    /// The statistic.
    pub stat: Stat,
    /// Over all successful profiling records.
    pub all: Option<f64>,
    /// Over warm successful profiling records only.
    pub warm_only: Option<f64>,
    /// `(all - warm_only) / warm_only * 100`; `null` without a warm baseline.
    pub bias_pct: Option<f64>,
    /// Records with the metric: all / warm.
    pub count_all: usize,
    /// Warm records with the metric.
    pub count_warm: usize,
}

/// Figures of the `cold_connections` check.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Profiling records classified.
    pub profiling_records: usize,
    /// Cold profiling records.
    pub cold: usize,
    /// Warm profiling records.
    pub warm: usize,
    /// Profiling records without the connection fields.
    pub unknown: usize,
    /// Shares of cold / warm / unknown among profiling records (0..1).
    pub shares: Option<Shares>,
    /// First turns of sessions among profiling records.
    pub first_turns: usize,
    /// `x_request_id`s of the cold profiling records, in file order: the
    /// first [`MAX_LISTED_IDS`](crate::findings::MAX_LISTED_IDS).
    pub cold_request_ids: Vec<RequestRef>,
    /// Cold profiling records beyond those listed (written when nonzero).
    #[serde(skip_serializing_if = "crate::findings::none_unlisted")]
    pub cold_request_ids_unlisted: usize,
    /// The same counts over warmup records.
    pub warmup: Option<Counts>,
    /// Thresholds in force.
    pub thresholds: Thresholds,
    /// True when every classified profiling record was cold.
    pub all_cold: bool,
    /// With no warm baseline: mean share of request latency spent in DNS +
    /// connect over the cold records (0..1).
    pub connection_overhead_share: Option<f64>,
    /// Per metric and statistic: all vs warm only.
    pub metrics: Vec<MetricStat>,
    /// Per metric: is cold vs warm larger than noise?
    pub noise: BTreeMap<&'static str, Noise>,
}

/// The profiling records by connection temperature, as shares (0..1).
#[derive(Debug, Clone, Serialize)]
pub struct Shares {
    /// Paid for DNS or a new connection (`model::connection`).
    pub cold: f64,
    /// Reused a connection and paid for neither.
    pub warm: f64,
    /// Lacked the connection fields to tell (neither cold nor warm).
    pub unknown: f64,
}

/// The thresholds as reported.
#[derive(Debug, Clone, Serialize)]
pub struct Thresholds {
    /// DNS lookup above this (ms) is cold.
    pub dns_lookup_ms: f64,
    /// Connect above this (ms) is cold.
    pub connecting_ms: f64,
    /// Bias above this (%) is a finding.
    pub bias_pct: f64,
    /// Fewer warm records than this: too few to tell.
    pub min_warm_records: usize,
}

impl Counts {
    fn add(&mut self, r: &Record, t: Temperature) {
        self.records += 1;
        self.first_turns += usize::from(r.turn_index == Some(0));
        match t {
            Temperature::Cold => self.cold += 1,
            Temperature::Warm => self.warm += 1,
            Temperature::Unknown => self.unknown += 1,
        }
    }

    fn merge(&mut self, o: &Counts) {
        self.records += o.records;
        self.cold += o.cold;
        self.warm += o.warm;
        self.unknown += o.unknown;
        self.first_turns += o.first_turns;
    }
}

/// Runs the check.
pub fn run(ctx: &Ctx) -> CheckOutput {
    let s = &ctx.settings.cold;
    let thresholds = Thresholds {
        dns_lookup_ms: s.dns_ms,
        connecting_ms: s.connect_ms,
        bias_pct: s.bias_pct,
        min_warm_records: s.min_warm,
    };
    let mut findings = Vec::new();
    let Some(records) = ctx.records() else {
        findings.extend(ctx.run.summary.as_ref().and_then(from_summary));
        return CheckOutput {
            report: Arc::new(empty(thresholds)),
            findings,
            cannot_tell: Some(format!("{} was not read", records::FILE)),
        };
    };
    let temperatures = &ctx.model.temperatures;
    let Walk {
        profiling: c,
        warmup: warmup_counts,
        cold_request_ids,
        cold_successes,
        parts,
    } = Walk::of(records, temperatures);
    let shares = (c.records > 0).then(|| Shares {
        cold: c.cold as f64 / c.records as f64,
        warm: c.warm as f64 / c.records as f64,
        unknown: c.unknown as f64 / c.records as f64,
    });
    let all_cold = c.cold + c.warm > 0 && c.warm == 0;
    let mut reason = fields_missing(&c, &mut findings);
    let (metrics, noise) = effects(&parts, cold_successes, s, &mut findings);
    drop(parts);
    let mut connection_overhead_share = None;
    if all_cold && c.records > 0 {
        connection_overhead_share = overhead_share(records, temperatures);
        findings.push(all_cold_finding(
            &c,
            connection_overhead_share,
            ctx.settings.cold.bias_pct,
        ));
    } else if c.warm > 0 && c.warm < s.min_warm && reason.is_none() {
        reason = Some(format!(
            "only {} warm profiling record(s), fewer than {}: too few to tell the bias",
            c.warm, s.min_warm
        ));
    }
    let report = Report {
        profiling_records: c.records,
        cold: c.cold,
        warm: c.warm,
        unknown: c.unknown,
        shares,
        first_turns: c.first_turns,
        cold_request_ids_unlisted: c.cold - cold_request_ids.len(),
        cold_request_ids,
        warmup: ctx.model.warmup.as_ref().map(|_| warmup_counts),
        thresholds,
        all_cold,
        connection_overhead_share,
        metrics,
        noise,
    };
    CheckOutput {
        report: Arc::new(report),
        findings,
        cannot_tell: reason,
    }
}

/// Why cold and warm cannot be told apart: no profiling records, or none
/// with the connection fields (a finding says so).
fn fields_missing(c: &Counts, findings: &mut Vec<Finding>) -> Option<String> {
    if c.records == 0 {
        return Some("the run has no profiling records".to_string());
    }
    if c.cold + c.warm > 0 {
        return None;
    }
    findings.push(
        Finding::new(
            CONNECTION_FIELDS_MISSING,
            format!(
                "cannot tell: none of the {} profiling records has the HTTP connection \
                 fields (older AIPerf or a non-HTTP transport)",
                c.records
            ),
        )
        .file(records::FILE)
        .field("metrics.http_req_connection_reused"),
    );
    Some(
        "no profiling record carries http_req_connection_reused, http_req_dns_lookup or \
         http_req_connecting, so cold and warm requests cannot be told apart"
            .to_string(),
    )
}

/// Every key metric's statistics, noise test and bias finding, results in
/// metric order. The metrics are split into one group per thread; a group
/// fills and summarises its metrics in turn in one [`Scratch`].
fn effects(
    parts: &[Part],
    cold_requests: usize,
    s: &ColdSettings,
    findings: &mut Vec<Finding>,
) -> (Vec<MetricStat>, BTreeMap<&'static str, Noise>) {
    let per_group = KEY_METRICS
        .len()
        .div_ceil(rayon::current_num_threads().max(1));
    let metrics: Vec<(usize, Metric)> = KEY_METRICS.iter().copied().enumerate().collect();
    let per_metric: Vec<Vec<_>> = metrics
        .par_chunks(per_group)
        .map(|group| {
            let mut scratch = Scratch::default();
            group
                .iter()
                .map(|&(k, m)| {
                    scratch.fill(k, parts);
                    metric_effect((k, m), &mut scratch, parts, cold_requests, s)
                })
                .collect()
        })
        .collect();
    let mut metrics = Vec::new();
    let mut noise = BTreeMap::new();
    for (metric, effect) in KEY_METRICS.iter().zip(per_metric.into_iter().flatten()) {
        if let Some((stats, n, finding)) = effect {
            metrics.extend(stats);
            findings.extend(finding);
            noise.insert(metric.tag(), n);
        }
    }
    (metrics, noise)
}

/// Every request cold: a warning when the connection overhead is large
/// enough to bias what is published (or unknown), info when DNS + connect
/// are below the bias threshold of the request latency (verified harmless).
fn all_cold_finding(c: &Counts, overhead: Option<f64>, bias_pct: f64) -> Finding {
    let share = overhead
        .map(|x| {
            format!(
                "; DNS + connect is {:.1} % of request latency on average",
                x * 100.0
            )
        })
        .unwrap_or_default();
    let mut f = Finding::new(
        ALL_CONNECTIONS_COLD,
        format!(
            "every one of the {} classified profiling requests opened a new connection (a \
             server without keep-alive, or connection reuse off), so there is no warm \
             baseline to measure the bias against{share}",
            c.cold + c.warm
        ),
    )
    .file(records::FILE)
    .field("metrics.http_req_connection_reused")
    .expected_found("some reused connections", "none reused")
    .effect("cold_share", 100.0, Unit::Percent)
    .effect(
        "connection_overhead_share",
        overhead.unwrap_or(f64::NAN) * 100.0,
        Unit::Percent,
    );
    if overhead.is_some_and(|x| x * 100.0 < bias_pct) {
        f = f.harmless(&format!(
            "that is below the {bias_pct} % bias threshold, so the cold connections do not \
             move the published latencies beyond tolerance"
        ));
    }
    f
}

/// One metric's all vs warm-only statistics, its noise test and its bias
/// finding; `None` when no successful profiling record has the metric.
/// `k` is the metric's position in [`KEY_METRICS`], `columns` filled with it
/// from `parts`.
fn metric_effect(
    (k, metric): (usize, Metric),
    columns: &mut Scratch,
    parts: &[Part],
    cold_requests: usize,
    s: &ColdSettings,
) -> Option<(Vec<MetricStat>, Noise, Option<Finding>)> {
    if columns.all.is_empty() {
        return None;
    }
    // The noise test sums the values in file order, before the selection
    // below reorders them (its result must not depend on how selection
    // permutes a column).
    let n = noise_of(&columns.cold, &columns.warm, s.min_warm);
    // Percentiles by selection: linear time, no sort of the whole column.
    let (sa, sw) = (
        stats::Summary::of_values(&mut columns.all),
        stats::Summary::of_values(&mut columns.warm),
    );
    let (all_v, warm_v) = (&columns.all, &columns.warm);
    let mut metrics = Vec::new();
    let mut over: Vec<Over> = Vec::new();
    for &stat in Stat::ALL {
        let bias = stats::bias_pct(sa.get(stat), sw.get(stat));
        if let Some(b) = bias {
            if b.abs() > s.bias_pct && warm_v.len() >= s.min_warm {
                over.push((stat, b, sa.get(stat), sw.get(stat)));
            }
        }
        metrics.push(MetricStat {
            metric,
            stat,
            all: sa.get(stat),
            warm_only: sw.get(stat),
            bias_pct: bias,
            count_all: all_v.len(),
            count_warm: warm_v.len(),
        });
    }
    let mut finding = bias_finding(metric, &over, cold_requests, &n);
    // The statistics had the cold requests not paid for their connections:
    // only what settles a finding needs them.
    let unconnected_stats = finding
        .as_ref()
        .and_then(|_| columns.unconnected(k, parts))
        .map(|v| stats::Summary::of_values(v));
    settle(
        finding.as_mut(),
        &over,
        unconnected_stats.as_ref(),
        metric,
        s,
    );
    Some((metrics, n, finding))
}

/// Settles a metric's bias finding: info when the connection time alone
/// moves the listed statistics by no more than the threshold (the cold
/// requests differ for another reason), else what to do.
fn settle(
    finding: Option<&mut Finding>,
    over: &[Over],
    unconnected_stats: Option<&stats::Summary>,
    metric: Metric,
    s: &ColdSettings,
) {
    let Some(f) = finding else {
        return;
    };
    // How far the connection time alone moves the listed statistics.
    let connection_pct = unconnected_stats.map(|u| {
        over.iter()
            .filter_map(|o| stats::bias_pct(o.2, u.get(o.0)))
            .fold(0.0, |a: f64, b| a.max(b.abs()))
    });
    let harmless = connection_pct.filter(|c| {
        *c <= s.bias_pct && !crate::model::connection::AFTER_FIRST_TOKEN.contains(&metric)
    });
    if let Some(c) = harmless {
        f.settle_harmless(&format!(
            "their DNS + connect time moves these statistics by at most {c:.1} %, \
             within the {} % threshold, so the rest of the difference is not the \
             connection's (the first requests were slower for another reason, such as a \
             server warming up)",
            s.bias_pct
        ));
        f.effect.push(crate::findings::Effect {
            quantity: "connection_bias",
            value: c,
            unit: Unit::Percent,
        });
    }
    // What to do, where the connection is what moves them.
    if f.severity > Severity::Info {
        f.message.push_str(
            ". Publish the warm-only figures (`artifact-check clean --exclude-cold`), or re-run \
             with the connections opened before measuring (a warmup phase on the same \
             connections)",
        );
    }
}

/// A statistic over the threshold: `(stat, bias %, all, warm only)`.
type Over = (Stat, f64, Option<f64>, Option<f64>);

/// The bias finding of one metric, listing the statistics over the threshold.
fn bias_finding(metric: Metric, over: &[Over], cold_requests: usize, n: &Noise) -> Option<Finding> {
    if over.is_empty() {
        return None;
    }
    let worst = over.iter().map(|o| o.1.abs()).fold(0.0, f64::max);
    let listed: Vec<String> = over
        .iter()
        .map(|(stat, b, all, warm)| {
            format!(
                "{stat} {} vs {} warm-only ({b:+.1} %)",
                fmt(*all),
                fmt(*warm)
            )
        })
        .collect();
    let noise_note = match n.larger_than_noise {
        Some(true) => "; the cold/warm difference of means is larger than noise",
        Some(false) => "; the cold/warm difference of means is within noise",
        None => "",
    };
    let mut f = Finding::new(
        COLD_CONNECTION_BIAS,
        format!(
            "{} cold request(s) (they paid for DNS or a new connection) move {} {}{noise_note}",
            cold_requests,
            metric.tag(),
            listed.join(", ")
        ),
    )
    .file(records::FILE)
    .field(format!("metrics.{}", metric.tag()))
    .expected_found(
        over.iter().map(|o| (o.0, o.3)).collect::<Vec<_>>(),
        over.iter().map(|o| (o.0, o.2)).collect::<Vec<_>>(),
    )
    .effect("max_abs_bias", worst, Unit::Percent);
    for (stat, b, all, warm) in over {
        f = f.effect("bias", *b, Unit::Percent).moves(
            Moved::new(metric.tag(), stat.aiperf(), *all, *warm)
                .over(crate::findings::Over::WarmOnly),
        );
    }
    if crate::model::connection::AFTER_FIRST_TOKEN.contains(&metric) {
        f = f.harmless(
            "this metric is measured after the first token and holds no connection time, \
             so the difference is not the connection's",
        );
    }
    Some(f)
}

fn fmt(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.4}")).unwrap_or_else(|| "n/a".into())
}

fn noise_of(cold: &[f64], warm: &[f64], min_warm: usize) -> Noise {
    let test = NoiseTest::WelchT95;
    if warm.len() < min_warm.max(2) || cold.len() < 2 {
        return Noise {
            test,
            cold_minus_warm: None,
            larger_than_noise: None,
            reason: Some(format!(
                "too few records to tell: {} cold, {} warm (need 2 cold and {} warm)",
                cold.len(),
                warm.len(),
                min_warm.max(2)
            )),
        };
    }
    match stats::welch_interval(cold, warm, 0.95) {
        Some(ci) => Noise {
            test,
            larger_than_noise: Some(ci.excludes_zero()),
            cold_minus_warm: Some(ci),
            reason: None,
        },
        None => Noise {
            test,
            cold_minus_warm: None,
            larger_than_noise: None,
            reason: Some("no spread in the values".into()),
        },
    }
}

/// A folder with only the summary: its `http_req_connection_reused`
/// aggregate (the share of requests that reused a connection) says how many
/// published requests paid for a new one, and `http_req_connecting` what
/// that cost on average over all of them; the bias needs the records.
fn from_summary(s: &crate::artifacts::summary::Summary) -> Option<Finding> {
    let reused = s.metrics.get(Metric::HttpReqConnectionReused.tag())?;
    // Schema 1.0 (AIPerf 0.7) has no `count`: the successful requests are
    // what the statistic is over.
    let count = reused.count.or_else(|| s.scalar("request_count"));
    let (avg, count) = (reused.avg?, count?);
    if !(0.0..1.0).contains(&avg) || !count.is_finite() || count <= 0.0 {
        return None;
    }
    let cold = ((1.0 - avg) * count).round();
    if cold < 1.0 {
        return None;
    }
    let connect = s
        .metrics
        .get(Metric::HttpReqConnecting.tag())
        .and_then(|m| m.avg)
        .filter(|x| x.is_finite())
        .map(|c| {
            format!(
                "; http_req_connecting averages {c:.3} ms over all of them, about {:.3} ms per \
                 cold request",
                c * count / cold
            )
        })
        .unwrap_or_default();
    Some(
        Finding::new(
            COLD_REQUESTS_UNMEASURED,
            format!(
                "the summary's http_req_connection_reused averages {avg:.4} over {count:.0} \
                 requests: about {cold:.0} of the published requests opened a new connection, \
                 and their DNS + connect time is in the published TTFT and latency{connect}. \
                 profile_export.jsonl is needed to measure the bias and to leave them out"
            ),
        )
        .file(crate::artifacts::summary::FILE)
        .field("http_req_connection_reused.avg")
        .expected_found(1.0, avg)
        .effect("cold_requests", cold, Unit::Count)
        .effect("cold_share", (1.0 - avg) * 100.0, Unit::Percent),
    )
}

/// The mean share of request latency spent in DNS + connect over the cold
/// successful profiling records.
fn overhead_share(records: &[Record], temperatures: &[Temperature]) -> Option<f64> {
    let shares: Vec<f64> = records
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            r.phase != Phase::Warmup
                && r.is_success()
                && crate::model::connection::temperature_at(temperatures, *i) == Temperature::Cold
        })
        .filter_map(|(_, r)| {
            let lat = r.values.get(Metric::RequestLatency)?;
            let paid = setup_ms(r)?;
            (lat > 0.0).then(|| (paid / lat).min(1.0))
        })
        .collect();
    stats::mean(&shares)
}

fn empty(thresholds: Thresholds) -> Report {
    Report {
        profiling_records: 0,
        cold: 0,
        warm: 0,
        unknown: 0,
        shares: None,
        first_turns: 0,
        cold_request_ids: Vec::new(),
        cold_request_ids_unlisted: 0,
        warmup: None,
        thresholds,
        all_cold: false,
        connection_overhead_share: None,
        metrics: Vec::new(),
        noise: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walk cut into parts of any size says what the walk in one part
    /// says, to the bit: the counts, the first cold ids in file order, and
    /// every metric's statistics, noise test and finding. On two real AIPerf
    /// runs: cold-tls (cold and warm requests, bias findings) and
    /// cancel-vllm (cold requests and cancelled ones, which are counted but
    /// give no values).
    #[test]
    fn a_walk_in_parts_says_what_one_walk_says() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut said = String::new();
        let mut unsuccessful = 0;
        for dir in [
            "sample-artifacts/runs/cold-tls",
            "fixtures/accounting/cancel-vllm",
        ] {
            let run = crate::artifacts::load(&root.join(dir));
            let settings = crate::config::Settings::default();
            let model = crate::model::RunModel::build(&run, &settings);
            // The run thirty times over (as benches/make_big_run.py repeats
            // it), so that the cold ids pass the listed limit inside a part.
            let once = run
                .records
                .as_ref()
                .map(|r| r.records.as_slice())
                .unwrap_or(&[]);
            unsuccessful += once.iter().filter(|r| !r.is_success()).count();
            let records: Vec<Record> = (0..30).flat_map(|_| once.iter().cloned()).collect();
            let temperatures: Vec<Temperature> = (0..30)
                .flat_map(|_| model.temperatures.iter().copied())
                .collect();
            let records = records.as_slice();
            let say = |part: usize| {
                let w = Walk::in_parts(records, &temperatures, part);
                assert_eq!(
                    w.parts.len(),
                    records.len().div_ceil(part),
                    "{dir}: parts of {part}"
                );
                let mut findings = Vec::new();
                let (metrics, noise) =
                    effects(&w.parts, w.cold_successes, &settings.cold, &mut findings);
                let ids: Vec<String> = w.cold_request_ids.iter().map(ToString::to_string).collect();
                serde_json::to_string(&(
                    (&w.profiling, &w.warmup, w.cold_successes, ids),
                    metrics,
                    noise,
                    findings,
                ))
                .unwrap_or_default()
            };
            let whole = say(records.len());
            let cold = Walk::in_parts(records, &temperatures, records.len())
                .profiling
                .cold;
            assert!(
                cold > crate::findings::MAX_LISTED_IDS,
                "{dir}: {cold} cold records"
            );
            for part in [1, 2, 3, 7, 64, 100, records.len() - 1] {
                assert_eq!(say(part), whole, "{dir}: parts of {part}");
            }
            said.push_str(&whole);
        }
        assert!(said.contains(COLD_CONNECTION_BIAS.as_str()), "{said}");
        assert!(unsuccessful > 0, "a run holds unsuccessful records");
    }
}
