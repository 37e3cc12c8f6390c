//! Check `artifacts`: can the run's files be trusted as a record of the run?
//!
//! What it checks: every problem met while reading (missing, empty,
//! unreadable or malformed files, bad lines); whether each phase's configured
//! request count was realised as successful records; whether AIPerf's own
//! summary agrees with the records it was computed from (counts and, for the
//! key latency metrics, mean and percentiles recomputed here); duplicate
//! request ids; records that end before they start; runs AIPerf itself marked
//! cancelled or incomplete.
//!
//! Why it matters: every other check stands on these counts.

use std::sync::Arc;

use serde::Serialize;

mod agreement;
mod duplicates;

use super::{Check, CheckOutput, CheckReport, Ctx};
use crate::artifacts::records::{self, Metric, Phase};
use crate::artifacts::summary;
use crate::findings::{reading, Finding, Unit};
use crate::results::published::{Figure, Looked, QUOTED_STATS, THROUGHPUTS};
use agreement::{refused_profiling, summary_agreement, unverifiable_by_impossible};

/// The check.
pub const CHECK: Check = Check {
    name: "artifacts",
    codes: &[reading::CODES, CODES],
    run,
    timeline: false,
};

crate::define_codes! { "artifacts";
    DUPLICATE_REQUEST_ID => ("duplicate-request-id", Warning,
        "Two records carry the same x_request_id"),
    INVALID_TIMESTAMPS => ("invalid-timestamps", Warning,
        "A record ends before it starts"),
    REQUEST_COUNT_MISMATCH => ("request-count-mismatch", Warning,
        "The configured request count of a phase differs from its successful records"),
    SUMMARY_MISMATCH => ("summary-mismatch", Error,
        "profile_export_aiperf.json disagrees with the records in profile_export.jsonl"),
    RUN_INCOMPLETE => ("run-incomplete", Warning,
        "AIPerf marked the run cancelled or incomplete"),
    REQUEST_ERRORS => ("request-errors", Warning,
        "Requests failed (error_summary): every published statistic leaves them out"),
}

/// Figures of the `artifacts` check.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Files read.
    pub files_read: Vec<&'static str>,
    /// Lines in `profile_export.jsonl`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_lines: Option<u64>,
    /// Records that could be parsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records_parsed: Option<u64>,
    /// Summary metrics recomputed from the records and compared.
    pub summary_metrics_compared: Vec<SummaryComparison>,
    /// The summary's published figures, with what this check did with each.
    #[serde(skip)]
    pub figures: Vec<Figure>,
}

/// The summary's quoted figures: each per-request metric's statistics (this
/// check vouches for those it recomputed from the records) and the
/// throughputs (their value only).
fn summary_figures(
    s: &summary::Summary,
    compared: &[SummaryComparison],
    records: bool,
) -> Vec<Figure> {
    let mut out = Vec::new();
    for metric in crate::model::selection::PUBLISHED {
        let Some(entry) = s.metrics.get(metric.tag()) else {
            continue;
        };
        for stat in QUOTED_STATS {
            let value = entry.quoted(stat);
            let checked = compared
                .iter()
                .any(|c| c.metric == *metric && c.stat.as_str() == stat);
            let looked = if checked {
                Looked::Vouches
            } else if RECOMPUTED.contains(metric) && !records {
                Looked::CannotTell("no profiling records to recompute it from".into())
            } else {
                Looked::ValueOnly
            };
            out.push(Figure::client(metric.tag(), stat, looked).value(value, entry.unit.clone()));
        }
    }
    for tag in THROUGHPUTS {
        if let Some(entry) = s.metrics.get(tag) {
            out.push(
                Figure::client(tag, "avg", Looked::ValueOnly).value(entry.avg, entry.unit.clone()),
            );
        }
    }
    out
}

closed_set! {
    /// A statistic of AIPerf's summary, by its field name there.
    pub enum SummaryStat {
        /// Records with the metric.
        Count => "count",
        /// Mean.
        Avg => "avg",
        /// Median.
        P50 => "p50",
        /// 90th percentile.
        P90 => "p90",
        /// 99th percentile.
        P99 => "p99",
    }
}

/// One summary statistic recomputed from the records.
#[derive(Debug, Clone, Serialize)]
pub struct SummaryComparison {
    /// Metric tag.
    pub metric: Metric,
    /// The statistic, as AIPerf names it.
    pub stat: SummaryStat,
    /// AIPerf's published value.
    pub published: f64,
    /// Recomputed from the records.
    pub recomputed: f64,
    /// Whether they agree.
    pub agrees: bool,
}

/// Metrics whose published statistics are recomputed.
const RECOMPUTED: &[Metric] = &[
    Metric::TimeToFirstToken,
    Metric::RequestLatency,
    Metric::InterTokenLatency,
];

impl CheckReport for Report {
    fn summary(&self, reason: Option<&str>) -> String {
        if let Some(r) = reason {
            return format!("cannot tell: {r}");
        }
        let agreeing = self
            .summary_metrics_compared
            .iter()
            .filter(|x| x.agrees)
            .count();
        format!(
            "{} file(s) read; {} record(s) parsed of {} line(s); AIPerf's summary agrees on \
             {agreeing}/{} recomputed statistics",
            self.files_read.len(),
            self.records_parsed.unwrap_or(0),
            self.record_lines.unwrap_or(0),
            self.summary_metrics_compared.len()
        )
    }

    fn figures(&self, _reason: Option<&str>) -> Vec<Figure> {
        self.figures.clone()
    }
}

/// Runs the check.
pub fn run(ctx: &Ctx) -> CheckOutput {
    let run = ctx.run;
    let mut findings = run.findings.clone();
    let mut files_read = Vec::new();
    if run.summary.is_some() {
        files_read.push(summary::FILE);
    }
    if run.records.is_some() {
        files_read.push(records::FILE);
    }
    if run.server.is_some() {
        files_read.push(crate::artifacts::server_metrics::FILE);
    }
    if run.scrapes.is_some() {
        files_read.push(crate::artifacts::scrapes::FILE);
    }
    if run.manifest.is_some() {
        files_read.push(crate::artifacts::MANIFEST_FILE);
    }

    request_counts(ctx, &mut findings);
    request_errors(ctx, &mut findings);
    run_completion(ctx, &mut findings);
    let mut compared = Vec::new();
    let refused = refused_profiling(ctx);
    if let (Some(s), Some(records)) = (run.summary.as_ref(), ctx.records()) {
        summary_agreement(s, records, &refused, &mut findings, &mut compared);
        findings.extend(unverifiable_by_impossible(s, &refused));
    }
    if let Some(records) = ctx.records() {
        record_sanity(records, &mut findings);
    }
    manifest_agreement(ctx, &mut findings);

    let figures = run
        .summary
        .as_ref()
        .map(|s| summary_figures(s, &compared, ctx.records().is_some()))
        .unwrap_or_default();
    let report = Report {
        files_read,
        record_lines: run.records.as_ref().map(|r| r.lines),
        records_parsed: run.records.as_ref().map(|r| r.records.len() as u64),
        summary_metrics_compared: compared,
        figures,
    };
    CheckOutput {
        report: Arc::new(report),
        findings,
        cannot_tell: run
            .unreadable
            .then(|| "no artifact of the run could be read".to_string()),
    }
}

/// A phase's successful and failed requests: from its records, else (for
/// profiling, in a folder without records) from the summary's counts.
fn realised(ctx: &Ctx, phase: Phase) -> Option<(u64, u64, u64, Option<u64>)> {
    let p = ctx.model.phase(phase)?;
    if let Some(ok) = p.successful {
        return Some((
            ok,
            p.errors.unwrap_or(0),
            p.cancelled.unwrap_or(0),
            p.records,
        ));
    }
    let s = ctx
        .run
        .summary
        .as_ref()
        .filter(|_| phase == Phase::Profiling)?;
    let count = |tag| {
        s.scalar(tag)
            .filter(|x| x.is_finite() && *x >= 0.0)
            .map(|x| x.round() as u64)
    };
    let ok = count("request_count")?;
    Some((ok, count("error_request_count").unwrap_or(0), 0, None))
}

/// The summary's `error_summary` entries, as `(count, "HTTP 502 (Bad Gateway)")`.
fn error_kinds(s: &summary::Summary) -> Vec<(u64, String)> {
    s.error_summary
        .iter()
        .flatten()
        .filter_map(|e| {
            let n = e.count.filter(|c| c.is_finite() && *c > 0.0)?.round() as u64;
            let d = &e.error_details;
            let code = match &d.code {
                Some(serde_json::Value::Number(c)) => format!("HTTP {c}"),
                Some(serde_json::Value::String(c)) => c.clone(),
                _ => "an error".to_string(),
            };
            let kind = d
                .kind
                .as_deref()
                .map(|k| format!(" ({k})"))
                .unwrap_or_default();
            Some((n, format!("{code}{kind}")))
        })
        .collect()
}

fn request_errors(ctx: &Ctx, findings: &mut Vec<Finding>) {
    let Some(s) = ctx.run.summary.as_ref() else {
        return;
    };
    let kinds = error_kinds(s);
    let failed: u64 = kinds.iter().map(|k| k.0).sum();
    if failed == 0 {
        return;
    }
    let listed: Vec<String> = kinds.iter().map(|(n, k)| format!("{n} x {k}")).collect();
    let ok = realised(ctx, Phase::Profiling).map(|r| r.0);
    let of = ok
        .map(|ok| format!(" of {} profiling requests", ok + failed))
        .unwrap_or_default();
    let configured = ctx
        .model
        .profiling
        .configured_requests
        .map(|c| format!(" (configured {c})"))
        .unwrap_or_default();
    let mut f = Finding::new(
        REQUEST_ERRORS,
        format!(
            "{failed} request(s){of}{configured} failed: {}; every published latency and \
             throughput statistic is over the successful ones only and says nothing about them",
            listed.join(", ")
        ),
    )
    .file(summary::FILE)
    .field("error_summary")
    .expected_found(0, failed)
    .effect("failed_requests", failed as f64, Unit::Count);
    if let Some(ok) = ok {
        f = f.effect(
            "failed_share",
            failed as f64 / (ok + failed) as f64 * 100.0,
            Unit::Percent,
        );
    }
    findings.push(f);
}

fn request_counts(ctx: &Ctx, findings: &mut Vec<Finding>) {
    for phase in [Phase::Warmup, Phase::Profiling] {
        let Some(p) = ctx.model.phase(phase) else {
            continue;
        };
        let (Some(configured), Some((successful, errors, cancelled, records))) =
            (p.configured_requests, realised(ctx, phase))
        else {
            continue;
        };
        if configured == successful {
            continue;
        }
        // Failures the summary names: reported as request-errors.
        let named = ctx
            .run
            .summary
            .as_ref()
            .map(|s| error_kinds(s).iter().map(|k| k.0).sum::<u64>())
            .unwrap_or(0);
        if phase == Phase::Profiling
            && errors > 0
            && configured == successful + errors
            && named == errors
        {
            continue;
        }
        let missing = configured as i64 - successful as i64;
        let why = if errors > 0 {
            format!("{errors} failed ({cancelled} of them cancelled)")
        } else if records.unwrap_or(successful) < configured {
            "records are missing (an incomplete or killed run?)".to_string()
        } else {
            "more records than configured".to_string()
        };
        findings.push(
            Finding::new(
                REQUEST_COUNT_MISMATCH,
                format!(
                    "{} was configured for {configured} requests but has {successful} \
                     successful records: {why}",
                    phase.as_str()
                ),
            )
            .file(records::FILE)
            .field(format!(
                "input_config.phases[kind={}].requests",
                phase.as_str()
            ))
            .expected_found(configured, successful)
            .effect("missing_requests", missing as f64, Unit::Count)
            .effect(
                "missing_pct",
                missing as f64 / configured as f64 * 100.0,
                Unit::Percent,
            ),
        );
    }
}

fn run_completion(ctx: &Ctx, findings: &mut Vec<Finding>) {
    let Some(s) = ctx.run.summary.as_ref() else {
        return;
    };
    if s.was_cancelled == Some(true) {
        findings.push(
            Finding::new(
                RUN_INCOMPLETE,
                "AIPerf marked the profiling run as cancelled",
            )
            .file(summary::FILE)
            .field("was_cancelled"),
        );
    }
    if s.is_complete == Some(false) {
        let why = s.incomplete_reason.as_deref().unwrap_or("no reason given");
        findings.push(
            Finding::new(
                RUN_INCOMPLETE,
                format!("AIPerf finalized the results without all records: {why}"),
            )
            .file(summary::FILE)
            .field("is_complete"),
        );
    }
}

/// `phase_manifest.json` counts per phase against the records.
fn manifest_agreement(ctx: &Ctx, findings: &mut Vec<Finding>) {
    let Some(manifest) = ctx.run.manifest.as_ref() else {
        return;
    };
    for phase in [Phase::Warmup, Phase::Profiling] {
        let Some(model) = ctx.model.phase(phase) else {
            continue;
        };
        let entries: Vec<_> = manifest
            .phases
            .iter()
            .filter(|p| p.phase_kind.as_deref() == Some(phase.as_str()))
            .collect();
        if entries.is_empty() {
            continue;
        }
        let counts = [
            (
                "successful_request_count",
                entries
                    .iter()
                    .map(|e| e.successful_request_count)
                    .sum::<Option<u64>>(),
                model.successful,
            ),
            (
                "error_request_count",
                entries
                    .iter()
                    .map(|e| e.error_request_count)
                    .sum::<Option<u64>>(),
                model.errors,
            ),
        ];
        for (field, published, records) in counts {
            let (Some(published), Some(records)) = (published, records) else {
                continue;
            };
            if published != records {
                findings.push(
                    Finding::new(
                        SUMMARY_MISMATCH,
                        format!(
                            "{}: {} {field} is {published}, the records give {records}",
                            crate::artifacts::MANIFEST_FILE,
                            phase.as_str()
                        ),
                    )
                    .file(crate::artifacts::MANIFEST_FILE)
                    .field(format!("phases[kind={}].{field}", phase.as_str()))
                    .expected_found(records, published)
                    .effect(
                        "difference",
                        published as f64 - records as f64,
                        Unit::Count,
                    ),
                );
            }
        }
    }
}

fn record_sanity(records: &[records::Record], findings: &mut Vec<Finding>) {
    let duplicates = duplicates::duplicate_ids(records);
    let backwards: Vec<u64> = records
        .iter()
        .filter(|r| r.request_end_ns < r.request_start_ns)
        .map(|r| r.line)
        .collect();
    for (id, first, line) in duplicates.iter().take(20) {
        findings.push(
            Finding::new(
                DUPLICATE_REQUEST_ID,
                format!("x_request_id {id} on line {line} was already used on line {first}"),
            )
            .file(records::FILE)
            .line(*line)
            .field("metadata.x_request_id"),
        );
    }
    if duplicates.len() > 20 {
        findings.push(
            Finding::new(
                DUPLICATE_REQUEST_ID,
                format!(
                    "{} more duplicate x_request_ids not listed",
                    duplicates.len() - 20
                ),
            )
            .file(records::FILE)
            .effect("duplicates", duplicates.len() as f64, Unit::Count),
        );
    }
    if let Some(&line) = backwards.first() {
        findings.push(
            Finding::new(
                INVALID_TIMESTAMPS,
                format!(
                    "{} record(s) end before they start (first on line {line}); their latency \
                     and timing-based attribution are meaningless",
                    backwards.len()
                ),
            )
            .file(records::FILE)
            .line(line)
            .field("metadata.request_end_ns")
            .effect("records", backwards.len() as f64, Unit::Count),
        );
    }
}
