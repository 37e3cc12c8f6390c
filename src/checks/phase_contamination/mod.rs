//! Check `phase_contamination`: does each server metric belong to the phase
//! it is reported under?
//!
//! What it checks: AIPerf splits cumulative server metrics into warmup and
//! profiling by subtracting scrapes taken at phase boundaries. For every
//! request-scoped metric (one observation per request, [`REQUEST_SCOPED`]),
//! the count in `metrics` (profiling) and `warmup_metrics` must match the
//! phase's requests. Each mismatch is classified (late warmup observation,
//! profiling observation lost to warmup, unexplained excess or deficit;
//! [`classify`]) and diagnosed ([`diagnose`]), the phase windows are checked
//! for overlap and counters for timeslices that start early ([`windows`]),
//! and series for resets ([`resets`]). With the raw scrapes
//! (`server_metrics_export.jsonl`) each scrape interval's increments are
//! attributed to the requests whose observation time falls in it (the
//! attribution engine, [`crate::model::attribution`]), and a corrected split
//! is reported.
//!
//! Why it matters: a warmup observation counted in profiling inflates counts,
//! sums, averages and percentile estimates, silently (seed 000).

mod classify;
mod diagnose;
mod resets;
mod windows;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

use super::{Check, CheckOutput, CheckReport, CheckStatus, Ctx, Detail};
use crate::artifacts::records::Phase;
use crate::artifacts::server_metrics::{self, lookup, Family, MetricType, Series};
use crate::findings::Finding;
use crate::frameworks::{role_of, Framework, ObservedAt, RequestScoped, REQUEST_SCOPED};
pub use crate::model::attribution::Corrected;
use crate::model::attribution::{self, Attribution, Candidate, Exactness};
use crate::stats::{merge_buckets, remove_observations, Percentiles, Stat};
use classify::classify;
pub use classify::Classification;
use diagnose::Problem;

/// The check.
pub const CHECK: Check = Check {
    name: "phase_contamination",
    codes: &[CODES],
    run,
};

crate::define_codes! { "phase_contamination";
    LATE_WARMUP_OBSERVATION => ("late-warmup-observation", Error,
        "Warmup observations were counted in profiling (profiling +k, warmup -k)"),
    PROFILING_LOST_TO_WARMUP => ("profiling-lost-to-warmup", Error,
        "Profiling observations were counted in warmup (profiling -k, warmup +k)"),
    PHASE_WINDOW_OVERLAP => ("phase-window-overlap", Warning,
        "The warmup window closes after profiling has started"),
    UNEXPLAINED_EXCESS => ("unexplained-excess", Error,
        "A phase holds more observations than it had requests, with no matching deficit"),
    UNEXPLAINED_DEFICIT => ("unexplained-deficit", Error,
        "A phase holds fewer observations than it had requests, with no matching excess"),
    COUNTER_WINDOW_EARLY => ("counter-window-early", Error,
        "A counter's profiling timeslices start before profiling started"),
    COUNTER_RESET => ("counter-reset", Error,
        "A cumulative server metric went down: the server restarted or the series was reset"),
    AIPERF_VERSION_ADVISORY => ("aiperf-version-advisory", Info,
        "This AIPerf version takes the end-of-warmup scrape without a flush barrier"),
    PHASE_CHECK_UNKNOWN => ("phase-check-unknown", Info,
        "The phase split cannot be checked: no request-scoped server metric or no records"),
}

closed_set! {
    /// Where an expected count comes from.
    pub enum ExpectedSource {
        /// The records in `profile_export.jsonl`.
        Records => "records",
        /// The configured request count (no records).
        Configuration => "configuration",
    }
}

/// An expected observation count: a range, because a failed request may or
/// may not have been observed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Expected {
    /// Successful requests.
    pub min: u64,
    /// Successful plus failed requests.
    pub max: u64,
    /// Where the expectation comes from.
    pub source: ExpectedSource,
}

impl Expected {
    /// Signed distance of `found` from the range (0 inside it).
    pub fn deviation(&self, found: f64) -> f64 {
        if found > self.max as f64 {
            found - self.max as f64
        } else if found < self.min as f64 {
            found - self.min as f64
        } else {
            0.0
        }
    }
}

/// One metric (summed over label sets) in one phase.
#[derive(Debug, Clone, Serialize)]
pub struct MetricRow {
    /// Metric name as exported.
    pub metric: String,
    /// Serving framework of the table entry.
    pub framework: Framework,
    /// When the server observes it.
    pub observed_at: ObservedAt,
    /// `all` (summed over endpoints with traffic) or an endpoint URL.
    pub endpoint: String,
    /// Prefill/decode role, when the series carry one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The phase.
    pub phase: Phase,
    /// Expected count (range); `null` when unknown.
    pub expected_count: Option<Expected>,
    /// Count in the export; `null` when a series lacks it.
    pub found_count: Option<f64>,
    /// found - expected (0 inside the range).
    pub delta: Option<f64>,
    /// What the count says.
    pub classification: Classification,
    /// Sum in the export (histograms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_sum: Option<f64>,
    /// Avg in the export (histograms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_avg: Option<f64>,
    /// Repaired split, when the raw scrapes allow it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected: Option<Corrected>,
    /// Percentiles estimated from the exported buckets (histograms; the
    /// Prometheus `histogram_quantile` interpolation, not AIPerf's own
    /// `pNN_estimate`, which the buckets alone cannot reproduce).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_percentiles: Option<Percentiles>,
    /// Bias of `found_percentiles` over `corrected.percentiles`, in percent,
    /// when the repair is exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentile_bias_pct: Option<Percentiles>,
    /// When the count exceeds the expected one by `delta` and no exact repair
    /// exists: the range the bucket-estimated percentiles of the phase's true
    /// observations lie in, with the `delta` extra observations taken off the
    /// top or the bottom of the histogram. (Missing observations could have
    /// had any value, so a deficit gets no bounds.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_percentile_bounds: Option<PercentileBounds>,
}

/// The lowest and highest a phase's true bucket-estimated percentiles can be.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PercentileBounds {
    /// The observations' possible positions that give the lowest percentiles.
    pub low: Percentiles,
    /// ... and the highest.
    pub high: Percentiles,
}

impl PercentileBounds {
    /// Bounds for a histogram off by `delta` observations (found - true).
    pub fn of(buckets: &[(f64, f64)], delta: f64) -> Option<PercentileBounds> {
        // Only an excess bounds the truth: the true histogram is this one
        // without `n` of its observations, lowest without the top ones and
        // highest without the bottom ones. Missing observations could have
        // had any value: no bound.
        let n = delta.round();
        if n < 1.0 {
            return None;
        }
        Some(PercentileBounds {
            low: Percentiles::of_buckets(&remove_observations(buckets, n, true)),
            high: Percentiles::of_buckets(&remove_observations(buckets, n, false)),
        })
    }

    /// The largest bias, in percent, the found percentiles can have over
    /// any true value inside the bounds; `(stat, pct)`.
    pub fn worst_bias_pct(&self, found: &Percentiles) -> Option<(Stat, f64)> {
        let (low, high) = (self.low.named(), self.high.named());
        found
            .named()
            .into_iter()
            .zip(low.into_iter().zip(high))
            .filter_map(|((name, f), ((_, lo), (_, hi)))| {
                let a = crate::stats::bias_pct(f, lo);
                let b = crate::stats::bias_pct(f, hi);
                let worst = [a, b]
                    .into_iter()
                    .flatten()
                    .max_by(|x, y| x.abs().total_cmp(&y.abs()))?;
                Some((name, worst))
            })
            .max_by(|x, y| x.1.abs().total_cmp(&y.1.abs()))
    }
}

/// The phase windows and their overlap.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Windows {
    /// Warmup window from the server-metrics summary (ns).
    pub warmup: Option<(u64, u64)>,
    /// Profiling window (ns).
    pub profiling: Option<(u64, u64)>,
    /// How long the warmup window stays open after profiling starts (ms).
    pub overlap_ms: Option<f64>,
    /// Profiling requests that started before the warmup window closed.
    pub profiling_started_before_warmup_closed: Option<u64>,
    /// ... whose first token came before it closed.
    pub profiling_first_token_before_warmup_closed: Option<u64>,
    /// ... that finished before it closed.
    pub profiling_finished_before_warmup_closed: Option<u64>,
    /// Warmup requests that finished after profiling started.
    pub warmup_finished_after_profiling_started: Option<u64>,
    /// Kinds of metric the overlap puts at risk.
    pub at_risk: Vec<ObservedAt>,
}

/// Figures of the `phase_contamination` check.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// A request-scoped metric that splits exactly: the evidence that the
    /// request counts are right and a mismatch is the metric's own.
    pub control_metric: Option<String>,
    /// One row per metric, endpoint, role and phase.
    pub metrics: Vec<MetricRow>,
    /// Phase windows.
    pub windows: Windows,
    /// Scrape endpoints on which no request-scoped metric moved.
    pub endpoints_without_traffic: Vec<String>,
    /// Whether the raw scrapes were used to repair the split.
    pub repaired_from_raw_scrapes: bool,
}

/// One request-scoped metric family found in the export, with its table entry.
struct Found<'a> {
    def: RequestScoped,
    name: String,
    profiling: Option<&'a Family>,
    warmup: Option<&'a Family>,
}

impl Found<'_> {
    fn kind(&self) -> MetricType {
        self.profiling
            .or(self.warmup)
            .map(|x| x.kind)
            .unwrap_or_default()
    }
}

/// The request-scoped metrics: the built-in table and the user's.
fn definitions(ctx: &Ctx) -> Vec<RequestScoped> {
    let mut defs: Vec<RequestScoped> = REQUEST_SCOPED.to_vec();
    for (name, at) in &ctx.settings.phase.extra_metrics {
        defs.push(RequestScoped {
            name: name.clone().into(),
            framework: Framework::User,
            observed_at: *at,
        });
    }
    defs
}

/// The request-scoped families the export has, as counters or histograms.
fn found_in<'a>(ctx: &Ctx, server: &'a server_metrics::ServerMetricsExport) -> Vec<Found<'a>> {
    definitions(ctx)
        .into_iter()
        .filter_map(|def| {
            let p = lookup(&server.metrics, &def.name);
            let w = server
                .warmup_metrics
                .as_ref()
                .and_then(|w| lookup(w, &def.name));
            let name = p.or(w)?.0.to_string();
            Some(Found {
                def,
                name,
                profiling: p.map(|x| x.1),
                warmup: w.map(|x| x.1),
            })
        })
        .filter(|f| matches!(f.kind(), MetricType::Histogram | MetricType::Counter))
        .collect()
}

fn count_of(series: &[&Series], kind: MetricType) -> Option<f64> {
    series.iter().map(|s| s.observations(kind)).sum()
}

/// Which scrape endpoints saw traffic: those on which any request-scoped
/// metric moved.
struct Traffic {
    busy: BTreeSet<String>,
    idle: Vec<String>,
}

impl Traffic {
    fn of(found: &[Found]) -> Traffic {
        let mut all = BTreeSet::new();
        let mut busy = BTreeSet::new();
        for f in found {
            for fam in [f.profiling, f.warmup].into_iter().flatten() {
                for s in &fam.series {
                    let e = s.endpoint_url.clone().unwrap_or_default();
                    if s.observations(fam.kind).unwrap_or(0.0) > 0.0 {
                        busy.insert(e.clone());
                    }
                    all.insert(e);
                }
            }
        }
        let idle = all.difference(&busy).cloned().collect();
        Traffic { busy, idle }
    }

    /// The one endpoint with traffic, when there is exactly one.
    fn single(&self) -> Option<&str> {
        (self.busy.len() == 1)
            .then(|| self.busy.iter().next().map(String::as_str))
            .flatten()
    }
}

/// The expected counts of profiling and warmup: from the records, else the
/// configuration.
fn expectations(ctx: &Ctx) -> (Option<Expected>, Option<Expected>) {
    let expected = |phase: Phase| -> Option<Expected> {
        let p = ctx.model.phase(phase)?;
        match (ctx.records(), p.successful, p.errors, p.configured_requests) {
            (Some(_), Some(ok), Some(err), _) => Some(Expected {
                min: ok,
                max: ok + err,
                source: ExpectedSource::Records,
            }),
            (None, _, _, Some(c)) => Some(Expected {
                min: c,
                max: c,
                source: ExpectedSource::Configuration,
            }),
            _ => None,
        }
    };
    let exp_w = ctx
        .model
        .warmup
        .as_ref()
        .and_then(|_| expected(Phase::Warmup));
    (expected(Phase::Profiling), exp_w)
}

/// Runs the check.
pub fn run(ctx: &Ctx) -> CheckOutput {
    let mut findings = Vec::new();
    let mut report = Report {
        control_metric: None,
        metrics: Vec::new(),
        windows: Windows::default(),
        endpoints_without_traffic: Vec::new(),
        repaired_from_raw_scrapes: false,
    };
    windows::advisory(ctx, &mut findings);
    let Some(server) = ctx.run.server.as_ref() else {
        let why = format!("{} was not read", server_metrics::FILE);
        return output(report, findings, Some(why));
    };
    report.windows = windows::windows(ctx, &mut findings);
    windows::counter_windows(ctx, server, &mut findings);
    resets::resets_in_export(server, &mut findings);
    if let Some(scrapes) = ctx.run.scrapes.as_ref() {
        resets::resets_in_scrapes(&scrapes.scrapes, &mut findings);
    }
    let found = found_in(ctx, server);
    if found.is_empty() {
        let why = "no request-scoped server metric (a per-request histogram or counter of a \
                   known framework) is in the export, so the phase split cannot be checked";
        findings.push(Finding::new(PHASE_CHECK_UNKNOWN, why).file(server_metrics::FILE));
        return output(report, findings, Some(why.to_string()));
    }
    let traffic = Traffic::of(&found);
    report.endpoints_without_traffic = traffic.idle.clone();
    let (exp_p, exp_w) = expectations(ctx);
    let reason = exp_p.is_none().then(|| {
        "neither profile_export.jsonl nor a configured request count says how many \
         requests there were"
            .to_string()
    });
    // Every (metric, role), each compared and, with raw scrapes, repaired.
    let jobs: Vec<(&Found, Option<String>)> = found
        .iter()
        .flat_map(|f| roles(f).into_iter().map(move |r| (f, r)))
        .collect();
    let corrections = repairs(ctx, &found, &jobs, traffic.single());
    let mut problems: Vec<Problem> = Vec::new();
    for ((f, role), corrected) in jobs.iter().zip(corrections) {
        report.repaired_from_raw_scrapes |= corrected.is_some();
        let cmp = Comparison {
            ctx,
            found: f,
            role: role.as_deref(),
            expected: [exp_p, exp_w],
            traffic: &traffic,
        };
        let (rows, problem) = cmp.rows(corrected);
        report.metrics.extend(rows);
        problems.extend(problem);
    }
    report.control_metric = control_metric(&report.metrics, &found, exp_w.is_some());
    for p in &problems {
        findings.extend(p.findings(report.control_metric.as_deref(), &report.windows));
    }
    output(report, findings, reason)
}

/// The repair from raw scrapes of every job (metric, role), in parallel, in
/// job order; `None` where the scrapes cannot support one (no scrapes or
/// records, traffic on several endpoints, too few scrapes, a reset).
/// Candidates depend only on when a metric is observed: built once per kind,
/// not once per metric.
fn repairs(
    ctx: &Ctx,
    found: &[Found],
    jobs: &[(&Found, Option<String>)],
    endpoint: Option<&str>,
) -> Vec<Option<Attribution>> {
    let inputs = ctx.run.scrapes.as_ref().zip(ctx.records()).zip(endpoint);
    let Some(((sc, rs), ep)) = inputs else {
        return vec![None; jobs.len()];
    };
    let slack_ns = (ctx.settings.phase.match_slack_ms * 1e6) as u64;
    let mut kinds: Vec<ObservedAt> = found.iter().map(|f| f.def.observed_at).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let prepared: Vec<(ObservedAt, Vec<Candidate>)> = kinds
        .into_par_iter()
        .map(|at| (at, attribution::candidates(rs, at, slack_ns)))
        .collect();
    let first_start = ctx.model.first_request_start_ns();
    jobs.par_iter()
        .map(|(f, role)| {
            let cands = &prepared.iter().find(|p| p.0 == f.def.observed_at)?.1;
            let role = role.as_deref();
            let pts =
                attribution::cumulative(&sc.scrapes, ep, &f.name, |labels| role_of(labels) == role);
            attribution::by_observation(&pts, first_start, cands, slack_ns)
        })
        .collect()
}

/// One (metric, role) held to the expected counts of both phases.
struct Comparison<'a> {
    ctx: &'a Ctx<'a>,
    found: &'a Found<'a>,
    role: Option<&'a str>,
    /// Profiling, warmup.
    expected: [Option<Expected>; 2],
    traffic: &'a Traffic,
}

impl Comparison<'_> {
    /// The rows of both phases (summed, then per endpoint), and the problem
    /// when a phase is off.
    fn rows(&self, corrected: Option<Attribution>) -> (Vec<MetricRow>, Option<Problem>) {
        let (f, kind) = (self.found, self.found.kind());
        let (sp, sw) = (
            in_role(f.profiling, self.role),
            in_role(f.warmup, self.role),
        );
        // A family missing from a phase's section is unknown, not 0:
        // AIPerf omits `warmup_metrics` when it took no warmup scrape.
        let found_p = f.profiling.and_then(|_| count_of(&sp, kind));
        let found_w = match (self.ctx.model.warmup.is_some(), f.warmup) {
            (true, Some(_)) => count_of(&sw, kind),
            _ => None,
        };
        let [exp_p, exp_w] = self.expected;
        let deviation = |e: Option<Expected>, x: Option<f64>| Some(e?.deviation(x?));
        let (dp, dw) = (deviation(exp_p, found_p), deviation(exp_w, found_w));
        let (class_p, class_w) = classify(dp, dw);
        let mut rows = Vec::new();
        for (phase, series, exp, fnd, d, class) in [
            (Phase::Profiling, &sp, exp_p, found_p, dp, class_p),
            (Phase::Warmup, &sw, exp_w, found_w, dw, class_w),
        ] {
            if phase == Phase::Warmup && self.ctx.model.warmup.is_none() {
                continue;
            }
            let here = corrected.as_ref().map(|c| c.get(phase).clone());
            let summed = self.summed_row(phase, series, (exp, fnd, d, class), here);
            rows.push(summed);
            rows.extend(self.endpoint_rows(phase, series, (exp, d, class)));
        }
        if class_p == Classification::Ok && class_w == Classification::Ok {
            return (rows, None);
        }
        let profiling_row = rows
            .iter()
            .find(|r| r.phase == Phase::Profiling && r.endpoint == "all");
        let problem = Problem {
            metric: f.name.clone(),
            observed_at: f.def.observed_at,
            role: self.role.map(str::to_string),
            exp_p,
            exp_w,
            found_p,
            found_w,
            dp,
            dw,
            found_avg_p: profiling_row.and_then(|r| r.found_avg),
            found_sum_p: profiling_row.and_then(|r| r.found_sum),
            corrected,
            percentile_bias_p: profiling_row.and_then(|r| r.percentile_bias_pct),
            percentile_worst_p: profiling_row.and_then(|r| {
                r.true_percentile_bounds
                    .as_ref()?
                    .worst_bias_pct(r.found_percentiles.as_ref()?)
            }),
        };
        (rows, Some(problem))
    }

    fn row(&self, phase: Phase, endpoint: String) -> MetricRow {
        MetricRow {
            metric: self.found.name.clone(),
            framework: self.found.def.framework,
            observed_at: self.found.def.observed_at,
            endpoint,
            role: self.role.map(str::to_string),
            phase,
            expected_count: None,
            found_count: None,
            delta: None,
            classification: Classification::Unknown,
            found_sum: None,
            found_avg: None,
            corrected: None,
            found_percentiles: None,
            percentile_bias_pct: None,
            true_percentile_bounds: None,
        }
    }

    /// The row summed over the endpoints, with the export's sum, avg and
    /// bucket-estimated percentiles, and the repair.
    fn summed_row(
        &self,
        phase: Phase,
        series: &[&Series],
        (exp, fnd, d, class): (Option<Expected>, Option<f64>, Option<f64>, Classification),
        corrected: Option<Corrected>,
    ) -> MetricRow {
        let hist = self.found.kind() == MetricType::Histogram;
        let sum: Option<f64> = hist
            .then(|| series.iter().map(|s| s.stats.sum.or(Some(0.0))).sum())
            .flatten();
        let found_avg = match (sum, fnd) {
            (Some(s), Some(c)) if c > 0.0 => Some(s / c),
            _ => None,
        };
        let found_buckets = (hist && !series.is_empty())
            .then(|| merge_buckets(series.iter().map(|s| s.buckets.as_ref())))
            .flatten();
        let found_percentiles = found_buckets.as_deref().map(Percentiles::of_buckets);
        let exact_percentiles = corrected
            .as_ref()
            .filter(|c| c.exactness == Exactness::Exact)
            .and_then(|c| c.percentiles);
        let true_percentile_bounds = match (&found_buckets, d, exact_percentiles) {
            (Some(b), Some(d), None) => PercentileBounds::of(b, d),
            _ => None,
        };
        MetricRow {
            expected_count: exp,
            found_count: fnd,
            delta: d,
            classification: class,
            found_sum: sum,
            found_avg,
            corrected,
            percentile_bias_pct: found_percentiles
                .zip(exact_percentiles)
                .map(|(f, c)| f.bias_pct(&c)),
            found_percentiles,
            true_percentile_bounds,
            ..self.row(phase, "all".into())
        }
    }

    /// Per endpoint: found only (which endpoint served which request is not
    /// in the artifacts), unless one endpoint had all the traffic.
    fn endpoint_rows(
        &self,
        phase: Phase,
        series: &[&Series],
        (exp, d, class): (Option<Expected>, Option<f64>, Classification),
    ) -> Vec<MetricRow> {
        let mut per_ep: BTreeMap<String, Vec<&Series>> = BTreeMap::new();
        for s in series {
            per_ep
                .entry(s.endpoint_url.clone().unwrap_or_default())
                .or_default()
                .push(s);
        }
        if per_ep.len() <= 1 {
            return Vec::new();
        }
        let kind = self.found.kind();
        per_ep
            .into_iter()
            .map(|(ep, ss)| {
                let only = self.traffic.single() == Some(ep.as_str());
                let classification = if only {
                    class
                } else if self.traffic.busy.contains(&ep) {
                    Classification::NotCompared
                } else {
                    Classification::NoTraffic
                };
                MetricRow {
                    expected_count: if only { exp } else { None },
                    found_count: count_of(&ss, kind),
                    delta: if only { d } else { None },
                    classification,
                    ..self.row(phase, ep)
                }
            })
            .collect()
    }
}

/// The control: a metric whose split is exact in every phase, TTFT first if
/// it qualifies.
fn control_metric(rows: &[MetricRow], found: &[Found], has_warmup: bool) -> Option<String> {
    let exact = |name: &str| {
        let ok = rows.iter().filter(|r| {
            r.endpoint == "all" && r.classification == Classification::Ok && r.metric == name
        });
        ok.count() == if has_warmup { 2 } else { 1 }
    };
    found
        .iter()
        .filter(|f| exact(&f.name))
        .min_by_key(|f| !f.def.is_ttft())
        .map(|f| f.name.clone())
}

fn output(report: Report, findings: Vec<Finding>, cannot_tell: Option<String>) -> CheckOutput {
    CheckOutput {
        report: Arc::new(report),
        findings,
        cannot_tell,
    }
}

impl CheckReport for Report {
    fn summary(&self, reason: Option<&str>) -> String {
        if let Some(r) = reason {
            return format!("cannot tell: {r}");
        }
        let all = || self.metrics.iter().filter(|m| m.endpoint == "all");
        let compared: BTreeSet<&str> = all().map(|m| m.metric.as_str()).collect();
        let bad: BTreeSet<&str> = all()
            .filter(|m| m.classification.is_mismatch())
            .map(|m| m.metric.as_str())
            .collect();
        let mut s = format!(
            "{} request-scoped metric(s) compared; {} mismatched",
            compared.len(),
            bad.len()
        );
        if let Some(ctl) = &self.control_metric {
            s.push_str(&format!("; control {ctl}"));
        }
        if let Some(o) = self.windows.overlap_ms.filter(|o| *o > 0.0) {
            s.push_str(&format!("; windows overlap {o:.1} ms"));
        }
        if self.repaired_from_raw_scrapes {
            s.push_str("; repaired from raw scrapes");
        }
        s
    }

    fn details(&self, status: CheckStatus) -> Vec<Detail> {
        let rows: Vec<Vec<String>> = self
            .metrics
            .iter()
            .filter(|m| m.endpoint == "all")
            .map(|m| {
                let expected = m
                    .expected_count
                    .map(|e| {
                        if e.min == e.max {
                            e.min.to_string()
                        } else {
                            format!("{}-{}", e.min, e.max)
                        }
                    })
                    .unwrap_or_else(|| "n/a".into());
                let corrected = m
                    .corrected
                    .as_ref()
                    .map(|c| format!("{} ({})", c.count, c.exactness))
                    .unwrap_or_default();
                let role = m
                    .role
                    .as_deref()
                    .map(|r| format!(" [{r}]"))
                    .unwrap_or_default();
                vec![
                    format!("{}{role}", m.metric),
                    m.phase.to_string(),
                    expected,
                    crate::report::fmt_opt(m.found_count, 0),
                    m.delta
                        .map(|d| format!("{d:+}"))
                        .unwrap_or_else(|| "n/a".into()),
                    m.classification.to_string(),
                    corrected,
                ]
            })
            .collect();
        if status == CheckStatus::Pass || rows.is_empty() {
            return Vec::new();
        }
        let header = vec![
            "metric",
            "phase",
            "expected",
            "found",
            "delta",
            "classification",
            "corrected",
        ];
        vec![Detail { header, rows }]
    }
}

fn in_role<'a>(fam: Option<&'a Family>, role: Option<&str>) -> Vec<&'a Series> {
    fam.map(|x| {
        x.series
            .iter()
            .filter(|s| role_of(&s.labels) == role)
            .collect()
    })
    .unwrap_or_default()
}

fn roles(f: &Found) -> Vec<Option<String>> {
    let mut roles: BTreeSet<Option<String>> = BTreeSet::new();
    for fam in [f.profiling, f.warmup].into_iter().flatten() {
        for s in &fam.series {
            roles.insert(role_of(&s.labels).map(str::to_string));
        }
    }
    if roles.is_empty() {
        roles.insert(None);
    }
    roles.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_is_a_range_when_requests_failed() {
        let e = Expected {
            min: 5,
            max: 7,
            source: ExpectedSource::Records,
        };
        assert_eq!(e.deviation(6.0), 0.0);
        assert_eq!(e.deviation(8.0), 1.0);
        assert_eq!(e.deviation(3.0), -2.0);
    }
}
