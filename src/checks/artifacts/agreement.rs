//! Whether AIPerf's summary agrees with the records it was computed from:
//! the request counts, and the recomputed metrics' statistics; what the
//! records cannot verify (refused impossible values) said once.

use super::{SummaryComparison, SummaryStat, RECOMPUTED, SUMMARY_MISMATCH};
use crate::artifacts::records::{self, Metric, Phase};
use crate::artifacts::summary;
use crate::checks::Ctx;
use crate::findings::{reading, Finding, MoveKind, Moved, Unit};
use crate::results::published::QUOTED_STATS;
use crate::stats;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-9)
}

/// The metrics with values refused as impossible in profiling records, and
/// how many: `(metric, records)`.
pub(super) fn refused_profiling(ctx: &Ctx) -> Vec<(Metric, u64)> {
    (ctx.run.records.as_ref())
        .map(|read| read.refused_in_profiling(Metric::ALL))
        .unwrap_or_default()
}

/// One finding for the cause: profiling records hold values no AIPerf
/// writes (each named by line by the reader), so the summary's statistics
/// of those metrics, computed with them or from other values, cannot be
/// verified from the records (kept out of every figure, they are unknown,
/// not zero).
pub(super) fn unverifiable_by_impossible(
    s: &summary::Summary,
    refused: &[(Metric, u64)],
) -> Option<Finding> {
    let mut moved = Vec::new();
    let mut named = Vec::new();
    for &(metric, n) in refused {
        let Some(entry) = s.metrics.get(metric.tag()) else {
            continue;
        };
        named.push(format!("{} in {n}", metric.tag()));
        for stat in QUOTED_STATS {
            let value = entry.quoted(stat);
            if value.is_some() {
                moved
                    .push(Moved::new(metric.tag(), stat, value, None).kind(MoveKind::Unverifiable));
            }
        }
    }
    if moved.is_empty() {
        return None;
    }
    let most = refused.iter().map(|&(_, n)| n).max().unwrap_or(0);
    Some(
        Finding::new(
            reading::IMPOSSIBLE_VALUE,
            format!(
                "profiling records hold values no AIPerf writes ({}; each named by line): they \
                 are kept out of every figure, so {} published statistic(s) of these metrics \
                 cannot be verified from the records, nor corrected. Publish none of them; find \
                 what wrote the values, or rerun",
                named.join(", "),
                moved.len()
            ),
        )
        .file(records::FILE)
        .moves_all(moved)
        .effect("records", most as f64, Unit::Count),
    )
}

pub(super) fn summary_agreement(
    s: &summary::Summary,
    records: &[records::Record],
    refused: &[(Metric, u64)],
    findings: &mut Vec<Finding>,
    compared: &mut Vec<SummaryComparison>,
) {
    // One walk: the profiling counts and, in file order (the mean sums them
    // in that order), the values of each recomputed metric the summary has.
    // Values are finite: the reader drops the rest.
    let wanted: Vec<bool> = RECOMPUTED
        .iter()
        .map(|m| s.metrics.contains_key(m.tag()))
        .collect();
    let mut columns: Vec<Vec<f64>> = wanted
        .iter()
        .map(|&w| Vec::with_capacity(if w { records.len() } else { 0 }))
        .collect();
    let (mut ok, mut errors) = (0u64, 0u64);
    for r in records.iter().filter(|r| r.phase == Phase::Profiling) {
        if r.is_success() {
            ok += 1;
        } else {
            errors += 1;
        }
        for ((m, column), &want) in RECOMPUTED.iter().zip(&mut columns).zip(&wanted) {
            if let Some(v) = r.values.get(*m).filter(|_| want) {
                column.push(v);
            }
        }
    }
    let counts = count_agreement(s, ok as f64, errors as f64);
    let mut moved = Vec::new();
    for (&metric, mut values) in RECOMPUTED.iter().zip(columns) {
        // Statistics over what is left of a metric with refused values are
        // not the summary's: not compared (see `unverifiable_by_impossible`).
        if refused.iter().any(|&(m, _)| m == metric) {
            continue;
        }
        if let Some(entry) = s.metrics.get(metric.tag()) {
            stat_agreement(metric, entry, &mut values, &mut moved, compared);
        }
    }
    findings.extend(summary_mismatch(counts, moved));
}

/// A count the summary publishes that the records do not give: `(what,
/// field, published, recomputed)`.
type CountMismatch = (&'static str, &'static str, f64, f64);

/// AIPerf's successful and failed request counts against the records.
fn count_agreement(s: &summary::Summary, ok: f64, errors: f64) -> Vec<CountMismatch> {
    let mut out = Vec::new();
    if let Some(published) = s.scalar("request_count") {
        if published != ok {
            out.push((
                "successful profiling requests",
                "request_count.avg",
                published,
                ok,
            ));
        }
    }
    let published_errors = s.scalar("error_request_count").unwrap_or(0.0);
    if published_errors != errors {
        out.push((
            "failed profiling requests",
            "error_request_count.avg",
            published_errors,
            errors,
        ));
    }
    out
}

/// One finding per root cause: the request counts when they disagree (the
/// records are not the run the summary is over, so every statistic
/// recomputed from them disagrees as a consequence, said inside), else one
/// listing every statistic the file publishes that its records do not give.
fn summary_mismatch(counts: Vec<CountMismatch>, moved: Vec<Moved>) -> Option<Finding> {
    match counts.first() {
        Some(&first) => Some(counts_mismatch(first, &counts[1..], moved)),
        None => stats_mismatch(moved),
    }
}

/// The request counts disagree: the records are not the run the summary is
/// over; the statistics that differ are listed, not corrected.
fn counts_mismatch(first: CountMismatch, more: &[CountMismatch], moved: Vec<Moved>) -> Finding {
    let (what, field, published, recomputed) = first;
    let more: Vec<String> = more
        .iter()
        .map(|(w, _, p, r)| format!("; {w}: {p} published, {r} in the records"))
        .collect();
    let stats_note = if moved.is_empty() {
        String::new()
    } else {
        format!(
            "; as a consequence {} published statistic(s) differ from these records, which \
             cannot verify them",
            moved.len()
        )
    };
    let mut f = Finding::new(
        SUMMARY_MISMATCH,
        format!(
            "{what}: {} says {published}, the records give {recomputed}{}{stats_note}. The \
             records file is not the whole run the summary is over (trimmed, or rewritten): \
             publish the summary's figures only from an untouched result folder",
            summary::FILE,
            more.concat(),
        ),
    )
    .file(summary::FILE)
    .field(field)
    .expected_found(recomputed, published)
    .effect("difference", published - recomputed, Unit::Count);
    f.metrics = moved
        .into_iter()
        .map(|m| Moved {
            corrected: None,
            ..m.kind(MoveKind::Unverifiable)
        })
        .collect();
    if f.metrics.is_empty() {
        f.metrics.push(Moved::new(
            "request_count",
            "avg",
            Some(published),
            Some(recomputed),
        ));
    }
    f
}

/// The counts agree but statistics differ: one finding listing them all,
/// the worst named.
fn stats_mismatch(moved: Vec<Moved>) -> Option<Finding> {
    let size = |m: &Moved| m.bias_pct().map_or(0.0, f64::abs);
    let worst = moved
        .iter()
        .max_by(|a, b| size(a).total_cmp(&size(b)))?
        .clone();
    let others = moved.len() - 1;
    let f = Finding::new(
        SUMMARY_MISMATCH,
        format!(
            "{} {}: {} publishes {}, the profiling records give {}{}. Publish the value \
             recomputed from the records, and find what rewrote the summary",
            worst.metric,
            worst.stat,
            summary::FILE,
            worst.found.unwrap_or(f64::NAN),
            worst.corrected.unwrap_or(f64::NAN),
            if others > 0 {
                format!("; {others} other statistic(s) differ too")
            } else {
                String::new()
            }
        ),
    )
    .file(summary::FILE)
    .field(format!("{}.{}", worst.metric, worst.stat))
    .metric(worst.metric.clone())
    .expected_found(worst.corrected, worst.found)
    .effect(
        "difference_pct",
        worst.bias_pct().unwrap_or(f64::NAN),
        Unit::Percent,
    );
    Some(f.moves_all(moved))
}

/// One metric's published statistics recomputed from its values (reordered:
/// percentiles by selection); the ones that disagree are moved.
fn stat_agreement(
    metric: Metric,
    entry: &summary::MetricEntry,
    values: &mut [f64],
    moved: &mut Vec<Moved>,
    compared: &mut Vec<SummaryComparison>,
) {
    let mine = stats::Summary::of_values(values);
    let pairs = [
        (SummaryStat::Count, entry.count, Some(values.len() as f64)),
        (SummaryStat::Avg, entry.avg, mine.mean),
        (SummaryStat::P50, entry.p50, mine.p50),
        (SummaryStat::P90, entry.p90, mine.p90),
        (SummaryStat::P99, entry.p99, mine.p99),
    ];
    for (stat, published, recomputed) in pairs {
        let (Some(published), Some(recomputed)) = (published, recomputed) else {
            continue;
        };
        let agrees = close(published, recomputed);
        compared.push(SummaryComparison {
            metric,
            stat,
            published,
            recomputed,
            agrees,
        });
        if !agrees {
            moved.push(
                Moved::new(
                    metric.tag(),
                    stat.to_string(),
                    Some(published),
                    Some(recomputed),
                )
                .kind(MoveKind::Disagrees),
            );
        }
    }
}
