//! Attribution by observation ([`ByObservation`]): each of a scrape
//! interval's `k` observations goes to one request whose event could have
//! produced it ([`candidates`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{baseline_predates, Attribution, Corrected, Exactness, Points};
use crate::artifacts::records::{Phase, Record};
use crate::frameworks::ObservedAt;
use crate::stats::{le_text, Percentiles};

/// The successful requests as candidates for observations of a metric
/// observed at `at`, sorted by the earliest time their observation can appear.
pub fn candidates(records: &[Record], at: ObservedAt, slack: u64) -> Vec<Candidate> {
    let mut cands: Vec<Candidate> = Vec::with_capacity(records.len());
    cands.extend(records.iter().filter(|r| r.is_success()).map(|r| {
        let (event, known) = match at {
            // Scheduling follows arrival by the queue time: an observation
            // after the arrival is taken as late, never early.
            ObservedAt::Arrival | ObservedAt::Scheduled => (r.request_start_ns, true),
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

/// `cands` with `n` warmup requests the run has no records of (AIPerf
/// before 0.12 writes none) added: each finished by `by_ns` (profiling's
/// start: those versions start profiling once warmup's requests have
/// returned), so its observation can be made any time up to then, and is
/// late after it.
pub fn with_unrecorded_warmup(mut cands: Vec<Candidate>, n: u64, by_ns: u64) -> Vec<Candidate> {
    let n = usize::try_from(n)
        .unwrap_or(usize::MAX)
        .min(increment_budget(0));
    cands.extend((0..n).map(|_| Candidate {
        earliest: 0,
        event: by_ns,
        phase: Phase::Warmup,
    }));
    cands.sort_unstable_by_key(|c| (c.earliest, c.event));
    cands
}

/// A request as the possible cause of one observation.
pub struct Candidate {
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

/// The increments given out so far, summed as the split reads them: per
/// phase, and the value bounds of the uncertain ones. Held as sums, not one
/// record per increment: a run's increments are one per observation, and
/// a gigabyte's raw scrapes gave tens of megabytes of them, each written to
/// fresh memory (docs/performance.md, 2026-12-07, seventh session).
#[derive(Default)]
struct Tally {
    /// Increments given out (to either phase or none).
    n: usize,
    /// Per phase, by `Phase as usize`.
    phases: [PhaseTally; 2],
    /// The uncertain increments' lowest and highest values, in the order
    /// given out (either phase may own them).
    los: Vec<f64>,
    his: Vec<f64>,
}

/// One phase's increments, summed in the order given out.
#[derive(Default)]
struct PhaseTally {
    count: u64,
    /// Their values (point estimates).
    point: f64,
    /// The values of those given with certainty.
    certain: f64,
    uncertain: usize,
    /// How many fell in each bucket (`le`, by its bits), first seen first.
    per_le: Vec<(f64, f64)>,
    /// One's bucket was not told by the bucket deltas.
    le_unknown: bool,
}

impl PhaseTally {
    fn add(&mut self, point: f64, le: Option<f64>, uncertain: bool) {
        self.count += 1;
        self.point += point;
        if uncertain {
            self.uncertain += 1;
        } else {
            self.certain += point;
        }
        let Some(le) = le else {
            self.le_unknown = true;
            return;
        };
        // An interval's increments come in bucket order: the last bucket
        // first.
        let found = (self.per_le.iter_mut().rev()).find(|x| x.0.to_bits() == le.to_bits());
        match found {
            Some(x) => x.1 += 1.0,
            None => self.per_le.push((le, 1.0)),
        }
    }
}

/// Attributes each scrape interval's increments to requests, and gives the
/// per-phase split: fed the points of a series one at a time, as
/// [`super::each_point`] walks them ([`ByObservation::push`]), then finished
/// ([`ByObservation::finish`]), `None` when the raw scrapes cannot support it
/// (too few scrapes, no baseline before the first request, a reset).
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
pub struct ByObservation<'c> {
    cands: &'c [Candidate],
    first_start: Option<u64>,
    late_after: Option<u64>,
    /// Candidates that have become pending.
    next: usize,
    pending: Pending<'c>,
    tally: Tally,
    /// At most this many increments ([`increment_budget`]).
    budget: usize,
    ranges: Vec<(f64, f64, Option<f64>)>,
    unattributed: u64,
    warmup_late: u64,
    /// Points taken so far.
    points: usize,
    /// Every point so far has a sum.
    is_hist: bool,
    /// The split cannot be made (a reset, no baseline, too many increments).
    failed: bool,
}

impl<'c> ByObservation<'c> {
    /// Attributes to `cands`; `first_start`: when the first request started
    /// (the first point must predate it); `late_after`: profiling's start
    /// (warmup observations given out from then on are counted late).
    pub fn new(
        cands: &'c [Candidate],
        first_start: Option<u64>,
        slack: u64,
        late_after: Option<u64>,
    ) -> Self {
        ByObservation {
            cands,
            first_start,
            late_after,
            next: 0,
            pending: Pending::new(cands, slack),
            tally: Tally::default(),
            // One increment is given out per observation: the count deltas
            // are input, so they are bounded by what the records could
            // explain (the fuzzers and a hand-edited `count: 1e300` both
            // reach here). Past the budget the split cannot be told per
            // observation.
            budget: increment_budget(cands.len()),
            ranges: Vec::new(),
            unattributed: 0,
            warmup_late: 0,
            points: 0,
            is_hist: true,
            failed: false,
        }
    }

    /// Takes the last of `pts` as the series' next point (the one before
    /// it, if any, is the point taken before): attributes the interval
    /// between them. `false` once the split cannot be made: later points
    /// change nothing.
    pub fn push(&mut self, pts: &Points) -> bool {
        let Some(b) = pts.len().checked_sub(1) else {
            return !self.failed;
        };
        self.points += 1;
        self.is_hist &= pts[b].sum.is_some();
        if self.failed {
            return false;
        }
        if self.points == 1 {
            self.failed = !baseline_predates(pts[b].t, self.first_start);
        } else {
            self.failed = b == 0 || self.interval(pts, b - 1).is_none();
        }
        !self.failed
    }

    /// The split, from the last points ([`super::each_point`]'s).
    pub fn finish(self, last: &Points) -> Option<Attribution> {
        if self.failed || self.points < 2 {
            return None;
        }
        let split = Split {
            tally: &self.tally,
            is_hist: self.is_hist,
            les: match last.len() {
                0 => Vec::new(),
                n => last.buckets(n - 1).map(|x| x.0).collect(),
            },
            incomplete: self.unattributed > 0
                || self.pending.len() + (self.cands.len() - self.next) > 0,
        };
        Some(split.attribution(self.warmup_late))
    }

    /// The increments of the interval from point `ia` of `pts` to the next;
    /// `None` where the split cannot be made.
    fn interval(&mut self, pts: &Points, ia: usize) -> Option<()> {
        let (a, b) = (&pts[ia], &pts[ia + 1]);
        let cands = self.cands;
        let dc = b.count - a.count;
        if dc < -0.5 {
            return None; // a reset: reported separately, not repaired across
        }
        while self.next < cands.len() && cands[self.next].earliest <= b.t {
            self.pending.add(self.next);
            self.next += 1;
        }
        if !dc.is_finite() {
            return None;
        }
        let k = round_count(dc);
        if k > self.budget - self.tally.n {
            return None;
        }
        if k == 0 {
            return Some(());
        }
        // Passed over in an earlier ambiguous interval (read before this
        // interval's choice can move the mark).
        let floating = self.pending.float_below;
        let (chosen, ambiguous) = self.pending.choose(a.t, b.t, k, self.next);
        self.unattributed += (k - chosen.len()) as u64;
        let dsum = match (a.sum, b.sum) {
            (Some(x), Some(y)) => y - x,
            _ => 0.0,
        };
        if self.late_after.is_some_and(|t| a.t >= t) {
            self.warmup_late += chosen
                .iter()
                .filter(|i| cands[**i].phase == Phase::Warmup)
                .count() as u64;
        }
        let uncertain = |i: Option<usize>| ambiguous || i.is_some_and(|i| i < floating);
        increment_ranges(pts, ia, k, dsum, &mut self.ranges);
        push_increments(
            &mut self.tally,
            &self.ranges,
            dsum / k as f64,
            &chosen,
            cands,
            uncertain,
        );
        Some(())
    }
}

/// An interval's `k` increments (between scrapes `a` and `b`, the sum
/// grown by `dsum`), the `j`-th given to `chosen[j]`; uncertain where the
/// choice was (`uncertain` of the candidate) or the interval holds both
/// phases' requests.
fn push_increments(
    tally: &mut Tally,
    ranges: &[(f64, f64, Option<f64>)],
    point: f64,
    chosen: &[usize],
    cands: &[Candidate],
    uncertain: impl Fn(Option<usize>) -> bool,
) {
    let phase_of = |i: &usize| cands[*i].phase;
    let first = chosen.first().map(phase_of);
    let mixed_here = chosen.iter().any(|i| Some(phase_of(i)) != first);
    for (j, &(lo, hi, le)) in ranges.iter().enumerate() {
        let cand = chosen.get(j).copied();
        let uncertain = mixed_here || uncertain(cand);
        tally.n += 1;
        if uncertain {
            tally.los.push(lo);
            tally.his.push(hi);
        }
        if let Some(i) = cand {
            tally.phases[cands[i].phase as usize].add(point, le, uncertain);
        }
    }
}

/// The increments attributed, summed per phase.
struct Split<'a> {
    tally: &'a Tally,
    is_hist: bool,
    /// The bucket bounds of the last scrape.
    les: Vec<f64>,
    /// An increment had no request, or a request no increment.
    incomplete: bool,
}

impl Split<'_> {
    /// Both phases' splits.
    fn attribution(&self, warmup_late: u64) -> Attribution {
        Attribution {
            profiling: self.phase(Phase::Profiling),
            warmup: self.phase(Phase::Warmup),
            warmup_late,
        }
    }

    /// One phase's count and sum (bounds where uncertain), and when exact
    /// (a histogram), its own buckets and the percentiles estimated from them.
    fn phase(&self, phase: Phase) -> Corrected {
        let mine = &self.tally.phases[phase as usize];
        let (count, point, certain, n_uncertain) =
            (mine.count, mine.point, mine.certain, mine.uncertain);
        // The uncertain increments are a pool either phase may own: the
        // lowest and highest `n_uncertain` of them bound this phase's sum.
        let mut los = self.tally.los.clone();
        let mut his = self.tally.his.clone();
        los.sort_by(f64::total_cmp);
        his.sort_by(|a, b| b.total_cmp(a));
        let low = certain + los.iter().take(n_uncertain).sum::<f64>();
        let high = certain + his.iter().take(n_uncertain).sum::<f64>();
        let bounded = n_uncertain > 0 || self.incomplete;
        let (sum, sum_low, sum_high) = if self.is_hist {
            (Some(point), Some(low), Some(high).filter(|h| h.is_finite()))
        } else {
            (None, None, None)
        };
        let buckets = (self.is_hist && !bounded)
            .then(|| self.buckets(phase))
            .flatten();
        Corrected {
            count,
            count_low: None,
            count_high: None,
            sum,
            sum_low,
            sum_high,
            avg: sum.filter(|_| count > 0).map(|s| s / count as f64),
            exactness: if bounded {
                Exactness::Bounded
            } else {
                Exactness::Exact
            },
            percentiles: buckets.as_deref().map(Percentiles::of_buckets),
            buckets: buckets.map(|b| b.iter().map(|(le, c)| (le_text(*le), *c)).collect()),
        }
    }

    /// The phase's cumulative buckets from its increments' buckets; `None`
    /// when an increment's bucket is unknown or there is no `+Inf` bucket.
    fn buckets(&self, phase: Phase) -> Option<Vec<(f64, f64)>> {
        let mine = &self.tally.phases[phase as usize];
        if mine.le_unknown {
            return None;
        }
        let mut per_le: Vec<f64> = vec![0.0; self.les.len()];
        for &(le, n) in &mine.per_le {
            let i = self.les.iter().position(|x| *x == le)?;
            per_le[i] += n;
        }
        let mut cum = 0.0;
        let buckets: Vec<(f64, f64)> = self
            .les
            .iter()
            .zip(per_le)
            .map(|(le, n)| {
                cum += n;
                (*le, cum)
            })
            .collect();
        (buckets.last()?.0 == f64::INFINITY).then_some(buckets)
    }
}

/// How many increments [`ByObservation`] gives out at most for `records`
/// candidate requests: four per request plus a fixed allowance for foreign
/// traffic. Each is work, and an uncertain one holds its value bounds (16
/// bytes: at most 1 MB, plus 64 bytes a request).
pub fn increment_budget(records: usize) -> usize {
    records.saturating_mul(4).saturating_add(1 << 16)
}

/// `x` rounded half away from zero as a count, 0 below one half (and for
/// NaN), saturating: `x.round().max(0.0) as usize`. `f64::round` is a
/// library call on x86-64's baseline (no SSE4.1), and this runs per bucket
/// per scrape interval. Exact: below 2^53 `x - trunc(x)` is exact, above
/// it `x` is whole.
fn round_count(x: f64) -> usize {
    let whole = x as u64; // truncates and saturates; NaN and negatives: 0
    let up = x - whole as f64 >= 0.5;
    usize::try_from(whole.saturating_add(u64::from(up))).unwrap_or(usize::MAX)
}

/// Value bounds of each of an interval's `k` increments, into `ranges`:
/// exact for a single increment (the sum delta), otherwise the bucket
/// ranges they fell into. Also the bucket (`le`) of each, from the bucket
/// deltas; `None` where the deltas account for fewer than `k` increments.
fn increment_ranges(
    pts: &Points,
    ia: usize,
    k: usize,
    dsum: f64,
    ranges: &mut Vec<(f64, f64, Option<f64>)>,
) {
    ranges.clear();
    let (mut prev_le, mut prev_c) = (0.0, 0.0);
    let before = pts.row(ia);
    for (j, (le, c)) in (pts.les.iter().zip(pts.row(ia + 1))).enumerate() {
        if ranges.len() == k {
            break; // every increment placed: the later buckets add none
        }
        if c.is_nan() {
            continue;
        }
        let (le, c) = (*le, *c);
        let before = if before[j].is_nan() { 0.0 } else { before[j] };
        let cum = c - before;
        if cum != prev_c {
            // Bucket deltas beyond the count delta are inconsistent input:
            // never more ranges than increments.
            let n = round_count(cum - prev_c).min(k - ranges.len());
            ranges.extend(std::iter::repeat_n((prev_le, le, Some(le)), n));
        }
        prev_le = le;
        prev_c = cum;
    }
    ranges.resize(k, (0.0, f64::INFINITY, None));
    if k == 1 {
        // A single increment's value is the sum delta itself.
        ranges[0] = (dsum, dsum, ranges[0].2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_rounds_as_f64_round_does() {
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            0.49999999999999994,
            1.5,
            2.5,
            -2.5,
            1.0 - f64::EPSILON / 2.0,
            4503599627370495.5, // 2^52 - 0.5
            9007199254740993.0, // above 2^53
            9.3e18,
            1.8446744073709552e19, // 2^64
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
        ];
        // The halves' neighbourhoods (+-2 ulps), and a spread of bit
        // patterns (every non-negative one: the sign bit clear).
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..100_000 {
            let half = rng.u64(0..1000) as f64 + 0.5;
            xs.push(f64::from_bits(half.to_bits() + rng.u64(0..5) - 2));
            xs.push(f64::from_bits(rng.u64(..) >> 1));
        }
        for x in xs {
            assert_eq!(round_count(x), x.round().max(0.0) as usize, "{x:e}");
        }
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
    fn buckets_that_place_fewer_increments_than_the_count_give_no_buckets() {
        use super::super::Point;
        let point = |t: u64, count: f64, sum: f64| Point {
            t,
            line: t,
            count,
            sum: Some(sum),
        };
        // Two profiling requests, both on time in the interval (10, 20].
        let cand = |event: u64| Candidate {
            earliest: event,
            event,
            phase: Phase::Profiling,
        };
        let cands = [cand(12), cand(15)];
        let split = |second_bucket: f64| {
            // The count grew by two; the buckets (le 1, +Inf) by one, or
            // by two.
            let pts = Points::from_rows(
                vec![point(10, 0.0, 0.0), point(20, 2.0, 1.5)],
                vec![1.0, f64::INFINITY],
                vec![0.0, 0.0, 1.0, second_bucket],
            );
            let mut by = ByObservation::new(&cands, Some(11), 0, None);
            let first =
                Points::from_rows(pts[..1].to_vec(), vec![1.0, f64::INFINITY], vec![0.0; 2]);
            assert!(by.push(&first));
            assert!(by.push(&pts));
            by.finish(&pts).expect("a split")
        };
        let told = split(2.0);
        assert_eq!(told.profiling.exactness, Exactness::Exact);
        let buckets = told.profiling.buckets.expect("buckets");
        let want = [(le_text(1.0), 1.0), (le_text(f64::INFINITY), 2.0)];
        assert_eq!(buckets, want.into_iter().collect());
        // One increment's bucket is not told: the count and sum stand, the
        // buckets do not.
        let untold = split(1.0);
        assert_eq!(
            (untold.profiling.count, untold.profiling.sum),
            (2, Some(1.5))
        );
        assert_eq!(untold.profiling.buckets, None);
        assert_eq!(untold.profiling.percentiles, None);
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
