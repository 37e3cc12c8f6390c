//! A run in time, for the HTML report: every request (start, first token,
//! end, phase, cold), the scrape instants per endpoint, AIPerf's phase
//! windows beside the spans the requests really covered, and for the server
//! metrics a finding names, the per-scrape-interval increments next to the
//! observations the requests explain. Built only when a report needs it
//! (`RunOptions::timeline`): it holds a few numbers per request.

use serde::Serialize;

pub use crate::artifacts::records::Phase;
use crate::artifacts::records::{Metric, Record};
use crate::artifacts::RunArtifacts;
use crate::frameworks::{ObservedAt, REQUEST_SCOPED};
pub use crate::model::connection::Temperature;
use crate::model::RunModel;

/// One request.
#[derive(Debug, Clone, Serialize)]
pub struct Bar {
    /// `x_request_id`, or `line N`.
    pub id: String,
    /// Its phase.
    pub phase: Phase,
    /// Sent (ns).
    pub start_ns: u64,
    /// First token (ns), when streaming.
    pub first_ns: Option<u64>,
    /// Last response byte or error (ns).
    pub end_ns: u64,
    /// Its connection temperature (the model's: unknown is neither cold
    /// nor warm).
    pub temperature: Temperature,
    /// It succeeded.
    pub ok: bool,
    /// TTFT (ms).
    pub ttft_ms: Option<f64>,
    /// Request latency (ms).
    pub latency_ms: Option<f64>,
    /// In the opening wave or the drain tail (`model::steady`).
    pub unsteady: bool,
}

/// One phase's windows.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseSpan {
    /// The phase.
    pub phase: Phase,
    /// AIPerf's window (`server_metrics_export.json`).
    pub aiperf_ns: Option<(u64, u64)>,
    /// From the phase's first request start to its last end.
    pub requests_ns: Option<(u64, u64)>,
}

/// One scrape interval of a metric on an endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// The earlier scrape (ns).
    pub from_ns: u64,
    /// The later scrape (ns).
    pub to_ns: u64,
    /// The series' increment between them (observations, summed over its
    /// series on the endpoint).
    pub increment: f64,
    /// Warmup requests whose observation instant is in the interval.
    pub warmup_events: u32,
    /// Profiling requests whose observation instant is in the interval.
    pub profiling_events: u32,
    /// The phase AIPerf counts the increment in: profiling when the
    /// interval ends after profiling started.
    pub counted_in: Phase,
    /// AIPerf counts something else than its phase's requests here: it
    /// holds observations of the other phase's requests, or more
    /// observations than its phase's requests explain while the phase as a
    /// whole holds more than its requests explain (a late observation).
    pub misattributed: bool,
}

/// A metric's intervals on one endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct MetricIntervals {
    /// The family.
    pub metric: String,
    /// The endpoint.
    pub endpoint: String,
    /// When the metric is observed.
    pub observed_at: ObservedAt,
    /// Its intervals, in time order.
    pub intervals: Vec<Interval>,
}

/// The run in time.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    /// Every request, in start order.
    pub requests: Vec<Bar>,
    /// Scrape instants (ns) per endpoint.
    pub scrapes: Vec<(String, Vec<u64>)>,
    /// Warmup and profiling windows.
    pub phases: Vec<PhaseSpan>,
    /// The metrics findings name, per endpoint.
    pub metrics: Vec<MetricIntervals>,
}

impl Timeline {
    /// The time range to draw (ns): the requests' span with a margin of 3 %
    /// each side (scrapes long before or after them are not the story),
    /// else the scrapes'.
    pub fn range(&self) -> Option<(u64, u64)> {
        let lo = self.requests.iter().map(|r| r.start_ns).min();
        let hi = self.requests.iter().map(|r| r.end_ns).max();
        let (lo, hi) = match (lo, hi) {
            (Some(lo), Some(hi)) => (lo, hi),
            _ => {
                let scrapes = self.scrapes.iter().flat_map(|(_, v)| v.iter().copied());
                (scrapes.clone().min()?, scrapes.max()?)
            }
        };
        let margin = (hi.saturating_sub(lo) / 33).max(1);
        Some((
            lo.saturating_sub(margin),
            hi.saturating_add(margin).max(lo + 2),
        ))
    }
}

/// One metric's values over the successful profiling requests, per series
/// the HTML report draws, with the percentiles AIPerf publishes over them.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// The metric's tag (`time_to_first_token`, `request_latency`).
    pub metric: &'static str,
    /// Every successful profiling request's positive value (what AIPerf
    /// publishes), in start order (ms).
    pub all: Vec<f64>,
    /// Those of warm requests only: a request of unknown temperature is
    /// not warm (ms).
    pub warm: Vec<f64>,
    /// Those in the steady state: the opening wave and the drain tail
    /// dropped (ms).
    pub steady: Vec<f64>,
    /// The published percentiles of `all`: (percentile, value in ms) for
    /// p50, p90 and p99.
    pub percentiles: Vec<(f64, f64)>,
}

/// The percentiles a distribution marks.
pub const MARKED_PERCENTILES: [f64; 3] = [50.0, 90.0, 99.0];

impl Timeline {
    /// TTFT and request latency, those the run has at least two positive
    /// values of.
    pub fn distributions(&self) -> Vec<Distribution> {
        let ok: Vec<&Bar> = self
            .requests
            .iter()
            .filter(|r| r.phase == Phase::Profiling && r.ok)
            .collect();
        [
            (
                Metric::TimeToFirstToken,
                (|r: &Bar| r.ttft_ms) as fn(&Bar) -> Option<f64>,
            ),
            (Metric::RequestLatency, |r: &Bar| r.latency_ms),
        ]
        .into_iter()
        .filter_map(|(metric, get)| {
            let all: Vec<f64> = ok
                .iter()
                .filter_map(|r| get(r))
                .filter(|v| *v > 0.0)
                .collect();
            if all.len() < 2 {
                return None;
            }
            let warm = ok
                .iter()
                .filter(|r| r.temperature == Temperature::Warm)
                .filter_map(|r| get(r))
                .collect();
            let steady = ok
                .iter()
                .filter(|r| !r.unsteady)
                .filter_map(|r| get(r))
                .collect();
            let sorted = crate::stats::sorted(all.iter().copied());
            let percentiles = MARKED_PERCENTILES
                .into_iter()
                .filter_map(|q| Some((q, crate::stats::percentile(&sorted, q)?)))
                .collect();
            Some(Distribution {
                metric: metric.tag(),
                all,
                warm,
                steady,
                percentiles,
            })
        })
        .collect()
    }
}

/// The instant a request's observation of a metric observed `at` is made.
fn instant(r: &Record, at: ObservedAt) -> u64 {
    match at {
        ObservedAt::Arrival => r.request_start_ns,
        // Between arrival and first token; the first token bounds it.
        ObservedAt::Scheduled | ObservedAt::FirstToken => {
            r.first_token_ns().unwrap_or(r.request_end_ns)
        }
        ObservedAt::Completion => r.request_end_ns,
    }
}

/// Builds the timeline; `metrics` are the (family, endpoint) pairs to show
/// intervals of (those the findings name). The temperatures and the steady
/// state are the model's.
pub fn build(run: &RunArtifacts, model: &RunModel, metrics: &[(String, String)]) -> Timeline {
    let records = run
        .records
        .as_ref()
        .map_or(&[][..], |r| r.records.as_slice());
    let steady = model.steady(records);
    let mut requests: Vec<Bar> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Bar {
            unsteady: steady.excludes(i),
            id: r.request_ref().to_string(),
            phase: r.phase,
            start_ns: r.request_start_ns,
            first_ns: r.first_token_ns(),
            end_ns: r.request_end_ns.max(r.request_start_ns),
            temperature: model.temperature(i),
            ok: r.is_success(),
            ttft_ms: r.values.get(Metric::TimeToFirstToken),
            latency_ms: r.values.get(Metric::RequestLatency),
        })
        .collect();
    requests.sort_by_key(|b| b.start_ns);
    let scrapes = run.scrapes.as_ref().map_or_else(Vec::new, |s| {
        s.by_endpoint()
            .into_iter()
            .map(|(ep, list)| (ep.to_string(), list.iter().map(|(_, t)| *t).collect()))
            .collect()
    });
    let span = |phase: Phase| {
        let rs = records.iter().filter(|r| r.phase == phase);
        let lo = rs.clone().map(|r| r.request_start_ns).min()?;
        let hi = rs.map(|r| r.request_end_ns).max()?;
        Some((lo, hi))
    };
    let mut phases = Vec::new();
    if let Some(w) = &model.warmup {
        phases.push(PhaseSpan {
            phase: Phase::Warmup,
            aiperf_ns: w.server_window_ns,
            requests_ns: span(Phase::Warmup),
        });
    }
    phases.push(PhaseSpan {
        phase: Phase::Profiling,
        aiperf_ns: model.profiling.server_window_ns,
        requests_ns: span(Phase::Profiling),
    });
    let profiling_start = model.profiling.server_window_ns.map(|w| w.0);
    let metrics = metrics
        .iter()
        .filter_map(|(m, ep)| intervals(run, records, m, ep, profiling_start))
        .collect();
    Timeline {
        requests,
        scrapes,
        phases,
        metrics,
    }
}

/// A metric's increments per scrape interval on `endpoint`, with the
/// requests whose observation falls in each; `None` without raw scrapes or
/// for a metric that is not request-scoped.
fn intervals(
    run: &RunArtifacts,
    records: &[Record],
    metric: &str,
    endpoint: &str,
    profiling_start: Option<u64>,
) -> Option<MetricIntervals> {
    let scrapes = run.scrapes.as_ref()?;
    let canon = crate::frameworks::canonical(metric);
    let at = REQUEST_SCOPED
        .iter()
        .find(|d| crate::frameworks::canonical(&d.name) == canon)?
        .observed_at;
    let points = crate::model::attribution::counts(scrapes, endpoint, metric, |_| true);
    let mut events: Vec<(u64, Phase)> = records.iter().map(|r| (instant(r, at), r.phase)).collect();
    events.sort_unstable_by_key(|e| e.0);
    let mut out = Vec::new();
    for w in points.windows(2) {
        // Each point's time and count.
        let ((a_t, a_count), (b_t, b_count)) = (w[0], w[1]);
        let lo = events.partition_point(|e| e.0 <= a_t);
        let hi = events.partition_point(|e| e.0 <= b_t);
        let inside = &events[lo..hi];
        let count = |p: Phase| inside.iter().filter(|e| e.1 == p).count() as u32;
        let counted_in = match profiling_start {
            Some(p) if b_t > p => Phase::Profiling,
            _ => Phase::Warmup,
        };
        let (warmup_events, profiling_events) = (count(Phase::Warmup), count(Phase::Profiling));
        let increment = (b_count - a_count).max(0.0);
        let other = match counted_in {
            Phase::Profiling => warmup_events,
            Phase::Warmup => profiling_events,
        };
        out.push(Interval {
            from_ns: a_t,
            to_ns: b_t,
            increment,
            warmup_events,
            profiling_events,
            counted_in,
            misattributed: other > 0 && increment > 0.0,
        });
    }
    // A phase that holds more observations than its requests explain: its
    // intervals with a surplus hold them (jitter across intervals of one
    // phase evens out over the phase and marks nothing).
    for phase in [Phase::Warmup, Phase::Profiling] {
        let explained = |i: &Interval| match phase {
            Phase::Warmup => f64::from(i.warmup_events),
            Phase::Profiling => f64::from(i.profiling_events),
        };
        let of = out.iter().filter(|i| i.counted_in == phase);
        let surplus: f64 = of.map(|i| i.increment - explained(i)).sum();
        if surplus > 0.5 {
            for i in out.iter_mut().filter(|i| i.counted_in == phase) {
                if i.increment > explained(i) + 0.5 {
                    i.misattributed = true;
                }
            }
        }
    }
    Some(MetricIntervals {
        metric: metric.to_string(),
        endpoint: endpoint.to_string(),
        observed_at: at,
        intervals: out,
    })
}
