//! Attributing raw-scrape increments to requests: the one engine both the
//! phase check (a histogram's or counter's observations, one per request)
//! and the cache check (token counters, amounts per interval) place server
//! increments in time with.
//!
//! AIPerf's raw scrapes (`server_metrics_export.jsonl`) hold cumulative
//! values. [`cumulative`] reads one family on one endpoint as a time series
//! of [`Point`]s (count, sum, buckets), summed over the label sets a filter
//! keeps ([`each_point`]: several families in one walk, point by point).
//! Each interval between two scrapes then holds an increment, which is
//! given to the requests that could have caused it:
//! - [`ByObservation`]: each of an interval's `k` observations goes to a
//!   request whose event (arrival, first token, completion; [`candidates`])
//!   falls in it, else to an overdue one, else to one in flight; the result
//!   is a per-phase count, sum (exact, or bounded where the choice was
//!   ambiguous) and, when exact, the phase's own buckets;
//! - [`BySpan`]: an interval's amounts go to the phase whose requests'
//!   spans overlap it; an interval both phases (or none) overlap is
//!   ambiguous and bounds the result.
//!
//! Neither attributes across a decrease (a reset) or without a scrape
//! before the first request (the increments before it cannot be placed).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::artifacts::records::{Phase, Record};
use crate::stats::Percentiles;

mod observation;
mod points;
pub use observation::{candidates, with_unrecorded_warmup, ByObservation, Candidate};
pub use points::{
    counts, counts_to, cumulative, each_point, growth_across_resets, Point, Points, HELD,
};

closed_set! {
    /// Whether an attribution is exact or only bounded.
    pub enum Exactness {
        /// Every increment went to one phase with certainty.
        Exact => "exact",
        /// Some could have gone to either: the figures are bounds.
        Bounded => "bounded",
    }
}

/// The first scrape (at time `first`) must predate every request, or the
/// increments before it cannot be placed.
fn baseline_predates(first: u64, first_start: Option<u64>) -> bool {
    first_start.is_none_or(|s| s > first)
}

/// A corrected split of one phase from the raw scrapes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Corrected {
    /// Observations attributed to this phase's requests.
    pub count: u64,
    /// When the count is only bounded: its lowest...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count_low: Option<u64>,
    /// ... and its highest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count_high: Option<u64>,
    /// Sum of their values (histograms); point estimate when bounded.
    pub sum: Option<f64>,
    /// Lower bound of the sum.
    pub sum_low: Option<f64>,
    /// Upper bound of the sum (`null` when unbounded: the +Inf bucket).
    pub sum_high: Option<f64>,
    /// `sum / count`.
    pub avg: Option<f64>,
    /// `exact` or `bounded`.
    pub exactness: Exactness,
    /// Histograms attributed exactly: the phase's cumulative buckets (`le`
    /// to count, as in the export).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buckets: Option<BTreeMap<String, f64>>,
    /// Percentiles estimated from those buckets (Prometheus
    /// `histogram_quantile` interpolation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentiles: Option<Percentiles>,
}

/// Per-phase results of attributing a series' observations to requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribution {
    /// Profiling.
    pub profiling: Corrected,
    /// Warmup.
    pub warmup: Corrected,
    /// Warmup observations given out in intervals that begin at or after
    /// the `late_after` time [`ByObservation`] was asked about (profiling's
    /// start): published after profiling started.
    pub warmup_late: u64,
}

impl Attribution {
    /// The split of one phase.
    pub fn get(&self, phase: Phase) -> &Corrected {
        match phase {
            Phase::Profiling => &self.profiling,
            Phase::Warmup => &self.warmup,
        }
    }
}

// --- By span ---------------------------------------------------------------------------

/// The requests of each phase as spans, from start to end plus the slack:
/// whenever a framework counts a request (at scheduling, prefill or
/// completion), it is inside that span.
///
/// Asked only whether some span of a phase overlaps `(a, b]`, which is
/// whether the latest end of the spans starting by `b` is after `a`. That
/// latest end is kept at the times the questions come with (the scrape
/// times), so the spans are never sorted: each record raises the latest
/// end at the first of those times at or after its start, a running
/// maximum then carries it to the later ones.
pub struct Spans<'a> {
    /// The times `b` is expected at, sorted and distinct.
    times: Vec<u64>,
    /// Per phase (`Phase as usize`), per time of `times`: the latest end of
    /// a span starting by then (0: none).
    latest: [Vec<u64>; 2],
    /// The records, slack and unrecorded warmup, for a `b` not in `times`
    /// (answered by a walk over the records).
    records: &'a [Record],
    slack: u64,
    unrecorded_warmup: Option<u64>,
}

impl<'a> Spans<'a> {
    /// The spans of `records`, to be asked about intervals ending at
    /// `times` (in any order, repeats allowed).
    pub fn of(records: &'a [Record], slack: u64, mut times: Vec<u64>) -> Spans<'a> {
        times.sort_unstable();
        times.dedup();
        let mut latest = [vec![0; times.len()], vec![0; times.len()]];
        // Records come about in start order: the time found for one is
        // usually the one for the next.
        let mut at = 0;
        for r in records {
            let start = r.request_start_ns;
            let settled =
                (at == 0 || times[at - 1] < start) && times.get(at).is_none_or(|&t| t >= start);
            if !settled {
                at = times.partition_point(|&t| t < start);
            }
            if let Some(l) = latest[r.phase as usize].get_mut(at) {
                *l = (*l).max(Self::end(r, slack));
            }
        }
        for l in &mut latest {
            running_max(l);
        }
        Spans {
            times,
            latest,
            records,
            slack,
            unrecorded_warmup: None,
        }
    }

    /// A span's end: the request's end (its start if earlier) plus the slack.
    fn end(r: &Record, slack: u64) -> u64 {
        r.request_end_ns
            .max(r.request_start_ns)
            .saturating_add(slack)
    }

    /// With a warmup the run has no records of (AIPerf before 0.12): one
    /// span from the start of time to `until` (profiling's start, by which
    /// its requests had all returned) stands for them.
    pub fn with_unrecorded_warmup(mut self, until: u64) -> Spans<'a> {
        let w = &mut self.latest[Phase::Warmup as usize];
        if let Some(first) = w.first_mut() {
            *first = (*first).max(until);
        }
        running_max(w);
        self.unrecorded_warmup = Some(until);
        self
    }

    /// Whether a request of `phase` was in flight during `(a, b]`.
    fn overlaps(&self, phase: Phase, a: u64, b: u64) -> bool {
        match self.times.binary_search(&b) {
            Ok(at) => self.latest[phase as usize][at] > a,
            // Not a time the spans were built for: every span looked at.
            Err(_) => {
                (phase == Phase::Warmup && self.unrecorded_warmup.is_some_and(|u| u > a))
                    || self.records.iter().any(|r| {
                        r.phase == phase && r.request_start_ns <= b && Self::end(r, self.slack) > a
                    })
            }
        }
    }
}

/// Each value raised to the largest before it.
fn running_max(v: &mut [u64]) {
    let mut latest = 0;
    for x in v {
        latest = latest.max(*x);
        *x = latest;
    }
}

/// Two cumulative series (a ratio's numerator and denominator) split by
/// phase interval by interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpanSplit {
    /// Intervals over every endpoint.
    pub intervals: usize,
    /// Numerator and denominator increments of intervals only profiling
    /// requests overlap.
    pub certain: (f64, f64),
    /// Increments of intervals both phases overlap, or none (foreign traffic).
    pub ambiguous: Vec<(f64, f64)>,
}

/// Why raw scrapes cannot split a series.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The first scrape of the endpoint comes after the first request.
    LateBaseline,
    /// A cumulative value went down (a reset).
    Reset,
    /// Between two scrapes the numerator rose more than the denominator
    /// (hits above queries, cached above prompt tokens): no server counts
    /// so. `line` is the later scrape's line.
    AboveDenominator {
        /// The later scrape's line (1-based).
        line: u64,
        /// The numerator's rise.
        numerator: f64,
        /// The denominator's rise.
        denominator: f64,
    },
}

/// Adds the intervals of one endpoint's numerator and denominator series,
/// joined on their scrapes, to a [`SpanSplit`]: fed their points as
/// [`each_point`] walks them ([`BySpan::push`]: the numerator's, family 0,
/// before the denominator's, family 1, of each scrape), then finished
/// ([`BySpan::finish`]). A numerator point without a denominator point of
/// its scrape (or the other way round) is left out.
pub struct BySpan<'a, 'b> {
    spans: &'a Spans<'a>,
    first_start: Option<u64>,
    split: &'b mut SpanSplit,
    /// The numerator's last point (line, time, amount), until the
    /// denominator's point of its scrape comes.
    num: Option<(u64, u64, f64)>,
    /// The last joined point (time, numerator, denominator).
    last: Option<(u64, f64, f64)>,
    /// The first joined point came after the first request started.
    late: bool,
    refusal: Option<Refusal>,
}

impl<'a, 'b> BySpan<'a, 'b> {
    /// Adds to `split`, the phases told by `spans`; `first_start`: when the
    /// first request started (the first joined point must predate it).
    pub fn new(spans: &'a Spans<'a>, first_start: Option<u64>, split: &'b mut SpanSplit) -> Self {
        BySpan {
            spans,
            first_start,
            split,
            num: None,
            last: None,
            late: false,
            refusal: None,
        }
    }

    /// Takes a point of the numerator (`k` 0) or the denominator (`k` 1);
    /// `false` once the series are refused: later points change nothing.
    pub fn push(&mut self, k: usize, p: &Point) -> bool {
        if self.refusal.is_some() {
            return false;
        }
        if k == 0 {
            self.num = Some((p.line, p.t, p.amount()));
            return true;
        }
        let Some((line, t, n)) = self.num.take().filter(|x| x.0 == p.line) else {
            return true;
        };
        let d = p.amount();
        let Some((a, na, da)) = self.last.replace((t, n, d)) else {
            self.late = !baseline_predates(t, self.first_start);
            return true;
        };
        if self.late {
            self.refusal = Some(Refusal::LateBaseline);
            return false;
        }
        self.refusal = self.interval(a, t, line, (n - na, d - da)).err();
        self.refusal.is_none()
    }

    /// The interval `(a, b]` ending at the scrape at `line`, whose
    /// numerator and denominator rose by `rise`.
    fn interval(&mut self, a: u64, b: u64, line: u64, rise: (f64, f64)) -> Result<(), Refusal> {
        let (dn, dd) = rise;
        if dn < 0.0 || dd < 0.0 {
            return Err(Refusal::Reset);
        }
        if dn > dd {
            return Err(Refusal::AboveDenominator {
                line,
                numerator: dn,
                denominator: dd,
            });
        }
        let split = &mut *self.split;
        split.intervals += 1;
        if dn == 0.0 && dd == 0.0 {
            return Ok(());
        }
        let profiling = self.spans.overlaps(Phase::Profiling, a, b);
        let warmup = self.spans.overlaps(Phase::Warmup, a, b);
        match (profiling, warmup) {
            (true, false) => {
                split.certain.0 += dn;
                split.certain.1 += dd;
            }
            (false, true) => {}
            _ => split.ambiguous.push((dn, dd)),
        }
        Ok(())
    }

    /// Whether the series were split; `Err` with why not. Fewer than two
    /// joined points add no interval and refuse nothing.
    pub fn finish(self) -> Result<(), Refusal> {
        self.refusal.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Spans::overlaps` as first written: every span sorted by start, the
    /// latest end so far carried along, and the last span starting by `b`
    /// asked.
    fn reference_overlaps(
        records: &[Record],
        slack: u64,
        unrecorded_warmup: Option<u64>,
        phase: Phase,
        a: u64,
        b: u64,
    ) -> bool {
        let mut spans: Vec<(u64, u64)> = (records.iter())
            .filter(|r| r.phase == phase)
            .map(|r| {
                let end = r.request_end_ns.max(r.request_start_ns);
                (r.request_start_ns, end.saturating_add(slack))
            })
            .collect();
        if phase == Phase::Warmup {
            spans.extend(unrecorded_warmup.map(|u| (0, u)));
        }
        spans.sort_unstable();
        let mut latest = 0;
        for s in spans.iter_mut() {
            latest = latest.max(s.1);
            s.1 = latest;
        }
        let upto = spans.partition_point(|s| s.0 <= b);
        upto > 0 && spans[upto - 1].1 > a
    }

    #[test]
    fn spans_answer_as_the_sorted_spans_did() {
        let mut rng = fastrand::Rng::with_seed(5);
        for case in 0..300 {
            let n = rng.usize(0..60);
            // Nearly in start order (as a run's records are), or shuffled.
            let mut t = 0;
            let mut records: Vec<Record> = (0..n)
                .map(|_| {
                    t += rng.u64(0..40);
                    let mut r = Record::with_values(Default::default());
                    r.request_start_ns = t;
                    // An end before the start too (a bad record).
                    r.request_end_ns = (t + rng.u64(0..120)).saturating_sub(rng.u64(0..20));
                    r.phase = if rng.u8(0..3) == 0 {
                        Phase::Warmup
                    } else {
                        Phase::Profiling
                    };
                    r
                })
                .collect();
            if case % 3 == 0 {
                rng.shuffle(&mut records);
            }
            let slack = rng.u64(0..30);
            let unrecorded = (case % 4 == 0).then(|| rng.u64(0..200));
            let horizon = t + 200;
            // Scrape times anywhere, and at requests' starts and ends (the
            // edges of the comparisons).
            let mut times: Vec<u64> = (0..rng.usize(0..30)).map(|_| rng.u64(0..horizon)).collect();
            for r in &records {
                match rng.u8(0..4) {
                    0 => times.push(r.request_start_ns),
                    1 => times.push(r.request_end_ns + slack),
                    _ => {}
                }
            }
            let mut spans = Spans::of(&records, slack, times.clone());
            if let Some(u) = unrecorded {
                spans = spans.with_unrecorded_warmup(u);
            }
            // Intervals ending at the times given, and at any time.
            let anywhere: Vec<u64> = (0..20).map(|_| rng.u64(0..horizon)).collect();
            for &b in times.iter().chain(&anywhere) {
                let a = b.saturating_sub(rng.u64(0..60));
                for phase in [Phase::Warmup, Phase::Profiling] {
                    assert_eq!(
                        spans.overlaps(phase, a, b),
                        reference_overlaps(&records, slack, unrecorded, phase, a, b),
                        "case {case}, {phase:?}, ({a}, {b}]"
                    );
                }
            }
        }
    }

    /// The split as first written: both series whole, the numerator's
    /// points joined with the denominator's of the same scrape. Each
    /// interval's rule is [`BySpan::interval`], moved unchanged from it.
    fn reference_by_span(
        num: &[Point],
        den: &[Point],
        spans: &Spans<'_>,
        first_start: Option<u64>,
        split: &mut SpanSplit,
    ) -> Result<(), Refusal> {
        let dens: BTreeMap<u64, &Point> = den.iter().map(|p| (p.line, p)).collect();
        let pts: Vec<(u64, f64, f64, u64)> = (num.iter())
            .filter_map(|n| Some((n.t, n.amount(), dens.get(&n.line)?.amount(), n.line)))
            .collect();
        if pts.len() < 2 {
            return Ok(());
        }
        if first_start.is_some_and(|s| s <= pts[0].0) {
            return Err(Refusal::LateBaseline);
        }
        let mut rule = BySpan::new(spans, None, split);
        for w in pts.windows(2) {
            let ((a, na, da, _), (b, nb, db, line)) = (w[0], w[1]);
            rule.interval(a, b, line, (nb - na, db - da))?;
        }
        Ok(())
    }

    #[test]
    fn series_fed_point_by_point_split_as_the_joined_series_did() {
        let mut rng = fastrand::Rng::with_seed(11);
        let (mut refused, mut split_some) = (0, 0);
        for case in 0..2000 {
            let mut t = 0;
            let records: Vec<Record> = (0..rng.usize(0..20))
                .map(|_| {
                    t += rng.u64(0..40);
                    let mut r = Record::with_values(Default::default());
                    r.request_start_ns = t;
                    r.request_end_ns = t + rng.u64(0..120);
                    r.phase = if rng.bool() {
                        Phase::Warmup
                    } else {
                        Phase::Profiling
                    };
                    r
                })
                .collect();
            // Scrapes at rising times; each series has a point at most of
            // them, rising (now and then falling, or the numerator rising
            // past the denominator).
            let (mut at, mut n, mut d) = (0, 0.0, 0.0);
            let (mut num, mut den, mut times) = (Vec::new(), Vec::new(), Vec::new());
            for line in 1..rng.u64(0..12) {
                at += rng.u64(1..50);
                times.push(at);
                let dd = f64::from(rng.u8(0..6)) - if rng.u8(0..40) == 0 { 9.0 } else { 0.0 };
                let dn = (dd - f64::from(rng.u8(0..4))).max(0.0)
                    + if rng.u8(0..40) == 0 { 3.0 } else { 0.0 };
                (n, d) = (n + dn, d + dd);
                let point = |amount: f64, histogram: bool| Point {
                    t: at,
                    line,
                    count: if histogram { 0.5 } else { amount },
                    sum: histogram.then_some(amount),
                };
                if rng.u8(0..6) != 0 {
                    num.push(point(n, rng.bool()));
                }
                if rng.u8(0..6) != 0 {
                    den.push(point(d, rng.bool()));
                }
            }
            let spans = Spans::of(&records, rng.u64(0..20), times);
            let first_start = (case % 5 != 0).then(|| rng.u64(0..200));
            let mut want = SpanSplit::default();
            let wanted = reference_by_span(&num, &den, &spans, first_start, &mut want);
            // In walk order: a scrape's numerator point, then its
            // denominator point.
            let mut got = SpanSplit::default();
            let mut fed = BySpan::new(&spans, first_start, &mut got);
            let (mut i, mut j) = (0, 0);
            while i < num.len() || j < den.len() {
                let next_num = num.get(i).map(|p| p.line);
                let next_den = den.get(j).map(|p| p.line);
                if next_num.is_some_and(|l| next_den.is_none_or(|m| l <= m)) {
                    fed.push(0, &num[i]);
                    i += 1;
                } else {
                    fed.push(1, &den[j]);
                    j += 1;
                }
            }
            let result = fed.finish();
            refused += usize::from(wanted.is_err());
            split_some += usize::from(want.intervals > 0 && wanted.is_ok());
            assert_eq!(result, wanted, "case {case}");
            if wanted.is_ok() {
                assert_eq!(got, want, "case {case}");
            }
        }
        // Both outcomes, often.
        assert!(refused > 200 && split_some > 200, "{refused} {split_some}");
    }
}
