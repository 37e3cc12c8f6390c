//! The timeline's geometry: every request a bar in a lane (or, for large
//! runs, the requests in flight per time bin), first-token ticks, scrape
//! ticks per endpoint, AIPerf's phase windows beside the spans the requests
//! covered, and per named metric its scrape intervals. Coordinates in SVG
//! user units; the template only draws them.

use serde::Serialize;

use crate::results::timeline::{Interval, Phase, Temperature, Timeline};

/// Width of every time axis (SVG units).
pub const WIDTH: f64 = 1000.0;
/// More requests than this, or more lanes than [`MAX_LANES`], are binned;
/// so are a metric's scrape intervals and an endpoint's scrape ticks past
/// it (a gigabyte of raw scrapes holds 10^5 of each: one element apiece
/// made a page of 10^8 bytes).
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

/// A metric's intervals (binned past [`MAX_BARS`]: each view then sums
/// the intervals that start in its bin).
#[derive(Debug, Serialize)]
pub struct MetricView {
    anchor: String,
    metric: String,
    endpoint: String,
    observed_at: &'static str,
    intervals: Vec<IntervalView>,
    /// Intervals drawn (in the time range).
    shown: usize,
    /// Whether `intervals` are bins.
    binned: bool,
    /// Misattributed intervals (not bins).
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
            ticks: ticks(ts.iter().filter(|&&t| t >= t0 && t <= t1).map(|&t| sc.x(t))),
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

/// Scrape ticks at `xs`: every one, or past [`MAX_BARS`] one per half
/// unit of the axis that has any (the row looks the same: ticks closer
/// than that overlap).
fn ticks(xs: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut all: Vec<f64> = xs.collect();
    if all.len() > MAX_BARS {
        all = all.into_iter().map(|x| (x * 2.0).round() / 2.0).collect();
        all.sort_unstable_by(f64::total_cmp);
        all.dedup();
    }
    all
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
    let h = 40.0;
    // Only the intervals that overlap the drawn range (an interval from a
    // scrape long before the first request is drawn from the range's start).
    let end = sc.t0 + sc.span as u64;
    let shown: Vec<&Interval> = (m.intervals.iter())
        .filter(|i| i.to_ns >= sc.t0 && i.from_ns <= end)
        .collect();
    let binned = shown.len() > MAX_BARS;
    let sums = if binned {
        interval_bins(&shown, sc)
    } else {
        shown.iter().map(|i| IntervalSum::of(i, sc)).collect()
    };
    // Heights relative to the tallest interval (of every interval, drawn or
    // not), or bin.
    let tallest = |inc: f64, w: u32, p: u32| inc.max(f64::from(w.saturating_add(p)));
    let peak = if binned {
        (sums.iter())
            .map(|b| tallest(b.increment, b.warmup_events, b.profiling_events))
            .fold(1.0, f64::max)
    } else {
        (m.intervals.iter())
            .map(|i| tallest(i.increment, i.warmup_events, i.profiling_events))
            .fold(1.0, f64::max)
    };
    let intervals = (sums.iter())
        .map(|b| IntervalView {
            x: b.x,
            w: b.w,
            inc_h: b.increment / peak * h,
            events_h: f64::from(b.warmup_events.saturating_add(b.profiling_events)) / peak * h,
            misattributed: b.misattributed > 0,
            title: b.title(sc, binned),
        })
        .collect();
    MetricView {
        anchor: super::metric_anchor(run, &m.metric, &m.endpoint),
        metric: super::text(&m.metric),
        endpoint: super::text(&m.endpoint),
        observed_at: m.observed_at.as_str(),
        misattributed: shown.iter().filter(|i| i.misattributed).count(),
        shown: shown.len(),
        binned,
        intervals,
        height: h,
    }
}

/// One drawn interval, or the sum of a bin's.
#[derive(Debug, Default)]
struct IntervalSum {
    x: f64,
    w: f64,
    from_ns: u64,
    to_ns: u64,
    intervals: usize,
    increment: f64,
    /// The increment AIPerf counts in warmup (the rest in profiling).
    in_warmup: f64,
    /// The first interval's is counted in warmup.
    counted_in_warmup: bool,
    warmup_events: u32,
    profiling_events: u32,
    misattributed: usize,
}

impl IntervalSum {
    fn of(i: &Interval, sc: &Scale) -> Self {
        let mut s = IntervalSum {
            x: sc.x(i.from_ns),
            w: sc.w(i.from_ns, i.to_ns),
            from_ns: i.from_ns,
            to_ns: i.to_ns,
            ..Default::default()
        };
        s.add(i);
        s
    }

    fn add(&mut self, i: &Interval) {
        if self.intervals == 0 {
            self.counted_in_warmup = i.counted_in == Phase::Warmup;
        }
        // The first as it is (a sum from 0 would turn -0 into 0).
        self.increment = if self.intervals == 0 {
            i.increment
        } else {
            self.increment + i.increment
        };
        self.intervals += 1;
        if i.counted_in == Phase::Warmup {
            self.in_warmup += i.increment;
        }
        self.warmup_events = self.warmup_events.saturating_add(i.warmup_events);
        self.profiling_events = self.profiling_events.saturating_add(i.profiling_events);
        self.misattributed += usize::from(i.misattributed);
    }

    /// Its tooltip: an interval's, or (`bin`) a bin's.
    fn title(&self, sc: &Scale, bin: bool) -> String {
        let (a, b) = (sc.secs(self.from_ns), sc.secs(self.to_ns));
        let explained = format!(
            "the requests explain {} warmup and {} profiling",
            self.warmup_events, self.profiling_events
        );
        if !bin {
            let counted_in = if self.counted_in_warmup {
                Phase::Warmup
            } else {
                Phase::Profiling
            };
            let mark = if self.misattributed > 0 {
                ": misattributed"
            } else {
                ""
            };
            return format!(
                "{a:.3}-{b:.3} s: +{} observation(s) counted in {}; {explained}{mark}",
                self.increment,
                counted_in.as_str()
            );
        }
        format!(
            "{a:.3}-{b:.3} s: {} scrape interval(s), +{} observation(s) (+{} counted in warmup, \
             +{} in profiling); {explained}; {} misattributed",
            self.intervals,
            self.increment,
            self.in_warmup,
            self.increment - self.in_warmup,
            self.misattributed
        )
    }
}

/// Intervals summed per bin of the axis ([`BINS`]), by where each starts;
/// a bin without any is not drawn.
fn interval_bins(shown: &[&Interval], sc: &Scale) -> Vec<IntervalSum> {
    let bw = WIDTH / BINS as f64;
    let mut bins: Vec<IntervalSum> = (0..BINS)
        .map(|b| IntervalSum {
            x: b as f64 * bw,
            w: bw,
            from_ns: u64::MAX,
            ..Default::default()
        })
        .collect();
    for i in shown {
        let b = ((sc.x(i.from_ns) / bw).floor() as usize).min(BINS - 1);
        let bin = &mut bins[b];
        bin.from_ns = bin.from_ns.min(i.from_ns);
        bin.to_ns = bin.to_ns.max(i.to_ns);
        bin.add(i);
    }
    bins.retain(|b| b.intervals > 0);
    bins
}

impl TimelineView {
    /// The anchors of the metrics it shows.
    pub fn metric_anchors(&self) -> Vec<String> {
        self.metrics.iter().map(|m| m.anchor.clone()).collect()
    }
}
