//! What the check's report exposes to the renderers and the published
//! numbers: its summary line, its headline, its detail tables and the
//! figures it vouches for.

use super::{CheckReport, CheckStatus, Detail, Metric, Report, Stat, KEY_METRICS};
use crate::results::published::{Figure, Looked, QUOTED_STATS};

impl CheckReport for Report {
    /// The statistics a connection's setup time can reach (not those
    /// measured after the first token), vouched for when cold and warm
    /// requests could be told apart.
    fn figures(&self, reason: Option<&str>) -> Vec<Figure> {
        let looked = if let Some(r) = reason {
            Looked::CannotTell(r.to_string())
        } else if self.profiling_records == 0 {
            Looked::CannotTell("no profiling records to tell cold requests from".into())
        } else if self.unknown == self.profiling_records {
            Looked::CannotTell(
                "the records lack the HTTP connection fields, so cold requests cannot be told \
                 apart"
                    .into(),
            )
        } else if self.all_cold {
            Looked::CannotTell(
                "every request opened a new connection, so there is no warm baseline".into(),
            )
        } else {
            Looked::Vouches
        };
        KEY_METRICS
            .iter()
            .filter(|m| !crate::model::connection::AFTER_FIRST_TOKEN.contains(m))
            .flat_map(|m| {
                let looked = looked.clone();
                QUOTED_STATS
                    .iter()
                    .map(move |s| Figure::client(m.tag(), *s, looked.clone()))
            })
            .collect()
    }

    fn summary(&self, reason: Option<&str>) -> String {
        let why = reason.map(|r| format!("cannot tell: {r}"));
        if self.profiling_records == 0 {
            return why.unwrap_or_default();
        }
        let ttft = self
            .metrics
            .iter()
            .find(|m| m.metric == Metric::TimeToFirstToken && m.stat == Stat::P99)
            .and_then(|m| m.bias_pct)
            .map(|b| format!("; TTFT p99 {b:+.1} % vs warm only"))
            .unwrap_or_default();
        format!(
            "{}profiling: {} cold, {} warm, {} unknown of {}{ttft}{}",
            why.map(|w| format!("{w}; ")).unwrap_or_default(),
            self.cold,
            self.warm,
            self.unknown,
            self.profiling_records,
            if self.all_cold {
                "; no warm baseline"
            } else {
                ""
            }
        )
    }

    fn headline(&self) -> Vec<crate::results::Headline> {
        let p99 = self
            .metrics
            .iter()
            .find(|m| m.metric == Metric::TimeToFirstToken && m.stat == Stat::P99);
        let Some(m) = p99 else {
            return Vec::new();
        };
        let (warm, change_pct) = match m.bias_pct {
            Some(b) if !self.all_cold => (m.warm_only, Some(b)),
            _ => (None, None),
        };
        vec![crate::results::Headline {
            name: "TTFT p99 all / warm",
            values: vec![m.all, warm],
            unit: crate::results::HeadlineUnit::Ms,
            change_pct,
        }]
    }

    fn details(&self, status: CheckStatus) -> Vec<Detail> {
        // The bias table needs a warm baseline; without one it is all n/a.
        let shown = matches!(status, CheckStatus::Warn | CheckStatus::Fail) && !self.all_cold;
        if !shown || self.metrics.is_empty() {
            return Vec::new();
        }
        let rows = self
            .metrics
            .iter()
            .map(|m| {
                vec![
                    m.metric.tag().to_string(),
                    m.stat.to_string(),
                    crate::text::fmt_opt(m.all, 3),
                    crate::text::fmt_opt(m.warm_only, 3),
                    m.bias_pct
                        .map(|b| format!("{b:+.1} %"))
                        .unwrap_or_else(|| "n/a".into()),
                ]
            })
            .collect();
        vec![Detail {
            header: vec!["metric", "stat", "all", "warm only", "bias"],
            rows,
        }]
    }
}
