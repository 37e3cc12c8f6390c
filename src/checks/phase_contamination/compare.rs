//! One observer of one request-scoped metric held to the expected counts of
//! both phases: its rows, and the problem when a phase is off.

use std::collections::BTreeMap;

use super::accounting::{account, Accounting, Share, UNBOUNDED};
use super::causes::{Inputs, Population};
use super::classify::Classification;
use super::diagnose::Problem;
use super::evidence::Evidence;
use super::{Cause, Expected, Found, MetricRow, PercentileBounds};
use crate::artifacts::records::Phase;
use crate::artifacts::server_metrics::{Family, MetricType, Series};
use crate::frameworks::ObservedAt;
use crate::model::attribution::{Attribution, Corrected, Exactness};
use crate::model::observers::{Labels, Observer};
use crate::stats::{merge_buckets, Percentiles};

/// One (metric, observer) job.
pub struct Comparison<'a> {
    pub found: &'a Found<'a>,
    pub observer: &'a Observer,
    /// The role of the observer's endpoint.
    pub role: Option<&'a str>,
    /// Whether there is a warmup phase.
    pub has_warmup: bool,
    /// Profiling, warmup.
    pub expected: [Option<Expected>; 2],
    /// Whether a reset on the observer's endpoint falls in each phase
    /// (profiling, warmup).
    pub reset: [bool; 2],
    /// In a phase with a reset: its reset-aware growth from the raw
    /// scrapes (count, sum).
    pub reset_growth: [Option<(f64, Option<f64>)>; 2],
    /// What series born inside each phase cost its delta (profiling, warmup).
    pub born: [f64; 2],
    /// What the windows, records and scrapes say about this observer.
    pub evidence: Evidence,
    /// The requests the records do not hold as successes.
    pub population: &'a Population<'a>,
    /// When the observer's endpoint observes the metric.
    pub at: ObservedAt,
}

/// Whether a cause moves observations of one phase into the other's
/// figures or out of them (a fault of the split), rather than being what
/// the server saw (a failed or cut request) or a loss reported on its own
/// (a reset, a series born mid-phase).
pub fn contaminates(c: Classification) -> bool {
    use Classification::*;
    matches!(
        c,
        LateWarmupObservation
            | ProfilingLostToWarmup
            | WarmupAbsorbed
            | OutOfOrderBaseline
            | CountedInBoth
            | UnexplainedExcess
            | UnexplainedDeficit
    )
}

/// Whether profiling is certainly contaminated: a remainder there, or a
/// boundary cause on profiling in the chosen combination and no
/// combination without one that explains the counts.
fn certainly_contaminated(
    acc: &Accounting<Classification>,
    terms: Vec<super::accounting::Term<Classification>>,
    dp: Option<i64>,
    dw: Option<i64>,
) -> bool {
    if acc.remainder[0] != 0 {
        return true;
    }
    let moved = acc
        .shares(0)
        .iter()
        .any(|s| s.count != 0 && contaminates(s.cause));
    let without: Vec<_> = terms
        .into_iter()
        .filter(|t| !(contaminates(t.cause) && t.effect[0] != 0))
        .collect();
    moved && !account(dp, dw, without).closes()
}

/// One phase's causes: the accounting's shares, and what it could not
/// explain as `unexplained_excess` or `unexplained_deficit`.
fn row_causes(acc: &Accounting<Classification>, i: usize, phase: Phase) -> Vec<Cause> {
    let mut out: Vec<Cause> = acc.shares(i).into_iter().filter(|s| s.count != 0).collect();
    let r = acc.remainder[i];
    if r != 0 {
        let (cause, what) = if r > 0 {
            (Classification::UnexplainedExcess, "more")
        } else {
            (Classification::UnexplainedDeficit, "fewer")
        };
        out.push(Share {
            cause,
            count: r,
            low: r,
            high: Some(r),
            evidence: format!(
                "{} {what} observation(s) in {phase} than its requests and every bounded cause \
                 can account for",
                r.abs()
            ),
        });
    }
    out
}

/// A row's classification: its one cause, `mixed` for several, `ok`
/// for none, `unknown` when its deviation is.
fn classification(d: Option<f64>, causes: &[Cause]) -> Classification {
    let moved: Vec<&Cause> = causes.iter().filter(|c| c.count != 0).collect();
    match (d, moved.as_slice()) {
        (None, _) => Classification::Unknown,
        (Some(_), []) => Classification::Ok,
        (Some(_), [one]) => one.cause,
        (Some(_), _) => Classification::Mixed,
    }
}

/// The observer's counts per partition, per phase (profiling, warmup): what
/// a control's partitions are compared with.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionCounts {
    /// Metric.
    pub metric: String,
    /// Endpoint (`None` when summed over several).
    pub endpoint: Option<String>,
    /// Per partition: its labels, and its counts.
    pub partitions: Vec<(Labels, [Option<f64>; 2])>,
}

impl Comparison<'_> {
    fn series_of<'f>(&self, fam: Option<&'f Family>) -> Vec<&'f Series> {
        fam.map(|f| {
            f.series
                .iter()
                .filter(|s| {
                    self.observer
                        .contains(s.endpoint_url.as_deref().unwrap_or(""), &s.labels)
                })
                .collect()
        })
        .unwrap_or_default()
    }

    /// The per-partition counts of both phases.
    pub fn partition_counts(&self) -> PartitionCounts {
        let f = self.found;
        let partitions = self
            .observer
            .partitions
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let c = |fam| self.observer.partition_count(i, fam);
                (p.labels.clone(), [c(f.profiling), c(f.warmup)])
            })
            .collect();
        PartitionCounts {
            metric: f.name.clone(),
            endpoint: self.observer.endpoint.clone(),
            partitions,
        }
    }

    /// The rows of both phases, and the problem when a phase is off: each
    /// phase's deviation from its successful requests, accounted for cause
    /// by cause ([`account`]).
    pub fn rows(&self, corrected: Option<Attribution>) -> (Vec<MetricRow>, Option<Problem>) {
        let f = self.found;
        let (sp, sw) = (self.series_of(f.profiling), self.series_of(f.warmup));
        // A family missing from a phase's section is unknown, not 0:
        // AIPerf omits `warmup_metrics` when it took no warmup scrape.
        let found_p = f.profiling.and_then(|fam| self.observer.count(Some(fam)));
        let found_w = match (self.has_warmup, f.warmup) {
            (true, Some(fam)) => self.observer.count(Some(fam)),
            _ => None,
        };
        let [exp_p, exp_w] = self.expected;
        let deviation = |e: Option<Expected>, x: Option<f64>| Some(x? - e?.min as f64);
        let (dp, dw) = (deviation(exp_p, found_p), deviation(exp_w, found_w));
        let terms = self.terms([found_p, found_w], corrected.as_ref());
        let acc = account(whole(dp), whole(dw), terms.clone());
        let certain = certainly_contaminated(&acc, terms, whole(dp), whole(dw));
        let mut rows = Vec::new();
        let mut causes: [Vec<Cause>; 2] = Default::default();
        let mut repaired = [false; 2];
        for (i, (phase, series, exp, fnd, d)) in [
            (Phase::Profiling, &sp, exp_p, found_p, dp),
            (Phase::Warmup, &sw, exp_w, found_w, dw),
        ]
        .into_iter()
        .enumerate()
        {
            if phase == Phase::Warmup && !self.has_warmup {
                continue;
            }
            let (row, mine, from_scrapes) =
                self.phase_row(i, phase, series, (exp, fnd, d), &acc, corrected.as_ref());
            causes[i] = mine;
            repaired[i] = from_scrapes;
            rows.push(row);
        }
        let off = |c: &Cause| {
            !matches!(
                c.cause,
                Classification::Reset | Classification::SeriesCreatedMidPhase
            )
        };
        if !causes.iter().flatten().any(off) {
            return (rows, None);
        }
        let profiling_row = rows.iter().find(|r| r.phase == Phase::Profiling);
        let problem = Problem {
            metric: f.name.clone(),
            observed_at: self.at,
            endpoint: self.observer.endpoint.clone(),
            role: self.role.map(str::to_string),
            series: self.observer.key.clone(),
            causes,
            ambiguous: acc.ambiguous,
            certain,
            exp_p,
            exp_w,
            found_p,
            found_w,
            dp,
            dw,
            found_avg_p: profiling_row.and_then(|r| r.found_avg),
            found_sum_p: profiling_row.and_then(|r| r.found_sum),
            corrected: profiling_row.and_then(|r| r.corrected.clone()),
            repaired: repaired[0],
            percentile_bias_p: profiling_row.and_then(|r| r.percentile_bias_pct),
            percentile_worst_p: profiling_row.and_then(|r| {
                r.true_percentile_bounds
                    .as_ref()?
                    .worst_bias_pct(r.found_percentiles.as_ref()?)
            }),
            no_split: self.evidence.no_split.clone(),
            partition: None,
        };
        (rows, Some(problem))
    }

    /// The causes the accounting weighs for this observer, with what
    /// bounds each.
    fn terms(
        &self,
        found: [Option<f64>; 2],
        corrected: Option<&Attribution>,
    ) -> Vec<super::accounting::Term<Classification>> {
        Inputs {
            framework: self.found.def.framework,
            at: self.at,
            expected: self.expected,
            evidence: &self.evidence,
            reset: self.reset,
            reset_growth: self.reset_growth,
            found,
            born: self.born,
            corrected,
            population: self.population,
        }
        .terms()
    }

    /// Phase `i`'s row with its causes, and whether its correction comes
    /// from the raw scrapes.
    fn phase_row(
        &self,
        i: usize,
        phase: Phase,
        series: &[&Series],
        (exp, fnd, d): (Option<Expected>, Option<f64>, Option<f64>),
        acc: &Accounting<Classification>,
        corrected: Option<&Attribution>,
    ) -> (MetricRow, Vec<Cause>, bool) {
        let causes = row_causes(acc, i, phase);
        let class = classification(d, &causes);
        // The raw-scrape repair places observations on successful records
        // only: where the server also observed unsuccessful requests, the
        // accounting's correction holds them.
        let unsuccessful = causes
            .iter()
            .any(|c| c.count != 0 && c.cause.is_unsuccessful_requests());
        let here = corrected
            .filter(|_| !unsuccessful)
            .map(|c| c.get(phase).clone());
        let from_scrapes = here.is_some();
        let mut row = self.row(phase, series, (exp, fnd, d, class), here, &causes);
        // A reset: the raw scrapes' reset-aware growth bounds the sum.
        if let (Some(c), Some((_, Some(grown)))) = (row.corrected.as_mut(), self.reset_growth[i]) {
            if c.sum.is_none() {
                c.sum_low = Some(c.sum_low.map_or(grown, |s| s.max(grown)));
            }
        }
        (row, causes, from_scrapes)
    }

    /// One phase's row, with the export's sum, avg and bucket-estimated
    /// percentiles, and the repair.
    fn row(
        &self,
        phase: Phase,
        series: &[&Series],
        (exp, fnd, d, class): (Option<Expected>, Option<f64>, Option<f64>, Classification),
        corrected: Option<Corrected>,
        causes: &[Cause],
    ) -> MetricRow {
        let hist = self.found.kind() == MetricType::Histogram;
        // No series in the phase's section: its sum is unknown, not 0.
        let sum: Option<f64> = (hist && !series.is_empty())
            .then(|| series.iter().map(|s| s.stats.sum.or(Some(0.0))).sum())
            .flatten();
        let found_avg = match (sum, fnd) {
            (Some(s), Some(c)) if c > 0.0 => Some(s / c),
            _ => None,
        };
        let found_buckets = (hist && !series.is_empty())
            .then(|| {
                merge_buckets(
                    series
                        .iter()
                        .map(|s| s.buckets.as_ref().map(|b| b.as_slice())),
                )
            })
            .flatten();
        let found_percentiles = found_buckets.as_deref().map(Percentiles::of_buckets);
        let exact_percentiles = corrected
            .as_ref()
            .filter(|c| c.exactness == Exactness::Exact)
            .and_then(|c| c.percentiles);
        let true_percentile_bounds = match (&found_buckets, d, exact_percentiles) {
            (Some(b), Some(d), None) => PercentileBounds::of(b, d),
            _ => None,
        };
        let corrected =
            corrected.or_else(|| accounted(exp?, causes, sum, found_buckets.as_deref()));
        MetricRow {
            metric: self.found.name.clone(),
            unit: self
                .found
                .profiling
                .or(self.found.warmup)
                .and_then(|f| f.unit.clone()),
            framework: self.found.def.framework,
            observed_at: self.at,
            endpoint: self
                .observer
                .endpoint
                .clone()
                .unwrap_or_else(|| "all".into()),
            role: self.role.map(str::to_string),
            series: self.observer.key.clone(),
            phase,
            expected_count: exp,
            found_count: fnd,
            delta: d,
            classification: class,
            causes: causes.to_vec(),
            found_sum: sum,
            found_avg,
            percentile_bias_pct: found_percentiles
                .zip(exact_percentiles)
                .map(|(f, c)| f.bias_pct(&c)),
            corrected,
            found_percentiles,
            true_percentile_bounds,
        }
    }
}

/// The corrected figures of a row whose causes moved anything: the count
/// is the phase's successful requests plus the unsuccessful ones the server
/// observed (the truth whatever crossed the boundary); the sum is the
/// export's without what came in from elsewhere (each observation inside
/// the histogram's occupied buckets) and with what went out (any value:
/// unbounded above).
fn accounted(
    exp: Expected,
    causes: &[Cause],
    found_sum: Option<f64>,
    buckets: Option<&[(f64, f64)]>,
) -> Option<Corrected> {
    if causes.iter().all(|c| c.count == 0) {
        return None;
    }
    let designed = |c: &&Cause| c.cause.is_unsuccessful_requests();
    let own: Vec<&Cause> = causes.iter().filter(designed).collect();
    let count = exp.min as i64 + own.iter().map(|c| c.count).sum::<i64>();
    let low = exp.min as i64 + own.iter().map(|c| c.low).sum::<i64>();
    let high = own.iter().try_fold(exp.min as i64, |a, c| {
        c.high.filter(|h| *h < UNBOUNDED).map(|h| a + h)
    });
    let moved: Vec<&Cause> = causes.iter().filter(|c| !designed(c)).collect();
    let came_in: i64 = moved.iter().map(|c| c.count.max(0)).sum();
    let went_out: i64 = moved.iter().map(|c| (-c.count).max(0)).sum();
    // The occupied buckets' outer edges bound each observation's value.
    let edges = buckets.and_then(|b| {
        let mut prev = (0.0, 0.0);
        let mut lowest = None;
        let mut highest = None;
        for &(le, n) in b {
            if n > prev.1 {
                lowest.get_or_insert(prev.0);
                highest = Some(le);
            }
            prev = (le, n);
        }
        Some((lowest?, highest?))
    });
    let (sum, sum_low, sum_high) = match (found_sum, edges) {
        (Some(s), _) if came_in == 0 && went_out == 0 => (Some(s), Some(s), Some(s)),
        (Some(s), Some((lo, hi))) => {
            let k = came_in as f64;
            let sum_low = Some(s - k * hi)
                .filter(|x| x.is_finite())
                .map(|x| x.max(0.0));
            let sum_high = (went_out == 0).then_some(s - k * lo.max(0.0));
            (None, sum_low, sum_high)
        }
        _ => (None, None, None),
    };
    let (count_low, count_high) = match high {
        Some(h) if h == low => (None, None),
        h => (Some(low.max(0) as u64), h.map(|h| h.max(0) as u64)),
    };
    Some(Corrected {
        count: count.max(0) as u64,
        count_low,
        count_high,
        sum,
        sum_low,
        sum_high,
        avg: sum.filter(|_| count > 0).map(|s| s / count as f64),
        exactness: if count_low.is_none() && sum.is_some() {
            Exactness::Exact
        } else {
            Exactness::Bounded
        },
        buckets: None,
        percentiles: None,
    })
}

/// The partition whose counts differ from the control's on the same
/// endpoint, when exactly one does: the series a finding names.
pub fn localise(problem: &PartitionCounts, control: &PartitionCounts) -> Option<Labels> {
    if problem.partitions.len() < 2 || problem.endpoint != control.endpoint {
        return None;
    }
    let of_control: BTreeMap<&Labels, &[Option<f64>; 2]> =
        control.partitions.iter().map(|(l, c)| (l, c)).collect();
    let mut off = Vec::new();
    for (labels, counts) in &problem.partitions {
        // The control's partition of the same partition labels.
        let theirs = of_control
            .iter()
            .find(|(l, _)| l.iter().all(|(k, v)| labels.get(k) == Some(v)) || *l == &labels)
            .map(|(_, c)| **c)?;
        if counts != &theirs {
            off.push(labels.clone());
        }
    }
    (off.len() == 1).then(|| off.remove(0))
}

/// A deviation in whole observations, within what the accounting's sums
/// hold without overflow (a count of 1e308 is not a count a server made).
fn whole(d: Option<f64>) -> Option<i64> {
    let cap = UNBOUNDED as f64;
    d.filter(|d| d.is_finite())
        .map(|d| d.round().clamp(-cap, cap) as i64)
}
