//! Check `phase_contamination`: does each server metric belong to the phase
//! it is reported under?
//!
//! What it checks: AIPerf splits cumulative server metrics into warmup and
//! profiling by subtracting scrapes taken at phase boundaries. For every
//! request-scoped metric (one observation per request, [`REQUEST_SCOPED`]),
//! the count in `metrics` (profiling) and `warmup_metrics` must match the
//! phase's requests. Each mismatch is classified (late warmup observation,
//! profiling observation lost to warmup, unexplained excess or deficit), the
//! phase windows are checked for overlap, counters for timeslices that start
//! early and for resets. With the raw scrapes (`server_metrics_export.jsonl`)
//! each scrape interval's increments are attributed to the requests whose
//! observation time falls in it, and a corrected split is reported.
//!
//! Why it matters: a warmup observation counted in profiling inflates counts,
//! sums, averages and percentile estimates, silently (seed 000).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

use super::{Check, CheckOutput, CheckReport, CheckStatus, Ctx, Detail};
use crate::artifacts::records::Phase;
use crate::artifacts::scrapes::Scrape;
use crate::artifacts::server_metrics::{self, lookup, Family, MetricType, Series};
use crate::findings::{Code, Finding, Severity};

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
use crate::frameworks::{role_of, ObservedAt, RequestScoped, REQUEST_SCOPED};
pub use crate::model::attribution::Corrected;
use crate::model::attribution::{self, Attribution, Candidate, Exactness};
use crate::stats::{merge_buckets, remove_observations, Percentiles};

/// An expected observation count: a range, because a failed request may or
/// may not have been observed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Expected {
    /// Successful requests.
    pub min: u64,
    /// Successful plus failed requests.
    pub max: u64,
    /// `records` or `configuration`.
    pub source: &'static str,
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
    pub framework: &'static str,
    /// When the server observes it.
    pub observed_at: ObservedAt,
    /// `all` (summed over endpoints with traffic) or an endpoint URL.
    pub endpoint: String,
    /// Prefill/decode role, when the series carry one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `profiling` or `warmup`.
    pub phase: &'static str,
    /// Expected count (range); `null` when unknown.
    pub expected_count: Option<Expected>,
    /// Count in the export; `null` when a series lacks it.
    pub found_count: Option<f64>,
    /// found - expected (0 inside the range).
    pub delta: Option<f64>,
    /// `ok`, `late_warmup_observation`, `profiling_lost_to_warmup`,
    /// `unexplained_excess`, `unexplained_deficit`, `unknown`, `not_compared`.
    pub classification: &'static str,
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
    fn of(buckets: &[(f64, f64)], delta: f64) -> Option<PercentileBounds> {
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
    pub fn worst_bias_pct(&self, found: &Percentiles) -> Option<(&'static str, f64)> {
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
    pub at_risk: Vec<&'static str>,
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

fn definitions(ctx: &Ctx) -> Vec<RequestScoped> {
    let mut defs: Vec<RequestScoped> = REQUEST_SCOPED.to_vec();
    for (name, at) in &ctx.settings.phase.extra_metrics {
        defs.push(RequestScoped {
            name: name.clone().into(),
            framework: "user",
            observed_at: *at,
        });
    }
    defs
}

fn count_of(series: &[&Series], kind: MetricType) -> Option<f64> {
    series.iter().map(|s| s.observations(kind)).sum()
}

/// Runs the check.
pub fn run(ctx: &Ctx) -> CheckOutput {
    let mut findings = Vec::new();
    let mut reason = None;
    let mut report = Report {
        control_metric: None,
        metrics: Vec::new(),
        windows: Windows::default(),
        endpoints_without_traffic: Vec::new(),
        repaired_from_raw_scrapes: false,
    };
    advisory(ctx, &mut findings);
    let Some(server) = ctx.run.server.as_ref() else {
        let why = format!("{} was not read", server_metrics::FILE);
        return output(report, findings, Some(why));
    };
    report.windows = windows(ctx, &mut findings);
    counter_windows(ctx, server, &mut findings);
    resets_in_export(server, &mut findings);
    if let Some(scrapes) = ctx.run.scrapes.as_ref() {
        resets_in_scrapes(&scrapes.scrapes, &mut findings);
    }

    let found: Vec<Found> = definitions(ctx)
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
        .filter(|f| {
            let kind = f.profiling.or(f.warmup).map(|x| x.kind);
            matches!(kind, Some(MetricType::Histogram | MetricType::Counter))
        })
        .collect();
    if found.is_empty() {
        let why = "no request-scoped server metric (a per-request histogram or counter of a \
                   known framework) is in the export, so the phase split cannot be checked";
        findings.push(Finding::new(PHASE_CHECK_UNKNOWN, why).file(server_metrics::FILE));
        return output(report, findings, Some(why.to_string()));
    }

    // Endpoints with traffic: those on which any request-scoped metric moved.
    let mut all_endpoints = BTreeSet::new();
    let mut busy = BTreeSet::new();
    for f in &found {
        for fam in [f.profiling, f.warmup].into_iter().flatten() {
            for s in &fam.series {
                let e = s.endpoint_url.clone().unwrap_or_default();
                if s.observations(fam.kind).unwrap_or(0.0) > 0.0 {
                    busy.insert(e.clone());
                }
                all_endpoints.insert(e);
            }
        }
    }
    report.endpoints_without_traffic = all_endpoints.difference(&busy).cloned().collect();

    let records = ctx.records();
    let expected = |phase: Phase| -> Option<Expected> {
        let p = ctx.model.phase(phase)?;
        match (records, p.successful, p.errors, p.configured_requests) {
            (Some(_), Some(ok), Some(err), _) => Some(Expected {
                min: ok,
                max: ok + err,
                source: "records",
            }),
            (None, _, _, Some(c)) => Some(Expected {
                min: c,
                max: c,
                source: "configuration",
            }),
            _ => None,
        }
    };
    let exp_p = expected(Phase::Profiling);
    let exp_w = ctx
        .model
        .warmup
        .as_ref()
        .and_then(|_| expected(Phase::Warmup));
    if exp_p.is_none() {
        reason = Some(
            "neither profile_export.jsonl nor a configured request count says how many \
             requests there were"
                .into(),
        );
    }

    let single_busy = (busy.len() == 1)
        .then(|| busy.iter().next().cloned())
        .flatten();
    let slack_ns = (ctx.settings.phase.match_slack_ms * 1e6) as u64;
    // The repair from raw scrapes of every (metric, role), in parallel, in
    // the order the loop below takes them. Candidates depend only on when a
    // metric is observed: built once per kind, not once per metric.
    let jobs: Vec<(&Found, Option<String>)> = found
        .iter()
        .flat_map(|f| roles(f).into_iter().map(move |r| (f, r)))
        .collect();
    let corrections: Vec<Option<Attribution>> = match ctx
        .run
        .scrapes
        .as_ref()
        .zip(records)
        .zip(single_busy.as_ref())
    {
        Some(((sc, rs), ep)) => {
            let mut kinds: Vec<ObservedAt> = found.iter().map(|f| f.def.observed_at).collect();
            kinds.sort_unstable_by_key(|k| *k as u8);
            kinds.dedup();
            let prepared: Vec<(ObservedAt, Vec<Candidate>)> = kinds
                .into_par_iter()
                .map(|at| (at, attribution::candidates(rs, at, slack_ns)))
                .collect();
            let first_start = ctx.model.first_request_start_ns();
            jobs.par_iter()
                .map(|(f, role)| {
                    let at = f.def.observed_at;
                    let cands = &prepared.iter().find(|p| p.0 == at)?.1;
                    let role = role.as_deref();
                    let pts = attribution::cumulative(&sc.scrapes, ep, &f.name, |labels| {
                        role_of(labels) == role
                    });
                    attribution::by_observation(&pts, first_start, cands, slack_ns)
                })
                .collect()
        }
        None => vec![None; jobs.len()],
    };
    let mut problems: Vec<Problem> = Vec::new();
    for ((f, role), corrected) in jobs.iter().zip(corrections) {
        let kind = f.profiling.or(f.warmup).map(|x| x.kind).unwrap_or_default();
        let (sp, sw) = (
            in_role(f.profiling, role.as_deref()),
            in_role(f.warmup, role.as_deref()),
        );
        // A family missing from a phase's section is unknown, not 0:
        // AIPerf omits `warmup_metrics` when it took no warmup scrape.
        let found_p = f.profiling.and_then(|_| count_of(&sp, kind));
        let found_w = match (ctx.model.warmup.is_some(), f.warmup) {
            (true, Some(_)) => count_of(&sw, kind),
            _ => None,
        };
        let dp = match (exp_p, found_p) {
            (Some(e), Some(x)) => Some(e.deviation(x)),
            _ => None,
        };
        let dw = match (exp_w, found_w) {
            (Some(e), Some(x)) => Some(e.deviation(x)),
            _ => None,
        };
        let (class_p, class_w) = classify(dp, dw);
        report.repaired_from_raw_scrapes |= corrected.is_some();
        for (phase, series, exp, fnd, d, class) in [
            (Phase::Profiling, &sp, exp_p, found_p, dp, class_p),
            (Phase::Warmup, &sw, exp_w, found_w, dw, class_w),
        ] {
            if phase == Phase::Warmup && ctx.model.warmup.is_none() {
                continue;
            }
            let sum: Option<f64> = (kind == MetricType::Histogram)
                .then(|| {
                    series
                        .iter()
                        .map(|s| s.stats.sum.or(Some(0.0)))
                        .sum::<Option<f64>>()
                })
                .flatten();
            let found_avg = match (sum, fnd) {
                (Some(s), Some(c)) if c > 0.0 => Some(s / c),
                _ => None,
            };
            let found_buckets = (kind == MetricType::Histogram && !series.is_empty())
                .then(|| merge_buckets(series.iter().map(|s| s.buckets.as_ref())))
                .flatten();
            let found_percentiles = found_buckets.as_deref().map(Percentiles::of_buckets);
            let corrected_here = corrected.as_ref().map(|c| c.get(phase).clone());
            let exact_percentiles = corrected_here
                .as_ref()
                .filter(|c| c.exactness == Exactness::Exact)
                .and_then(|c| c.percentiles);
            let percentile_bias_pct = found_percentiles
                .zip(exact_percentiles)
                .map(|(f, c)| f.bias_pct(&c));
            let true_percentile_bounds = match (&found_buckets, d, exact_percentiles) {
                (Some(b), Some(d), None) => PercentileBounds::of(b, d),
                _ => None,
            };
            report.metrics.push(MetricRow {
                metric: f.name.clone(),
                framework: f.def.framework,
                observed_at: f.def.observed_at,
                endpoint: "all".into(),
                role: role.clone(),
                phase: phase.as_str(),
                expected_count: exp,
                found_count: fnd,
                delta: d,
                classification: class,
                found_sum: sum,
                found_avg,
                corrected: corrected_here,
                found_percentiles,
                percentile_bias_pct,
                true_percentile_bounds,
            });
            // Per endpoint: found only (which endpoint served which
            // request is not in the artifacts), unless one endpoint had
            // all the traffic.
            let mut per_ep: BTreeMap<String, Vec<&Series>> = BTreeMap::new();
            for s in series.iter() {
                per_ep
                    .entry(s.endpoint_url.clone().unwrap_or_default())
                    .or_default()
                    .push(s);
            }
            if per_ep.len() > 1 {
                for (ep, ss) in per_ep {
                    let c = count_of(&ss, kind);
                    let only = single_busy.as_deref() == Some(ep.as_str());
                    report.metrics.push(MetricRow {
                        metric: f.name.clone(),
                        framework: f.def.framework,
                        observed_at: f.def.observed_at,
                        endpoint: ep.clone(),
                        role: role.clone(),
                        phase: phase.as_str(),
                        expected_count: if only { exp } else { None },
                        found_count: c,
                        delta: if only { d } else { None },
                        classification: if only {
                            class
                        } else if busy.contains(&ep) {
                            "not_compared"
                        } else {
                            "no_traffic"
                        },
                        found_sum: None,
                        found_avg: None,
                        corrected: None,
                        found_percentiles: None,
                        percentile_bias_pct: None,
                        true_percentile_bounds: None,
                    });
                }
            }
        }
        if class_p != "ok" || class_w != "ok" {
            let profiling_row = report.metrics.iter().rev().find(|r| {
                r.metric == f.name
                    && r.phase == "profiling"
                    && r.endpoint == "all"
                    && r.role == *role
            });
            problems.push(Problem {
                metric: f.name.clone(),
                observed_at: f.def.observed_at,
                role: role.clone(),
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
            });
        }
    }

    // The control: a metric whose split is exact, TTFT first if it qualifies.
    let clean: Vec<&MetricRow> = report
        .metrics
        .iter()
        .filter(|r| r.endpoint == "all" && r.classification == "ok")
        .collect();
    let exact = |name: &str| {
        clean.iter().filter(|r| r.metric == name).count() == if exp_w.is_some() { 2 } else { 1 }
    };
    report.control_metric = found
        .iter()
        .filter(|f| exact(&f.name))
        .min_by_key(|f| !f.name.contains("time_to_first_token"))
        .map(|f| f.name.clone());

    for p in &problems {
        findings.extend(p.findings(report.control_metric.as_deref(), &report.windows));
    }
    output(report, findings, reason)
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
            .filter(|m| {
                !matches!(
                    m.classification,
                    "ok" | "not_compared" | "no_traffic" | "unknown"
                )
            })
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

/// Classifies the deviations of profiling (`dp`) and warmup (`dw`); an
/// unknown deviation classifies its phase as `unknown`, never `ok`.
fn classify(dp: Option<f64>, dw: Option<f64>) -> (&'static str, &'static str) {
    match (dp, dw) {
        (None, None) => ("unknown", "unknown"),
        (Some(p), None) => (side(p), "unknown"),
        (None, Some(w)) => ("unknown", side(w)),
        (Some(p), Some(w)) if p > 0.0 && w < 0.0 => {
            ("late_warmup_observation", "late_warmup_observation")
        }
        (Some(p), Some(w)) if p < 0.0 && w > 0.0 => {
            ("profiling_lost_to_warmup", "profiling_lost_to_warmup")
        }
        (Some(p), Some(w)) => (side(p), side(w)),
    }
}

fn side(d: f64) -> &'static str {
    if d > 0.0 {
        "unexplained_excess"
    } else if d < 0.0 {
        "unexplained_deficit"
    } else {
        "ok"
    }
}

/// A mismatched metric, turned into findings.
struct Problem {
    metric: String,
    observed_at: ObservedAt,
    role: Option<String>,
    exp_p: Option<Expected>,
    exp_w: Option<Expected>,
    found_p: Option<f64>,
    found_w: Option<f64>,
    dp: Option<f64>,
    dw: Option<f64>,
    found_avg_p: Option<f64>,
    found_sum_p: Option<f64>,
    corrected: Option<Attribution>,
    /// Bias of the profiling bucket-estimated percentiles over the exactly
    /// repaired ones.
    percentile_bias_p: Option<Percentiles>,
    /// Without an exact repair: the largest bias the profiling percentiles
    /// can have over the truth inside their bounds.
    percentile_worst_p: Option<(&'static str, f64)>,
}

fn range(e: Option<Expected>) -> String {
    match e {
        Some(e) if e.min == e.max => e.min.to_string(),
        Some(e) => format!("{}-{}", e.min, e.max),
        None => "?".into(),
    }
}

fn num(x: Option<f64>) -> String {
    x.map(|v| format!("{v}")).unwrap_or_else(|| "?".into())
}

impl Problem {
    fn findings(&self, control: Option<&str>, w: &Windows) -> Vec<Finding> {
        let mut out = Vec::new();
        let (Some(dp), dw) = (self.dp, self.dw.unwrap_or(0.0)) else {
            return out;
        };
        let role = self
            .role
            .as_deref()
            .map(|r| format!(" (role {r})"))
            .unwrap_or_default();
        let name = format!("{}{role}", self.metric);
        let control_note = match control {
            Some(c) if c != self.metric => format!(" {c} splits exactly (control), so the request counts are right and the mismatch is this metric's."),
            _ => String::new(),
        };
        let split = format!(
            "profiling holds {} observations for {} profiling requests ({dp:+}), warmup {} for {} ({dw:+})",
            num(self.found_p),
            range(self.exp_p),
            num(self.found_w),
            range(self.exp_w)
        );
        let expected = serde_json::json!({"profiling": self.exp_p.map(|e| e.min), "warmup": self.exp_w.map(|e| e.min)});
        let found = serde_json::json!({"profiling": self.found_p, "warmup": self.found_w});
        let base_p = self.exp_p.map(|e| e.max as f64).filter(|b| *b > 0.0);
        let repair = self
            .corrected
            .as_ref()
            .map(|c| {
                let (p, w) = (c.get(Phase::Profiling), c.get(Phase::Warmup));
                format!(
                    " Repaired from the raw scrapes ({}): profiling {} observations{}, warmup {}.",
                    p.exactness,
                    p.count,
                    p.avg.map(|a| format!(" (avg {a:.6})")).unwrap_or_default(),
                    w.count
                )
            })
            .unwrap_or_default();
        // Bias of the published figure against the repaired one, percent.
        let repaired = self.corrected.as_ref().map(|c| c.get(Phase::Profiling));
        let sum_bias =
            crate::stats::bias_pct(self.found_sum_p, repaired.as_ref().and_then(|c| c.sum));
        let avg_bias =
            crate::stats::bias_pct(self.found_avg_p, repaired.as_ref().and_then(|c| c.avg));
        let mk = |code: Code, what: String, sev: Severity| {
            let mut f = Finding::new(
                code,
                format!("{name}: {split}: {what}.{control_note}{repair}"),
            )
            .file(server_metrics::FILE)
            .field(format!("metrics[\"{}\"]", self.metric))
            .expected_found(&expected, &found)
            .effect("profiling_delta", dp, "count")
            .effect("warmup_delta", dw, "count");
            if let Some(b) = base_p {
                f = f.effect("profiling_count_inflation", dp / b * 100.0, "%");
            }
            if let Some(b) = avg_bias {
                f = f.effect("profiling_avg_bias", b, "%");
            }
            if let Some(b) = sum_bias {
                f = f.effect("profiling_sum_bias", b, "%");
            }
            // Bucket-estimated percentiles: exact bias after an exact
            // repair, otherwise the worst case inside the bounds.
            const QUANTITY: [(&str, &str, &str); 3] = [
                ("p50", "profiling_p50_bias", "profiling_p50_bias_up_to"),
                ("p90", "profiling_p90_bias", "profiling_p90_bias_up_to"),
                ("p99", "profiling_p99_bias", "profiling_p99_bias_up_to"),
            ];
            let quantity = |stat: &str| QUANTITY.iter().find(|q| q.0 == stat);
            for (stat, b) in self.percentile_bias_p.iter().flat_map(|p| p.known()) {
                if let Some(q) = quantity(stat) {
                    f = f.effect(q.1, b, "%");
                }
            }
            if let Some((stat, b)) = self.percentile_worst_p {
                if let Some(q) = quantity(stat) {
                    f = f.effect(q.2, b, "%");
                }
            }
            f.severity = sev;
            f
        };
        // Warmup-only damage does not touch published (profiling) numbers.
        let sev = |profiling_hit: bool, code: Code| {
            if profiling_hit {
                code.severity()
            } else {
                Severity::Warning.min(code.severity())
            }
        };
        if dp > 0.0 && dw < 0.0 {
            let k = dp.min(-dw);
            out.push(mk(
                LATE_WARMUP_OBSERVATION,
                format!(
                    "{k} warmup observation(s) published after the end-of-warmup scrape were \
                     counted in profiling (this metric is observed at {})",
                    self.observed_at.as_str()
                ),
                LATE_WARMUP_OBSERVATION.severity(),
            ));
        } else if dp < 0.0 && dw > 0.0 {
            let k = (-dp).min(dw);
            let why = match w.overlap_ms {
                Some(o) if o > 0.0 => {
                    format!("; the end-of-warmup scrape came {o:.1} ms after profiling started")
                }
                _ => String::new(),
            };
            out.push(mk(
                PROFILING_LOST_TO_WARMUP,
                format!(
                    "{k} profiling observation(s) (observed at {}) were published before the \
                     end-of-warmup scrape and counted in warmup{why}",
                    self.observed_at.as_str()
                ),
                PROFILING_LOST_TO_WARMUP.severity(),
            ));
        } else if dp > 0.0 && dw > 0.0 {
            // Both phases over: the same observations counted twice.
            let cause = match w.overlap_ms.filter(|o| *o > 0.0) {
                Some(o) => format!(
                    "the phase windows overlap by {o:.1} ms, so observations made in the overlap \
                     are counted in both phases"
                ),
                None => "observations counted in both phases, or foreign traffic".into(),
            };
            out.push(mk(
                UNEXPLAINED_EXCESS,
                format!(
                    "profiling has {dp} and warmup {dw} more observation(s) than requests: {cause}"
                ),
                UNEXPLAINED_EXCESS.severity(),
            ));
        } else {
            for (phase, d) in [("profiling", dp), ("warmup", dw)] {
                let hit = phase == "profiling";
                if d > 0.0 {
                    let overlap = w.overlap_ms.filter(|o| *o > 0.0);
                    let cause = match overlap {
                        Some(o) => format!(
                            "the phase windows overlap by {o:.1} ms, so observations made in \
                             the overlap are counted in both phases (or foreign traffic reached \
                             the server)"
                        ),
                        None => "foreign traffic reached the server, or the same observations \
                                 were counted twice"
                            .into(),
                    };
                    out.push(mk(
                        UNEXPLAINED_EXCESS,
                        format!("{phase} has {d} more observation(s) than requests with no matching deficit: {cause}"),
                        sev(hit, UNEXPLAINED_EXCESS),
                    ));
                } else if d < 0.0 {
                    out.push(mk(
                        UNEXPLAINED_DEFICIT,
                        format!(
                            "{phase} has {} fewer observation(s) than requests with no matching \
                             excess: observations published after the final scrape, requests \
                             the server never counted, or a counter reset",
                            -d
                        ),
                        sev(hit, UNEXPLAINED_DEFICIT),
                    ));
                }
            }
        }
        out
    }
}

fn windows(ctx: &Ctx, findings: &mut Vec<Finding>) -> Windows {
    let mut w = Windows {
        warmup: ctx.model.warmup.as_ref().and_then(|p| p.server_window_ns),
        profiling: ctx.model.profiling.server_window_ns,
        ..Default::default()
    };
    let (Some((_, we)), Some((ps, _))) = (w.warmup, w.profiling) else {
        return w;
    };
    w.overlap_ms = Some((we as f64 - ps as f64) / 1e6);
    let Some(records) = ctx.records() else {
        return w;
    };
    if we <= ps {
        return w;
    }
    // One walk over the records for all four counts.
    let (mut started, mut first, mut finished, mut warm_late) = (0u64, 0u64, 0u64, 0u64);
    for r in records {
        match r.phase {
            Phase::Profiling => {
                started += u64::from(r.request_start_ns < we);
                first += u64::from(r.first_token_ns().unwrap_or(r.request_end_ns) < we);
                finished += u64::from(r.request_end_ns < we);
            }
            Phase::Warmup => warm_late += u64::from(r.request_end_ns > ps),
        }
    }
    w.profiling_started_before_warmup_closed = Some(started);
    w.profiling_first_token_before_warmup_closed = Some(first);
    w.profiling_finished_before_warmup_closed = Some(finished);
    w.warmup_finished_after_profiling_started = Some(warm_late);
    for (n, kind) in [
        (started, "arrival"),
        (first, "first_token"),
        (finished, "completion"),
    ] {
        if n > 0 {
            w.at_risk.push(kind);
        }
    }
    if warm_late > 0 && !w.at_risk.contains(&"completion") {
        w.at_risk.push("completion");
    }
    let overlap = (we - ps) as f64 / 1e6;
    let risk = if w.at_risk.is_empty() {
        "no request-scoped observation is at risk".to_string()
    } else {
        format!("metrics observed at {} are at risk", w.at_risk.join(", "))
    };
    findings.push(
        Finding::new(
            PHASE_WINDOW_OVERLAP,
            format!(
                "the warmup window closes {overlap:.1} ms after profiling starts: {started} \
                 profiling request(s) started, {first} had their first token and {finished} \
                 finished before it closed, and {warm_late} warmup request(s) finished after \
                 profiling started; {risk}"
            ),
        )
        .file(server_metrics::FILE)
        .field("summary.phase_time_ranges")
        .expected_found(
            serde_json::json!({"warmup.end_ns <=": ps}),
            serde_json::json!({"warmup.end_ns": we}),
        )
        .effect("overlap", overlap, "ms")
        .effect("profiling_started_before_close", started as f64, "count")
        .effect("profiling_finished_before_close", finished as f64, "count"),
    );
    w
}

fn counter_windows(
    ctx: &Ctx,
    server: &server_metrics::ServerMetricsExport,
    out: &mut Vec<Finding>,
) {
    let Some((ps, _)) = ctx.model.profiling.server_window_ns else {
        return;
    };
    const SLACK_NS: u64 = 1_000_000_000;
    for (name, fam) in &server.metrics {
        if fam.kind != MetricType::Counter {
            continue;
        }
        for s in &fam.series {
            let Some(first) = s
                .timeslices
                .as_ref()
                .and_then(|t| t.first())
                .and_then(|t| t.start_ns)
            else {
                continue;
            };
            if first + SLACK_NS < ps {
                let early = (ps - first) as f64 / 1e9;
                let jump = s
                    .timeslices
                    .as_ref()
                    .and_then(|t| t.first())
                    .and_then(|t| t.total);
                out.push(
                    Finding::new(
                        COUNTER_WINDOW_EARLY,
                        format!(
                            "{name} on {}: its profiling timeslices start {early:.1} s before \
                             profiling started{}: the profiling delta includes pre-profiling \
                             (warmup) increments, as with a wrongly tagged baseline scrape",
                            s.endpoint_url.as_deref().unwrap_or("?"),
                            jump.map(|j| format!(" (first slice +{j})"))
                                .unwrap_or_default()
                        ),
                    )
                    .file(server_metrics::FILE)
                    .field(format!(
                        "metrics[\"{name}\"].series[].timeslices[0].start_ns"
                    ))
                    .expected_found(ps, first)
                    .effect("early", early, "s"),
                );
            }
        }
    }
}

fn resets_in_export(server: &server_metrics::ServerMetricsExport, out: &mut Vec<Finding>) {
    let phases = [
        ("metrics", Some(&server.metrics)),
        ("warmup_metrics", server.warmup_metrics.as_ref()),
    ];
    for (section, fams) in phases {
        let Some(fams) = fams else { continue };
        for (name, fam) in fams {
            if fam.kind != MetricType::Histogram {
                continue;
            }
            for s in &fam.series {
                if s.stats.count.unwrap_or(0.0) > 0.0 && s.buckets.is_none() {
                    out.push(
                        Finding::new(
                            COUNTER_RESET,
                            format!(
                                "{section}[\"{name}\"] on {} has a count but no buckets: AIPerf \
                                 drops the buckets when a bucket delta is negative, i.e. the \
                                 histogram was reset during the phase; its count and sum are \
                                 clamped and untrustworthy",
                                s.endpoint_url.as_deref().unwrap_or("?")
                            ),
                        )
                        .file(server_metrics::FILE)
                        .field(format!("{section}[\"{name}\"].series[].buckets")),
                    );
                }
            }
        }
    }
}

fn resets_in_scrapes(scrapes: &[Scrape], out: &mut Vec<Finding>) {
    // (endpoint, family, labels) -> (last value, line)
    let mut last: BTreeMap<(String, String, String), (f64, u64)> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    let mut ordered: Vec<&Scrape> = scrapes.iter().collect();
    ordered.sort_by_key(|s| (s.endpoint_url.clone(), s.timestamp_ns));
    let mut lost: BTreeMap<(String, String), f64> = BTreeMap::new();
    for s in ordered {
        for (fam, samples) in &s.metrics {
            for sample in samples {
                let Some(v) = sample.cumulative() else {
                    continue;
                };
                let key = (
                    s.endpoint_url.clone(),
                    fam.clone(),
                    format!("{:?}", sample.labels),
                );
                if let Some((prev, prev_line)) = last.get(&key).copied() {
                    if v < prev {
                        *lost.entry((key.0.clone(), key.1.clone())).or_default() += v;
                        if reported.insert((key.0.clone(), key.1.clone())) {
                            out.push(
                                Finding::new(
                                    COUNTER_RESET,
                                    format!(
                                        "{fam} on {} went down from {prev} (line {prev_line}) to \
                                         {v} (line {}): the server restarted or the series was \
                                         reset; AIPerf clamps such deltas at 0, so its totals \
                                         for this metric are too small. Reset-aware, the growth \
                                         after the reset is at least {v}",
                                        s.endpoint_url, s.line
                                    ),
                                )
                                .file(crate::artifacts::scrapes::FILE)
                                .line(s.line)
                                .field(format!("metrics[\"{fam}\"]"))
                                .expected_found(format!(">= {prev}"), v)
                                .effect("drop", prev - v, "count"),
                            );
                        }
                    }
                }
                last.insert(key, (v, s.line));
            }
        }
    }
}

fn advisory(ctx: &Ctx, out: &mut Vec<Finding>) {
    let Some(v) = ctx.model.aiperf_version.as_deref() else {
        return;
    };
    if (v.starts_with("0.12.") || v.starts_with("0.13.")) && ctx.model.warmup.is_some() {
        out.push(
            Finding::new(
                AIPERF_VERSION_ADVISORY,
                format!(
                    "AIPerf {v} takes the end-of-warmup scrape immediately, with no flush \
                     barrier before profiling starts, so server observations can cross the \
                     warmup/profiling boundary. To re-run safely: run warmup as a separate \
                     invocation, wait for the server's metrics to settle, then profile without \
                     --warmup-request-count; or export the raw scrapes \
                     (--server-metrics-formats json jsonl) so the split can be repaired"
                ),
            )
            .file(crate::artifacts::summary::FILE)
            .field("aiperf_version"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_matches_the_mirror_cases() {
        assert_eq!(classify(Some(1.0), Some(-1.0)).0, "late_warmup_observation");
        assert_eq!(
            classify(Some(-2.0), Some(2.0)).1,
            "profiling_lost_to_warmup"
        );
        assert_eq!(classify(Some(0.0), Some(4.0)), ("ok", "unexplained_excess"));
        assert_eq!(
            classify(Some(-1.0), Some(0.0)),
            ("unexplained_deficit", "ok")
        );
        assert_eq!(classify(Some(0.0), None), ("ok", "unknown"));
        assert_eq!(classify(None, Some(1.0)), ("unknown", "unexplained_excess"));
        assert_eq!(classify(None, None).0, "unknown");
    }

    #[test]
    fn expected_is_a_range_when_requests_failed() {
        let e = Expected {
            min: 5,
            max: 7,
            source: "records",
        };
        assert_eq!(e.deviation(6.0), 0.0);
        assert_eq!(e.deviation(8.0), 1.0);
        assert_eq!(e.deviation(3.0), -2.0);
    }
}
