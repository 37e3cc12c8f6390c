//! The range a phase's true bucket-estimated percentiles lie in when its
//! histogram holds extra observations.

use serde::Serialize;

use crate::stats::{remove_observations, Percentiles, Stat};

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
    pub fn of(buckets: &[(f64, f64)], delta: f64) -> Option<PercentileBounds> {
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
    pub fn worst_bias_pct(&self, found: &Percentiles) -> Option<(Stat, f64)> {
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
