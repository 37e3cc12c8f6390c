//! The phase windows: how the warmup and profiling windows AIPerf reports
//! sit against each other and against the requests, counters whose
//! timeslices start early, and the advisory for AIPerf versions that take
//! the end-of-warmup scrape without a flush barrier.

use super::{Windows, AIPERF_VERSION_ADVISORY, COUNTER_WINDOW_EARLY, PHASE_WINDOW_OVERLAP};
use crate::artifacts::records::Phase;
use crate::artifacts::server_metrics::{self, MetricType};
use crate::checks::Ctx;
use crate::findings::{Finding, Unit};
use crate::frameworks::ObservedAt;

/// The phase windows, and the overlap finding when warmup closes after
/// profiling starts.
pub fn windows(ctx: &Ctx, findings: &mut Vec<Finding>) -> Windows {
    let mut w = Windows {
        warmup: ctx.model.warmup.as_ref().and_then(|p| p.server_window_ns),
        profiling: ctx.model.profiling.server_window_ns,
        ..Default::default()
    };
    let (Some((_, we)), Some((ps, _))) = (w.warmup, w.profiling) else {
        return w;
    };
    w.overlap_ms = Some((we as f64 - ps as f64) / 1e6);
    let Some(records) = ctx.records() else {
        return w;
    };
    if we <= ps {
        return w;
    }
    // One walk over the records for all four counts.
    let (mut started, mut first, mut finished, mut warm_late) = (0u64, 0u64, 0u64, 0u64);
    for r in records {
        match r.phase {
            Phase::Profiling => {
                started += u64::from(r.request_start_ns < we);
                first += u64::from(r.first_token_ns().unwrap_or(r.request_end_ns) < we);
                finished += u64::from(r.request_end_ns < we);
            }
            Phase::Warmup => warm_late += u64::from(r.request_end_ns > ps),
        }
    }
    w.profiling_started_before_warmup_closed = Some(started);
    w.profiling_first_token_before_warmup_closed = Some(first);
    w.profiling_finished_before_warmup_closed = Some(finished);
    w.warmup_finished_after_profiling_started = Some(warm_late);
    for (n, kind) in [
        (started, ObservedAt::Arrival),
        (first, ObservedAt::FirstToken),
        (finished, ObservedAt::Completion),
    ] {
        if n > 0 {
            w.at_risk.push(kind);
        }
    }
    if warm_late > 0 && !w.at_risk.contains(&ObservedAt::Completion) {
        w.at_risk.push(ObservedAt::Completion);
    }
    findings.push(overlap_finding(&w, ps, we));
    w
}

/// The warmup window closing `we` after profiling started at `ps`, with
/// the requests it caught.
fn overlap_finding(w: &Windows, ps: u64, we: u64) -> Finding {
    let n = |x: Option<u64>| x.unwrap_or(0);
    let (started, first, finished, warm_late) = (
        n(w.profiling_started_before_warmup_closed),
        n(w.profiling_first_token_before_warmup_closed),
        n(w.profiling_finished_before_warmup_closed),
        n(w.warmup_finished_after_profiling_started),
    );
    let overlap = (we - ps) as f64 / 1e6;
    let risk = if w.at_risk.is_empty() {
        "no request-scoped observation is at risk".to_string()
    } else {
        let kinds: Vec<&str> = w.at_risk.iter().map(|k| k.as_str()).collect();
        format!("metrics observed at {} are at risk", kinds.join(", "))
    };
    Finding::new(
        PHASE_WINDOW_OVERLAP,
        format!(
            "the warmup window closes {overlap:.1} ms after profiling starts: {started} \
             profiling request(s) started, {first} had their first token and {finished} \
             finished before it closed, and {warm_late} warmup request(s) finished after \
             profiling started; {risk}"
        ),
    )
    .file(server_metrics::FILE)
    .field("summary.phase_time_ranges")
    .expected_found(
        serde_json::json!({"warmup.end_ns <=": ps}),
        serde_json::json!({"warmup.end_ns": we}),
    )
    .effect("overlap", overlap, Unit::Ms)
    .effect(
        "profiling_started_before_close",
        started as f64,
        Unit::Count,
    )
    .effect(
        "profiling_finished_before_close",
        finished as f64,
        Unit::Count,
    )
}

/// Counters whose profiling timeslices start before profiling did.
pub fn counter_windows(
    ctx: &Ctx,
    server: &server_metrics::ServerMetricsExport,
    out: &mut Vec<Finding>,
) {
    let Some((ps, _)) = ctx.model.profiling.server_window_ns else {
        return;
    };
    const SLACK_NS: u64 = 1_000_000_000;
    for (name, fam) in &server.metrics {
        if fam.kind != MetricType::Counter {
            continue;
        }
        for s in &fam.series {
            let Some(first) = s
                .timeslices
                .as_ref()
                .and_then(|t| t.first())
                .and_then(|t| t.start_ns)
            else {
                continue;
            };
            if first + SLACK_NS < ps {
                let early = (ps - first) as f64 / 1e9;
                let jump = s
                    .timeslices
                    .as_ref()
                    .and_then(|t| t.first())
                    .and_then(|t| t.total);
                out.push(
                    Finding::new(
                        COUNTER_WINDOW_EARLY,
                        format!(
                            "{name} on {}: its profiling timeslices start {early:.1} s before \
                             profiling started{}: the profiling delta includes pre-profiling \
                             (warmup) increments, as with a wrongly tagged baseline scrape",
                            s.endpoint_url.as_deref().unwrap_or("?"),
                            jump.map(|j| format!(" (first slice +{j})"))
                                .unwrap_or_default()
                        ),
                    )
                    .file(server_metrics::FILE)
                    .field(format!(
                        "metrics[\"{name}\"].series[].timeslices[0].start_ns"
                    ))
                    .expected_found(ps, first)
                    .effect("early", early, Unit::S),
                );
            }
        }
    }
}

/// The advisory for AIPerf versions whose end-of-warmup scrape has no flush
/// barrier.
pub fn advisory(ctx: &Ctx, out: &mut Vec<Finding>) {
    let Some(v) = ctx.model.aiperf_version.as_deref() else {
        return;
    };
    if (v.starts_with("0.12.") || v.starts_with("0.13.")) && ctx.model.warmup.is_some() {
        out.push(
            Finding::new(
                AIPERF_VERSION_ADVISORY,
                format!(
                    "AIPerf {v} takes the end-of-warmup scrape immediately, with no flush \
                     barrier before profiling starts, so server observations can cross the \
                     warmup/profiling boundary. To re-run safely: run warmup as a separate \
                     invocation, wait for the server's metrics to settle, then profile without \
                     --warmup-request-count; or export the raw scrapes \
                     (--server-metrics-formats json jsonl) so the split can be repaired"
                ),
            )
            .file(crate::artifacts::summary::FILE)
            .field("aiperf_version"),
        );
    }
}
