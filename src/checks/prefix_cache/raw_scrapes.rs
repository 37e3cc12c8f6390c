//! The server's hit rate over the true profiling requests, from the raw
//! scrapes (`server_metrics_export.jsonl`) instead of AIPerf's phase split.
//!
//! AIPerf splits cumulative counters by the phase it tagged each scrape with;
//! a wrongly tagged baseline scrape moves the split (seed 001). Here the
//! headline formula's counters are split by the attribution engine
//! ([`attribution::by_span`]): every scrape interval's increments go to the
//! phase of the requests whose spans overlap it. With no ambiguous interval
//! the rate is exact; otherwise it is bounded by giving each ambiguous
//! interval wholly to profiling or not, whichever makes the ratio lowest or
//! highest (the extremes of a ratio of sums over such choices; splitting an
//! interval lies between).

use serde::Serialize;

use super::server::{counts_for, Roles, ServerRate};
use crate::artifacts::records::Record;
use crate::artifacts::scrapes::ScrapesRead;
use crate::model::attribution::{self, Exactness, Refusal, SpanSplit, Spans};

/// The headline formula recomputed over the true profiling requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RawScrapeRate {
    /// The formula, as in `server[]`.
    pub formula: String,
    /// `exact` or `bounded`.
    pub exactness: Exactness,
    /// The rate when exact (0..1).
    pub hit_rate: Option<f64>,
    /// Lowest rate the attribution allows.
    pub hit_rate_low: Option<f64>,
    /// Highest rate the attribution allows.
    pub hit_rate_high: Option<f64>,
    /// Scrape intervals (over every endpoint).
    pub intervals: usize,
    /// Intervals that could not be given to one phase.
    pub ambiguous_intervals: usize,
    /// Numerator and denominator counted for profiling with certainty.
    pub numerator_certain: f64,
    /// See `numerator_certain`.
    pub denominator_certain: f64,
}

/// Why the raw scrapes cannot give the rate.
pub type Why = String;

/// Recomputes the server rate `h` (a token-counter formula) from the raw
/// scrapes over the requests that really were profiling; `first_start` is
/// the earliest start of any of the `records`.
pub fn recompute(
    h: &ServerRate,
    scrapes: &ScrapesRead,
    records: &[Record],
    first_start: Option<u64>,
    slack_ns: u64,
    roles: &Roles,
) -> Result<RawScrapeRate, Why> {
    let Some((f, num_name, den_name)) = h.source else {
        return Err(format!("{} is not a counter formula", h.formula));
    };
    let (formula, role) = (h.formula.as_str(), h.role_filter.as_ref());
    if records.is_empty() {
        return Err("there are no records to attribute the increments to".into());
    }
    let mut endpoints: Vec<&str> = scrapes
        .scrapes
        .iter()
        .map(|s| scrapes.endpoint(s))
        .collect();
    endpoints.sort_unstable();
    endpoints.dedup();
    let spans = Spans::of(records, slack_ns);
    let mut split = SpanSplit::default();
    for ep in endpoints {
        let series = |name: &str, filter| {
            attribution::cumulative(scrapes, ep, name, |labels| {
                counts_for(Some(ep), labels, filter, role, roles)
            })
        };
        let (num, den) = (
            series(num_name, f.num_filter),
            series(den_name, f.den_filter),
        );
        match attribution::by_span(&num, &den, &spans, first_start, &mut split) {
            Ok(()) => {}
            Err(Refusal::LateBaseline) => {
                return Err(format!(
                    "the first raw scrape of {ep} comes after the first request started, so \
                     earlier increments cannot be placed"
                ))
            }
            Err(Refusal::Reset) => {
                return Err(format!(
                    "a counter of {formula} went down on {ep} (a reset)"
                ))
            }
        }
    }
    let SpanSplit {
        intervals,
        certain: (n_certain, d_certain),
        ambiguous,
    } = split;
    if intervals == 0 {
        return Err("fewer than two raw scrapes carry the formula's counters".into());
    }
    let extreme = |highest: bool| extreme_ratio(n_certain, d_certain, &ambiguous, highest);
    let exact = ambiguous.is_empty();
    let rate = |r: Option<f64>| r.filter(|x| (0.0..=1.0).contains(x));
    Ok(RawScrapeRate {
        formula: formula.to_string(),
        exactness: if exact {
            Exactness::Exact
        } else {
            Exactness::Bounded
        },
        hit_rate: if exact {
            rate((d_certain > 0.0).then(|| n_certain / d_certain))
        } else {
            None
        },
        hit_rate_low: rate(extreme(false)),
        hit_rate_high: rate(extreme(true)),
        intervals,
        ambiguous_intervals: ambiguous.len(),
        numerator_certain: n_certain,
        denominator_certain: d_certain,
    })
}

/// The lowest or highest `(n + sum of chosen n_i) / (d + sum of chosen d_i)`
/// over every choice of the optional `(n_i, d_i)`: take them in order of their
/// own ratio, best first, while each moves the total ratio the wanted way.
fn extreme_ratio(n: f64, d: f64, optional: &[(f64, f64)], highest: bool) -> Option<f64> {
    let mut items: Vec<(f64, f64)> = optional.to_vec();
    let own = |x: &(f64, f64)| {
        if x.1 > 0.0 {
            x.0 / x.1
        } else if x.0 > 0.0 {
            f64::INFINITY
        } else {
            0.0
        }
    };
    items.sort_by(|a, b| {
        let (ra, rb) = (own(a), own(b));
        if highest {
            rb.total_cmp(&ra)
        } else {
            ra.total_cmp(&rb)
        }
    });
    let (mut num, mut den) = (n, d);
    for x in items {
        let better = if den <= 0.0 {
            true
        } else {
            let now = num / den;
            let r = own(&x);
            if highest {
                r > now
            } else {
                r < now
            }
        };
        if !better {
            break;
        }
        num += x.0;
        den += x.1;
    }
    (den > 0.0).then(|| num / den)
}

#[cfg(test)]
mod tests {
    use super::extreme_ratio;

    #[test]
    fn extreme_ratio_takes_the_intervals_that_move_it() {
        // Certain 50/100; optional 0/50 (lowers) and 40/40 (raises).
        let opt = [(0.0, 50.0), (40.0, 40.0)];
        assert_eq!(extreme_ratio(50.0, 100.0, &opt, false), Some(50.0 / 150.0));
        assert_eq!(extreme_ratio(50.0, 100.0, &opt, true), Some(90.0 / 140.0));
        // Brute force over all subsets agrees.
        let opt = [(3.0, 10.0), (9.0, 10.0), (0.0, 4.0), (5.0, 5.0)];
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for mask in 0..16u32 {
            let (mut n, mut d) = (7.0, 20.0);
            for (i, x) in opt.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    n += x.0;
                    d += x.1;
                }
            }
            lo = lo.min(n / d);
            hi = hi.max(n / d);
        }
        let close = |a: Option<f64>, b: f64| (a.unwrap_or(f64::NAN) - b).abs() < 1e-12;
        assert!(close(extreme_ratio(7.0, 20.0, &opt, false), lo));
        assert!(close(extreme_ratio(7.0, 20.0, &opt, true), hi));
        // Nothing certain: the best single choice first.
        assert_eq!(
            extreme_ratio(0.0, 0.0, &[(1.0, 2.0), (2.0, 2.0)], true),
            Some(1.0)
        );
        assert_eq!(extreme_ratio(0.0, 0.0, &[], true), None);
    }
}
