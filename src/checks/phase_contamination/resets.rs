//! Resets: a cumulative series that goes down, in the export (buckets
//! dropped) and in the raw scrapes.

use std::collections::{BTreeMap, BTreeSet};

use super::COUNTER_RESET;
use crate::artifacts::scrapes::Scrape;
use crate::artifacts::server_metrics::{self, MetricType};
use crate::findings::{Finding, Unit};

/// Histograms the export dropped the buckets of (a negative bucket delta).
pub fn resets_in_export(server: &server_metrics::ServerMetricsExport, out: &mut Vec<Finding>) {
    let phases = [
        ("metrics", Some(&server.metrics)),
        ("warmup_metrics", server.warmup_metrics.as_ref()),
    ];
    for (section, fams) in phases {
        let Some(fams) = fams else { continue };
        for (name, fam) in fams {
            if fam.kind != MetricType::Histogram {
                continue;
            }
            for s in &fam.series {
                if s.stats.count.unwrap_or(0.0) > 0.0 && s.buckets.is_none() {
                    out.push(
                        Finding::new(
                            COUNTER_RESET,
                            format!(
                                "{section}[\"{name}\"] on {} has a count but no buckets: AIPerf \
                                 drops the buckets when a bucket delta is negative, i.e. the \
                                 histogram was reset during the phase; its count and sum are \
                                 clamped and untrustworthy",
                                s.endpoint_url.as_deref().unwrap_or("?")
                            ),
                        )
                        .file(server_metrics::FILE)
                        .field(format!("{section}[\"{name}\"].series[].buckets")),
                    );
                }
            }
        }
    }
}

/// Cumulative values that go down between raw scrapes.
pub fn resets_in_scrapes(scrapes: &[Scrape], out: &mut Vec<Finding>) {
    // (endpoint, family, labels) -> (last value, line)
    let mut last: BTreeMap<(String, String, String), (f64, u64)> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    let mut ordered: Vec<&Scrape> = scrapes.iter().collect();
    ordered.sort_by_key(|s| (s.endpoint_url.clone(), s.timestamp_ns));
    let mut lost: BTreeMap<(String, String), f64> = BTreeMap::new();
    for s in ordered {
        for (fam, samples) in &s.metrics {
            for sample in samples {
                let Some(v) = sample.cumulative() else {
                    continue;
                };
                let key = (
                    s.endpoint_url.clone(),
                    fam.clone(),
                    format!("{:?}", sample.labels),
                );
                if let Some((prev, prev_line)) = last.get(&key).copied() {
                    if v < prev {
                        *lost.entry((key.0.clone(), key.1.clone())).or_default() += v;
                        if reported.insert((key.0.clone(), key.1.clone())) {
                            out.push(
                                Finding::new(
                                    COUNTER_RESET,
                                    format!(
                                        "{fam} on {} went down from {prev} (line {prev_line}) to \
                                         {v} (line {}): the server restarted or the series was \
                                         reset; AIPerf clamps such deltas at 0, so its totals \
                                         for this metric are too small. Reset-aware, the growth \
                                         after the reset is at least {v}",
                                        s.endpoint_url, s.line
                                    ),
                                )
                                .file(crate::artifacts::scrapes::FILE)
                                .line(s.line)
                                .field(format!("metrics[\"{fam}\"]"))
                                .expected_found(format!(">= {prev}"), v)
                                .effect(
                                    "drop",
                                    prev - v,
                                    Unit::Count,
                                ),
                            );
                        }
                    }
                }
                last.insert(key, (v, s.line));
            }
        }
    }
}
