//! Diagnosis: a mismatched observer turned into findings that name the
//! cause, the evidence for it and the size of the effect.

use super::classify::Classification;
use super::{
    Cause, Expected, Windows, COUNTED_IN_BOTH, FAILED_REQUEST_OBSERVED, LATE_WARMUP_OBSERVATION,
    OUT_OF_ORDER_BASELINE, PROFILING_LOST_TO_WARMUP, REQUEST_WITHOUT_RECORD, UNEXPLAINED_DEFICIT,
    UNEXPLAINED_EXCESS, WARMUP_ABSORBED,
};
use crate::artifacts::records::Phase;
use crate::artifacts::server_metrics;
use crate::findings::{Code, Finding, Moved, Severity, Unit};
use crate::frameworks::ObservedAt;
use crate::model::attribution::Corrected;
use crate::model::observers::Labels;
use crate::stats::{bias_pct, Percentiles, Stat};

/// A mismatched observer, turned into findings.
pub struct Problem {
    /// Metric name.
    pub metric: String,
    /// When the server observes it.
    pub observed_at: ObservedAt,
    /// The endpoint, when the observer lives on one.
    pub endpoint: Option<String>,
    /// The endpoint's role, if any.
    pub role: Option<String>,
    /// The labels singling the observer out.
    pub series: Labels,
    /// Each phase's causes (profiling, warmup), signed.
    pub causes: [Vec<Cause>; 2],
    /// Whether several equally parsimonious combinations fit.
    pub ambiguous: bool,
    /// Whether every combination that explains the counts moves profiling
    /// observations across the boundary (or leaves a remainder there).
    pub certain: bool,
    /// Expected profiling count.
    pub exp_p: Option<Expected>,
    /// Expected warmup count.
    pub exp_w: Option<Expected>,
    /// Profiling count in the export.
    pub found_p: Option<f64>,
    /// Warmup count in the export.
    pub found_w: Option<f64>,
    /// Profiling deviation.
    pub dp: Option<f64>,
    /// Warmup deviation.
    pub dw: Option<f64>,
    /// Profiling avg in the export.
    pub found_avg_p: Option<f64>,
    /// Profiling sum in the export.
    pub found_sum_p: Option<f64>,
    /// The profiling row's corrected figures.
    pub corrected: Option<Corrected>,
    /// Whether they come from the raw scrapes.
    pub repaired: bool,
    /// Bias of the profiling bucket-estimated percentiles over the exactly
    /// repaired ones.
    pub percentile_bias_p: Option<Percentiles>,
    /// Without an exact repair: the largest bias the profiling percentiles
    /// can have over the truth inside their bounds.
    pub percentile_worst_p: Option<(Stat, f64)>,
    /// The AIPerf version, when it has no warmup split.
    pub no_split: Option<String>,
    /// The one partition (e.g. `engine="1"`) whose counts differ from the
    /// control's, when the control can tell.
    pub partition: Option<Labels>,
}

/// A sentence's first letter in upper case.
fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn range(e: Option<Expected>) -> String {
    match e {
        Some(e) if e.min == e.max => e.min.to_string(),
        Some(e) => format!("{}-{}", e.min, e.max),
        None => "?".into(),
    }
}

fn num(x: Option<f64>) -> String {
    x.map(|v| format!("{v}")).unwrap_or_else(|| "?".into())
}

/// The effect names of the bucket-estimated percentiles: exact bias after an
/// exact repair, otherwise the worst case inside the bounds.
const PERCENTILE_EFFECTS: [(Stat, &str, &str); 3] = [
    (Stat::P50, "profiling_p50_bias", "profiling_p50_bias_up_to"),
    (Stat::P90, "profiling_p90_bias", "profiling_p90_bias_up_to"),
    (Stat::P99, "profiling_p99_bias", "profiling_p99_bias_up_to"),
];

/// What every finding of one problem says besides its cause.
struct Context {
    /// `metric on endpoint (role r) {series}`.
    name: String,
    /// The split, in words.
    split: String,
    /// Every cause with its size, in words.
    ledger: String,
    control_note: String,
    repair: String,
}

/// The code of a cause's finding; `None` for the losses reported on their
/// own (`counter-reset`, `series-created-mid-phase`).
fn code_of(c: Classification) -> Option<Code> {
    use Classification::*;
    Some(match c {
        LateWarmupObservation => LATE_WARMUP_OBSERVATION,
        ProfilingLostToWarmup => PROFILING_LOST_TO_WARMUP,
        WarmupAbsorbed => WARMUP_ABSORBED,
        OutOfOrderBaseline => OUT_OF_ORDER_BASELINE,
        CountedInBoth => COUNTED_IN_BOTH,
        FailedRequest => FAILED_REQUEST_OBSERVED,
        RequestWithoutRecord => REQUEST_WITHOUT_RECORD,
        UnexplainedExcess => UNEXPLAINED_EXCESS,
        UnexplainedDeficit => UNEXPLAINED_DEFICIT,
        _ => return None,
    })
}

/// A cause's share in words: `+1 late warmup observation (0 to +2)`.
fn share_text(c: &Cause) -> String {
    let name = c.cause.as_str().replace('_', " ");
    let range = match c.high {
        Some(h) if h == c.low => String::new(),
        Some(h) => format!(" ({:+} to {:+})", c.low, h),
        None => format!(" ({:+} or more)", c.low),
    };
    format!("{:+} {name}{range}", c.count)
}

impl Problem {
    /// Whether one cause moved its counts.
    pub fn single_cause(&self) -> bool {
        let mut moved = self
            .causes
            .iter()
            .flatten()
            .filter(|c| c.count != 0)
            .map(|c| c.cause);
        let first = moved.next();
        first.is_some() && moved.all(|c| Some(c) == first)
    }

    /// The findings this mismatch makes: one per cause, with its size and
    /// the whole accounting.
    pub fn findings(&self, control: Option<&str>, w: &Windows) -> Vec<Finding> {
        let cx = self.context(control);
        let overlap = w.overlap_ms.filter(|o| *o > 0.0);
        let mut seen: Vec<Classification> = Vec::new();
        for c in self.causes.iter().flatten() {
            if c.count != 0 && !seen.contains(&c.cause) {
                seen.push(c.cause);
            }
        }
        seen.into_iter()
            .filter_map(|cause| {
                let code = code_of(cause)?;
                let [p, w] = [0, 1].map(|i| {
                    self.causes[i]
                        .iter()
                        .find(|c| c.cause == cause)
                        .map_or(0, |c| c.count)
                });
                let evidence = self.causes.iter().flatten().find(|c| c.cause == cause);
                let evidence = evidence.map(|c| c.evidence.as_str()).unwrap_or("");
                let what = self.sentence(cause, p, w, evidence, overlap);
                let severity = match cause {
                    _ if cause.is_unsuccessful_requests() => Severity::Info,
                    _ if p != 0 && self.certain => code.severity(),
                    _ => Severity::Warning.min(code.severity()),
                };
                Some(
                    self.finding(&cx, code, what, severity)
                        .moves_all(self.moved(p != 0, w != 0)),
                )
            })
            .collect()
    }

    /// What one cause did, in words.
    fn sentence(
        &self,
        cause: Classification,
        p: i64,
        w: i64,
        evidence: &str,
        overlap: Option<f64>,
    ) -> String {
        use Classification::*;
        let at = self.observed_at.as_str();
        let k = p.abs().max(w.abs());
        match cause {
            LateWarmupObservation => match &self.no_split {
                Some(v) => format!(
                    "{k} warmup observation(s) were counted in profiling (this metric is \
                     observed at {at}; AIPerf {v} has no warmup split): {evidence}"
                ),
                None => format!(
                    "{k} warmup observation(s) published after the end-of-warmup scrape were \
                     counted in profiling (this metric is observed at {at}): {evidence}"
                ),
            },
            ProfilingLostToWarmup => {
                let why = overlap
                    .map(|o| {
                        format!("; the warmup window closes {o:.1} ms after profiling started")
                    })
                    .unwrap_or_default();
                format!(
                    "{k} profiling observation(s) (observed at {at}) were published before the \
                     end-of-warmup scrape and counted in warmup{why}"
                )
            }
            WarmupAbsorbed | OutOfOrderBaseline => format!(
                "profiling counts {k} warmup observation(s) too (observed at {at}): {evidence}"
            ),
            CountedInBoth => format!(
                "warmup counts {k} profiling observation(s) too (observed at {at}; profiling \
                 counts them as well): {evidence}. Only the warmup figures are wrong"
            ),
            FailedRequest => format!(
                "{k} observation(s) are of requests that ended without success, counted as the \
                 framework does: {evidence}. The figures hold what the server saw"
            ),
            RequestWithoutRecord => format!(
                "{k} observation(s) are of requests no record holds: {evidence}. The figures \
                 hold what the server saw"
            ),
            UnexplainedExcess => {
                let phase = if p > 0 {
                    Phase::Profiling
                } else {
                    Phase::Warmup
                };
                let cause = match overlap {
                    Some(o) => format!(
                        "the warmup window closes {o:.1} ms after profiling starts, but the \
                         requests and scrapes cannot account for this many (foreign traffic, \
                         or observations counted twice)"
                    ),
                    None => "foreign traffic reached the server, or the same observations \
                             were counted twice"
                        .into(),
                };
                format!("{phase} has {k} more observation(s) than its requests and every bounded cause account for: {cause}")
            }
            _ => {
                let phase = if p < 0 {
                    Phase::Profiling
                } else {
                    Phase::Warmup
                };
                format!(
                    "{phase} has {k} fewer observation(s) than its requests and every bounded \
                     cause account for: observations published after the final scrape, \
                     requests the server never counted, or a counter reset"
                )
            }
        }
    }

    /// The labels a finding names: the partition the control singles out,
    /// else the observer's.
    fn named_series(&self) -> Labels {
        let mut l = self.series.clone();
        if let Some(p) = &self.partition {
            l.remove("replica");
            l.extend(p.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        l
    }

    /// Every cause with its size, in words: ` Accounted for: profiling +2 =
    /// +1 late warmup observation, ...`.
    fn ledger(&self) -> String {
        let phase_ledger = |i: usize, name: &str, d: Option<f64>| -> Option<String> {
            let d = d?;
            let parts: Vec<String> = self.causes[i].iter().map(share_text).collect();
            (!parts.is_empty()).then(|| format!("{name} {d:+} = {}", parts.join(", ")))
        };
        let mut ledger: Vec<String> = [
            phase_ledger(0, "profiling", self.dp),
            phase_ledger(1, "warmup", self.dw),
        ]
        .into_iter()
        .flatten()
        .collect();
        if self.ambiguous {
            ledger
                .push("several combinations fit; the ranges say how far each cause can go".into());
        }
        if ledger.is_empty() {
            String::new()
        } else {
            format!(" Accounted for: {}.", ledger.join("; "))
        }
    }

    fn context(&self, control: Option<&str>) -> Context {
        let mut name = self.metric.clone();
        if let Some(ep) = &self.endpoint {
            name.push_str(&format!(" on {ep}"));
        }
        if let Some(r) = &self.role {
            name.push_str(&format!(" ({r})"));
        }
        let series = self.named_series();
        if !series.is_empty() {
            name.push_str(&format!(" {}", crate::text::labels(&series)));
        }
        let control_note = match control {
            Some(c) if c != self.metric => format!(
                " {c} splits exactly (control), so the request counts are right and the \
                 mismatch is this metric's{}.",
                if self.partition.is_some() {
                    ", on this series only"
                } else {
                    ""
                }
            ),
            _ => String::new(),
        };
        let signed = |d: Option<f64>| d.map(|d| format!(" ({d:+})")).unwrap_or_default();
        let split = format!(
            "profiling holds {} observations for {} profiling requests{}, warmup {} for {}{}",
            num(self.found_p),
            range(self.exp_p),
            signed(self.dp),
            num(self.found_w),
            range(self.exp_w),
            signed(self.dw)
        );
        let ledger = self.ledger();
        let repair = self
            .corrected
            .as_ref()
            .map(|c| {
                let count = match (c.count_low, c.count_high) {
                    (Some(lo), Some(hi)) => format!("{} ({lo}-{hi})", c.count),
                    (Some(lo), None) => format!("{} ({lo} or more)", c.count),
                    _ => c.count.to_string(),
                };
                if self.repaired {
                    format!(
                        " Repaired from the raw scrapes ({}): profiling {count} observations{}.",
                        c.exactness,
                        c.avg.map(|a| format!(" (avg {a:.6})")).unwrap_or_default(),
                    )
                } else {
                    format!(" Corrected profiling count: {count}.")
                }
            })
            .unwrap_or_default();
        Context {
            name,
            split,
            ledger,
            control_note,
            repair,
        }
    }

    /// The figures a cause that moved profiling (`p`) or warmup (`w`)
    /// moves: the count, and a histogram's sum and avg, with their
    /// corrected values where the accounting or the repair gives them.
    fn moved(&self, p: bool, w: bool) -> Vec<Moved> {
        let ep = self.endpoint.clone();
        let series = Some(crate::text::labels(&self.series));
        let mut out = Vec::new();
        if p {
            let c = self.corrected.as_ref();
            let count = c.map(|c| c.count as f64);
            let (lo, hi) = (
                c.and_then(|c| c.count_low).map(|x| x as f64),
                c.and_then(|c| c.count_high).map(|x| x as f64),
            );
            out.push(
                Moved::new(self.metric.clone(), "count", self.found_p, count)
                    .expected(self.exp_p.map(|e| e.min as f64))
                    .bounds(lo, hi)
                    .server("profiling", ep.clone(), series.clone()),
            );
            if self.found_sum_p.is_some() {
                let sum = c.and_then(|c| c.sum);
                let bounded = c.is_some_and(|c| c.count_low.is_some() || c.sum_low.is_some());
                let (slo, shi) = if bounded {
                    (c.and_then(|c| c.sum_low), c.and_then(|c| c.sum_high))
                } else {
                    (None, None)
                };
                out.push(
                    Moved::new(self.metric.clone(), "sum", self.found_sum_p, sum)
                        .expected(None)
                        .bounds(slo, shi)
                        .server("profiling", ep.clone(), series.clone()),
                );
                // The avg of an exact count over a bounded sum is bounded
                // the same way.
                let exact_count = c.filter(|c| c.count_low.is_none() && c.count > 0);
                let per = |x: Option<f64>| Some(x? / exact_count?.count as f64);
                let (avg, alo, ahi) = if bounded {
                    let (lo, hi) = (per(slo), per(shi));
                    let point = lo.filter(|l| Some(*l) == hi);
                    (point, lo, hi)
                } else {
                    (c.and_then(|c| c.avg), None, None)
                };
                out.push(
                    Moved::new(self.metric.clone(), "avg", self.found_avg_p, avg)
                        .expected(None)
                        .bounds(alo, ahi)
                        .server("profiling", ep.clone(), series.clone()),
                );
            }
        }
        if w {
            out.push(
                Moved::new(self.metric.clone(), "count", self.found_w, None)
                    .expected(self.exp_w.map(|e| e.min as f64))
                    .server("warmup", ep, series),
            );
        }
        out
    }

    /// One finding: the cause `what`, the split and its effects.
    fn finding(&self, cx: &Context, code: Code, what: String, severity: Severity) -> Finding {
        let (dp, dw) = (self.dp.unwrap_or(0.0), self.dw.unwrap_or(0.0));
        let expected = serde_json::json!({"profiling": self.exp_p.map(|e| e.min), "warmup": self.exp_w.map(|e| e.min)});
        let found = serde_json::json!({"profiling": self.found_p, "warmup": self.found_w});
        let mut f = Finding::new(
            code,
            format!(
                "{}. {}: {}.{}{}{}",
                upper_first(&what),
                cx.name,
                cx.split,
                cx.ledger,
                cx.control_note,
                cx.repair
            ),
        )
        .file(server_metrics::FILE)
        .field(format!("metrics[\"{}\"]", self.metric))
        .metric(self.metric.clone())
        .series(self.named_series())
        .expected_found(&expected, &found)
        .effect("profiling_delta", dp, Unit::Count);
        if self.dw.is_some() {
            f = f.effect("warmup_delta", dw, Unit::Count);
        }
        if let Some(ep) = &self.endpoint {
            f = f.endpoint(ep.clone());
        }
        if let Some(b) = self.exp_p.map(|e| e.max as f64).filter(|b| *b > 0.0) {
            f = f.effect("profiling_count_inflation", dp / b * 100.0, Unit::Percent);
        }
        // Bias of the published figures against the repaired ones, percent.
        let repaired = self.corrected.as_ref().filter(|_| self.repaired);
        if let Some(b) = bias_pct(self.found_avg_p, repaired.and_then(|c| c.avg)) {
            f = f.effect("profiling_avg_bias", b, Unit::Percent);
        }
        if let Some(b) = bias_pct(self.found_sum_p, repaired.and_then(|c| c.sum)) {
            f = f.effect("profiling_sum_bias", b, Unit::Percent);
        }
        let effect = |stat: Stat| PERCENTILE_EFFECTS.iter().find(|q| q.0 == stat);
        for (stat, b) in self.percentile_bias_p.iter().flat_map(|p| p.known()) {
            if let Some(q) = effect(stat) {
                f = f.effect(q.1, b, Unit::Percent);
            }
        }
        if let Some((stat, b)) = self.percentile_worst_p {
            if let Some(q) = effect(stat) {
                f = f.effect(q.2, b, Unit::Percent);
            }
        }
        f.severity(severity)
    }
}
