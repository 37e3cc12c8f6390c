//! One observer of one request-scoped metric held to the expected counts of
//! both phases: its rows, and the problem when a phase is off.

use std::collections::BTreeMap;

use super::classify::{classify, Classification};
use super::diagnose::Problem;
use super::evidence::Evidence;
use super::{Expected, Found, MetricRow, PercentileBounds};
use crate::artifacts::records::Phase;
use crate::artifacts::server_metrics::{Family, MetricType, Series};
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
    /// What series born inside each phase cost its delta (profiling, warmup).
    pub born: [f64; 2],
    /// What the windows, records and scrapes say about this observer.
    pub evidence: Evidence,
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

    /// The rows of both phases, and the problem when a phase is off.
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
        let deviation = |e: Option<Expected>, x: Option<f64>| Some(e?.deviation(x?));
        let (dp, dw) = (deviation(exp_p, found_p), deviation(exp_w, found_w));
        let (class_p, class_w, late) = self.classes(dp, dw, corrected.as_ref());
        let mut rows = Vec::new();
        for (phase, series, exp, fnd, d, class) in [
            (Phase::Profiling, &sp, exp_p, found_p, dp, class_p),
            (Phase::Warmup, &sw, exp_w, found_w, dw, class_w),
        ] {
            if phase == Phase::Warmup && !self.has_warmup {
                continue;
            }
            let here = corrected.as_ref().map(|c| c.get(phase).clone());
            rows.push(self.row(phase, series, (exp, fnd, d, class), here));
        }
        let off = |c: Classification| {
            c.is_mismatch()
                && !matches!(
                    c,
                    Classification::Reset | Classification::SeriesCreatedMidPhase
                )
        };
        if !off(class_p) && !off(class_w) {
            return (rows, None);
        }
        let profiling_row = rows.iter().find(|r| r.phase == Phase::Profiling);
        let problem = Problem {
            metric: f.name.clone(),
            observed_at: f.def.observed_at,
            endpoint: self.observer.endpoint.clone(),
            role: self.role.map(str::to_string),
            series: self.observer.key.clone(),
            classes: [class_p, class_w],
            exp_p,
            exp_w,
            found_p,
            found_w,
            dp,
            dw,
            found_avg_p: profiling_row.and_then(|r| r.found_avg),
            found_sum_p: profiling_row.and_then(|r| r.found_sum),
            corrected,
            percentile_bias_p: profiling_row.and_then(|r| r.percentile_bias_pct),
            percentile_worst_p: profiling_row.and_then(|r| {
                r.true_percentile_bounds
                    .as_ref()?
                    .worst_bias_pct(r.found_percentiles.as_ref()?)
            }),
            evidence: self.evidence.clone(),
            partition: None,
            late,
        };
        (rows, Some(problem))
    }

    /// Both phases' classifications, with what the evidence, a reset, a
    /// series born in the phase and (without a warmup split) the raw
    /// scrapes say; and the warmup observations placed after profiling
    /// started.
    fn classes(
        &self,
        dp: Option<f64>,
        dw: Option<f64>,
        corrected: Option<&Attribution>,
    ) -> (Classification, Classification, Option<u64>) {
        let (mut class_p, mut class_w) = classify(dp, dw, &self.evidence);
        // The raw scrapes tell a warmup observation published after
        // profiling started from one AIPerf's baseline merely predates.
        // Without a warmup split the mirror deficit cannot show; with one,
        // a late end-of-warmup scrape that counts a profiling observation
        // in its place hides it (warmup exact, profiling over).
        let mirrored = class_p == Classification::LateWarmupObservation;
        let late = corrected
            .filter(|_| self.evidence.no_split.is_some() || !mirrored)
            .map(|c| c.warmup_late)
            .filter(|&n| n > 0 && dp.is_some_and(|d| d > 0.0));
        if late.is_some() {
            class_p = Classification::LateWarmupObservation;
        }
        // A reset on the endpoint explains its phase's count (reported once,
        // as counter-reset).
        for (class, d, reset, born) in [
            (&mut class_p, dp, self.reset[0], self.born[0]),
            (&mut class_w, dw, self.reset[1], self.born[1]),
        ] {
            if reset && d.is_some_and(|d| d != 0.0) {
                *class = Classification::Reset;
            } else if d.is_some_and(|d| d < 0.0 && -d <= born + 0.5) {
                *class = Classification::SeriesCreatedMidPhase;
            }
        }
        (class_p, class_w, late)
    }

    /// One phase's row, with the export's sum, avg and bucket-estimated
    /// percentiles, and the repair.
    fn row(
        &self,
        phase: Phase,
        series: &[&Series],
        (exp, fnd, d, class): (Option<Expected>, Option<f64>, Option<f64>, Classification),
        corrected: Option<Corrected>,
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
            .then(|| merge_buckets(series.iter().map(|s| s.buckets.as_ref())))
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
        MetricRow {
            metric: self.found.name.clone(),
            framework: self.found.def.framework,
            observed_at: self.found.def.observed_at,
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
