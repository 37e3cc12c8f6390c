//! What the check's report exposes to the renderers and the published
//! numbers: its summary line, its detail tables and the figures it vouches
//! for.

use std::collections::BTreeSet;

use super::{
    causes_text, short_endpoint, CheckReport, CheckStatus, Classification, Detail, Phase, Report,
};
use crate::results::published::{Figure, Looked};

impl CheckReport for Report {
    /// Each profiling row's published count, sum and avg, vouched for when
    /// the row's expected count is known.
    fn figures(&self, reason: Option<&str>) -> Vec<Figure> {
        let mut out = Vec::new();
        for row in self.metrics.iter().filter(|r| r.phase == Phase::Profiling) {
            let looked = match reason {
                Some(r) => Looked::CannotTell(r.to_string()),
                None if row.classification == Classification::Unknown => Looked::CannotTell(
                    "the requests it should count are unknown, so its count cannot be checked"
                        .into(),
                ),
                None => Looked::Vouches,
            };
            let series = Some(crate::text::labels(&row.series));
            let unit = row.unit.clone();
            let mut stats = vec![("count", row.found_count, Some("count".to_string()))];
            if row.found_sum.is_some() {
                stats.push(("sum", row.found_sum, unit.clone()));
                stats.push(("avg", row.found_avg, unit));
            }
            for (stat, value, unit) in stats {
                out.push(
                    Figure::client(row.metric.clone(), stat, looked.clone())
                        .value(value, unit)
                        .on(row.endpoint.clone(), series.clone()),
                );
            }
        }
        out
    }

    fn summary(&self, reason: Option<&str>) -> String {
        if let Some(r) = reason {
            return format!("cannot tell: {r}");
        }
        let all = || self.metrics.iter();
        let compared: BTreeSet<&str> = all().map(|m| m.metric.as_str()).collect();
        let bad: BTreeSet<&str> = all()
            .filter(|m| m.classification.is_mismatch())
            .map(|m| m.metric.as_str())
            .collect();
        let mut s = format!(
            "{} request-scoped metric(s) compared; {} mismatched",
            compared.len(),
            bad.len()
        );
        if let Some(ctl) = &self.control_metric {
            s.push_str(&format!("; control {ctl}"));
        }
        if let Some(o) = self.windows.overlap_ms.filter(|o| *o > 0.0) {
            s.push_str(&format!("; windows overlap {o:.1} ms"));
        }
        if self.repaired_from_raw_scrapes {
            s.push_str("; repaired from raw scrapes");
        }
        s
    }

    fn details(&self, status: CheckStatus) -> Vec<Detail> {
        let endpoints: BTreeSet<&str> = self.metrics.iter().map(|m| m.endpoint.as_str()).collect();
        let several_endpoints = endpoints.len() > 1;
        let rows: Vec<Vec<String>> = self
            .metrics
            .iter()
            .map(|m| {
                let expected = m
                    .expected_count
                    .map(|e| {
                        if e.min == e.max {
                            e.min.to_string()
                        } else {
                            format!("{}-{}", e.min, e.max)
                        }
                    })
                    .unwrap_or_else(|| "n/a".into());
                let corrected = m
                    .corrected
                    .as_ref()
                    .map(|c| match (c.count_low, c.count_high) {
                        (Some(lo), Some(hi)) => format!("{} ({lo}-{hi})", c.count),
                        (Some(lo), None) => format!("{} ({lo} or more)", c.count),
                        _ => format!("{} ({})", c.count, c.exactness),
                    })
                    .unwrap_or_default();
                let mut name = m.metric.clone();
                if several_endpoints {
                    name.push_str(&format!(" @{}", short_endpoint(&m.endpoint)));
                }
                if let Some(r) = &m.role {
                    name.push_str(&format!(" [{r}]"));
                }
                if !m.series.is_empty() {
                    name.push_str(&format!(" {}", crate::text::labels(&m.series)));
                }
                vec![
                    name,
                    m.phase.to_string(),
                    expected,
                    crate::text::fmt_opt(m.found_count, 0),
                    m.delta
                        .map(|d| format!("{d:+}"))
                        .unwrap_or_else(|| "n/a".into()),
                    m.classification.to_string(),
                    causes_text(&m.causes),
                    corrected,
                ]
            })
            .collect();
        if status == CheckStatus::Pass || rows.is_empty() {
            return Vec::new();
        }
        let header = vec![
            "metric",
            "phase",
            "expected",
            "found",
            "delta",
            "classification",
            "causes",
            "corrected",
        ];
        vec![Detail { header, rows }]
    }
}
