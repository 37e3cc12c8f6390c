//! HTML: one self-contained page (inline CSS, inline SVG, a few lines of
//! script; no network, no server) with the verdict, the published numbers
//! that are not trusted (with what to publish instead) first, then the root
//! causes, folded, most severe first, each linking to its run and metric,
//! and per run its timeline,
//! its TTFT and latency distributions and its hit rates. The page is a
//! minijinja template (`report.html.j2`, HTML auto-escaping on) over view
//! structs computed here; every string from the input also goes through
//! [`crate::text::escape::visible`].

mod dist;
mod timeline;

use std::io::{self, Write};

use minijinja::{AutoEscape, Environment};
use serde::Serialize;

use crate::findings::{Finding, Severity};
use crate::results::published::Verdict;
use crate::results::{HitRate, HitSource, Report, RunReport};

const TEMPLATE: &str = include_str!("report.html.j2");

/// Text from the input, control and bidi characters made visible (the
/// template escapes HTML).
fn text(s: &str) -> String {
    crate::text::escape::visible(s).into_owned()
}

/// The anchor of a metric's intervals on an endpoint in a run.
fn metric_anchor(run: &str, metric: &str, endpoint: &str) -> String {
    let slug: String = format!("{metric}-{endpoint}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{run}-m-{slug}")
}

#[derive(Serialize)]
struct FindingView {
    run: String,
    run_anchor: String,
    severity: &'static str,
    code: &'static str,
    at: String,
    message: String,
    effect: String,
    metric_anchor: Option<String>,
}

#[derive(Serialize)]
struct CheckView {
    name: &'static str,
    status: String,
    summary: String,
}

#[derive(Serialize)]
struct HitRow {
    label: String,
    rate_pct: f64,
    gap_pp: Option<f64>,
    width: f64,
}

#[derive(Serialize)]
struct RunView {
    anchor: String,
    path: String,
    status: String,
    aiperf: String,
    errors: usize,
    warnings: usize,
    infos: usize,
    /// The silenced findings: `code (rule: reason)`.
    suppressed: Vec<String>,
    checks: Vec<CheckView>,
    timeline: Option<timeline::TimelineView>,
    dists: Vec<dist::DistView>,
    hit_rates: Vec<HitRow>,
}

/// A group of a run's published numbers with one verdict, or the count of
/// its trusted ones.
#[derive(Serialize)]
struct NumberRow {
    run: String,
    run_anchor: String,
    verdict: String,
    subject: String,
    items: String,
    why: String,
}

#[derive(Serialize)]
struct Page {
    tool_version: &'static str,
    closing_line: String,
    exit_code: i32,
    failed: bool,
    numbers: Vec<NumberRow>,
    findings: Vec<FindingView>,
    runs: Vec<RunView>,
    errors: Vec<String>,
}

fn finding_view(i: usize, run: &RunReport, f: &Finding, metrics: &[String]) -> FindingView {
    let run_anchor = format!("run-{i}");
    let anchor = match (&f.metric, &f.endpoint) {
        (Some(m), Some(e)) => Some(metric_anchor(&run_anchor, m, e)),
        _ => None,
    }
    .filter(|a| metrics.contains(a));
    let at = f.location().unwrap_or_default();
    let effect = f
        .effect
        .iter()
        .filter(|e| e.value.is_finite() && e.value != 0.0)
        .map(|e| format!("{} {:+.4} {}", e.quantity, e.value, e.unit.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    FindingView {
        run: text(&run.path),
        run_anchor,
        severity: f.severity.as_str(),
        code: f.code.as_str(),
        at: text(&at),
        message: text(&f.message),
        effect,
        metric_anchor: anchor,
    }
}

/// Client and server hit rates, with the server's gap to the clients.
fn hit_rates(run: &RunReport) -> Vec<HitRow> {
    let rates: Vec<HitRate> = run
        .checks
        .iter()
        .flat_map(|c| c.report.hit_rates())
        .collect();
    let client = rates.iter().find_map(|h| match h.source {
        HitSource::Clients { .. } => Some(h.rate),
        HitSource::Server { .. } => None,
    });
    rates
        .iter()
        .map(|h| match &h.source {
            HitSource::Clients { records } => HitRow {
                label: format!("clients ({records} records)"),
                rate_pct: h.rate * 100.0,
                gap_pp: None,
                width: h.rate * 300.0,
            },
            HitSource::Server { formula, endpoints } => HitRow {
                label: text(&format!("{formula} on {}", endpoints.join(", "))),
                rate_pct: h.rate * 100.0,
                gap_pp: client.map(|c| (h.rate - c) * 100.0),
                width: h.rate.clamp(0.0, 1.0) * 300.0,
            },
        })
        .collect()
}

fn run_view(i: usize, run: &RunReport) -> RunView {
    let anchor = format!("run-{i}");
    let timeline = run
        .timeline
        .as_ref()
        .and_then(|t| timeline::view(t, &anchor));
    RunView {
        path: text(&run.path),
        status: format!("{:?}", run.status).to_lowercase(),
        aiperf: text(run.aiperf_version.as_deref().unwrap_or("?")),
        errors: run.count(Severity::Error),
        warnings: run.count(Severity::Warning),
        infos: run.count(Severity::Info),
        suppressed: run
            .suppressed
            .iter()
            .map(|s| {
                text(&format!(
                    "{} ({}: {})",
                    s.finding.code.as_str(),
                    s.rule.as_str(),
                    s.reason
                ))
            })
            .collect(),
        checks: run
            .checks
            .iter()
            .map(|c| CheckView {
                name: c.name,
                status: format!("{:?}", c.status).to_lowercase(),
                summary: text(&c.summary()),
            })
            .collect(),
        dists: run
            .timeline
            .as_ref()
            .map_or_else(Vec::new, |t| dist::views(t)),
        hit_rates: hit_rates(run),
        timeline,
        anchor,
    }
}

/// Writes the page.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let runs: Vec<RunView> = report
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| run_view(i, r))
        .collect();
    let mut findings: Vec<(Severity, usize, FindingView)> = Vec::new();
    for (i, (run, view)) in report.runs.iter().zip(&runs).enumerate() {
        let metrics: Vec<String> = view
            .timeline
            .as_ref()
            .map_or_else(Vec::new, |t| t.metric_anchors());
        for f in &run.findings {
            findings.push((f.severity, i, finding_view(i, run, f, &metrics)));
        }
    }
    // Most severe first; within a severity, in run order.
    findings.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut numbers = Vec::new();
    for (i, run) in report.runs.iter().enumerate() {
        let row = |verdict: &str, subject: String, items: String, why: String| NumberRow {
            run: text(&run.path),
            run_anchor: format!("run-{i}"),
            verdict: verdict.to_string(),
            subject: text(&subject),
            items: text(&items),
            why: text(&why),
        };
        for g in super::numbers::untrusted(run) {
            numbers.push(row(
                g.verdict.as_str(),
                g.subject.clone(),
                g.items_text().join(", "),
                g.why.clone(),
            ));
        }
        if !run.published.is_empty() {
            let trusted = super::numbers::count(run, Verdict::Trusted);
            numbers.push(row(
                "trusted",
                format!("{trusted} of {}", run.published.len()),
                "checked and trusted".into(),
                String::new(),
            ));
        }
    }
    let page = Page {
        tool_version: env!("CARGO_PKG_VERSION"),
        closing_line: super::closing_line(&report.summary),
        exit_code: report.summary.exit.code(),
        failed: report.summary.exit != crate::results::ExitStatus::Ok,
        numbers,
        findings: findings.into_iter().map(|f| f.2).collect(),
        runs,
        errors: report
            .errors
            .iter()
            .map(|e| text(&format!("{}: {}", e.path, e.message)))
            .collect(),
    };
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.add_template("report.html", TEMPLATE)
        .map_err(io::Error::other)?;
    let html = env
        .get_template("report.html")
        .and_then(|t| t.render(minijinja::value::Serde(&page)))
        .map_err(io::Error::other)?;
    out.write_all(html.as_bytes())
}
