//! The walk of an endpoint's series from scrape to scrape
//! ([`ScrapesRead::walk_series`]): what the model's resets and births and
//! the state order read, without a visit per sample where a run of scrapes
//! keeps one layout.

use super::rows::{self, Layout};
use super::{Sample, Scrape, ScrapesRead};

impl ScrapesRead {
    /// Goes through `list` (one endpoint's scrapes, in the order a check
    /// reads them) and calls `visit(i, family, now, before)` for the
    /// samples of the families `keep` accepts (by id), `before` being the
    /// same series' sample in the last scrape of the list before `i` that
    /// had it and `remember` accepts (scrapes of one layout have the same
    /// numbers at a position, so `remember` must depend only on which
    /// numbers a sample has). A scrape whose layout differs from the one
    /// before it (the first, a family or series that comes or goes) has
    /// every sample visited, its series found by (family, label set);
    /// within a run of one layout every series is at its position in the
    /// scrape before, so only where a cumulative quantity fell by more than
    /// `fall` times `max(|before|, 1)` is a sample visited: a comparison of
    /// two columns of numbers, not a visit per sample. `fall` `None`: no
    /// sample within a run is visited (a caller that wants only the series
    /// that come, whose every visit within a run would have a `before`).
    pub fn walk_series<'a>(
        &'a self,
        list: &[&'a Scrape],
        keep: impl Fn(u32) -> bool,
        remember: impl Fn(&Sample<'a>) -> bool,
        fall: Option<f64>,
        mut visit: impl FnMut(usize, u32, Sample<'a>, Option<Sample<'a>>),
    ) {
        // The last row of each series, kept up to the end of the last run
        // of scrapes with one layout.
        let mut last: BySeries<Sample<'a>> = BySeries::default();
        // Per layout: the positions of the kept samples that have a
        // cumulative quantity, with their families.
        let mut counted: std::collections::HashMap<u32, Counted, foldhash::fast::RandomState> =
            Default::default();
        let a = self.store.cumulatives();
        let mut prev: Option<&Scrape> = None;
        for (i, s) in list.iter().enumerate() {
            let layout = self.store.layout(s.layout);
            match (prev, fall) {
                (Some(p), None) if p.layout == s.layout => {}
                (Some(p), Some(fall)) if p.layout == s.layout => {
                    let c = (counted.entry(s.layout))
                        .or_insert_with(|| Counted::of(layout, &keep, HAS_CUMULATIVE));
                    let (now, before) = (s.first_row as usize, p.first_row as usize);
                    c.falls(a, (now, before), fall, |k, family| {
                        let tag = layout.rows[k];
                        let sample = |row: usize| Sample {
                            store: &self.store,
                            row: row as u32,
                            tag,
                        };
                        let y = sample(before + k);
                        visit(i, family, sample(now + k), remember(&y).then_some(y));
                    });
                }
                _ => {
                    for g in layout.groups.iter().filter(|g| keep(g.0)) {
                        for x in self.samples_in(s, g) {
                            let before = last.get(&(g.0, x.labels_id())).copied();
                            visit(i, g.0, x, before);
                        }
                    }
                }
            }
            // The end of a run of one layout: its last scrape's series, for
            // the next scrape (of another layout) to find.
            if list.get(i + 1).is_some_and(|n| n.layout != s.layout) {
                self.remember(s, &keep, &remember, &mut last);
            }
            prev = Some(s);
        }
    }

    /// Notes each series of `s` (that `remember` accepts) as last seen there.
    fn remember<'a>(
        &'a self,
        s: &'a Scrape,
        keep: &impl Fn(u32) -> bool,
        remember: &impl Fn(&Sample<'a>) -> bool,
        last: &mut BySeries<Sample<'a>>,
    ) {
        for g in self.store.layout(s.layout).groups.iter() {
            if keep(g.0) {
                for x in self.samples_in(s, g).filter(|x| remember(x)) {
                    last.insert((g.0, x.labels_id()), x);
                }
            }
        }
    }
}

/// A layout's positions that [`ScrapesRead::walk_series`] and the state
/// order compare: runs of consecutive rows (first row, length), and the
/// family of each position, in the runs' order.
pub(super) struct Counted {
    runs: Vec<(u32, u32)>,
    families: Vec<u32>,
}

impl Counted {
    /// The positions of `layout`'s samples of the families `keep` accepts
    /// that have one of the numbers `wanted` (position flags: a cumulative
    /// quantity is a count or a value, [`HAS_CUMULATIVE`]).
    pub(super) fn of(layout: &Layout, keep: &impl Fn(u32) -> bool, wanted: u32) -> Counted {
        let mut families = Vec::new();
        let positions = (layout.groups.iter().filter(|g| keep(g.0)))
            .flat_map(|g| (g.1..g.2).map(move |k| (k, g.0)))
            .filter(|&(k, _)| rows::flags_of(layout.rows[k as usize]) & wanted != 0)
            .map(|(k, family)| {
                families.push(family);
                k
            });
        Counted {
            runs: runs(positions),
            families,
        }
    }

    /// Calls `fallen(position, family)` for each position whose number in
    /// the scrape whose rows start at `now` of column `a` [`fell`] from the
    /// one in the scrape at `before`, in position order.
    fn falls(
        &self,
        a: &[f64],
        (now, before): (usize, usize),
        fall: f64,
        mut fallen: impl FnMut(usize, u32),
    ) {
        let mut at = 0;
        for &(k0, len) in &self.runs {
            let (k0, len) = (k0 as usize, len as usize);
            let (nv, bv) = (&a[now + k0..][..len], &a[before + k0..][..len]);
            if any_fell(nv, bv, fall) {
                for (j, (&v, &b)) in nv.iter().zip(bv).enumerate() {
                    if fell(v, b, fall) {
                        fallen(k0 + j, self.families[at + j]);
                    }
                }
            }
            at += len;
        }
    }

    /// How many positions [`fell`] from the scrape whose rows start at
    /// `before` of column `a` to the one at `now`: every pair compared,
    /// without a branch per pair.
    pub(super) fn count_falls(&self, a: &[f64], (now, before): (usize, usize), fall: f64) -> usize {
        let mut n = 0;
        for &(k0, len) in &self.runs {
            let (k0, len) = (k0 as usize, len as usize);
            let (nv, bv) = (&a[now + k0..][..len], &a[before + k0..][..len]);
            n += (nv.iter().zip(bv))
                .map(|(&v, &b)| usize::from(fell(v, b, fall)))
                .sum::<usize>();
        }
        n
    }
}

/// The position flags of a cumulative quantity: a count or a value.
pub(super) const HAS_CUMULATIVE: u32 = rows::HAS_COUNT | rows::HAS_VALUE;

/// Ascending positions as runs of consecutive ones, (first, length): a run
/// is compared as two slices of the numbers column, without a lookup of
/// each position in a list.
fn runs(positions: impl IntoIterator<Item = u32>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for k in positions {
        match out.last_mut() {
            Some((first, len)) if *first + *len == k => *len += 1,
            _ => out.push((k, 1)),
        }
    }
    out
}

/// Whether `v` fell from `b` by more than `fall` times `max(|b|, 1)`: the
/// fall [`ScrapesRead::walk_series`] visits within a run of one layout,
/// and the one a visitor tells among the samples of a layout change.
#[inline(always)]
pub fn fell(v: f64, b: f64, fall: f64) -> bool {
    v < b - fall * b.abs().max(1.0)
}

/// Whether any of `now` fell from the same position of `before` ([`fell`]):
/// every pair compared, without a branch per pair (falls are rare: the
/// pairs of a run are then gone through one by one).
#[inline(always)]
fn any_fell(now: &[f64], before: &[f64], fall: f64) -> bool {
    now.iter()
        .zip(before)
        .fold(false, |any, (&v, &b)| any | fell(v, b, fall))
}

/// Per series (family id, label set id): foldhash.
type BySeries<V> = std::collections::HashMap<(u32, u32), V, foldhash::fast::RandomState>;

#[cfg(test)]
mod tests {
    use super::super::{committed_scrape_files, read_from};
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn runs_join_consecutive_positions() {
        assert_eq!(runs([]), vec![]);
        assert_eq!(runs([4]), vec![(4, 1)]);
        assert_eq!(
            runs([0, 1, 2, 5, 6, 9, 11, 12]),
            vec![(0, 3), (5, 2), (9, 1), (11, 2)]
        );
    }

    /// The falls the walk finds by comparing columns within runs of one
    /// layout are those a visit of every sample finds (each series against
    /// its sample in the last scrape that had it), on every committed
    /// file's endpoints, at three thresholds; without a threshold the walk
    /// visits the scrapes whose layout changed, and only those, as with one.
    #[test]
    fn the_walk_finds_the_falls_a_visit_of_every_sample_finds() {
        let mut falls = 0;
        for path in committed_scrape_files() {
            let Ok(read) = std::fs::File::open(&path).map(read_from) else {
                continue;
            };
            let read = read.expect("raw scrapes");
            for list in read.by_endpoint().values() {
                let scrapes: Vec<&Scrape> = list.iter().map(|(s, _)| *s).collect();
                let changed = |i: usize| i == 0 || scrapes[i - 1].layout != scrapes[i].layout;
                for fall in [0.0, 1e-9, 0.5] {
                    let mut walked = Vec::new();
                    let mut at_changes = Vec::new();
                    read.walk_series(
                        &scrapes,
                        |_| true,
                        |_| true,
                        Some(fall),
                        |i, id, x, b| {
                            if changed(i) {
                                at_changes.push((i, id, x.row));
                            }
                            let before = b.and_then(|b| b.cumulative());
                            if let (Some(v), Some(b)) = (x.cumulative(), before) {
                                if fell(v, b, fall) {
                                    walked.push((i, id, x.row));
                                }
                            }
                        },
                    );
                    // Every sample of every scrape, against its series' last.
                    let mut last: BTreeMap<(u32, u32), Option<f64>> = BTreeMap::new();
                    let mut visited = Vec::new();
                    for (i, s) in scrapes.iter().enumerate() {
                        for g in &read.store.layout(s.layout).groups {
                            for x in read.samples_in(s, g) {
                                let before = last.insert((g.0, x.labels_id()), x.cumulative());
                                if let (Some(v), Some(Some(b))) = (x.cumulative(), before) {
                                    if fell(v, b, fall) {
                                        visited.push((i, g.0, x.row));
                                    }
                                }
                            }
                        }
                    }
                    walked.sort_unstable();
                    visited.sort_unstable();
                    assert_eq!(walked, visited, "{} at {fall}", path.display());
                    falls += walked.len();
                    let mut only_changes = Vec::new();
                    read.walk_series(
                        &scrapes,
                        |_| true,
                        |_| true,
                        None,
                        |i, id, x, _| {
                            only_changes.push((i, id, x.row));
                        },
                    );
                    assert_eq!(only_changes, at_changes, "{}", path.display());
                }
            }
        }
        assert!(falls > 100, "{falls} falls");
    }
}
