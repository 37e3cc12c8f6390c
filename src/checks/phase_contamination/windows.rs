//! The phase windows: how the warmup and profiling windows AIPerf reports
//! sit against each other and against the requests, counters whose
//! timeslices start early, and the advisory for AIPerf versions that take
//! the end-of-warmup scrape without a flush barrier.

use super::{Windows, AIPERF_VERSION_ADVISORY, COUNTER_WINDOW_EARLY, PHASE_WINDOW_OVERLAP};
use crate::artifacts::records::Phase;
use crate::artifacts::server_metrics::{self, MetricType};
use crate::checks::Ctx;
use crate::findings::{Finding, Severity, Unit};
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
        (started, ObservedAt::Scheduled),
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
    let mut f = overlap_finding(&w, ps, we);
    if w.at_risk.is_empty() {
        // No request event fell in the overlap: nothing can have crossed.
        f = f.harmless("");
    }
    findings.push(f);
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

/// The overlap finding, once the counts are known: info when every
/// request-scoped count of every observer splits exactly (the overlap was
/// verified harmless), a warning otherwise (the findings of the metrics it
/// touched say what it did).
pub fn settle_overlap(rows: &[super::MetricRow], findings: &mut [Finding]) {
    // Nothing crossed the boundary: every row's causes (if any) are what
    // the server saw of requests without success, never a boundary cause.
    let crossed = |r: &super::MetricRow| {
        r.causes
            .iter()
            .any(|c| c.count != 0 && super::compare::contaminates(c.cause))
    };
    let exact = !rows.is_empty() && !rows.iter().any(crossed);
    if !exact {
        return;
    }
    let all_ok = rows
        .iter()
        .all(|r| r.classification == super::Classification::Ok);
    for f in findings
        .iter_mut()
        .filter(|f| f.code == PHASE_WINDOW_OVERLAP)
    {
        f.settle_harmless(if all_ok {
            "every request-scoped count of every observer splits exactly, so nothing was \
             miscounted"
        } else {
            "every request-scoped count of every observer is accounted for without an \
             observation crossing the boundary, so nothing was miscounted"
        });
    }
}

/// Counters whose profiling timeslices start before profiling did. No fixed
/// slack: the question is whether anything the warmup did falls between
/// the first timeslice and profiling's start. When warmup requests were in
/// flight there, the profiling delta holds their increments (an error);
/// when none was, the early start is verified harmless (info). Without
/// records it cannot be verified (a warning).
pub fn counter_windows(
    ctx: &Ctx,
    server: &server_metrics::ServerMetricsExport,
    out: &mut Vec<Finding>,
) {
    let Some((ps, _)) = ctx.model.profiling.server_window_ns else {
        return;
    };
    for (name, fam) in &server.metrics {
        if fam.kind != MetricType::Counter {
            continue;
        }
        for s in &fam.series {
            let first_slice = s.timeslices.as_ref().and_then(|t| t.first());
            let Some(first) = first_slice.and_then(|t| t.start_ns).filter(|f| *f < ps) else {
                continue;
            };
            let early = (ps - first) as f64 / 1e9;
            let jump = first_slice.and_then(|t| t.total);
            // Warmup requests in flight between the first slice and profiling.
            let active = ctx.records().map(|rs| {
                rs.iter()
                    .filter(|r| r.phase == Phase::Warmup)
                    .filter(|r| r.request_end_ns > first && r.request_start_ns < ps)
                    .count()
            });
            let ep = s.endpoint_url.as_deref().unwrap_or("?");
            let (severity, verdict) = match active {
                Some(0) => (
                    Severity::Info,
                    "no warmup request was in flight between them, so nothing was absorbed"
                        .to_string(),
                ),
                Some(n) => (
                    Severity::Error,
                    format!(
                        "{n} warmup request(s) were in flight between them, so the profiling \
                         delta includes their increments, as with a wrongly tagged baseline scrape"
                    ),
                ),
                None => (
                    Severity::Warning,
                    "without records it cannot be told whether warmup traffic fell between them"
                        .to_string(),
                ),
            };
            let mut f = Finding::new(
                COUNTER_WINDOW_EARLY,
                format!(
                    "{name} on {ep}: its profiling timeslices start {early:.3} s before profiling \
                     started{}: {verdict}",
                    jump.map(|j| format!(" (first slice +{j})"))
                        .unwrap_or_default()
                ),
            )
            .file(server_metrics::FILE)
            .field(format!(
                "metrics[\"{name}\"].series[].timeslices[0].start_ns"
            ))
            .metric(name.clone())
            .endpoint(ep)
            .series(s.labels.clone())
            .expected_found(ps, first)
            .effect("early", early, Unit::S);
            if let Some(n) = active {
                f = f.effect("warmup_requests_in_window", n as f64, Unit::Count);
            }
            f = f.severity(severity);
            out.push(f);
        }
    }
}

/// The advisory for AIPerf versions whose phase split is known to leak:
/// 0.12 and 0.13 take the end-of-warmup scrape with no flush barrier;
/// before 0.12 there is no warmup split at all. It also says what the
/// version does not record, so no check's silence reads as a clean bill.
pub fn advisory(ctx: &Ctx, out: &mut Vec<Finding>) {
    let Some(v) = ctx.model.aiperf_version.as_deref() else {
        return;
    };
    let layout = ctx.model.layout;
    let mut text =
        if (v.starts_with("0.12.") || v.starts_with("0.13.")) && ctx.model.warmup.is_some() {
            format!(
                "AIPerf {v} takes the end-of-warmup scrape immediately, with no flush \
             barrier before profiling starts, so server observations can cross the \
             warmup/profiling boundary. To re-run safely: run warmup as a separate \
             invocation, wait for the server's metrics to settle, then profile without \
             --warmup-request-count; or export the raw scrapes \
             (--server-metrics-formats json jsonl) so the split can be repaired"
            )
        } else if !layout.server_phase_split && ctx.model.warmup.is_some() {
            let n = ctx
                .model
                .warmup
                .as_ref()
                .and_then(|w| w.configured_requests)
                .map(|n| format!("up to all {n} configured warmup requests"))
                .unwrap_or_else(|| "any of the warmup's requests".into());
            format!(
                "AIPerf {v} has no warmup split: server_metrics_export.json's profiling delta \
             starts at the last periodic scrape before profiling started, so the warmup \
             observations published after that scrape ({n}) are counted in profiling even \
             when the server is clean. Re-run with AIPerf 0.12 or later, or export the raw \
             scrapes (--server-metrics-formats json jsonl) so the split can be repaired"
            )
        } else {
            String::new()
        };
    let mut missing = Vec::new();
    if !layout.warmup_records {
        missing.push("warmup records (profile_export.jsonl holds profiling only)");
    }
    if !layout.cached_tokens {
        missing.push("cached prompt tokens (usage_prompt_cache_read_tokens, from 0.9.0 on)");
    }
    if !missing.is_empty() {
        if !text.is_empty() {
            text.push_str(". ");
        }
        text.push_str(&format!(
            "AIPerf {v} does not write {}: the checks that need them say so instead of \
             counting them as missing",
            missing.join(" or ")
        ));
    }
    if text.is_empty() {
        return;
    }
    out.push(
        Finding::new(AIPERF_VERSION_ADVISORY, text)
            .file(crate::artifacts::summary::FILE)
            .holds_for_version()
            .field("aiperf_version"),
    );
}
