//! The server's hit rate over the true profiling requests, from the raw
//! scrapes (`server_metrics_export.jsonl`) instead of AIPerf's phase split.
//!
//! AIPerf splits cumulative counters by the phase it tagged each scrape with;
//! a wrongly tagged baseline scrape moves the split (a user's report saw
//! published hit rates move by 1 to 6 points). Here the
//! headline formula's counters are split by the attribution engine
//! ([`attribution::BySpan`]): every scrape interval's increments go to the
//! phase of the requests whose spans overlap it. With no ambiguous interval
//! the rate is exact; otherwise it is bounded by the extremes of every way
//! an ambiguous interval's hits and queries can be shared between the
//! phases, each part with no more hits than queries ([`extreme_ratio`]).

use serde::Serialize;

use super::server::{counts_for, Roles, ServerRate};
use crate::artifacts::records::Record;
use crate::artifacts::scrapes::ScrapesRead;
use crate::model::attribution::{self, BySpan, Exactness, Refusal, SpanSplit, Spans};

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

/// Why the raw scrapes cannot give the rate: in words, and, when the
/// counters contradict themselves, where.
#[derive(Debug, Clone, PartialEq)]
pub struct Why {
    /// In words.
    pub text: String,
    /// The numerator rose above the denominator between two scrapes.
    pub contradiction: Option<Contradiction>,
}

/// Where the numerator of a formula rose above its denominator.
#[derive(Debug, Clone, PartialEq)]
pub struct Contradiction {
    /// The later scrape's line in the raw scrapes (1-based).
    pub line: u64,
    /// The scrape endpoint.
    pub endpoint: String,
    /// The numerator's family (the hits).
    pub numerator: String,
    /// Its rise between the two scrapes.
    pub rise: f64,
    /// The denominator's rise (the queries).
    pub denominator_rise: f64,
}

impl From<String> for Why {
    fn from(text: String) -> Why {
        Why {
            text,
            contradiction: None,
        }
    }
}

impl From<&str> for Why {
    fn from(text: &str) -> Why {
        Why::from(text.to_string())
    }
}

/// The requests the increments are placed by: the records, and the time
/// a warmup without records had finished by ([`Spans::with_unrecorded_warmup`]).
pub struct Requests<'a> {
    /// The records.
    pub records: &'a [Record],
    /// The earliest start of any of them.
    pub first_start: Option<u64>,
    /// [`crate::model::RunModel::unrecorded_warmup_until`].
    pub unrecorded_warmup_until: Option<u64>,
}

/// Recomputes the server rate `h` (a token-counter formula) from the raw
/// scrapes over the requests that really were profiling.
pub fn recompute(
    h: &ServerRate,
    scrapes: &ScrapesRead,
    requests: &Requests,
    slack_ns: u64,
    roles: &Roles,
) -> Result<RawScrapeRate, Why> {
    let (records, first_start) = (requests.records, requests.first_start);
    let Some((f, num_name, den_name)) = h.source else {
        return Err(format!("{} is not a counter formula", h.formula).into());
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
    // The intervals asked about end at the endpoints' scrape times.
    let times = (endpoints.iter())
        .flat_map(|ep| scrapes.of_endpoint(ep).into_iter().map(|(_, t)| t))
        .collect();
    let spans = Spans::of(records, slack_ns, times);
    let spans = match requests.unrecorded_warmup_until {
        Some(until) => spans.with_unrecorded_warmup(until.saturating_add(slack_ns)),
        None => spans,
    };
    let mut split = SpanSplit::default();
    let filters = [f.num_filter, f.den_filter];
    for ep in endpoints {
        // Both series in one walk over the endpoint's scrapes.
        let mut joined = BySpan::new(&spans, first_start, &mut split);
        attribution::each_point(
            scrapes,
            ep,
            &[num_name, den_name],
            |k, labels| counts_for(Some(ep), labels, filters[k], role, roles),
            |k, pts| pts.last().is_some_and(|p| joined.push(k, p)),
        );
        (joined.finish()).map_err(|r| refusal(r, ep, formula, num_name))?;
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

/// Why an endpoint's counters cannot be split.
fn refusal(r: Refusal, ep: &str, formula: &str, numerator: &str) -> Why {
    match r {
        Refusal::LateBaseline => format!(
            "the first raw scrape of {ep} comes after the first request started, so earlier \
             increments cannot be placed"
        )
        .into(),
        Refusal::Reset => format!("a counter of {formula} went down on {ep} (a reset)").into(),
        Refusal::AboveDenominator {
            line,
            numerator: rise,
            denominator,
        } => Why {
            text: format!(
                "on {ep}, {numerator} rose by {rise} but the denominator of {formula} by only \
                 {denominator} up to the scrape of line {line}: no server counts so"
            ),
            contradiction: Some(Contradiction {
                line,
                endpoint: ep.to_string(),
                numerator: numerator.to_string(),
                rise,
                denominator_rise: denominator,
            }),
        },
    }
}

/// The lowest or highest `(n + sum x_i) / (d + sum y_i)` the true split
/// can give, where each ambiguous interval's `(n_i, d_i)` holds a
/// profiling part `(x_i, y_i)` and a part of the other requests, each with
/// no more hits than queries (`x_i <= y_i`, `n_i - x_i <= d_i - y_i`): an
/// interval holds both phases' requests, in shares nothing tells. The
/// highest gives profiling only hits (`x_i = y_i = n_i`), the lowest only
/// misses (`x_i = 0`, `y_i = d_i - n_i`). Choosing whole intervals would
/// not bound it: a part's ratio can lie outside its interval's.
fn extreme_ratio(n: f64, d: f64, ambiguous: &[(f64, f64)], highest: bool) -> Option<f64> {
    let (mut num, mut den) = (n, d);
    for &(ni, di) in ambiguous {
        if highest {
            num += ni.max(0.0);
            den += ni.max(0.0);
        } else {
            den += (di - ni).max(0.0);
        }
    }
    (den > 0.0).then(|| num / den)
}

#[cfg(test)]
mod tests {
    use super::extreme_ratio;

    #[test]
    fn the_bounds_hold_every_split_of_the_ambiguous_intervals() {
        // Certain 50/100; an interval of 40 hits in 90 queries.
        assert_eq!(
            extreme_ratio(50.0, 100.0, &[(40.0, 90.0)], false),
            Some(50.0 / 150.0)
        );
        assert_eq!(
            extreme_ratio(50.0, 100.0, &[(40.0, 90.0)], true),
            Some(90.0 / 140.0)
        );
        // Brute force over integer splits of two intervals, each part with
        // no more hits than queries: every ratio lies inside the bounds,
        // and the bounds are reached.
        let (n, d) = (7.0, 20.0);
        let amb = [(3.0, 10.0), (4.0, 5.0)];
        let (lo, hi) = (
            extreme_ratio(n, d, &amb, false).expect("lo"),
            extreme_ratio(n, d, &amb, true).expect("hi"),
        );
        let (mut seen_lo, mut seen_hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let parts = |(ni, di): (f64, f64)| {
            let mut v = Vec::new();
            for x in 0..=ni as u32 {
                for y in 0..=di as u32 {
                    let (x, y) = (f64::from(x), f64::from(y));
                    if x <= y && ni - x <= di - y {
                        v.push((x, y));
                    }
                }
            }
            v
        };
        for a in parts(amb[0]) {
            for b in parts(amb[1]) {
                let r = (n + a.0 + b.0) / (d + a.1 + b.1);
                assert!(lo - 1e-12 <= r && r <= hi + 1e-12, "{r} outside {lo}..{hi}");
                seen_lo = seen_lo.min(r);
                seen_hi = seen_hi.max(r);
            }
        }
        assert!((seen_lo - lo).abs() < 1e-12 && (seen_hi - hi).abs() < 1e-12);
        // The case whole intervals get wrong (AIPerf 0.7.0's prefix-cache
        // run): the profiling part's ratio is above its interval's.
        let truth = (208.0 + 1872.0) / (518.0 + 2563.0);
        let amb = [(1872.0, 2814.0)];
        let lo = extreme_ratio(208.0, 518.0, &amb, false).expect("lo");
        let hi = extreme_ratio(208.0, 518.0, &amb, true).expect("hi");
        assert!(lo <= truth && truth <= hi, "{truth} outside {lo}..{hi}");
        assert_eq!(extreme_ratio(0.0, 0.0, &[], true), None);
    }
}
