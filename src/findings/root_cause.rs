//! One finding per root cause: what a cause moves, as data, and the rule
//! that folds the findings one cause made on several metrics into one.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Finding, Severity, Unit};

/// One published figure a finding's cause moves: what it should be, what it
/// is, and its value without the cause (`corrected`, or only its bounds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moved {
    /// The metric, as its file spells it (`time_to_first_token`,
    /// `vllm:time_to_first_token_seconds`).
    pub metric: String,
    /// The statistic, as its file spells it (`p99`, `avg`, `count`,
    /// `p99_estimate`).
    pub stat: String,
    /// The phase, for a server figure (`profiling` or `warmup`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<&'static str>,
    /// The scrape endpoint, for a server figure (none: the sum over the
    /// endpoints that split the requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The series of a server figure, in Prometheus notation, when the
    /// metric has several on its endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
    /// What it should be without the cause, where the check knows one
    /// reference value (the expected count, the recomputed statistic).
    pub expected: Option<f64>,
    /// What the file says.
    pub found: Option<f64>,
    /// Its value over what it claims to be over.
    pub corrected: Option<f64>,
    /// The lowest the corrected value can be, when only bounded.
    pub corrected_low: Option<f64>,
    /// The highest, when only bounded (`null` when unbounded above).
    pub corrected_high: Option<f64>,
    /// What the corrected value is over, for a statistic of the records a
    /// selection can recompute (so two causes' corrections combine).
    #[serde(skip)]
    pub over: Option<Over>,
    /// How the cause bears on the figure.
    #[serde(skip)]
    pub kind: MoveKind,
}

/// The records a corrected client statistic is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Over {
    /// Without the requests that paid for DNS + connect.
    WarmOnly,
    /// Without the opening wave and the drain tail.
    SteadyState,
}

/// How a cause bears on a published figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MoveKind {
    /// It biases it: `corrected` is the figure without the cause.
    #[default]
    Bias,
    /// The file disagrees with its own records: `corrected` is what they give.
    Disagrees,
    /// The figure cannot be verified from its records (they are not the
    /// run the file is over, or hold values no producer writes).
    Unverifiable,
}

impl Moved {
    /// A figure of `metric`'s `stat`, found `found`, corrected `corrected`.
    pub fn new(
        metric: impl Into<String>,
        stat: impl Into<String>,
        found: Option<f64>,
        corrected: Option<f64>,
    ) -> Moved {
        Moved {
            metric: metric.into(),
            stat: stat.into(),
            phase: None,
            endpoint: None,
            series: None,
            expected: corrected,
            found,
            corrected,
            corrected_low: None,
            corrected_high: None,
            over: None,
            kind: MoveKind::Bias,
        }
    }

    /// Sets what the corrected value is over.
    pub fn over(mut self, over: Over) -> Moved {
        self.over = Some(over);
        self
    }

    /// Sets how the cause bears on the figure.
    pub fn kind(mut self, kind: MoveKind) -> Moved {
        self.kind = kind;
        self
    }

    /// Sets the expected value where it is not the corrected one.
    pub fn expected(mut self, expected: Option<f64>) -> Moved {
        self.expected = expected;
        self
    }

    /// Sets the bounds of the corrected value.
    pub fn bounds(mut self, low: Option<f64>, high: Option<f64>) -> Moved {
        self.corrected_low = low;
        self.corrected_high = high;
        self
    }

    /// Sets the phase, endpoint and series of a server figure.
    pub fn server(
        mut self,
        phase: &'static str,
        endpoint: Option<String>,
        series: Option<String>,
    ) -> Moved {
        self.phase = Some(phase);
        self.endpoint = endpoint;
        self.series = series.filter(|s| !s.is_empty() && s != "{}");
        self
    }

    /// How far the found value is from the corrected one, in percent of
    /// it; from the nearer bound when only bounds are known.
    pub fn bias_pct(&self) -> Option<f64> {
        let found = self.found?;
        let reference = match (self.corrected, self.corrected_low, self.corrected_high) {
            (_, Some(lo), Some(hi)) if (lo..=hi).contains(&found) => return Some(0.0),
            (_, Some(lo), _) if found < lo => lo,
            (_, _, Some(hi)) if found > hi => hi,
            (Some(c), _, _) => c,
            _ => self.expected?,
        };
        (reference != 0.0 && reference.is_finite())
            .then(|| (found - reference) / reference.abs() * 100.0)
            .filter(|b| b.is_finite())
    }

    fn size(&self) -> f64 {
        self.bias_pct().map_or(0.0, f64::abs)
    }
}

/// At most this many metric names are spelled out in a merged message.
const NAMED: usize = 6;

/// Folds the findings one cause made on several metrics into one: findings
/// that list what they move ([`Finding::metrics`]) and share code,
/// severity, file, endpoint and series become the first of them, with
/// every figure listed, `metric` the worst moved and the message the worst
/// one's, naming the others. Other findings are left as they are, in order.
pub fn merge_root_causes(findings: &mut Vec<Finding>) {
    type Key = (
        &'static str,
        Severity,
        Option<String>,
        Option<String>,
        Option<BTreeMap<String, String>>,
    );
    let key = |f: &Finding| -> Key {
        (
            f.code.as_str(),
            f.severity,
            f.file.clone(),
            f.endpoint.clone(),
            f.series.clone(),
        )
    };
    let mut groups: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (i, f) in findings.iter().enumerate() {
        if !f.metrics.is_empty() && f.line.is_none() {
            groups.entry(key(f)).or_default().push(i);
        }
    }
    let mut merged: BTreeMap<usize, Finding> = BTreeMap::new();
    let mut dropped = vec![false; findings.len()];
    for members in groups.into_values().filter(|m| m.len() > 1) {
        // The first of the largest, so a tie names the first listed.
        let mut worst = members[0];
        for &i in &members[1..] {
            if worst_size(&findings[i]) > worst_size(&findings[worst]) {
                worst = i;
            }
        }
        let mut one = findings[worst].clone();
        one.metrics = members
            .iter()
            .flat_map(|&i| findings[i].metrics.iter().cloned())
            .collect();
        let worst_metric = one.metric.clone();
        let mut others: Vec<&str> = Vec::new();
        for m in &one.metrics {
            if Some(m.metric.as_str()) != worst_metric.as_deref() && !others.contains(&&*m.metric) {
                others.push(&m.metric);
            }
        }
        if !others.is_empty() {
            let shown = others[..others.len().min(NAMED)].join(", ");
            let more = others.len().saturating_sub(NAMED);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            one.message.push_str(&format!(
                " The same cause moves {} other metric(s) the same way: {shown}{more}.",
                others.len()
            ));
            one.field = None;
        }
        let n = one.metrics.len() as f64;
        one = one.effect("figures_moved", n, Unit::Count);
        merged.insert(members[0], one);
        for &i in &members[1..] {
            dropped[i] = true;
        }
    }
    let old = std::mem::take(findings);
    for (i, f) in old.into_iter().enumerate() {
        if dropped[i] {
            continue;
        }
        findings.push(merged.remove(&i).unwrap_or(f));
    }
}

/// The largest bias among what a finding moves.
fn worst_size(f: &Finding) -> f64 {
    f.metrics.iter().map(Moved::size).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::reading;

    fn moving(metric: &str, found: f64, corrected: f64) -> Finding {
        Finding::new(reading::EMPTY_FILE, format!("{metric} moved"))
            .file("f")
            .metric(metric)
            .field(format!("metrics[\"{metric}\"]"))
            .moves(Moved::new(metric, "count", Some(found), Some(corrected)))
    }

    #[test]
    fn one_cause_on_three_metrics_is_one_finding_naming_the_worst() {
        let mut v = vec![
            moving("a", 11.0, 10.0),
            Finding::new(reading::INVALID_JSON, "other"),
            moving("b", 15.0, 10.0),
            moving("c", 10.5, 10.0),
        ];
        merge_root_causes(&mut v);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].metric.as_deref(), Some("b"));
        assert_eq!(v[0].metrics.len(), 3);
        assert!(v[0].message.starts_with("b moved"), "{}", v[0].message);
        assert!(v[0]
            .message
            .contains("2 other metric(s) the same way: a, c"));
        assert_eq!(v[0].field, None);
        assert_eq!(v[1].code, reading::INVALID_JSON);
        // The identity is the cause's, whichever metric is the worst.
        let again = {
            let mut w = vec![moving("a", 19.0, 10.0), moving("b", 11.0, 10.0)];
            merge_root_causes(&mut w);
            w.remove(0)
        };
        assert_eq!(v[0].identity("r"), again.identity("r"));
    }

    #[test]
    fn different_severities_or_endpoints_stay_apart() {
        let mut v = vec![
            moving("a", 11.0, 10.0),
            moving("b", 11.0, 10.0).severity(Severity::Info),
            moving("c", 11.0, 10.0).endpoint("http://x"),
        ];
        merge_root_causes(&mut v);
        assert_eq!(v.len(), 3);
    }

    #[test]
    fn a_bias_is_measured_from_the_nearer_bound() {
        let m = Moved::new("m", "count", Some(12.0), None).bounds(Some(8.0), Some(10.0));
        assert_eq!(m.bias_pct(), Some(20.0));
        let m = Moved::new("m", "count", Some(9.0), None).bounds(Some(8.0), Some(10.0));
        assert_eq!(m.bias_pct(), Some(0.0));
    }
}
