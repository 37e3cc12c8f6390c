//! Diagnosis: a mismatched observer turned into findings that name the
//! cause, the evidence for it and the size of the effect.

use super::classify::Classification;
use super::evidence::Evidence;
use super::{
    Expected, Windows, COUNTED_IN_BOTH, LATE_WARMUP_OBSERVATION, PROFILING_LOST_TO_WARMUP,
    UNEXPLAINED_DEFICIT, UNEXPLAINED_EXCESS, WARMUP_ABSORBED,
};
use crate::artifacts::records::Phase;
use crate::artifacts::server_metrics;
use crate::findings::{Code, Finding, Severity, Unit};
use crate::frameworks::ObservedAt;
use crate::model::attribution::Attribution;
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
    /// Profiling and warmup classifications.
    pub classes: [Classification; 2],
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
    /// The split repaired from the raw scrapes.
    pub corrected: Option<Attribution>,
    /// Bias of the profiling bucket-estimated percentiles over the exactly
    /// repaired ones.
    pub percentile_bias_p: Option<Percentiles>,
    /// Without an exact repair: the largest bias the profiling percentiles
    /// can have over the truth inside their bounds.
    pub percentile_worst_p: Option<(Stat, f64)>,
    /// The evidence the classification used.
    pub evidence: Evidence,
    /// The one partition (e.g. `engine="1"`) whose counts differ from the
    /// control's, when the control can tell.
    pub partition: Option<Labels>,
    /// Without a warmup split: the warmup observations the raw scrapes place
    /// after profiling started.
    pub late: Option<u64>,
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

/// Warmup-only damage does not touch published (profiling) numbers: at most
/// a warning.
fn severity(profiling_hit: bool, code: Code) -> Severity {
    if profiling_hit {
        code.severity()
    } else {
        Severity::Warning.min(code.severity())
    }
}

/// What every finding of one problem says besides its cause.
struct Context {
    /// `metric on endpoint (role r) {series}`.
    name: String,
    /// The split, in words.
    split: String,
    control_note: String,
    repair: String,
}

impl Problem {
    /// The findings this mismatch makes: its cause, with its size.
    pub fn findings(&self, control: Option<&str>, w: &Windows) -> Vec<Finding> {
        let Some(dp) = self.dp else {
            return self
                .dw
                .and_then(|dw| {
                    let cx = self.context(control, 0.0, dw);
                    self.one_sided(&cx, Phase::Warmup, dw, None)
                })
                .into_iter()
                .collect();
        };
        let dw = self.dw.unwrap_or(0.0);
        let cx = self.context(control, dp, dw);
        let overlap = w.overlap_ms.filter(|o| *o > 0.0);
        if self.classes[0] == Classification::LateWarmupObservation {
            let what = match (self.late, &self.evidence.no_split) {
                (Some(k), Some(v)) => format!(
                    "{k} warmup observation(s) were published after profiling started (the \
                     raw scrapes place them) and counted in profiling (this metric is observed \
                     at {}; AIPerf {v} has no warmup split)",
                    self.observed_at.as_str()
                ),
                (Some(k), None) => format!(
                    "{k} warmup observation(s) were published after profiling started (the \
                     raw scrapes place them) and counted in profiling (this metric is observed \
                     at {})",
                    self.observed_at.as_str()
                ),
                _ => format!(
                    "{} warmup observation(s) published after the end-of-warmup scrape were \
                     counted in profiling (this metric is observed at {})",
                    dp.min(-dw),
                    self.observed_at.as_str()
                ),
            };
            return vec![self.finding(&cx, LATE_WARMUP_OBSERVATION, what, true)];
        }
        if self.classes[0] == Classification::ProfilingLostToWarmup {
            let k = (-dp).min(dw);
            let why = overlap
                .map(|o| format!("; the warmup window closes {o:.1} ms after profiling started"))
                .unwrap_or_default();
            let what = format!(
                "{k} profiling observation(s) (observed at {}) were published before the \
                 end-of-warmup scrape and counted in warmup{why}",
                self.observed_at.as_str()
            );
            return vec![self.finding(&cx, PROFILING_LOST_TO_WARMUP, what, true)];
        }
        [(Phase::Profiling, dp), (Phase::Warmup, dw)]
            .into_iter()
            .filter_map(|(phase, d)| self.one_sided(&cx, phase, d, overlap))
            .collect()
    }

    /// Why profiling holds warmup observations: AIPerf's baseline and how
    /// many warmup observations come after it.
    fn absorbed_why(&self) -> String {
        match (&self.evidence.absorbed, &self.evidence.no_split) {
            (Some((n, baseline)), Some(v)) => format!(
                "AIPerf {v} has no warmup split: its profiling baseline {baseline}; \
                 the {} configured warmup request(s) all finished before profiling \
                 started, and up to {n} of their observations come after that scrape",
                range(self.exp_w)
            ),
            (Some((n, baseline)), None) => format!(
                "AIPerf's profiling baseline {baseline}, and {n} warmup observation(s) \
                 come after it"
            ),
            (None, _) => format!(
                "the excess is exactly the warmup's {} observation(s): the profiling \
                 delta starts at warmup start",
                num(self.evidence.warmup_total)
            ),
        }
    }

    /// A phase off with no mirror deviation in the other.
    fn one_sided(
        &self,
        cx: &Context,
        phase: Phase,
        d: f64,
        overlap: Option<f64>,
    ) -> Option<Finding> {
        let hit = phase == Phase::Profiling;
        let class = self.classes[usize::from(!hit)];
        match class {
            Classification::WarmupAbsorbed => {
                let why = self.absorbed_why();
                let what = format!(
                    "profiling counts {d} warmup observation(s) too (observed at {}): {why}",
                    self.observed_at.as_str()
                );
                Some(self.finding(cx, WARMUP_ABSORBED, what, true))
            }
            Classification::CountedInBoth => {
                let why = self
                    .evidence
                    .double
                    .as_ref()
                    .map(|(n, scrape)| {
                        format!(
                            "AIPerf's end-of-warmup scrape {scrape}, after {n} profiling \
                             observation(s)"
                        )
                    })
                    .unwrap_or_default();
                let what = format!(
                    "warmup counts {d} profiling observation(s) too (observed at {}; profiling \
                     counts them as well): {why}. Only the warmup figures are wrong",
                    self.observed_at.as_str()
                );
                Some(self.finding(cx, COUNTED_IN_BOTH, what, false))
            }
            _ if d > 0.0 => {
                let cause = match overlap {
                    Some(o) => format!(
                        "the warmup window closes {o:.1} ms after profiling starts, but \
                         the requests and scrapes cannot account for this many (foreign \
                         traffic, or observations counted twice)"
                    ),
                    None => "foreign traffic reached the server, or the same observations \
                             were counted twice"
                        .into(),
                };
                let what = format!(
                    "{phase} has {d} more observation(s) than requests with no matching \
                     deficit: {cause}"
                );
                Some(self.finding(cx, UNEXPLAINED_EXCESS, what, hit))
            }
            _ if d < 0.0 => {
                let what = format!(
                    "{phase} has {} fewer observation(s) than requests with no matching \
                     excess: observations published after the final scrape, requests \
                     the server never counted, or a counter reset",
                    -d
                );
                Some(self.finding(cx, UNEXPLAINED_DEFICIT, what, hit))
            }
            _ => None,
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

    fn context(&self, control: Option<&str>, dp: f64, dw: f64) -> Context {
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
        let signed = |d: Option<f64>, fallback: f64| {
            d.map(|_| format!(" ({fallback:+})")).unwrap_or_default()
        };
        let split = format!(
            "profiling holds {} observations for {} profiling requests{}, warmup {} for {}{}",
            num(self.found_p),
            range(self.exp_p),
            signed(self.dp, dp),
            num(self.found_w),
            range(self.exp_w),
            signed(self.dw, dw)
        );
        let repair = self
            .corrected
            .as_ref()
            .map(|c| {
                let (p, w) = (c.get(Phase::Profiling), c.get(Phase::Warmup));
                format!(
                    " Repaired from the raw scrapes ({}): profiling {} observations{}, warmup {}.",
                    p.exactness,
                    p.count,
                    p.avg.map(|a| format!(" (avg {a:.6})")).unwrap_or_default(),
                    w.count
                )
            })
            .unwrap_or_default();
        Context {
            name,
            split,
            control_note,
            repair,
        }
    }

    /// One finding: the cause `what`, the split and its effects; at the
    /// code's severity when profiling is hit, at most a warning otherwise.
    fn finding(&self, cx: &Context, code: Code, what: String, profiling_hit: bool) -> Finding {
        let (dp, dw) = (self.dp.unwrap_or(0.0), self.dw.unwrap_or(0.0));
        let expected = serde_json::json!({"profiling": self.exp_p.map(|e| e.min), "warmup": self.exp_w.map(|e| e.min)});
        let found = serde_json::json!({"profiling": self.found_p, "warmup": self.found_w});
        let mut f = Finding::new(
            code,
            format!(
                "{}: {}: {what}.{}{}",
                cx.name, cx.split, cx.control_note, cx.repair
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
        let repaired = self.corrected.as_ref().map(|c| c.get(Phase::Profiling));
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
        f = f.severity(severity(profiling_hit, code));
        f
    }
}
