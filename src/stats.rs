//! Statistics, computed the way AIPerf computes its own summary so that
//! artifact-check's "all records" figures reproduce AIPerf's published ones:
//! percentiles by numpy's default linear interpolation over the exact values,
//! mean as the arithmetic mean. Intervals and tests come from statrs.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// FNV-1a, 64 bits: a hash that is the same on every machine and in every
/// release (finding fingerprints, shard assignment), unlike std's.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// numpy `percentile(values, q, method="linear")`; `values` need not be sorted.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q / 100.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * frac)
}

/// [`percentile`] of each of `qs` (ascending), by selection instead of a
/// sort (linear time), reordering `values`; equal to [`percentile`] of the
/// sorted values. Non-finite values must have been dropped.
pub fn percentiles_of<const N: usize>(values: &mut [f64], qs: [f64; N]) -> [Option<f64>; N] {
    let count = values.len();
    let mut out = [None; N];
    if count == 0 {
        return out;
    }
    // From the lowest rank up: after selecting the value at rank `lo`,
    // everything right of it is larger, so the next (higher) percentile is
    // selected within `values[lo + 1..]`, a shrinking range (about 1.6
    // passes over the values for p50, p90 and p99, where starting from p99
    // took about 2.9). A rank's upper neighbour is the smallest value right
    // of it.
    let mut start = 0;
    for (slot, q) in qs.into_iter().enumerate() {
        let rank = (q / 100.0) * (count - 1) as f64;
        let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
        if lo >= start {
            values[start..].select_nth_unstable_by(lo - start, f64::total_cmp);
            start = lo + 1;
        }
        // Else `lo` is the rank selected before, still in place.
        let at_lo = values[lo];
        let at_hi = if hi == lo {
            at_lo
        } else {
            values[lo + 1..]
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min)
        };
        out[slot] = Some(at_lo + (at_hi - at_lo) * (rank - lo as f64));
    }
    out
}

/// The median of the finite values of `values` (numpy's), by selection.
pub fn median_of(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    median_in(&mut Vec::new(), values)
}

/// [`median_of`], selecting in `scratch` (cleared first): a caller taking
/// many medians allocates, and faults in, one buffer, not one each.
pub fn median_in(scratch: &mut Vec<f64>, values: impl IntoIterator<Item = f64>) -> Option<f64> {
    scratch.clear();
    scratch.extend(values.into_iter().filter(|x| x.is_finite()));
    percentiles_of(scratch, [50.0])[0]
}

/// Sorts finite values ascending (non-finite values are dropped).
pub fn sorted(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    v.sort_unstable_by(f64::total_cmp);
    v
}

/// Arithmetic mean.
pub fn mean(values: &[f64]) -> Option<f64> {
    mean_of(values.iter().copied())
}

/// [`mean`] of values made by `values` (walked twice: counted, then summed
/// in order), for a caller that would otherwise copy them into a column.
pub fn mean_of(values: impl Iterator<Item = f64> + Clone) -> Option<f64> {
    let n = values.clone().count();
    (n > 0).then(|| values.sum::<f64>() / n as f64)
}

/// Sample variance (ddof = 1).
fn variance(values: &[f64], mean: f64) -> Option<f64> {
    (values.len() >= 2)
        .then(|| values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (values.len() - 1) as f64)
}

closed_set! {
    /// A statistic of a published metric, as AIPerf names its percentiles.
    pub enum Stat {
        /// Arithmetic mean (AIPerf's `avg`).
        Mean => "mean",
        /// Median.
        P50 => "p50",
        /// 90th percentile.
        P90 => "p90",
        /// 99th percentile.
        P99 => "p99",
    }
}

impl Stat {
    /// The statistic as `profile_export_aiperf.json` spells it (`avg` for
    /// the mean).
    pub fn aiperf(self) -> &'static str {
        match self {
            Stat::Mean => "avg",
            s => s.as_str(),
        }
    }
}

/// The summary statistics reported per metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub count: usize,
    /// Mean.
    pub mean: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
}

impl Summary {
    /// Summarises sorted values.
    pub fn of_sorted(sorted: &[f64]) -> Summary {
        Summary {
            count: sorted.len(),
            mean: mean(sorted),
            p50: percentile(sorted, 50.0),
            p90: percentile(sorted, 90.0),
            p99: percentile(sorted, 99.0),
        }
    }

    /// Summarises values in any order, reordering them: the percentiles by
    /// selection (linear time) instead of a sort, the mean summed in the
    /// given order. Equal to [`Summary::of_sorted`] of the sorted values up to
    /// the rounding of the mean. Non-finite values must have been dropped.
    pub fn of_values(values: &mut [f64]) -> Summary {
        let count = values.len();
        let mean = mean(values);
        let [p50, p90, p99] = percentiles_of(values, [50.0, 90.0, 99.0]);
        Summary {
            count,
            mean,
            p50,
            p90,
            p99,
        }
    }

    /// The named statistic.
    pub fn get(&self, stat: Stat) -> Option<f64> {
        match stat {
            Stat::Mean => self.mean,
            Stat::P50 => self.p50,
            Stat::P90 => self.p90,
            Stat::P99 => self.p99,
        }
    }
}

/// Bucket-estimated percentiles of a histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
}

impl Percentiles {
    /// The three percentiles of cumulative `buckets` by [`histogram_quantile`].
    pub fn of_buckets(buckets: &[(f64, f64)]) -> Percentiles {
        Percentiles {
            p50: histogram_quantile(0.5, buckets),
            p90: histogram_quantile(0.9, buckets),
            p99: histogram_quantile(0.99, buckets),
        }
    }

    /// Each percentile's bias of `self` over `base`, in percent.
    pub fn bias_pct(&self, base: &Percentiles) -> Percentiles {
        Percentiles {
            p50: bias_pct(self.p50, base.p50),
            p90: bias_pct(self.p90, base.p90),
            p99: bias_pct(self.p99, base.p99),
        }
    }

    /// `(statistic, value)` of each percentile, known or not.
    pub fn named(&self) -> [(Stat, Option<f64>); 3] {
        [
            (Stat::P50, self.p50),
            (Stat::P90, self.p90),
            (Stat::P99, self.p99),
        ]
    }

    /// `(statistic, value)` of the known percentiles.
    pub fn known(&self) -> impl Iterator<Item = (Stat, f64)> {
        self.named().into_iter().filter_map(|(n, v)| Some((n, v?)))
    }
}

/// A quantile estimated from cumulative histogram buckets the way
/// Prometheus' `histogram_quantile` does: `buckets` are `(le, cumulative
/// count)` ascending by `le`, the last one `+Inf`; the quantile is
/// interpolated linearly inside the bucket its rank falls in (from 0 for the
/// first bucket), and a rank in the `+Inf` bucket gives the highest finite
/// bound. `None` without observations or without a `+Inf` bucket.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let (&(last_le, total), finite) = buckets.split_last()?;
    if last_le != f64::INFINITY || total <= 0.0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let rank = q * total;
    let b = buckets.iter().position(|(_, c)| *c >= rank)?;
    if b == finite.len() {
        return finite.last().map(|x| x.0);
    }
    let (le, cum) = buckets[b];
    if b == 0 && le <= 0.0 {
        return Some(le);
    }
    let (start, below) = if b == 0 { (0.0, 0.0) } else { buckets[b - 1] };
    let in_bucket = cum - below;
    if in_bucket <= 0.0 {
        return Some(le);
    }
    Some(start + (le - start) * ((rank - below) / in_bucket))
}

/// A histogram bucket bound (`le`) as written by Prometheus and AIPerf:
/// `"0.005"`, `"+Inf"` (which `f64` parsing reads as infinity).
pub fn le_value(le: &str) -> Option<f64> {
    le.parse().ok()
}

/// A bucket bound written back the same way: `+Inf` for infinity.
pub fn le_text(le: f64) -> String {
    if le == f64::INFINITY {
        "+Inf".into()
    } else {
        le.to_string()
    }
}

/// Sums several series' exported buckets (`(le, cumulative count)`, `le`
/// `None` where its string did not parse), in order of bound; `None` if a
/// series has no buckets, a bound did not parse, or there is no `+Inf`
/// bucket.
pub fn merge_buckets<'a>(
    maps: impl IntoIterator<Item = Option<&'a [(Option<f64>, f64)]>>,
) -> Option<Vec<(f64, f64)>> {
    let mut all: Vec<(f64, f64)> = Vec::new();
    for map in maps {
        for &(le, c) in map? {
            all.push((le?, c));
        }
    }
    // By bound (stable: a bound's counts summed in series order), then each
    // bound's counts summed: N log N, where a search per bound was N^2.
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(all.len());
    for (le, c) in all {
        match out.last_mut() {
            Some(x) if x.0 == le => x.1 += c,
            _ => out.push((le, c)),
        }
    }
    (out.last()?.0 == f64::INFINITY).then_some(out)
}

/// Removes `n` observations from cumulative `buckets`, from the lowest
/// buckets up (`from_top` false) or from the highest down: the two extremes
/// of where `n` unknown observations could have been.
pub fn remove_observations(buckets: &[(f64, f64)], n: f64, from_top: bool) -> Vec<(f64, f64)> {
    let total = buckets.last().map_or(0.0, |x| x.1);
    let n = n.clamp(0.0, total);
    buckets
        .iter()
        .map(|&(le, cum)| {
            let c = if from_top {
                // The top n observations gone: nothing below changes until
                // the cumulative count passes total - n.
                cum.min(total - n)
            } else {
                (cum - n).max(0.0)
            };
            (le, c)
        })
        .collect()
}

/// Welch's t confidence interval for `mean(a) - mean(b)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DiffInterval {
    /// Difference of means.
    pub diff: f64,
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
    /// Confidence level (e.g. 0.95).
    pub level: f64,
}

impl DiffInterval {
    /// Whether the interval excludes zero (the difference is larger than noise).
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// Welch's interval for the difference of two independent samples' means;
/// `None` when either side has fewer than two values or no spread at all.
pub fn welch_interval(a: &[f64], b: &[f64], level: f64) -> Option<DiffInterval> {
    let (ma, mb) = (mean(a)?, mean(b)?);
    let (va, vb) = (variance(a, ma)?, variance(b, mb)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let se2 = va / na + vb / nb;
    let diff = ma - mb;
    if se2 <= 0.0 {
        return None;
    }
    let df = se2.powi(2) / ((va / na).powi(2) / (na - 1.0) + (vb / nb).powi(2) / (nb - 1.0));
    let t = StudentsT::new(0.0, 1.0, df)
        .ok()?
        .inverse_cdf(0.5 + level / 2.0);
    let half = t * se2.sqrt();
    Some(DiffInterval {
        diff,
        low: diff - half,
        high: diff + half,
        level,
    })
}

/// Percent by which `all` differs from `base`: `(all - base) / base * 100`.
pub fn bias_pct(all: Option<f64>, base: Option<f64>) -> Option<f64> {
    let (a, b) = (all?, base?);
    (b != 0.0).then(|| (a - b) / b * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4, 10], [50, 90, 99]) == [3.0, 7.6, 9.76]
        let v = sorted([10.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(percentile(&v, 50.0), Some(3.0));
        assert!((percentile(&v, 90.0).unwrap_or(0.0) - 7.6).abs() < 1e-12);
        assert!((percentile(&v, 99.0).unwrap_or(0.0) - 9.76).abs() < 1e-12);
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[5.0], 99.0), Some(5.0));
    }

    #[test]
    fn selection_summary_equals_the_sorted_one() {
        // Deterministic pseudo-random values with ties, of many lengths.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in (0..40).chain([99, 100, 101, 1000, 4097]) {
            let mut v: Vec<f64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ((x % 500) as f64) / 7.0 - 20.0
                })
                .collect();
            let sorted = sorted(v.clone());
            let want = Summary::of_sorted(&sorted);
            let got = Summary::of_values(&mut v);
            assert_eq!(
                (got.count, got.p50, got.p90, got.p99),
                (want.count, want.p50, want.p90, want.p99),
                "n = {n}"
            );
            match (got.mean, want.mean) {
                (Some(a), Some(b)) => assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "n = {n}"),
                (a, b) => assert_eq!(a, b),
            }
            let with_nan = v.iter().copied().chain([f64::NAN, f64::INFINITY]);
            assert_eq!(median_of(with_nan), percentile(&sorted, 50.0), "n = {n}");
        }
    }

    #[test]
    fn histogram_quantile_interpolates_like_prometheus() {
        // 10 observations: 2 in (0, 0.1], 6 in (0.1, 0.5], 2 in (0.5, 1].
        let b = [(0.1, 2.0), (0.5, 8.0), (1.0, 10.0), (f64::INFINITY, 10.0)];
        // rank 5 falls in the second bucket: 0.1 + 0.4 * (5 - 2) / 6 = 0.3.
        assert!((histogram_quantile(0.5, &b).unwrap_or(0.0) - 0.3).abs() < 1e-12);
        // rank 9.9 in the third: 0.5 + 0.5 * (9.9 - 8) / 2 = 0.975.
        assert!((histogram_quantile(0.99, &b).unwrap_or(0.0) - 0.975).abs() < 1e-12);
        // rank 1 in the first bucket, from 0: 0.1 * 1 / 2.
        assert!((histogram_quantile(0.1, &b).unwrap_or(0.0) - 0.05).abs() < 1e-12);
        // A rank in +Inf gives the highest finite bound.
        let inf = [(1.0, 1.0), (f64::INFINITY, 4.0)];
        assert_eq!(histogram_quantile(0.9, &inf), Some(1.0));
        assert_eq!(
            histogram_quantile(0.5, &[(1.0, 0.0), (f64::INFINITY, 0.0)]),
            None
        );
        assert_eq!(histogram_quantile(0.5, &[(1.0, 3.0)]), None);
    }

    #[test]
    fn buckets_merge_across_series_and_observations_come_off_either_end() {
        // In the order of the `le` strings, as the export's reader gives them.
        let a = [
            (Some(f64::INFINITY), 2.0),
            (Some(0.5), 1.0),
            (Some(1.0), 2.0),
        ];
        let b = a;
        let merged = merge_buckets([Some(&a[..]), Some(&b[..])]).expect("merged");
        assert_eq!(merged, vec![(0.5, 2.0), (1.0, 4.0), (f64::INFINITY, 4.0)]);
        assert_eq!(merge_buckets([Some(&a[..]), None]), None);
        // A bound that did not parse leaves the sum unknown.
        assert_eq!(
            merge_buckets([Some(&a[..]), Some(&[(None, 1.0)][..])]),
            None
        );
        // One off the top: the (0.5, 1] bucket loses it.
        assert_eq!(
            remove_observations(&merged, 1.0, true),
            vec![(0.5, 2.0), (1.0, 3.0), (f64::INFINITY, 3.0)]
        );
        // One off the bottom: the first bucket loses it.
        assert_eq!(
            remove_observations(&merged, 1.0, false),
            vec![(0.5, 1.0), (1.0, 3.0), (f64::INFINITY, 3.0)]
        );
    }

    #[test]
    fn welch_interval_separates_clearly_different_samples() {
        let a = [10.0, 11.0, 9.0, 10.5, 9.5];
        let b = [1.0, 1.2, 0.8, 1.1, 0.9];
        let ci = welch_interval(&a, &b, 0.95).expect("interval");
        assert!(ci.excludes_zero());
        let same = welch_interval(&a, &a, 0.95).expect("interval");
        assert!(!same.excludes_zero());
        assert!(welch_interval(&a, &[1.0], 0.95).is_none());
    }

    #[test]
    fn bias_is_relative_to_the_baseline() {
        assert_eq!(bias_pct(Some(12.0), Some(10.0)), Some(20.0));
        assert_eq!(bias_pct(Some(12.0), Some(0.0)), None);
        assert_eq!(bias_pct(None, Some(1.0)), None);
    }
}
