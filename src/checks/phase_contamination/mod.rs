//! Check `phase_contamination`: does each server metric belong to the phase
//! it is reported under?
//!
//! What it checks: AIPerf splits cumulative server metrics into warmup and
//! profiling by subtracting scrapes taken at phase boundaries. For every
//! request-scoped metric (one observation per request, [`REQUEST_SCOPED`]),
//! the count in `metrics` (profiling) and `warmup_metrics` must match the
//! phase's requests. Each mismatch is classified (late warmup observation,
//! profiling observation lost to warmup, unexplained excess or deficit;
//! `classify`) and diagnosed (`diagnose`), the phase windows are checked
//! for overlap and counters for timeslices that start early (`windows`),
//! and series for resets (`resets`). With the raw scrapes
//! (`server_metrics_export.jsonl`) each scrape interval's increments are
//! attributed to the requests whose observation time falls in it (the
//! attribution engine, [`crate::model::attribution`]), and a corrected split
//! is reported.
//!
//! Why it matters: a warmup observation counted in profiling inflates counts,
//! sums, averages and percentile estimates, silently: a user's report of
//! a vLLM run showed TTFT histogram observations of warmup requests in the
//! profiling export.

mod accounting;
mod bounds;
mod causes;
mod classify;
mod compare;
mod diagnose;
mod evidence;
mod report;
mod resets;
mod windows;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rayon::prelude::*;
use serde::Serialize;

use super::{Check, CheckOutput, CheckReport, CheckStatus, Ctx, Detail};
use crate::artifacts::records::Phase;
use crate::artifacts::server_metrics::{self, lookup, Family, MetricType};
use crate::findings::Finding;
use crate::frameworks::{
    canonical, observed_on, Framework, ObservedAt, RequestScoped, REQUEST_SCOPED,
};
pub use crate::model::attribution::Corrected;
use crate::model::attribution::{self, Attribution, ByObservation, Candidate};
use crate::model::observers::{
    observers, Labels, Observer, Observers, PhaseExpectation, ReadingSummary,
};
use crate::stats::Percentiles;
pub use bounds::PercentileBounds;
pub use classify::Classification;
/// One cause of a row's deviation.
pub type Cause = accounting::Share<Classification>;
use compare::{localise, Comparison, PartitionCounts};
use diagnose::Problem;
use evidence::Evidence;

/// The check.
pub const CHECK: Check = Check {
    name: "phase_contamination",
    codes: &[CODES],
    run,
    timeline: true,
};

crate::define_codes! { "phase_contamination";
    LATE_WARMUP_OBSERVATION => ("late-warmup-observation", Error,
        "Warmup observations were counted in profiling (profiling +k, warmup -k)"),
    PROFILING_LOST_TO_WARMUP => ("profiling-lost-to-warmup", Error,
        "Profiling observations were counted in warmup (profiling -k, warmup +k)"),
    WARMUP_ABSORBED => ("warmup-absorbed", Error,
        "Profiling counts warmup observations too: AIPerf's profiling baseline predates them"),
    OUT_OF_ORDER_BASELINE => ("out-of-order-baseline", Error,
        "Profiling counts warmup observations: AIPerf's profiling baseline is a scrape answered out of order, holding an older state"),
    COUNTED_IN_BOTH => ("counted-in-both", Warning,
        "Warmup counts profiling observations too: they came while the warmup window was open"),
    PHASE_WINDOW_OVERLAP => ("phase-window-overlap", Warning,
        "The warmup window closes after profiling has started (info when every count splits exactly)"),
    FAILED_REQUEST_OBSERVED => ("failed-request-observed", Info,
        "The server observed requests that ended without success (cancelled or failed), as its framework does by design"),
    REQUEST_WITHOUT_RECORD => ("request-without-record", Info,
        "The server observed requests no record holds: a duration run's requests cut when the grace period ended"),
    UNEXPLAINED_EXCESS => ("unexplained-excess", Error,
        "A phase holds more observations than it had requests, with no matching deficit"),
    UNEXPLAINED_DEFICIT => ("unexplained-deficit", Error,
        "A phase holds fewer observations than it had requests, with no matching excess"),
    COUNTER_WINDOW_EARLY => ("counter-window-early", Error,
        "A counter's profiling timeslices start before profiling started"),
    COUNTER_RESET => ("counter-reset", Error,
        "A cumulative server metric went down: the server restarted or the series was reset"),
    SERIES_CREATED_MID_PHASE => ("series-created-mid-phase", Error,
        "A server series first appeared inside a phase: AIPerf's delta misses the value that created it"),
    AIPERF_VERSION_ADVISORY => ("aiperf-version-advisory", Info,
        "This AIPerf version's phase split leaks (0.12/0.13: no flush barrier; before 0.12: no warmup split), or it does not record some data"),
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

/// One observer of one metric (the series that together see every request
/// once, [`crate::model::observers`]) in one phase.
#[derive(Debug, Clone, Serialize)]
pub struct MetricRow {
    /// Metric name as exported.
    pub metric: String,
    /// The family's unit as the export gives it (the published figures'
    /// unit; the row's JSON already says it through the metric).
    #[serde(skip)]
    pub unit: Option<String>,
    /// Serving framework of the table entry.
    pub framework: Framework,
    /// When the observer's endpoint observes it (a prefill worker's
    /// completion-time metrics at the first token).
    pub observed_at: ObservedAt,
    /// The observer's endpoint URL, or `all` when it sums several
    /// endpoints that split the requests between them.
    pub endpoint: String,
    /// The endpoint's role (`prefill`, `decode`, `frontend`), when its
    /// series say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The labels that single the observer out among the metric's
    /// observers on its endpoint (e.g. `{"replica": "2 of 2"}`); omitted
    /// when it is the only one.
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub series: Labels,
    /// The phase.
    pub phase: Phase,
    /// Expected count (range); `null` when unknown.
    pub expected_count: Option<Expected>,
    /// Count in the export; `null` when a series lacks it.
    pub found_count: Option<f64>,
    /// found - the phase's successful requests (`expected_count.min`).
    pub delta: Option<f64>,
    /// What the count says: its one cause, `mixed` for several (see
    /// `causes`), `ok` or `unknown`.
    pub classification: Classification,
    /// What accounts for `delta`, cause by cause: signed counts that sum to
    /// it (a remainder no cause can hold is `unexplained_excess` or
    /// `unexplained_deficit`), each with the lowest and highest it can be
    /// in any combination that explains both phases, and its evidence.
    pub causes: Vec<Cause>,
    /// Sum in the export (histograms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_sum: Option<f64>,
    /// Avg in the export (histograms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_avg: Option<f64>,
    /// What the phase's figures are over its own requests as the server
    /// saw them: repaired from the raw scrapes where they allow, else from
    /// the accounting for every row a cause moved (`count`, with
    /// `count_low`/`count_high` when only bounded; `sum`, `sum_low`,
    /// `sum_high`, null where unknown).
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
    /// How the series of metrics on several endpoints (or with labels this
    /// tool does not know) were read: endpoints each seeing every request
    /// or splitting them, unknown labels summed or per replica.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub readings: BTreeMap<String, ReadingSummary>,
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

/// Which scrape endpoints saw no traffic: those on which no request-scoped
/// metric moved.
struct Traffic {
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
        Traffic { idle }
    }
}

/// The expected counts of profiling and warmup: from the records, else the
/// configuration.
fn expectations(ctx: &Ctx) -> (Option<Expected>, Option<Expected>) {
    let expected = |phase: Phase| -> Option<Expected> {
        let p = ctx.model.phase(phase)?;
        // A phase without records (none read, or a version that writes
        // none for it) is expected at its configured count.
        match (p.successful, p.errors, p.configured_requests) {
            (Some(ok), Some(err), _) => Some(Expected {
                min: ok,
                max: ok + err,
                source: ExpectedSource::Records,
            }),
            (None, _, Some(c)) => Some(Expected {
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
        readings: BTreeMap::new(),
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
        resets::findings(&ctx.model.resets, scrapes, server, &mut findings);
    }
    resets::birth_findings(&ctx.model.births, server, &mut findings);
    let found = found_in(ctx, server);
    if found.is_empty() {
        let why = "no request-scoped server metric (a per-request histogram or counter of a \
                   known framework) is in the export, so the phase split cannot be checked";
        findings.push(Finding::new(PHASE_CHECK_UNKNOWN, why).file(server_metrics::FILE));
        return output(report, findings, Some(why.to_string()));
    }
    report.endpoints_without_traffic = Traffic::of(&found).idle;
    let (exp_p, exp_w) = expectations(ctx);
    let reason = exp_p.is_none().then(|| {
        "neither profile_export.jsonl nor a configured request count says how many \
         requests there were"
            .to_string()
    });
    let expected = ExpectedByPhase([exp_p, exp_w]);
    // Every metric split into the observers that see every request once.
    let readings: Vec<Observers> = found
        .iter()
        .map(|f| observers(Some(f.def.framework), f.profiling, f.warmup, &expected))
        .collect();
    report.readings = reading_summaries(&found, &readings);
    let problems = compare_all(ctx, server, &found, &readings, &mut report);
    report.control_metric = control_metric(&report.metrics, &found, exp_w.is_some());
    let control = report.control_metric.as_deref();
    let (problems, partitions) = problems;
    for (mut p, counts) in problems {
        // The partition whose net counts differ from the control's names
        // the series of a single cause; with several, their nets can
        // cancel on one partition and show on another, so none is named.
        p.partition = partitions
            .iter()
            .filter(|c| Some(c.metric.as_str()) == control)
            .filter(|_| p.single_cause())
            .find_map(|c| localise(&counts, c));
        findings.extend(p.findings(control, &report.windows));
    }
    windows::settle_overlap(&report.metrics, &mut findings);
    resets::moves(&report.metrics, &mut findings);
    output(report, findings, reason)
}

/// How the metrics whose series span several endpoints, or carry labels
/// this tool does not know, were read.
fn reading_summaries(found: &[Found], readings: &[Observers]) -> BTreeMap<String, ReadingSummary> {
    let mut out = BTreeMap::new();
    for (f, r) in found.iter().zip(readings) {
        let endpoints: BTreeSet<&str> = r.busy.iter().flat_map(|o| o.endpoints()).collect();
        if endpoints.len() > 1 || !r.unknown_labels.is_empty() {
            let summary = ReadingSummary {
                endpoints: r.endpoints,
                unknown_labels: r.unknown_labels.clone(),
            };
            out.insert(f.name.clone(), summary);
        }
    }
    out
}

/// The problems of one run's comparisons, each with its observer's
/// partition counts, and every observer's partition counts.
type Compared = (Vec<(Problem, PartitionCounts)>, Vec<PartitionCounts>);

/// Holds every busy observer of every metric to the expected counts,
/// repaired from the raw scrapes where they allow: the rows go into the
/// report, the problems come back.
fn compare_all(
    ctx: &Ctx,
    server: &server_metrics::ServerMetricsExport,
    found: &[Found],
    readings: &[Observers],
    report: &mut Report,
) -> Compared {
    let (exp_p, exp_w) = expectations(ctx);
    let jobs: Vec<(&Found, &Observer)> = found
        .iter()
        .zip(readings)
        .flat_map(|(f, r)| r.busy.iter().map(move |o| (f, o)))
        .collect();
    let role_of = |o: &Observer| {
        o.endpoint
            .as_deref()
            .and_then(|e| ctx.model.endpoint_roles.get(e))
            .map(String::as_str)
    };
    // Each observer's own observation point (a prefill worker completes at
    // the first token).
    let points: Vec<ObservedAt> = jobs
        .iter()
        .map(|(f, o)| observed_on(f.def.observed_at, role_of(o)))
        .collect();
    let corrections = repairs(ctx, &jobs, &points);
    let evidence = Evidence::builder(ctx, server, exp_w);
    let population = causes::Population::of(ctx.model);
    let mut problems = Vec::new();
    let mut partitions = Vec::new();
    for (((f, o), corrected), at) in jobs.iter().zip(corrections).zip(points) {
        report.repaired_from_raw_scrapes |= corrected.is_some();
        let role = role_of(o);
        let ev = evidence.of(f, o, at);
        let reset = reset_in(ctx, server, o);
        let cmp = Comparison {
            found: f,
            observer: o,
            role,
            has_warmup: ctx.model.warmup.is_some(),
            expected: [exp_p, exp_w],
            reset,
            reset_growth: reset_growth(ctx, server, f, o, reset, &ev),
            born: born_in(ctx, server, f, o),
            evidence: ev,
            at,
            population: &population,
        };
        let (rows, problem) = cmp.rows(corrected);
        report.metrics.extend(rows);
        let counts = cmp.partition_counts();
        if let Some(p) = problem {
            problems.push((p, counts.clone()));
        }
        partitions.push(counts);
    }
    (problems, partitions)
}

/// The expected counts of both phases, as the observers are held to them.
struct ExpectedByPhase([Option<Expected>; 2]);

impl PhaseExpectation for ExpectedByPhase {
    fn deviation(&self, phase: Phase, found: f64) -> Option<f64> {
        let e = match phase {
            Phase::Profiling => self.0[0],
            Phase::Warmup => self.0[1],
        };
        Some(e?.deviation(found))
    }
}

/// Whether a reset on the observer's endpoint(s) falls in profiling and in
/// warmup.
fn reset_in(ctx: &Ctx, server: &server_metrics::ServerMetricsExport, o: &Observer) -> [bool; 2] {
    let eps = o.endpoints();
    let hit = |phase: &str| {
        server.window(phase).is_some_and(|w| {
            ctx.model
                .resets
                .iter()
                .any(|r| r.confirmed && eps.contains(r.endpoint.as_str()) && r.within(w))
        })
    };
    [hit("profiling"), hit("warmup")]
}

/// In each phase with a reset on the observer's endpoint: what its series
/// grew by over the phase, read reset-aware from the raw scrapes (count,
/// sum): at least what the server observed.
fn reset_growth(
    ctx: &Ctx,
    server: &server_metrics::ServerMetricsExport,
    f: &Found,
    o: &Observer,
    reset: [bool; 2],
    ev: &Evidence,
) -> [Option<(f64, Option<f64>)>; 2] {
    let of = |hit: bool, phase: &str, baseline: Option<u64>| {
        let (sc, ep) = (ctx.run.scrapes.as_ref()?, o.endpoint.as_deref()?);
        let w = server.window(phase).filter(|_| hit)?;
        let pts = attribution::cumulative(sc, ep, &f.name, |l| o.contains(ep, l));
        attribution::growth_across_resets(&pts, baseline, w.start_ns, w.end_ns)
    };
    [
        of(reset[0], "profiling", ev.baseline_line),
        of(reset[1], "warmup", None),
    ]
}

/// What series of the observer born inside profiling and inside warmup
/// cost those phases' deltas (their first values).
fn born_in(
    ctx: &Ctx,
    server: &server_metrics::ServerMetricsExport,
    f: &Found,
    o: &Observer,
) -> [f64; 2] {
    let lost = |phase: &str| {
        let Some(w) = server.window(phase) else {
            return 0.0;
        };
        ctx.model
            .births
            .iter()
            .filter(|b| canonical(&b.family) == canonical(&f.name) && b.within(w))
            .filter(|b| o.contains(&b.endpoint, &b.labels))
            .map(|b| b.first_value)
            .sum()
    };
    [lost("profiling"), lost("warmup")]
}

/// The repair from raw scrapes of every job (metric, observer), in
/// parallel, in job order; `None` where the scrapes cannot support one (no
/// scrapes or records, an observer summed over several endpoints, too few
/// scrapes, a reset). Candidates depend only on when a metric is observed:
/// built once per kind, not once per metric.
fn repairs(
    ctx: &Ctx,
    jobs: &[(&Found, &Observer)],
    points: &[ObservedAt],
) -> Vec<Option<Attribution>> {
    let inputs = ctx.run.scrapes.as_ref().zip(ctx.records());
    let Some((sc, rs)) = inputs else {
        return vec![None; jobs.len()];
    };
    let slack_ns = (ctx.settings.phase.match_slack_ms * 1e6) as u64;
    let mut kinds: Vec<ObservedAt> = points.to_vec();
    kinds.sort_unstable();
    kinds.dedup();
    // A version that writes no warmup records: its configured warmup
    // requests, all finished by profiling's start, stand in for them, and
    // the first scrape (taken at AIPerf's start) is the baseline.
    let profiling_start = ctx.model.profiling.server_window_ns.map(|w| w.0);
    let unrecorded = ctx.model.unrecorded_warmup_until().and_then(|by| {
        let n = ctx.model.warmup.as_ref()?.configured_requests?;
        Some((n, by))
    });
    let prepared: Vec<(ObservedAt, Vec<Candidate>)> = kinds
        .into_par_iter()
        .map(|at| {
            let cands = attribution::candidates(rs, at, slack_ns);
            let cands = match unrecorded {
                Some((n, by)) => attribution::with_unrecorded_warmup(cands, n, by),
                None => cands,
            };
            (at, cands)
        })
        .collect();
    if ctx.model.warmup.is_some() && !ctx.model.layout.warmup_records && unrecorded.is_none() {
        // Warmup traffic the candidates cannot stand for would be given to
        // profiling: no repair.
        return vec![None; jobs.len()];
    }
    let first_start = ctx.model.first_request_start_ns();
    let cands_of = |j: usize| Some(prepared.iter().find(|p| p.0 == points[j])?.1.as_slice());
    let done: Vec<(usize, Option<Attribution>)> = walks(jobs)
        .par_iter()
        .flat_map_iter(|(ep, js)| {
            let mut split: Vec<Option<ByObservation>> = (js.iter())
                .map(|&j| {
                    let cands = cands_of(j)?;
                    Some(ByObservation::new(
                        cands,
                        first_start,
                        slack_ns,
                        profiling_start,
                    ))
                })
                .collect();
            let names: Vec<&str> = js.iter().map(|&j| jobs[j].0.name.as_str()).collect();
            let last = attribution::each_point(
                sc,
                ep,
                &names,
                |k, labels| jobs[js[k]].1.contains(ep, labels),
                |k, pts| split[k].as_mut().is_some_and(|s| s.push(pts)),
            );
            let attributed = split.into_iter().zip(&last).map(|(s, l)| s?.finish(l));
            js.iter().copied().zip(attributed).collect::<Vec<_>>()
        })
        .collect();
    let mut out = vec![None; jobs.len()];
    for (j, a) in done {
        out[j] = a;
    }
    out
}

/// The jobs (indices) of each endpoint, in one walk per worker: a walk
/// reads the endpoint's scrapes once for all its jobs' families
/// (`attribution::each_point`). Jobs without an endpoint are in none.
fn walks<'a>(jobs: &[(&Found, &'a Observer)]) -> Vec<(&'a str, Vec<usize>)> {
    let mut by_endpoint: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (j, (_, o)) in jobs.iter().enumerate() {
        if let Some(ep) = o.endpoint.as_deref() {
            by_endpoint.entry(ep).or_default().push(j);
        }
    }
    let workers = rayon::current_num_threads().max(1);
    (by_endpoint.into_iter())
        .flat_map(|(ep, js)| {
            let parts = workers.min(js.len());
            (0..parts).map(move |p| (ep, js.iter().skip(p).step_by(parts).copied().collect()))
        })
        .collect()
}

/// The control: a metric whose every observer splits exactly in every
/// phase, TTFT first if it qualifies.
fn control_metric(rows: &[MetricRow], found: &[Found], has_warmup: bool) -> Option<String> {
    let exact = |name: &str| {
        let mine: Vec<&MetricRow> = rows.iter().filter(|r| r.metric == name).collect();
        let ok = mine
            .iter()
            .filter(|r| r.classification == Classification::Ok)
            .count();
        !mine.is_empty()
            && ok == mine.len()
            && mine.iter().any(|r| r.phase == Phase::Profiling)
            && (!has_warmup || mine.iter().any(|r| r.phase == Phase::Warmup))
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

/// A row's causes in a table cell: `-2 profiling_lost_to_warmup, +1
/// late_warmup_observation`.
fn causes_text(causes: &[Cause]) -> String {
    causes
        .iter()
        .filter(|c| c.count != 0)
        .map(|c| format!("{:+} {}", c.count, c.cause))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `host:port` of an endpoint URL (the scheme and `/metrics` dropped).
fn short_endpoint(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |x| x.1);
    rest.split('/').next().unwrap_or(rest)
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
