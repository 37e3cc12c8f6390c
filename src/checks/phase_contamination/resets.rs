//! Resets: a cumulative series that goes down, in the export (buckets
//! dropped) and in the raw scrapes ([`crate::model::resets`] finds them),
//! with the reset-aware growth over the profiling window.

use std::collections::BTreeMap;

use super::{Classification, MetricRow, COUNTER_RESET, SERIES_CREATED_MID_PHASE};
use crate::artifacts::records::Phase;
use crate::artifacts::scrapes::{self, ScrapesRead};
use crate::artifacts::server_metrics::{self, MetricType, ServerMetricsExport};
use crate::findings::Moved;
use crate::findings::{Finding, Severity, Unit};
use crate::frameworks::{canonical, PROMPT_TOKEN_COUNTERS, REQUEST_SCOPED};
use crate::model::resets::{self as model_resets, Birth, Reset};

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
                    let ep = s.endpoint_url.as_deref().unwrap_or("?");
                    out.push(
                        Finding::new(
                            COUNTER_RESET,
                            format!(
                                "{section}[\"{name}\"] on {ep} has a count but no buckets: AIPerf \
                                 drops the buckets when a bucket delta is negative, i.e. the \
                                 histogram was reset during the phase; its count and sum are \
                                 clamped and untrustworthy"
                            ),
                        )
                        .file(server_metrics::FILE)
                        .field(format!("{section}[\"{name}\"].series[].buckets"))
                        .metric(name.clone())
                        .endpoint(ep)
                        .series(s.labels.clone()),
                    );
                }
            }
        }
    }
}

/// The family a reset finding names: a prompt-token counter, else a
/// request-scoped family, else the first that fell.
fn headline(r: &Reset) -> &str {
    let prompt = |f: &str| {
        PROMPT_TOKEN_COUNTERS
            .iter()
            .any(|m| canonical(m) == canonical(f))
    };
    let scoped = |f: &str| REQUEST_SCOPED.iter().any(|m| m.name == canonical(f));
    let mut fams: Vec<&str> = r.families().into_iter().collect();
    fams.sort_by_key(|f| (!prompt(f), !scoped(f), *f));
    fams.first().copied().unwrap_or_default()
}

/// The reset-aware growth of `name` on the reset's endpoint over profiling,
/// beside the export's clamped total: the text and the effects.
fn growth_note(
    r: &Reset,
    read: &ScrapesRead,
    server: &ServerMetricsExport,
    name: &str,
    w: server_metrics::Window,
) -> (String, Vec<(&'static str, f64)>) {
    let Some(g) = model_resets::growth(read, &r.endpoint, name, w) else {
        return (String::new(), Vec::new());
    };
    let exported = server_metrics::lookup(&server.metrics, name).map(|(_, fam)| {
        fam.series
            .iter()
            .filter(|s| s.endpoint_url.as_deref() == Some(r.endpoint.as_str()))
            .filter_map(|s| s.observations(fam.kind))
            .sum::<f64>()
    });
    let shown = exported
        .map(|x| x.to_string())
        .unwrap_or_else(|| "nothing".into());
    let text = format!(
        ": over profiling the export has {shown} for {name} on this endpoint; read reset-aware \
         (the increments before the reset plus the value after it) it grew by at least {g}"
    );
    let mut effects = vec![("profiling_growth_lower_bound", g)];
    effects.extend(exported.map(|x| ("profiling_total_exported", x)));
    (text, effects)
}

/// One finding per reset: an error when it falls in the profiling window,
/// a warning in warmup, info outside both.
pub fn findings(
    resets: &[Reset],
    read: &ScrapesRead,
    server: &ServerMetricsExport,
    out: &mut Vec<Finding>,
) {
    let profiling = server.window("profiling");
    let warmup = server.window("warmup");
    for r in resets {
        let severity = if !r.confirmed {
            Severity::Warning
        } else if profiling.is_some_and(|w| r.within(w)) {
            Severity::Error
        } else if warmup.is_some_and(|w| r.within(w)) {
            Severity::Warning
        } else {
            Severity::Info
        };
        let families = r.families();
        let name = headline(r);
        let Some(d) = r.drops.iter().find(|d| d.family == name) else {
            continue;
        };
        let cause = match (r.restart, r.confirmed) {
            (Some((a, b)), _) => {
                format!("the server restarted (process_start_time_seconds {a} -> {b})")
            }
            (None, true) => "the series were reset (the drop persists in the later scrapes)".into(),
            (None, false) => format!(
                "{name} went down without evidence of a reset (the process start time did not \
                 change and the drop does not persist: a stale answer, or a reset followed by \
                 fast growth; cannot tell)"
            ),
        };
        let mut msg = format!(
            "{cause} on {} between line {} and line {} of {}: {} counter/histogram famil{} \
             fell together, {name} from {} to {}. AIPerf clamps a negative delta at 0, so its \
             totals over a window holding the reset are too small",
            r.endpoint,
            r.lines.0,
            r.lines.1,
            scrapes::FILE,
            families.len(),
            if families.len() == 1 { "y" } else { "ies" },
            d.before,
            d.after,
        );
        let mut f = Finding::new(COUNTER_RESET, String::new())
            .file(scrapes::FILE)
            .line(r.lines.1)
            .metric(name)
            .endpoint(r.endpoint.clone())
            .series(d.labels.clone())
            .expected_found(format!(">= {}", d.before), d.after)
            .effect("families_reset", families.len() as f64, Unit::Count);
        if let Some(w) = profiling.filter(|_| severity == Severity::Error && r.confirmed) {
            let (text, growth) = growth_note(r, read, server, name, w);
            msg.push_str(&text);
            for (quantity, value) in growth {
                f = f.effect(quantity, value, Unit::Value);
            }
        }
        msg.push('.');
        f.message = msg;
        f = f.severity(severity);
        out.push(f);
    }
}

/// One finding per (endpoint, family, phase) of series born inside a phase:
/// an error in profiling, a warning in warmup. Series born outside both
/// windows cost no phase anything.
pub fn birth_findings(births: &[Birth], server: &ServerMetricsExport, out: &mut Vec<Finding>) {
    let windows = [
        (
            "profiling",
            "metrics",
            server.window("profiling"),
            Severity::Error,
        ),
        (
            "warmup",
            "warmup_metrics",
            server.window("warmup"),
            Severity::Warning,
        ),
    ];
    let mut groups: BTreeMap<(&str, &str, usize), Vec<&Birth>> = BTreeMap::new();
    for b in births {
        if let Some(i) = windows
            .iter()
            .position(|w| w.2.is_some_and(|w| b.within(w)))
        {
            groups
                .entry((b.endpoint.as_str(), b.family.as_str(), i))
                .or_default()
                .push(b);
        }
    }
    for ((ep, family, i), bs) in groups {
        let (phase, section, _, severity) = windows[i];
        let lost: f64 = bs.iter().map(|b| b.first_value).sum();
        let first = bs[0];
        let exported = server
            .phase(section == "warmup_metrics")
            .and_then(|fams| server_metrics::lookup(fams, family))
            .map(|(_, fam)| {
                fam.series
                    .iter()
                    .filter(|s| s.endpoint_url.as_deref() == Some(ep))
                    .filter_map(|s| s.observations(fam.kind))
                    .sum::<f64>()
            });
        let total = exported
            .map(|x| {
                format!(
                    "; the export's {phase} total {x} should be at least {}",
                    x + lost
                )
            })
            .unwrap_or_default();
        let series = if bs.len() == 1 {
            format!("the series {}", crate::text::labels(&first.labels))
        } else {
            format!("{} series", bs.len())
        };
        let mut f = Finding::new(
            SERIES_CREATED_MID_PHASE,
            format!(
                "{family} on {ep}: {series} first appear(s) in the raw scrapes during {phase} \
                 (absent at line {}, present at line {} of {}): a labelled series exists only \
                 from its first observation on, and AIPerf takes a new series' first value as \
                 its baseline, so the {phase} delta misses the {lost} that created it{total}",
                first.lines.0,
                first.lines.1,
                scrapes::FILE,
            ),
        )
        .file(scrapes::FILE)
        .line(first.lines.1)
        .metric(family)
        .endpoint(ep)
        .effect("lost", lost, Unit::Value);
        if bs.len() == 1 {
            f = f.series(first.labels.clone());
        }
        f = f.severity(severity);
        out.push(f);
    }
}

/// What a reset or a series born mid-phase moves: on its endpoint, every
/// profiling row it explains (a reset: every family's rows the accounting
/// gave the `reset` cause; a birth: its family's rows), with the row's
/// count and sum and their corrected values or bounds. A row summed over
/// several endpoints is left to the finding of its observer.
pub fn moves(rows: &[MetricRow], findings: &mut [Finding]) {
    for f in findings.iter_mut() {
        let cause = if f.code == COUNTER_RESET && f.severity == Severity::Error {
            Classification::Reset
        } else if f.code == SERIES_CREATED_MID_PHASE && f.severity == Severity::Error {
            Classification::SeriesCreatedMidPhase
        } else {
            continue;
        };
        let Some(ep) = f.endpoint.clone() else {
            continue;
        };
        let explained = rows.iter().filter(|r| {
            r.phase == Phase::Profiling
                && r.endpoint == ep
                && (cause == Classification::Reset || f.metric.as_deref() == Some(&r.metric))
                && r.causes.iter().any(|c| c.cause == cause && c.count != 0)
        });
        let mut moved = Vec::new();
        for r in explained {
            let c = r.corrected.as_ref();
            let series = Some(crate::text::labels(&r.series));
            let as_f = |x: Option<u64>| x.map(|x| x as f64);
            moved.push(
                Moved::new(
                    r.metric.clone(),
                    "count",
                    r.found_count,
                    c.map(|c| c.count as f64),
                )
                .expected(r.expected_count.map(|e| e.min as f64))
                .bounds(
                    as_f(c.and_then(|c| c.count_low)),
                    as_f(c.and_then(|c| c.count_high)),
                )
                .server("profiling", Some(ep.clone()), series.clone()),
            );
            if r.found_sum.is_some() {
                moved.push(
                    Moved::new(r.metric.clone(), "sum", r.found_sum, c.and_then(|c| c.sum))
                        .expected(None)
                        .bounds(c.and_then(|c| c.sum_low), c.and_then(|c| c.sum_high))
                        .server("profiling", Some(ep.clone()), series),
                );
            }
        }
        f.metrics.extend(moved);
    }
}
