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

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

use super::{Check, CheckOutput, CheckReport, CheckStatus, Ctx, Detail};
use crate::artifacts::records::{Phase, Record};
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
use crate::stats::{le_text, le_value, merge_buckets, remove_observations, Percentiles};

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

/// A corrected split from the raw scrapes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Corrected {
    /// Observations attributed to this phase's requests.
    pub count: u64,
    /// Sum of their values (histograms); point estimate when bounded.
    pub sum: Option<f64>,
    /// Lower bound of the sum.
    pub sum_low: Option<f64>,
    /// Upper bound of the sum (`null` when unbounded: the +Inf bucket).
    pub sum_high: Option<f64>,
    /// `sum / count`.
    pub avg: Option<f64>,
    /// `exact` or `bounded`.
    pub exactness: &'static str,
    /// Histograms attributed exactly: the phase's cumulative buckets (`le`
    /// to count, as in the export).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buckets: Option<BTreeMap<String, f64>>,
    /// Percentiles estimated from those buckets (Prometheus
    /// `histogram_quantile` interpolation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentiles: Option<Percentiles>,
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
                .map(|at| (at, candidates(rs, at, slack_ns)))
                .collect();
            let first_start = ctx.model.first_request_start_ns();
            jobs.par_iter()
                .map(|(f, role)| {
                    let at = f.def.observed_at;
                    let cands = &prepared.iter().find(|p| p.0 == at)?.1;
                    attribute(
                        &sc.scrapes,
                        first_start,
                        cands,
                        ep,
                        &f.name,
                        role.as_deref(),
                        ctx,
                    )
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
            let corrected_here = corrected.as_ref().map(|c| c.get(phase));
            let exact_percentiles = corrected_here
                .as_ref()
                .filter(|c| c.exactness == "exact")
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

// --- Repair from raw scrapes -----------------------------------------------------------

/// Per-phase results of attributing scrape increments to requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribution {
    profiling: Corrected,
    warmup: Corrected,
}

impl Attribution {
    fn get(&self, phase: Phase) -> Corrected {
        match phase {
            Phase::Profiling => self.profiling.clone(),
            Phase::Warmup => self.warmup.clone(),
        }
    }
}

/// One scrape of the metric on the endpoint: cumulative count, sum and buckets.
struct Point {
    t: u64,
    count: f64,
    sum: Option<f64>,
    buckets: BTreeMap<u64, (f64, f64)>, // le bits (ordered by value) -> (le, count)
}

fn le_key(le: f64) -> u64 {
    // Order-preserving for non-negative floats (bucket bounds are >= 0).
    le.to_bits()
}

fn points(scrapes: &[Scrape], endpoint: &str, name: &str, role: Option<&str>) -> Vec<Point> {
    let mut pts: Vec<Point> = scrapes
        .iter()
        .filter(|s| s.endpoint_url == endpoint)
        .filter_map(|s| {
            let ss = s.samples(name)?;
            let mut p = Point {
                t: s.timestamp_ns,
                count: 0.0,
                sum: Some(0.0),
                buckets: BTreeMap::new(),
            };
            for x in ss.iter().filter(|x| role_of(&x.labels) == role) {
                p.count += x.cumulative()?;
                p.sum = match (p.sum, x.sum) {
                    (Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
                for (le, c) in x.buckets.iter().flatten() {
                    let v = le_value(le)?;
                    let e = p.buckets.entry(le_key(v)).or_insert((v, 0.0));
                    e.1 += c;
                }
            }
            Some(p)
        })
        .collect();
    pts.sort_by_key(|p| p.t);
    pts
}

/// The successful requests as candidates for observations of a metric
/// observed at `at`, sorted by the earliest time their observation can appear.
fn candidates(records: &[Record], at: ObservedAt, slack: u64) -> Vec<Candidate> {
    let mut cands: Vec<Candidate> = Vec::with_capacity(records.len());
    cands.extend(records.iter().filter(|r| r.is_success()).map(|r| {
        let (event, known) = match at {
            ObservedAt::Arrival => (r.request_start_ns, true),
            ObservedAt::FirstToken => match r.first_token_ns() {
                Some(t) => (t, true),
                None => (r.request_end_ns, false),
            },
            ObservedAt::Completion => (r.request_end_ns, true),
        };
        let earliest = if known {
            event.saturating_sub(slack)
        } else {
            r.request_start_ns
        };
        Candidate {
            earliest,
            event,
            phase: r.phase,
        }
    }));
    cands.sort_unstable_by_key(|c| (c.earliest, c.event));
    cands
}

struct Candidate {
    /// Earliest time the server can have published its observation.
    earliest: u64,
    event: u64,
    phase: Phase,
}

/// The candidates of an attribution that have not been given an increment
/// yet, kept so that each scrape interval takes its own in time that does not
/// grow with all of them: a run whose server counted far fewer observations
/// than it had requests piles up pending candidates, and they all end late.
///
/// Within an interval `(a, b]` a candidate whose event (`e`) is
/// - on time (`a < e + slack`, `e <= b + slack`) comes first,
/// - late (`e + slack <= a`: owed an observation already) next,
/// - in flight (`e > b + slack`) last;
///
/// ties in event order, then in arrival order (the candidate index). A late
/// candidate stays late (the intervals move forward), so the late ones wait
/// in a heap, and only the others (the requests in flight around the
/// interval) are ranked again in each interval.
struct Pending<'c> {
    cands: &'c [Candidate],
    slack: u64,
    /// Pending, not late yet, as (event, index).
    fresh: Vec<(u64, usize)>,
    /// Pending and late, smallest (event, index) first.
    late: BinaryHeap<Reverse<(u64, usize)>>,
    /// Pending candidates of each phase, by `Phase as usize`.
    per_phase: [usize; 2],
    /// Candidates below this index that are still pending were passed over
    /// in an ambiguous interval: whichever increment such a candidate gets
    /// later could have gone elsewhere. (Candidates become pending in index
    /// order, so one mark covers every pending candidate of that interval.)
    float_below: usize,
}

impl<'c> Pending<'c> {
    fn new(cands: &'c [Candidate], slack: u64) -> Self {
        Pending {
            cands,
            slack,
            fresh: Vec::new(),
            late: BinaryHeap::new(),
            per_phase: [0; 2],
            float_below: 0,
        }
    }

    fn add(&mut self, i: usize) {
        self.fresh.push((self.cands[i].event, i));
        self.per_phase[self.cands[i].phase as usize] += 1;
    }

    fn len(&self) -> usize {
        self.fresh.len() + self.late.len()
    }

    /// The first `k` pending candidates for the interval `(a, b]`, in order,
    /// taken out; and whether the choice was ambiguous: candidates were left
    /// and the chosen and the left do not all share one phase. `next` is the
    /// number of candidates that have become pending.
    fn choose(&mut self, a: u64, b: u64, k: usize, next: usize) -> (Vec<usize>, bool) {
        let slack = self.slack;
        let late = &mut self.late;
        self.fresh.retain(|&(e, i)| {
            let is_late = e.saturating_add(slack) <= a;
            if is_late {
                late.push(Reverse((e, i)));
            }
            !is_late
        });
        let take = k.min(self.len());
        // The fresh ones by (in flight, event, index): on time first.
        let in_flight = |e: u64| e > b.saturating_add(slack);
        let key = |&(e, i): &(u64, usize)| (in_flight(e), e, i);
        let n = take.min(self.fresh.len());
        if n < self.fresh.len() {
            self.fresh.select_nth_unstable_by_key(n, key);
        }
        self.fresh[..n].sort_unstable_by_key(key);
        let on_time = self.fresh[..n]
            .iter()
            .take_while(|&&(e, _)| !in_flight(e))
            .count();
        let mut chosen: Vec<usize> = self.fresh[..on_time].iter().map(|&(_, i)| i).collect();
        while chosen.len() < take {
            match self.late.pop() {
                Some(Reverse((_, i))) => chosen.push(i),
                None => break,
            }
        }
        // In flight last; `fresh[..n]` holds the first of them in order.
        let from_fresh = on_time + (take - chosen.len());
        chosen.extend(self.fresh[on_time..from_fresh].iter().map(|&(_, i)| i));
        self.fresh.drain(..from_fresh);
        for &i in &chosen {
            self.per_phase[self.cands[i].phase as usize] -= 1;
        }
        let ambiguous = self.len() > 0 && {
            let mut seen = [false; 2];
            for &i in &chosen {
                seen[self.cands[i].phase as usize] = true;
            }
            for (s, &n) in seen.iter_mut().zip(&self.per_phase) {
                *s |= n > 0;
            }
            seen[0] && seen[1]
        };
        if ambiguous {
            self.float_below = next;
        }
        (chosen, ambiguous)
    }
}

#[derive(Clone, Copy)]
struct Increment {
    phase: Option<Phase>,
    point: f64,
    lo: f64,
    hi: f64,
    /// The bucket (`le`) the bucket deltas put it in, when they tell.
    le: Option<f64>,
    /// Its attribution could have gone to the other phase.
    uncertain: bool,
}

/// Attributes each scrape interval's increments to requests, and returns the
/// per-phase split. `None` when the raw scrapes cannot support it (too few
/// scrapes, no baseline before the first request, a reset).
///
/// A request's observation can appear once the client-side time of its event
/// (arrival, first token, completion) is within the slack of the scrape; when
/// the record does not carry that time (TTFT of a non-streaming request), as
/// soon as the request has started. Within an interval the increments go
/// first to requests whose event falls in it, then to requests whose event is
/// past (late publications, oldest first), then to requests still in flight. Where both
/// phases were eligible for fewer increments than candidates, the choice is
/// ambiguous: those increments, and the later ones taken by the candidates
/// passed over, are uncertain, and the phase sums become bounds built from
/// the bucket ranges of the uncertain increments.
fn attribute(
    scrapes: &[Scrape],
    first_start: Option<u64>,
    cands: &[Candidate],
    endpoint: &str,
    name: &str,
    role: Option<&str>,
    ctx: &Ctx,
) -> Option<Attribution> {
    let pts = points(scrapes, endpoint, name, role);
    if pts.len() < 2 {
        return None;
    }
    let slack = (ctx.settings.phase.match_slack_ms * 1e6) as u64;
    // The baseline must predate every request, or earlier increments are lost.
    if first_start.is_some_and(|s| s <= pts[0].t) {
        return None;
    }
    let is_hist = pts.iter().all(|p| p.sum.is_some());
    let mut next = 0usize;
    let mut pending = Pending::new(cands, slack);
    let mut increments: Vec<Increment> = Vec::new();
    let mut unattributed = 0u64;
    for w in pts.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let dc = b.count - a.count;
        if dc < -0.5 {
            return None; // a reset: reported separately, not repaired across
        }
        while next < cands.len() && cands[next].earliest <= b.t {
            pending.add(next);
            next += 1;
        }
        let k = dc.round() as usize;
        if k == 0 {
            continue;
        }
        // Passed over in an earlier ambiguous interval (read before this
        // interval's choice can move the mark).
        let floating = pending.float_below;
        let (chosen, ambiguous) = pending.choose(a.t, b.t, k, next);
        unattributed += (k - chosen.len()) as u64;
        let dsum = match (a.sum, b.sum) {
            (Some(x), Some(y)) => y - x,
            _ => 0.0,
        };
        let ranges = increment_ranges(a, b, k, dsum);
        let point = dsum / k as f64;
        let mixed_here = chosen
            .iter()
            .map(|i| cands[*i].phase)
            .collect::<BTreeSet<_>>()
            .len()
            > 1;
        for (j, (lo, hi, le)) in ranges.into_iter().enumerate() {
            let cand = chosen.get(j).copied();
            increments.push(Increment {
                phase: cand.map(|i| cands[i].phase),
                point,
                lo,
                hi,
                le,
                uncertain: ambiguous || mixed_here || cand.is_some_and(|i| i < floating),
            });
        }
    }
    let unobserved = pending.len() + (cands.len() - next);
    let pool: Vec<&Increment> = increments.iter().filter(|x| x.uncertain).collect();
    let finish = |phase: Phase| {
        let mine = increments.iter().filter(|x| x.phase == Some(phase));
        let (mut count, mut point, mut certain, mut n_uncertain) = (0u64, 0.0, 0.0, 0usize);
        for x in mine {
            count += 1;
            point += x.point;
            if x.uncertain {
                n_uncertain += 1;
            } else {
                certain += x.point;
            }
        }
        let mut los: Vec<f64> = pool.iter().map(|x| x.lo).collect();
        let mut his: Vec<f64> = pool.iter().map(|x| x.hi).collect();
        los.sort_by(f64::total_cmp);
        his.sort_by(|a, b| b.total_cmp(a));
        let low = certain + los.iter().take(n_uncertain).sum::<f64>();
        let high = certain + his.iter().take(n_uncertain).sum::<f64>();
        let bounded = n_uncertain > 0 || unattributed > 0 || unobserved > 0;
        let (sum, sum_low, sum_high) = if is_hist {
            (Some(point), Some(low), Some(high).filter(|h| h.is_finite()))
        } else {
            (None, None, None)
        };
        // Exact attribution of a histogram: the phase's own buckets, and the
        // percentiles estimated from them.
        let buckets = (is_hist && !bounded)
            .then(|| {
                let les: Vec<f64> = pts.last()?.buckets.values().map(|x| x.0).collect();
                let mut per_le: Vec<f64> = vec![0.0; les.len()];
                for x in increments.iter().filter(|x| x.phase == Some(phase)) {
                    let i = les.iter().position(|le| Some(*le) == x.le)?;
                    per_le[i] += 1.0;
                }
                let mut cum = 0.0;
                let buckets: Vec<(f64, f64)> = les
                    .iter()
                    .zip(per_le)
                    .map(|(le, n)| {
                        cum += n;
                        (*le, cum)
                    })
                    .collect();
                (buckets.last()?.0 == f64::INFINITY).then_some(buckets)
            })
            .flatten();
        Corrected {
            count,
            sum,
            sum_low,
            sum_high,
            avg: sum.filter(|_| count > 0).map(|s| s / count as f64),
            exactness: if bounded { "bounded" } else { "exact" },
            percentiles: buckets.as_deref().map(Percentiles::of_buckets),
            buckets: buckets.map(|b| b.iter().map(|(le, c)| (le_text(*le), *c)).collect()),
        }
    };
    Some(Attribution {
        profiling: finish(Phase::Profiling),
        warmup: finish(Phase::Warmup),
    })
}

/// Value bounds of each of an interval's `k` increments: exact for a single
/// increment (the sum delta), otherwise the bucket ranges they fell into.
/// Also the bucket (`le`) of each, from the bucket deltas; `None` where the
/// deltas account for fewer than `k` increments.
fn increment_ranges(a: &Point, b: &Point, k: usize, dsum: f64) -> Vec<(f64, f64, Option<f64>)> {
    let mut ranges = Vec::with_capacity(k);
    let (mut prev_le, mut prev_c) = (0.0, 0.0);
    for (le, c) in b.buckets.values() {
        let before = a.buckets.get(&le_key(*le)).map_or(0.0, |x| x.1);
        let cum = c - before;
        let n = (cum - prev_c).round().max(0.0) as usize;
        ranges.extend(std::iter::repeat_n((prev_le, *le, Some(*le)), n));
        prev_le = *le;
        prev_c = cum;
    }
    ranges.resize(k, (0.0, f64::INFINITY, None));
    if k == 1 {
        // A single increment's value is the sum delta itself.
        ranges[0] = (dsum, dsum, ranges[0].2);
    }
    ranges
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

    /// The selection as first written (a vector of all pending candidates,
    /// ranked again in every interval, and a flag per candidate): for each
    /// interval with increments, the chosen candidates in order, whether the
    /// choice was ambiguous and which chosen ones had been passed over in an
    /// ambiguous interval; and how many stay pending.
    #[allow(clippy::type_complexity)]
    fn reference_choices(
        cands: &[Candidate],
        slack: u64,
        intervals: &[(u64, u64, usize)],
    ) -> (Vec<(Vec<usize>, bool, Vec<bool>)>, usize) {
        let mut floating = vec![false; cands.len()];
        let mut pending: Vec<(u64, usize)> = Vec::new();
        let mut next = 0;
        let mut out = Vec::new();
        for &(a, b, k) in intervals {
            while next < cands.len() && cands[next].earliest <= b {
                pending.push((cands[next].event, next));
                next += 1;
            }
            if k == 0 {
                continue;
            }
            let rank = |e: u64| {
                if e.saturating_add(slack) > a && e <= b.saturating_add(slack) {
                    (0, e)
                } else if e <= a {
                    (1, e)
                } else {
                    (2, e)
                }
            };
            let key = |&(e, i): &(u64, usize)| (rank(e), i);
            let take = k.min(pending.len());
            pending.sort_by_key(key);
            let chosen: Vec<usize> = pending.drain(..take).map(|(_, i)| i).collect();
            let mut phases = chosen
                .iter()
                .chain(pending.iter().map(|(_, i)| i))
                .map(|i| cands[*i].phase);
            let first = phases.next();
            let ambiguous = !pending.is_empty() && phases.any(|p| Some(p) != first);
            let was_floating = chosen.iter().map(|&i| floating[i]).collect();
            if ambiguous {
                for &(_, i) in &pending {
                    floating[i] = true;
                }
            }
            out.push((chosen, ambiguous, was_floating));
        }
        (out, pending.len())
    }

    #[test]
    fn pending_candidates_are_chosen_as_the_first_selection_chose_them() {
        // Random runs with heavy ties (few distinct times), both phases,
        // intervals taking none, some, or more than are pending.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..3000 {
            let n = rnd(60) as usize;
            let spread = 1 + rnd(40);
            let slack = rnd(4);
            let mut cands: Vec<Candidate> = (0..n)
                .map(|_| {
                    let event = rnd(spread);
                    let known = rnd(4) != 0;
                    Candidate {
                        earliest: if known {
                            event.saturating_sub(slack)
                        } else {
                            event.saturating_sub(rnd(10))
                        },
                        event,
                        phase: if rnd(5) == 0 {
                            Phase::Warmup
                        } else {
                            Phase::Profiling
                        },
                    }
                })
                .collect();
            cands.sort_unstable_by_key(|c| (c.earliest, c.event));
            let mut t = rnd(5);
            let intervals: Vec<(u64, u64, usize)> = (0..rnd(12))
                .map(|_| {
                    let a = t;
                    t += rnd(8);
                    (a, t, rnd(9) as usize)
                })
                .collect();
            let (want, left) = reference_choices(&cands, slack, &intervals);
            let mut pending = Pending::new(&cands, slack);
            let mut next = 0;
            let mut got = Vec::new();
            for &(a, b, k) in &intervals {
                while next < cands.len() && cands[next].earliest <= b {
                    pending.add(next);
                    next += 1;
                }
                if k == 0 {
                    continue;
                }
                let floating = pending.float_below;
                let (chosen, ambiguous) = pending.choose(a, b, k, next);
                let was_floating = chosen.iter().map(|&i| i < floating).collect();
                got.push((chosen, ambiguous, was_floating));
            }
            assert_eq!(got, want, "slack {slack}, intervals {intervals:?}");
            assert_eq!(pending.len(), left);
        }
    }
}
