//! A family's cumulative series on one endpoint as points in state order
//! ([`cumulative`], [`each_point`]): what [`super::ByObservation`] and
//! [`super::BySpan`] attribute the increments of.

use std::collections::BTreeMap;

use crate::artifacts::scrapes::{Sample, Samples, Scrape, ScrapesRead, SeriesCursor};

/// One scrape of a cumulative series: its time, the summed count (a
/// histogram's `_count`, a counter's value) and the summed sum
/// (histograms); its buckets are in the [`Points`] it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Scrape time (ns).
    pub t: u64,
    /// The scrape's line in the file (identifies the scrape).
    pub line: u64,
    /// Cumulative count (histogram) or value (counter).
    pub count: f64,
    /// Cumulative sum (histograms; `None` for counters).
    pub sum: Option<f64>,
}

impl Point {
    /// What the series accumulates: a histogram's sum, a counter's value.
    pub fn amount(&self) -> f64 {
        self.sum.unwrap_or(self.count)
    }
}

/// A family's points on one endpoint ([`cumulative`]), with their buckets:
/// one row of counts per point over the bounds any point has (in the order
/// of `le`'s bits: bits of non-negative floats order as their values),
/// `NaN` where a point has no such bucket. The series of a family share
/// their bounds, so a row is the sum of its series' counts and a point
/// allocates nothing of its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Points {
    pts: Vec<Point>,
    pub(super) les: Vec<f64>,
    counts: Vec<f64>,
}

impl std::ops::Deref for Points {
    type Target = [Point];
    fn deref(&self) -> &[Point] {
        &self.pts
    }
}

impl Points {
    /// Point `i`'s counts, one per bound.
    pub(super) fn row(&self, i: usize) -> &[f64] {
        let w = self.les.len();
        &self.counts[i * w..(i + 1) * w]
    }

    /// Point `i`'s buckets, `(le, count)` in `le` order.
    pub(super) fn buckets(&self, i: usize) -> impl Iterator<Item = (f64, f64)> + '_ {
        (self.les.iter().copied())
            .zip(self.row(i).iter().copied())
            .filter(|(_, c)| !c.is_nan())
    }

    /// The columns of bounds `les`, every new one added (every row `NaN`
    /// there) in one rebuild of the rows: adding them one at a time copied
    /// every row per bound, quadratic in a histogram's buckets.
    fn columns(&mut self, les: &[f64]) -> Vec<usize> {
        let find = |all: &[f64], le: f64| all.binary_search_by_key(&le_key(le), |x| le_key(*x));
        let mut new: Vec<f64> = les
            .iter()
            .copied()
            .filter(|&le| find(&self.les, le).is_err())
            .collect();
        if !new.is_empty() {
            new.sort_unstable_by_key(|x| le_key(*x));
            new.dedup_by_key(|x| le_key(*x));
            let mut merged = Vec::with_capacity(self.les.len() + new.len());
            let (mut a, mut b) = (0, 0);
            // Where each old column goes.
            let mut moved = Vec::with_capacity(self.les.len());
            while a < self.les.len() || b < new.len() {
                let old_first =
                    b >= new.len() || (a < self.les.len() && le_key(self.les[a]) < le_key(new[b]));
                if old_first {
                    moved.push(merged.len());
                    merged.push(self.les[a]);
                    a += 1;
                } else {
                    merged.push(new[b]);
                    b += 1;
                }
            }
            let (w, nw) = (self.les.len(), merged.len());
            let mut counts = vec![f64::NAN; self.pts.len() * nw];
            for r in 0..self.pts.len() {
                let (old, row) = (&self.counts[r * w..(r + 1) * w], &mut counts[r * nw..]);
                for (&j, &c) in moved.iter().zip(old) {
                    row[j] = c;
                }
            }
            self.counts = counts;
            self.les = merged;
        }
        les.iter()
            .map(|&le| find(&self.les, le).unwrap_or_default())
            .collect()
    }
}

fn le_key(le: f64) -> u64 {
    // Order-preserving for non-negative floats (bucket bounds are >= 0).
    le.to_bits()
}

/// The index of `id` in `v` (tried first at `hint`, where it usually is),
/// added with `make` if absent.
fn slot<T>(v: &mut Vec<(u32, T)>, hint: usize, id: u32, make: impl FnOnce() -> T) -> usize {
    if v.get(hint).is_some_and(|x| x.0 == id) {
        return hint;
    }
    match v.iter().position(|x| x.0 == id) {
        Some(k) => k,
        None => {
            v.push((id, make()));
            v.len() - 1
        }
    }
}

/// The cumulative series of `family` (with or without `_total`) on
/// `endpoint`, summed over the samples whose labels `keep` accepts, in state
/// order, each at the latest time its state can be from. Scrapes before the
/// family's first appearance count 0 (its series did not exist yet); a
/// later scrape without it, or with a kept sample that lacks its value, is
/// left out.
pub fn cumulative(
    scrapes: &ScrapesRead,
    endpoint: &str,
    family: &str,
    keep: impl Fn(&BTreeMap<String, String>) -> bool,
) -> Points {
    let ordered = scrapes.of_endpoint(endpoint);
    let mut tracks = [(Track::new(scrapes, &ordered, family, keep, false), true)];
    tracks[0].0.out.pts.reserve(ordered.len());
    walk(scrapes, &ordered, &mut tracks, usize::MAX, |_, _| true);
    let [(track, _)] = tracks;
    track.out
}

/// The series of several families on `endpoint` ([`cumulative`]'s, the
/// `k`-th summed over the samples `keep(k, labels)` accepts) from one walk
/// over its scrapes, given as they grow: after each point of family `k`,
/// `sink(k, points)` sees that family's last points, at most [`HELD`] of
/// them, the new one last. `false` from the sink: it wants no more of that
/// family. The last points come back, one set per family.
///
/// One walk instead of one per family: a scrape's samples of every family
/// are read together, and no family's whole series is held (a gigabyte's
/// raw scrapes hold megabytes of points per family).
///
/// **Buckets only where the count moved.** A point's row of buckets is
/// decoded when its count differs from the point's before or after it,
/// and for the last point; the other rows are empty (`NaN`, no bucket).
/// An interval whose count did not move holds no observation, and its
/// buckets are not read ([`super::ByObservation`]). On a 1.18 GB
/// one-endpoint file, 61 % of the intervals hold none and 52 % of the
/// rows were decoded for nothing; the phase check takes about a tenth
/// less time without them (docs/performance.md, 2026-12-07, seventh
/// session). A file with a bound that is not a number (a sample with it
/// leaves its point out, which only the buckets tell) has every row
/// decoded.
pub fn each_point(
    scrapes: &ScrapesRead,
    endpoint: &str,
    families: &[&str],
    keep: impl Fn(usize, &BTreeMap<String, String>) -> bool,
    sink: impl FnMut(usize, &Points) -> bool,
) -> Vec<Points> {
    let ordered = scrapes.of_endpoint(endpoint);
    let keep = &keep;
    let lazy = scrapes.every_bound_known();
    let mut tracks: Vec<(Track<'_, _>, bool)> = (families.iter().enumerate())
        .map(|(k, family)| {
            let track = Track::new(scrapes, &ordered, family, move |l: &_| keep(k, l), lazy);
            (track, true)
        })
        .collect();
    walk(scrapes, &ordered, &mut tracks, HELD, sink);
    (tracks.into_iter())
        .map(|(mut track, _)| {
            track.decode_last(scrapes);
            track.out
        })
        .collect()
}

/// [`cumulative`]'s points as (time, count), from a walk that decodes a
/// point's buckets only where its count moved ([`each_point`]), for a
/// reader of the counts alone: the HTML timeline's scrape intervals read
/// them per metric a finding names.
pub fn counts(
    scrapes: &ScrapesRead,
    endpoint: &str,
    family: &str,
    keep: impl Fn(&BTreeMap<String, String>) -> bool,
) -> Vec<(u64, f64)> {
    let mut out = Vec::new();
    each_new_point(scrapes, endpoint, family, keep, |p| {
        out.push((p.t, p.count));
        true
    });
    out
}

/// [`cumulative`]'s count at its first point and at the point of the scrape
/// at `line`, from a walk that ends there (a baseline near the run's start:
/// a whole series walked per observer cost the phase check more than its
/// repairs on a run of AIPerf 0.11, docs/performance.md, 2026-12-07, ninth
/// session). `None` without a point at `line`.
pub fn counts_to(
    scrapes: &ScrapesRead,
    endpoint: &str,
    family: &str,
    keep: impl Fn(&BTreeMap<String, String>) -> bool,
    line: u64,
) -> Option<(f64, f64)> {
    let (mut first, mut at) = (None, None);
    each_new_point(scrapes, endpoint, family, keep, |p| {
        first.get_or_insert(p.count);
        at = (p.line == line).then_some(p.count);
        at.is_none()
    });
    Some((first?, at?))
}

/// One family's points ([`each_point`]'s walk), each given to `f` as it
/// comes until `f` says `false`.
fn each_new_point(
    scrapes: &ScrapesRead,
    endpoint: &str,
    family: &str,
    keep: impl Fn(&BTreeMap<String, String>) -> bool,
    mut f: impl FnMut(&Point) -> bool,
) {
    let keep = |_: usize, l: &BTreeMap<String, String>| keep(l);
    each_point(scrapes, endpoint, &[family], keep, |_, pts| {
        pts.last().is_none_or(&mut f)
    });
}

/// How many points of each family [`each_point`] holds at most: its sink
/// needs only the last two, but cutting the older ones back after every
/// point cost two copies per point (the point and its row, a call to
/// `memmove` each); cut back to the last once this many are held, a
/// thirty-first of them (cut back once 64 were held, walks of six and
/// twelve families took 3-6 % less time, docs/performance.md, 2026-12-07,
/// fifth session).
pub const HELD: usize = 32;

/// Adds each scrape of `ordered` (an endpoint's, in state order) to every
/// track still wanted (`true`), read ahead [`WARM_SCRAPES`] scrapes at a
/// time; after each point of track `k`, `sink(k, its points)` says whether
/// it is still wanted, and a track holding `hold` points keeps only its
/// last. Ends early once no track is wanted.
fn walk<'s, K: Fn(&BTreeMap<String, String>) -> bool>(
    scrapes: &'s ScrapesRead,
    ordered: &[(&'s Scrape, u64)],
    tracks: &mut [(Track<'s, K>, bool)],
    hold: usize,
    mut sink: impl FnMut(usize, &Points) -> bool,
) {
    for (i, &(s, t)) in ordered.iter().enumerate() {
        if i % WARM_SCRAPES == 0 {
            if !tracks.iter().any(|x| x.1) {
                // No track wanted: the rest would change nothing.
                break;
            }
            warm(scrapes, &ordered[i..], tracks);
        }
        for (k, (track, wanted)) in tracks.iter_mut().enumerate().filter(|x| x.1 .1) {
            if track.step(scrapes, i, s, t) {
                *wanted = sink(k, &track.out);
                if track.out.len() >= hold {
                    track.out.keep_last();
                }
            }
        }
    }
}

/// One family's walk over an endpoint's scrapes: the family's group in
/// each layout (by layout id; found once per layout, not held per scrape:
/// a walk holds one of these per family), the scrape it first appears in,
/// the points so far and what sums a scrape's samples into one.
struct Track<'s, K> {
    groups: Vec<Option<usize>>,
    first: Option<usize>,
    out: Points,
    adder: Adder<'s, K>,
    /// Rows decoded only where the count moved ([`each_point`]).
    lazy: bool,
    /// With `lazy`: the scrape and group of the last point, when its row
    /// is not decoded yet.
    undecoded: Option<(&'s Scrape, usize)>,
}

impl<K> Track<'_, K> {
    /// The family's group in scrape `s`, if it has one.
    fn group(&self, s: &Scrape) -> Option<usize> {
        self.groups[s.layout as usize]
    }
}

impl<'s, K: Fn(&BTreeMap<String, String>) -> bool> Track<'s, K> {
    fn new(
        scrapes: &ScrapesRead,
        ordered: &[(&Scrape, u64)],
        family: &str,
        keep: K,
        lazy: bool,
    ) -> Self {
        let ids = scrapes.family(family);
        let layouts = ordered.iter().map(|(s, _)| s.layout as usize + 1).max();
        let mut found: Vec<Option<Option<usize>>> = vec![None; layouts.unwrap_or(0)];
        for (s, _) in ordered {
            found[s.layout as usize].get_or_insert_with(|| scrapes.group_index(s, ids));
        }
        let groups: Vec<Option<usize>> = found.into_iter().map(Option::flatten).collect();
        // Before the family's first appearance on the endpoint it had no
        // series yet (a labelled series exists from its first observation
        // on): 0.
        let first = (ordered.iter()).position(|(s, _)| groups[s.layout as usize].is_some());
        Track {
            groups,
            first,
            out: Points::default(),
            adder: Adder::new(keep),
            lazy,
            undecoded: None,
        }
    }

    /// Adds the point of scrape `s` (the `i`-th, at time `t`): whether it
    /// has one.
    fn step(&mut self, scrapes: &'s ScrapesRead, i: usize, s: &'s Scrape, t: u64) -> bool {
        if self.first.is_some_and(|f| i < f) {
            // No series: its row is whole as it is.
            self.out.push_zero(s, t);
            self.undecoded = None;
            return true;
        }
        let Some(g) = self.group(s) else {
            return false;
        };
        let out = &mut self.out;
        // The point's row, appended now and cut back if the point is left out.
        let at = out.push_zero(s, t);
        let samples = scrapes.samples_at(s, g);
        if self
            .adder
            .add(out, at, samples.clone(), !self.lazy)
            .is_none()
        {
            out.pts.truncate(at);
            out.counts.truncate(at * out.les.len());
            return false;
        }
        if self.lazy {
            // A count that is not a number counts as moved.
            let moved = at
                .checked_sub(1)
                .is_some_and(|b| !(out.pts[b].count == out.pts[at].count));
            if moved {
                // The interval before holds observations: both rows.
                if let Some((sb, gb)) = self.undecoded.take() {
                    self.adder.decode(out, at - 1, scrapes.samples_at(sb, gb));
                }
                self.adder.decode(out, at, samples);
            } else {
                self.undecoded = Some((s, g));
            }
        }
        true
    }

    /// Decodes the last point's row if it is not yet.
    fn decode_last(&mut self, scrapes: &'s ScrapesRead) {
        if let (Some((s, g)), Some(at)) = (self.undecoded.take(), self.out.len().checked_sub(1)) {
            self.adder
                .decode(&mut self.out, at, scrapes.samples_at(s, g));
        }
    }
}

/// Scrapes read into the cache together before the walk adds them, and at
/// most how many rows (a family with thousands of series per scrape would
/// otherwise evict what it warmed before the walk reaches it).
const WARM_SCRAPES: usize = 32;
const WARM_ROWS: usize = 2048;

/// Reads the rows of the wanted tracks' families (from the first of their
/// groups to the end of the last) in the next [`WARM_SCRAPES`] scrapes of
/// `ordered`, and their records (a histogram's sum and bucket growths), in
/// two short loops whose loads do not wait on each other
/// ([`ScrapesRead::touch_scrapes`]). A family's samples of consecutive
/// scrapes are a scrape apart in the store, so each scrape's rows cost
/// cache misses; missed together, in these loops, they cost about what one
/// does, where the walk's work between them made them one after another
/// (`examples/cumulative_times` on a 642 MB and a 1.16 GB file: about 30 %
/// less time, docs/performance.md, 2026-12-07, third session; a walk of
/// twelve families: 16 % less than one read-ahead per family, fifth
/// session). Reads only: the points do not change.
fn warm<K>(scrapes: &ScrapesRead, ordered: &[(&Scrape, u64)], tracks: &[(Track<'_, K>, bool)]) {
    let mut left = WARM_ROWS;
    let batch = (ordered.iter().take(WARM_SCRAPES)).map_while(|&(s, _)| {
        let rows = (tracks.iter().filter(|x| x.1))
            .filter_map(|(track, _)| Some(scrapes.group_rows(s, track.group(s)?)))
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
            .unwrap_or_default();
        left = left.checked_sub(rows.1.saturating_sub(rows.0) as usize)?;
        Some((s, rows))
    });
    std::hint::black_box(scrapes.touch_scrapes(batch));
}

impl Points {
    /// Points with their rows (`counts`: one row of `les.len()` per point),
    /// for a unit test of what reads them.
    #[cfg(test)]
    pub(super) fn from_rows(pts: Vec<Point>, les: Vec<f64>, counts: Vec<f64>) -> Points {
        assert_eq!(pts.len() * les.len(), counts.len());
        Points { pts, les, counts }
    }

    /// Keeps only the last point (and its row).
    fn keep_last(&mut self) {
        if let Some(n) = self.pts.len().checked_sub(1) {
            self.pts.drain(..n);
            self.counts.drain(..n * self.les.len());
        }
    }

    /// Appends a point of count 0 at scrape `s`, time `t`, with no buckets;
    /// its index comes back.
    fn push_zero(&mut self, s: &Scrape, t: u64) -> usize {
        self.pts.push(Point {
            t,
            line: s.line,
            count: 0.0,
            sum: Some(0.0),
        });
        self.counts
            .resize(self.counts.len() + self.les.len(), f64::NAN);
        self.pts.len() - 1
    }
}

/// Sums a scrape's kept samples into a point: per label set, whether it is
/// kept (decided once) and where its buckets stand (the rows last decoded);
/// the bounds of the last series added, their columns, and whether those
/// are every column in order.
struct Adder<'s, K> {
    keep: K,
    memo: Vec<(u32, bool)>,
    cursors: Vec<(u32, SeriesCursor)>,
    last_les: &'s [Option<f64>],
    columns: Vec<usize>,
    identity: bool,
}

impl<'s, K: Fn(&BTreeMap<String, String>) -> bool> Adder<'s, K> {
    fn new(keep: K) -> Self {
        Adder {
            keep,
            memo: Vec::new(),
            cursors: Vec::new(),
            last_les: &[],
            columns: Vec::new(),
            identity: false,
        }
    }

    /// Adds the kept samples of `ss` to point `at`, their buckets too if
    /// `rows`; `None` when one lacks its value or has a bucket without a
    /// bound (the point is left out).
    fn add(&mut self, out: &mut Points, at: usize, ss: Samples<'s>, rows: bool) -> Option<()> {
        let mut filled = false;
        for (k, x) in ss.enumerate() {
            let id = x.labels_id();
            let m = slot(&mut self.memo, k, id, || (self.keep)(x.labels()));
            if !self.memo[m].1 {
                continue;
            }
            let v = x.cumulative()?;
            let p = &mut out.pts[at];
            p.count += v;
            p.sum = p.sum.zip(x.sum()).map(|(a, b)| a + b);
            if rows {
                filled |= self.buckets(out, at, k, &x, filled)?;
            }
        }
        Some(())
    }

    /// Adds the buckets of the kept samples of `ss` (their counts and sums
    /// added already, every bound known) to point `at`'s row.
    fn decode(&mut self, out: &mut Points, at: usize, ss: Samples<'s>) {
        let mut filled = false;
        for (k, x) in ss.enumerate() {
            let m = slot(&mut self.memo, k, x.labels_id(), || (self.keep)(x.labels()));
            if self.memo[m].1 {
                filled |= self.buckets(out, at, k, &x, filled).unwrap_or(false);
            }
        }
    }

    /// Adds sample `x`'s buckets (the `k`-th of its scrape) to point `at`'s
    /// row: whether it had any.
    fn buckets(
        &mut self,
        out: &mut Points,
        at: usize,
        k: usize,
        x: &Sample<'s>,
        filled: bool,
    ) -> Option<bool> {
        let c = slot(&mut self.cursors, k, x.labels_id(), SeriesCursor::default);
        let Some((les, counts)) = x.buckets_after(&mut self.cursors[c].1) else {
            return Some(false);
        };
        // The bounds are interned: the same bounds, the same slice.
        if !std::ptr::eq(self.last_les, les) {
            if les.iter().any(Option::is_none) {
                return None;
            }
            self.last_les = les;
            let bounds: Vec<f64> = les.iter().flatten().copied().collect();
            self.columns = out.columns(&bounds);
            self.identity = self.columns.iter().enumerate().all(|(k, j)| k == *j)
                && self.columns.len() == out.les.len();
        }
        let w = out.les.len();
        let row = &mut out.counts[at * w..(at + 1) * w];
        if self.identity && !filled {
            // The point's first series, over every bound: its counts.
            row.copy_from_slice(counts);
        } else if self.identity {
            // A later series over every bound: in step, without a column
            // index (and its bounds check) per count.
            for (r, &n) in row.iter_mut().zip(counts) {
                add_count(r, n);
            }
        } else {
            for (&j, &n) in self.columns.iter().zip(counts) {
                add_count(&mut row[j], n);
            }
        }
        Some(true)
    }
}

/// Adds a series' bucket count to a point's: the count itself where the
/// point has none there yet (`NaN`).
fn add_count(slot: &mut f64, n: f64) {
    *slot = if slot.is_nan() { n } else { *slot + n };
}

/// What a series grew by over `[start, end]` read reset-aware: from the
/// baseline (the point of line `baseline` when given: AIPerf's own, else
/// the last point before `start`) to the first at or after `end`, each
/// increment, and after a drop the value it restarted to (what grew between
/// the last point before a restart and the restart is not seen: a lower
/// bound). `(count, sum)`; `None` without a point in it.
pub fn growth_across_resets(
    pts: &[Point],
    baseline: Option<u64>,
    start: u64,
    end: u64,
) -> Option<(f64, Option<f64>)> {
    let first = baseline
        .and_then(|line| pts.iter().position(|p| p.line == line))
        .or_else(|| pts.iter().rposition(|p| p.t < start))
        .unwrap_or(0);
    let last = pts
        .iter()
        .position(|p| p.t >= end)
        .unwrap_or(pts.len().checked_sub(1)?)
        .max(first);
    let window = pts.get(first..=last)?;
    let grow = |a: f64, b: f64| if b >= a { b - a } else { b };
    let count = window
        .windows(2)
        .map(|w| grow(w[0].count, w[1].count))
        .sum();
    let sum = window
        .windows(2)
        .map(|w| Some(grow(w[0].sum?, w[1].sum?)))
        .sum::<Option<f64>>();
    (window.len() > 1).then_some((count, sum))
}

#[cfg(test)]
mod growth_tests {
    use super::*;

    #[test]
    fn new_bounds_are_added_in_one_rebuild_keeping_every_count() {
        let mut p = Points {
            pts: vec![pt(0, 40.0), pt(1, 50.0)],
            les: vec![1.0, 3.0],
            counts: vec![10.0, 30.0, 11.0, 31.0],
        };
        assert_eq!(p.columns(&[2.0, 3.0, 0.5, 2.0]), vec![2, 3, 0, 2]);
        assert_eq!(p.les, vec![0.5, 1.0, 2.0, 3.0]);
        let row = |i| {
            p.row(i)
                .iter()
                .map(|c| (!c.is_nan()).then_some(*c))
                .collect::<Vec<_>>()
        };
        assert_eq!(row(0), vec![None, Some(10.0), None, Some(30.0)]);
        assert_eq!(row(1), vec![None, Some(11.0), None, Some(31.0)]);
        // Known bounds only: nothing rebuilt.
        assert_eq!(p.columns(&[3.0, 0.5]), vec![3, 0]);
        assert_eq!(p.counts.len(), 8);
    }

    fn pt(t: u64, count: f64) -> Point {
        Point {
            t,
            line: t,
            count,
            sum: Some(count * 2.0),
        }
    }

    #[test]
    fn a_reset_adds_the_value_it_restarted_to() {
        let pts = [
            pt(0, 10.0),
            pt(10, 14.0),
            pt(20, 3.0),
            pt(30, 5.0),
            pt(40, 9.0),
        ];
        let all = Some((4.0 + 3.0 + 2.0, Some(18.0)));
        assert_eq!(growth_across_resets(&pts, None, 5, 30), all);
        // To the first point at or after the end: across the reset.
        assert_eq!(
            growth_across_resets(&pts, None, 5, 12),
            Some((7.0, Some(14.0)))
        );
        assert_eq!(
            growth_across_resets(&pts, None, 5, 10),
            Some((4.0, Some(8.0)))
        );
        assert_eq!(
            growth_across_resets(&pts, Some(10), 5, 30),
            Some((5.0, Some(10.0)))
        );
        assert_eq!(growth_across_resets(&[], None, 0, 1), None);
    }
}

#[cfg(test)]
mod walk_tests {
    use super::*;

    /// Every committed run directory with raw scrapes.
    fn runs_with_scrapes() -> Vec<std::path::PathBuf> {
        (crate::artifacts::scrapes::committed_scrape_files().into_iter())
            .filter_map(|file| Some(file.parent()?.to_path_buf()))
            .collect()
    }

    /// A point and its buckets, to compare walks by.
    type Seen = (Point, Vec<(f64, f64)>);

    fn at(pts: &Points, i: usize) -> Seen {
        (pts[i].clone(), pts.buckets(i).collect())
    }

    /// A filter that differs per family: every label set for even `k`,
    /// those with an even sum of label lengths for odd `k`.
    fn keep(k: usize, labels: &BTreeMap<String, String>) -> bool {
        k % 2 == 0 || labels.iter().map(|(a, b)| a.len() + b.len()).sum::<usize>() % 2 == 0
    }

    #[test]
    fn one_walk_of_every_family_gives_each_family_s_own_walk() {
        // The most points held at once; rows decoded and left empty.
        let (mut runs, mut pairs, mut points, mut held) = (0, 0, 0, 0);
        let (mut decoded, mut skipped) = (0, 0);
        for dir in runs_with_scrapes() {
            let run = crate::artifacts::load(&dir);
            let Some(sc) = run.scrapes.as_ref() else {
                continue;
            };
            runs += 1;
            let names: Vec<&str> = (0..sc.family_count() as u32)
                .map(|id| sc.family_name(id))
                .collect();
            for ep in sc.by_endpoint().keys() {
                let mut seen: Vec<Vec<Seen>> = vec![Vec::new(); names.len()];
                let last = each_point(sc, ep, &names, keep, |k, pts| {
                    held = held.max(pts.len());
                    // The point before the new one is the one seen before
                    // (a sink reads the interval between them); its row may
                    // have been decoded since, once the count moved.
                    if let Some(before) = pts.len().checked_sub(2) {
                        let now = at(pts, before);
                        let then = seen[k].last_mut().expect("the point before");
                        assert_eq!(then.0, now.0);
                        *then = now;
                    }
                    seen[k].push(at(pts, pts.len() - 1));
                    true
                });
                for (k, name) in names.iter().enumerate() {
                    let alone = cumulative(sc, ep, name, |l| keep(k, l));
                    let want: Vec<Seen> = (0..alone.len()).map(|i| at(&alone, i)).collect();
                    let here = format!("{} {ep} {name}", dir.display());
                    assert_eq!(seen[k].len(), want.len(), "{here}");
                    let count = |i: usize| want.get(i).map(|x| x.0.count);
                    for (i, (got, want)) in seen[k].iter().zip(&want).enumerate() {
                        assert_eq!(got.0, want.0, "{here} point {i}");
                        // A row is decoded where the count moved on either
                        // side of it (the last point's once the walk is
                        // done, below).
                        let moved = |j: Option<usize>| {
                            j.and_then(count).is_some_and(|c| !(c == want.0.count))
                        };
                        let needed = !sc.every_bound_known()
                            || moved(i.checked_sub(1))
                            || moved(Some(i + 1));
                        if needed {
                            assert_eq!(got.1, want.1, "{here} point {i}");
                            decoded += usize::from(!want.1.is_empty());
                        } else {
                            assert!(got.1.is_empty(), "{here} point {i}");
                            skipped += usize::from(!want.1.is_empty());
                        }
                    }
                    let (l, a) = (&last[k], &alone);
                    match (l.len().checked_sub(1), a.len().checked_sub(1)) {
                        (Some(i), Some(j)) => assert_eq!(at(l, i), at(a, j), "{here}"),
                        (i, j) => assert_eq!(i, j, "{here}"),
                    }
                    pairs += 1;
                    points += want.len();
                }
            }
        }
        assert!(
            runs > 40 && pairs > 1000 && points > 10_000,
            "{runs} {pairs} {points}"
        );
        // Series longer than the window were cut back to it, never past.
        assert_eq!(held, HELD);
        // Both kinds of row are met.
        assert!(decoded > 1000 && skipped > 1000, "{decoded} {skipped}");
    }

    #[test]
    fn a_bound_that_is_not_a_number_leaves_its_point_out_of_every_walk() {
        // Five scrapes of one histogram series; the third has a bucket whose
        // bound is not a number, and a count that did not move (a point
        // whose row a lazy walk would not decode).
        let line = |t: u64, n: u64, le: &str| {
            format!(
                r#"{{"endpoint_url":"u","timestamp_ns":{t},"metrics":{{"h":[{{"count":{n},"sum":{n}.5,"buckets":{{"1.0":{n},"{le}":{n},"+Inf":{n}}}}}]}}}}"#
            )
        };
        let text = [
            line(1, 1, "2.0"),
            line(2, 2, "2.0"),
            line(3, 2, "x"),
            line(4, 2, "2.0"),
            line(5, 3, "2.0"),
        ]
        .join("\n");
        let sc = crate::artifacts::scrapes::read_from(text.as_bytes()).expect("reads");
        assert!(!sc.every_bound_known());
        let alone = cumulative(&sc, "u", "h", |_| true);
        let times: Vec<u64> = alone.iter().map(|p| p.t).collect();
        assert_eq!(times, [1, 2, 4, 5]);
        let mut seen = Vec::new();
        let last = each_point(
            &sc,
            "u",
            &["h"],
            |_, _| true,
            |_, pts| {
                seen.push(at(pts, pts.len() - 1));
                true
            },
        );
        let want: Vec<Seen> = (0..alone.len()).map(|i| at(&alone, i)).collect();
        // Every row decoded, as the cumulative walk decodes them.
        assert_eq!(seen, want);
        assert_eq!(at(&last[0], last[0].len() - 1), want[3]);
    }

    /// Calls `f(run, scrapes, endpoint, its scrapes, k, family)` for every
    /// family (the `k`-th of the file's) and endpoint of every committed
    /// run with raw scrapes.
    fn each_series(
        mut f: impl FnMut(&std::path::Path, &ScrapesRead, &str, &[(&Scrape, u64)], usize, &str),
    ) {
        for dir in runs_with_scrapes() {
            let run = crate::artifacts::load(&dir);
            let Some(sc) = run.scrapes.as_ref() else {
                continue;
            };
            let names: Vec<&str> = (0..sc.family_count() as u32)
                .map(|id| sc.family_name(id))
                .collect();
            for (ep, scrapes) in sc.by_endpoint() {
                for (k, name) in names.iter().enumerate() {
                    f(&dir, sc, ep, &scrapes, k, name);
                }
            }
        }
    }

    #[test]
    fn counts_are_the_whole_series_times_and_counts() {
        let mut pairs = 0;
        each_series(|dir, sc, ep, _, k, name| {
            let alone = cumulative(sc, ep, name, |l| keep(k, l));
            let want: Vec<(u64, u64)> = alone.iter().map(|p| (p.t, p.count.to_bits())).collect();
            let got: Vec<(u64, u64)> = (counts(sc, ep, name, |l| keep(k, l)).into_iter())
                .map(|(t, c)| (t, c.to_bits()))
                .collect();
            assert_eq!(got, want, "{} {ep} {name}", dir.display());
            pairs += 1;
        });
        assert!(pairs > 1000, "{pairs}");
    }

    #[test]
    fn counts_to_a_line_are_the_whole_series_counts() {
        let (mut asked, mut found) = (0, 0);
        each_series(|dir, sc, ep, scrapes, k, name| {
            // Every 7th scrape's line, and one no scrape has (the last).
            let lines = (scrapes.iter().map(|(s, _)| s.line)).chain([u64::MAX]);
            let lines: Vec<u64> = lines.collect();
            let alone = cumulative(sc, ep, name, |l| keep(k, l));
            for &line in lines.iter().step_by(7).chain(lines.last()) {
                let want = alone.first().zip(alone.iter().find(|p| p.line == line));
                let want = want.map(|(a, b)| (a.count, b.count));
                let got = counts_to(sc, ep, name, |l| keep(k, l), line);
                let bits = |x: Option<(f64, f64)>| x.map(|(a, b)| (a.to_bits(), b.to_bits()));
                let here = format!("{} {ep} {name} line {line}", dir.display());
                assert_eq!(bits(got), bits(want), "{here}");
                asked += 1;
                found += usize::from(want.is_some());
            }
        });
        // Lines with a point and lines without one are both met.
        assert!(found > 1000 && asked - found > 100, "{asked} {found}");
    }

    #[test]
    fn a_family_the_sink_refuses_is_not_walked_further() {
        let dir = runs_with_scrapes().into_iter().next().expect("a run");
        let run = crate::artifacts::load(&dir);
        let sc = run.scrapes.as_ref().expect("raw scrapes");
        let ep = sc
            .by_endpoint()
            .keys()
            .next()
            .expect("an endpoint")
            .to_string();
        let names: Vec<&str> = (0..sc.family_count() as u32)
            .map(|id| sc.family_name(id))
            .collect();
        let mut calls = vec![0; names.len()];
        let mut refused_at = vec![None; names.len()];
        let last = each_point(
            sc,
            &ep,
            &names,
            |_, _| true,
            |k, pts| {
                calls[k] += 1;
                let wanted = k != 0 && calls[k] < 3;
                if !wanted {
                    refused_at[k] = pts.last().map(|p| p.line);
                }
                wanted
            },
        );
        // Each refused family's last point is the one its sink refused at
        // (the walk ends once every family is refused).
        for (pts, refused) in last.iter().zip(&refused_at) {
            if refused.is_some() {
                assert_eq!(pts.last().map(|p| p.line), *refused);
            }
        }
        assert!(refused_at.iter().filter(|x| x.is_some()).count() > 1);
        assert_eq!(calls[0], 1);
        assert!(calls[1..].iter().all(|&n| n <= 3), "{calls:?}");
        assert!(calls.contains(&3), "{calls:?}");
    }
}
