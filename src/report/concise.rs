//! The default output, in the manner of ruff and clippy: one line per
//! finding, most severe first (`RUN: FILE[:LINE]: severity[code] message
//! [effect]`), a verdict line per run, and a closing summary with the
//! counts per code. `-q` keeps only the findings at or above the fail level
//! and the closing line; `--statistics` only the counts per code.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::Options;
use crate::findings::{Finding, Severity};
use crate::results::{Report, RunReport, RunStatus};
use crate::text::escape::visible;
use crate::text::labels_with;

/// One finding on one line.
fn line(run: &RunReport, f: &Finding) -> String {
    let mut at = visible(&run.path).into_owned();
    if let Some(loc) = f.location() {
        at.push_str(": ");
        at.push_str(&visible(&loc));
    }
    let mut text = format!(
        "{at}: {}[{}] {}",
        f.severity.as_str(),
        f.code.as_str(),
        visible(&f.message)
    );
    // The message names the metric; the series, when one is singled out.
    if let Some(s) = f.series.as_ref().filter(|s| !s.is_empty()) {
        text.push_str(&format!(" (series {})", labels_with(s, visible)));
    }
    // Effects worth showing: never one that rounds to zero.
    let effects: Vec<String> = f
        .effect
        .iter()
        .map(|e| (e, number(e.value)))
        .filter(|(_, n)| n != "+0" && n != "-0")
        .map(|(e, n)| format!("{} {n} {}", e.quantity, e.unit))
        .collect();
    if !effects.is_empty() {
        text.push_str(&format!(" [{}]", effects.join(", ")));
    }
    text
}

/// A signed number with as many digits as it needs (at most 4 decimals).
fn number(v: f64) -> String {
    let s = format!("{v:+.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// The findings of a run, most severe first (stable within a severity).
fn ranked(run: &RunReport) -> Vec<&Finding> {
    let mut v: Vec<&Finding> = run.findings.iter().collect();
    v.sort_by_key(|f| std::cmp::Reverse(f.severity));
    v
}

/// Writes the concise report.
pub fn render(report: &Report, opts: Options, out: &mut dyn Write) -> io::Result<()> {
    let fail_on = report.summary.fail_on;
    if !opts.statistics {
        for run in &report.runs {
            for f in ranked(run) {
                if !opts.quiet || f.severity >= fail_on {
                    writeln!(out, "{}", line(run, f))?;
                }
            }
            if !opts.quiet {
                let verdict = match run.status {
                    RunStatus::Error => "ERROR (the run could not be read)".to_string(),
                    s => s.as_str().to_uppercase(),
                };
                let silenced = match run.suppressed.len() {
                    0 => String::new(),
                    n => format!(", {n} suppressed"),
                };
                writeln!(
                    out,
                    "{}: {verdict} ({} error, {} warning, {} info{silenced})",
                    visible(&run.path),
                    run.count(Severity::Error),
                    run.count(Severity::Warning),
                    run.count(Severity::Info)
                )?;
            }
        }
        for e in &report.errors {
            writeln!(out, "{}: error: {}", visible(&e.path), visible(&e.message))?;
        }
    }
    if !opts.quiet || opts.statistics {
        // Counts per code over all runs, worst severity first, then most
        // frequent.
        let mut by_code: BTreeMap<(std::cmp::Reverse<Severity>, &str), usize> = BTreeMap::new();
        for f in report.runs.iter().flat_map(|r| &r.findings) {
            *by_code
                .entry((std::cmp::Reverse(f.severity), f.code.as_str()))
                .or_default() += 1;
        }
        let mut rows: Vec<_> = by_code.into_iter().collect();
        rows.sort_by_key(|((sev, _), n)| (*sev, std::cmp::Reverse(*n)));
        for ((sev, code), n) in rows {
            writeln!(out, "{n:>6}  {:<8} {code}", sev.0.as_str())?;
        }
    }
    writeln!(out, "{}", super::closing_line(&report.summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_signed() {
        assert_eq!(number(12.0), "+12");
        assert_eq!(number(-0.125), "-0.125");
        assert_eq!(number(1.23456), "+1.2346");
    }
}
