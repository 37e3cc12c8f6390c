//! The human report: per run, its phases, one line per check, the detail
//! tables of checks that did not pass, the findings, and a verdict line;
//! then one summary line over all runs.

use std::io::{self, Write};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Attribute, Cell, Color, ContentArrangement, Table};

use super::Options;
use crate::findings::{Finding, Severity};
use crate::results::{Report, RunReport};
use crate::text::escape::visible;

fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    // On a terminal, its width; elsewhere (files, pipes, CI logs) 120.
    if !t.is_tty() {
        t.set_width(120);
    }
    t
}

fn status_cell(s: &str, colour: bool) -> Cell {
    let c = Cell::new(s.to_uppercase());
    if !colour {
        return c;
    }
    match s {
        "pass" => c.fg(Color::Green),
        "warn" | "warning" => c.fg(Color::Yellow),
        "fail" | "error" => c.fg(Color::Red).add_attribute(Attribute::Bold),
        _ => c.fg(Color::Grey),
    }
}

/// Above this many runs, one line per run instead of each run's tables.
pub const DETAIL_MAX_RUNS: usize = 10;

/// Writes the table report.
pub fn render(report: &Report, opts: Options, out: &mut dyn Write) -> io::Result<()> {
    if report.runs.len() <= DETAIL_MAX_RUNS {
        for run in &report.runs {
            render_run(run, opts, out)?;
        }
    } else {
        render_compact(report, opts, out)?;
    }
    for e in &report.errors {
        writeln!(out, "error: {}: {}", visible(&e.path), visible(&e.message))?;
    }
    writeln!(out, "{}", super::closing_line(&report.summary))
}

/// Many runs: a line per run, then the worst findings across all runs.
fn render_compact(report: &Report, opts: Options, out: &mut dyn Write) -> io::Result<()> {
    let mut runs = table();
    runs.set_header([
        "run",
        "status",
        "errors",
        "warnings",
        "info",
        "worst finding",
    ]);
    for run in &report.runs {
        let n = |sev: Severity| run.count(sev);
        let worst = run.worst().map(|f| f.code.as_str());
        runs.add_row(vec![
            Cell::new(visible(&run.path)),
            status_cell(run.status.as_str(), opts.colour),
            Cell::new(n(Severity::Error)),
            Cell::new(n(Severity::Warning)),
            Cell::new(n(Severity::Info)),
            Cell::new(worst.unwrap_or("")),
        ]);
    }
    writeln!(out, "{runs}")?;
    // Finding codes by how many runs they hit, worst severity first.
    let mut by_code: std::collections::BTreeMap<(std::cmp::Reverse<Severity>, &str), usize> =
        Default::default();
    for run in &report.runs {
        let codes: std::collections::BTreeSet<_> = run
            .findings
            .iter()
            .map(|f| (std::cmp::Reverse(f.severity), f.code.as_str()))
            .collect();
        for c in codes {
            *by_code.entry(c).or_default() += 1;
        }
    }
    if !by_code.is_empty() {
        let mut worst = table();
        worst.set_header(["severity", "code", "runs"]);
        for ((sev, code), n) in by_code.iter().take(15) {
            worst.add_row(vec![
                status_cell(sev.0.as_str(), opts.colour),
                Cell::new(code),
                Cell::new(n),
            ]);
        }
        writeln!(out, "{worst}")?;
    }
    Ok(())
}

fn render_run(run: &RunReport, opts: Options, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "== {}  (AIPerf {})",
        visible(&run.path),
        visible(run.aiperf_version.as_deref().unwrap_or("version unknown"))
    )?;
    let mut phases = table();
    phases.set_header([
        "phase",
        "configured",
        "records",
        "successful",
        "errors",
        "cancelled",
    ]);
    for (kind, p) in &run.phases {
        let n = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "n/a".into());
        phases.add_row([
            kind.to_string(),
            p.configured_requests
                .map(|c| c.to_string())
                .or(p.configured_duration_s.map(|d| format!("{d} s")))
                .unwrap_or_else(|| "n/a".into()),
            n(p.records),
            n(p.successful),
            n(p.errors),
            n(p.cancelled),
        ]);
    }
    writeln!(out, "{phases}")?;

    let mut checks = table();
    checks.set_header(["check", "status", "summary"]);
    for c in run.checks.iter() {
        checks.add_row(vec![
            Cell::new(c.name),
            status_cell(c.status.as_str(), opts.colour),
            Cell::new(visible(&c.summary())),
        ]);
    }
    writeln!(out, "{checks}")?;
    for c in run.checks.iter() {
        for d in c.details() {
            let mut t = table();
            t.set_header(d.header.iter().map(|h| visible(h).into_owned()));
            for row in d.rows {
                t.add_row(row.iter().map(|c| visible(c).into_owned()));
            }
            writeln!(out, "{t}")?;
        }
    }
    if !run.findings.is_empty() {
        writeln!(out, "{}", findings_table(&run.findings, opts))?;
    }
    writeln!(
        out,
        "verdict: {}: {}\n",
        visible(&run.path),
        super::verdict(run)
    )
}

fn findings_table(findings: &[Finding], opts: Options) -> Table {
    let mut t = table();
    t.set_header(["severity", "code", "where", "finding"]);
    for f in findings {
        let mut loc = visible(&f.location().unwrap_or_default()).into_owned();
        if let Some(m) = &f.metric {
            loc.push_str(&format!("\n{}", visible(m)));
            if let Some(s) = f.series.as_ref().filter(|s| !s.is_empty()) {
                loc.push_str(&crate::text::labels_with(s, visible));
            }
        }
        let mut msg = visible(&f.message).into_owned();
        if f.effect.iter().any(|e| e.value != 0.0) {
            let e: Vec<String> = f
                .effect
                .iter()
                .filter(|e| e.value != 0.0)
                .map(|e| format!("{} {:+.4} {}", e.quantity, e.value, e.unit))
                .collect();
            msg.push_str(&format!(" [{}]", e.join(", ")));
        }
        t.add_row(vec![
            status_cell(f.severity.as_str(), opts.colour),
            Cell::new(f.code.as_str()),
            Cell::new(loc),
            Cell::new(msg),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_report_has_a_summary_line() {
        let report = crate::audit(&[], &crate::config::Settings::default(), &[]);
        let mut out = Vec::new();
        render(&report, Options::default(), &mut out).expect("render");
        let text = String::from_utf8(out).expect("utf8");
        assert!(text.starts_with("0 run(s): 0 passed"));
    }
}
