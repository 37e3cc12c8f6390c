//! The timeline's geometry: every request a bar in a lane (or, for large
//! runs, the requests in flight per time bin), first-token ticks, scrape
//! ticks per endpoint, AIPerf's phase windows beside the spans the requests
//! covered, and per named metric its scrape intervals. Coordinates in SVG
//! user units; the template only draws them.

use serde::Serialize;

use crate::results::timeline::{Phase, Temperature, Timeline};

/// Width of every time axis (SVG units).
pub const WIDTH: f64 = 1000.0;
/// More requests than this, or more lanes than [`MAX_LANES`], are binned.
pub const MAX_BARS: usize = 2000;
/// Most lanes drawn one bar per request.
pub const MAX_LANES: usize = 96;
/// Bins of a binned timeline.
const BINS: usize = 400;
const LANE: f64 = 6.0;

/// One request's bar.
#[derive(Debug, Serialize)]
pub struct BarView {
    id: String,
    phase: Phase,
    x: f64,
    w: f64,
    y: f64,
    tick: Option<f64>,
    cold: bool,
    ok: bool,
    unsteady: bool,
    title: String,
}

/// One bin of a binned timeline: requests in flight per phase.
#[derive(Debug, Serialize)]
pub struct BinView {
    x: f64,
    w: f64,
    warmup_y: f64,
    warmup_h: f64,
    profiling_y: f64,
    profiling_h: f64,
    cold: u32,
    title: String,
}

/// A phase's windows as x ranges.
#[derive(Debug, Serialize)]
pub struct PhaseView {
    phase: Phase,
    aiperf: Option<(f64, f64)>,
    requests: Option<(f64, f64)>,
    title: String,
}

/// One endpoint's scrape ticks.
#[derive(Debug, Serialize)]
pub struct ScrapeRow {
    endpoint: String,
    y: f64,
    ticks: Vec<f64>,
}

/// One scrape interval of a metric.
#[derive(Debug, Serialize)]
pub struct IntervalView {
    x: f64,
    w: f64,
    inc_h: f64,
    events_h: f64,
    misattributed: bool,
    title: String,
}

/// A metric's intervals.
#[derive(Debug, Serialize)]
pub struct MetricView {
    anchor: String,
    metric: String,
    endpoint: String,
    observed_at: &'static str,
    intervals: Vec<IntervalView>,
    misattributed: usize,
    height: f64,
}

/// An axis label.
#[derive(Debug, Serialize)]
pub struct Tick {
    x: f64,
    label: String,
}

/// The whole timeline of one run.
#[derive(Debug, Serialize)]
pub struct TimelineView {
    width: f64,
    lanes_height: f64,
    height: f64,
    binned: bool,
    requests: usize,
    bars: Vec<BarView>,
    bins: Vec<BinView>,
    phases: Vec<PhaseView>,
    overlap: Option<(f64, f64)>,
    scrape_rows: Vec<ScrapeRow>,
    axis: Vec<Tick>,
    metrics: Vec<MetricView>,
}

struct Scale {
    t0: u64,
    span: f64,
}

impl Scale {
    fn x(&self, t: u64) -> f64 {
        (t.saturating_sub(self.t0) as f64 / self.span * WIDTH).clamp(0.0, WIDTH)
    }
    fn w(&self, a: u64, b: u64) -> f64 {
        (self.x(b) - self.x(a)).max(0.5)
    }
    fn secs(&self, t: u64) -> f64 {
        t.saturating_sub(self.t0) as f64 / 1e9
    }
}

/// Lanes for the bars: each request in the first lane free at its start.
fn lanes(tl: &Timeline) -> (Vec<usize>, usize) {
    let mut ends: Vec<u64> = Vec::new();
    let lane = tl
        .requests
        .iter()
        .map(|r| match ends.iter().position(|&e| e <= r.start_ns) {
            Some(i) => {
                ends[i] = r.end_ns;
                i
            }
            None => {
                ends.push(r.end_ns);
                ends.len() - 1
            }
        })
        .collect();
    (lane, ends.len())
}

/// The timeline's view, or `None` with nothing to draw.
pub fn view(tl: &Timeline, run_anchor: &str) -> Option<TimelineView> {
    let (t0, t1) = tl.range()?;
    let sc = Scale {
        t0,
        span: (t1 - t0) as f64,
    };
    let (lane, n_lanes) = lanes(tl);
    let binned = tl.requests.len() > MAX_BARS || n_lanes > MAX_LANES;
    let (bars, bins, lanes_height) = if binned {
        let (bins, h) = binned_view(tl, &sc);
        (Vec::new(), bins, h)
    } else {
        (
            bars(tl, &sc, &lane),
            Vec::new(),
            n_lanes.max(1) as f64 * LANE,
        )
    };
    let phases: Vec<PhaseView> = tl
        .phases
        .iter()
        .map(|p| PhaseView {
            phase: p.phase,
            aiperf: p.aiperf_ns.map(|(a, b)| (sc.x(a), sc.x(b))),
            requests: p.requests_ns.map(|(a, b)| (sc.x(a), sc.x(b))),
            title: format!(
                "{}: AIPerf's window {}; its requests {}",
                p.phase.as_str(),
                range_text(&sc, p.aiperf_ns),
                range_text(&sc, p.requests_ns)
            ),
        })
        .collect();
    let overlap = overlap(tl).map(|(a, b)| (sc.x(a), sc.x(b)));
    let top = lanes_height + 8.0;
    let scrape_rows: Vec<ScrapeRow> = tl
        .scrapes
        .iter()
        .enumerate()
        .map(|(i, (ep, ts))| ScrapeRow {
            endpoint: super::text(ep),
            y: top + i as f64 * 12.0,
            ticks: ts
                .iter()
                .filter(|&&t| t >= t0 && t <= t1)
                .map(|&t| sc.x(t))
                .collect(),
        })
        .collect();
    let height = top + scrape_rows.len() as f64 * 12.0 + 24.0;
    let axis = (0..=10)
        .map(|i| {
            let x = WIDTH * i as f64 / 10.0;
            Tick {
                x,
                label: format!("{:.2} s", sc.span * i as f64 / 10.0 / 1e9),
            }
        })
        .collect();
    let metrics = tl
        .metrics
        .iter()
        .map(|m| metric_view(m, &sc, run_anchor))
        .collect();
    Some(TimelineView {
        width: WIDTH,
        lanes_height,
        height,
        binned,
        requests: tl.requests.len(),
        bars,
        bins,
        phases,
        overlap,
        scrape_rows,
        axis,
        metrics,
    })
}

fn range_text(sc: &Scale, r: Option<(u64, u64)>) -> String {
    r.map_or("unknown".into(), |(a, b)| {
        format!("{:.3}-{:.3} s", sc.secs(a), sc.secs(b))
    })
}

/// Where the warmup window (AIPerf's, else its requests') runs into
/// profiling's (AIPerf's, else its requests').
fn overlap(tl: &Timeline) -> Option<(u64, u64)> {
    let of = |p: Phase| tl.phases.iter().find(|s| s.phase == p);
    let w = of(Phase::Warmup)?;
    let p = of(Phase::Profiling)?;
    let wend = w.aiperf_ns.or(w.requests_ns)?.1;
    let pstart = p.aiperf_ns.or(p.requests_ns)?.0;
    (wend > pstart).then_some((pstart, wend))
}

fn bars(tl: &Timeline, sc: &Scale, lane: &[usize]) -> Vec<BarView> {
    tl.requests
        .iter()
        .zip(lane)
        .map(|(r, &l)| BarView {
            id: super::text(&r.id),
            phase: r.phase,
            x: sc.x(r.start_ns),
            w: sc.w(r.start_ns, r.end_ns),
            y: l as f64 * LANE,
            tick: r.first_ns.map(|t| sc.x(t)),
            cold: r.temperature == Temperature::Cold,
            ok: r.ok,
            unsteady: r.unsteady,
            title: format!(
                "{} ({}{}{}): {:.3}-{:.3} s, TTFT {}, latency {}",
                super::text(&r.id),
                r.phase.as_str(),
                if r.temperature == Temperature::Cold {
                    ", cold connection"
                } else {
                    ""
                },
                if r.ok { "" } else { ", failed" },
                sc.secs(r.start_ns),
                sc.secs(r.end_ns),
                ms(r.ttft_ms),
                ms(r.latency_ms)
            ),
        })
        .collect()
}

fn ms(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.1} ms"))
}

/// Requests in flight per bin and phase, as stacked bars 60 units high at
/// the peak.
fn binned_view(tl: &Timeline, sc: &Scale) -> (Vec<BinView>, f64) {
    let bin = |t: u64| {
        ((sc.x(t) / WIDTH) * BINS as f64)
            .floor()
            .min(BINS as f64 - 1.0) as usize
    };
    let mut delta = [vec![0_i64; BINS + 1], vec![0_i64; BINS + 1]];
    let mut cold = vec![0_u32; BINS];
    for r in &tl.requests {
        let p = usize::from(r.phase == Phase::Profiling);
        delta[p][bin(r.start_ns)] += 1;
        delta[p][bin(r.end_ns) + 1] -= 1;
        cold[bin(r.start_ns)] += u32::from(r.temperature == Temperature::Cold);
    }
    let mut inflight = [vec![0_i64; BINS], vec![0_i64; BINS]];
    for p in 0..2 {
        let mut now = 0;
        for b in 0..BINS {
            now += delta[p][b];
            inflight[p][b] = now.max(0);
        }
    }
    let peak = (0..BINS)
        .map(|b| inflight[0][b] + inflight[1][b])
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let h = 60.0;
    let bw = WIDTH / BINS as f64;
    let bins = (0..BINS)
        .map(|b| {
            let (w, p) = (inflight[0][b] as f64, inflight[1][b] as f64);
            let (wh, ph) = (w / peak * h, p / peak * h);
            BinView {
                x: b as f64 * bw,
                w: bw,
                warmup_y: h - wh,
                warmup_h: wh,
                profiling_y: h - wh - ph,
                profiling_h: ph,
                cold: cold[b],
                title: format!(
                    "{:.3} s: {} warmup and {} profiling request(s) in flight, {} cold start(s)",
                    sc.span * b as f64 / BINS as f64 / 1e9,
                    w,
                    p,
                    cold[b]
                ),
            }
        })
        .collect();
    (bins, h)
}

fn metric_view(m: &crate::results::timeline::MetricIntervals, sc: &Scale, run: &str) -> MetricView {
    let peak = m
        .intervals
        .iter()
        .map(|i| {
            i.increment
                .max(f64::from(i.warmup_events + i.profiling_events))
        })
        .fold(1.0, f64::max);
    let h = 40.0;
    // Only the intervals that overlap the drawn range (an interval from a
    // scrape long before the first request is drawn from the range's start).
    let end = sc.t0 + sc.span as u64;
    let intervals: Vec<IntervalView> = m
        .intervals
        .iter()
        .filter(|i| i.to_ns >= sc.t0 && i.from_ns <= end)
        .map(|i| IntervalView {
            x: sc.x(i.from_ns),
            w: sc.w(i.from_ns, i.to_ns),
            inc_h: i.increment / peak * h,
            events_h: f64::from(i.warmup_events + i.profiling_events) / peak * h,
            misattributed: i.misattributed,
            title: format!(
                "{:.3}-{:.3} s: +{} observation(s) counted in {}; the requests explain {} warmup \
                 and {} profiling{}",
                sc.secs(i.from_ns),
                sc.secs(i.to_ns),
                i.increment,
                i.counted_in.as_str(),
                i.warmup_events,
                i.profiling_events,
                if i.misattributed {
                    ": misattributed"
                } else {
                    ""
                }
            ),
        })
        .collect();
    MetricView {
        anchor: super::metric_anchor(run, &m.metric, &m.endpoint),
        metric: super::text(&m.metric),
        endpoint: super::text(&m.endpoint),
        observed_at: m.observed_at.as_str(),
        misattributed: intervals.iter().filter(|i| i.misattributed).count(),
        intervals,
        height: h,
    }
}

impl TimelineView {
    /// The anchors of the metrics it shows.
    pub fn metric_anchors(&self) -> Vec<String> {
        self.metrics.iter().map(|m| m.anchor.clone()).collect()
    }
}
